"""Which point of the trade-off curve a plan executes (``aims.objective``: pending-only, balanced, max-free).

Apart from the curve (``frontier.py``), which only computes points: the policy reads them, cost against usable freed
GPUs, and picks one; a new objective changes this module alone.
"""

from __future__ import annotations

from collections.abc import Sequence

from compactor.planner.search.frontier import Point


def choose(points: Sequence[Point], objective: str, price: float, base: int) -> Point:
    """The point the policy executes: pending-only (the first), max-free (the last), or balanced.

    balanced: along the lower convex hull of the curve (usable freed GPUs against cost), where each step's
    slope is the true marginal price, step on while a step costs at most ``price`` moves (cost / ``base``)
    per usable GPU it frees. A dear point that a cheaper farther one makes up for is skipped, not stopped at;
    GPUs no shape in use can take buy nothing.
    """
    if objective == "pending-only":
        return points[0]
    if objective == "max-free":
        return points[-1]
    chosen = points[0]
    for point in _lower_hull(_by_usable(points))[1:]:
        if (point.cost - chosen.cost) / base > price * (point.usable_gpus - chosen.usable_gpus) + 1e-9:
            break
        chosen = point
    return chosen


def _by_usable(points: Sequence[Point]) -> list[Point]:
    """The first point, then the points that make more usable GPUs than every cheaper one, by usable GPUs."""
    kept = [points[0]]
    for point in sorted(points[1:], key=lambda p: (p.cost, -p.usable_gpus)):
        if point.usable_gpus > kept[-1].usable_gpus:
            kept.append(point)
    return kept


def _lower_hull(points: Sequence[Point]) -> list[Point]:
    """Andrew's monotone chain, lower half, over points sorted by usable GPUs (costs rising)."""
    hull: list[Point] = []
    for point in points:
        while len(hull) >= 2 and _cross(hull[-2], hull[-1], point) <= 0:
            hull.pop()
        hull.append(point)
    return hull


def _cross(a: Point, b: Point, c: Point) -> float:
    """> 0 when a -> b -> c turns left (convex from below)."""
    return (b.usable_gpus - a.usable_gpus) * (c.cost - a.cost) - (b.cost - a.cost) * (c.usable_gpus - a.usable_gpus)

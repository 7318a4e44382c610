"""The policy that picks the executed point of the trade-off curve (``aims.objective``)."""

from __future__ import annotations

from compactor.planner.search.curve_choice import choose
from compactor.planner.search.frontier import Point

BASE = 100  # move_cost.base: a cost of 100 is one move


def curve(*points: tuple[int, float]) -> list[Point]:
    """Points as (freed GPUs, cost in moves), the first being the pending-only point."""
    return [
        Point(gpus // 8, gpus, round(moves), round(moves * BASE), "OPTIMAL", round(moves * BASE), None)
        for gpus, moves in points
    ]


def test_pending_only_and_max_free_take_the_ends() -> None:
    points = curve((0, 1), (8, 3), (16, 10))
    assert choose(points, "pending-only", 0.5, BASE) is points[0]
    assert choose(points, "max-free", 0.5, BASE) is points[-1]


def test_balanced_frees_nodes_while_each_costs_at_most_the_price() -> None:
    points = curve((0, 1), (8, 3), (16, 10), (24, 22))  # the example cluster: +2, +7, +12 moves per 8 GPUs
    assert choose(points, "balanced", 0.5, BASE) is points[1]
    assert choose(points, "balanced", 0.9, BASE) is points[2]
    assert choose(points, "balanced", 0.1, BASE) is points[0]
    assert choose(points, "balanced", 2.0, BASE) is points[-1]


def test_balanced_looks_past_a_dear_step_when_the_next_one_makes_up_for_it() -> None:
    # 8 GPUs for 5 moves is too dear at 0.5, but 16 GPUs for 7 moves (0.44 per GPU) is not: take the farther point.
    points = curve((0, 0), (8, 5), (16, 7), (24, 20))
    assert choose(points, "balanced", 0.5, BASE) is points[2]

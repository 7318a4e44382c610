"""The plan's trade-off curve on the HTML page: GPUs freed against moves as an inline SVG, each point with its figures,
and the same points as a table.

Apart from the plan's other sections because drawing it is geometry (a viewBox, axes, coordinates) that nothing else on
the page needs.
"""

from __future__ import annotations

from collections.abc import Sequence

from compactor.model.numbers import fmt_moves
from compactor.planner.plan import CompactionPlan, FrontierPoint
from compactor.render.html.page import esc, table
from compactor.render.plan import curve_rows, objective_text

_W, _H, _LEFT, _RIGHT, _TOP, _BOTTOM = 640, 300, 60, 24, 20, 44


def _coordinates(points: Sequence[FrontierPoint]) -> list[tuple[float, float]]:
    max_moves = max(p.moves for p in points) or 1
    low, high = min(0, *(p.freed_gpus for p in points)), max(0, *(p.freed_gpus for p in points))
    span = (high - low) or 1
    return [
        (
            _LEFT + (_W - _LEFT - _RIGHT) * p.moves / max_moves,
            _H - _BOTTOM - (_H - _TOP - _BOTTOM) * (p.freed_gpus - low) / span,
        )
        for p in points
    ]


def curve_svg(points: Sequence[FrontierPoint]) -> str:
    """freedGpus against moves, one dot per point of the curve (a title each), the chosen one big and labelled."""
    if not points:
        return ""
    xy = _coordinates(points)
    max_moves = max(p.moves for p in points)
    low, high = min(0, *(p.freed_gpus for p in points)), max(0, *(p.freed_gpus for p in points))
    x0, y0 = _LEFT, _H - _BOTTOM
    parts = [
        f'<svg class="curve" viewBox="0 0 {_W} {_H}" width="{_W}" height="{_H}" role="img" aria-labelledby="curve-title">',
        '<title id="curve-title">Trade-off curve: GPUs freed (physical) against moves</title>',
        f'<line class="axis" x1="{x0}" y1="{y0}" x2="{_W - _RIGHT}" y2="{y0}"/><line class="axis" x1="{x0}" y1="{_TOP}" x2="{x0}" y2="{y0}"/>',
        f'<text x="{x0}" y="{y0 + 16}" text-anchor="middle">0</text>',
        f'<text x="{_W - _RIGHT}" y="{y0 + 16}" text-anchor="middle">{max_moves}</text>',
        f'<text x="{(x0 + _W - _RIGHT) / 2:.1f}" y="{_H - 8}" text-anchor="middle">moves (evictions)</text>',
        f'<text x="{x0 - 6}" y="{y0 + 4}" text-anchor="end">{low}</text>',
        f'<text x="{x0 - 6}" y="{_TOP + 4}" text-anchor="end">{high}</text>',
        f'<text x="14" y="{(_TOP + y0) / 2:.1f}" text-anchor="middle" transform="rotate(-90 14 {(_TOP + y0) / 2:.1f})">freed GPUs (physical)</text>',
        '<polyline class="line" points="' + " ".join(f"{x:.1f},{y:.1f}" for x, y in xy) + '"/>',
    ]
    for point, (x, y) in zip(points, xy, strict=True):
        tip = (
            f"{point.moves} moves (cost {fmt_moves(point.cost)}), {point.freed_gpus} GPUs freed on {point.freed_nodes} node(s), {point.status}"
            + ("" if point.status == "OPTIMAL" else f" (bound {fmt_moves(point.bound)})")
            + (" - this plan" if point.chosen else "")
        )
        radius, kind = (7, "pt chosen") if point.chosen else (3.5, "pt")
        parts.append(
            f'<circle class="{kind}" cx="{x:.1f}" cy="{y:.1f}" r="{radius}"><title>{esc(tip)}</title></circle>'
        )
        if point.chosen:
            anchor = "end" if x > _W / 2 else "start"
            parts.append(
                f'<text x="{x + (-10 if anchor == "end" else 10):.1f}" y="{y - 8:.1f}" text-anchor="{anchor}">this plan</text>'
            )
    return "".join(parts) + "</svg>"


def curve_section(plan: CompactionPlan) -> str:
    """The curve's heading, picture and points as a folded table; nothing for a plan without a curve."""
    if not plan.frontier:
        return ""
    rows = [
        (label, moves, more, cost, gpus, usable, status + (" (this plan)" if mark else ""))
        for mark, label, moves, more, cost, gpus, usable, status in curve_rows(plan)
    ]
    return "\n".join(
        [
            "<h2>Trade-off curve</h2>",
            f"<p>Objective <b>{esc(plan.objective)}</b>: {esc(objective_text(plan))}. Each dot is the cheapest plan found that frees that many "
            "GPUs; the big one is this plan.</p>",
            curve_svg(plan.frontier),
            "<details><summary>the curve as a table</summary>"
            + table(
                ("point", "moves", "more", "cost", "freed GPUs (physical)", "usable", "status"), rows, (1, 2, 3, 4, 5)
            )
            + "</details>",
        ]
    )

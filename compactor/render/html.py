"""``compactor report -o html`` and ``compactor plan -o html``: one self-contained HTML file to attach to a change ticket.

Inline CSS and inline SVG only: no script, font, image or link to fetch (a Content-Security-Policy tells the browser so
too), so the file reads the same offline, in a ticket system's preview or years later. The occupancy picture draws a
cell per GPU or MIG slice of every GPU node, grouped by pool; a plan adds the picture after it, the trade-off curve, the
moves with their reasons and what stays. Deterministic (no clock: the only time shown is the plan's own) and pure: it
builds a string, writes nothing.
"""

from __future__ import annotations

import html
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from compactor.metrics.advice import Advice
from compactor.metrics.figure_types import AggregateFigures, Figures, NodeFigures
from compactor.metrics.fragmentation import ReferenceShape, compute_figures, reference_shapes
from compactor.model.resources import is_gpu_resource
from compactor.model.types import Snapshot
from compactor.planner.movability import pdbs_by_pod
from compactor.planner.plan import CompactionPlan, FrontierPoint, Move, apply_plan
from compactor.render.plan import _curve_rows, _figure_rows, _objective, _point_quality, figure_notes
from compactor.render.report import Section, Table, fmt_gpus, fmt_pct, report_sections

LONG_LIST = 20  # rows beyond which a list folds into <details>: the ticket stays short, nothing is left out
CELLS_PER_ROW = 8  # one row per 8-GPU board; MIG slices of one profile wrap after 8

# Cell classes: one letter each, since a 1,000-node picture has some 30,000 cells (docs: the legend says what they are).
USED, MOVING, PLACED, STRANDED, FREE, FREED = "u", "m", "p", "s", "f", "w"

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2430;margin:1.5em auto;max-width:1280px;padding:0 1em}
h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.2em;margin:1.6em 0 .4em;border-bottom:1px solid #d0d7de}h3{font-size:1em;margin:1em 0 .3em}
.meta{color:#57606a}.warn{background:#fff4e5;border-left:4px solid #e0a526;padding:.4em .8em;margin:.6em 0}
.cards{display:flex;flex-wrap:wrap;gap:.8em;margin:.8em 0}
.card{border:1px solid #d0d7de;border-radius:6px;padding:.5em .9em;min-width:12em}
.card .v{font-size:1.6em;font-weight:600}.card .l{color:#57606a;font-size:.85em}
table{border-collapse:collapse;margin:.4em 0}th,td{border:1px solid #d0d7de;padding:.2em .5em;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.r{text-align:right}tr.why th{background:#eef3fb;font-weight:normal}
details{margin:.4em 0}summary{cursor:pointer;color:#0a5ac2}
.legend{display:flex;flex-wrap:wrap;gap:1em;margin:.4em 0}.legend b{display:inline-block;width:10px;height:10px;margin-right:.3em;vertical-align:-1px}
.nodes{display:flex;flex-wrap:wrap;gap:3px;align-items:flex-start}
.node{display:flex;flex-direction:column;gap:2px;padding:2px;border:1px solid #aeb6bf;border-radius:2px}
.node.freed{border-color:#1f7a33;box-shadow:0 0 0 1px #1f7a33}.node.filled{border-color:#7b3fa0}.node.off{border-style:dashed;opacity:.55}
.res{display:grid;grid-template-columns:repeat(8,6px);gap:1px}.res i{display:block;width:6px;height:6px}
.u{background:#4a6fa5}.m{background:#e0a526}.p{background:#7b3fa0}.s{background:#d9534f}.f{background:#dde3ea}.w{background:#2ea44f}
svg text{font-size:11px;fill:#1d2430}svg .axis{stroke:#57606a}svg .line{fill:none;stroke:#4a6fa5;stroke-width:1.5}
svg .pt{fill:#4a6fa5}svg .chosen{fill:#2ea44f;stroke:#1d2430;stroke-width:1.5}
"""

# Nothing but the inline style may load: a pod name that smuggled markup past the escaping still could not fetch anything.
_CSP = "default-src 'none'; style-src 'unsafe-inline'"


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _page(title: str, body: Iterable[str]) -> str:
    head = (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{_e(title)}</title>'
        f"<style>{_CSS}</style></head><body>\n"
    )
    return head + "\n".join(body) + "\n</body></html>\n"


# ---------------------------------------------------------------------------
# Building blocks


def _table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], right: Iterable[int] = (), *, show_headers: bool = True
) -> str:
    """A table of escaped cells; more than LONG_LIST rows fold into <details>."""
    right = frozenset(right)
    head = "<tr>" + "".join(f"<th>{_e(h)}</th>" for h in headers) + "</tr>" if show_headers else ""
    body = "".join(
        "<tr>"
        + "".join(f'<td class="r">{_e(c)}</td>' if i in right else f"<td>{_e(c)}</td>" for i, c in enumerate(row))
        + "</tr>"
        for row in rows
    )
    return _folded(f"<table>{head}{body}</table>", len(rows), "rows")


def _folded(content: str, count: int, noun: str) -> str:
    return f"<details><summary>{count} {_e(noun)}</summary>{content}</details>" if count > LONG_LIST else content


def _list(items: Sequence[str], noun: str) -> str:
    return _folded("<ul>" + "".join(f"<li>{_e(item)}</li>" for item in items) + "</ul>", len(items), noun)


def _warnings(warnings: Sequence[str]) -> str:
    return "".join(f'<p class="warn">{_e(w)}</p>' for w in warnings)


def _cards(cards: Sequence[tuple[str, str, str]]) -> str:
    """(label, value, detail) per card: the headline figures, big."""
    return (
        '<div class="cards">'
        + "".join(
            f'<div class="card"><div class="l">{_e(label)}</div><div class="v">{_e(value)}</div><div class="l">{_e(detail)}</div></div>'
            for label, value, detail in cards
        )
        + "</div>"
    )


def _section(section: Section) -> str:
    """One of report.py's sections, generically: tables as tables, notes as paragraphs."""
    out = [f"<h2>{_e(section.title)}</h2>"]
    for block in section.blocks:
        if isinstance(block, Table):
            out.append(_table(block.headers, block.rows, block.right, show_headers=block.show_headers))
        else:
            out.append(f"<p>{_e(block)}</p>")
    return "\n".join(out)


# ---------------------------------------------------------------------------
# Occupancy picture


@dataclass(frozen=True)
class Marks:
    """What a plan changes on the picture: GPU units of pods that move (off a node before, onto it after) or of pending pods
    placed, per node and resource; nodes it frees or fills. Empty for a report."""

    moving: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    placed: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    freed: frozenset[str] = frozenset()
    filled: frozenset[str] = frozenset()
    after: bool = False  # the picture after the plan: free units of freed nodes are drawn as freed

    @property
    def moving_word(self) -> str:
        return "moved here" if self.after else "moving off"


NO_MARKS = Marks()

_LEGEND = (
    (USED, "used"),
    (MOVING, "used by a pod the plan moves {moving}"),
    (PLACED, "used by a pending pod the plan places"),
    (STRANDED, "stranded: free, but no request shape in use can take it"),
    (FREE, "free"),
    (FREED, "free on a node the plan frees"),
)


def _legend(classes: Iterable[str], marks: Marks) -> str:
    """The colours this picture shows, and what the borders mean."""
    shown = set(classes)
    moving = "here" if marks.after else "away"
    keys = "".join(
        f'<span><b class="{c}"></b>{_e(text.format(moving=moving))}</span>' for c, text in _LEGEND if c in shown
    )
    borders = [
        "dashed border: NotReady or cordoned",
        *(["green border: a node the plan frees"] if marks.freed else []),
        *(["purple border: a whole-free node the plan fills"] if marks.filled else []),
    ]
    return (
        f'<div class="legend">{keys}<span>{_e("; ".join(borders))}. Hover a node for its name and figures.</span></div>'
    )


def _gpu_resources(node: NodeFigures) -> list[str]:
    return sorted(r for r, amount in node.allocatable.items() if is_gpu_resource(r) and amount > 0)


def _cells(node: NodeFigures, resource: str, marks: Marks) -> list[str]:
    """The cell classes of one GPU resource of a node, one per unit: used, moving, placed, then stranded and free."""
    total = node.allocatable.get(resource, 0)
    used = min(total, max(0, node.allocated.get(resource, 0)))
    moving = min(used, marks.moving.get(node.name, {}).get(resource, 0))
    placed = min(used - moving, marks.placed.get(node.name, {}).get(resource, 0))
    free = total - used
    if marks.after and node.name in marks.freed:
        return [USED] * (used - moving - placed) + [MOVING] * moving + [PLACED] * placed + [FREED] * free
    stranded = min(free, node.stranded_units.get(resource, 0))
    return (
        [USED] * (used - moving - placed)
        + [MOVING] * moving
        + [PLACED] * placed
        + [STRANDED] * stranded
        + [FREE] * (free - stranded)
    )


def _node_title(node: NodeFigures, cells: Mapping[str, list[str]], marks: Marks) -> str:
    parts = []
    for resource, classes in cells.items():
        text = (
            f"{resource.removeprefix('nvidia.com/')} {len(classes) - classes.count(FREE) - classes.count(STRANDED) - classes.count(FREED)}"
            f"/{len(classes)} used"
        )
        extras = ((MOVING, marks.moving_word), (PLACED, "placed"), (STRANDED, "stranded"))
        text += "".join(f", {classes.count(c)} {word}" for c, word in extras if classes.count(c))
        parts.append(text)
    state = [
        s
        for s, on in (
            ("NotReady", not node.ready),
            ("cordoned", not node.schedulable),
            ("freed by the plan", node.name in marks.freed),
            ("filled by the plan", node.name in marks.filled),
        )
        if on
    ]
    return f"{node.name} ({node.pool}): " + "; ".join(parts) + "".join(f"; {s}" for s in state)


def _node_block(node: NodeFigures, marks: Marks) -> tuple[str, list[str]]:
    """A node's block and its cell classes."""
    cells = {r: _cells(node, r, marks) for r in _gpu_resources(node)}
    kind = (
        "node"
        + (" freed" if node.name in marks.freed else "")
        + (" filled" if node.name in marks.filled else "")
        + (" off" if not (node.ready and node.schedulable) else "")
    )
    rows = "".join(
        '<div class="res">' + "".join(f'<i class="{c}"></i>' for c in classes) + "</div>" for classes in cells.values()
    )
    return f'<div class="{kind}" title="{_e(_node_title(node, cells, marks))}">{rows}</div>', [
        c for cs in cells.values() for c in cs
    ]


def _pool_heading(name: str, nodes: int, pool: AggregateFigures | None) -> str:
    if pool is None:
        return f'<h3>{_e(name)} <span class="meta">{nodes} GPU node(s)</span></h3>'
    return (
        f'<h3>{_e(name)} <span class="meta">{nodes} GPU node(s), {pool.gpus} GPUs (physical); whole-free GPUs '
        f"{pool.whole_free_physical_gpus}; stranded share {_e(fmt_pct(pool.stranded_share))}</span></h3>"
    )


def occupancy(figures: Figures, marks: Marks, *, section_id: str, title: str) -> str:
    """Every GPU node as a block of cells (per GPU or MIG slice), grouped by pool, nodes by name; CPU-only nodes are counted."""
    by_pool: dict[str, list[NodeFigures]] = defaultdict(list)
    for node in figures.nodes:
        if _gpu_resources(node):
            by_pool[node.pool].append(node)
    pools = {p.name: p for p in figures.pools}
    drawn: list[str] = []
    out = [f'<section id="{_e(section_id)}"><h2>{_e(title)}</h2>']
    for name in sorted(by_pool):
        nodes = sorted(by_pool[name], key=lambda n: n.name)
        blocks = [_node_block(n, marks) for n in nodes]
        drawn += [c for _, cells in blocks for c in cells]
        out += [
            _pool_heading(name, len(nodes), pools.get(name)),
            '<div class="nodes">' + "".join(b for b, _ in blocks) + "</div>",
        ]
    without = len(figures.nodes) - sum(len(v) for v in by_pool.values())
    if without:
        out.append(f'<p class="meta">{without} node(s) without GPUs are not drawn.</p>')
    if not by_pool:
        out.append("<p>No GPU node.</p>")
    out.insert(1, _legend(drawn, marks))  # under the title: says only what this picture shows
    return "\n".join([*out, "</section>"])


def _units_by_node(pairs: Iterable[tuple[str, Mapping[str, int]]]) -> dict[str, dict[str, int]]:
    """node -> GPU resource -> units, summed over (node, requests) pairs."""
    out: dict[str, dict[str, int]] = defaultdict(dict)
    for node, requests in pairs:
        for resource, amount in requests.items():
            if is_gpu_resource(resource) and amount > 0:
                out[node][resource] = out[node].get(resource, 0) + amount
    return dict(out)


def plan_marks(plan: CompactionPlan, snapshot: Snapshot) -> tuple[Marks, Marks]:
    """The marks of the picture before the plan and after it."""
    requests = {p.key: p.requests for p in snapshot.pods}
    freed, filled = frozenset(plan.freed_nodes), frozenset(plan.filled_nodes)
    before = Marks(moving=_units_by_node((m.from_node, m.requests) for m in plan.moves), freed=freed, filled=filled)
    after = Marks(
        moving=_units_by_node((m.to_node, m.requests) for m in plan.moves),
        placed=_units_by_node((p.to_node, requests.get(p.pod, {})) for p in plan.placed_pending),
        freed=freed,
        filled=filled,
        after=True,
    )
    return before, after


# ---------------------------------------------------------------------------
# The trade-off curve


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
            f"{point.moves} moves (cost {point.cost:g}), {point.freed_gpus} GPUs freed on {point.freed_nodes} node(s), {point.status}"
            + ("" if point.status == "OPTIMAL" else f" (bound {point.bound:g})")
            + (" - this plan" if point.chosen else "")
        )
        radius, kind = (7, "pt chosen") if point.chosen else (3.5, "pt")
        parts.append(f'<circle class="{kind}" cx="{x:.1f}" cy="{y:.1f}" r="{radius}"><title>{_e(tip)}</title></circle>')
        if point.chosen:
            anchor = "end" if x > _W / 2 else "start"
            parts.append(
                f'<text x="{x + (-10 if anchor == "end" else 10):.1f}" y="{y - 8:.1f}" text-anchor="{anchor}">this plan</text>'
            )
    return "".join(parts) + "</svg>"


def _curve(plan: CompactionPlan) -> str:
    if not plan.frontier:
        return ""
    rows = [
        (label, moves, more, cost, gpus, usable, status + (" (this plan)" if mark else ""))
        for mark, label, moves, more, cost, gpus, usable, status in _curve_rows(plan)
    ]
    return "\n".join(
        [
            "<h2>Trade-off curve</h2>",
            f"<p>Objective <b>{_e(plan.objective)}</b>: {_e(_objective(plan))}. Each dot is the cheapest plan found that frees that many "
            "GPUs; the big one is this plan.</p>",
            curve_svg(plan.frontier),
            "<details><summary>the curve as a table</summary>"
            + _table(
                ("point", "moves", "more", "cost", "freed GPUs (physical)", "usable", "status"), rows, (1, 2, 3, 4, 5)
            )
            + "</details>",
        ]
    )


# ---------------------------------------------------------------------------
# Plan sections


def _pdbs(moves: Sequence[Move], snapshot: Snapshot) -> dict[str, str]:
    """Moved pod -> the PodDisruptionBudgets that guard it, for people: the executor asks each one before the eviction."""
    moved = {m.pod for m in moves}
    guarded = pdbs_by_pod((p for p in snapshot.pods if p.key in moved), snapshot.pdbs)
    return {
        pod: ", ".join(f"{b.key} ({b.disruptions_allowed} disruption(s) allowed)" for b in budgets)
        for pod, budgets in guarded.items()
    }


def _moves(plan: CompactionPlan, snapshot: Snapshot) -> str:
    if not plan.moves:
        return "<h2>Moves</h2><p>None.</p>"
    pdbs = _pdbs(plan.moves, snapshot)
    out = [
        "<h2>Moves, in execution order</h2>",
        f"<p>Steering: <b>{_e(plan.steering.mechanism)}</b> ({_e(plan.steering.why)})</p>",
        *([f'<p class="warn">{_e(plan.steering.stops)}</p>'] if plan.steering.stops else []),
        "<table><tr><th>#</th><th>pod</th><th>from</th><th>to</th><th>the target before this move</th><th>PodDisruptionBudget</th></tr>",
    ]
    previous = None
    for number, move in enumerate(plan.moves, 1):
        why, _, where = move.reason.partition("; ")
        if why != previous:  # consecutive moves off one node share their reason, as in the text report
            out.append(f'<tr class="why"><th colspan="6">why: {_e(why)}</th></tr>')
            previous = why
        cells = (
            move.pod,
            move.from_node,
            move.to_node,
            where.removeprefix(f"{move.to_node} "),
            pdbs.get(move.pod, "-"),
        )
        out.append(f'<tr><td class="r">{number}</td>' + "".join(f"<td>{_e(c)}</td>" for c in cells) + "</tr>")
    return "\n".join([*out, "</table>"])


def _pending(plan: CompactionPlan) -> str:
    out = ["<h2>Pending GPU pods</h2>"]
    if plan.placed_pending:
        out += [
            f"<h3>Placed by the plan ({len(plan.placed_pending)})</h3>",
            _table(("pod", "node"), [(p.pod, p.to_node) for p in plan.placed_pending]),
        ]
    if plan.pending_not_placed:
        out += [
            f"<h3>Left pending ({len(plan.pending_not_placed)})</h3>",
            _table(("pod", "why"), [(p.pod, p.reason) for p in plan.pending_not_placed]),
        ]
    if len(out) == 1:
        out.append("<p>No pending GPU pod.</p>")
    return "\n".join(out)


def _staying(plan: CompactionPlan) -> str:
    unmovable: Mapping[str, Any] = plan.explanations.get("unmovablePods") or {}
    if not unmovable:
        return "<h2>Pods the plan may not move</h2><p>None: every pod may move.</p>"
    rows = [(str(reason), str(count)) for reason, count in unmovable.items()]
    total = sum(int(count) for count in unmovable.values())
    sample: Mapping[str, Any] = plan.explanations.get("unmovablePodsSample") or {}
    lists = [
        f"<details><summary>{_e(str(reason))} ({count})</summary>{_list(_named(sample.get(reason) or [], int(count)), 'pods')}"
        "</details>"
        for reason, count in unmovable.items()
        if sample.get(reason)
    ]
    return (
        f"<h2>Pods the plan may not move ({total})</h2>\n"
        + _table(("reason", "pods"), rows, (1,))
        + "\n"
        + "\n".join(lists)
    )


def _named(pods: Sequence[str], count: int) -> list[str]:
    return [*pods, *([f"... and {count - len(pods)} more (the plan's JSON counts them)"] if count > len(pods) else [])]


def _recuts(plan: CompactionPlan) -> str:
    out = []
    if plan.mig_repartition:
        rows = [(r.node, r.from_config or "-", r.to_config, r.reason) for r in plan.mig_repartition]
        out += ["<h2>MIG re-cuts (after the node is drained)</h2>", _table(("node", "from", "to", "why"), rows)]
    if plan.mig_advice:
        out += [
            "<h2>MIG layout advice (nothing is re-cut)</h2>",
            _list([f"{pool.get('pool', '')}: {pool.get('advice', '')}" for pool in plan.mig_advice], "pools"),
        ]
    return "\n".join(out)


def _figure(figures: Mapping[str, Any], key: str) -> Any:
    return figures.get("cluster", {}).get(key)


def _plan_cards(plan: CompactionPlan) -> str:
    before, after = plan.before, plan.after

    def arrow(value: Any, after_value: Any, fmt: Any) -> str:
        return f"{'-' if value is None else fmt(value)} \u2192 {'-' if after_value is None else fmt(after_value)}"

    return _cards(
        (
            (
                "Whole-free GPUs (physical)",
                arrow(_figure(before, "wholeFreePhysicalGpus"), _figure(after, "wholeFreePhysicalGpus"), str),
                f"net {plan.freed_gpus:+d} on {len(plan.freed_nodes)} freed node(s)"
                + ("" if plan.usable_freed_gpus is None else f", {plan.usable_freed_gpus} usable by the shapes in use"),
            ),
            (
                "Blocked demand (GPU-equivalents)",
                arrow(before.get("blockedDemandGpuEquivalents"), after.get("blockedDemandGpuEquivalents"), fmt_gpus),
                f"{len(before.get('blockedPending', []))} \u2192 {len(after.get('blockedPending', []))} blocked pending GPU pod(s)",
            ),
            (
                "Stranded GPU capacity (GPU-equivalents)",
                arrow(_figure(before, "strandedGpuEquivalents"), _figure(after, "strandedGpuEquivalents"), fmt_gpus),
                "free capacity no request shape in use can take: "
                + arrow(_figure(before, "strandedShare"), _figure(after, "strandedShare"), fmt_pct)
                + " of the free capacity"
                + (f" ({plan.figure_notes['strandedShare']})" if "strandedShare" in plan.figure_notes else ""),
            ),
            ("Moves", str(len(plan.moves)), f"{len(plan.placed_pending)} pending pod(s) placed"),
        )
    )


def _solver(plan: CompactionPlan) -> str:
    s = plan.solver
    gap = "-" if s.gap is None else fmt_pct(s.gap)
    lines = [
        _point_quality(plan),
        f"the search for the most GPUs (max-free): {s.status}, objective {s.objective if s.objective is not None else '-'}, "
        f"bound {s.bound if s.bound is not None else '-'}, gap {gap}; planned in {s.plan_seconds:.2f}s",
    ]
    if s.move_cost is not None and s.move_cost_bound is not None and s.move_cost_gap is not None:
        lines.append(
            f"the max-free plan's move cost {s.move_cost:g}: no plan freeing as much costs less than {s.move_cost_bound:g} "
            f"(gap {fmt_pct(s.move_cost_gap)})"
        )
    if s.note:
        lines.append(f"note: {s.note}")
    return "<ul>" + "".join(f"<li>{_e(line)}</li>" for line in lines) + "</ul>"


def _nodes_changed(plan: CompactionPlan) -> str:
    out = []
    if plan.freed_nodes:
        out += [f"<h3>Nodes freed ({len(plan.freed_nodes)})</h3>", _list(plan.freed_nodes, "nodes")]
    if plan.filled_nodes:
        out += [f"<h3>Whole-free nodes filled ({len(plan.filled_nodes)})</h3>", _list(plan.filled_nodes, "nodes")]
    return "\n".join(out)


# ---------------------------------------------------------------------------
# Entry points


def render_report_html(figures: Figures, snapshot: Snapshot, advice: Advice | None = None) -> str:
    """The fragmentation report as one HTML page: headline cards, the occupancy picture, then report.py's sections (with
    the normalisation advice of ``report --advise``)."""
    c = figures.cluster
    title = f"GPU fragmentation report: {snapshot.source}" if snapshot.source else "GPU fragmentation report"
    body = [
        f"<h1>{_e(title)}</h1>",
        _warnings((*snapshot.warnings, *figures.warnings)),
        _cards(
            (
                (
                    "Whole-free GPUs (physical)",
                    str(c.whole_free_physical_gpus),
                    f"on {c.whole_free_nodes} node(s) running no GPU pod",
                ),
                (
                    "Blocked demand (GPU-equivalents)",
                    fmt_gpus(figures.blocked_demand_gpus),
                    f"{len(figures.blocked_pending)} pending GPU pod(s) that fit in total but on no single node",
                ),
                (
                    "Stranded share",
                    fmt_pct(c.stranded_share),
                    f"{fmt_gpus(c.stranded_gpus)} of {fmt_gpus(c.free_gpus)} free GPU-equivalents",
                ),
            )
        ),
        occupancy(figures, NO_MARKS, section_id="occupancy", title="Occupancy"),
        # Warnings are above already; the headline section repeats the cards in words, which is what a reader quotes.
        *(_section(s) for s in report_sections(figures, snapshot, advice) if s.title != "Warnings"),
    ]
    return _page(title, body)


def render_plan_html(plan: CompactionPlan, snapshot: Snapshot, shapes: Sequence[ReferenceShape] | None = None) -> str:
    """The plan as one HTML page; ``snapshot`` is the one it was planned on, ``shapes`` its reference shapes (default: the
    workload's), with which the pictures before and after are measured as the plan's own figures were."""
    shapes = tuple(shapes) if shapes is not None else reference_shapes(snapshot)
    before_marks, after_marks = plan_marks(plan, snapshot)
    before = compute_figures(snapshot, shapes)
    after = compute_figures(apply_plan(snapshot, plan), shapes)
    meta = plan.metadata
    title = f"Compaction plan {meta.id}"
    body = [
        f"<h1>{_e(title)}</h1>",
        f'<p class="meta">{_e(meta.source)} \u00b7 computed {_e(meta.created_at)} \u00b7 objective {_e(plan.objective)}</p>',
        _warnings(plan.warnings),
        _plan_cards(plan),
        _solver(plan),
        _nodes_changed(plan),
        occupancy(before, before_marks, section_id="before", title="Occupancy before the plan"),
        occupancy(after, after_marks, section_id="after", title="Occupancy after the plan"),
        _curve(plan),
        _moves(plan, snapshot),
        _pending(plan),
        _staying(plan),
        _recuts(plan),
        "<h2>Before and after</h2>",
        _table(("figure", "before", "after"), _figure_rows(plan), (1, 2)),
        *(f"<p class=note>{_e(note)}</p>" for note in figure_notes(plan)),
    ]
    return _page(title, body)

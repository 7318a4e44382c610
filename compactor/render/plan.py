"""Human-readable plan reports (text and markdown): each move with its why, and before/after figures.

Imports: the plan model, ``compactor.model.shorten`` and the renderers' number formats only: it reads the plan document,
never the solve.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from compactor.model.numbers import fmt_gpus_aligned, fmt_moves, fmt_pct, fmt_seconds
from compactor.model.shorten import listed
from compactor.planner.plan import CompactionPlan
from compactor.render.text import fitted, report_width

# Two units, never under one name: GPUs (physical) count devices; GPU capacity (GPU-equivalents) maps MIG instances and
# time-sliced replicas back to fractions of a GPU (a 3g.20gb on an A100-40GB is 4/8), so it can be lower than the devices.
_FIGURES: tuple[tuple[str, str, Callable[[Any], str]], ...] = (
    # The headline figures first (docs/metrics.md): what a plan that frees nodes or places pending pods moves, led by the
    # quantities a good plan cannot make worse; the shares of free capacity after them, with ``figureNotes``' reason
    # where one rose only because pending pods placed used free capacity.
    ("blocked pending GPU pods", "@blockedPods", str),
    ("blocked demand (GPU-equivalents)", "@blockedDemandGpuEquivalents", fmt_gpus_aligned),
    ("stranded GPU capacity (GPU-equivalents)", "strandedGpuEquivalents", fmt_gpus_aligned),
    ("whole-free GPUs (physical)", "wholeFreePhysicalGpus", str),
    ("stranded share of free GPU capacity", "strandedShare", fmt_pct),
    ("free GPU capacity (GPU-equivalents)", "freeGpuEquivalents", fmt_gpus_aligned),
    ("whole-free GPU nodes", "wholeFreeNodes", str),
    ("whole-free GPU capacity (GPU-equivalents)", "wholeFreeGpuEquivalents", fmt_gpus_aligned),
    ("free on busy GPU nodes (GPU-equivalents)", "busyFreeGpuEquivalents", fmt_gpus_aligned),
    ("fragmentation rate (weighted by shape)", "fragmentationRate", fmt_pct),
    ("FGD fragmentation rate", "fgdFragmentationRate", fmt_pct),
    ("MIG idle rate", "migIdleRate", fmt_pct),
)


def _fmt(write: Callable[[Any], str], value: Any) -> str:
    """``-`` for a figure the document lacks; a value of the wrong type as it is."""
    if value is None:
        return "-"
    try:
        return write(value)
    except (ValueError, TypeError):
        return str(value)


def _figure(figures: dict[str, Any], key: str) -> Any:
    """A cluster figure, or with ``@`` one of the whole figures' (blocked pods are counted from their list)."""
    if key == "@blockedPods":
        blocked = figures.get("blockedPending")
        return None if blocked is None else len(blocked)
    if key.startswith("@"):
        return figures.get(key[1:])
    return figures.get("cluster", {}).get(key)


def figure_rows(plan: CompactionPlan) -> list[tuple[str, str, str]]:
    """(label, before, after) per figure; an after value that ``figureNotes`` explains is marked ``*``."""
    return [
        (
            label,
            _fmt(write, _figure(plan.before, key)),
            _fmt(write, _figure(plan.after, key)) + (" *" if key in plan.figure_notes else ""),
        )
        for label, key, write in _FIGURES
    ]


def figure_notes(plan: CompactionPlan) -> list[str]:
    """The notes of the figures marked ``*``: "* stranded share of free GPU capacity: up only because ..."."""
    labels = {key: label for label, key, _ in _FIGURES}
    return [f"* {labels.get(key, key)}: {note}" for key, note in plan.figure_notes.items()]


def point_quality(plan: CompactionPlan) -> str:
    """The printed plan's own proof: its point of the curve, not the max-free search (issue 14)."""
    chosen = next((p for p in plan.frontier if p.chosen), None)
    if chosen is None:
        return "this plan: not proven (shape mode draws no curve; the search's status is below)"
    if chosen.budget_cut:
        return "this plan: the point above it, cut to what one run may carry out (budget below)"
    if chosen.status == "OPTIMAL":
        return f"this plan: OPTIMAL (no plan freeing {chosen.freed_nodes} node(s) costs less than its {fmt_moves(chosen.cost)} moves)"
    if chosen.bound <= 0 < chosen.cost:  # "costs less than 0 moves" proves nothing: no bound, said as such (issue 45)
        return f"this plan: {chosen.status}, not proven (time limit: no lower bound on its cost of {fmt_moves(chosen.cost)} moves)"
    gap = (chosen.cost - chosen.bound) / chosen.cost if chosen.cost > 0 else 0.0
    return (
        f"this plan: {chosen.status}, not proven (time limit): no plan freeing {chosen.freed_nodes} node(s) costs less than "
        f"{fmt_moves(chosen.bound)} moves, it costs {fmt_moves(chosen.cost)} (gap {fmt_pct(gap)})"
    )


def _headline(plan: CompactionPlan) -> list[str]:
    s = plan.solver
    lines = [
        f"Compaction plan {plan.metadata.id} for {plan.metadata.source} ({plan.metadata.created_at})",
        f"  {len(plan.moves)} move(s); frees {len(plan.freed_nodes)} node(s): net {plan.freed_gpus} whole-free GPU(s) "
        f"(physical){_usable(plan)}",
        f"  pending pods placed: {len(plan.placed_pending)}; {point_quality(plan)}",
        f"  the search for the most GPUs: {search_ended(plan)}; planned in {fmt_seconds(s.plan_seconds)}"
        + ("" if s.load_seconds is None else f" (+{fmt_seconds(s.load_seconds)} loading)"),
    ]
    if s.move_cost is not None and s.move_cost_bound is not None and s.move_cost_gap is not None:
        lines.append(
            f"  the max-free plan's move cost {fmt_moves(s.move_cost)} (in moves): no plan freeing as much costs less "
            f"than {fmt_moves(s.move_cost_bound)} (gap {fmt_pct(s.move_cost_gap)})"
        )
    if plan.unusable:
        lines.append(f"  usable: {plan.unusable}")
    if plan.filled_nodes:
        lines.append(f"  note: fills previously free node(s) {listed(plan.filled_nodes)}")
    if plan.held_back:
        lines.append(f"  budget: {plan.held_back}")
    if s.note:
        lines.append(f"  note: {s.note}")
    return lines


def proper_search(plan: CompactionPlan) -> bool:
    """Whether a CP-SAT model of the max-free search was built (the time limit can go on building the problem and the
    greedy warm start at thousands of nodes): only then has the search a status and a gap to claim."""
    s = plan.solver
    return bool(s.variables) or not any(level.get("status") == "UNKNOWN" for level in s.levels)


def search_ended(plan: CompactionPlan) -> str:
    """How the max-free search ended: its status, time and gap, or that the plan is greedy's."""
    s = plan.solver
    if not proper_search(plan):
        enough = s.enough_time_limit
        hint = f": about {enough} s would have left it time (--time-limit {enough})" if enough else ""
        return f"no CP-SAT model in the time limit, the greedy warm start's plan (unproven){hint}"
    gap = "-" if s.gap is None else fmt_pct(s.gap)
    return f"{s.status} in {fmt_seconds(s.wall_seconds)}, gap {gap} (freed GPUs against its bound)"


def _usable(plan: CompactionPlan) -> str:
    """ ", 12 usable" (by a request shape in use) when the plan frees GPUs and says how many are usable."""
    if plan.usable_freed_gpus is None or not plan.freed_gpus:
        return ""
    return f", {plan.usable_freed_gpus} usable by the request shapes in use"


_OBJECTIVES = {
    "pending-only": "place pending pods, free nothing more",
    "balanced": "free more nodes while each costs at most {price} moves per usable GPU it frees",
    "max-free": "free the most",
}


def objective_text(plan: CompactionPlan) -> str:
    return _OBJECTIVES.get(plan.objective, plan.objective).format(price=fmt_moves(plan.balanced_moves_per_gpu or 0.0))


_MAX_CURVE_ROWS = 15


def curve_rows(plan: CompactionPlan) -> list[tuple[str, str, str, str, str, str, str, str]]:
    """(mark, point, moves, more moves, cost, freed GPUs, usable of them, status) per point of the trade-off curve."""
    rows = []
    previous = None
    for point in plan.frontier:
        first = "place pending pods" if point.moves else "no move"
        # the first point frees nodes when it is the max-free plan alone (no time for the curve): said as it is
        label = first if previous is None and not point.freed_nodes else f"{point.freed_nodes} node(s) freed"
        if point.recuts:
            label = f"+ {point.recuts} MIG re-cut(s)"
        if point.budget_cut:
            label = "within the run budgets"
        more = "" if previous is None or point.budget_cut else f"+{point.moves - previous.moves}"
        status = point.status if point.status == "OPTIMAL" else f"{point.status} (bound {fmt_moves(point.bound)})"
        if point.budget_cut:
            status = "the point above, cut (heldBack)"
        rows.append(
            (
                "*" if point.chosen else "",
                label,
                str(point.moves),
                more,
                fmt_moves(point.cost),
                str(point.freed_gpus),
                "-" if point.usable_gpus is None else str(point.usable_gpus),
                status,
            )
        )
        previous = point
    return rows


def _shown(count: int, chosen: int) -> list[int | None]:
    """Row indices to print (None = a gap): all of a short curve; the ends and the chosen point's neighbourhood of a long one."""
    if count <= _MAX_CURVE_ROWS:
        return list(range(count))
    keep = sorted({*range(4), *range(max(0, chosen - 2), min(count, chosen + 3)), *range(count - 3, count)})
    shown: list[int | None] = []
    for i in keep:
        if shown and shown[-1] is not None and i != shown[-1] + 1:
            shown.append(None)
        shown.append(i)
    return shown


def _moves_worth(cost: float) -> str:
    return f"{fmt_moves(cost)} move" if cost == 1 else f"{fmt_moves(cost)} moves"


def _curve_text(plan: CompactionPlan) -> list[str]:
    if not plan.frontier:
        return []
    rows = curve_rows(plan)
    chosen = next((i for i, p in enumerate(plan.frontier) if p.chosen), 0)
    out = [
        "",
        f"Trade-off curve (objective {plan.objective}: {objective_text(plan)}; * = this plan):",
        *([f"  {plan.move_price}"] if plan.move_price else []),
        f"    {'point':<22} {'moves':>6} {'more':>6} {'cost':>7} {'freed GPUs (physical)':>21} {'usable':>6}  status",
    ]
    for i in _shown(len(rows), chosen):
        if i is None:
            out.append("    ...")
            continue
        mark, label, moves, more, cost, gpus, usable, status = rows[i]
        out.append(f"  {mark:1} {label:<22} {moves:>6} {more:>6} {cost:>7} {gpus:>21} {usable:>6}  {status}")
    return out


def _curve_markdown(plan: CompactionPlan) -> list[str]:
    if not plan.frontier:
        return []
    out = [
        f"## Trade-off curve (objective {plan.objective})",
        "",
        objective_text(plan) + "; **bold** = this plan.",
        *(["", plan.move_price[0].upper() + plan.move_price[1:] + "."] if plan.move_price else []),
        "",
        "| point | moves | more | cost | freed GPUs (physical) | usable | status |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for mark, *cells in curve_rows(plan):
        out.append("| " + " | ".join(f"**{c}**" if mark and c else c for c in cells) + " |")
    return [*out, ""]


def _mig_rows(pool: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """(config, per node, pending hosted per node, nodes for all pending, overlap with running) for the best layouts."""
    rows = []
    for option in pool["layouts"][:4]:
        per_node = (
            ", ".join(
                f"{v} x {k.removeprefix('nvidia.com/').removeprefix('mig-')}" for k, v in option["perNode"].items()
            )
            or "-"
        )
        needed = "-" if option["nodesForPending"] is None else str(option["nodesForPending"])
        rows.append(
            (
                option["config"],
                per_node,
                str(option["hostsPending"]),
                needed,
                fmt_pct(option["matchesRunning"], decimals=0),
            )
        )
    return rows


def _mig_text(plan: CompactionPlan) -> list[str]:
    out: list[str] = []
    for pool in plan.mig_advice:
        out += [
            "",
            f"MIG layouts for pool {pool['pool']} ({pool['model']}, {pool['nodes']} nodes; advice, nothing is re-cut):",
            f"  {pool['advice']}",
            f"    {'layout':<16} {'per node':<44} {'pending/node':>12} {'nodes for all':>13} {'fits running':>12}",
        ]
        out += [f"    {c:<16} {n:<44} {h:>12} {k:>13} {m:>12}" for c, n, h, k, m in _mig_rows(pool)]
    return out


def _mig_markdown(plan: CompactionPlan) -> list[str]:
    out: list[str] = []
    for pool in plan.mig_advice:
        out += [
            f"## MIG layouts for pool {pool['pool']} ({pool['model']})",
            "",
            f"{pool['advice']} (advice: nothing is re-cut)",
            "",
            "| layout | per node | pending hosted per node | nodes for all pending | fits running |",
            "|---|---|---:|---:|---:|",
        ]
        out += [f"| {c} | {n} | {h} | {k} | {m} |" for c, n, h, k, m in _mig_rows(pool)]
        out.append("")
    return out


def _pending_text(plan: CompactionPlan) -> list[str]:
    if not plan.pending_not_placed:
        return []
    return ["", "Pods left pending, and why:", *[f"  {p.pod}: {p.reason}" for p in plan.pending_not_placed]]


def _pending_markdown(plan: CompactionPlan) -> list[str]:
    if not plan.pending_not_placed:
        return []
    return [
        "## Pods left pending",
        "",
        "| pod | why |",
        "|---|---|",
        *[f"| `{p.pod}` | {p.reason} |" for p in plan.pending_not_placed],
        "",
    ]


def render_text(plan: CompactionPlan, width: int | None = None) -> str:
    """The plan for a terminal, each line fitted to ``width`` (default: ``report_width``)."""
    return "\n".join(fitted(_text_lines(plan), width or report_width())) + "\n"


def _text_lines(plan: CompactionPlan) -> list[str]:
    out = [*(f"warning: {w}" for w in plan.warnings), *_headline(plan)]
    out += _curve_text(plan)
    if plan.freed_nodes:
        out += ["", "Nodes freed: " + listed(plan.freed_nodes)]
    if plan.mig_repartition:
        out += ["", "MIG re-cuts (nvidia.com/mig.config, after the node is drained):"]
        out += [f"  {r.node}: {r.from_config or '-'} -> {r.to_config} ({r.reason})" for r in plan.mig_repartition]
    if plan.moves:
        out += ["", "Moves, in execution order:", f"  steering: {plan.steering.mechanism} ({plan.steering.why})"]
        if plan.steering.stops:
            out.append(f"  WARNING: {plan.steering.stops}")
        width = max(len(m.pod) for m in plan.moves)
        previous = ""
        for i, move in enumerate(plan.moves, 1):
            why, _, where = move.reason.partition("; ")
            if why != previous:  # consecutive moves off one node share their reason
                out.append(f"  why: {why}")
                previous = why
            where = where.removeprefix(f"{move.to_node} ")
            target = f"  ({_moves_worth(move.cost)}{'; ' + where if where else ''})"
            out.append(f"  {i:>4}. {move.pod:<{width}}  {move.from_node} -> {move.to_node}{target}")
    if plan.placed_pending:
        out += ["", "Pending pods that fit after the plan:"]
        out += [f"  {p.pod} -> {p.to_node}" for p in plan.placed_pending]
    out += _pending_text(plan)
    width = max(len(label) for label, _, _ in _FIGURES)
    out += ["", f"  {'figure':<{width}} {'before':>10} {'after':>12}"]
    out += [f"  {label:<{width}} {b:>10} {a:>12}" for label, b, a in figure_rows(plan)]
    out += [f"  {note}" for note in figure_notes(plan)]
    unmovable = plan.explanations.get("unmovablePods") or {}
    if unmovable:
        out += ["", "Pods the plan may not move, by reason:"]
        out += [f"  {count:>5}  {reason}" for reason, count in unmovable.items()]
    out += _mig_text(plan)
    return out


def render_markdown(plan: CompactionPlan) -> str:
    out = [
        "# " + _headline(plan)[0],
        "",
        *[f"> **Warning:** {w}" for w in plan.warnings],
        *([""] if plan.warnings else []),
        *[f"- {line.strip()}" for line in _headline(plan)[1:]],
        "",
    ]
    out += _curve_markdown(plan)
    if plan.mig_repartition:
        out += ["## MIG re-cuts", "", "| node | from | to | why |", "|---|---|---|---|"]
        out += [f"| {r.node} | {r.from_config or '-'} | {r.to_config} | {r.reason} |" for r in plan.mig_repartition]
        out.append("")
    if plan.moves:
        out += [
            "## Moves (execution order)",
            "",
            f"Steering: **{plan.steering.mechanism}**: {plan.steering.why}",
            "",
            *([f"**Warning:** {plan.steering.stops}", ""] if plan.steering.stops else []),
            "| # | pod | from | to | cost (moves) | why |",
            "|---|---|---|---|---:|---|",
        ]
        out += [
            f"| {i} | `{m.pod}` | {m.from_node} | {m.to_node} | {fmt_moves(m.cost)} | {m.reason} |"
            for i, m in enumerate(plan.moves, 1)
        ]
        out.append("")
    if plan.placed_pending:
        out += ["## Pending pods that fit after the plan", "", "| pod | node |", "|---|---|"]
        out += [f"| `{p.pod}` | {p.to_node} |" for p in plan.placed_pending]
        out.append("")
    out += _pending_markdown(plan)
    out += ["## Before and after", "", "| figure | before | after |", "|---|---:|---:|"]
    out += [f"| {label} | {b} | {a} |" for label, b, a in figure_rows(plan)]
    out += ["", *(f"\\{note}" for note in figure_notes(plan))] if plan.figure_notes else []
    unmovable = plan.explanations.get("unmovablePods") or {}
    if unmovable:
        out += ["", "## Pods the plan may not move", "", "| reason | pods |", "|---|---:|"]
        out += [f"| {reason} | {count} |" for reason, count in unmovable.items()]
    out += ["", *_mig_markdown(plan)] if plan.mig_advice else []
    return "\n".join(out) + "\n"


def render_plan(plan: CompactionPlan, fmt: str, width: int | None = None) -> str:
    if fmt == "json":
        return plan.to_json()
    return render_markdown(plan) if fmt == "markdown" else render_text(plan, width)

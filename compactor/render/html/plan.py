"""The plan's sections of the HTML page: the headline cards, the solver's proof, the nodes freed and filled, the moves
with their reasons and PodDisruptionBudgets, the pending pods, the pods that stay, the MIG re-cuts.

Apart from the report's page and the pictures because only a plan has them; ``html`` puts them in order around the
occupancy pictures and the trade-off curve.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from compactor.model.numbers import fmt_change, fmt_gpus, fmt_moves, fmt_pct, fmt_seconds
from compactor.model.types import Snapshot
from compactor.planner.plan import CompactionPlan, Move
from compactor.planner.rules.movability import pdbs_by_pod
from compactor.render.html.page import cards, esc, item_list, table
from compactor.render.plan import point_quality, proper_search, search_ended


def _pdbs(moves: Sequence[Move], snapshot: Snapshot) -> dict[str, str]:
    """Moved pod -> the PodDisruptionBudgets that guard it, for people: the executor asks each one before the eviction."""
    moved = {m.pod for m in moves}
    guarded = pdbs_by_pod((p for p in snapshot.pods if p.key in moved), snapshot.pdbs)
    return {
        pod: ", ".join(f"{b.key} ({b.disruptions_allowed} disruption(s) allowed)" for b in budgets)
        for pod, budgets in guarded.items()
    }


def moves_section(plan: CompactionPlan, snapshot: Snapshot) -> str:
    if not plan.moves:
        return "<h2>Moves</h2><p>None.</p>"
    pdbs = _pdbs(plan.moves, snapshot)
    out = [
        "<h2>Moves, in execution order</h2>",
        f"<p>Steering: <b>{esc(plan.steering.mechanism)}</b> ({esc(plan.steering.why)})</p>",
        *([f'<p class="warn">{esc(plan.steering.stops)}</p>'] if plan.steering.stops else []),
        "<table><tr><th>#</th><th>pod</th><th>from</th><th>to</th><th>the target before this move</th><th>PodDisruptionBudget</th></tr>",
    ]
    previous = None
    for number, move in enumerate(plan.moves, 1):
        why, _, where = move.reason.partition("; ")
        if why != previous:  # consecutive moves off one node share their reason, as in the text report
            out.append(f'<tr class="why"><th colspan="6">why: {esc(why)}</th></tr>')
            previous = why
        cells = (
            move.pod,
            move.from_node,
            move.to_node,
            where.removeprefix(f"{move.to_node} "),
            pdbs.get(move.pod, "-"),
        )
        out.append(f'<tr><td class="r">{number}</td>' + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>")
    return "\n".join([*out, "</table>"])


def pending_section(plan: CompactionPlan) -> str:
    out = ["<h2>Pending GPU pods</h2>"]
    if plan.placed_pending:
        out += [
            f"<h3>Placed by the plan ({len(plan.placed_pending)})</h3>",
            table(("pod", "node"), [(p.pod, p.to_node) for p in plan.placed_pending]),
        ]
    if plan.pending_not_placed:
        out += [
            f"<h3>Left pending ({len(plan.pending_not_placed)})</h3>",
            table(("pod", "why"), [(p.pod, p.reason) for p in plan.pending_not_placed]),
        ]
    if len(out) == 1:
        out.append("<p>No pending GPU pod.</p>")
    return "\n".join(out)


def staying_section(plan: CompactionPlan) -> str:
    unmovable: Mapping[str, Any] = plan.explanations.get("unmovablePods") or {}
    if not unmovable:
        return "<h2>Pods the plan may not move</h2><p>None: every pod may move.</p>"
    rows = [(str(reason), str(count)) for reason, count in unmovable.items()]
    total = sum(int(count) for count in unmovable.values())
    sample: Mapping[str, Any] = plan.explanations.get("unmovablePodsSample") or {}
    lists = [
        f"<details><summary>{esc(str(reason))} ({count})</summary>{item_list(_named(sample.get(reason) or [], int(count)), 'pods')}"
        "</details>"
        for reason, count in unmovable.items()
        if sample.get(reason)
    ]
    return (
        f"<h2>Pods the plan may not move ({total})</h2>\n"
        + table(("reason", "pods"), rows, (1,))
        + "\n"
        + "\n".join(lists)
    )


def _named(pods: Sequence[str], count: int) -> list[str]:
    return [*pods, *([f"... and {count - len(pods)} more (the plan's JSON counts them)"] if count > len(pods) else [])]


def recuts_section(plan: CompactionPlan) -> str:
    out = []
    if plan.mig_repartition:
        rows = [(r.node, r.from_config or "-", r.to_config, r.reason) for r in plan.mig_repartition]
        out += ["<h2>MIG re-cuts (after the node is drained)</h2>", table(("node", "from", "to", "why"), rows)]
    if plan.mig_advice:
        out += [
            "<h2>MIG layout advice (nothing is re-cut)</h2>",
            item_list([f"{pool.get('pool', '')}: {pool.get('advice', '')}" for pool in plan.mig_advice], "pools"),
        ]
    return "\n".join(out)


def _figure(figures: Mapping[str, Any], key: str) -> Any:
    return figures.get("cluster", {}).get(key)


def plan_cards(plan: CompactionPlan) -> str:
    before, after = plan.before, plan.after

    def arrow(value: Any, after_value: Any, fmt: Any) -> str:
        return f"{'-' if value is None else fmt(value)} \u2192 {'-' if after_value is None else fmt(after_value)}"

    return cards(
        (
            (
                "Whole-free GPUs (physical)",
                arrow(_figure(before, "wholeFreePhysicalGpus"), _figure(after, "wholeFreePhysicalGpus"), str),
                f"net {fmt_change(plan.freed_gpus)} on {len(plan.freed_nodes)} freed node(s)"
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


def solver_list(plan: CompactionPlan) -> str:
    s = plan.solver
    gap = "-" if s.gap is None else fmt_pct(s.gap)
    lines = [
        point_quality(plan),
        (
            f"the search for the most GPUs (max-free): {search_ended(plan)}"
            if not proper_search(plan)
            else f"the search for the most GPUs (max-free): {s.status}, objective "
            f"{s.objective if s.objective is not None else '-'}, bound {s.bound if s.bound is not None else '-'}, "
            f"gap {gap}"
        )
        + f"; planned in {fmt_seconds(s.plan_seconds)}",
    ]
    if s.move_cost is not None and s.move_cost_bound is not None and s.move_cost_gap is not None:
        lines.append(
            f"the max-free plan's move cost {fmt_moves(s.move_cost)}: no plan freeing as much costs less than "
            f"{fmt_moves(s.move_cost_bound)} (gap {fmt_pct(s.move_cost_gap)})"
        )
    if s.note:
        lines.append(f"note: {s.note}")
    return "<ul>" + "".join(f"<li>{esc(line)}</li>" for line in lines) + "</ul>"


def nodes_changed(plan: CompactionPlan) -> str:
    out = []
    if plan.freed_nodes:
        out += [f"<h3>Nodes freed ({len(plan.freed_nodes)})</h3>", item_list(plan.freed_nodes, "nodes")]
    if plan.filled_nodes:
        out += [f"<h3>Whole-free nodes filled ({len(plan.filled_nodes)})</h3>", item_list(plan.filled_nodes, "nodes")]
    return "\n".join(out)

"""Human-readable plan reports (text and markdown): each move with its why, and before/after figures."""

from __future__ import annotations

from typing import Any

from compactor.planner.plan import CompactionPlan

_FIGURES = (
    ("GPUs free", "freeGpus", "{:.2f}"),
    ("whole-free GPU nodes", "wholeFreeNodes", "{:d}"),
    ("whole-free GPUs", "wholeFreeGpus", "{:.2f}"),
    ("stranded GPUs", "strandedGpus", "{:.2f}"),
    ("fragmentation rate", "fragmentationRate", "{:.1%}"),
    ("FGD fragmentation rate", "fgdFragmentationRate", "{:.1%}"),
    ("MIG idle rate", "migIdleRate", "{:.1%}"),
)


def _fmt(template: str, value: Any) -> str:
    if value is None:
        return "-"
    try:
        return template.format(value)
    except (ValueError, TypeError):
        return str(value)


def _figure_rows(plan: CompactionPlan) -> list[tuple[str, str, str]]:
    before = plan.before.get("cluster", {})
    after = plan.after.get("cluster", {})
    return [(label, _fmt(t, before.get(key)), _fmt(t, after.get(key))) for label, key, t in _FIGURES]


def _headline(plan: CompactionPlan) -> list[str]:
    s = plan.solver
    gap = "-" if s.gap is None else f"{s.gap:.1%}"
    lines = [
        f"Compaction plan {plan.metadata.id} for {plan.metadata.source} ({plan.metadata.created_at})",
        f"  {len(plan.moves)} move(s); frees {len(plan.freed_nodes)} node(s): net {plan.freed_gpus} GPU(s) whole-free",
        f"  pending pods placed: {len(plan.placed_pending)}; solver {s.status} in {s.wall_seconds:.2f}s, gap {gap}",
    ]
    if plan.filled_nodes:
        lines.append(f"  note: fills previously free node(s) {', '.join(plan.filled_nodes)}")
    if s.note:
        lines.append(f"  note: {s.note}")
    return lines


def render_text(plan: CompactionPlan) -> str:
    out = _headline(plan)
    if plan.freed_nodes:
        out += ["", "Nodes freed: " + ", ".join(plan.freed_nodes)]
    if plan.moves:
        out += ["", "Moves, in execution order:"]
        width = max(len(m.pod) for m in plan.moves)
        previous = ""
        for i, move in enumerate(plan.moves, 1):
            why, _, where = move.reason.partition("; ")
            if why != previous:  # consecutive moves off one node share their reason
                out.append(f"  why: {why}")
                previous = why
            where = where.removeprefix(f"{move.to_node} ")
            target = f"  ({where})" if where else ""
            out.append(f"  {i:>4}. {move.pod:<{width}}  {move.from_node} -> {move.to_node}{target}")
    if plan.placed_pending:
        out += ["", "Pending pods that fit after the plan:"]
        out += [f"  {p.pod} -> {p.to_node}" for p in plan.placed_pending]
    out += ["", f"  {'figure':<24} {'before':>10} {'after':>10}"]
    out += [f"  {label:<24} {b:>10} {a:>10}" for label, b, a in _figure_rows(plan)]
    unmovable = plan.explanations.get("unmovablePods") or {}
    if unmovable:
        out += ["", "Pods the plan may not move, by reason:"]
        out += [f"  {count:>5}  {reason}" for reason, count in unmovable.items()]
    return "\n".join(out) + "\n"


def render_markdown(plan: CompactionPlan) -> str:
    out = ["# " + _headline(plan)[0], "", *[f"- {line.strip()}" for line in _headline(plan)[1:]], ""]
    if plan.moves:
        out += ["## Moves (execution order)", "", "| # | pod | from | to | why |", "|---|---|---|---|---|"]
        out += [f"| {i} | `{m.pod}` | {m.from_node} | {m.to_node} | {m.reason} |" for i, m in enumerate(plan.moves, 1)]
        out.append("")
    if plan.placed_pending:
        out += ["## Pending pods that fit after the plan", "", "| pod | node |", "|---|---|"]
        out += [f"| `{p.pod}` | {p.to_node} |" for p in plan.placed_pending]
        out.append("")
    out += ["## Before and after", "", "| figure | before | after |", "|---|---:|---:|"]
    out += [f"| {label} | {b} | {a} |" for label, b, a in _figure_rows(plan)]
    unmovable = plan.explanations.get("unmovablePods") or {}
    if unmovable:
        out += ["", "## Pods the plan may not move", "", "| reason | pods |", "|---|---:|"]
        out += [f"| {reason} | {count} |" for reason, count in unmovable.items()]
    return "\n".join(out) + "\n"


def render_plan(plan: CompactionPlan, fmt: str) -> str:
    if fmt == "json":
        return plan.to_json()
    return render_markdown(plan) if fmt == "markdown" else render_text(plan)

"""The part of a plan one run may carry out under ``max_evictions_per_cycle``: whole nodes, never half of one.

Cutting the move list at the cap would fence every node the plan frees, drain a few
halfway, then wait for the rest to empty, which they never do in this run. A run
therefore takes the plan's source nodes in plan order, each with all of its moves,
while they fit under the cap; the nodes it does not take stay untouched (not even
fenced) for a later run, which re-plans from live state anyway. The same cut serves the
run budgets the planner applies (``compactor/planner/rules/budgets.py``).
"""

from __future__ import annotations

from compactor.planner.plan import CompactionPlan


def kept_fenced(plan: CompactionPlan) -> list[str]:
    """Nodes fenced for the run besides those it frees: drained for a pending pod (and not freed) until the pod binds
    there, and nodes to re-cut."""
    sources = {m.from_node for m in plan.moves}
    targets = {m.to_node for m in plan.moves}
    drained_for_pending = {p.to_node for p in plan.placed_pending} & sources - set(plan.freed_nodes) - targets
    return sorted(drained_for_pending | {r.node for r in plan.mig_repartition})


def measured_nodes(plan: CompactionPlan) -> list[str]:
    """The nodes whose whole-free state the plan changes when every replacement lands on its planned node: those it frees,
    fills, places pending pods on or re-cuts (a target running GPU pods before stays busy; a source it does not free keeps
    some)."""
    names = set(plan.freed_nodes) | set(plan.filled_nodes) | {p.to_node for p in plan.placed_pending}
    return sorted(names | {r.node for r in plan.mig_repartition})

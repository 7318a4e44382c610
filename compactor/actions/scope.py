"""The part of a plan one run may carry out under ``max_evictions_per_cycle``: whole nodes, never half of one.

Cutting the move list at the cap would cordon every node the plan frees, drain a few
halfway, then wait for the rest to empty, which they never do in this run. A run
therefore takes the plan's source nodes in plan order, each with all of its moves,
while they fit under the cap; the nodes it does not take stay untouched (not even
cordoned) for a later run, which re-plans from live state anyway.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from compactor.planner.plan import CompactionPlan


def within_cap(plan: CompactionPlan, cap: int, gpus: Mapping[str, int]) -> CompactionPlan:
    """The whole source nodes of ``plan``, in order, whose moves add up to at most ``cap``; ``gpus``: node -> physical GPUs."""
    per_node = Counter(m.from_node for m in plan.moves)  # insertion order: the plan's order of source nodes
    taken: set[str] = set()
    budget = cap
    for node, moves_from_node in per_node.items():
        if moves_from_node <= budget:
            taken.add(node)
            budget -= moves_from_node
    moves = [m for m in plan.moves if m.from_node in taken]
    placed = [p for p in plan.placed_pending if p.to_node in taken or p.to_node not in per_node]
    targets = {m.to_node for m in moves} | {p.to_node for p in placed}
    freed = [n for n in plan.freed_nodes if n in taken]
    filled = [n for n in plan.filled_nodes if n in targets]
    return plan.model_copy(update={
        "moves": moves, "placed_pending": placed, "freed_nodes": freed, "filled_nodes": filled,
        "freed_gpus": sum(gpus.get(n, 0) for n in freed) - sum(gpus.get(n, 0) for n in filled),
    })


def measured_nodes(plan: CompactionPlan) -> list[str]:
    """The nodes whose whole-free state the plan changes when every replacement lands on its planned node: those it frees,
    fills, places pending pods on or re-cuts (a target running GPU pods before stays busy; a source it does not free keeps
    some)."""
    names = set(plan.freed_nodes) | set(plan.filled_nodes) | {p.to_node for p in plan.placed_pending}
    return sorted(names | {r.node for r in plan.mig_repartition})

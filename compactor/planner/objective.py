"""The objective, stated once: an ``Assignment`` (where each pod type ends) and what the plan is worth.

The planner's objective is lexicographic, most important first (``FREE_NODES``; ``SHAPES`` in shape mode):

1. ``pending``: pending GPU pods placed, each weighted by its priority rank (maximise);
2. ``freedGpus``: physical GPUs of nodes the plan may empty left with no GPU pod (maximise), or in shape mode
   ``headroom``: copies of the target shapes that fit (maximise);
3. ``moveCost``: each pod leaving its node costs its type's cost (minimise).

Each ``Term`` computes its level's value of an assignment in Python: the level solver carries incumbents with them
(``levels.py``, whose CP-SAT expressions of the same terms are ``constraints.py``'s), ``rank`` compares plans with them
(the search, the large-neighbourhood search), and ``Assignment.cost`` is the move cost term. The model's move cost may
add a preference for full targets (``aims.move_cost.prefer_full_targets``) that the term leaves out: it breaks ties
inside a solve, it is no part of what a plan is worth. ``within_limits`` checks the move limits every plan keeps.

Imports: the problem (``problem.py``) only; no solver.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from compactor.planner.problem import Problem, holds_gpu_load


@dataclass
class Assignment:
    """Final per-type counts per node, and pending pods placed per node."""

    counts: dict[int, dict[int, int]] = field(default_factory=dict)
    placed: dict[int, dict[int, int]] = field(default_factory=dict)

    @classmethod
    def unchanged(cls, problem: Problem) -> Assignment:
        return cls(counts={t.index: {n: len(p) for n, p in t.initial.items()} for t in problem.types if not t.pending})

    def copy(self) -> Assignment:
        return Assignment({t: dict(c) for t, c in self.counts.items()}, {t: dict(c) for t, c in self.placed.items()})

    def cost(self, problem: Problem) -> int:
        """Total move cost (the ``moveCost`` term): each pod leaving its node costs its type's cost."""
        return move_cost(problem, self)

    def moves(self, problem: Problem) -> int:
        """Pods leaving their node."""
        return sum(out for _, _, out in moves_out(problem, self))


def moves_out(problem: Problem, assignment: Assignment) -> Iterator[tuple[int, int, int]]:
    """(type, node, pods of the type leaving the node) for every movable type and node it starts on."""
    for ptype in problem.types:
        if ptype.pending:
            continue
        final = assignment.counts.get(ptype.index, {})
        for node, pods in ptype.initial.items():
            yield ptype.index, node, max(0, len(pods) - final.get(node, 0))


def pending_weight(problem: Problem, assignment: Assignment) -> int:
    """Pending pods the assignment places, each weighted by its priority rank (the ``pending`` term)."""
    return sum(problem.types[t].weight * k for t, per_node in assignment.placed.items() for k in per_node.values())


def empty_nodes(problem: Problem, assignment: Assignment) -> set[int]:
    """GPU nodes the plan may empty (``can_empty``, no unmovable GPU load) that run no GPU pod under the assignment."""
    gpu_load = [0] * len(problem.nodes)
    for ptype in problem.types:
        if not ptype.uses_gpu:
            continue
        source = assignment.placed if ptype.pending else assignment.counts
        for node, count in source.get(ptype.index, {}).items():
            gpu_load[node] += count
    fixed_gpu = {s.index for s in problem.nodes if holds_gpu_load(s.fixed)}
    return {
        s.index for s in problem.nodes if s.gpus and s.can_empty and gpu_load[s.index] == 0 and s.index not in fixed_gpu
    }


def freed_gpus(problem: Problem, assignment: Assignment) -> int:
    """Physical GPUs of the nodes ``empty_nodes`` counts (the ``freedGpus`` term; those free before included)."""
    return sum(problem.nodes[n].gpus for n in empty_nodes(problem, assignment))


def move_cost(problem: Problem, assignment: Assignment) -> int:
    """Each pod leaving its node costs its type's cost (the ``moveCost`` term)."""
    return sum(problem.types[t].cost * out for t, _, out in moves_out(problem, assignment))


def headroom(problem: Problem, assignment: Assignment) -> int:
    """Shape mode: copies of each target shape that fit after the assignment, summed over receiving nodes (the
    ``headroom`` term)."""
    loads = [dict(s.fixed) for s in problem.nodes]
    for ptype in problem.types:
        source = assignment.placed if ptype.pending else assignment.counts
        for node, count in source.get(ptype.index, {}).items():
            for r, v in ptype.requests.items():
                loads[node][r] = loads[node].get(r, 0) + v * count
    total = 0
    for shape in problem.target_shapes:
        for state in problem.nodes:
            if state.is_target_pool:
                room = [(state.capacity.get(r, 0) - loads[state.index].get(r, 0)) // v for r, v in shape.items() if v]
                total += max(0, min(room)) if room else 0
    return total


@dataclass(frozen=True)
class Term:
    """One level of the objective: its name (as the plan's ``solver.levels`` show it), its sense, its value in Python."""

    name: str
    maximize: bool
    value: Callable[[Problem, Assignment], int]


PENDING = Term("pending", True, pending_weight)
FREED_GPUS = Term("freedGpus", True, freed_gpus)
HEADROOM = Term("headroom", True, headroom)
MOVE_COST = Term("moveCost", False, move_cost)

FREE_NODES = (PENDING, FREED_GPUS, MOVE_COST)  # aims.goal free-nodes, most important first
SHAPES = (PENDING, HEADROOM, MOVE_COST)  # aims.goal shapes (aims.target_shapes)

Rank = tuple[int, ...]


def terms_for(problem: Problem) -> tuple[Term, ...]:
    return SHAPES if problem.target_shapes else FREE_NODES


def rank(problem: Problem, assignment: Assignment) -> Rank:
    """The free-nodes terms, each signed so that larger is better, compared in order: (pending placed by weight, GPUs left
    whole-free, -move cost)."""
    return tuple(t.value(problem, assignment) if t.maximize else -t.value(problem, assignment) for t in FREE_NODES)


def within_limits(problem: Problem, assignment: Assignment) -> bool:
    """Does ``assignment`` respect maxMoves (total, per node, per namespace) and minGainPerMove?"""
    total = 0
    per_node: dict[int, int] = {}
    per_namespace: dict[str, int] = {}
    for t, node, out in moves_out(problem, assignment):
        total += out
        per_node[node] = per_node.get(node, 0) + out
        namespace = problem.types[t].namespace
        per_namespace[namespace] = per_namespace.get(namespace, 0) + out
    limits = problem.limits
    gained = freed_gpus(problem, assignment) - problem.empty_before_gpus if limits.asks_gain else 0
    return limits.within(total, per_node.values(), per_namespace.values(), gained)

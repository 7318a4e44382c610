"""From per-type counts to concrete moves: which pod, from where, to where, in what order, and why.

Imports: ``compactor.model``, the problem, the objective's ``Assignment``, ``usable``; no solver.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from compactor.model.resources import is_gpu_resource
from compactor.model.types import Pod
from compactor.planner.objective import Assignment
from compactor.planner.problem import PodType, Problem, gpu_pods_before
from compactor.planner.usable import usable_change


@dataclass
class ConcreteMove:
    pod: Pod
    ptype: PodType
    source: int
    target: int


@dataclass
class ConcretePlacement:
    pod: Pod
    ptype: PodType
    target: int


def _pair(problem: Problem, ptype: PodType, final: dict[int, int], freed: set[int]) -> list[ConcreteMove]:
    """Pair the type's surplus nodes with its deficit nodes; any pairing is valid, pods being identical."""
    surplus = [(n, len(pods) - final.get(n, 0)) for n, pods in ptype.initial.items() if len(pods) > final.get(n, 0)]
    deficit = [(n, final[n] - len(ptype.initial.get(n, ()))) for n in final if final[n] > len(ptype.initial.get(n, ()))]
    surplus.sort(key=lambda item: (item[0] not in freed, problem.nodes[item[0]].node.name))
    deficit.sort(key=lambda item: (problem.nodes[item[0]].free_gpus_before, problem.nodes[item[0]].node.name))
    targets = [n for n, k in deficit for _ in range(k)]
    moves: list[ConcreteMove] = []
    for node, k in surplus:
        leaving = sorted(ptype.initial[node], key=lambda p: p.name)[:k]
        for pod in leaving:
            moves.append(ConcreteMove(pod, ptype, node, targets[len(moves)]))
    return moves


def loads_after(
    problem: Problem, moves: list[ConcreteMove], placements: list[ConcretePlacement]
) -> list[dict[str, int]]:
    loads = [dict(s.fixed) for s in problem.nodes]
    for ptype in problem.types:
        for node, pods in ptype.initial.items():
            _add(loads[node], ptype, len(pods))
    for move in moves:
        _add(loads[move.source], move.ptype, -1)
        _add(loads[move.target], move.ptype, 1)
    for placement in placements:
        _add(loads[placement.target], placement.ptype, 1)
    return loads


def _add(acc: dict[str, int], ptype: PodType, count: int) -> None:
    for r, v in ptype.items:
        acc[r] = acc.get(r, 0) + v * count


def prune_churn(
    problem: Problem, moves: list[ConcreteMove], placements: list[ConcretePlacement], freed: set[int]
) -> list[ConcreteMove]:
    """Drop moves that serve nothing: not a GPU pod leaving a freed node, and the pod could simply stay."""
    loads = loads_after(problem, moves, placements)
    kept: list[ConcreteMove] = []
    for move in moves:
        if move.ptype.uses_gpu and move.source in freed:
            kept.append(move)
            continue
        capacity = problem.nodes[move.source].capacity
        src = loads[move.source]
        if all(src.get(r, 0) + v <= capacity.get(r, 0) for r, v in move.ptype.requests.items()):
            before = _headroom(problem, move.source, src) + _headroom(problem, move.target, loads[move.target])
            _add(src, move.ptype, 1)
            _add(loads[move.target], move.ptype, -1)
            if _headroom(problem, move.source, src) + _headroom(problem, move.target, loads[move.target]) < before:
                # Shape mode: the move makes room for a target shape; undoing it would lose headroom.
                _add(src, move.ptype, -1)
                _add(loads[move.target], move.ptype, 1)
                kept.append(move)
        else:
            kept.append(move)
    return kept


def _headroom(problem: Problem, node: int, load: dict[str, int]) -> int:
    """Shape mode: copies of the target shapes that fit on ``node`` under ``load`` (0 outside shape mode)."""
    state = problem.nodes[node]
    if not problem.target_shapes or not state.is_target_pool:
        return 0
    total = 0
    for shape in problem.target_shapes:
        room = [(state.capacity.get(r, 0) - load.get(r, 0)) // amount for r, amount in shape.items() if amount]
        total += max(0, min(room)) if room else 0
    return total


def order_moves(
    problem: Problem, moves: list[ConcreteMove], freed: set[int], first: Collection[int] = ()
) -> tuple[list[ConcreteMove], list[ConcreteMove]]:
    """(execution order, moves no order can reach). Nodes drained for a pending pod (``first``) first: a pod waiting is
    what fragmentation costs now, so a run cut short by a cap or a window still places it (issue 42); then freed nodes
    with the fewest moves first (a partial run still frees nodes); a move only once its target has room. The executor
    evicts one pod at a time, so moves that only fit all at once (a cycle: each target waits for another move's source)
    cannot be carried out; they come back apart."""
    per_source: dict[int, int] = defaultdict(int)
    for move in moves:
        per_source[move.source] += 1
    preferred = sorted(
        moves,
        key=lambda m: (
            m.source not in first,
            m.source not in freed,
            per_source[m.source],
            problem.nodes[m.source].node.name,
            m.pod.name,
        ),
    )
    loads = loads_after(problem, [], [])
    ordered: list[ConcreteMove] = []
    remaining = preferred
    while remaining:
        at = next((i for i, m in enumerate(remaining) if _fits(problem, loads, m)), None)
        if at is None:
            return ordered, remaining
        pick = remaining.pop(at)
        _add(loads[pick.source], pick.ptype, -1)
        _add(loads[pick.target], pick.ptype, 1)
        ordered.append(pick)
    return ordered, []


def _fits(problem: Problem, loads: list[dict[str, int]], move: ConcreteMove) -> bool:
    capacity = problem.nodes[move.target].capacity
    acc = loads[move.target]
    return all(acc.get(r, 0) + v <= capacity.get(r, 0) for r, v in move.ptype.items)


def concretise(
    problem: Problem, assignment: Assignment, freed: set[int]
) -> tuple[list[ConcreteMove], list[ConcretePlacement]]:
    """The assignment's moves (churn pruned) in execution order, and its placements.

    Moves no one-at-a-time order can carry out are dropped, with whatever no longer serves a purpose or fits
    without them (the plan then frees less, but every step of it can run)."""
    moves, placements = pairs(problem, assignment, freed)
    ordered, stuck = order_moves(problem, moves, freed, {p.target for p in placements})
    while stuck:
        emptied = set(gpu_nodes_changed(problem, ordered, [])[0]) | (freed & _empty_before(problem))
        placements = _still_fitting(problem, ordered, placements)
        pruned = prune_churn(problem, ordered, placements, emptied)
        ordered, stuck = order_moves(problem, pruned, emptied, {p.target for p in placements})
    return ordered, placements


def executable(problem: Problem, assignment: Assignment, freed: set[int]) -> Assignment:
    """The assignment as the executor can carry it out: churn pruned, moves no one-at-a-time order reaches dropped."""
    moves, placements = concretise(problem, assignment, freed)
    counts = Assignment.unchanged(problem).counts
    for move in moves:
        counts[move.ptype.index][move.source] -= 1
        counts[move.ptype.index][move.target] = counts[move.ptype.index].get(move.target, 0) + 1
    placed: dict[int, dict[int, int]] = {}
    for placement in placements:
        per_node = placed.setdefault(placement.ptype.index, {})
        per_node[placement.target] = per_node.get(placement.target, 0) + 1
    return Assignment({t: {n: k for n, k in per.items() if k} for t, per in counts.items()}, placed)


def _empty_before(problem: Problem) -> set[int]:
    counts = gpu_pods_before(problem)
    return {s.index for s in problem.nodes if s.gpus and not counts[s.index]}


def _still_fitting(
    problem: Problem, moves: list[ConcreteMove], placements: list[ConcretePlacement]
) -> list[ConcretePlacement]:
    """Placements, in order, that still fit after ``moves``."""
    loads = loads_after(problem, moves, [])
    kept = []
    for placement in placements:
        capacity = problem.nodes[placement.target].capacity
        acc = loads[placement.target]
        if all(acc.get(r, 0) + v <= capacity.get(r, 0) for r, v in placement.ptype.requests.items()):
            _add(acc, placement.ptype, 1)
            kept.append(placement)
    return kept


def pairs(
    problem: Problem, assignment: Assignment, freed: set[int]
) -> tuple[list[ConcreteMove], list[ConcretePlacement]]:
    """The assignment as concrete moves (churn pruned, in no particular order) and placements."""
    moves: list[ConcreteMove] = []
    placements: list[ConcretePlacement] = []
    for ptype in problem.types:
        if ptype.pending:
            queue = sorted(ptype.pending_pods, key=lambda p: p.name)
            for node, count in sorted(assignment.placed.get(ptype.index, {}).items()):
                for _ in range(count):
                    placements.append(ConcretePlacement(queue.pop(0), ptype, node))
        else:
            moves.extend(_pair(problem, ptype, assignment.counts.get(ptype.index, {}), freed))
    return prune_churn(problem, moves, placements, freed), placements


def gpu_pods_after(
    problem: Problem, moves: Sequence[ConcreteMove], placements: Sequence[ConcretePlacement]
) -> list[int]:
    """Bound GPU pods per node (the snapshot's node order) once the moves and placements are made."""
    after = gpu_pods_before(problem)
    for move in moves:
        if move.ptype.uses_gpu:
            after[move.source] -= 1
            after[move.target] += 1
    for placement in placements:
        if placement.ptype.uses_gpu:
            after[placement.target] += 1
    return after


def gpu_nodes_changed(
    problem: Problem, moves: list[ConcreteMove], placements: list[ConcretePlacement]
) -> tuple[list[int], list[int]]:
    """(freed, filled): GPU nodes that ran a GPU pod before and none after, and the reverse."""
    before = gpu_pods_before(problem)
    after = gpu_pods_after(problem, moves, placements)
    gpu_nodes = [s for s in problem.nodes if s.gpus]
    freed = [s.index for s in gpu_nodes if before[s.index] > 0 and after[s.index] == 0]
    filled = [s.index for s in gpu_nodes if before[s.index] == 0 and after[s.index] > 0]
    return freed, filled


def usable_freed(problem: Problem, moves: list[ConcreteMove], placements: list[ConcretePlacement]) -> int:
    """Net usable GPUs the moves and placements make whole-free (``usable.usable_change``)."""
    freed, filled = gpu_nodes_changed(problem, moves, placements)
    if not problem.usage_shapes:
        return sum(problem.nodes[i].gpus for i in freed) - sum(problem.nodes[i].gpus for i in filled)
    return usable_change(problem, loads_after(problem, moves, placements), freed, filled)


def uses_gpu(requests: dict[str, int]) -> bool:
    return any(is_gpu_resource(r) for r in requests)

"""Greedy placement over a ``Problem``: the CP-SAT warm start and the greedy-drain baseline.

Works on per-type counts: ``counts[type][node]`` pods of a type end on a node (an ``objective.Assignment``).

Imports: the problem, the objective, the loads and chains; no solver.
"""

from __future__ import annotations

from collections.abc import Iterable

from compactor.planner.objective import Assignment
from compactor.planner.problem import PodType, Problem
from compactor.planner.search.chains import Counts, Move, evictions, make_room, relocate, undo
from compactor.planner.search.loads import Fit, Loads, best_target


def _drain(
    problem: Problem, loads: Loads, counts: Counts, node: int, avoid: set[int], *, chains: bool = True
) -> list[Move] | None:
    """Move every movable GPU pod off ``node`` (``chains``: by a chain where no node fits it as it is): the moves, or
    None (everything undone)."""
    done: list[Move] = []
    avoiding = avoid | {node}
    for index, count in sorted(loads.gpu_types[node].items()):  # in type order, as counted before any moved
        ptype = problem.types[index]
        for _ in range(count):
            moved = relocate(problem, loads, counts, ptype, node, avoiding, chains=chains)
            if moved is None:
                undo(loads, done, counts)
                return None
            done.extend(moved)
    return done


def _drain_order(problem: Problem, loads: Loads) -> list[int]:
    """Least-used freeable GPU nodes first (fewest GPU pods, then most GPUs freed)."""
    candidates = [s for s in problem.nodes if s.can_empty and s.gpus and loads.gpu_pods[s.index] > 0]
    return [s.index for s in sorted(candidates, key=lambda s: (loads.gpu_pods[s.index], -s.gpus, s.node.name))]


def _place_pending(
    problem: Problem, loads: Loads, assignment: Assignment, drained: set[int], *, chains: bool, fit: Fit
) -> None:
    for ptype in sorted((t for t in problem.types if t.pending), key=lambda t: (-t.weight, t.index)):
        for _ in ptype.pending_pods:
            found = _pending_target(problem, loads, assignment, ptype, drained, chains=chains, fit=fit)
            if found is None:
                break
            target, moved = found
            loads.move(ptype, None, target, assignment.placed)
            if not loads.within_limits():  # the moves it took pass a move limit: not this pod, nor more of its type
                _unplace(loads, ptype, target, assignment.placed)
                undo(loads, moved, assignment.counts)
                break
            drained.add(target)


def _unplace(loads: Loads, ptype: PodType, node: int, placed: Counts) -> None:
    per_node = placed[ptype.index]
    per_node[node] -= 1
    if not per_node[node]:
        del per_node[node]
        if not per_node:
            del placed[ptype.index]
    loads._add(ptype, node, -1)


ROOM_NODES = 512  # nodes tried per pending pod to make room on, those needing the fewest evictions first (a bound
#                   on the work when none can take it: a try that fails costs well under a millisecond)


def _pending_target(
    problem: Problem,
    loads: Loads,
    assignment: Assignment,
    ptype: PodType,
    drained: set[int],
    *,
    chains: bool,
    fit: Fit,
) -> tuple[int, list[Move]] | None:
    """Where the next pod of a pending type goes, and the moves that made room for it (none when it fits as it is):
    the nodes whose room takes the fewest evictions (GPU pods and pods without GPUs alike) are tried first."""
    fitting = [n for n in ptype.targets if loads.fits(ptype, n)]
    if fitting:
        return min(fitting, key=lambda n: (loads.free_gpus(problem.nodes[n]), problem.nodes[n].node.name)), []
    for node in _room_order(problem, loads, ptype, drained)[:ROOM_NODES]:
        moved = make_room(problem, loads, assignment.counts, ptype.items, node, drained, chains=chains, fit=fit)
        if moved is None:
            continue
        if loads.fits(ptype, node):
            return node, moved
        undo(loads, moved, assignment.counts)
    return None


def _room_order(problem: Problem, loads: Loads, ptype: PodType, drained: set[int]) -> list[int]:
    """The pending type's targets where some movable pods could make room, fewest evictions first (then cheapest)."""
    ranked = []
    for node in ptype.targets:
        if node in drained:
            continue
        leaving = evictions(problem, loads, node, ptype.items)
        if leaving is not None:
            cost = sum(problem.types[t].cost for t in leaving)
            ranked.append((len(leaving), cost, problem.nodes[node].node.name, node))
    return [node for *_, node in sorted(ranked)]


class Drainer:
    """Drains whole nodes one at a time (best fit, chains where needed) from a start assignment, which ``assignment``
    follows live."""

    def __init__(self, problem: Problem, start: Assignment) -> None:
        self.problem = problem
        self.assignment = start.copy()
        self.loads = Loads(problem, self.assignment, tally=True)
        self.protected = {n for per_node in self.assignment.placed.values() for n in per_node}

    def drain(self, node: int) -> list[Move] | None:
        """Empty ``node`` of GPU pods: the moves, or None when it cannot be (nothing changes)."""
        if node in self.protected or self.loads.gpu_pods[node] == 0:
            return None
        moved = _drain(self.problem, self.loads, self.assignment.counts, node, self.protected)
        if moved is not None:
            self.protected.add(node)
        return moved


def greedy(
    problem: Problem,
    *,
    drain: bool = True,
    order: Iterable[int] | None = None,
    chains: bool = True,
    fit: Fit = best_target,
) -> Assignment:
    """Place pending pods (making room for them if needed), then drain whole nodes greedily. ``chains``: a displaced GPU
    pod may go where pods without GPUs first make room for it (``chains.py``); off, only where it fits as it is (the
    greedy-drain baseline, as cluster-autoscaler's scale-down). ``fit``: where a moved pod goes (best fit; first fit in the
    chain baseline).

    Within the move limits (``objective.within_limits``): a placement or a drain that would pass one is taken back and the
    next is tried, so a capped greedy plan is the uncapped one's steps that fit (the fallback whatever the solver does)."""
    assignment = Assignment.unchanged(problem)
    loads = Loads(problem, assignment, tally=True)
    protected: set[int] = set()
    _place_pending(problem, loads, assignment, protected, chains=chains, fit=fit)
    if drain:
        for node in list(order) if order is not None else _drain_order(problem, loads):
            if node in protected or loads.gpu_pods[node] == 0:
                continue
            moved = _drain(problem, loads, assignment.counts, node, protected, chains=chains)
            if moved is None:
                continue
            if loads.within_limits():
                protected.add(node)
            else:
                undo(loads, moved, assignment.counts)
    return assignment


def prune(problem: Problem, assignment: Assignment, *, keep_freed: bool = True) -> Assignment:
    """The same plan without moves that serve nothing: a moved pod goes back to a node it left whenever that node still
    has room and (``keep_freed``) is not one the plan frees (GPU pods only). Pending placements, freed nodes and every
    limit are kept; each undone move only lowers load where the pod had arrived, so the plan stays valid and costs
    strictly less. Repeated while it undoes something: a GPU pod gone home may leave room for the pods a chain moved off
    its target to come home too. ``keep_freed`` false: freed nodes take their pods back too, so what is left is the moves
    that place pending pods (the trade-off curve's first point, from a plan that frees nodes).

    A solver stopped by its time limit returns whatever incumbent it holds; this keeps the user from paying for its churn.
    """
    pruned = assignment.copy()
    loads = Loads(problem, pruned)
    kept_free = _gpu_free_nodes(problem, loads) if keep_freed else set()
    for _ in range(PRUNE_PASSES):
        if not _prune_pass(problem, pruned, loads, kept_free):
            break
    return pruned


PRUNE_PASSES = 4  # chains are one hop: a second pass brings their pods home, further ones rarely find anything


def _prune_pass(problem: Problem, pruned: Assignment, loads: Loads, kept_free: set[int]) -> bool:
    """One pass of ``prune`` over every type: did it undo any move?"""
    undone = False
    for ptype in problem.types:
        if ptype.pending:
            continue
        final = pruned.counts.setdefault(ptype.index, {})
        arrivals = [n for n, k in sorted(final.items()) if k > len(ptype.initial.get(n, ()))]
        for source, pods in sorted(ptype.initial.items()):
            if ptype.uses_gpu and source in kept_free:
                continue
            while final.get(source, 0) < len(pods) and arrivals and loads.fits(ptype, source):
                target = arrivals[-1]
                loads.move(ptype, target, source, pruned.counts)
                undone = True
                if final[target] <= len(ptype.initial.get(target, ())):
                    arrivals.pop()
    return undone


def _gpu_free_nodes(problem: Problem, loads: Loads) -> set[int]:
    return {s.index for s in problem.nodes if s.gpus and not loads.holds_gpu_pods(s.index)}

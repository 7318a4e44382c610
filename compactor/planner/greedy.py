"""Greedy placement over a ``Problem``: the CP-SAT warm start and the greedy-drain baseline.

Works on per-type counts: ``counts[type][node]`` pods of a type end on a node (an ``objective.Assignment``).

Imports: the problem and the objective only; no solver.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from compactor.model.resources import is_gpu_resource
from compactor.planner.objective import Assignment
from compactor.planner.problem import NodeState, PodType, Problem, holds_gpu_load


def limited(problem: Problem) -> bool:
    """Does any move limit apply (maxMoves in total, per node, per namespace, minGainPerMove)?"""
    cfg = problem.settings
    return (
        cfg.max_moves is not None
        or cfg.max_moves_per_node is not None
        or cfg.max_moves_per_namespace is not None
        or cfg.min_gain_per_move > 0
    )


class _Tally:
    """What ``objective.within_limits`` counts of an assignment, kept up to date move by move (a check is then O(1)):
    pods out of each (type, node) they started on, by node and namespace, and the GPUs of nodes left with no GPU pod."""

    def __init__(self, problem: Problem, assignment: Assignment) -> None:
        cfg = problem.settings
        self.max_moves, self.per_node_cap, self.per_namespace_cap = (
            cfg.max_moves,
            cfg.max_moves_per_node,
            cfg.max_moves_per_namespace,
        )
        self.per_move = round(cfg.min_gain_per_move * 100)
        self.empty_before = problem.empty_before_gpus
        self.total = 0
        self.per_node: dict[int, int] = {}
        self.per_namespace: dict[str, int] = {}
        for ptype in problem.types:
            if ptype.pending:
                continue
            final = assignment.counts.get(ptype.index, {})
            for node, pods in ptype.initial.items():
                self._count(ptype, node, max(0, len(pods) - final.get(node, 0)))
        # Freed as ``objective.empty_nodes`` counts: every such node starts with no GPU pod, and ``_Loads`` reports each change.
        self.emptiable = {
            s.index: s.gpus for s in problem.nodes if s.gpus and s.can_empty and not holds_gpu_load(s.fixed)
        }
        self.freed = sum(self.emptiable.values())

    def _count(self, ptype: PodType, node: int, out: int) -> None:
        if out:
            self.total += out
            self.per_node[node] = self.per_node.get(node, 0) + out
            self.per_namespace[ptype.namespace] = self.per_namespace.get(ptype.namespace, 0) + out

    def final_changed(self, ptype: PodType, node: int, before: int, after: int) -> None:
        initial = len(ptype.initial.get(node, ()))
        if initial:
            self._count(ptype, node, max(0, initial - after) - max(0, initial - before))

    def gpu_pods_changed(self, node: int, before: int, after: int) -> None:
        gpus = self.emptiable.get(node)
        if gpus is not None and (before == 0) != (after == 0):
            self.freed += gpus if after == 0 else -gpus

    def within(self) -> bool:
        if self.max_moves is not None and self.total > self.max_moves:
            return False
        if self.per_node_cap is not None and any(k > self.per_node_cap for k in self.per_node.values()):
            return False
        if self.per_namespace_cap is not None and any(k > self.per_namespace_cap for k in self.per_namespace.values()):
            return False
        return self.per_move <= 0 or 100 * (self.freed - self.empty_before) >= self.per_move * self.total


class _Loads:
    """Per-node load under an assignment, and the GPU nodes ordered by free GPUs for best-fit queries."""

    def __init__(self, problem: Problem, assignment: Assignment, *, tally: bool = False) -> None:
        self.problem = problem
        self.tally = _Tally(problem, assignment) if tally and limited(problem) else None
        self.load: list[dict[str, int]] = [dict(s.fixed) for s in problem.nodes]
        self.capacity: list[dict[str, int]] = [s.capacity for s in problem.nodes]
        self.gpu_pods: list[int] = [0] * len(problem.nodes)
        # Node -> movable GPU types on it (index -> pods): a drain looks at these only, not at every type.
        self.gpu_types: list[dict[int, int]] = [{} for _ in problem.nodes]
        self.fixed_gpu = [holds_gpu_load(s.fixed) for s in problem.nodes]
        self.order: list[tuple[float, str, int]] = []  # (free GPUs, name, node) for GPU nodes, ascending
        self.key: dict[int, tuple[float, str, int]] = {}
        for ptype in problem.types:
            source = assignment.placed if ptype.pending else assignment.counts
            for node, count in source.get(ptype.index, {}).items():
                self._add(ptype, node, count)
        for state in problem.nodes:
            if state.gpus:
                self.key[state.index] = (self.free_gpus(state), state.node.name, state.index)
        self.order = sorted(self.key.values())
        self.targets: dict[int, frozenset[int]] = {}
        self.min_equivalent: dict[str, float] = {}
        self.needs: dict[int, float] = {}
        for state in problem.nodes:
            for resource, eq in state.node.gpu.gpu_equivalent:
                self.min_equivalent[resource] = min(eq, self.min_equivalent.get(resource, eq))

    def needs_at_least(self, ptype: PodType) -> float:
        """A lower bound on the free GPUs a node needs to take one pod of this type."""
        found = self.needs.get(ptype.index)
        if found is None:
            found = self.needs[ptype.index] = sum(
                v * self.min_equivalent.get(r, 0.0) for r, v in ptype.items if is_gpu_resource(r)
            )
        return found

    def free_gpus(self, state: NodeState) -> float:
        acc = self.load[state.index]
        return sum(max(0, state.capacity.get(r, 0) - acc.get(r, 0)) * eq for r, eq in state.node.gpu.gpu_equivalent)

    def _add(self, ptype: PodType, node: int, count: int) -> None:
        acc = self.load[node]
        for r, v in ptype.items:
            acc[r] = acc.get(r, 0) + v * count
        if ptype.uses_gpu:
            if self.tally is not None:
                self.tally.gpu_pods_changed(node, self.gpu_pods[node], self.gpu_pods[node] + count)
            self.gpu_pods[node] += count
            if not ptype.pending:
                on = self.gpu_types[node]
                left = on.get(ptype.index, 0) + count
                if left:
                    on[ptype.index] = left
                else:
                    on.pop(ptype.index, None)
        old = self.key.get(node)
        if old is not None and self.order:
            self.order.pop(bisect.bisect_left(self.order, old))
            new = (self.free_gpus(self.problem.nodes[node]), old[1], node)
            self.key[node] = new
            bisect.insort(self.order, new)

    def fits(self, ptype: PodType, node: int) -> bool:
        acc, capacity = self.load[node], self.capacity[node]
        for r, v in ptype.items:  # noqa: SIM110 (a hot loop: all() over a generator is about twice as slow)
            if acc.get(r, 0) + v > capacity.get(r, 0):
                return False
        return True

    def move(self, ptype: PodType, src: int | None, dst: int, counts: dict[int, dict[int, int]]) -> None:
        per_node = counts.setdefault(ptype.index, {})
        if src is not None:
            per_node[src] -= 1
            self._add(ptype, src, -1)
            if self.tally is not None:
                self.tally.final_changed(ptype, src, per_node[src] + 1, per_node[src])
        per_node[dst] = per_node.get(dst, 0) + 1
        self._add(ptype, dst, 1)
        if self.tally is not None and not ptype.pending:
            self.tally.final_changed(ptype, dst, per_node[dst] - 1, per_node[dst])

    def within_limits(self) -> bool:
        """``objective.within_limits`` of the assignment these loads follow (kept up to date as pods move)."""
        return self.tally is None or self.tally.within()

    def undo(self, moved: list[tuple[PodType, int]], node: int, counts: dict[int, dict[int, int]]) -> None:
        """Take back the moves of a drain of ``node`` (``_drain``'s list), last first."""
        for ptype, dst in reversed(moved):
            self.move(ptype, dst, node, counts)

    def holds_gpu_pods(self, node: int) -> bool:
        return self.gpu_pods[node] > 0 or self.fixed_gpu[node]

    def target_set(self, ptype: PodType) -> frozenset[int]:
        found = self.targets.get(ptype.index)
        if found is None:
            found = frozenset(ptype.targets) - ptype.stay_only
            self.targets[ptype.index] = found
        return found


def _best_target(loads: _Loads, ptype: PodType, avoid: set[int]) -> int | None:
    """Best fit: among nodes already holding GPU pods, the one with the fewest free GPUs that still fits."""
    allowed = loads.target_set(ptype)
    if not ptype.uses_gpu:
        fitting = [n for n in allowed if n not in avoid and loads.fits(ptype, n)]
        return min(
            fitting,
            key=lambda n: (loads.free_gpus(loads.problem.nodes[n]), loads.problem.nodes[n].node.name),
            default=None,
        )
    order, gpu_pods, fixed_gpu = loads.order, loads.gpu_pods, loads.fixed_gpu
    start = bisect.bisect_left(order, (loads.needs_at_least(ptype) - 1e-9,))
    for i in range(start, len(order)):  # ascending free GPUs: the first that fits is the best fit
        node = order[i][2]
        if (
            node in allowed
            and node not in avoid
            and (gpu_pods[node] > 0 or fixed_gpu[node])
            and loads.fits(ptype, node)
        ):
            return node
    return None


def _drain(
    problem: Problem, loads: _Loads, counts: dict[int, dict[int, int]], node: int, avoid: set[int]
) -> list[tuple[PodType, int]] | None:
    """Move every movable GPU pod off ``node``: the (type, target) of each pod moved, or None (everything undone)."""
    done: list[tuple[PodType, int]] = []
    avoiding = avoid | {node}
    for index, count in sorted(loads.gpu_types[node].items()):  # in type order, as counted before any moved
        ptype = problem.types[index]
        for _ in range(count):
            target = _best_target(loads, ptype, avoiding)
            if target is None:
                loads.undo(done, node, counts)
                return None
            loads.move(ptype, node, target, counts)
            done.append((ptype, target))
    return done


def _drain_order(problem: Problem, loads: _Loads) -> list[int]:
    """Least-used freeable GPU nodes first (fewest GPU pods, then most GPUs freed)."""
    candidates = [s for s in problem.nodes if s.can_empty and s.gpus and loads.gpu_pods[s.index] > 0]
    return [s.index for s in sorted(candidates, key=lambda s: (loads.gpu_pods[s.index], -s.gpus, s.node.name))]


def _place_pending(problem: Problem, loads: _Loads, assignment: Assignment, drained: set[int]) -> None:
    for ptype in sorted((t for t in problem.types if t.pending), key=lambda t: (-t.weight, t.index)):
        for _ in ptype.pending_pods:
            found = _pending_target(problem, loads, assignment, ptype, drained)
            if found is None:
                break
            target, moved = found
            loads.move(ptype, None, target, assignment.placed)
            if not loads.within_limits():  # the moves it took pass a move limit: not this pod, nor more of its type
                _unplace(loads, ptype, target, assignment.placed)
                loads.undo(moved, target, assignment.counts)
                break
            drained.add(target)


def _unplace(loads: _Loads, ptype: PodType, node: int, placed: dict[int, dict[int, int]]) -> None:
    per_node = placed[ptype.index]
    per_node[node] -= 1
    if not per_node[node]:
        del per_node[node]
        if not per_node:
            del placed[ptype.index]
    loads._add(ptype, node, -1)


def _pending_target(
    problem: Problem, loads: _Loads, assignment: Assignment, ptype: PodType, drained: set[int]
) -> tuple[int, list[tuple[PodType, int]]] | None:
    """Where the next pod of a pending type goes, and the moves of the drain that made room for it (if one did)."""
    fitting = [n for n in ptype.targets if loads.fits(ptype, n)]
    if fitting:
        return min(fitting, key=lambda n: (loads.free_gpus(problem.nodes[n]), problem.nodes[n].node.name)), []
    for node in sorted(ptype.targets, key=lambda n: (loads.gpu_pods[n], problem.nodes[n].node.name)):
        if not problem.nodes[node].can_empty or node in drained:
            continue
        if _fits_once_drained(problem, loads, assignment, ptype, node):
            moved = _drain(problem, loads, assignment.counts, node, drained | {node})
            if moved is not None:
                return node, moved
    return None


def _fits_once_drained(problem: Problem, loads: _Loads, assignment: Assignment, ptype: PodType, node: int) -> bool:
    """Would ``ptype`` fit on ``node`` after its movable GPU pods leave?"""
    acc = dict(loads.load[node])
    for index, count in loads.gpu_types[node].items():
        for r, v in problem.types[index].items:
            acc[r] = acc.get(r, 0) - v * count
    capacity = problem.nodes[node].capacity
    return all(acc.get(r, 0) + v <= capacity.get(r, 0) for r, v in ptype.items)


class Drainer:
    """Drains whole nodes one at a time (best fit) from a start assignment, which ``assignment`` follows live."""

    def __init__(self, problem: Problem, start: Assignment) -> None:
        self.problem = problem
        self.assignment = start.copy()
        self.loads = _Loads(problem, self.assignment, tally=True)
        self.protected = {n for per_node in self.assignment.placed.values() for n in per_node}

    def drain(self, node: int) -> list[tuple[PodType, int]] | None:
        """Empty ``node`` of GPU pods: each pod's (type, target), or None when it cannot be (nothing changes)."""
        if node in self.protected or self.loads.gpu_pods[node] == 0:
            return None
        moved = _drain(self.problem, self.loads, self.assignment.counts, node, self.protected)
        if moved is not None:
            self.protected.add(node)
        return moved


def greedy(problem: Problem, *, drain: bool = True, order: Iterable[int] | None = None) -> Assignment:
    """Place pending pods (draining a node for them if needed), then drain whole nodes greedily.

    Within the move limits (``objective.within_limits``): a placement or a drain that would pass one is taken back and the
    next is tried, so a capped greedy plan is the uncapped one's steps that fit (the fallback whatever the solver does)."""
    assignment = Assignment.unchanged(problem)
    loads = _Loads(problem, assignment, tally=True)
    protected: set[int] = set()
    _place_pending(problem, loads, assignment, protected)
    if drain:
        for node in list(order) if order is not None else _drain_order(problem, loads):
            if node in protected or loads.gpu_pods[node] == 0:
                continue
            moved = _drain(problem, loads, assignment.counts, node, protected)
            if moved is None:
                continue
            if loads.within_limits():
                protected.add(node)
            else:
                loads.undo(moved, node, assignment.counts)
    return assignment


def prune(problem: Problem, assignment: Assignment) -> Assignment:
    """The same plan without moves that serve nothing: a moved pod goes back to a node it left whenever that node still
    has room and is not one the plan frees (GPU pods only). Pending placements, freed nodes and every limit are kept;
    each undone move only lowers load where the pod had arrived, so the plan stays valid and costs strictly less.

    A solver stopped by its time limit returns whatever incumbent it holds; this keeps the user from paying for its churn.
    """
    pruned = assignment.copy()
    loads = _Loads(problem, pruned)
    kept_free = _gpu_free_nodes(problem, loads)
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
                if final[target] <= len(ptype.initial.get(target, ())):
                    arrivals.pop()
    return pruned


def _gpu_free_nodes(problem: Problem, loads: _Loads) -> set[int]:
    return {s.index for s in problem.nodes if s.gpus and not loads.holds_gpu_pods(s.index)}

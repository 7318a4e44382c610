"""Per-node load under an assignment, kept up to date pod by pod: what greedy placement, chains and the
large-neighbourhood search read (which node fits a pod, which movable pods a node holds, the move limits' tally).

Imports: the problem and the objective only; no solver.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

from compactor.model.resources import is_gpu_resource
from compactor.planner.objective import Assignment
from compactor.planner.problem import NodeState, PodType, Problem, holds_gpu_load


def limited(problem: Problem) -> bool:
    """Does any move limit apply (maxMoves in total, per node, per namespace, minGainPerMove)?"""
    return problem.limits.any


class Tally:
    """What ``objective.within_limits`` counts of an assignment, kept up to date move by move (a check is then O(1)):
    pods out of each (type, node) they started on, by node and namespace, and the GPUs of nodes left with no GPU pod."""

    def __init__(self, problem: Problem, assignment: Assignment) -> None:
        self.limits = problem.limits
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
        # Freed as ``objective.empty_nodes`` counts: every such node starts with no GPU pod, and ``Loads`` reports each change.
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
        gained = self.freed - self.empty_before
        return self.limits.within(self.total, self.per_node.values(), self.per_namespace.values(), gained)


class Loads:
    """Per-node load under an assignment, and the GPU nodes ordered by free GPUs for best-fit queries."""

    def __init__(self, problem: Problem, assignment: Assignment, *, tally: bool = False) -> None:
        self.problem = problem
        self.tally = Tally(problem, assignment) if tally and limited(problem) else None
        self.load: list[dict[str, int]] = [dict(s.fixed) for s in problem.nodes]
        self.capacity: list[dict[str, int]] = [s.capacity for s in problem.nodes]
        self.gpu_pods: list[int] = [0] * len(problem.nodes)
        # Node -> movable GPU types on it (index -> pods): a drain looks at these only, not at every type.
        self.gpu_types: list[dict[int, int]] = [{} for _ in problem.nodes]
        # Node -> the movable types without GPUs on it: what a chain moves to make room for CPU and memory.
        self.other_types: list[dict[int, int]] = [{} for _ in problem.nodes]
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
        self.by_name = sorted(range(len(problem.nodes)), key=lambda n: problem.nodes[n].node.name)
        # Nodes without GPUs, the roomiest first (as ``problem``'s ranking of targets for pods without GPUs).
        self.plain = [
            s.index
            for s in sorted((s for s in problem.nodes if not s.node.is_gpu_node), key=lambda s: (-s.spare, s.node.name))
        ]
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
            on = (self.gpu_types if ptype.uses_gpu else self.other_types)[node]
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


Fit = Callable[[Loads, PodType, set[int]], int | None]  # where one pod goes: ``best_target`` or ``first_fit``


def best_target(loads: Loads, ptype: PodType, avoid: set[int]) -> int | None:
    """Best fit. A GPU pod: among nodes already holding GPU pods, the one with the fewest free GPUs that still fits. A pod
    without GPUs: a node without GPUs first (the roomiest before the plan), else the GPU node with the fewest free GPUs: its CPU and memory
    are the least wanted by GPU pods there."""
    allowed = loads.target_set(ptype)
    if not ptype.uses_gpu:
        for node in loads.plain:
            if node in allowed and node not in avoid and loads.fits(ptype, node):
                return node
        return _first_fitting(loads, ptype, allowed, avoid, 0.0, busy=False)
    return _first_fitting(loads, ptype, allowed, avoid, loads.needs_at_least(ptype), busy=True)


def first_fit(loads: Loads, ptype: PodType, avoid: set[int]) -> int | None:
    """First fit by node name (the chain baseline's rule): a pod without GPUs on nodes without GPUs first; a GPU pod
    only on nodes already holding GPU pods."""
    allowed = loads.target_set(ptype)
    nodes = loads.problem.nodes
    if not ptype.uses_gpu:
        for node in loads.by_name:
            if node in allowed and node not in avoid and not nodes[node].node.is_gpu_node and loads.fits(ptype, node):
                return node
    for node in loads.by_name:
        if (
            node in allowed
            and node not in avoid
            and nodes[node].node.is_gpu_node
            and (not ptype.uses_gpu or loads.holds_gpu_pods(node))
            and loads.fits(ptype, node)
        ):
            return node
    return None


def _first_fitting(
    loads: Loads, ptype: PodType, allowed: frozenset[int], avoid: set[int], needs: float, *, busy: bool
) -> int | None:
    """The GPU node with the fewest free GPUs (at least ``needs``) that fits a pod of ``ptype``; ``busy``: only nodes
    already holding GPU pods (filling a free node costs free capacity)."""
    order, gpu_pods, fixed_gpu = loads.order, loads.gpu_pods, loads.fixed_gpu
    start = bisect.bisect_left(order, (needs - 1e-9,))
    for i in range(start, len(order)):  # ascending free GPUs: the first that fits is the best fit
        node = order[i][2]
        if (
            node in allowed
            and node not in avoid
            and (not busy or gpu_pods[node] > 0 or fixed_gpu[node])
            and loads.fits(ptype, node)
        ):
            return node
    return None

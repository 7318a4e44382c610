"""MIG re-partitioning: cut whole-free MIG-capable nodes into a named layout that hosts pending MIG pods.

Runs on the plan's chosen point, after its moves and placements are known. A node may be
re-cut only when no GPU pod is left on it after the plan (mig-manager does not evict, and
every GPU's geometry may change); it takes the named layout (``nvidia.com/mig.config``)
that hosts the most still-pending MIG pods (ties: the layout closest to the pool's running
mix, then the name), and only if it hosts at least one. Pending pods are taken by priority,
each only where its own rules (taints, selectors, affinity, volumes) allow.

Imports: ``compactor.model`` (an idle node is re-cut only when that lowers the expected fragmentation of its free
GPUs: ``model.fragments``, the formula the figures use), ``compactor.settings``, the problem, solution, mig_advice; no
solver and no figures.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from compactor.model.fragments import idle_fragmentation_rate
from compactor.model.gpu import MIG_CONFIG_LABEL
from compactor.model.migparted import Layouts, find_mig_parted, is_mig_capable, recut_node
from compactor.model.resources import is_gpu_resource, is_mig_resource
from compactor.model.shapes import ReferenceShape
from compactor.model.types import Node, Pod, Snapshot
from compactor.planner.mig_advice import overlap, profile_mix
from compactor.planner.problem import NodeState, PodType, Problem
from compactor.planner.solution import ConcreteMove, ConcretePlacement, gpu_pods_after
from compactor.settings.origins import Settings

log = logging.getLogger("compactor.planner")


@dataclass
class Recut:
    node: int
    from_config: str
    to_config: str
    allocatable: dict[str, int]  # the GPU resources the node advertises once cut
    placements: list[ConcretePlacement] = field(default_factory=list)
    why: str = ""  # for a re-cut that hosts no pending pod: what it improves

    def reason(self, problem: Problem) -> str:
        name = problem.nodes[self.node].node.name
        if not self.placements:
            return f"{name} runs no GPU pod after the plan; {self.why}"
        pods = ", ".join(p.pod.key for p in self.placements)
        return f"{name} runs no GPU pod after the plan; {self.to_config} hosts pending {pods}"


def mig_parted_for(snapshot: Snapshot, settings: Settings) -> Layouts | None:
    """The mig-parted config the planner may re-cut with (only when mig.repartition is on)."""
    if not settings.mig.repartition:
        return None
    parted = find_mig_parted(snapshot.config_maps, settings.mig.config_map, namespace=settings.mig.operator_namespace)
    if parted is None:
        log.warning(
            "mig.repartition is on but no mig-parted ConfigMap was found: no node is re-cut",
            extra={"configMap": settings.mig.config_map or "custom-/default-mig-parted-config"},
        )
    return parted


def plan_recuts(
    problem: Problem, parted: Layouts, moves: Sequence[ConcreteMove], placements: Sequence[ConcretePlacement]
) -> list[Recut]:
    """Re-cuts (each with the pending pods it hosts) for the plan's whole-free MIG-capable nodes."""
    waiting = waiting_mig_pods(problem, placements)
    if not waiting:
        return []
    busy = _gpu_busy_after(problem, moves, placements)
    mixes: dict[str, dict[str, float]] = {}  # pool -> running mix, computed once per pool
    recuts: list[Recut] = []
    for state in sorted(problem.nodes, key=lambda s: s.node.name):
        if not waiting:
            break
        if state.index in busy or not _recuttable(state):
            continue
        if state.node.pool not in mixes:
            mixes[state.node.pool] = _running_mix(problem, state)
        best = _best_layout(problem, parted, state, waiting, mixes[state.node.pool])
        if best is not None:
            recuts.append(best)
            placed = {id(p.pod) for p in best.placements}
            waiting = [(t, pod) for t, pod in waiting if id(pod) not in placed]
    return recuts


def plan_rebalance(
    problem: Problem,
    parted: Layouts,
    moves: Sequence[ConcreteMove],
    placements: Sequence[ConcretePlacement],
    taken: Sequence[Recut],
    shapes: Sequence[ReferenceShape],
    min_gain: float,
) -> list[Recut]:
    """Re-cuts of idle MIG-capable nodes (no GPU pod after the plan, none cut for pending pods) into the layout whose
    free slices best fit the workload's request shapes: made when the expected fragmentation rate of the node's free
    capacity (the headline figure, by ``model.fragments``' formula) drops by at least ``min_gain``."""
    busy = _gpu_busy_after(problem, moves, placements) | {r.node for r in taken}
    found = []
    for state in sorted(problem.nodes, key=lambda s: s.node.name):
        if state.index in busy or not _recuttable(state):
            continue
        now = _idle_rate(state.node, dict(state.node.allocatable), shapes)
        options = [
            (rate, name, cap)
            for name in parted.applicable(state.node)
            if name != state.node.labels.get(MIG_CONFIG_LABEL, "")
            for cap in [parted.capacity(name, state.node) or {}]
            if (rate := _idle_rate(state.node, cap, shapes)) is not None
        ]
        if now is None or not options:
            continue
        rate, name, cap = min(options, key=lambda o: (o[0], o[1]))
        if now - rate >= min_gain:
            why = f"{name} lowers the expected fragmentation of its free GPUs against the workload's shapes from {now:.0%} to {rate:.0%}"
            found.append(Recut(state.index, state.node.labels.get(MIG_CONFIG_LABEL, ""), name, cap, [], why))
    return found


def _idle_rate(node: Node, allocatable: dict[str, int], shapes: Sequence[ReferenceShape]) -> float | None:
    """The fragmentation rate of ``node`` running nothing, were its GPU resources ``allocatable``."""
    return idle_fragmentation_rate(recut_node(node, allocatable), shapes)


def _recuttable(state: NodeState) -> bool:
    return is_mig_capable(state.node) and state.is_target_pool and state.gpus > 0


def waiting_mig_pods(problem: Problem, placements: Sequence[ConcretePlacement]) -> list[tuple[PodType, Pod]]:
    """Pending MIG pods the plan's placements leave waiting, highest priority first."""
    placed = {p.pod.key for p in placements}
    waiting = [
        (t, pod)
        for t in problem.types
        if t.pending
        for pod in t.pending_pods
        if pod.key not in placed and any(is_mig_resource(r) for r in t.requests)
    ]
    return sorted(waiting, key=lambda item: (-item[0].weight, item[1].key))


def _gpu_busy_after(
    problem: Problem, moves: Sequence[ConcreteMove], placements: Sequence[ConcretePlacement]
) -> set[int]:
    """Nodes that run a GPU pod after the plan (staying, arriving or placed)."""
    return {i for i, count in enumerate(gpu_pods_after(problem, moves, placements)) if count > 0}


def _best_layout(
    problem: Problem, parted: Layouts, state: NodeState, waiting: list[tuple[PodType, Pod]], running: dict[str, float]
) -> Recut | None:
    """The layout hosting the most waiting pods (ties: by name); the current one is no re-cut, and pods it could host
    would have been placed by the plan already."""
    current = state.node.labels.get(MIG_CONFIG_LABEL, "")
    options = []
    for name in parted.applicable(state.node):
        if name == current:
            continue
        allocatable = parted.capacity(name, state.node) or {}
        recut = Recut(state.index, current, name, allocatable, _fill(problem, state, allocatable, waiting))
        if recut.placements:
            options.append(recut)
    # Equal counts: the layout closest to the pool's running MIG pods, so the re-cut does not fragment it further.
    return min(
        options,
        key=lambda r: (-len(r.placements), -overlap(profile_mix(r.allocatable, state.node), running), r.to_config),
        default=None,
    )


def _running_mix(problem: Problem, state: NodeState) -> dict[str, float]:
    """The MIG profile mix (in GPU shares) of the pods running in the node's pool."""
    pool = {s.node.name for s in problem.nodes if s.node.pool == state.node.pool}
    running: Counter[str] = Counter()
    for pod in problem.snapshot.pods:
        if pod.is_bound and pod.node_name in pool:
            running.update({r: v for r, v in pod.requests.items() if is_mig_resource(r)})
    return profile_mix(running, state.node)


def _fill(
    problem: Problem, state: NodeState, allocatable: dict[str, int], waiting: list[tuple[PodType, Pod]]
) -> list[ConcretePlacement]:
    """Pending pods this layout would host on the node, in priority order, within every resource."""
    capacity = {r: v for r, v in state.capacity.items() if not is_gpu_resource(r)} | allocatable
    load = {r: v for r, v in state.fixed.items() if not is_gpu_resource(r)}
    for other in problem.types:  # pods without GPUs may stay on the node: count them (moves off it only free room)
        if not other.pending and not other.uses_gpu:
            for r, v in other.requests.items():
                load[r] = load.get(r, 0) + v * len(other.initial.get(state.index, ()))
    placed = []
    for ptype, pod in waiting:
        if problem.rules is not None and problem.rules.why_not(pod, state.node) is not None:
            continue
        if all(load.get(r, 0) + v <= capacity.get(r, 0) for r, v in ptype.requests.items()):
            for r, v in ptype.requests.items():
                load[r] = load.get(r, 0) + v
            placed.append(ConcretePlacement(pod, ptype, state.index))
    return placed

"""The figures of one node: what its bound pods use, what the reference shapes leave stranded on it and why, its MIG
capacity, all gathered into ``NodeFigures``.

Apart from ``fragmentation.py`` because this is the per-node stage of ``compute_figures``, the one that reads each node
and its pods; pools, the cluster and the pending pods are worked out from what it returns. The shape-fitting terms it
shares with the planner are ``compactor.model.fragments``'.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from compactor.metrics.figure_types import NodeFigures
from compactor.model.catalog import profile_from_resource
from compactor.model.fragments import NodeFree, PreparedShape
from compactor.model.pod_facts import TERMINATED_PHASES  # as Pod.is_bound, inlined for the 50k-pod loop
from compactor.model.resources import GPU, Resources, is_gpu_resource, is_mig_resource
from compactor.model.types import Node, Snapshot


@dataclass(slots=True)
class NodeUsage:
    """What the bound pods of one node request in total (plain dict: no per-pod allocations)."""

    requested: dict[str, int] = field(default_factory=dict)
    pods: int = 0
    gpu_pods: int = 0


def usage_by_node(snapshot: Snapshot) -> dict[str, NodeUsage]:
    """Sum bound pods' requests per node into plain dicts.

    Replicas share one ``Resources`` object (the parser memoises requests per
    template), so pods are first counted per (node, request vector) and each
    distinct vector is added once, times its count.
    """
    usage = {n.name: NodeUsage() for n in snapshot.nodes}
    counts: dict[tuple[str, int], int] = {}
    vectors: dict[int, Resources] = {}
    for pod in snapshot.pods:
        if not pod.node_name or pod.phase in TERMINATED_PHASES:
            continue
        requests = pod.requests
        key = (pod.node_name, id(requests))
        counts[key] = counts.get(key, 0) + 1
        vectors[id(requests)] = requests
    amounts = {ident: tuple(vector.as_dict().items()) for ident, vector in vectors.items()}
    uses_gpu = {ident: any(is_gpu_resource(r) for r in vector) for ident, vector in vectors.items()}
    for (node_name, ident), count in counts.items():
        entry = usage.get(node_name)
        if entry is None:
            continue
        requested = entry.requested
        for resource, amount in amounts[ident]:
            requested[resource] = requested.get(resource, 0) + amount * count
        entry.pods += count
        entry.gpu_pods += count if uses_gpu[ident] else 0
    return usage


def _mig_resources(allocatable: Resources, strategy: str, product: str) -> dict[str, str]:
    """GPU resource -> MIG profile; with the single strategy ``nvidia.com/gpu`` units are MIG instances."""
    found = {r: profile_from_resource(r) for r in allocatable if is_mig_resource(r)}
    if strategy == "single" and "-MIG-" in product and GPU in allocatable:
        found[GPU] = product.split("-MIG-", 1)[1].removesuffix("-SHARED")
    return found


def stranded_units(state: NodeFree, shapes: Sequence[PreparedShape], copies: Sequence[int]) -> dict[str, int]:
    """Free GPU units no GPU shape in use can take, per GPU resource: what is left once the shape that takes the most of
    it fits as many copies as the node's free resources allow (each resource on its own; docs/metrics.md)."""
    if state.free_gpus <= 0:
        return {}
    taken: dict[str, int] = {}
    for shape, n in zip(shapes, copies, strict=True):
        for resource, amount in shape.gpu_items:
            taken[resource] = max(taken.get(resource, 0), n * amount)
    units = {}
    for resource in sorted(state.equivalent):
        free = max(0, state.free.get(resource, 0))
        if free > taken.get(resource, 0):
            units[resource] = free - taken.get(resource, 0)
    return units


def limiting_resource(state: NodeFree, shapes: Sequence[PreparedShape], copies: Sequence[int]) -> str:
    """What keeps the most popular GPU shape that leaves free GPUs unused on this node from using them: a non-GPU
    resource it runs out of first ("cpu"), the GPU count left ("3 nvidia.com/gpu left, the shape asks 4"), or no shape
    asking a free GPU resource at all (an idle MIG profile). "" when the shapes can use all its free GPUs."""
    free = state.free
    asked = {r for shape in shapes for r, _ in shape.gpu_items}
    idle = sorted(r for r in state.equivalent if free.get(r, 0) > 0 and r not in asked)
    for shape, n in sorted(zip(shapes, copies, strict=True), key=lambda pair: -pair[0].headline_weight):
        if not shape.gpu_items or any(free.get(r, 0) <= 0 for r, _ in shape.gpu_items):
            continue
        by_gpu = min(free.get(r, 0) // need for r, need in shape.gpu_items)
        if n < by_gpu:
            return min(
                ((free.get(r, 0) // need, r) for r, need in shape.items if not is_gpu_resource(r)), default=(0, "pods")
            )[1]
        left = [(r, free.get(r, 0) - n * need, need) for r, need in shape.gpu_items if free.get(r, 0) - n * need > 0]
        if left and n == 0:
            r, units, need = left[0]
            return f"{units} {r} left, the shape asks {need}"
    if idle:
        return f"no shape asks {idle[0]}"
    missing = [s for s in shapes if s.gpu_items and any(free.get(r, 0) <= 0 for r, _ in s.gpu_items)]
    if missing:
        share = math.fsum(s.headline_weight for s in missing)
        names = sorted({r for s in missing for r, _ in s.gpu_items if free.get(r, 0) <= 0})
        return f"{share:.0%} of GPU requests need {', '.join(names[:2])}{', ...' if len(names) > 2 else ''}: none free"
    return ""


def _gpu_sums(
    node: Node, state: NodeFree, usage: NodeUsage, mig: Mapping[str, str]
) -> tuple[float, float, float, float]:
    """(allocatable, allocated) GPUs over all GPU resources, (total, idle) GPUs over the MIG ones.

    Plain sums in sorted resource order: deterministic per node; only cross-node sums need ``fsum``.
    """
    allocatable, requested, free = node.allocatable, usage.requested, state.free
    total = used = mig_total = mig_idle = 0.0
    for resource, eq in sorted(state.equivalent.items()):
        total += allocatable.get(resource, 0) * eq
        used += requested.get(resource, 0) * eq
        if resource in mig:
            mig_total += allocatable.get(resource, 0) * eq
            mig_idle += max(0, free.get(resource, 0)) * eq
    return total, used, mig_total, mig_idle


def node_figures(
    state: NodeFree, usage: NodeUsage, fragmented: float, fgd: float, stranded: dict[str, int], limited_by: str
) -> NodeFigures:
    node = state.node
    mig = _mig_resources(node.allocatable, node.gpu.mig_strategy, node.gpu.product)
    allocatable_gpus, allocated_gpus, mig_gpus, mig_idle_gpus = _gpu_sums(node, state, usage, mig)
    runs_gpu = usage.gpu_pods > 0
    return NodeFigures(
        name=node.name,
        pool=node.pool,
        ready=node.ready,
        schedulable=not node.unschedulable,
        allocatable=node.allocatable,
        allocated=Resources(usage.requested),
        free=Resources(state.free),
        gpus=node.gpu.physical_gpus,
        countable_gpus=node.countable_gpus,
        allocatable_gpus=allocatable_gpus,
        allocated_gpus=allocated_gpus,
        free_gpus=state.free_gpus,
        runs_gpu_pods=runs_gpu,
        whole_free=node.is_gpu_node and not runs_gpu,
        busy_free_gpus=state.free_gpus if runs_gpu else 0.0,
        stranded_gpus=sum(units * state.equivalent[r] for r, units in stranded.items()),
        stranded_units=stranded,
        limited_by=limited_by,
        mig_idle={mig[r]: max(0, state.free.get(r, 0)) for r in sorted(mig)},
        mig_total={mig[r]: node.allocatable.get(r, 0) for r in sorted(mig)},
        mig_idle_gpus=mig_idle_gpus,
        mig_gpus=mig_gpus,
        fragmented_gpus=fragmented,
        fgd_fragmented_gpus=fgd,
        pod_count=usage.pods,
        gpu_pod_count=usage.gpu_pods,
        overcommitted=tuple(r for r, v in state.free.items() if v < 0),
    )

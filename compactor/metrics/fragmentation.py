"""Fragmentation figures of a snapshot: per node, per pool and for the whole cluster.

Pure: no I/O, no clock, no Kubernetes client. Every figure, its formula and a
worked example are in ``docs/metrics.md``; the tests check that example.

Units: two, never under one name. *GPUs (physical)* count devices (``gpus``,
``whole_free_physical_gpus``). *GPU capacity* is counted in GPU-equivalents
(``GpuInfo.equivalent``: 1 for a whole GPU, ``1/replicas`` for a time-sliced replica,
``memory_slices/slots`` for a MIG instance): every other ``*_gpus`` float here. In JSON
the latter are named ``...GpuEquivalents`` and the former ``...PhysicalGpus``. Other
resources stay in scheduler units (millicores, bytes).
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

from compactor.model.catalog import profile_from_resource
from compactor.model.cpu_pods import cpu_pods_hold, cpu_pods_on_gpu_nodes, held_by_node
from compactor.model.quantity import format_amount
from compactor.model.resources import GPU, PODS, Resources, is_gpu_resource, is_mig_resource
from compactor.model.scheduling import why_ineligible
from compactor.model.shapes import CONFIG, ReferenceShape, label_order, reference_shapes, requests_label
from compactor.model.types import Node, Pod, Snapshot

# The reference workload and the CPU-only pods on GPU nodes live in the model (the planner uses them too); these names
# stay importable from here.
__all__ = [
    "CONFIG",
    "ReferenceShape",
    "cpu_pods_hold",
    "cpu_pods_on_gpu_nodes",
    "held_by_node",
    "reference_shapes",
    "requests_label",
]

CLUSTER = "cluster"
_NO_POD_LIMIT = 1 << 62  # a node that does not advertise ``pods`` limits nothing by pod count
_SAMPLE = 3
_TERMINATED = ("Succeeded", "Failed")  # as Pod.is_bound, inlined for the 50k-pod loop


# ---------------------------------------------------------------------------
# Result types


@dataclass(frozen=True)
class ShapeHeadroom:
    """How many more pods of ``shape`` fit right now, on Ready, uncordoned nodes (resources only)."""

    shape: str
    copies: int
    nodes: int  # nodes that can take at least one copy


@dataclass(frozen=True)
class BlockedPod:
    pod: str
    requests: str
    priority: int
    reason: str
    gpu_equivalents: float = 0.0  # the GPU capacity it asks for


@dataclass(frozen=True)
class NodeFigures:
    name: str
    pool: str
    ready: bool
    schedulable: bool
    allocatable: Resources
    allocated: Resources
    free: Resources  # allocatable - allocated; negative where the node is overcommitted
    gpus: int  # physical GPUs
    countable_gpus: int  # physical GPUs freeing the node is worth: Node.countable_gpus (0 unless Ready and schedulable)
    allocatable_gpus: float  # GPU-equivalents, as every float *_gpus below
    allocated_gpus: float
    free_gpus: float  # sum over GPU resources of max(0, free) x equivalent
    runs_gpu_pods: bool
    whole_free: bool
    busy_free_gpus: float  # free on a node that runs GPU pods (not whole-free)
    stranded_gpus: float  # free that no GPU request shape in use can take here (docs/metrics.md)
    # the same per GPU resource, in its own units (GPUs, MIG instances)
    stranded_units: dict[str, int] = field(hash=False)
    limited_by: str  # what keeps the shapes in use off its free GPUs (``limiting_resource``); "" when nothing does
    mig_idle: dict[str, int] = field(hash=False)
    mig_total: dict[str, int] = field(hash=False)
    mig_idle_gpus: float
    mig_gpus: float
    fragmented_gpus: float
    fgd_fragmented_gpus: float
    pod_count: int
    gpu_pod_count: int
    overcommitted: tuple[str, ...]  # resources whose requests exceed allocatable


@dataclass(frozen=True)
class AggregateFigures:
    name: str
    node_count: int
    gpu_node_count: int
    allocatable: Resources
    allocated: Resources
    free: Resources
    gpus: int
    allocatable_gpus: float
    allocated_gpus: float
    free_gpus: float
    whole_free_nodes: int
    whole_free_physical_gpus: int  # countable physical GPUs of whole-free nodes: what plans' freedGpus changes
    whole_free_gpus: float
    busy_free_gpus: float  # free GPU capacity on nodes that run GPU pods
    stranded_gpus: float  # free GPU capacity no GPU request shape in use can take
    stranded_share: float | None  # stranded / free; None without free GPU capacity or without a GPU shape
    unavailable_free_gpus: float  # free GPU capacity on NotReady or cordoned nodes
    mig_idle: dict[str, int] = field(hash=False)
    mig_total: dict[str, int] = field(hash=False)
    mig_idle_gpus: float
    mig_gpus: float
    mig_idle_rate: float | None
    fragmented_gpus: float
    fgd_fragmented_gpus: float
    fragmentation_rate: float | None
    fgd_fragmentation_rate: float | None
    gpu_utilisation: float | None
    overcommitted_nodes: int
    pod_count: int
    gpu_pod_count: int


@dataclass(frozen=True)
class Figures:
    cluster: AggregateFigures
    pools: tuple[AggregateFigures, ...]
    nodes: tuple[NodeFigures, ...]
    shapes: tuple[ReferenceShape, ...]
    headroom: tuple[ShapeHeadroom, ...]
    blocked_pending: tuple[BlockedPod, ...]
    unplaceable_pending: tuple[BlockedPod, ...]
    pending_gpu_pods: int
    blocked_demand_gpus: float  # GPU capacity the blocked pending pods ask for (GPU-equivalents)
    warnings: tuple[str, ...]


# ---------------------------------------------------------------------------
# Per node


@dataclass(slots=True)
class _Usage:
    """What the bound pods of one node request in total (plain dict: no per-pod allocations)."""

    requested: dict[str, int] = field(default_factory=dict)
    pods: int = 0
    gpu_pods: int = 0


@dataclass(frozen=True, slots=True)
class _Shape:
    """A reference shape prepared for the per-node loop."""

    items: tuple[tuple[str, int], ...]  # GPU resources first: most nodes fail there
    gpu_items: tuple[tuple[str, int], ...]
    headline_weight: float  # renormalised over GPU shapes only
    fgd_weight: float  # renormalised over all shapes


def _prepare(shapes: Sequence[ReferenceShape]) -> tuple[_Shape, ...]:
    total = math.fsum(s.weight for s in shapes)
    gpu_total = math.fsum(s.weight for s in shapes if s.uses_gpu)
    prepared = []
    for s in shapes:
        items = tuple(
            sorted(((r, v) for r, v in s.requests.items() if v > 0 and r != PODS), key=lambda kv: label_order(kv[0]))
        )
        gpu_items = tuple(kv for kv in items if is_gpu_resource(kv[0]))
        headline = s.weight / gpu_total if gpu_items and gpu_total > 0 else 0.0
        prepared.append(_Shape(items, gpu_items, headline, s.weight / total if total > 0 else 0.0))
    return tuple(prepared)


def _usage_by_node(snapshot: Snapshot) -> dict[str, _Usage]:
    """Sum bound pods' requests per node into plain dicts.

    Replicas share one ``Resources`` object (the parser memoises requests per
    template), so pods are first counted per (node, request vector) and each
    distinct vector is added once, times its count.
    """
    usage = {n.name: _Usage() for n in snapshot.nodes}
    counts: dict[tuple[str, int], int] = {}
    vectors: dict[int, Resources] = {}
    for pod in snapshot.pods:
        if not pod.node_name or pod.phase in _TERMINATED:
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


def copies_that_fit(items: Sequence[tuple[str, int]], free: Mapping[str, int], pod_slots: int = _NO_POD_LIMIT) -> int:
    """min over requested resources of floor(free / request), and at most one copy per free pod slot."""
    if not items:
        return 0  # an empty shape is no request at all
    best = pod_slots
    for resource, need in items:
        have = free.get(resource, 0)
        if have < need:
            return 0
        best = min(best, have // need)
    return max(best, 0)


def _mig_resources(allocatable: Resources, strategy: str, product: str) -> dict[str, str]:
    """GPU resource -> MIG profile; with the single strategy ``nvidia.com/gpu`` units are MIG instances."""
    found = {r: profile_from_resource(r) for r in allocatable if is_mig_resource(r)}
    if strategy == "single" and "-MIG-" in product and GPU in allocatable:
        found[GPU] = product.split("-MIG-", 1)[1].removesuffix("-SHARED")
    return found


@dataclass(frozen=True, slots=True)
class _NodeState:
    """A node's free vector and GPU free capacity, kept for the shape loop and the pending-pod check."""

    node: Node
    free: dict[str, int]
    equivalent: dict[str, float]
    free_gpu_by_resource: dict[str, float]
    free_gpus: float
    pod_slots: int

    @property
    def hostable(self) -> bool:
        return self.node.ready and not self.node.unschedulable


def _node_state(node: Node, usage: _Usage) -> _NodeState:
    allocatable = node.allocatable.as_dict()
    names = sorted(allocatable.keys() | usage.requested.keys())  # sorted: results independent of pod order
    free = {r: allocatable.get(r, 0) - usage.requested.get(r, 0) for r in names}
    equivalent = dict(node.gpu.gpu_equivalent)
    by_resource = {r: max(0, free.get(r, 0)) * e for r, e in sorted(equivalent.items())}
    slots = max(0, free[PODS]) if PODS in allocatable else _NO_POD_LIMIT
    return _NodeState(node, free, equivalent, by_resource, sum(by_resource.values()), slots)


def _copies_per_shape(state: _NodeState, shapes: Sequence[_Shape]) -> list[int]:
    free, slots = state.free, state.pod_slots
    copies = []
    for shape in shapes:
        # Most (node, shape) pairs fail on the shape's first (GPU) resource: skip the call for them.
        if not shape.items or free.get(shape.items[0][0], 0) < shape.items[0][1]:
            copies.append(0)
        else:
            copies.append(copies_that_fit(shape.items, free, slots))
    return copies


def _node_fragments(state: _NodeState, shapes: Sequence[_Shape]) -> tuple[float, float, list[int]]:
    """(Σ_m p'_m frag_n(m), Σ_m p_m F_n(m)) and the copies of each shape that fit; formulas in docs/metrics.md.

    Plain sums are enough here: the shape order is fixed, so the result does not depend on input order.
    """
    copies = _copies_per_shape(state, shapes)
    free_gpus = state.free_gpus
    if free_gpus <= 0:
        return 0.0, 0.0, copies
    hole_sum = fgd_sum = 0.0
    for shape, n in zip(shapes, copies, strict=True):
        if not shape.gpu_items:
            fgd_sum += shape.fgd_weight * free_gpus  # a CPU-only task uses no GPU: FGD counts all of it
        elif n == 0:
            hole_sum += shape.headline_weight * free_gpus
            fgd_sum += shape.fgd_weight * free_gpus
        else:
            per_copy = usable_devices = 0.0
            for resource, amount in shape.gpu_items:
                per_copy += amount * state.equivalent.get(resource, 0.0)
                # FGD: only devices of the requested resources can serve the shape; the rest is R < D.
                usable_devices += state.free_gpu_by_resource.get(resource, 0.0)
            hole_sum += shape.headline_weight * max(0.0, free_gpus - n * per_copy)
            fgd_sum += shape.fgd_weight * max(0.0, free_gpus - usable_devices)
    return min(free_gpus, hole_sum), min(free_gpus, fgd_sum), copies


def _stranded(state: _NodeState, shapes: Sequence[_Shape], copies: Sequence[int]) -> dict[str, int]:
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


def limiting_resource(state: _NodeState, shapes: Sequence[_Shape], copies: Sequence[int]) -> str:
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
    node: Node, state: _NodeState, usage: _Usage, mig: Mapping[str, str]
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


def _node_figures(
    state: _NodeState, usage: _Usage, fragmented: float, fgd: float, stranded: dict[str, int], limited_by: str
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


# ---------------------------------------------------------------------------
# Aggregates


def _rate(part: float, whole: float) -> float | None:
    return None if whole <= 0 else min(1.0, max(0.0, part / whole))


_FLOATS = (
    "allocatable_gpus",
    "allocated_gpus",
    "free_gpus",
    "busy_free_gpus",
    "stranded_gpus",
    "fragmented_gpus",
    "fgd_fragmented_gpus",
    "mig_idle_gpus",
    "mig_gpus",
)
_ALL_FLOATS = (*_FLOATS, "whole_free_gpus", "unavailable_free_gpus")
_COUNTS = ("gpus", "pod_count", "gpu_pod_count")


def _add_into(acc: dict[str, int], amounts: Mapping[str, int]) -> None:
    for key, value in amounts.items():
        acc[key] = acc.get(key, 0) + value


@dataclass(slots=True)
class _Totals:
    """Running sums over nodes; float figures keep their terms so ``math.fsum`` makes them order-independent."""

    counts: Counter[str] = field(default_factory=Counter)
    floats: dict[str, list[float]] = field(default_factory=lambda: {name: [] for name in _ALL_FLOATS})
    vectors: dict[str, dict[str, int]] = field(default_factory=lambda: {"allocatable": {}, "allocated": {}, "free": {}})
    mig_idle: Counter[str] = field(default_factory=Counter)
    mig_total: Counter[str] = field(default_factory=Counter)

    def add(self, n: NodeFigures) -> None:
        counts, floats = self.counts, self.floats
        counts["node_count"] += 1
        counts["gpu_node_count"] += n.gpus > 0
        counts["whole_free_nodes"] += n.whole_free
        counts["whole_free_physical_gpus"] += n.countable_gpus if n.whole_free else 0
        counts["overcommitted_nodes"] += bool(n.overcommitted)
        for name in _COUNTS:
            counts[name] += getattr(n, name)
        for name in _FLOATS:
            floats[name].append(getattr(n, name))
        floats["whole_free_gpus"].append(n.free_gpus if n.whole_free else 0.0)
        floats["unavailable_free_gpus"].append(0.0 if n.ready and n.schedulable else n.free_gpus)
        _add_into(self.vectors["allocatable"], n.allocatable.as_dict())
        _add_into(self.vectors["allocated"], n.allocated.as_dict())
        _add_into(self.vectors["free"], n.free.as_dict())
        self.mig_idle.update(n.mig_idle)
        self.mig_total.update(n.mig_total)

    def merge(self, other: _Totals) -> None:
        self.counts.update(other.counts)
        for name, terms in other.floats.items():
            self.floats[name].extend(terms)
        for name, vector in other.vectors.items():
            _add_into(self.vectors[name], vector)
        self.mig_idle.update(other.mig_idle)
        self.mig_total.update(other.mig_total)

    def finish(self, name: str, *, has_shapes: bool, has_gpu_shapes: bool) -> AggregateFigures:
        t = {key: math.fsum(terms) for key, terms in self.floats.items()}
        c = self.counts
        return AggregateFigures(
            name=name,
            node_count=c["node_count"],
            gpu_node_count=c["gpu_node_count"],
            allocatable=Resources(self.vectors["allocatable"]),
            allocated=Resources(self.vectors["allocated"]),
            free=Resources(self.vectors["free"]),
            gpus=c["gpus"],
            allocatable_gpus=t["allocatable_gpus"],
            allocated_gpus=t["allocated_gpus"],
            free_gpus=t["free_gpus"],
            whole_free_nodes=c["whole_free_nodes"],
            whole_free_physical_gpus=c["whole_free_physical_gpus"],
            whole_free_gpus=t["whole_free_gpus"],
            busy_free_gpus=t["busy_free_gpus"],
            stranded_gpus=t["stranded_gpus"],
            stranded_share=_rate(t["stranded_gpus"], t["free_gpus"]) if has_gpu_shapes else None,
            unavailable_free_gpus=t["unavailable_free_gpus"],
            mig_idle={k: self.mig_idle[k] for k in sorted(self.mig_total)},
            mig_total={k: self.mig_total[k] for k in sorted(self.mig_total)},
            mig_idle_gpus=t["mig_idle_gpus"],
            mig_gpus=t["mig_gpus"],
            mig_idle_rate=_rate(t["mig_idle_gpus"], t["mig_gpus"]),
            fragmented_gpus=t["fragmented_gpus"],
            fgd_fragmented_gpus=t["fgd_fragmented_gpus"],
            fragmentation_rate=_rate(t["fragmented_gpus"], t["free_gpus"]) if has_gpu_shapes else None,
            fgd_fragmentation_rate=_rate(t["fgd_fragmented_gpus"], t["free_gpus"]) if has_shapes else None,
            gpu_utilisation=_rate(t["allocatable_gpus"] - t["free_gpus"], t["allocatable_gpus"]),
            overcommitted_nodes=c["overcommitted_nodes"],
            pod_count=c["pod_count"],
            gpu_pod_count=c["gpu_pod_count"],
        )


def aggregate(name: str, nodes: Iterable[NodeFigures], *, has_shapes: bool, has_gpu_shapes: bool) -> AggregateFigures:
    """Sum node figures into a pool or cluster figure; independent of node order."""
    totals = _Totals()
    for node in nodes:
        totals.add(node)
    return totals.finish(name, has_shapes=has_shapes, has_gpu_shapes=has_gpu_shapes)


def _aggregates(
    nodes: Sequence[NodeFigures], *, has_shapes: bool, has_gpu_shapes: bool
) -> tuple[AggregateFigures, tuple[AggregateFigures, ...]]:
    """(cluster, pools sorted by name) in one pass over the nodes."""
    by_pool: dict[str, _Totals] = {}
    for node in nodes:
        by_pool.setdefault(node.pool, _Totals()).add(node)
    cluster = _Totals()
    for pool in sorted(by_pool):
        cluster.merge(by_pool[pool])
    pools = tuple(
        by_pool[pool].finish(pool, has_shapes=has_shapes, has_gpu_shapes=has_gpu_shapes) for pool in sorted(by_pool)
    )
    return cluster.finish(CLUSTER, has_shapes=has_shapes, has_gpu_shapes=has_gpu_shapes), pools


# ---------------------------------------------------------------------------
# Pending pods


@dataclass(frozen=True, slots=True)
class _Verdict:
    kind: str  # "placeable" | "blocked" | "unplaceable"
    reason: str = ""


class _PendingCheck:
    """Where pending GPU pods could go; results cached per (requests, placement rules)."""

    def __init__(self, states: Sequence[_NodeState], snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.total_free: dict[str, int] = {}
        for state in states:
            if state.hostable:
                for resource, amount in state.free.items():
                    self.total_free[resource] = self.total_free.get(resource, 0) + max(0, amount)
        # Nodes indexed by each GPU resource they have free: a GPU pod only looks at those.
        self.by_gpu: dict[str, list[_NodeState]] = {}
        for state in states:
            for resource, amount in state.free.items():
                if amount > 0 and is_gpu_resource(resource):
                    self.by_gpu.setdefault(resource, []).append(state)
        self._cache: dict[tuple[object, ...], _Verdict] = {}
        # Partitionable nodes: what their free counters allow is not a vector of resources (model.partitions).
        self.partitioned = [s for s in states if s.hostable and s.node.partitions is not None]
        # GPU-equivalents of one unit per GPU resource: the most any node offering it gives (time-sliced replicas differ by
        # node; the largest keeps the figure independent of node order and never understates what is blocked).
        self.equivalent: dict[str, float] = {}
        for state in states:
            for resource, eq in state.equivalent.items():
                self.equivalent[resource] = max(eq, self.equivalent.get(resource, 0.0))

    def _on_partitions(self, pod: Pod, requests: Mapping[str, int]) -> _Verdict | None:
        """Placeable when first fit gives the pod its GPU devices on the free counters of an eligible partitionable
        node; blocked when such nodes offer its devices and have as much free in total, only not together; None when
        no partitionable node is for it (the resource check decides)."""
        asks = {r: v for r, v in requests.items() if is_gpu_resource(r) and v > 0}
        rest = {r: v for r, v in requests.items() if not is_gpu_resource(r)}
        offering = [
            s
            for s in self.partitioned
            if s.node.partitions is not None
            and all(any(d.resource == r for d in s.node.partitions.devices) for r in asks)
            and why_ineligible(pod, s.node) is None
        ]
        for state in offering:
            partitions = state.node.partitions
            fits_rest = all(state.free.get(r, 0) >= v for r, v in rest.items())
            if partitions is not None and fits_rest and partitions.allocate(asks, partitions.free()) is not None:
                return _Verdict("placeable")
        free = math.fsum(s.node.partitions.free_share() for s in offering if s.node.partitions is not None)
        need = self.gpus(pod.requests)
        if not offering or free + 1e-9 < need:
            return None
        return _Verdict(
            "blocked",
            f"{round(free, 2):g} GPU-equivalents free on {len(offering)} partitionable node(s), but no GPU's free "
            "counters hold its devices together (scattered partitions)",
        )

    def gpus(self, requests: Resources) -> float:
        """The GPU capacity ``requests`` ask for, in GPU-equivalents (1 per unit of a resource no node offers)."""
        return math.fsum(v * self.equivalent.get(r, 1.0) for r, v in sorted(requests.items()) if is_gpu_resource(r))

    def verdict(self, pod: Pod) -> _Verdict:
        key = (pod.requests, pod.tolerations, pod.node_selector, pod.affinity)
        if key not in self._cache:
            self._cache[key] = self._decide(pod)
        return self._cache[key]

    def _decide(self, pod: Pod) -> _Verdict:
        requests = pod.requests.as_dict()
        if self.partitioned:
            verdict = self._on_partitions(pod, requests)
            if verdict is not None:
                return verdict
        for resource in sorted(requests, key=label_order):
            if requests[resource] > self.total_free.get(resource, 0):
                have = self.total_free.get(resource, 0)
                need = format_amount(resource, requests[resource])
                return _Verdict(
                    "unplaceable",
                    f"needs {need} {resource}, the Ready uncordoned nodes have "
                    f"{format_amount(resource, have)} free in total",
                )
        gpu_resource = min((r for r in requests if is_gpu_resource(r)), key=label_order)
        candidates = [s for s in self.by_gpu.get(gpu_resource, ()) if pod.requests.fits_in(s.free)]
        refusals: Counter[str] = Counter()
        for state in candidates:
            why = why_ineligible(pod, state.node)
            if why is None:
                return _Verdict("placeable")
            refusals[why.value] += 1
        if candidates:
            detail = "; ".join(f"{why}: {n}" for why, n in sorted(refusals.items()))
            return _Verdict("blocked", f"the {len(candidates)} node(s) with room are ineligible ({detail})")
        return _Verdict("blocked", self._split(pod, requests, gpu_resource))

    def _split(self, pod: Pod, requests: Mapping[str, int], gpu_resource: str) -> str:
        need = requests[gpu_resource]
        holders = self.by_gpu.get(gpu_resource, [])
        best = max((s.free.get(gpu_resource, 0) for s in holders), default=0)
        if best < need:
            return f"at most {best} {gpu_resource} free on one node, needs {need}"
        lacking: Counter[str] = Counter()
        eligible: dict[str, dict[str, int]] = {}  # of the nodes with the GPUs free, those the pod may use
        for state in holders:
            if state.free.get(gpu_resource, 0) >= need:
                lacking.update(r for r in requests if requests[r] > state.free.get(r, 0))
                if state.hostable and why_ineligible(pod, state.node) is None:
                    eligible[state.node.name] = state.free
        named = sorted(lacking, key=lambda r: (-lacking[r], r))[:2]
        held = cpu_pods_hold(self.cpu_pods_held, eligible, requests) if eligible else ""
        return f"the nodes with {need} {gpu_resource} free lack {', '.join(named)}" + (
            f"; CPU-only pods hold {held} on the eligible ones" if held else ""
        )

    @functools.cached_property
    def cpu_pods_held(self) -> dict[str, dict[str, int]]:
        """What CPU-only pods hold per GPU node: worked out only when a pod is blocked for lack of CPU or memory."""
        return held_by_node(cpu_pods_on_gpu_nodes(self.snapshot))


def _pending(
    snapshot: Snapshot, states: Sequence[_NodeState]
) -> tuple[int, tuple[BlockedPod, ...], tuple[BlockedPod, ...]]:
    """(pending GPU pods, blocked by fragmentation, unplaceable even in total)."""
    check = _PendingCheck(states, snapshot)
    blocked: list[BlockedPod] = []
    unplaceable: list[BlockedPod] = []
    count = 0
    for pod in snapshot.pending_pods():
        if not pod.uses_gpu:
            continue
        count += 1
        verdict = check.verdict(pod)
        if verdict.kind != "placeable":
            entry = BlockedPod(
                pod.key, requests_label(pod.requests), pod.priority, verdict.reason, check.gpus(pod.requests)
            )
            (blocked if verdict.kind == "blocked" else unplaceable).append(entry)
    return count, tuple(sorted(blocked, key=_by_priority)), tuple(sorted(unplaceable, key=_by_priority))


def _by_priority(blocked: BlockedPod) -> tuple[int, str]:
    return (-blocked.priority, blocked.pod)


# ---------------------------------------------------------------------------
# Entry point


def compute_figures(snapshot: Snapshot, shapes: Sequence[ReferenceShape] | None = None) -> Figures:
    """All fragmentation figures of ``snapshot`` against the reference shapes (default: from the workload)."""
    chosen = tuple(reference_shapes(snapshot) if shapes is None else shapes)
    prepared = _prepare(chosen)
    has_gpu_shapes = any(s.gpu_items for s in prepared)
    usage = _usage_by_node(snapshot)
    states: list[_NodeState] = []
    nodes: list[NodeFigures] = []
    copies = [0] * len(prepared)
    hosts = [0] * len(prepared)
    for node in snapshot.nodes:
        state = _node_state(node, usage[node.name])
        fragmented, fgd, fits = _node_fragments(state, prepared)
        stranded = _stranded(state, prepared, fits) if has_gpu_shapes else {}
        if state.hostable:
            for i, n in enumerate(fits):
                copies[i] += n
                hosts[i] += n > 0
        states.append(state)
        limited = limiting_resource(state, prepared, fits) if fragmented > 0 or stranded else ""
        nodes.append(_node_figures(state, usage[node.name], fragmented, fgd, stranded, limited))
    cluster, pools = _aggregates(nodes, has_shapes=bool(prepared), has_gpu_shapes=has_gpu_shapes)
    pending, blocked, unplaceable = _pending(snapshot, states)
    return Figures(
        cluster=cluster,
        pools=pools,
        nodes=tuple(nodes),
        shapes=chosen,
        headroom=tuple(ShapeHeadroom(s.label, c, h) for s, c, h in zip(chosen, copies, hosts, strict=True)),
        blocked_pending=blocked,
        unplaceable_pending=unplaceable,
        pending_gpu_pods=pending,
        blocked_demand_gpus=math.fsum(b.gpu_equivalents for b in blocked),
        warnings=_warnings(nodes, chosen),
    )


def _warnings(nodes: Sequence[NodeFigures], shapes: Sequence[ReferenceShape]) -> tuple[str, ...]:
    out: list[str] = []
    over = sorted((n for n in nodes if n.overcommitted), key=lambda n: n.name)
    if over:
        sample = ", ".join(
            f"{n.name} ({', '.join(f'{r} {n.allocated.get(r)} > {n.allocatable.get(r)}' for r in n.overcommitted)})"
            for n in over[:_SAMPLE]
        )
        more = ", ..." if len(over) > _SAMPLE else ""
        out.append(
            f"{len(over)} node(s) have more requested than allocatable: {sample}{more}; "
            "their free amounts are negative and count as 0 in the GPU figures"
        )
    gpu_free = any(n.free_gpus > 0 for n in nodes)
    if gpu_free and not any(s.uses_gpu for s in shapes):
        why = (
            "no configured reference shape requests a GPU (--shape, metrics.reference_shapes)"
            if any(s.source == CONFIG for s in shapes)
            else "no GPU request shape (no GPU pods and none configured)"
        )
        out.append(f"{why}: the fragmentation rate is undefined")
    out.extend(
        f"reference shape {s.label!r} requests no GPU: it counts in the FGD rate only" for s in shapes if not s.uses_gpu
    )
    offered = {r for n in nodes for r in n.allocatable}
    out.extend(
        f"reference shape {s.label!r} requests {', '.join(sorted(set(s.requests) - offered))}, which no node offers: it fits nowhere"
        for s in shapes
        if set(s.requests) - offered
    )
    return tuple(out)


# ---------------------------------------------------------------------------
# JSON form


# JSON says which unit a GPU figure is in: physical GPUs (devices) or GPU-equivalents (capacity; MIG and time-sliced
# resources mapped back to fractions of a GPU).
_JSON_NAMES = {
    "gpus": "physicalGpus",
    "countable_gpus": "countablePhysicalGpus",
    **{
        name: name.removesuffix("_gpus") + "_gpu_equivalents"
        for name in (
            "allocatable_gpus",
            "allocated_gpus",
            "free_gpus",
            "whole_free_gpus",
            "busy_free_gpus",
            "stranded_gpus",
            "unavailable_free_gpus",
            "mig_idle_gpus",
            "mig_gpus",
            "fragmented_gpus",
            "fgd_fragmented_gpus",
            "blocked_demand_gpus",
        )
    },
}


def _camel(name: str) -> str:
    head, *rest = _JSON_NAMES.get(name, name).split("_")
    return head + "".join(word.capitalize() for word in rest)


_FIELD_NAMES: dict[type, tuple[tuple[str, str], ...] | None] = {}


def _field_names(kind: type) -> tuple[tuple[str, str], ...] | None:
    """(attribute, camelCase key) of a dataclass type, None for other types; cached per type."""
    if kind not in _FIELD_NAMES:
        _FIELD_NAMES[kind] = tuple((f.name, _camel(f.name)) for f in fields(kind)) if is_dataclass(kind) else None
    return _FIELD_NAMES[kind]


def _jsonable(value: Any) -> Any:
    kind = type(value)
    if kind is float:
        return round(value, 4) + 0.0  # + 0.0 turns -0.0 into 0.0
    if value is None or kind in (int, str, bool):
        return value
    if kind is Resources:
        amounts = value.as_dict()
        return {key: int(amounts[key]) for key in sorted(amounts)}
    names = _field_names(kind)
    if names is not None:
        return {key: _jsonable(getattr(value, name)) for name, key in names}
    if isinstance(value, Mapping):
        return {str(key): _jsonable(value[key]) for key in sorted(value)}
    if isinstance(value, tuple | list):
        return [_jsonable(item) for item in value]
    raise TypeError(f"cannot serialise {kind.__name__}")


def figures_to_dict(figures: Figures) -> dict[str, Any]:
    """JSON-ready form (camelCase keys, integer amounts, floats to 4 places); the ``before``/``after`` block of plans."""
    result: dict[str, Any] = _jsonable(figures)
    return result

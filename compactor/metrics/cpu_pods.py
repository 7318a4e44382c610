"""CPU-only pods on GPU nodes: when they hold the CPU, memory or pod slots GPU pods need, how many there are, what they
hold and where, what keeps them off, and what the headline figures would be without them.

Pure: a snapshot and its figures in, a frozen result out; no I/O, no clock. Definitions: ``docs/metrics.md``,
"CPU-only pods on GPU nodes"; ``tests/unit/metrics/test_cpu_pods.py`` checks them on clusters worked by hand.

* The pods: ``fragmentation.cpu_pods_on_gpu_nodes`` (bound, no GPU request, on a GPU node; DaemonSet and static pods
  aside, since they belong on every node).
* Measured, as the request-shape advice measures its roundings: ``compute_figures`` on the snapshot without those pods,
  against the same reference shapes (shapes count GPU pods only, so they do not change). Where the pods go does not
  change which GPU pods fit, as long as it is not a GPU node: this is the cluster once the remedy has moved them.
  Whether today's CPU-only nodes can take them is said apart (first fit, largest first), not assumed.
* Advice only when it helps: some GPU demand is blocked or some stranded GPU capacity is short of CPU, memory or pod
  slots, and without the pods a blocked pending GPU pod fits or the stranded capacity falls.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from compactor.metrics.fragmentation import Figures, compute_figures, cpu_pods_on_gpu_nodes
from compactor.metrics.headline import Headline, headline, not_fitting
from compactor.model.numbers import fmt_cpus, fmt_gpus, fmt_memory, fmt_pct
from compactor.model.resources import CPU, MEMORY, PODS
from compactor.model.scheduling import HARD_EFFECTS, untolerated_taint, why_ineligible
from compactor.model.types import Node, Pod, Snapshot, Taint

SHORT_RESOURCES = (CPU, MEMORY, PODS)  # what CPU-only pods can hold that GPU pods need beside the GPUs
POOLS_NAMED = 3  # pools the first sentence names; the table has them all
_EPS = 1e-9


@dataclass(frozen=True)
class PoolCpuPods:
    """The CPU-only pods on one pool's GPU nodes and the pool's stranded capacity with them and without them."""

    pool: str
    gpu_nodes: int  # GPU nodes of the pool running such pods
    pods: int
    cpu_millicores: int  # what they request
    memory_bytes: int
    stranded_gpus: float  # the pool's stranded GPU-equivalents now
    stranded_without_gpus: float  # and with the pods off the GPU nodes


@dataclass(frozen=True)
class CpuPodsOnGpuNodes:
    """CPU-only pods that keep GPU demand out, and the measured effect of keeping them off the GPU nodes."""

    pods: int
    gpu_nodes: int
    cpu_millicores: int
    memory_bytes: int
    pools: tuple[PoolCpuPods, ...]  # most CPU first
    before: Headline
    after: Headline  # with the pods off the GPU nodes
    unblocked_pods: int  # blocked pending GPU pods that fit a node without them
    recovered_gpus: float  # stranded GPU-equivalents before - after
    cpu_only_nodes: int  # Ready, schedulable nodes without GPUs
    room_pods: int  # of the pods, how many those nodes have room for now (first fit, largest first)
    room_cpu_millicores: int
    room_memory_bytes: int
    tolerated_taint: str  # a NoSchedule/NoExecute taint the GPU nodes carry and some of the pods tolerate ("" if none)
    tolerating_pods: int
    sentences: tuple[str, ...]  # the cause, the measured effect, the room for them, the remedy


def cpu_pods_advice(snapshot: Snapshot, figures: Figures) -> CpuPodsOnGpuNodes | None:
    """The advice on CPU-only pods on GPU nodes, or None when there are none or keeping them off would change nothing.

    ``figures`` are ``compute_figures(snapshot, shapes)``; the cluster without the pods is measured with the same shapes.
    """
    pods = cpu_pods_on_gpu_nodes(snapshot)
    if not pods or not _gpu_demand_kept_out(figures):
        return None
    pending = tuple(sorted(p.key for p in snapshot.pending_pods() if p.uses_gpu))
    leaving = {p.key for p in pods}
    without = compute_figures(
        dataclasses.replace(snapshot, pods=tuple(p for p in snapshot.pods if p.key not in leaving)), figures.shapes
    )
    fit_after = not_fitting(without)
    unblocked = sum(1 for b in figures.blocked_pending if b.pod not in fit_after)
    before, after = headline(figures, pending), headline(without, pending)
    recovered = before.stranded_gpus - after.stranded_gpus
    if unblocked == 0 and recovered <= _EPS:
        return None  # GPU pods hold what is short, or the shapes need more than the pods give back
    nodes = {n.name: n for n in snapshot.nodes}
    taint, tolerating = _tolerated_taint(pods, nodes)
    room = _room(snapshot, figures, pods)
    result = CpuPodsOnGpuNodes(
        pods=len(pods),
        gpu_nodes=len({p.node_name for p in pods}),
        cpu_millicores=sum(p.requests.get(CPU) for p in pods),
        memory_bytes=sum(p.requests.get(MEMORY) for p in pods),
        pools=_pools(pods, nodes, figures, without),
        before=before,
        after=after,
        unblocked_pods=unblocked,
        recovered_gpus=recovered,
        cpu_only_nodes=room[0],
        room_pods=room[1],
        room_cpu_millicores=room[2],
        room_memory_bytes=room[3],
        tolerated_taint=taint,
        tolerating_pods=tolerating,
        sentences=(),
    )
    return dataclasses.replace(result, sentences=sentences(result))


def _gpu_demand_kept_out(figures: Figures) -> bool:
    """Some pending GPU pod is blocked, or some free GPU capacity is stranded for want of CPU, memory or pod slots:
    only then can the CPU-only pods be what keeps GPU demand out (worth one more ``compute_figures``)."""
    return bool(figures.blocked_pending) or any(
        n.stranded_gpus > _EPS and n.limited_by in SHORT_RESOURCES for n in figures.nodes
    )


def _pools(
    pods: Sequence[Pod], nodes: Mapping[str, Node], figures: Figures, without: Figures
) -> tuple[PoolCpuPods, ...]:
    by_pool: dict[str, list[Pod]] = {}
    for pod in pods:
        by_pool.setdefault(nodes[pod.node_name].pool, []).append(pod)
    stranded = {p.name: p.stranded_gpus for p in figures.pools}
    stranded_without = {p.name: p.stranded_gpus for p in without.pools}
    rows = [
        PoolCpuPods(
            pool=pool,
            gpu_nodes=len({p.node_name for p in members}),
            pods=len(members),
            cpu_millicores=sum(p.requests.get(CPU) for p in members),
            memory_bytes=sum(p.requests.get(MEMORY) for p in members),
            stranded_gpus=stranded.get(pool, 0.0),
            stranded_without_gpus=stranded_without.get(pool, 0.0),
        )
        for pool, members in by_pool.items()
    ]
    return tuple(sorted(rows, key=lambda r: (-r.cpu_millicores, r.pool)))


def _tolerated_taint(pods: Sequence[Pod], nodes: Mapping[str, Node]) -> tuple[str, int]:
    """The GPU nodes' most common hard taint that pods of ``pods`` tolerate, and how many tolerate their node's hard
    taints: for those a new taint is no remedy, dropping the toleration is."""
    seen: Counter[str] = Counter()
    tolerating = 0
    for pod in pods:
        hard = [t for t in nodes[pod.node_name].taints if t.effect in HARD_EFFECTS]
        if hard and untolerated_taint(pod.tolerations, tuple(hard)) is None:
            tolerating += 1
            seen.update(_taint_label(t) for t in hard)
    top = min(seen.items(), key=lambda kv: (-kv[1], kv[0]))[0] if seen else ""
    return top, tolerating


def _taint_label(taint: Taint) -> str:
    return f"{taint.key}={taint.value}:{taint.effect}" if taint.value else f"{taint.key}:{taint.effect}"


def _room(snapshot: Snapshot, figures: Figures, pods: Sequence[Pod]) -> tuple[int, int, int, int]:
    """(CPU-only nodes, and of ``pods`` the count, CPU and memory they have room for now): first fit, largest first,
    each pod only where it may go (taints, nodeSelector, affinity). An estimate of what moves without new nodes."""
    hosts = sorted(
        (n for n in snapshot.nodes if not n.is_gpu_node and n.ready and not n.unschedulable), key=lambda n: n.name
    )
    free = {n.name: n.free.as_dict() for n in figures.nodes}
    eligible: dict[tuple[object, ...], list[Node]] = {}
    start: dict[tuple[object, ...], int] = {}  # per kind of pod: hosts before this one hold no more of it
    placed = cpu = memory = 0
    for pod in sorted(pods, key=lambda p: (-p.requests.get(CPU), -p.requests.get(MEMORY), p.key)):
        kind = (pod.requests, pod.tolerations, pod.node_selector, pod.affinity)
        if kind not in eligible:
            eligible[kind] = [n for n in hosts if why_ineligible(pod, n) is None]
            start[kind] = 0
        candidates = eligible[kind]
        while start[kind] < len(candidates) and not pod.requests.fits_in(free[candidates[start[kind]].name]):
            start[kind] += 1
        if start[kind] == len(candidates):
            continue
        room = free[candidates[start[kind]].name]
        for resource, amount in pod.requests.items():
            room[resource] = room.get(resource, 0) - amount
        placed, cpu, memory = placed + 1, cpu + pod.requests.get(CPU), memory + pod.requests.get(MEMORY)
    return len(hosts), placed, cpu, memory


# ---------------------------------------------------------------------------
# Words


def _plural(count: int, word: str, *, plural: str = "") -> str:
    return f"{count:,} {word}" if count == 1 else f"{count:,} {plural or word + 's'}"


def sentences(a: CpuPodsOnGpuNodes) -> tuple[str, ...]:
    """The cause (with the pools), the effect measured without the pods, the room CPU-only nodes have, the remedy."""
    return (_cause(a), _effect(a), _room_sentence(a), _remedy(a))


def _cause(a: CpuPodsOnGpuNodes) -> str:
    named = "; ".join(
        f"{p.pool}: {_plural(p.pods, 'pod')}, {fmt_cpus(p.cpu_millicores)} CPUs on {_plural(p.gpu_nodes, 'node')}"
        for p in a.pools[:POOLS_NAMED]
    )
    more = f"; {len(a.pools) - POOLS_NAMED} more pool(s)" if len(a.pools) > POOLS_NAMED else ""
    return (
        f"{_plural(a.pods, 'CPU-only pod')} (no GPU request; DaemonSet and static pods aside) hold CPU, memory and pod "
        f"slots GPU pods need beside the free GPUs: on {_plural(a.gpu_nodes, 'GPU node')} they request "
        f"{fmt_cpus(a.cpu_millicores)} CPUs and {fmt_memory(a.memory_bytes)} memory ({named}{more})"
    )


def _effect(a: CpuPodsOnGpuNodes) -> str:
    b, w = a.before, a.after
    parts = [_unblocked(a)] if b.blocked_pending else []
    parts += [
        f"blocked demand {fmt_gpus(b.blocked_demand_gpus)} -> {fmt_gpus(w.blocked_demand_gpus)} GPU-equivalents",
        f"stranded {fmt_gpus(b.stranded_gpus)} -> {fmt_gpus(w.stranded_gpus)} GPU-equivalents "
        f"(stranded share {fmt_pct(b.stranded_share)} -> {fmt_pct(w.stranded_share)})",
    ]
    if b.pending:
        parts.append(f"pending GPU pods that fit {b.pending_fit} -> {w.pending_fit} of {b.pending}")
    lead = "Measured with them off the GPU nodes (where they go does not change which GPU pods fit): "
    return lead + ", ".join(parts)


def _unblocked(a: CpuPodsOnGpuNodes) -> str:
    blocked = a.before.blocked_pending
    if a.unblocked_pods:
        return f"{a.unblocked_pods} of the {_plural(blocked, 'blocked pending GPU pod')} would fit"
    # blocked for want of GPUs on one node, or by GPU pods' CPU: compaction's work, not this remedy's
    return (
        f"none of the {_plural(blocked, 'blocked pending GPU pod')} would fit (their reasons say what keeps them out)"
    )


def _room_sentence(a: CpuPodsOnGpuNodes) -> str:
    if a.cpu_only_nodes == 0:
        return "No Ready, schedulable CPU-only node to take them: add a CPU-only node pool first"
    nodes = _plural(a.cpu_only_nodes, "CPU-only node") + (" has" if a.cpu_only_nodes == 1 else " have")
    if a.room_pods == a.pods:
        return f"The {nodes} room for all of them now (first fit, largest first)"
    short_cpu = a.cpu_millicores - a.room_cpu_millicores
    short_memory = a.memory_bytes - a.room_memory_bytes
    return (
        f"The {nodes} room for {a.room_pods:,} of them now ({fmt_cpus(a.room_cpu_millicores)} of "
        f"{fmt_cpus(a.cpu_millicores)} CPUs; first fit, largest first): the rest need about {fmt_cpus(short_cpu)} CPUs and "
        f"{fmt_memory(short_memory)} memory more on CPU-only nodes"
    )


def _remedy(a: CpuPodsOnGpuNodes) -> str:
    keep = "or keep CPU-only workloads on CPU-only nodes with a nodeSelector or node affinity"
    if a.tolerating_pods:
        verb = "tolerates" if a.tolerating_pods == 1 else "tolerate"
        return (
            f"Remedy: {_plural(a.tolerating_pods, 'of them', plural='of them')} {verb} the GPU nodes' taint "
            f"{a.tolerated_taint}: drop that toleration from CPU-only workloads, {keep}"
        )
    return (
        "Remedy: taint the GPU nodes NoSchedule (GKE's GPU node pools carry nvidia.com/gpu=present:NoSchedule) and give "
        "GPU workloads the matching toleration (the ExtendedResourceToleration admission plugin adds it to pods asking "
        f"for nvidia.com/gpu), {keep}; running pods leave as they are rescheduled"
    )


def stranded_change(p: PoolCpuPods) -> str:
    """``450 -> 120`` (or ``450`` when it does not change): a pool's stranded GPU-equivalents with and without the pods."""
    before, after = fmt_gpus(p.stranded_gpus), fmt_gpus(p.stranded_without_gpus)
    return before if math.isclose(p.stranded_gpus, p.stranded_without_gpus, abs_tol=_EPS) else f"{before} -> {after}"

"""Fragmentation figures of a snapshot: per node, per pool and for the whole cluster.

Pure: no I/O, no clock, no Kubernetes client. Every figure, its formula and a
worked example are in ``docs/metrics.md``; the tests check that example.

Units: two, never under one name. *GPUs (physical)* count devices (``gpus``,
``whole_free_physical_gpus``). *GPU capacity* is counted in GPU-equivalents
(``GpuInfo.equivalent``: 1 for a whole GPU, ``1/replicas`` for a time-sliced replica,
``memory_slices/slots`` for a MIG instance): every other ``*_gpus`` float here. In JSON
the latter are named ``...GpuEquivalents`` and the former ``...PhysicalGpus``. Other
resources stay in scheduler units (millicores, bytes).

``compute_figures`` runs the stages, each in its own module: ``node_figures`` (per node), ``aggregation`` (pools and
the cluster), ``pending`` (pending GPU pods); the result types are ``figure_types``', the JSON form ``figures_json``',
and the per-node shape formula, which the planner shares, ``compactor.model.fragments``'.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from compactor.metrics.aggregation import pool_and_cluster
from compactor.metrics.figure_types import Figures, NodeFigures, ShapeHeadroom
from compactor.metrics.node_figures import limiting_resource, node_figures, stranded_units, usage_by_node
from compactor.metrics.pending import pending_gpu_pods
from compactor.model.cpu_only_pods import cpu_pods_hold, cpu_pods_on_gpu_nodes, held_by_node
from compactor.model.fragments import NodeFree, ShapesByFirstResource, node_fragments, node_free, prepare_shapes
from compactor.model.shapes import CONFIG, ReferenceShape, judged_shapes, reference_shapes, requests_label
from compactor.model.types import Snapshot

# The reference workload and the CPU-only pods on GPU nodes live in the model (the planner uses them too); these names
# stay importable from here, as does ``Figures``, which most readers of the figures import with ``compute_figures``.
__all__ = [
    "CONFIG",
    "Figures",
    "ReferenceShape",
    "cpu_pods_hold",
    "cpu_pods_on_gpu_nodes",
    "held_by_node",
    "reference_shapes",
    "requests_label",
]

_SAMPLE = 3


def compute_figures(snapshot: Snapshot, shapes: Sequence[ReferenceShape] | None = None) -> Figures:
    """All fragmentation figures of ``snapshot`` against the reference shapes (default: from the workload)."""
    chosen = tuple(reference_shapes(snapshot) if shapes is None else shapes)
    prepared = prepare_shapes(chosen)
    has_gpu_shapes = any(s.gpu_items for s in prepared)
    in_use = judged_shapes(snapshot.pods, chosen)
    judged = prepare_shapes(in_use)
    index = ShapesByFirstResource(judged)
    usage = usage_by_node(snapshot)
    states: list[NodeFree] = []
    nodes: list[NodeFigures] = []
    copies = [0] * len(prepared)
    hosts = [0] * len(prepared)
    for node in snapshot.nodes:
        state = node_free(node, usage[node.name].requested)
        fragmented, fgd, fits = node_fragments(state, prepared)
        in_use_fits = index.copies(state) if has_gpu_shapes and state.free_gpus > 0 else []
        stranded = stranded_units(state, judged, in_use_fits) if in_use_fits else {}
        if state.hostable:
            for i, n in enumerate(fits):
                copies[i] += n
                hosts[i] += n > 0
        states.append(state)
        limited = limiting_resource(state, judged, in_use_fits) if in_use_fits and (fragmented > 0 or stranded) else ""
        nodes.append(node_figures(state, usage[node.name], fragmented, fgd, stranded, limited))
    cluster, pools = pool_and_cluster(nodes, has_shapes=bool(prepared), has_gpu_shapes=has_gpu_shapes)
    pending, blocked, unplaceable = pending_gpu_pods(snapshot, states)
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
        shapes_in_use=sum(1 for s in in_use if s.uses_gpu),
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

"""Which GPU nodes new GPU pods should fill first (prevention, docs/prevention.md): the nodes already running GPU pods
that still have GPU capacity free, by how full they are. Pure: node figures in, ``node -> tier`` out.

A tier is ``"1"``, ``"2"`` or ``"3"``: the share of the node's GPU capacity (GPU-equivalents, so MIG slices and
time-sliced replicas count as the figures count them) its bound pods hold, in thirds, ``"3"`` the fullest. A node that
runs no GPU pod (whole-free: what an 8-GPU pod or a re-cut needs), a full one, and one that is not Ready or not
schedulable get none: the fill-first admission policy (``manifests/prevention``) prefers a tier, never requires one, so
a pod that fits no labelled node still schedules anywhere.
"""

from __future__ import annotations

from collections.abc import Iterable

from compactor.metrics.figure_types import NodeFigures

FILL_FIRST_LABEL = "compactor.io/fill-first"
TIERS = 3


def fill_first_tiers(nodes: Iterable[NodeFigures]) -> dict[str, str]:
    """GPU node -> its tier, for the nodes new GPU pods should fill first."""
    tiers = {}
    for node in nodes:
        if not (node.ready and node.schedulable and node.runs_gpu_pods) or node.allocatable_gpus <= 0:
            continue
        if node.free_gpus <= 0:
            continue
        share = min(1.0, max(0.0, node.allocated_gpus / node.allocatable_gpus))
        tiers[node.name] = str(min(TIERS, 1 + int(share * TIERS)))
    return tiers

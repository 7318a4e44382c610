"""The result types of the fragmentation figures: per node, per pool or cluster, and the whole ``Figures``.

Apart from ``fragmentation.py`` because each stage of ``compute_figures`` (``node_figures``, ``aggregation``,
``pending``) builds one of them and the entry point imports the stages: kept beside it they would close an import
cycle. Units as ``fragmentation.py`` states them (``gpus`` physical GPUs, other ``*_gpus`` GPU-equivalents).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from compactor.model.resources import Resources
from compactor.model.shapes import ReferenceShape


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
    shapes_in_use: int = 0  # GPU request shapes the pods ask (``shapes`` is the reference cut of them, or configured)

"""The trace's GPU-sharing pods as the nearest request Kubernetes supports (issue [24], item 3; ``--shared-replicas``).

43.6% of the trace's GPU pods share one GPU (``num_gpu`` 1, ``gpu_milli`` below 1000: FGD's fractional GPUs). No
device plugin shares a GPU by fractions; the nearest supported request on GPUs without MIG (none of the trace's models
has it) is a time-sliced replica: the device plugin's time-slicing with ``renameByDefault: true`` advertises each GPU
of a node configured for it as ``SLICED_REPLICAS`` ``nvidia.com/gpu.shared`` replicas. The mapping, stated:

* a sharing pod asks ``ceil(gpu_milli x SLICED_REPLICAS / 1000)`` replicas (810 milli: 4, a whole GPU's time; 470: 2;
  230: 1), its models kept; time-slicing does not enforce the share (a replica is a turn, not a fraction), so this
  reserves what the pod used in the trace. A pod of whole GPUs asks ``nvidia.com/gpu`` as before;
* an operator time-slices whole nodes (the device plugin's config is per node, ``nvidia.com/device-plugin.config``):
  of each GPU model, the nodes with the fewest GPUs first (an 8-GPU pod needs the big ones), until that model's
  time-sliced GPUs come closest to its share of the sharing pods' demand (GPU-equivalents x life, a pod allowed on
  several models counted on each in proportion to its GPUs in the sample). A time-sliced node offers no
  ``nvidia.com/gpu``: the two pools are apart, as in a cluster that configures them so.

A replica is worth 1/``SLICED_REPLICAS`` of a GPU in the figures (GPU-equivalents), as gpu-compactor counts it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from trace_replay import TraceNode, TracePod

GPU_SHARED = "nvidia.com/gpu.shared"
SLICED_REPLICAS = 4
SHARED_SIZE = "shared GPU"  # its class in the tables (day_replay.SIZES)


@dataclass(frozen=True, slots=True)
class SlicedNode:
    """A trace node time-sliced: no whole GPU offered, ``extended`` its replicas, ``physical_gpus`` the GPUs behind
    them (what ``KubeScheduler`` and the replay's node objects read)."""

    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str
    extended: dict[str, int] = field(default_factory=dict)
    physical_gpus: int = 0
    replicas: int = SLICED_REPLICAS


def replicas_asked(pod: TracePod) -> int:
    """The replicas a pod of the mapped stream asks (``as_replicas``); 0 for a pod of whole GPUs or none."""
    shape = pod.shape
    return math.ceil(shape.gpu_milli * SLICED_REPLICAS / 1000) if not shape.num_gpu and shape.gpu_milli else 0


def demand_of(pod: TracePod) -> float:
    """GPU-equivalents a pod asks: its whole GPUs, or its replicas' share of a GPU."""
    return pod.shape.num_gpu + replicas_asked(pod) / SLICED_REPLICAS


def is_sharing(pod: TracePod) -> bool:
    return pod.shape.num_gpu == 1 and 0 < pod.shape.gpu_milli < 1000


def as_replicas(stream: Sequence[tuple[TracePod, float]]) -> list[tuple[TracePod, float]]:
    """The stream with each sharing pod asking no whole GPU (its ``gpu_milli`` kept: ``replicas_asked`` reads it)."""
    return [
        (replace(pod, shape=replace(pod.shape, num_gpu=0)) if is_sharing(pod) else pod, life) for pod, life in stream
    ]


def time_slice(nodes: Sequence[TraceNode], stream: Sequence[tuple[TracePod, float]]) -> list[TraceNode | SlicedNode]:
    """``nodes`` with, of each GPU model, its smallest nodes time-sliced until they hold its share of the sharing
    demand of the mapped ``stream`` (closest to it, by whole nodes)."""
    gpus_of: dict[str, int] = defaultdict(int)
    for node in nodes:
        gpus_of[node.model] += node.gpus
    shared: dict[str, float] = defaultdict(float)
    whole: dict[str, float] = defaultdict(float)
    for pod, life in stream:
        allowed = [m for m in (pod.models or gpus_of) if gpus_of.get(m)]
        total = sum(gpus_of[m] for m in allowed)
        for model in allowed:
            into = shared if replicas_asked(pod) else whole
            into[model] += demand_of(pod) * life * gpus_of[model] / total
    sliced: set[str] = set()
    for model, gpus in gpus_of.items():
        asked = shared[model] + whole[model]
        target = gpus * shared[model] / asked if asked else 0.0
        held = 0
        for node in sorted((n for n in nodes if n.model == model), key=lambda n: (n.gpus, n.name)):
            if abs(held + node.gpus - target) >= abs(held - target):
                break
            sliced.add(node.name)
            held += node.gpus
    return [_sliced(n) if n.name in sliced else n for n in nodes]


def _sliced(node: TraceNode) -> SlicedNode:
    offer = {GPU_SHARED: node.gpus * SLICED_REPLICAS}
    return SlicedNode(node.name, node.cpu_milli, node.memory_mib, 0, node.model, offer, node.gpus)

"""Synthetic large clusters for benchmarks: a consistent ``kubectl get ... -o json`` List.

    python benchmarks/generate_cluster.py --nodes 5000 --pods 50000 --out /tmp/cluster.json

``generate(nodes, pods, seed=...)`` returns the v1 ``List`` as a dict; the same seed
gives the same cluster. Nothing here imports ``compactor``: the output is raw
Kubernetes objects, like a real snapshot.

Nodes
    ``cpu_share`` of the nodes are CPU-only (96 CPUs, 384 GiB). The rest are GPU
    nodes with ``gpus_per_node`` GPUs, 256 CPUs and ~1 TiB; ``mig_share`` of those
    are A100-SXM4-40GB MIG nodes under the device plugin's ``mixed`` strategy,
    three in four ``all-balanced`` (per GPU 1g.5gb x2 + 2g.10gb + 3g.20gb) and one
    in four ``all-1g.5gb`` (7 x 1g.5gb per GPU). Whole-GPU nodes are A100-SXM4-40GB
    (50%), A100-SXM4-80GB (30%) or H100-80GB-HBM3 (20%), ``nvidia.com/mig.config=all-disabled``.
    Labels are the GPU Feature Discovery ones the model reads (``nvidia.com/gpu.product``,
    ``gpu.count``, ``gpu.memory``, ``mig.strategy``, ``mig.config``, ``mig.config.state``,
    ``mig.capable``, per-profile ``nvidia.com/mig-<profile>.count``).

Pod shapes
    Drawn from the Alibaba GPU trace ``openb_pod_list_default.csv`` (columns
    ``cpu_milli, memory_mib, num_gpu, gpu_milli, qos``): Weng, Yang, Yu, Wang, Tang,
    Yang, Zhang, "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
    Fragmentation Gradient Descent", USENIX ATC 2023 (trace: alibaba/clusterdata,
    ``cluster-trace-gpu-v2023``; research/study use). It is read from
    ``../shared/data/alibaba-gpu-v2023/csv/`` beside the checkout, or ``trace=``;
    when the file is absent a built-in table of the trace's 45 most frequent shapes
    (93% of its pods, plus its multi-GPU shapes) stands in, with their frequencies.

    Mapping a trace row to Kubernetes requests:

    * ``num_gpu == 0``: a CPU-only pod (``cpu``, ``memory``).
    * ``num_gpu >= 1`` and ``gpu_milli == 1000``: ``nvidia.com/gpu: num_gpu`` (whole GPUs).
    * ``num_gpu == 1`` and ``gpu_milli < 1000`` (a GPU-sharing pod): share
      ``f = gpu_milli / 1000`` is read as a fraction of GPU memory and mapped to the
      smallest A100-40GB MIG profile whose memory fraction (memory slices / 8) covers
      it: ``f <= 1/8`` -> ``mig-1g.5gb``, ``f <= 1/4`` -> ``mig-2g.10gb``,
      ``f <= 1/2`` -> ``mig-3g.20gb``. It is placed on a MIG node offering that
      profile. When ``f > 1/2``, when there are no MIG nodes, or when that profile
      has reached its fill target, the pod gets a whole GPU (``nvidia.com/gpu: 1``).
    * ``qos`` LS -> priority 1000 (class ``online``), BE -> 0, others -> 100.

Filling and placement
    Deployments (one trace shape, 1-32 replicas, a ReplicaSet owning the pods, a
    PDB for most with two or more replicas) are drawn until every GPU pool has been
    asked for ``fill`` of its capacity (whole GPUs; each MIG profile's instances),
    or the pod budget is spent. Shapes for a pool that is full are redrawn, so the
    budget left over once the GPU pools are full is spent on CPU-only shapes (CPU
    nodes first, up to ``fill`` of their CPUs, then spare CPU on GPU nodes, as in
    the trace's own cluster). Pools that cannot reach ``fill`` with the pods given
    (``all-1g.5gb`` nodes: the trace has few pods that small) stay emptier.

    Pods are placed largest GPU request first by a first-fit scheduler that starts
    at a random node of the pool: it spreads pods across nodes as the default
    scheduler's spreading scores do, which is what fragments a cluster. It respects
    every node's allocatable (GPU resources, CPU, memory, pod count), so no node
    is over-allocated; a replica that fits nowhere is dropped (its Deployment ends
    with fewer replicas). A whole-GPU node left entirely idle then receives one
    single-GPU replica from elsewhere, so that no node can take a full-node pod.
    One DaemonSet pod per node (device plugin or node exporter, 50m CPU / 64Mi) is
    part of the ``pods`` total when ``pods >= 2 * nodes``; ``pending`` of the pods
    (default ``pods // 5000`` clamped to 3-10) ask for a full node of GPUs and are
    Pending with ``PodScheduled=False``, reason ``Unschedulable``: the cluster has
    the GPUs in total, but no node has them all free.

Objects are realistic but compact (the fields a snapshot reader uses plus uids,
timestamps, owner references, conditions) and written without indentation: the
5,000-node / 50,000-pod cluster is about 57 MB and is generated in a few seconds.
"""

from __future__ import annotations

import argparse
import csv
import gc
import json
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TRACE_FILE = (
    Path(__file__).resolve().parents[2] / "shared" / "data" / "alibaba-gpu-v2023" / "csv" / "openb_pod_list_default.csv"
)

GPU = "nvidia.com/gpu"
MIG_PROFILES = (("1g.5gb", 1 / 8), ("2g.10gb", 2 / 8), ("3g.20gb", 4 / 8))  # A100-40GB: profile, memory fraction
LAYOUTS = {"all-balanced": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}, "all-1g.5gb": {"1g.5gb": 7}}
BALANCED_SHARE = 0.75  # of MIG nodes; the rest are all-1g.5gb
WHOLE_PRODUCTS = (  # product, GFD gpu.memory (MiB), gpu-type label, weight
    ("NVIDIA-A100-SXM4-40GB", 40960, "a100", 0.5),
    ("NVIDIA-A100-SXM4-80GB", 81920, "a100", 0.3),
    ("NVIDIA-H100-80GB-HBM3", 81559, "h100", 0.2),
)
MIG_PRODUCT = "NVIDIA-A100-SXM4-40GB"
GPU_NODE = {"cpu": 256, "memory_mib": 1_031_616}  # allocatable: 255.5 CPUs, ~1007 GiB
CPU_NODE = {"cpu": 96, "memory_mib": 393_216}
MAX_PODS = 110
REPLICAS = (1, 1, 1, 2, 2, 2, 3, 3, 4, 4, 5, 6, 8, 8, 10, 12, 16, 20, 24, 32)
MULTI_GPU_REPLICAS = (1, 1, 1, 2, 2, 4)
SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
NOW = 1_710_756_000  # 2024-03-18T10:00:00Z: "now" of the snapshot
K8S_VERSION = "v1.26.15"

# The trace's 45 most frequent shapes in openb_pod_list_default.csv (93% of its 8,152 pods)
# and its multi-GPU shapes: (cpu_milli, memory_mib, num_gpu, gpu_milli, count).
FALLBACK_SHAPES = (
    (3152, 5600, 1, 810, 1047),
    (11300, 49152, 1, 1000, 857),
    (11400, 48128, 1, 1000, 534),
    (3152, 5600, 1, 1000, 470),
    (11908, 47104, 1, 470, 388),
    (12500, 57344, 0, 0, 364),
    (8000, 30517, 1, 470, 360),
    (32000, 49152, 0, 0, 284),
    (18708, 64512, 1, 1000, 255),
    (11908, 47104, 1, 650, 237),
    (9810, 41560, 1, 1000, 195),
    (8000, 30517, 0, 0, 163),
    (12000, 24576, 1, 1000, 158),
    (15700, 58368, 1, 1000, 158),
    (11908, 47104, 1, 1000, 153),
    (15400, 51200, 0, 0, 120),
    (4000, 22888, 1, 320, 111),
    (16000, 32768, 1, 1000, 108),
    (8000, 16384, 1, 1000, 104),
    (4000, 24576, 1, 1000, 104),
    (12000, 16384, 1, 1000, 99),
    (16500, 51200, 0, 0, 95),
    (14200, 58368, 1, 1000, 93),
    (4000, 30517, 1, 230, 84),
    (24200, 93184, 1, 1000, 84),
    (4000, 15258, 1, 320, 78),
    (3152, 5600, 1, 590, 75),
    (8000, 30517, 1, 320, 72),
    (4152, 10600, 1, 550, 72),
    (11400, 77824, 1, 1000, 65),
    (8000, 32768, 1, 1000, 55),
    (4000, 15258, 1, 160, 53),
    (6000, 6144, 1, 460, 51),
    (11900, 77824, 1, 1000, 51),
    (4152, 10600, 1, 370, 45),
    (12000, 15360, 1, 1000, 44),
    (4000, 30517, 1, 320, 43),
    (4000, 22888, 1, 230, 26),
    (4000, 15258, 1, 220, 24),
    (6000, 22888, 1, 160, 20),
    (4000, 22888, 1, 110, 9),
    (4000, 15258, 1, 110, 8),
    (6000, 22888, 1, 50, 4),
    (88000, 327680, 8, 1000, 18),
    (64200, 263168, 8, 1000, 18),
    (32200, 132096, 4, 1000, 9),
    (16200, 66560, 2, 1000, 7),
    (120000, 737280, 8, 1000, 3),
    (64000, 262144, 8, 1000, 3),
    (32000, 131072, 4, 1000, 3),
    (30200, 160768, 2, 1000, 3),
)


# ---------------------------------------------------------------- shapes


@dataclass(frozen=True, slots=True)
class Shape:
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    qos: str = "LS"

    @property
    def mig_profile(self) -> str:
        """The MIG profile a sharing pod maps to, or "" (CPU-only, whole GPUs, or more than half a GPU)."""
        if self.num_gpu != 1 or self.gpu_milli >= 1000:
            return ""
        share = self.gpu_milli / 1000
        return next((name for name, fraction in MIG_PROFILES if share <= fraction), "")


def load_shapes(trace: str | Path | None = None) -> tuple[list[Shape], str]:
    """Every pod row of the trace (one entry per pod, so drawing is frequency-weighted), and where they came from."""
    if str(trace) == BUILTIN:
        return _builtin_shapes(), "built-in table (--trace builtin)"
    path = Path(trace) if trace else TRACE_FILE
    if path.is_file():
        with path.open(newline="") as handle:
            shapes = [
                Shape(
                    int(r["cpu_milli"]),
                    int(r["memory_mib"]),
                    int(r["num_gpu"]),
                    int(r["gpu_milli"]),
                    r.get("qos") or "LS",
                )
                for r in csv.DictReader(handle)
            ]
        if shapes:
            return shapes, str(path)
    if trace:
        raise FileNotFoundError(f"trace file {trace} not found or empty")
    return _builtin_shapes(), f"built-in table ({path} not found)"


BUILTIN = "builtin"  # --trace builtin: the built-in table, whether or not the trace file is there


def _builtin_shapes() -> list[Shape]:
    return [
        Shape(c, m, n, g, "LS" if i % 7 < 4 else "BE") for c, m, n, g, count in FALLBACK_SHAPES for i in range(count)
    ]


# ---------------------------------------------------------------- nodes


@dataclass(slots=True)
class NodeState:
    name: str
    kind: str  # gpu | mig | cpu
    index: int
    free: dict[str, int]
    raw: dict[str, Any]


def _node_names(
    rng: random.Random, nodes: int, gpus_per_node: int, mig_share: float, cpu_share: float
) -> list[tuple[str, str]]:
    """(kind, mig config or product) per node, in a shuffled order."""
    n_cpu = round(nodes * cpu_share)
    n_gpu = nodes - n_cpu
    n_mig = round(n_gpu * mig_share) if gpus_per_node else 0
    n_bal = round(n_mig * BALANCED_SHARE)
    kinds = [("cpu", "")] * n_cpu + [("mig", "all-balanced")] * n_bal + [("mig", "all-1g.5gb")] * (n_mig - n_bal)
    weights = [w for *_, w in WHOLE_PRODUCTS]
    kinds += [("gpu", p) for p in rng.choices([p for p, *_ in WHOLE_PRODUCTS], weights, k=n_gpu - n_mig)]
    rng.shuffle(kinds)
    return kinds


def _gpu_labels(product: str, memory: int, gpu_type: str, gpus: int, mig_config: str) -> dict[str, str]:
    labels = {
        "gpu-type": gpu_type,
        "mig-enabled": "false" if mig_config == "all-disabled" else "true",
        "node-pool": "gpu-large" if mig_config == "all-disabled" else "mig-medium",
        "nvidia.com/gpu.count": str(gpus),
        "nvidia.com/gpu.memory": str(memory),
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": product,
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.config": mig_config,
        "nvidia.com/mig.config.state": "success",
        "nvidia.com/mig.strategy": "mixed",
    }
    for profile, count in LAYOUTS.get(mig_config, {}).items():
        labels[f"nvidia.com/mig-{profile}.count"] = str(count * gpus)
        labels[f"nvidia.com/mig-{profile}.product"] = f"{product}-MIG-{profile}"
    return labels


def make_node(rng: random.Random, index: int, kind: str, variant: str, gpus: int) -> NodeState:
    name = f"{kind}-{index:05d}"
    size = CPU_NODE if kind == "cpu" else GPU_NODE
    labels = {"kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}
    extended: dict[str, int] = {}
    if kind == "cpu":
        labels["node-pool"] = "cpu-micro"
    elif kind == "mig":
        labels |= _gpu_labels(MIG_PRODUCT, 40960, "a100", gpus, variant)
        extended = {f"nvidia.com/mig-{p}": c * gpus for p, c in LAYOUTS[variant].items()}
    else:
        product, memory, gpu_type, _ = next(row for row in WHOLE_PRODUCTS if row[0] == variant)
        labels |= _gpu_labels(product, memory, gpu_type, gpus, "all-disabled")
        extended = {GPU: gpus}
    capacity = {"cpu": str(size["cpu"]), "memory": f"{size['memory_mib'] * 1024 + 10_485_760}Ki", "pods": str(MAX_PODS)}
    allocatable = {"cpu": f"{size['cpu'] * 1000 - 500}m", "memory": f"{size['memory_mib']}Mi", "pods": str(MAX_PODS)}
    for resource, amount in extended.items():
        capacity[resource] = allocatable[resource] = str(amount)
    raw = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": _uid(rng),
            "creationTimestamp": _timestamp(NOW - 86_400 * (120 + index % 200)),
            "labels": labels,
        },
        "spec": {"podCIDR": f"10.{64 + index // 256}.{index % 256}.0/24"},
        "status": {
            "addresses": [{"type": "InternalIP", "address": _node_ip(index)}, {"type": "Hostname", "address": name}],
            "allocatable": allocatable,
            "capacity": capacity,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "lastTransitionTime": _timestamp(NOW - 86_400 * 3),
                }
            ],
            "nodeInfo": _NODE_INFO,
        },
    }
    free = {"cpu": size["cpu"] * 1000 - 500, "memory": size["memory_mib"], "pods": MAX_PODS, **extended}
    return NodeState(name, kind, index, free, raw)


_NODE_INFO = {
    "architecture": "amd64",
    "containerRuntimeVersion": "containerd://1.6.28",
    "kernelVersion": "5.15.0-97-generic",
    "kubeProxyVersion": K8S_VERSION,
    "kubeletVersion": K8S_VERSION,
    "operatingSystem": "linux",
    "osImage": "Ubuntu 22.04.4 LTS",
}


def _node_ip(index: int) -> str:
    return f"10.{index // 65536}.{index // 256 % 256}.{index % 256}"


def _uid(rng: random.Random) -> str:
    """A random (version 4 layout) UUID; formatted by hand, ``uuid.UUID`` is 5x slower."""
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


def _timestamp(epoch: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def _suffix(rng: random.Random, length: int) -> str:
    return "".join(rng.choices(SAFE_ALPHABET, k=length))


# ---------------------------------------------------------------- deployments


@dataclass(slots=True)
class Deployment:
    name: str
    namespace: str
    shape: Shape
    request: dict[str, int]  # scheduler units used for fitting: cpu milli, memory MiB, GPU resource
    pool: str  # gpu | mig | cpu
    replicas: int
    placed: list[int] = field(default_factory=list)  # node index per placed replica

    @property
    def gpu_size(self) -> float:
        if GPU in self.request:
            return self.request[GPU]
        return next((f for p, f in MIG_PROFILES if f"nvidia.com/mig-{p}" in self.request), 0.0)


class Demand:
    """What has been asked of each GPU pool so far, against its fill target."""

    def __init__(self, nodes: Sequence[NodeState], fill: float) -> None:
        capacity: dict[str, int] = {}
        for node in nodes:
            for resource, amount in node.free.items():
                if resource.startswith("nvidia.com/"):
                    capacity[resource] = capacity.get(resource, 0) + amount
        self.target = {r: fill * c for r, c in capacity.items()}
        self.asked = dict.fromkeys(capacity, 0)

    def open(self, resource: str) -> bool:
        return self.asked.get(resource, 0) < self.target.get(resource, 0)

    def any_open(self) -> bool:
        return any(self.open(r) for r in self.target)

    def ask(self, resource: str, amount: int) -> None:
        self.asked[resource] += amount


def route(shape: Shape, demand: Demand, gpus_per_node: int) -> tuple[str, dict[str, int]] | None:
    """(pool, request) for a shape, or None when every pool it could use is full (redraw)."""
    base = {"cpu": shape.cpu_milli, "memory": shape.memory_mib, "pods": 1}
    if shape.num_gpu == 0:
        return "cpu", base
    profile = shape.mig_profile
    if profile and demand.open(f"nvidia.com/mig-{profile}"):
        return "mig", base | {f"nvidia.com/mig-{profile}": 1}
    if shape.num_gpu <= gpus_per_node and demand.open(GPU):
        return "gpu", base | {GPU: shape.num_gpu}
    return None


def draw_deployments(
    rng: random.Random, shapes: Sequence[Shape], budget: int, demand: Demand, gpus_per_node: int
) -> list[Deployment]:
    """Deployments until the GPU pools reach their fill target or the budget is spent."""
    deployments: list[Deployment] = []
    namespaces = [f"team-{i:02d}" for i in range(40)]
    misses = 0
    while budget > 0 and demand.any_open() and misses < 1000:
        shape = rng.choice(shapes)
        routed = route(shape, demand, gpus_per_node)
        if routed is None:
            misses += 1
            continue
        misses = 0
        pool, request = routed
        replicas = min(budget, rng.choice(MULTI_GPU_REPLICAS if shape.num_gpu > 1 else REPLICAS))
        for resource, amount in request.items():
            if resource.startswith("nvidia.com/"):
                demand.ask(resource, amount * replicas)
        deployments.append(
            Deployment(
                _deployment_name(pool, shape, len(deployments)), rng.choice(namespaces), shape, request, pool, replicas
            )
        )
        budget -= replicas
    return deployments


def _deployment_name(pool: str, shape: Shape, index: int) -> str:
    if pool == "cpu":
        return f"svc-{index:05d}"
    if pool == "mig":
        return f"mig-infer-{index:05d}"
    return f"train-{index:05d}" if shape.num_gpu > 1 else f"infer-{index:05d}"


def cpu_deployments(rng: random.Random, shapes: Sequence[Shape], budget: int, first_index: int) -> list[Deployment]:
    """CPU-only deployments spending the rest of the budget."""
    cpu_shapes = [s for s in shapes if s.num_gpu == 0] or [Shape(4000, 8192, 0, 0)]
    namespaces = [f"team-{i:02d}" for i in range(40)]
    out: list[Deployment] = []
    while budget > 0:
        shape = rng.choice(cpu_shapes)
        replicas = min(budget, rng.choice(REPLICAS))
        request = {"cpu": shape.cpu_milli, "memory": shape.memory_mib, "pods": 1}
        out.append(
            Deployment(f"svc-{first_index + len(out):05d}", rng.choice(namespaces), shape, request, "cpu", replicas)
        )
        budget -= replicas
    return out


# ---------------------------------------------------------------- placement


class Scheduler:
    """First fit from a random starting node, within a pool; never over-allocates a node."""

    def __init__(self, rng: random.Random, nodes: Sequence[NodeState], fill: float) -> None:
        self.rng = rng
        self.nodes = nodes
        self.pools = {kind: [n.index for n in nodes if n.kind == kind] for kind in ("gpu", "mig", "cpu")}
        cpu_capacity = sum(nodes[i].free["cpu"] for i in self.pools["cpu"])
        self.cpu_pool_left = fill * cpu_capacity

    def place(self, request: dict[str, int], pool: str) -> int | None:
        if pool == "cpu":
            if self.cpu_pool_left >= request["cpu"]:
                found = self._first_fit(self.pools["cpu"], request)
                if found is not None:
                    self.cpu_pool_left -= request["cpu"]
                    return found
            return self._first_fit(self.pools["gpu"] + self.pools["mig"], request)
        return self._first_fit(self.pools[pool], request)

    def _first_fit(self, candidates: list[int], request: dict[str, int]) -> int | None:
        if not candidates:
            return None
        count = len(candidates)
        start = int(self.rng.random() * count)
        items = tuple(request.items())
        nodes = self.nodes
        for k in range(count):
            node = nodes[candidates[(start + k) % count]]
            free = node.free
            for r, v in items:
                if free.get(r, 0) < v:
                    break
            else:
                for r, v in items:
                    free[r] -= v
                return node.index
        return None


def place_all(scheduler: Scheduler, deployments: Sequence[Deployment]) -> int:
    """Place replicas, largest GPU request first; returns how many were placed."""
    placed = 0
    for deployment in sorted(deployments, key=lambda d: (-d.gpu_size, d.pool != "mig")):
        for _ in range(deployment.replicas):
            node = scheduler.place(deployment.request, deployment.pool)
            if node is not None:
                deployment.placed.append(node)
                placed += 1
    return placed


def occupy_idle_gpu_nodes(
    rng: random.Random, nodes: Sequence[NodeState], deployments: Sequence[Deployment], gpus: int
) -> None:
    """Move one single-GPU replica onto each whole-GPU node left with every GPU free.

    The spreading scheduler leaves a handful of such nodes; with them the full-node
    pending pods would fit as they are, and there would be nothing to compact.
    """
    singles = [(d, k) for d in deployments if d.request.get(GPU) == 1 for k in range(len(d.placed))]
    rng.shuffle(singles)
    for node in nodes:
        if node.kind != "gpu" or node.free.get(GPU, 0) < gpus:
            continue
        while singles:
            deployment, k = singles.pop()
            source = nodes[deployment.placed[k]]
            if source.free[GPU] + 1 >= gpus or any(node.free.get(r, 0) < v for r, v in deployment.request.items()):
                continue  # the source would become idle itself, or the replica does not fit here
            for r, v in deployment.request.items():
                source.free[r] += v
                node.free[r] -= v
            deployment.placed[k] = node.index
            break


# ---------------------------------------------------------------- objects


_READY = [
    {"type": "Initialized", "status": "True"},
    {"type": "Ready", "status": "True"},
    {"type": "ContainersReady", "status": "True"},
    {"type": "PodScheduled", "status": "True"},
]
_NOT_READY = [
    {"type": "Initialized", "status": "True"},
    {"type": "Ready", "status": "False", "reason": "ContainersNotReady"},
    {"type": "ContainersReady", "status": "False", "reason": "ContainersNotReady"},
    {"type": "PodScheduled", "status": "True"},
]
_PRIORITY = {"LS": (1000, "online"), "BE": (0, "")}


def _container(deployment: Deployment) -> list[dict[str, Any]]:
    shape = deployment.shape
    cpu = f"{shape.cpu_milli // 1000}" if shape.cpu_milli % 1000 == 0 else f"{shape.cpu_milli}m"
    resources: dict[str, Any] = {"requests": {"cpu": cpu, "memory": f"{shape.memory_mib}Mi"}}
    gpu = {r: str(v) for r, v in deployment.request.items() if r.startswith("nvidia.com/")}
    if gpu:
        resources["limits"] = gpu
    image = "registry.example.com/ml/serving:2024.03" if gpu else "registry.example.com/svc/app:2024.03"
    return [{"name": "main", "image": image, "resources": resources}]


def deployment_objects(rng: random.Random, deployment: Deployment, nodes: Sequence[NodeState]) -> list[dict[str, Any]]:
    """Pods (and a PDB) for the placed replicas of one Deployment."""
    if not deployment.placed:
        return []
    template_hash = _suffix(rng, 10)
    replica_set = f"{deployment.name}-{template_hash}"
    created = _timestamp(NOW - rng.randrange(3_600, 40 * 86_400))
    owner = [
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": replica_set,
            "uid": _uid(rng),
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    labels = {"app": deployment.name, "pod-template-hash": template_hash}
    priority, priority_class = _PRIORITY.get(deployment.shape.qos, (100, "standard"))
    containers = _container(deployment)
    objects: list[dict[str, Any]] = []
    healthy = 0
    for node_index in deployment.placed:
        ready = rng.random() >= 0.01
        healthy += ready
        spec: dict[str, Any] = {
            "containers": containers,
            "nodeName": nodes[node_index].name,
            "priority": priority,
            "schedulerName": "default-scheduler",
        }
        if priority_class:
            spec["priorityClassName"] = priority_class
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{replica_set}-{_suffix(rng, 5)}",
                    "namespace": deployment.namespace,
                    "uid": _uid(rng),
                    "creationTimestamp": created,
                    "labels": labels,
                    "ownerReferences": owner,
                },
                "spec": spec,
                "status": {
                    "phase": "Running",
                    "conditions": _READY if ready else _NOT_READY,
                    "hostIP": _node_ip(node_index),
                    "qosClass": "Burstable",
                    "startTime": created,
                },
            }
        )
    if len(deployment.placed) >= 2 and rng.random() < 0.9:
        objects.append(_pdb(rng, deployment, len(deployment.placed), healthy, created))
    return objects


def _pdb(rng: random.Random, deployment: Deployment, expected: int, healthy: int, created: str) -> dict[str, Any]:
    if rng.random() < 0.7:
        spec: dict[str, Any] = {"maxUnavailable": 1}
        desired = expected - 1
    else:
        spec = {"minAvailable": expected - 1}
        desired = expected - 1
    spec["selector"] = {"matchLabels": {"app": deployment.name}}
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {
            "name": deployment.name,
            "namespace": deployment.namespace,
            "uid": _uid(rng),
            "creationTimestamp": created,
        },
        "spec": spec,
        "status": {
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "disruptionsAllowed": max(0, healthy - desired),
            "expectedPods": expected,
            "observedGeneration": 1,
        },
    }


def daemonset_pod(rng: random.Random, node: NodeState, owners: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    name, namespace = (
        ("nvidia-device-plugin-daemonset", "gpu-operator") if node.kind != "cpu" else ("node-exporter", "monitoring")
    )
    node.free["cpu"] -= 50
    node.free["memory"] -= 64
    node.free["pods"] -= 1
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-{_suffix(rng, 5)}",
            "namespace": namespace,
            "uid": _uid(rng),
            "creationTimestamp": node.raw["metadata"]["creationTimestamp"],
            "labels": {"app": name},
            "ownerReferences": owners[name],
        },
        "spec": {
            "containers": _DS_CONTAINERS[name],
            "nodeName": node.name,
            "priority": 2_000_001_000,
            "priorityClassName": "system-node-critical",
            "tolerations": [{"operator": "Exists"}],
        },
        "status": {"phase": "Running", "conditions": _READY, "hostIP": _node_ip(node.index), "qosClass": "Burstable"},
    }


_DS_CONTAINERS = {
    name: [{"name": name, "image": image, "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}}}]
    for name, image in (
        ("nvidia-device-plugin-daemonset", "nvcr.io/nvidia/k8s-device-plugin:v0.13.0"),
        ("node-exporter", "quay.io/prometheus/node-exporter:v1.7.0"),
    )
}


def pending_pods(
    rng: random.Random, count: int, gpus_per_node: int, nodes: Sequence[NodeState]
) -> list[dict[str, Any]]:
    """Full-node GPU pods the scheduler could not place: Pending, PodScheduled=False/Unschedulable."""
    if not gpus_per_node:
        return []
    fits = sum(1 for n in nodes if n.free.get(GPU, 0) >= gpus_per_node and n.free["cpu"] >= 64_000)
    # Where a node could still take one (small or lightly filled clusters), the pods are
    # shown as just created, before the scheduler's first attempt: no PodScheduled condition.
    message = f"0/{len(nodes)} nodes are available: {len(nodes)} Insufficient nvidia.com/gpu."
    conditions = (
        [] if fits else [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}]
    )
    created = _timestamp(NOW - 600)
    out = []
    for i in range(count):
        replica_set = f"llm-train-{i:03d}-{_suffix(rng, 10)}"
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{replica_set}-{_suffix(rng, 5)}",
                    "namespace": "llm",
                    "uid": _uid(rng),
                    "creationTimestamp": created,
                    "labels": {"app": f"llm-train-{i:03d}"},
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": "ReplicaSet",
                            "name": replica_set,
                            "uid": _uid(rng),
                            "controller": True,
                        }
                    ],
                },
                "spec": {
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.example.com/ml/train:2024.03",
                            "resources": {
                                "requests": {"cpu": "64", "memory": "256Gi"},
                                "limits": {GPU: str(gpus_per_node)},
                            },
                        }
                    ],
                    "schedulerName": "default-scheduler",
                },
                "status": {"phase": "Pending", "qosClass": "Burstable", "conditions": conditions},
            }
        )
    return out


# ---------------------------------------------------------------- entry points


def generate(
    nodes: int,
    pods: int,
    *,
    seed: int = 0,
    gpus_per_node: int = 8,
    mig_share: float = 0.25,
    cpu_share: float = 0.1,
    fill: float = 0.75,
    pending: int | None = None,
    trace: str | Path | None = None,
) -> dict[str, Any]:
    """A consistent v1 List of ``nodes`` Nodes, ``pods`` Pods (``pending`` of them Pending) and PDBs."""
    if nodes < 1 or pods < 0:
        raise ValueError("need nodes >= 1 and pods >= 0")
    # Millions of new dicts and no cycles: the cyclic GC would only rescan them (3x slower).
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _generate(nodes, pods, seed, gpus_per_node, mig_share, cpu_share, fill, pending, trace)
    finally:
        if enabled:
            gc.enable()


def _generate(
    nodes: int,
    pods: int,
    seed: int,
    gpus_per_node: int,
    mig_share: float,
    cpu_share: float,
    fill: float,
    pending: int | None,
    trace: str | Path | None,
) -> dict[str, Any]:
    rng = random.Random(seed)
    shapes, origin = load_shapes(trace)
    print(f"pod shapes: {origin}", file=sys.stderr)
    states = [
        make_node(rng, i, kind, variant, gpus_per_node)
        for i, (kind, variant) in enumerate(_node_names(rng, nodes, gpus_per_node, mig_share, cpu_share))
    ]
    pending = min(pods, max(3, min(10, pods // 5000)) if pending is None else pending)
    ds_owner = {
        name: [
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "name": name,
                "uid": _uid(rng),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        for name in _DS_CONTAINERS
    }
    items: list[dict[str, Any]] = [s.raw for s in states]
    if pods - pending >= 2 * nodes:
        items += [daemonset_pod(rng, s, ds_owner) for s in states]
    budget = pods - pending - (len(items) - len(states))

    demand = Demand(states, fill)
    deployments = draw_deployments(rng, shapes, budget, demand, gpus_per_node)
    scheduler = Scheduler(rng, states, fill)
    placed = place_all(scheduler, deployments)
    while placed < budget:  # replicas that fit nowhere, and the budget left once the GPU pools are full
        extra = cpu_deployments(rng, shapes, budget - placed, len(deployments))
        more = place_all(scheduler, extra)
        deployments += extra
        placed += more
        if more == 0:
            print(f"warning: cluster full, {budget - placed} pod(s) short of {pods}", file=sys.stderr)
            break
    occupy_idle_gpu_nodes(rng, states, deployments, gpus_per_node)
    for deployment in deployments:
        items += deployment_objects(rng, deployment, states)
    items += pending_pods(rng, pending, gpus_per_node, states)
    _unique_pod_names(rng, items)
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}


def _unique_pod_names(rng: random.Random, items: list[dict[str, Any]]) -> None:
    """A pod whose name another pod of its namespace already has draws its 5-character suffix again, as the API server
    makes a controller retry a generated name that collides (issue 45: at 10,000 nodes, ~9,000 DaemonSet pods over
    27^5 suffixes collide and the loader rightly refused the list). Rare, so smaller clusters stay what they were."""
    seen: set[tuple[str, str]] = set()
    for item in items:
        meta = item["metadata"]
        if item["kind"] != "Pod":
            continue
        namespace = meta.get("namespace", "default")
        while (namespace, meta["name"]) in seen:
            meta["name"] = f"{meta['name'].rsplit('-', 1)[0]}-{_suffix(rng, 5)}"
        seen.add((namespace, meta["name"]))


def write(cluster: dict[str, Any], path: str | Path, *, indent: int | None = None) -> None:
    """JSON to ``path`` (``-`` = stdout); ``json.dumps`` then one write (``json.dump`` streams in Python, 5x slower)."""
    text = json.dumps(cluster, indent=indent, separators=(",", ":") if indent is None else None)
    if str(path) == "-":
        sys.stdout.write(text)
        return
    Path(path).write_text(text, encoding="utf-8")


def summary(cluster: dict[str, Any]) -> str:
    kinds: dict[str, int] = {}
    for item in cluster["items"]:
        kinds[item["kind"]] = kinds.get(item["kind"], 0) + 1
    pending = sum(1 for i in cluster["items"] if i["kind"] == "Pod" and i["status"]["phase"] == "Pending")
    return ", ".join(f"{n} {k}s" for k, n in kinds.items()) + f" ({pending} Pending)"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write a synthetic cluster snapshot (kubectl -o json List).")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=50000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--mig-share", type=float, default=0.25, help="share of GPU nodes that run MIG")
    parser.add_argument("--cpu-share", type=float, default=0.1, help="share of nodes that are CPU-only")
    parser.add_argument("--fill", type=float, default=0.75, help="target share of each GPU pool's capacity to allocate")
    parser.add_argument("--pending", type=int, default=None, help="Pending pods (default 3-10)")
    parser.add_argument(
        "--trace",
        default=None,
        help=f"trace CSV (default {TRACE_FILE}, the built-in table if missing; said on stderr), or '{BUILTIN}' for the "
        "built-in table",
    )
    parser.add_argument("--indent", type=int, default=None, help="indent the JSON (kubectl uses 4); compact by default")
    parser.add_argument("--out", required=True, help="output file, - for stdout")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    cluster = generate(
        args.nodes,
        args.pods,
        seed=args.seed,
        gpus_per_node=args.gpus_per_node,
        mig_share=args.mig_share,
        cpu_share=args.cpu_share,
        fill=args.fill,
        pending=args.pending,
        trace=args.trace,
    )
    generated = time.perf_counter() - started
    write(cluster, args.out, indent=args.indent)
    if args.out == "-":
        return
    size = Path(args.out).stat().st_size / 1e6
    print(
        f"{args.out}: {summary(cluster)}; {size:.1f} MB; generated in {generated:.2f} s, "
        f"written in {time.perf_counter() - started - generated:.2f} s",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()

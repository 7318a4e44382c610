"""Replay the Alibaba GPU trace ("openb") into a fragmented cluster snapshot, as the default kube-scheduler would fill it.

    python benchmarks/trace_replay.py --variant default --nodes 400 --fill 0.6 --seed 1 --out /tmp/x.json
    python benchmarks/trace_replay.py --variant gpuspec33 --nodes all --fill 0.95 --out /tmp/full.json
    python benchmarks/trace_replay.py --make-slice tests/data/openb-slice   # the small test copy

The trace is Alibaba's cluster-trace-gpu-v2023 (github.com/alibaba/clusterdata), the "openb" trace of
Weng, Yang, Yu, Wang, Tang, Yang, Zhang, "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent", USENIX ATC 2023; research/study use. It is read where it lies,
``../shared/data/alibaba-gpu-v2023/csv`` beside the checkout (``--trace-dir`` picks another folder with the
same file names, e.g. ``tests/data/openb-slice``); only the small test slice is ever copied into the repository.

The output is the ``kubectl get nodes,pods,pdb,pv,pvc -A -o json`` List that ``compactor plan --snapshot``
reads. The same arguments give a byte-identical file.

Nodes
    One Node per row of ``openb_node_list_gpu_node.csv`` (the 1,213 GPU nodes; the 310 CPU-only nodes are
    left out): capacity = allocatable = the row's ``cpu_milli``, ``memory_mib``, ``gpu`` as ``nvidia.com/gpu``,
    and ``pods: 110``. Labels: ``nvidia.com/gpu.product`` = the trace's model code as is (``G2``, ``T4``,
    ``V100M32``, ...; GPU Feature Discovery would write e.g. ``Tesla-T4``, and G1-G3 are undisclosed), plus
    ``nvidia.com/gpu.count`` and ``nvidia.com/gpu.present``. No MIG, no time-slicing.
    ``--nodes N`` keeps a seeded random sample of N nodes, stratified by model (largest remainder, every
    model keeps at least one node while N allows) so the pool mix is kept. Each node runs one DaemonSet pod
    (the NVIDIA device plugin, 50m CPU / 64Mi, from ``generate_cluster.daemonset_pod``).

Pods and placement
    * Pods arrive in ``creation_time`` order. The ``multigpu*`` lists have no timestamps and append their extra
      multi-GPU pods after the default list's rows, so they arrive in a seeded random order instead.
      Departures (``deletion_time``) and the trace's own ``pod_phase`` / ``scheduled_time`` are ignored: every
      row is an arrival to place.
    * FGD-style workload inflation: pods are placed in arrival order until the GPUs held reach ``--fill`` of
      the cluster's GPUs; when the list is exhausted it is replayed from the start (a "cycle"). The pod that
      crosses the target is the last one, so the fill overshoots by less than one pod's GPUs. A pod that fits
      on no node is skipped and counted; a cycle that places nothing ends the replay short of the target.
    * With ``--nodes N`` below the node list's size, each pod of each cycle is kept with probability
      N / (nodes in the list) (seeded), so the pod stream shrinks with the cluster.
    * GPU sharing is not modelled: a pod with ``num_gpu == 1`` and ``gpu_milli < 1000`` requests and holds
      one whole ``nvidia.com/gpu``, as on Kubernetes without a sharing device plugin. Its share is kept in
      the annotation ``benchmarks.gpu-compactor.io/gpu-milli``.
    * CPU-only pods (``num_gpu == 0``) are dropped (they would run on the CPU-only nodes, which are left out);
      ``--keep-cpu-pods`` places them on the GPU nodes like the others.
    * Scheduler emulation (kube-scheduler's default profile, reduced to what the trace has):
      filters: NodeResourcesFit (cpu, memory, nvidia.com/gpu, pod count) and, for a pod with a ``gpu_spec``,
      the required node affinity ``nvidia.com/gpu.product In [the listed models]`` (written into the pod).
      Scores, integer as in kube-scheduler: NodeResourcesFit LeastAllocated over cpu, memory and
      nvidia.com/gpu with equal weights (``(allocatable - requested) * 100 // allocatable`` per resource,
      requested including the pod, then the integer mean; nvidia.com/gpu only counts for pods requesting it)
      plus NodeResourcesBalancedAllocation over the same resources (``int((1 - std of the requested
      fractions) * 100)``), both weight 1; ``--scoring least-allocated`` leaves BalancedAllocation out.
      Highest total wins; ties go to the first node by name (kube-scheduler picks among ties at random).
      Not emulated: PodTopologySpread's system default spreading, InterPodAffinity, ImageLocality,
      TaintToleration (there are no taints), preemption.

Owners, PDBs, pending pods
    * Placed pods of one shape (cpu, memory, GPUs, GPU share, gpu_spec, qos) are taken in arrival order and
      cut into ReplicaSets of 1..``--max-replicas`` (seeded) consecutive pods; each becomes a Deployment-style
      group through ``generate_cluster.deployment_objects``: owner ``ReplicaSet/<name>`` (controller: true),
      ~1% of pods not Ready, and for 90% of the groups with two or more replicas a PDB (``maxUnavailable: 1``
      or ``minAvailable: n-1``) whose status (currentHealthy, desiredHealthy, disruptionsAllowed,
      expectedPods) is consistent with the pods' readiness. qos LS -> priority 1000 (class ``online``),
      BE -> 0, others -> 100.
    * ``--pending`` (default 2) pods ask for 8 GPUs, 64 CPUs and 256Gi (``generate_cluster.pending_pods``,
      owner a ReplicaSet, no affinity): phase Pending with PodScheduled=False, reason Unschedulable, when no
      node can take one. When one could (a nearly empty cluster), they are written without the condition and
      a warning is printed: then they are not the "fits nowhere" case.
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from generate_cluster import (  # noqa: E402  (benchmarks/ is not a package)
    _NODE_INFO,
    GPU,
    NOW,
    Deployment,
    NodeState,
    Shape,
    _node_ip,
    _timestamp,
    _uid,
    daemonset_pod,
    deployment_objects,
    pending_pods,
    write,
)

DEFAULT_TRACE_DIR = HERE.parent.parent / "shared" / "data" / "alibaba-gpu-v2023" / "csv"
NODE_FILE = "openb_node_list_gpu_node.csv"
ALL_NODE_FILE = "openb_node_list_all_node.csv"  # the GPU nodes renamed, and the 310 CPU-only nodes
PRODUCT_LABEL = "nvidia.com/gpu.product"
MAX_PODS = 110
PENDING_GPUS = 8
PENDING_REQUEST = (64_000, 262_144, PENDING_GPUS)  # cpu milli, memory MiB, GPUs: generate_cluster.pending_pods
NAMESPACES = tuple(f"team-{i:02d}" for i in range(40))
ANNOTATION = "benchmarks.gpu-compactor.io"
SCORINGS = ("least-allocated+balanced", "least-allocated")
SLICE_VARIANTS = ("default", "gpuspec33")


# ---------------------------------------------------------------- reading the trace


@dataclass(frozen=True, slots=True)
class TraceNode:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str


@dataclass(frozen=True, slots=True)
class TracePod:
    name: str
    shape: Shape
    models: tuple[str, ...]  # gpu_spec: allowed GPU models, sorted; empty = any

    @property
    def key(self) -> tuple[Shape, tuple[str, ...]]:
        return self.shape, self.models


def pod_file(variant: str) -> str:
    return f"openb_pod_list_{variant}.csv"


def read_nodes(trace_dir: Path) -> list[TraceNode]:
    with (trace_dir / NODE_FILE).open(newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if int(r["gpu"]) > 0]
    return [TraceNode(r["sn"], int(r["cpu_milli"]), int(r["memory_mib"]), int(r["gpu"]), r["model"]) for r in rows]


def read_cpu_nodes(trace_dir: Path) -> list[TraceNode]:
    """The trace's 310 CPU-only nodes (model "", no GPU), from its list of every node, whose numbering restarts: named
    ``openb-cpu-node-NNNN`` apart from the GPU nodes' ``openb-node-NNNN``."""
    with (trace_dir / ALL_NODE_FILE).open(newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if int(r["gpu"]) == 0]
    return [
        TraceNode(r["sn"].replace("openb-", "openb-cpu-", 1), int(r["cpu_milli"]), int(r["memory_mib"]), 0, "")
        for r in rows
    ]


def read_pods(trace_dir: Path, variant: str, rng: random.Random | None = None) -> list[TracePod]:
    """Every row, in arrival order: creation_time (file order for ties). A list without timestamps (``multigpu*``)
    is shuffled with ``rng``: those files append their extra multi-GPU pods after the default list's rows, so file
    order would reach any fill target before the first of them arrives."""
    with (trace_dir / pod_file(variant)).open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    if rows and "creation_time" not in rows[0] and rng is not None:
        rng.shuffle(rows)
    rows.sort(key=lambda r: int(r.get("creation_time") or 0))
    return [trace_pod(r) for r in rows]


def trace_pod(row: dict[str, str]) -> TracePod:
    shape = Shape(
        int(row["cpu_milli"]),
        int(row["memory_mib"]),
        int(row["num_gpu"]),
        int(row["gpu_milli"]),
        row.get("qos") or "LS",
    )
    models = tuple(sorted({m for m in (row.get("gpu_spec") or "").split("|") if m}))
    return TracePod(row["name"], shape, models)


# ---------------------------------------------------------------- sampling


def stratified_sample(nodes: Sequence[TraceNode], count: int, rng: random.Random) -> list[TraceNode]:
    """``count`` nodes drawn per GPU model in proportion to the model's share (largest remainder), sorted by name."""
    if count >= len(nodes):
        return sorted(nodes, key=lambda n: n.name)
    by_model: dict[str, list[TraceNode]] = {}
    for node in nodes:
        by_model.setdefault(node.model, []).append(node)
    quotas = _quotas({m: len(ns) for m, ns in sorted(by_model.items())}, count)
    chosen = [n for model, quota in quotas.items() for n in rng.sample(by_model[model], quota)]
    return sorted(chosen, key=lambda n: n.name)


def _quotas(sizes: dict[str, int], count: int) -> dict[str, int]:
    """Largest-remainder apportionment of ``count`` over ``sizes``, at least one each while ``count`` allows."""
    total = sum(sizes.values())
    exact = {m: count * n / total for m, n in sizes.items()}
    quotas = (
        {m: min(n, max(1, int(exact[m]))) for m, n in sizes.items()} if count >= len(sizes) else dict.fromkeys(sizes, 0)
    )
    by_remainder = sorted(sizes, key=lambda m: (-(exact[m] - int(exact[m])), -sizes[m], m))
    while sum(quotas.values()) != count:
        step = 1 if sum(quotas.values()) < count else -1
        for model in by_remainder if step > 0 else reversed(by_remainder):
            if sum(quotas.values()) == count:
                break
            if (step > 0 and quotas[model] < sizes[model]) or (step < 0 and quotas[model] > 1):
                quotas[model] += step
    return quotas


# ---------------------------------------------------------------- the scheduler emulation


RESOURCES = 3  # cpu milli, memory MiB, nvidia.com/gpu


class DefaultScheduler:
    """kube-scheduler's default filters and resource scores over the nodes, in node-name order (see the module docstring).

    A simplification, kept for the still snapshots (``replay``: bench_trace.py, bench_price.py) so their published
    figures stay comparable: it is NOT upstream's scoring (upstream's default LeastAllocated leaves nvidia.com/gpu out,
    BalancedAllocation scores the change of balance, PodTopologySpread spreads a ReplicaSet, only a share of the nodes
    is scored, ties go at random). The day replay uses ``kube_scheduler.KubeScheduler``, which scores as upstream does.

    ``most_allocated``: the bin-packing profile instead (realk8s's ``SCHED_SCORING=MostAllocated``): NodeResourcesFit
    MostAllocated with weights cpu 1, memory 1, nvidia.com/gpu 5 (``requested * 100 // allocatable`` per resource, the
    weighted integer mean), BalancedAllocation off. ``fenced``: nodes no new pod may land on (a NoSchedule taint)."""

    def __init__(
        self,
        nodes: Sequence[TraceNode],
        used: Sequence[Sequence[int]],
        pods: Sequence[int],
        *,
        balanced: bool,
        most_allocated: bool = False,
    ) -> None:
        self.models = np.array([n.model for n in nodes])
        self.allocatable = np.array([[n.cpu_milli, n.memory_mib, n.gpus] for n in nodes], dtype=np.int64)
        self.used = np.array(used, dtype=np.int64).reshape(len(nodes), RESOURCES)
        self.pods = np.array(pods, dtype=np.int64)
        self.balanced = balanced
        self.most_allocated = most_allocated
        self.fenced = np.zeros(len(nodes), dtype=bool)

    def place(self, request: Sequence[int], models: Iterable[str] = ()) -> int | None:
        """Bind a pod of ``request`` (cpu milli, memory MiB, GPUs) to the best node; None when no node passes the filters."""
        wanted = np.array(request, dtype=np.int64)
        after = self.used + wanted
        feasible = (after <= self.allocatable).all(axis=1) & (self.pods < MAX_PODS) & ~self.fenced
        allowed = list(models)
        if allowed:
            feasible &= np.isin(self.models, allowed)
        if not feasible.any():
            return None
        scores = np.where(feasible, self._scores(after, scored=wanted[2] > 0), -1)
        best = int(np.argmax(scores))  # the first of equal scores: the lowest node name
        self.used[best] = after[best]
        self.pods[best] += 1
        return best

    def fits(self, index: int, request: Sequence[int]) -> bool:
        """Whether ``request`` fits on node ``index`` as it is now (fences aside: a steered replacement tolerates none)."""
        return bool((self.used[index] + np.array(request, dtype=np.int64) <= self.allocatable[index]).all()) and bool(
            self.pods[index] < MAX_PODS
        )

    def bind(self, index: int, request: Sequence[int]) -> None:
        """A pod bound to node ``index`` by someone else's choice (a steered replacement)."""
        self.used[index] += np.array(request, dtype=np.int64)
        self.pods[index] += 1

    def release(self, index: int, request: Sequence[int]) -> None:
        """A pod gone from node ``index``."""
        self.used[index] -= np.array(request, dtype=np.int64)
        self.pods[index] -= 1

    def _scores(self, after: np.ndarray, *, scored: bool) -> np.ndarray:
        columns = RESOURCES if scored else 2  # an extended resource the pod does not request is not scored
        alloc, req = self.allocatable[:, :columns], after[:, :columns]
        if self.most_allocated:
            weights = np.array([1, 1, 5][:columns], dtype=np.int64)
            most: np.ndarray = ((req * 100 // alloc) * weights).sum(axis=1) // weights.sum()
            return most
        least: np.ndarray = ((alloc - req) * 100 // alloc).sum(axis=1) // columns
        if not self.balanced:
            return least
        fractions = np.minimum(req / alloc, 1.0)
        std = np.abs(fractions[:, 0] - fractions[:, 1]) / 2 if columns == 2 else fractions.std(axis=1)
        total: np.ndarray = least + ((1 - std) * 100).astype(np.int64)
        return total

    def free(self, index: int) -> tuple[int, int, int]:
        cpu, memory, gpus = (int(v) for v in self.allocatable[index] - self.used[index])
        return cpu, memory, gpus

    def fits_anywhere(self, request: Sequence[int]) -> bool:
        return bool(
            (
                (self.used + np.array(request, dtype=np.int64) <= self.allocatable).all(axis=1) & (self.pods < MAX_PODS)
            ).any()
        )


# ---------------------------------------------------------------- inflation


@dataclass(slots=True)
class Inflation:
    target_gpus: float
    held_gpus: int = 0
    placed: list[tuple[TracePod, int]] = field(default_factory=list)  # (pod, node index) in binding order
    skipped: int = 0
    cycles: int = 0

    @property
    def reached(self) -> bool:
        return self.held_gpus >= self.target_gpus


def inflate(
    scheduler: DefaultScheduler, pods: Sequence[TracePod], target_gpus: float, keep: float, rng: random.Random
) -> Inflation:
    """Place pods in arrival order, replaying the list, until ``target_gpus`` are held or a whole cycle places nothing."""
    run = Inflation(target_gpus)
    while not run.reached:
        placed_before = len(run.placed)
        run.cycles += 1
        for pod in pods:
            if run.reached:
                break
            if keep < 1 and rng.random() >= keep:
                continue
            _bind(scheduler, pod, run)
        if len(run.placed) == placed_before:
            break
    return run


def _bind(scheduler: DefaultScheduler, pod: TracePod, run: Inflation) -> None:
    shape = pod.shape
    node = scheduler.place((shape.cpu_milli, shape.memory_mib, shape.num_gpu), pod.models)
    if node is None:
        run.skipped += 1
        return
    run.placed.append((pod, node))
    run.held_gpus += shape.num_gpu


# ---------------------------------------------------------------- objects


def node_state(rng: random.Random, index: int, node: TraceNode) -> NodeState:
    """The Node object (and the free-resource record generate_cluster's builders update)."""
    cpu = f"{node.cpu_milli // 1000}" if node.cpu_milli % 1000 == 0 else f"{node.cpu_milli}m"
    resources = {"cpu": cpu, "memory": f"{node.memory_mib}Mi", "pods": str(MAX_PODS), GPU: str(node.gpus)}
    labels = {
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": node.name,
        "kubernetes.io/os": "linux",
        "nvidia.com/gpu.count": str(node.gpus),
        "nvidia.com/gpu.present": "true",
        PRODUCT_LABEL: node.model,
    }
    raw = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "uid": _uid(rng),
            "creationTimestamp": _timestamp(NOW - 86_400 * (120 + index % 200)),
            "labels": labels,
        },
        "spec": {"podCIDR": f"10.{64 + index // 256}.{index % 256}.0/24"},
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": _node_ip(index)},
                {"type": "Hostname", "address": node.name},
            ],
            "allocatable": resources,
            "capacity": dict(resources),
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
    free = {"cpu": node.cpu_milli, "memory": node.memory_mib, "pods": MAX_PODS, GPU: node.gpus}
    return NodeState(node.name, "gpu", index, free, raw)


def replica_sets(
    placed: Sequence[tuple[TracePod, int]], max_replicas: int, rng: random.Random
) -> list[list[tuple[TracePod, int]]]:
    """Placed pods of one shape and gpu_spec, in arrival order, cut into groups of 1..max_replicas; groups by first arrival."""
    by_key: dict[tuple[Shape, tuple[str, ...]], list[tuple[int, TracePod, int]]] = {}
    for order, (pod, node) in enumerate(placed):
        by_key.setdefault(pod.key, []).append((order, pod, node))
    groups: list[list[tuple[int, TracePod, int]]] = []
    for members in by_key.values():
        start = 0
        while start < len(members):
            size = rng.randint(1, max_replicas)
            groups.append(members[start : start + size])
            start += size
    groups.sort(key=lambda g: g[0][0])
    return [[(pod, node) for _, pod, node in group] for group in groups]


def group_objects(
    rng: random.Random, index: int, group: Sequence[tuple[TracePod, int]], states: Sequence[NodeState]
) -> list[dict[str, Any]]:
    """Pods (and maybe a PDB) of one ReplicaSet, with the gpu_spec node affinity and the trace pods' names."""
    first = group[0][0]
    shape = first.shape
    kind = "train" if shape.num_gpu > 1 else "infer" if shape.num_gpu == 1 else "svc"
    request = {"cpu": shape.cpu_milli, "memory": shape.memory_mib, "pods": 1} | (
        {GPU: shape.num_gpu} if shape.num_gpu else {}
    )
    deployment = Deployment(
        f"{kind}-{index:05d}", rng.choice(NAMESPACES), shape, request, "gpu", len(group), [n for _, n in group]
    )
    objects = deployment_objects(rng, deployment, states)
    for obj, (pod, _) in zip((o for o in objects if o["kind"] == "Pod"), group, strict=True):
        obj["metadata"]["annotations"] = {
            f"{ANNOTATION}/openb-pod": pod.name,
            f"{ANNOTATION}/gpu-milli": str(pod.shape.gpu_milli),
        }
        if pod.models:
            obj["spec"]["affinity"] = gpu_spec_affinity(pod.models)
    return objects


def mark_pending(pods: list[dict[str, Any]], nodes: int, *, fits: bool) -> list[dict[str, Any]]:
    """PodScheduled=False/Unschedulable on the pending pods unless one would fit (then kube-scheduler has not tried yet)."""
    message = f"0/{nodes} nodes are available: {nodes} Insufficient nvidia.com/gpu."
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
    for pod in pods:
        pod["status"]["conditions"] = [] if fits else [condition]
    return pods


def gpu_spec_affinity(models: Sequence[str]) -> dict[str, Any]:
    expression = {"key": PRODUCT_LABEL, "operator": "In", "values": list(models)}
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [expression]}]
            }
        }
    }


# ---------------------------------------------------------------- the replay


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    variant: str = "default"
    nodes: int | None = None  # None = every GPU node of the list
    fill: float = 0.6
    seed: int = 1
    pending: int = 2
    max_replicas: int = 8
    keep_cpu_pods: bool = False
    scoring: str = SCORINGS[0]
    trace_dir: Path = DEFAULT_TRACE_DIR


@dataclass(frozen=True, slots=True)
class ReplayStats:
    nodes: int
    gpus: int
    target_gpus: float
    held_gpus: int
    fill: float
    pods_placed: int
    pods_skipped: int
    cycles: int
    replica_sets: int
    pdbs: int
    pending: int
    pending_fits_somewhere: bool
    free_gpus: int
    last_pod_gpus: int

    def line(self) -> str:
        pending = (
            f"{self.pending} pending 8-GPU pod(s) that fit {'SOMEWHERE' if self.pending_fits_somewhere else 'nowhere'}"
        )
        return (
            f"{self.nodes} nodes / {self.gpus} GPUs, {self.held_gpus} held ({self.fill:.1%}, target {self.target_gpus:g}); "
            f"{self.pods_placed} pods placed in {self.cycles} cycle(s), {self.pods_skipped} skipped; {self.replica_sets} ReplicaSets, "
            f"{self.pdbs} PDBs; {pending}; {self.free_gpus} GPUs free"
        )


def _rng(options: ReplayOptions, purpose: str) -> random.Random:
    """One stream per purpose, so e.g. the node sample does not change when the pod stream does."""
    return random.Random(f"{options.seed}:{purpose}")


def replay(options: ReplayOptions) -> tuple[dict[str, Any], ReplayStats]:
    """The snapshot (a v1 List) and what the replay did."""
    all_nodes = read_nodes(options.trace_dir)
    nodes = stratified_sample(all_nodes, options.nodes or len(all_nodes), _rng(options, "nodes"))
    pods = [
        p
        for p in read_pods(options.trace_dir, options.variant, _rng(options, "arrivals"))
        if p.shape.num_gpu > 0 or options.keep_cpu_pods
    ]
    objects_rng = _rng(options, "objects")
    states = [node_state(objects_rng, i, n) for i, n in enumerate(nodes)]
    owners = {
        "nvidia-device-plugin-daemonset": [
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "name": "nvidia-device-plugin-daemonset",
                "uid": _uid(objects_rng),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    }
    daemons = [daemonset_pod(objects_rng, s, owners) for s in states]
    scheduler = _scheduler(nodes, states, options)
    gpus = sum(n.gpus for n in nodes)
    run = inflate(scheduler, pods, options.fill * gpus, len(nodes) / len(all_nodes), _rng(options, "pods"))
    if not run.reached:
        print(f"warning: fill target {run.target_gpus:g} GPUs not reached ({run.held_gpus} held)", file=sys.stderr)
    _sync_free(scheduler, states)
    groups = replica_sets(run.placed, options.max_replicas, _rng(options, "groups"))
    items: list[dict[str, Any]] = [s.raw for s in states] + daemons
    for index, group in enumerate(groups):
        items += group_objects(objects_rng, index, group, states)
    fits = scheduler.fits_anywhere(PENDING_REQUEST)
    if fits and options.pending:
        print(
            "warning: a pending 8-GPU pod would fit on some node as the cluster is; written without PodScheduled=False",
            file=sys.stderr,
        )
    items += mark_pending(pending_pods(objects_rng, options.pending, PENDING_GPUS, states), len(states), fits=fits)
    cluster = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}
    stats = ReplayStats(
        nodes=len(nodes),
        gpus=gpus,
        target_gpus=run.target_gpus,
        held_gpus=run.held_gpus,
        fill=run.held_gpus / gpus if gpus else 0.0,
        pods_placed=len(run.placed),
        pods_skipped=run.skipped,
        cycles=run.cycles,
        replica_sets=len(groups),
        pdbs=sum(1 for i in items if i["kind"] == "PodDisruptionBudget"),
        pending=options.pending,
        pending_fits_somewhere=fits,
        free_gpus=gpus - run.held_gpus,
        last_pod_gpus=run.placed[-1][0].shape.num_gpu if run.placed else 0,
    )
    return cluster, stats


def _scheduler(nodes: Sequence[TraceNode], states: Sequence[NodeState], options: ReplayOptions) -> DefaultScheduler:
    """The scheduler's view once the DaemonSet pods run (they took their requests off ``states``' free records)."""
    used = [
        [n.cpu_milli - s.free["cpu"], n.memory_mib - s.free["memory"], n.gpus - s.free[GPU]]
        for n, s in zip(nodes, states, strict=True)
    ]
    pods = [MAX_PODS - s.free["pods"] for s in states]
    return DefaultScheduler(nodes, used, pods, balanced=options.scoring == SCORINGS[0])


def _sync_free(scheduler: DefaultScheduler, states: Sequence[NodeState]) -> None:
    for index, state in enumerate(states):
        state.free["cpu"], state.free["memory"], state.free[GPU] = scheduler.free(index)
        state.free["pods"] = MAX_PODS - int(scheduler.pods[index])


# ---------------------------------------------------------------- the test slice


SLICE_README = """# openb-slice: a small copy of the Alibaba GPU trace for tests

Rows of Alibaba's cluster-trace-gpu-v2023 ("openb" trace), from https://github.com/alibaba/clusterdata
(folder `cluster-trace-gpu-v2023/csv`, files unchanged since commit 50a91c7c74abe3b658188dc78ac1dd302970d40c),
as used by Weng, Yang, Yu, Wang, Tang, Yang, Zhang, "Beware of Fragmentation: Scheduling GPU-Sharing Workloads
with Fragmentation Gradient Descent", USENIX ATC 2023, pp. 995-1008. Please cite the paper when using it.
The trace's README: "You may use trace however you want as long as it is for research or study purpose."
The folder has no LICENSE file; treat these rows as research/study use only.

Contents (columns and rows unchanged, a subset of rows):
{contents}

Made by (from the repository root, the full trace beside the checkout in ../shared/data/alibaba-gpu-v2023/csv):

    python benchmarks/trace_replay.py --make-slice tests/data/openb-slice --slice-nodes {nodes} --slice-pods {pods} --seed {seed}

Read by tests/unit/benchmarks/test_trace_replay.py through `trace_replay.py --trace-dir tests/data/openb-slice`.
"""


def make_slice(trace_dir: Path, out: Path, *, nodes: int, pods: int, seed: int) -> list[str]:
    """Copy ``nodes`` GPU nodes (stratified by model) and the first ``pods`` rows of each slice variant; returns the file lines for the README."""
    out.mkdir(parents=True, exist_ok=True)
    picked = {n.name for n in stratified_sample(read_nodes(trace_dir), nodes, random.Random(f"{seed}:slice"))}
    contents = [_copy_rows(trace_dir / NODE_FILE, out / NODE_FILE, lambda row: row["sn"] in picked, len(picked))]
    # the CPU-only nodes in the trace's proportion (310 to 1,213), the first of them (``--with-cpu-only``)
    cpu_nodes = max(1, round(nodes * 310 / 1213))
    contents += [_copy_rows(trace_dir / ALL_NODE_FILE, out / ALL_NODE_FILE, lambda row: row["gpu"] == "0", cpu_nodes)]
    contents += [_copy_rows(trace_dir / pod_file(v), out / pod_file(v), lambda row: True, pods) for v in SLICE_VARIANTS]
    (out / "README.md").write_text(
        SLICE_README.format(contents="\n".join(contents), nodes=nodes, pods=pods, seed=seed), encoding="utf-8"
    )
    return contents


def _copy_rows(source: Path, target: Path, keep: Any, limit: int) -> str:
    with source.open(newline="") as handle:
        lines = handle.read().splitlines(keepends=True)
    header, body = lines[0], lines[1:]
    names = header.strip().split(",")
    kept = [line for line in body if keep(dict(zip(names, next(csv.reader([line])), strict=True)))][:limit]
    target.write_text(header + "".join(kept), encoding="utf-8", newline="")
    return f"* `{target.name}`: {len(kept)} of the {len(body)} data rows of `{source.name}`"


# ---------------------------------------------------------------- CLI


def _node_count(text: str) -> int | None:
    if text == "all":
        return None
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("--nodes must be >= 1 or 'all'")
    return value


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--variant",
        default="default",
        help="pod list: openb_pod_list_<variant>.csv (default, gpuspec33, multigpu50, ...)",
    )
    parser.add_argument("--nodes", type=_node_count, default=None, help="GPU nodes to sample, or 'all' (default)")
    parser.add_argument("--fill", type=float, default=0.6, help="share of the cluster's GPUs to fill with pods")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--pending", type=int, default=2, help="Pending 8-GPU pods to add")
    parser.add_argument(
        "--max-replicas", type=int, default=8, help="largest ReplicaSet the placed pods are grouped into"
    )
    parser.add_argument(
        "--keep-cpu-pods", action="store_true", help="place the trace's CPU-only pods too (dropped by default)"
    )
    parser.add_argument("--scoring", choices=SCORINGS, default=SCORINGS[0])
    parser.add_argument(
        "--trace-dir",
        type=Path,
        default=DEFAULT_TRACE_DIR,
        help=f"folder of the trace CSVs (default {DEFAULT_TRACE_DIR})",
    )
    parser.add_argument("--indent", type=int, default=None, help="indent the JSON (kubectl uses 4); compact by default")
    parser.add_argument("--out", help="snapshot file to write, - for stdout")
    parser.add_argument(
        "--make-slice", type=Path, metavar="DIR", help="instead: write the small test copy of the trace into DIR"
    )
    parser.add_argument("--slice-nodes", type=int, default=40)
    parser.add_argument("--slice-pods", type=int, default=300)
    args = parser.parse_args(argv)
    if args.make_slice:
        print(
            "\n".join(
                make_slice(
                    args.trace_dir, args.make_slice, nodes=args.slice_nodes, pods=args.slice_pods, seed=args.seed
                )
            )
        )
        return
    if not args.out:
        parser.error("--out is required (or --make-slice)")
    options = ReplayOptions(
        args.variant,
        args.nodes,
        args.fill,
        args.seed,
        args.pending,
        args.max_replicas,
        args.keep_cpu_pods,
        args.scoring,
        args.trace_dir,
    )
    cluster, stats = replay(options)
    write(cluster, args.out, indent=args.indent)
    print(f"{args.out}: {stats.line()}", file=sys.stderr)


if __name__ == "__main__":
    main()

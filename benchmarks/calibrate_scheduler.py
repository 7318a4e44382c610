"""kube_scheduler.py (the day replay's scheduler) against the real kube-scheduler v1.36.2 of ../shared/realk8s.

    python benchmarks/calibrate_scheduler.py                                   # both profiles, 40 nodes (~10 min each)
    python benchmarks/calibrate_scheduler.py --profile default --nodes 40 --arrivals 400
    python benchmarks/calibrate_scheduler.py --replay-only                     # the emulation again, on saved sequences

For each profile (``default``: upstream's default profile; ``bin-packing``: ``SCHED_SCORING=MostAllocated``):

1. A realk8s control plane of its own, on non-default ports and state (another one may run beside it):
   ``REALK8S_STATE=/tmp/realk8s-calib APISERVER_PORT=7443 ETCD_CLIENT_PORT=3379 ETCD_PEER_PORT=3380 KCM_PORT=11257
   SCHED_PORT=11259 [SCHED_SCORING=MostAllocated] up.sh``, the scheduler logging every plugin's score
   (``SCHED_EXTRA_ARGS=--vmodule=schedule_one=10``); stopped with the same environment and ``down.sh``.
2. Fake nodes from the trace's node models (``fake_nodes.py --node-spec``, its pidfile under the state dir): a sample of
   ``--nodes`` GPU nodes stratified by model (``trace_replay.stratified_sample``), capacity and
   ``nvidia.com/gpu.product`` as in the day.
3. The day's workload on that cluster, one pod at a time, events in the order the day would meet them: the common start
   (``day_replay.common_start``: fill 0.9 of the GPUs) at time 0, then ``--arrivals`` arrivals of the trace in creation
   order, one every ``interval`` simulated seconds (Little's law, as the day), and each pod's departure once its life
   (its remaining life for the common start) is over. Pods belong to ReplicaSets as in the day (arrivals of one shape
   join the ReplicaSet still growing, 1..8 replicas), so the system-default spreading sees the siblings: an arrival
   scales its ReplicaSet up by one and waits for the new pod to be bound (and Ready) or found Unschedulable; a departure
   sets ``controller.kubernetes.io/pod-deletion-cost`` on the leaving pod and scales its ReplicaSet down by one, waiting
   until that pod is gone. A pod that fits nowhere is deleted at once (so pending pods never pile up; the emulation
   does the same). Where each pod landed, and every plugin score the scheduler logged, are recorded
   (``<out>/<profile>-sequence.jsonl``).
4. The emulation replays the identical sequence twice:
   * decision by decision on the real cluster's state ("forced": before each arrival the emulation's cluster is the
     real one, every earlier pod where the real scheduler put it): does the real choice fall among the emulation's
     top-scored (tied) nodes, is the emulation's own pick (random among ties, seeded) the real one, and does each
     plugin's score match what the real scheduler logged for that node;
   * on its own (``--replays`` seeds): its own choices, its own state, as the day uses it; its aggregate figures (GPUs
     allocated per node at the end, whole-free nodes, pods that fit nowhere) beside the real run's.

Written to ``--out`` (default /tmp/gpu-compactor-calibration): the sequences, ``calibration.json`` and ``calibration.md``.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import os
import random
import re
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import trace_replay  # noqa: E402  (benchmarks/ is not a package)
from day_replay import read_stream, size_class, workload  # noqa: E402
from kube_scheduler import PROFILES, KubeScheduler  # noqa: E402

REALK8S = HERE.parent.parent / "shared" / "realk8s"
STATE = Path("/tmp/realk8s-calib")
PORTS = {
    "APISERVER_PORT": "7443",
    "ETCD_CLIENT_PORT": "3379",
    "ETCD_PEER_PORT": "3380",
    "KCM_PORT": "11257",
    "SCHED_PORT": "11259",
}
NAMESPACE = "calib"
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
POLL = 0.02
TIMEOUT = 60.0
SCORE_LINE = re.compile(
    r'"Plugin scored node for pod" pod="[^/]+/(?P<pod>[^"]+)" plugin="(?P<plugin>[^"]+)" node="(?P<node>[^"]+)" '
    r"score=(?P<score>-?\d+)"
)
BOUND_LINE = re.compile(
    r'"Successfully bound pod to node" pod="[^/]+/(?P<pod>[^"]+)" node="[^"]+" evaluatedNodes=(?P<evaluated>\d+) '
    r"feasibleNodes=(?P<feasible>\d+)"
)
GPU_SIZES = ("1 GPU", "2-4 GPUs", "8 GPUs")


# ---------------------------------------------------------------- the control plane


def environment(profile: str) -> dict[str, str]:
    env = dict(os.environ, REALK8S_STATE=str(STATE), **PORTS, SCHED_EXTRA_ARGS="--vmodule=schedule_one=10")
    env.pop("SCHED_SCORING", None)
    if profile == "bin-packing":
        env["SCHED_SCORING"] = "MostAllocated"
    return env


def up(profile: str) -> None:
    subprocess.run(["bash", str(REALK8S / "up.sh")], env=environment(profile), check=True, timeout=600)


def down(profile: str) -> None:
    subprocess.run(["bash", str(REALK8S / "down.sh")], env=environment(profile), check=False, timeout=300)


def node_spec(nodes: Sequence[trace_replay.TraceNode]) -> dict[str, Any]:
    return {
        "nodes": [
            {
                "name": n.name,
                "labels": {trace_replay.PRODUCT_LABEL: n.model},
                "resources": {
                    "cpu": f"{n.cpu_milli}m",
                    "memory": f"{n.memory_mib}Mi",
                    "nvidia.com/gpu": str(n.gpus),
                    "pods": "110",
                },
            }
            for n in nodes
        ]
    }


def start_fake_nodes(nodes: Sequence[trace_replay.TraceNode], profile: str) -> subprocess.Popen[bytes]:
    spec = STATE / "calibration-nodes.json"
    spec.write_text(json.dumps(node_spec(nodes)))
    log = (STATE / "logs" / "fake-nodes.log").open("wb")
    env = dict(environment(profile), KUBECONFIG=str(STATE / "kubeconfig"))
    command = [sys.executable, str(REALK8S / "fake_nodes.py"), "--node-spec", str(spec)]
    command += ["--pidfile", str(STATE / "run" / "fake-nodes.pid")]
    return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


class Cluster:
    """The real cluster, through the official client: ReplicaSets scaled one pod at a time."""

    def __init__(self) -> None:
        from kubernetes import client, config

        configuration = client.Configuration()
        config.load_kube_config(config_file=str(STATE / "kubeconfig"), client_configuration=configuration)
        api = client.ApiClient(configuration)
        self.core, self.apps = client.CoreV1Api(api), client.AppsV1Api(api)
        self.replicas: dict[int, int] = {}
        self.seen: set[str] = set()

    def wait_nodes(self, names: Sequence[str]) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            ready = {  # Ready, and the node lifecycle controller's not-ready taint lifted
                n.metadata.name
                for n in self.core.list_node().items
                if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
                and not n.spec.taints
            }
            if set(names) <= ready:
                return
            time.sleep(0.5)
        raise TimeoutError("fake nodes not Ready")

    def namespace(self) -> None:
        self.core.create_namespace({"metadata": {"name": NAMESPACE}})
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the service account controller's default account
            if self.core.list_namespaced_service_account(NAMESPACE).items:
                return
            time.sleep(0.2)

    def pods(self, group: int) -> list[Any]:
        return list(self.core.list_namespaced_pod(NAMESPACE, label_selector=f"app=rs-{group}").items)

    def arrive(self, group: int, request: tuple[int, int, int], models: Sequence[str]) -> tuple[str, str | None]:
        """Scale the pod's ReplicaSet up by one: (the new pod's name, its node or None when it fits nowhere)."""
        count = self.replicas.get(group, 0) + 1
        if group not in self.replicas:
            self.apps.create_namespaced_replica_set(NAMESPACE, replica_set(group, request, models))
        else:
            self.apps.patch_namespaced_replica_set(f"rs-{group}", NAMESPACE, {"spec": {"replicas": count}})
        self.replicas[group] = count
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            for pod in self.pods(group):
                name = pod.metadata.name
                if name in self.seen or pod.metadata.deletion_timestamp is not None:
                    continue
                if pod.spec.node_name and _ready(pod):
                    self.seen.add(name)
                    return name, pod.spec.node_name
                if _unschedulable(pod):
                    self.seen.add(name)
                    self.leave(group, name)
                    return name, None
            time.sleep(POLL)
        raise TimeoutError(f"no pod of rs-{group} bound nor unschedulable")

    def leave(self, group: int, name: str) -> str | None:
        """Scale the ReplicaSet down by one with ``name`` the cheapest to delete: the pod that went (None: none)."""
        before = {p.metadata.name for p in self.pods(group)}
        meta = {"metadata": {"annotations": {DELETION_COST: "-1000000"}}}
        self.core.patch_namespaced_pod(name, NAMESPACE, meta)
        time.sleep(0.05)  # the ReplicaSet controller's informer sees the annotation before the scale
        self.replicas[group] -= 1
        self.apps.patch_namespaced_replica_set(f"rs-{group}", NAMESPACE, {"spec": {"replicas": self.replicas[group]}})
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            now = {p.metadata.name for p in self.pods(group)}
            gone = before - now
            if gone:
                time.sleep(0.02)
                return sorted(gone)[0]
            time.sleep(POLL)
        return None


def replica_set(group: int, request: tuple[int, int, int], models: Sequence[str]) -> dict[str, Any]:
    cpu, memory, gpus = request
    requests = {"nvidia.com/gpu": str(gpus)}
    if cpu:  # a missing request (not 0) is what the scheduler's scoring fills with its default
        requests["cpu"] = f"{cpu}m"
    if memory:
        requests["memory"] = f"{memory}Mi"
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "main",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": requests, "limits": {"nvidia.com/gpu": str(gpus)}},
            }
        ],
    }
    if models:
        spec["affinity"] = trace_replay.gpu_spec_affinity(models)
    labels = {"app": f"rs-{group}"}
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": f"rs-{group}", "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }


def _ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def _unschedulable(pod: Any) -> bool:
    return any(
        c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"
        for c in pod.status.conditions or []
    )


# ---------------------------------------------------------------- the sequence


@dataclass
class Groups:
    """ReplicaSets as the day forms them (``day_replay.Day._join``): a new pod joins the one of its shape still growing."""

    rng: random.Random
    max_replicas: int
    alive: dict[int, set[int]] = field(default_factory=dict)
    sizes: dict[int, int] = field(default_factory=dict)
    growing: dict[Any, int] = field(default_factory=dict)
    ids: Iterator[int] = field(default_factory=itertools.count)

    def join(self, pod_id: int, key: Any) -> int:
        group = self.growing.get(key, -1)
        if group < 0 or len(self.alive.get(group, ())) >= self.sizes[group]:
            group = next(self.ids)
            self.sizes[group] = self.rng.randint(1, self.max_replicas)
            self.growing[key] = group
        self.alive.setdefault(group, set()).add(pod_id)
        return group


def record_real(
    cluster: Cluster, nodes: Sequence[trace_replay.TraceNode], options: argparse.Namespace
) -> list[dict[str, Any]]:
    """Play the day's events on the real cluster, one at a time; the sequence with where each pod landed."""
    gpus = sum(n.gpus for n in nodes)
    stream = read_stream(options.trace_dir, options.variant, options.max_life_hours * 3600)
    load = workload(stream, gpus=gpus, fill=options.fill, max_replicas=8, seed=options.seed)
    groups = Groups(random.Random(f"{options.seed}:replicas"), 8)
    departures: list[tuple[float, int]] = []
    records: list[dict[str, Any]] = []
    k8s_names: dict[int, str] = {}
    owner: dict[int, int] = {}
    by_name: dict[str, int] = {}
    arrivals = [(0.0, a) for a in load.initial]
    arrivals += [((i + 1) * load.interval, next(load.arrivals)) for i in range(options.arrivals)]
    started = time.monotonic()
    for pod_id, (when, arrival) in enumerate(arrivals):
        while departures and departures[0][0] <= when:
            _, leaving = heapq.heappop(departures)
            record = {"op": "leave", "id": leaving, "group": owner[leaving], "real": leaving in k8s_names}
            went = leaving
            if leaving in k8s_names:
                gone = cluster.leave(owner[leaving], k8s_names[leaving])
                if gone != k8s_names[leaving]:  # the ReplicaSet deleted another pod: it is the one gone
                    went = by_name.get(gone or "", -1)
                    record["wentInstead"] = went
                k8s_names.pop(went, None)
            groups.alive[owner[leaving]].discard(went)
            records.append(record)
        pod = arrival.pod
        request = (pod.shape.cpu_milli, pod.shape.memory_mib, pod.shape.num_gpu)
        group = groups.join(pod_id, pod.key)
        owner[pod_id] = group
        name, node = cluster.arrive(group, request, pod.models)
        records.append(
            {
                "op": "arrive",
                "id": pod_id,
                "group": group,
                "request": list(request),
                "models": list(pod.models),
                "initial": arrival.initial,
                "node": node,
                "k8sName": name,
            }
        )
        if node is None:
            groups.alive[group].discard(pod_id)
        else:
            k8s_names[pod_id] = name
            by_name[name] = pod_id
        heapq.heappush(departures, (when + arrival.life, pod_id))  # the emulation may hold a pod the real could not
        if len(records) % 100 == 0:
            print(f"  {len(records)} events, {time.monotonic() - started:.0f} s", flush=True)
    return records


def scheduler_scores(log: Path, names: set[str]) -> dict[str, dict[str, dict[str, int]]]:
    """pod -> node -> plugin -> the score the real scheduler logged (the pod's last scheduling attempt); and under the
    node "" the nodes it evaluated and found feasible when it bound the pod (one and one: it took an opportunistic
    batching hint, the next node of the previous pod's ranking, without scoring)."""
    scores: dict[str, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(dict))
    with log.open(errors="replace") as handle:
        for line in handle:
            if "Plugin scored node" in line:
                match = SCORE_LINE.search(line)
                if match and match["pod"] in names:
                    scores[match["pod"]][match["node"]][match["plugin"]] = int(match["score"])
            elif "Successfully bound pod" in line:
                bound = BOUND_LINE.search(line)
                if bound and bound["pod"] in names:
                    scores[bound["pod"]][""] = {
                        "evaluated": int(bound["evaluated"]),
                        "feasible": int(bound["feasible"]),
                    }
    return {pod: dict(nodes) for pod, nodes in scores.items()}


# ---------------------------------------------------------------- the emulation's replays


def forced(
    records: Sequence[dict[str, Any]],
    nodes: Sequence[trace_replay.TraceNode],
    profile: str,
    logged: dict[str, dict[str, dict[str, int]]],
    seed: int = 1,
) -> dict[str, Any]:
    """Decision by decision on the real cluster's state: the emulation scores each arrival as the real cluster stood."""
    scheduler = KubeScheduler(nodes, profile=profile, seed=seed)
    index = {n.name: i for i, n in enumerate(nodes)}
    where: dict[int, int] = {}
    members: dict[int, set[int]] = defaultdict(set)
    tally: Counter[str] = Counter()
    plugins: Counter[str] = Counter()
    plugin_misses: Counter[str] = Counter()
    misses: list[dict[str, Any]] = []
    requests = _requests(records)
    for record in records:
        if record["op"] == "leave":
            _release(scheduler, record, where, members, requests)
            continue
        request, models = tuple(record["request"]), record["models"]
        siblings = [where[m] for m in members[record["group"]]]
        candidates = scheduler.candidates(request, models)
        real = record["node"]
        tally["arrivals"] += 1
        if not len(candidates) or real is None:
            tally["nowhereBoth" if not len(candidates) and real is None else "nowhereDisagree"] += 1
            if real is None:
                continue
        tally["decisions"] += 1
        if len(candidates) > 1:
            parts = scheduler.components(request, candidates, siblings)
            totals = sum(parts.values(), np.zeros(len(candidates), dtype=np.int64))
            top = candidates[totals == totals.max()]
            pick = int(top[scheduler.rng.integers(len(top))])
            tally["scored"] += 1
            _compare_plugins(record, candidates, parts, nodes, logged, plugins, plugin_misses)
        else:
            top, pick = candidates, int(candidates[0]) if len(candidates) else -1
            parts = {}
        real_index = index[real]
        tally["realAmongTop"] += real_index in set(top.tolist())
        tally["exact"] += pick == real_index
        if len(top) == 1:
            tally["uniqueTop"] += 1
            tally["uniqueTopExact"] += pick == real_index
        tally["topSize"] += len(top)
        bound = logged.get(record["k8sName"], {}).get("", {})
        hinted = bound.get("evaluated") == 1 and len(candidates) > 1  # an opportunistic batching hint, unscored
        tally["batchHints"] += hinted
        if real_index not in set(top.tolist()):
            tally["missesOnHints"] += hinted
            if len(misses) < 50:
                misses.append(_miss(record, candidates, parts, nodes, logged, top, real_index) | {"batchHint": hinted})
        scheduler.bind(real_index, request)
        where[record["id"]] = real_index
        members[record["group"]].add(record["id"])
    placed = tally["decisions"]
    return {
        "arrivals": tally["arrivals"],
        "decisions": placed,
        "scored": tally["scored"],
        "exactMatch": tally["exact"] / max(1, placed),
        "realAmongTop": tally["realAmongTop"] / max(1, placed),
        "uniqueTopDecisions": tally["uniqueTop"],
        "uniqueTopExact": tally["uniqueTopExact"] / max(1, tally["uniqueTop"]),
        "meanTopSize": tally["topSize"] / max(1, placed),
        "batchHints": tally["batchHints"],
        "missesOnBatchHints": tally["missesOnHints"],
        "nowhereBoth": tally["nowhereBoth"],
        "nowhereDisagree": tally["nowhereDisagree"],
        "pluginScoresCompared": dict(plugins),
        "pluginScoresDiffering": dict(plugin_misses),
        "misses": misses,
    }


def _requests(records: Sequence[dict[str, Any]]) -> dict[int, tuple[int, int, int]]:
    return {r["id"]: (r["request"][0], r["request"][1], r["request"][2]) for r in records if r["op"] == "arrive"}


def _release(
    scheduler: KubeScheduler,
    record: dict[str, Any],
    where: dict[int, int],
    members: dict[int, set[int]],
    requests: dict[int, tuple[int, int, int]],
) -> None:
    """A departure: the pod that went (the one the ReplicaSet deleted, should it not be the one leaving)."""
    pod_id = record.get("wentInstead", record["id"])
    node = where.pop(pod_id, None)
    if node is not None:
        scheduler.release(node, requests[pod_id])
        members[record["group"]].discard(pod_id)


def _compare_plugins(
    record: dict[str, Any],
    candidates: np.ndarray,
    parts: dict[str, np.ndarray],
    nodes: Sequence[trace_replay.TraceNode],
    logged: dict[str, dict[str, dict[str, int]]],
    compared: Counter[str],
    differing: Counter[str],
) -> None:
    real = logged.get(record["k8sName"])
    if not real:
        return
    for plugin, values in parts.items():
        for node, value in zip(candidates.tolist(), values.tolist(), strict=True):
            logged_value = real.get(nodes[node].name, {}).get(plugin)
            if logged_value is None:
                continue
            compared[plugin] += 1
            differing[plugin] += logged_value != value


def _miss(
    record: dict[str, Any],
    candidates: np.ndarray,
    parts: dict[str, np.ndarray],
    nodes: Sequence[trace_replay.TraceNode],
    logged: dict[str, dict[str, dict[str, int]]],
    top: np.ndarray,
    real: int,
) -> dict[str, Any]:
    def row(node: int) -> dict[str, Any]:
        position = int(np.flatnonzero(candidates == node)[0]) if node in candidates else -1
        ours = {p: int(v[position]) for p, v in parts.items()} if position >= 0 else {}
        return {
            "node": nodes[node].name,
            "ours": ours,
            "logged": logged.get(record["k8sName"], {}).get(nodes[node].name),
        }

    return {
        "pod": record["k8sName"],
        "request": record["request"],
        "real": row(real),
        "ourTop": [row(int(t)) for t in top[:3]],
    }


@dataclass
class Aggregate:
    """A cluster's figures over a sequence: GPUs allocated per node at the end, whole-free nodes (none of their GPUs
    allocated) at the end and on average after each event, pods that fit nowhere (by size)."""

    histogram: dict[int, int]
    whole_free_end: int
    whole_free_mean: float
    allocated_mean: float
    nowhere: dict[str, int]

    def as_dict(self) -> dict[str, Any]:
        return {
            "gpusAllocatedPerNodeAtEnd": {str(k): v for k, v in sorted(self.histogram.items())},
            "wholeFreeNodesAtEnd": self.whole_free_end,
            "wholeFreeNodesMean": self.whole_free_mean,
            "gpuAllocationMean": self.allocated_mean,
            "fitNowhere": self.nowhere,
        }


def replay(
    records: Sequence[dict[str, Any]],
    nodes: Sequence[trace_replay.TraceNode],
    profile: str,
    seed: int | None,
) -> Aggregate:
    """The sequence on a cluster of its own: the emulation's choices (``seed``), or the real ones (None)."""
    scheduler = KubeScheduler(nodes, profile=profile, seed=seed or 1)
    index = {n.name: i for i, n in enumerate(nodes)}
    where: dict[int, int] = {}
    members: dict[int, set[int]] = defaultdict(set)
    nowhere: Counter[str] = Counter()
    whole_free: list[int] = []
    allocated: list[float] = []
    gpus = scheduler.allocatable[:, 2]
    requests = _requests(records)
    for record in records:
        if record["op"] == "leave":
            _release(scheduler, record, where, members, requests)
        else:
            request = tuple(record["request"])
            if seed is None:
                node = index[record["node"]] if record["node"] is not None else None
                if node is not None:
                    scheduler.bind(node, request)
            else:
                siblings = [where[m] for m in members[record["group"]]]
                node = scheduler.place(request, record["models"], siblings)
            if node is None:
                nowhere[size_class(record["request"][2])] += 1
            else:
                where[record["id"]] = node
                members[record["group"]].add(record["id"])
        used = scheduler.used[:, 2]
        whole_free.append(int((used == 0).sum()))
        allocated.append(float(used.sum() / gpus.sum()))
    used = scheduler.used[:, 2]
    return Aggregate(
        dict(Counter(int(v) for v in used)),
        int((used == 0).sum()),
        float(np.mean(whole_free)),
        float(np.mean(allocated)),
        {s: nowhere[s] for s in GPU_SIZES},
    )


# ---------------------------------------------------------------- the report


def calibrate(profile: str, nodes: Sequence[trace_replay.TraceNode], options: argparse.Namespace) -> dict[str, Any]:
    sequence = options.out / f"{profile}-sequence.jsonl"
    scores_file = options.out / f"{profile}-scores.json"
    if not options.replay_only:
        down(profile)
        up(profile)
        fake = None
        try:
            fake = start_fake_nodes(nodes, profile)
            cluster = Cluster()
            cluster.wait_nodes([n.name for n in nodes])
            cluster.namespace()
            started = time.monotonic()
            records = record_real(cluster, nodes, options)
            wall = time.monotonic() - started
            names = {r["k8sName"] for r in records if r["op"] == "arrive"}
            logged = scheduler_scores(STATE / "logs" / "kube-scheduler.log", names)
        finally:
            if fake is not None and fake.poll() is None:
                fake.terminate()
                fake.wait(timeout=30)
            down(profile)
        sequence.write_text("".join(json.dumps(r) + "\n" for r in records))
        scores_file.write_text(json.dumps(logged))
        (options.out / f"{profile}-wall.txt").write_text(f"{wall:.0f}\n")
    records = [json.loads(line) for line in sequence.read_text().splitlines()]
    logged = json.loads(scores_file.read_text())
    wall_file = options.out / f"{profile}-wall.txt"
    real = replay(records, nodes, profile, None)
    emulated = [replay(records, nodes, profile, seed) for seed in range(1, options.replays + 1)]
    return {
        "profile": profile,
        "nodes": len(nodes),
        "gpus": sum(n.gpus for n in nodes),
        "events": len(records),
        "realWallSeconds": float(wall_file.read_text()) if wall_file.exists() else None,
        "victimMismatches": sum(1 for r in records if "wentInstead" in r),
        "forced": forced(records, nodes, profile, logged),
        "real": real.as_dict(),
        "emulated": [e.as_dict() for e in emulated],
    }


def report(results: Sequence[dict[str, Any]]) -> str:
    lines = [
        "| profile | decisions (scored) | real among emulation's top | exact match | exact where the top is one node "
        "| mean tied top | batching hints (misses on them) | fit-nowhere agree / disagree | plugin scores equal |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        f = r["forced"]
        equal = ", ".join(
            f"{p} {1 - f['pluginScoresDiffering'].get(p, 0) / n:.2%} of {n}"
            for p, n in f["pluginScoresCompared"].items()
        )
        lines.append(
            f"| {r['profile']} | {f['decisions']} ({f['scored']}) | {f['realAmongTop']:.2%} | {f['exactMatch']:.2%} "
            f"| {f['uniqueTopExact']:.2%} of {f['uniqueTopDecisions']} | {f['meanTopSize']:.2f} "
            f"| {f['batchHints']} ({f['missesOnBatchHints']}) "
            f"| {f['nowhereBoth']} / {f['nowhereDisagree']} | {equal} |"
        )
    lines += [
        "",
        "| profile | run | GPU allocation (mean) | whole-free nodes (mean / end) | fit nowhere: 1 / 2-4 / 8 GPUs "
        "| nodes by GPUs allocated at the end |",
        "| --- | --- | ---: | ---: | ---: | --- |",
    ]
    for r in results:
        lines.append(_aggregate_line(r["profile"], "real kube-scheduler", [r["real"]]))
        lines.append(_aggregate_line(r["profile"], f"emulation, {len(r['emulated'])} seeds", r["emulated"]))
    return "\n".join(lines) + "\n"


def _aggregate_line(profile: str, run: str, aggregates: Sequence[dict[str, Any]]) -> str:
    def fmt(values: Sequence[float], spec: str) -> str:
        mean = spec.format(sum(values) / len(values))
        return mean if len(values) == 1 else f"{mean} ({spec.format(min(values))}-{spec.format(max(values))})"

    nowhere = " / ".join(fmt([a["fitNowhere"][s] for a in aggregates], "{:.1f}") for s in GPU_SIZES)
    keys = sorted({k for a in aggregates for k in a["gpusAllocatedPerNodeAtEnd"]}, key=int)
    histogram = ", ".join(
        f"{k}: {fmt([a['gpusAllocatedPerNodeAtEnd'].get(k, 0) for a in aggregates], '{:.1f}')}" for k in keys
    )
    return (
        f"| {profile} | {run} | {fmt([100 * a['gpuAllocationMean'] for a in aggregates], '{:.1f}')} % "
        f"| {fmt([a['wholeFreeNodesMean'] for a in aggregates], '{:.2f}')} / "
        f"{fmt([a['wholeFreeNodesAtEnd'] for a in aggregates], '{:.1f}')} | {nowhere} | {histogram} |"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", action="append", choices=PROFILES, help="one or both (default: both)")
    parser.add_argument("--nodes", type=int, default=40, help="fake nodes sampled from the trace's GPU nodes")
    parser.add_argument("--arrivals", type=int, default=400, help="arrivals after the common start")
    parser.add_argument("--fill", type=float, default=0.9)
    parser.add_argument("--max-life-hours", type=float, default=24.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--variant", default="default", help="the trace's pod list (default, gpuspec33, ...)")
    parser.add_argument("--replays", type=int, default=20, help="the emulation's own replays (seeds 1..N)")
    parser.add_argument("--trace-dir", type=Path, default=trace_replay.DEFAULT_TRACE_DIR)
    parser.add_argument("--replay-only", action="store_true", help="no cluster: the emulation on the saved sequences")
    parser.add_argument("--out", type=Path, default=Path("/tmp/gpu-compactor-calibration"))
    options = parser.parse_args(argv)
    options.out.mkdir(parents=True, exist_ok=True)
    all_nodes = trace_replay.read_nodes(options.trace_dir)
    nodes = trace_replay.stratified_sample(all_nodes, options.nodes, random.Random(f"{options.seed}:nodes"))
    results = []
    for profile in options.profile or list(PROFILES):
        print(f"{profile}: {len(nodes)} nodes, {sum(n.gpus for n in nodes)} GPUs", flush=True)
        results.append(calibrate(profile, nodes, options))
        (options.out / "calibration.json").write_text(json.dumps(results, indent=1))
    text = report(results)
    (options.out / "calibration.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()

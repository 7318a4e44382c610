"""API requests per move: a large snapshot replayed into the fake API server, one real executor run.

    python benchmarks/bench_api_requests.py                          # 5,000 nodes / 50,000 pods, 10 moves, steering policy
    python benchmarks/bench_api_requests.py --plan /tmp/p5k.json     # reuse a plan (planning 5,000 nodes takes ~90 s)
    python benchmarks/bench_api_requests.py --steering holds         # the policy not installed: nodes held instead
    python benchmarks/bench_api_requests.py --concurrency 4          # moves of different owners side by side

The cluster comes from ``generate_cluster.py`` (or ``--snapshot``) and goes into
``tests/fakeapi``'s ``FakeApiServer`` with its disruption controller (PDB status recomputed
after every write, as kube-controller-manager does) plus one ReplicaSet object per pod owner
(its selector: the pods' labels), and, with ``--steering policy``, the repository's steering
policy, binding and parameter ConfigMap, applied to each replacement as kube-apiserver would.
The plan comes from the real planner, without its pending-pod placements (moves only: a
placement's wait depends on how many other pending pods race for the node it opens). The
executor then runs whole nodes' moves up to ``--moves``
through ``KubeClusterClient`` over HTTP, exactly as ``compactor apply`` would.

What stands in for the rest of the control plane: an eviction deletes the pod at once (grace
0) and its ReplicaSet's replacement appears Pending; a scheduler thread binds each Pending pod
to the schedulable, untainted node with the most free GPUs that fits its GPU/MIG requests
(the default profile's LeastAllocated), and marks it Running and Ready. CPU and memory are
not checked by that scheduler.

Printed: requests per move, by verb and path kind (cluster-wide lists, namespace lists,
node patches, evictions, state writes, steering entries, events), bytes received per move, node
patches on the freed nodes and on any other, and wall time. A benchmark, not a test: it prints
figures and checks nothing.
"""

from __future__ import annotations

import argparse
import collections
import copy
import json
import logging
import re
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.generate_cluster import generate
from compactor.actions.executor import Executor
from compactor.actions.steering.pin import CONTROLLER_USERS, pin_for, pinned
from compactor.app.plan_document import build_plan
from compactor.clock import RealClock
from compactor.kube.cluster_client import KubeClusterClient
from compactor.model.load import DEFAULT_POOL_LABEL, build_snapshot
from compactor.model.parse import parse_node, parse_pod
from compactor.model.resources import Resources
from compactor.model.scheduling import why_ineligible
from compactor.model.types import Node
from compactor.planner.plan import CompactionPlan
from compactor.planner.request import PlanRequest
from compactor.settings.bundles import PlannerSettings, RunSettings
from tests.builders import steering_policy
from tests.fakeapi import DisruptionController, FakeApiServer, RecordedRequest

JSON = dict[str, Any]
STEERING = "gpu-compactor-steering"
ACCELERATOR = re.compile(r"^nvidia\.com/(gpu|mig-.+)$")


def replica_sets(pods: list[JSON]) -> list[JSON]:
    """One ReplicaSet per controller the pods name, scaled to its pods: the disruption controller reads their scale."""
    owners: dict[tuple[str, str], JSON] = {}
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    for pod in pods:
        for ref in pod["metadata"].get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == "ReplicaSet":
                key = (pod["metadata"]["namespace"], ref["name"])
                counts[key] += 1
                owners[key] = {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "metadata": {"name": ref["name"], "namespace": key[0], "uid": ref["uid"]},
                    "spec": {"selector": {"matchLabels": dict(pod["metadata"].get("labels") or {})}},
                }
    return [{**rs, "spec": {**rs["spec"], "replicas": counts[key]}} for key, rs in owners.items()]


class Scheduler:
    """Binds Pending pods as the default profile would: the model's filters (resources, taints, selectors, required
    affinity), then the node with the most free GPUs (LeastAllocated on accelerators)."""

    def __init__(self, api: FakeApiServer) -> None:
        self.api = api
        self.nodes = {
            n["metadata"]["name"]: parse_node(n, source="bench", pool_label=DEFAULT_POOL_LABEL, warnings=[])
            for n in api.objects("Node")
        }
        self.free: dict[str, Resources] = {name: node.allocatable for name, node in self.nodes.items()}
        for raw in api.objects("Pod"):
            pod = parse_pod(raw, source="bench")
            if pod.is_bound and pod.node_name in self.free and pod.phase not in ("Succeeded", "Failed"):
                self.free[pod.node_name] = self.free[pod.node_name] - pod.requests
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def on_evict(self, server: FakeApiServer, evicted: JSON) -> None:
        meta = evicted["metadata"]
        server.delete("Pod", meta["name"], meta["namespace"])
        node = evicted["spec"].get("nodeName")
        if node in self.free:
            self.free[node] = self.free[node] + parse_pod(evicted, source="bench").requests
        owner = (meta.get("ownerReferences") or [{}])[0]
        replacement: JSON = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{owner.get('name', 'pod')}-{uuid.uuid4().hex[:5]}",
                "namespace": meta["namespace"],
                "uid": str(uuid.uuid4()),
                "labels": meta.get("labels") or {},
                "ownerReferences": meta.get("ownerReferences") or [],
            },
            "spec": {k: v for k, v in evicted["spec"].items() if k != "nodeName"},
            "status": {"phase": "Pending"},
        }
        server.add(self._admitted(server, replacement))

    @staticmethod
    def _admitted(server: FakeApiServer, pod: JSON) -> JSON:
        """The steering admission policy, when installed, as kube-apiserver applies it to the ReplicaSet controller's pod."""
        policy = server.get("MutatingAdmissionPolicy", STEERING)
        parameters = server.get("ConfigMap", STEERING, "gpu-compactor")
        node = pin_for(pod, (parameters or {}).get("data") or {}, CONTROLLER_USERS[0]) if policy is not None else None
        return pinned(pod, node) if node else pod

    def _loop(self) -> None:
        # read in place under the server's lock: copying 50,000 pods per pass would stall the API
        store = self.api._store
        while not self.stop.wait(0.05):
            with self.api.lock:
                waiting = [
                    pod
                    for pod in store["pods"].values()
                    if pod["status"].get("phase") == "Pending" and not pod["spec"].get("nodeName")
                ]
                if waiting:
                    current = {
                        name: parse_node(
                            store["nodes"][("", name)], source="bench", pool_label=DEFAULT_POOL_LABEL, warnings=[]
                        )
                        for name in self.nodes
                        if ("", name) in store["nodes"]
                    }
                    for raw in waiting:
                        self._bind(raw, current)

    def _bind(self, raw: JSON, nodes: dict[str, Node]) -> None:
        pod = parse_pod(raw, source="bench")
        feasible = [
            name
            for name, node in nodes.items()
            if why_ineligible(pod, node) is None and pod.requests.fits_in(self.free[name])
        ]
        if not feasible:
            return
        target = max(
            feasible, key=lambda name: (sum(v for r, v in self.free[name].items() if ACCELERATOR.match(r)), name)
        )
        self.free[target] = self.free[target] - pod.requests
        raw["spec"]["nodeName"] = target
        raw["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        self.api.update(copy.deepcopy(raw))


def kind_of(request: RecordedRequest) -> str:
    path = request.path
    if request.method == "GET":
        scope = "namespace" if "/namespaces/" in path else "cluster"
        resource = path.rstrip("/").split("/")[-1]
        if re.search(
            r"/(nodes|pods|poddisruptionbudgets|configmaps|leases|replicasets|statefulsets|mutatingadmissionpolicies|"
            r"mutatingadmissionpolicybindings)/[^/]+$",
            path,
        ):
            return f"GET one {path.split('/')[-2]}"
        selector = " (selector)" if request.param("labelSelector") or request.param("fieldSelector") else ""
        return f"GET {scope} list {resource}{selector}"
    if path.endswith("/eviction"):
        return "POST eviction"
    if "/events" in path:
        return f"{request.method} event"
    if "/configmaps/" + STEERING in path:
        return f"{request.method} steering entry"
    if "/configmaps" in path:
        return f"{request.method} state"
    if "/nodes/" in path:
        return f"{request.method} node"
    return f"{request.method} {path}"


def load_cluster(args: argparse.Namespace) -> list[JSON]:
    if args.snapshot:
        return list(json.loads(Path(args.snapshot).read_text())["items"])
    return list(generate(args.nodes, args.pods, seed=args.seed)["items"])


def make_plan(items: list[JSON], args: argparse.Namespace) -> CompactionPlan:
    if args.plan:
        return CompactionPlan.model_validate_json(Path(args.plan).read_text())
    snapshot = build_snapshot(items, source="bench")
    from datetime import UTC, datetime

    plan = build_plan(
        PlanRequest.of(
            snapshot, PlannerSettings.of(time_limit_seconds=args.time_limit), source="bench", now=datetime.now(UTC)
        )
    )
    if args.write_plan:
        Path(args.write_plan).write_text(plan.model_dump_json(by_alias=True))
    return plan


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=50000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--snapshot", help="a kubectl List JSON instead of generating one")
    parser.add_argument("--plan", help="a plan JSON (compactor plan --write) instead of planning here")
    parser.add_argument("--write-plan", help="write the plan made here to this file")
    parser.add_argument("--time-limit", type=float, default=20.0)
    parser.add_argument("--moves", type=int, default=10, help="moves to execute (max_evictions_per_cycle)")
    parser.add_argument(
        "--steering",
        choices=("policy", "holds", "off"),
        default="policy",
        help="policy: the steering admission policy installed (the default); holds: not installed, nodes held",
    )
    parser.add_argument(
        "--max-holds",
        type=int,
        default=100_000,
        help="caps.max_holds_per_move (holds only; unbounded here to measure)",
    )
    parser.add_argument("--concurrency", type=int, default=1, help="caps.max_concurrent_evictions")
    parser.add_argument("-v", "--verbose", action="store_true", help="the executor's log on stderr")
    args = parser.parse_args()
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(relativeCreated)8.0f ms %(name)s: %(message)s")

    items = load_cluster(args)
    started = time.monotonic()
    # pending pods left out: their placement waits on other pending pods racing for the same node (see the closing note)
    plan = make_plan(items, args).model_copy(update={"placed_pending": []})
    print(f"plan: {len(plan.moves)} moves, frees {plan.freed_gpus} GPUs ({time.monotonic() - started:.0f} s)")
    pods = [i for i in items if i["kind"] == "Pod"]
    installed = steering_policy() if args.steering == "policy" else []
    with FakeApiServer(disruption_controller=DisruptionController()) as api:
        api.add(*items, *replica_sets(pods), *installed)
        scheduler = Scheduler(api)
        api.on_evict = scheduler.on_evict
        scheduler.thread.start()
        settings = RunSettings.of(
            max_evictions_per_cycle=args.moves,
            mechanism=args.steering,
            max_holds_per_move=args.max_holds,
            max_concurrent_evictions=args.concurrency,
            poll_seconds=0.2,
            backoff_seconds=0.2,
            replacement_timeout_seconds=120,
            steer_timeout_seconds=120,
        )
        api.clear_requests()
        client = KubeClusterClient(api.api_client(), namespace="gpu-compactor")
        run_started = time.monotonic()
        report = Executor(client, settings, RealClock()).execute(plan)
        wall = time.monotonic() - run_started
        scheduler.stop.set()
        requests = api.requests
        received = sum(
            len(json.dumps(reply.body)) for r in requests if (reply := api.reply_to(r)) is not None and reply.body
        )
    done = max(1, report.moves_done)
    freed = set(plan.freed_nodes)
    patched = collections.Counter(
        r.path.rsplit("/", 1)[-1] for r in requests if r.method == "PATCH" and "/nodes/" in r.path
    )
    print(
        f"run: {report.status} ({report.reason or 'ok'}), {report.moves_done} moves in {wall:.1f} s ({wall / done:.2f} s per move)"
    )
    for note in report.outcome.notes if report.outcome else []:
        print(f"note: {note}")
    print(
        f"nodes: {args.nodes if not args.snapshot else '?'}; steering: {report.steering} ({report.steering_why}); "
        f"max_concurrent_evictions {args.concurrency}"
    )
    print(
        f"requests: {len(requests)} in all, {len(requests) / done:.1f} per move; received {received / done / 1e6:.3f} MB per move"
    )
    print(
        f"node patches: {sum(patched.values())} ({sum(v for n, v in patched.items() if n in freed)} on the {len(freed)} nodes the whole "
        f"plan frees, {sum(v for n, v in patched.items() if n not in freed)} on {sum(1 for n in patched if n not in freed)} other nodes)"
    )
    for kind, count in sorted(collections.Counter(kind_of(r) for r in requests).items(), key=lambda kv: -kv[1]):
        print(f"  {count / done:9.2f} per move  {kind}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What one ``compactor run --once`` costs a real control plane, steering by policy vs by holds (issue [11]).

    ../shared/realk8s/up.sh && export KUBECONFIG=/tmp/realk8s/kubeconfig
    python ../shared/realk8s/fake_nodes.py --nodes 400 --gpus 8 --cpu 64 --lease-interval 20 &   # wait until 400 are Ready
    python benchmarks/bench_realk8s_steering.py --steering policy       # then, on a fresh namespace, --steering holds

    # the GPUs through Dynamic Resource Allocation instead of the device plugin: nodes without nvidia.com/gpu
    python ../shared/realk8s/fake_nodes.py --nodes 400 --gpus 0 --cpu 64 --lease-interval 20 &   # wait until 400 are Ready
    python benchmarks/bench_realk8s_steering.py --dra --steering policy

The script builds the state on the cluster with the real scheduler (``--deployments`` Deployments
of ``--replicas`` one-GPU pause pods on the fake nodes, then every other Deployment scaled down to a
third: free GPUs scattered one or two per node), installs the steering policy and its parameters
(``--steering policy``) or makes sure none is named (``holds``: ``steering.policy_name`` points at
nothing, as on a cluster without the policy), and runs ``compactor run --once`` capped at
``--moves`` evictions, on the fleet: the nodes labelled ``--node-label`` (default ``realk8s/fake-node=true``,
every node ``fake_nodes.py`` makes; give the fleet its own ``fake_nodes.py --label`` to keep other fake nodes out).
It reads the API server's own ``/metrics`` (``apiserver_request_total`` by verb, resource and client) before and
after, and watches every node for the executor's fence taints while the run goes on.

With ``--dra`` the GPUs come from Dynamic Resource Allocation, as NVIDIA's DRA driver (``gpu.nvidia.com``) offers
them: the script publishes, through the API, a ResourceSlice of 8 whole GPUs for every fleet node
(``<node>-gpus``; the nodes themselves advertise no ``nvidia.com/gpu``: ``fake_nodes.py --gpus 0``), makes the
DeviceClass ``gpu.nvidia.com`` if missing and, in its namespace, a ResourceClaimTemplate of one GPU, which every pod
names instead of asking ``nvidia.com/gpu: 1``; the real resourceclaim controller makes each pod's claim and the real
scheduler allocates it. Everything else is the same.

Printed: the run's status and gain, wall time and per move, API requests during the run (all
clients: the compactor, kube-controller-manager, the scheduler, the fake kubelets' leases, net of
the background rate measured over an idle window of the same length), node PATCHes, the largest
number of nodes fenced at once and the node-seconds of fences (``compactor.io/`` taints, or a
cordon), the run's own count of holds, the requests during the run by client (the compactor's own
among them, counted rather than netted), and those on the DRA objects (resourceslices, resourceclaims,
resourceclaimtemplates, deviceclasses) by client and verb, counted too: with ``--dra``, the claims' share.
A benchmark: it prints figures and checks nothing. It leaves its namespace, and with ``--dra`` the ResourceSlices
and the DeviceClass it made, behind (``--cleanup`` deletes them), so it runs on a disposable cluster only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes import watch as k8s_watch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.builders import steering_policy  # the shipped manifests, as a cluster admin installs them
from tests.dra_builders import DRIVER, device_class, gpu_slice  # what a DRA driver publishes, as the e2e tests do

METRIC = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>[0-9.e+]+)$")
NAMESPACE_OF_COMPACTOR = "gpu-compactor"
FENCE_PREFIX = "compactor.io/"  # the executor's fence (compactor.io/fence-<installation>) and reservation taints
RESOURCE_API = "/apis/resource.k8s.io/v1"
DRA_RESOURCES = ("resourceslices", "resourceclaims", "resourceclaimtemplates", "deviceclasses")
CLAIM_TEMPLATE = "one-gpu"


def call(api: k8s.ApiClient, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """A raw request with a JSON body (raises ApiException on an error status)."""
    headers = {"Content-Type": "application/json"} if body is not None else {}
    return api.call_api(
        *api.param_serialize(method, path, body=body, auth_settings=["BearerToken"], header_params=headers)
    )


def publish_gpus(api: k8s.ApiClient, nodes: list[str]) -> tuple[list[str], bool]:
    """The fake DRA driver: the DeviceClass ``gpu.nvidia.com`` (made if missing) and a ResourceSlice of 8 whole GPUs per
    node. Returns the slices made (one already there is left alone) and whether the class was made."""
    made_class = False
    try:
        call(api, "GET", f"{RESOURCE_API}/deviceclasses/{DRIVER}")
    except k8s.ApiException as exc:
        if exc.status != 404:
            raise
        call(api, "POST", f"{RESOURCE_API}/deviceclasses", device_class())
        made_class = True
    made: list[str] = []
    for node in nodes:
        name = f"{node}-gpus"
        try:
            call(api, "POST", f"{RESOURCE_API}/resourceslices", gpu_slice(node, gpus=8, name=name))
            made.append(name)
        except k8s.ApiException as exc:
            if exc.status != 409:
                raise
    return made, made_class


def request_totals(api: k8s.ApiClient) -> Counter[tuple[str, str, str, str]]:
    """(verb, resource, subresource, system_client) -> requests the API server has served since it started, from its
    /metrics. ``system_client`` names kube-controller-manager, kube-scheduler and kube-apiserver; it is empty for every
    other client (the compactor, the fake kubelets, this script)."""
    response = api.call_api(*api.param_serialize("GET", "/metrics", auth_settings=["BearerToken"]))
    text = response.read().decode()
    totals: Counter[tuple[str, str, str, str]] = Counter()
    for line in text.splitlines():
        match = METRIC.match(line)
        if match:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group("labels")))
            key = (
                labels.get("verb", ""),
                labels.get("resource", ""),
                labels.get("subresource", ""),
                labels.get("system_client", ""),
            )
            totals[key] += int(float(match.group("value")))
    return totals


def by_verb_resource(totals: Counter[tuple[str, str, str, str]]) -> Counter[tuple[str, str]]:
    merged: Counter[tuple[str, str]] = Counter()
    for (verb, resource, _, _), count in totals.items():
        merged[(verb, resource)] += count
    return merged


def client_of(verb: str, resource: str, subresource: str, system_client: str) -> str:
    """Who sent a request: a named control-plane component, the fake kubelets (lease and status heartbeats, pods marked
    Running, final deletes, their pod watch), this script (its node watch, /metrics), or else the compactor. The fake
    kubelets' pod resync (one cluster-wide LIST pods every 60 s) cannot be told from the compactor's and counts as its."""
    if system_client:
        return system_client
    if (verb, resource) in (("PATCH", "leases"), ("DELETE", "pods"), ("WATCH", "pods")) or subresource == "status":
        return "fake kubelets"
    if (verb == "WATCH" and resource == "nodes") or not resource:
        return "this script"
    return "compactor"


class CordonWatch(threading.Thread):
    """Nodes fenced, from a watch: the most at once, and node-seconds fenced. Fenced: a ``compactor.io/`` NoSchedule taint
    (the executor fences and holds with ``compactor.io/fence-<installation>``, reserves with ``compactor.io/reserved``)
    or the cordon bit (``spec.unschedulable``, which the executor never sets)."""

    def __init__(self, core: k8s.CoreV1Api) -> None:
        super().__init__(daemon=True)
        self.core = core
        self.since: dict[str, float] = {}
        self.seconds = 0.0
        self.peak = 0
        self.names: set[str] = set()
        self.stop = threading.Event()
        self.errors = 0
        self.last_error = ""

    def run(self) -> None:
        while not self.stop.is_set():
            try:  # a new stream each time lists first (synthetic ADDED events), so nothing is missed after a dropped one
                for event in k8s_watch.Watch().stream(self.core.list_node, timeout_seconds=5):  # type: ignore[no-untyped-call]
                    self._on(event["object"])
                    if self.stop.is_set():
                        return
            except Exception as exc:  # e.g. a 504 "Too large resource version" from etcd 3.4's watch cache: watch again
                self.errors += 1
                self.last_error = f"{type(exc).__name__}: {str(exc)[:120]}"
                time.sleep(0.2)

    def _on(self, node: Any) -> None:
        taints = node.spec.taints or []
        cordoned = bool(node.spec.unschedulable) or any(
            t.key.startswith(FENCE_PREFIX) and t.effect == "NoSchedule" for t in taints
        )
        name, now = node.metadata.name, time.monotonic()
        if cordoned and name not in self.since:
            self.since[name] = now
            self.names.add(name)
        elif not cordoned and name in self.since:
            self.seconds += now - self.since.pop(name)
        self.peak = max(self.peak, len(self.since))


def build_state(apps: k8s.AppsV1Api, core: k8s.CoreV1Api, namespace: str, args: argparse.Namespace) -> None:
    core.create_namespace({"metadata": {"name": namespace}})
    resources: dict[str, Any] = {"requests": {"cpu": "10m", "nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}
    if args.dra:  # one GPU from a claim the resourceclaim controller makes from the template, one per pod
        request = {"name": "gpu", "exactly": {"deviceClassName": DRIVER, "count": 1}}
        template = {"metadata": {"name": CLAIM_TEMPLATE}, "spec": {"spec": {"devices": {"requests": [request]}}}}
        call(apps.api_client, "POST", f"{RESOURCE_API}/namespaces/{namespace}/resourceclaimtemplates", template)
        resources = {"requests": {"cpu": "10m"}, "claims": [{"name": "gpu"}]}
    key, _, value = args.node_label.partition("=")
    for i in range(args.deployments):
        name = f"w{i:03d}"
        spec: dict[str, Any] = {
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": {key: value},
            "containers": [{"name": "c", "image": "pause", "resources": resources}],
        }
        if args.dra:
            spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": CLAIM_TEMPLATE}]
        apps.create_namespaced_deployment(
            namespace,
            {
                "metadata": {"name": name},
                "spec": {
                    "replicas": args.replicas,
                    "selector": {"matchLabels": {"app": name}},
                    "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
                },
            },
        )
        core_pdb = k8s.PolicyV1Api(apps.api_client)
        core_pdb.create_namespaced_pod_disruption_budget(
            namespace,
            {"metadata": {"name": name}, "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": name}}}},
        )
    wait_running(core, namespace, args.deployments * args.replicas)
    for i in range(0, args.deployments, 2):  # fragment: every other workload shrinks to a third
        apps.patch_namespaced_deployment_scale(
            f"w{i:03d}", namespace, {"spec": {"replicas": max(1, args.replicas // 3)}}
        )
    kept = sum(max(1, args.replicas // 3) if i % 2 == 0 else args.replicas for i in range(args.deployments))
    wait_running(core, namespace, kept)


def wait_running(core: k8s.CoreV1Api, namespace: str, count: int, timeout: float = 900) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pods = core.list_namespaced_pod(namespace).items
        ready = [p for p in pods if p.status.phase == "Running" and not p.metadata.deletion_timestamp]
        if len(ready) == count and len(pods) == count:
            return
        time.sleep(2)
    raise SystemExit(f"{namespace}: {count} pods not Running within {timeout:g}s")


def install_policy(api: k8s.ApiClient, core: k8s.CoreV1Api) -> None:
    paths = {
        "MutatingAdmissionPolicy": "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies",
        "MutatingAdmissionPolicyBinding": "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings",
    }
    with contextlib.suppress(k8s.ApiException):  # already there
        core.create_namespace({"metadata": {"name": NAMESPACE_OF_COMPACTOR}})
    for obj in steering_policy():
        if obj["kind"] == "ConfigMap":
            with contextlib.suppress(k8s.ApiException):
                core.create_namespaced_config_map(NAMESPACE_OF_COMPACTOR, obj)
            continue
        try:
            api.call_api(
                *api.param_serialize(
                    "POST",
                    paths[obj["kind"]],
                    body=obj,
                    auth_settings=["BearerToken"],
                    header_params={"Content-Type": "application/json"},
                )
            )
        except k8s.ApiException as exc:
            if exc.status != 409:
                raise
    time.sleep(3)


def run_compactor(namespace: str, args: argparse.Namespace) -> tuple[dict[str, Any], float]:
    config: dict[str, Any] = {
        "movable": {"namespaces": [namespace]},
        "solver": {"time_limit_seconds": args.time_limit},
        "caps": {
            "max_moves": args.moves,
            "max_evictions_per_cycle": args.moves,
            "max_concurrent_evictions": args.concurrency,
        },
        "executor": {"poll_seconds": 0.5, "replacement_timeout_seconds": 120},
    }
    if args.steering == "holds":
        config["steering"] = {"policy_name": "no-steering-policy-installed"}
        config["caps"]["max_holds_per_move"] = 100_000
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as fh:
        yaml.safe_dump(config, fh)
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "compactor.cli",
            "run",
            "--once",
            "--config",
            fh.name,
            "--kubeconfig",
            os.environ["KUBECONFIG"],
            "--output",
            "json",
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parents[1],
    )
    wall = time.monotonic() - started
    try:
        return json.loads(done.stdout), wall
    except ValueError:
        raise SystemExit(f"compactor printed no report (exit {done.returncode}):\n{done.stderr[-3000:]}") from None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steering", choices=("policy", "holds"), required=True)
    parser.add_argument("--deployments", type=int, default=40)
    parser.add_argument("--replicas", type=int, default=32)
    parser.add_argument("--moves", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--time-limit", type=float, default=20.0)
    parser.add_argument("--dra", action="store_true", help="GPUs from ResourceSlices and claims (nodes: --gpus 0)")
    parser.add_argument("--node-label", default="realk8s/fake-node=true", help="KEY=VALUE selecting the fleet")
    parser.add_argument("--cleanup", action="store_true")
    args = parser.parse_args()
    api = k8s_config.new_client_from_config(config_file=os.environ["KUBECONFIG"])  # type: ignore[no-untyped-call]
    core, apps = k8s.CoreV1Api(api), k8s.AppsV1Api(api)
    fleet = [
        n.metadata.name for n in core.list_node(label_selector=args.node_label).items if n.metadata and n.metadata.name
    ]
    nodes = len(fleet)
    namespace = f"bench-{'dra-' if args.dra else ''}{args.steering}-{int(time.time())}"
    slices, made_class = publish_gpus(api, fleet) if args.dra else ([], False)
    build_state(apps, core, namespace, args)
    if args.steering == "policy":
        install_policy(api, core)

    idle_before = request_totals(api)
    time.sleep(30)
    idle = by_verb_resource(request_totals(api) - idle_before)  # the background: kubelets' leases, controllers' resyncs

    watch = CordonWatch(core)
    watch.start()
    before = request_totals(api)
    report, wall = run_compactor(namespace, args)
    detailed = request_totals(api) - before
    during = by_verb_resource(detailed)
    watch.stop.set()
    watch.join(timeout=10)

    moves = max(1, int(report.get("movesDone") or 0))
    outcome = report.get("outcome") or {}
    print(
        f"{nodes} fake nodes; {args.deployments} x {args.replicas} one-GPU replicas (every other one at a third; GPUs "
        f"{'from DRA claims' if args.dra else 'from the device plugin'}); "
        f"steering {report.get('steering', {}).get('mechanism')} ({report.get('steering', {}).get('why')})"
    )
    print(
        f"run: {report.get('status')}; {report.get('movesDone')} moves; gained {outcome.get('freedGpus')} whole-free GPUs "
        f"(plan {outcome.get('plannedFreedGpus')}); {wall:.1f} s wall, {wall / moves:.2f} s per move (planning included)"
    )
    scale = wall / 30  # the idle window's requests, as many seconds as the run took: what would have happened anyway
    net = {key: count - idle.get(key, 0) * scale for key, count in during.items()}
    total, background = sum(during.values()), sum(idle.values()) * scale
    print(
        f"API requests during the run: {total}; background over as long idle: {background:.0f}; net {total - background:.0f} "
        f"({(total - background) / moves:.0f} per move)"
    )
    print(
        f"node PATCHes net of background (status heartbeats): {net.get(('PATCH', 'nodes'), 0):.0f}; nodes ever fenced: "
        f"{len(watch.names)}; most at once: {watch.peak}; node-seconds fenced: {watch.seconds:.0f} (watch restarts: {watch.errors})"
    )
    print(
        f"compactor's own count: {outcome.get('holds')} node holds, {outcome.get('heldNodeSeconds')} node-seconds held; "
        f"notes: {outcome.get('notes')}; reason: {report.get('reason')}"
    )
    for (verb, resource), count in sorted(net.items(), key=lambda kv: -kv[1])[:14]:
        print(f"  {count:9.0f}  {verb} {resource}  (during {during[(verb, resource)]})")
    # the background comes in bursts (400 leases every --lease-interval, 400 node statuses every other one), so the net
    # figures above can be off by one burst; the requests by client are counted, not estimated
    clients: dict[str, Counter[str]] = {}
    for (verb, resource, subresource, system_client), count in detailed.items():
        what = f"{verb} {resource}{'/' + subresource if subresource else ''}"
        clients.setdefault(client_of(verb, resource, subresource, system_client), Counter())[what] += count
    print("requests during the run by client (counted, not netted):")
    for who, counts in sorted(clients.items(), key=lambda kv: -sum(kv[1].values())):
        own = sum(counts.values())
        print(
            f"  {who}: {own} ({own / moves:.1f} per move): "
            + ", ".join(f"{what} {count}" for what, count in counts.most_common() if count)
        )
    print("requests during the run on DRA objects, by client (counted, not netted):")
    for resource in DRA_RESOURCES:
        verbs: Counter[str] = Counter()
        for (verb, res, subresource, system_client), count in detailed.items():
            if res == resource and count:
                who = client_of(verb, res, subresource, system_client)
                verbs[f"{who} {verb}{'/' + subresource if subresource else ''}"] += count
        own = sum(verbs.values())
        print(
            f"  {resource}: {own} ({own / moves:.1f} per move)"
            + (": " + ", ".join(f"{what} {count}" for what, count in verbs.most_common()) if own else "")
        )
    if args.cleanup:
        core.delete_namespace(namespace)
        for name in slices:
            call(api, "DELETE", f"{RESOURCE_API}/resourceslices/{name}")
        if made_class:
            call(api, "DELETE", f"{RESOURCE_API}/deviceclasses/{DRIVER}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""GPUs allocated through Dynamic Resource Allocation on a real control plane (issue [19]).

Three fake nodes without any GPU in their allocatable (``--gpus 0``); a small fake DRA driver in the test publishes, for
each, a ResourceSlice of 8 whole GPUs as NVIDIA's driver (``gpu.nvidia.com``) does, with the DeviceClass its claims
name, and a DeviceClass serving ``nvidia.com/gpu`` from those devices (``extendedResourceName``). Nothing allocates but
the real kube-scheduler: a pod's claim, made by the real resourceclaim controller from a ResourceClaimTemplate, or made
by the scheduler itself for a plain ``nvidia.com/gpu: 2`` request, gets its devices in ``status.allocation``. The
starting state:

1. ``serve`` (6 replicas of a 2-GPU template claim), then ``plain`` (6 replicas asking ``nvidia.com/gpu: 2``) take
   every device, 4 replicas on each node, whatever the profile;
2. both are scaled down, the ReplicaSets keeping 2 pods on each node, one of each kind where the node runs both
   (``pod-deletion-cost``): 4 GPUs free everywhere.

Then, restricted to the test's namespace:

* ``compactor report --output json`` sees 24 GPUs, and its figures are those of the same cluster as the device plugin
  would show it: the test turns the live objects into that twin itself (each node's devices into its allocatable, each
  pod's allocated devices into its requests) and compares the two reports' figures;
* ``compactor plan`` frees one node with 2 moves, and ``compactor run --once`` (steering policy installed) does it:
  the freed node holds no allocated device any more, every replacement's new claim is allocated on its planned node,
  and the whole-free GPUs gained equal the plan's.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from compactor.kube.read import read_cluster
from compactor.model.load import build_snapshot
from tests.dra_builders import DRIVER, device_class, gpu_slice, twin_figures
from tests.e2e import fragmentation as frag
from tests.e2e.conftest import _fresh_namespace
from tests.e2e.dra_driver import RESOURCE, fake_driver
from tests.e2e.fleet_runs import compactor_config, run_once, settle
from tests.e2e.fragmentation import FLEET_LABEL, Fleet
from tests.e2e.helpers import (
    NEEDS_CLUSTER,
    PAUSE_IMAGE,
    Kube,
    Obj,
    api_request,
    compactor_command,
    describe_pods,
    kubeconfig_args,
    name_of,
    pod_disruption_budget,
    run_compactor,
    wait_for,
    with_retries,
)
from tests.e2e.kubelets import NodeSet, fake_nodes

pytestmark = [NEEDS_CLUSTER, pytest.mark.e2e, pytest.mark.timeout(900)]

NODES, GPUS, PER_POD = 3, 8, 2
FILL, KEPT_PER_NODE = NODES * GPUS // PER_POD, 2
PRODUCT = "NVIDIA-H100-80GB-HBM3"

SERVE, PLAIN = "serve", "plain"  # 2 GPUs each: from a ResourceClaimTemplate; as `nvidia.com/gpu: 2` (extended resource)
EXTENDED_CLASS = "gpu-extended-e2e"


@pytest.fixture
def dra_fleet(kube: Kube, tmp_path: Path) -> Iterator[Fleet]:
    """Three GPU-less nodes served by fake kubelets, each with the ResourceSlice a DRA driver would publish for 8 GPUs."""
    run_id = f"e2e-{secrets.token_hex(3)}"
    nodes = NodeSet(prefix=f"{run_id}-dra-", count=NODES, gpus=0, labels={FLEET_LABEL: run_id})
    with fake_nodes(kube.api_client, nodes, tmp_path / "fake-dra-nodes.log") as names, _driver(kube, names):
        yield Fleet(run_id=run_id, names=names, gpus_per_node=GPUS)


def _driver(kube: Kube, names: list[str]) -> contextlib.AbstractContextManager[None]:
    """The DeviceClass claims name, the one that serves ``nvidia.com/gpu`` from DRA devices (``extendedResourceName``),
    and one ResourceSlice per node."""
    classes = [device_class(), device_class(EXTENDED_CLASS, extended="nvidia.com/gpu")]
    slices = [gpu_slice(node, gpus=GPUS, product=PRODUCT, name=f"{node}-gpus") for node in names]
    return fake_driver(kube, classes=classes, slices=slices)


@pytest.fixture
def dra_namespace(kube: Kube, dra_fleet: Fleet) -> Iterator[str]:
    with _fresh_namespace(kube, f"compactor-{dra_fleet.run_id}", force_pods=True) as name:
        yield name


def create_workloads(kube: Kube, namespace: str, fleet: Fleet) -> None:
    """A ResourceClaimTemplate of 2 GPUs; ``serve`` using it, then ``plain`` asking ``nvidia.com/gpu: 2`` (served on these
    nodes through the extended-resource DeviceClass), ``FILL / 2`` replicas each, each under a PDB of maxUnavailable 1."""
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "two-gpus"},
        "spec": {
            "spec": {
                "devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": DRIVER, "count": PER_POD}}]}
            }
        },
    }
    status, body = api_request(kube, "POST", f"{RESOURCE}/namespaces/{namespace}/resourceclaimtemplates", template)
    assert status == 201, body
    for name in (SERVE, PLAIN):
        budget = pod_disruption_budget(name, app_label=name)
        body = _deployment(name, fleet, claim=name == SERVE)
        with_retries(
            lambda budget=budget: kube.policy.create_namespaced_pod_disruption_budget(namespace, budget), what="a PDB"
        )
        with_retries(lambda body=body: kube.apps.create_namespaced_deployment(namespace, body), what=f"creating {name}")
        wait_for(settle_check(kube, namespace), timeout=180, what=f"{FILL // 2} replicas of {name} Running")


def _deployment(name: str, fleet: Fleet, *, claim: bool) -> Obj:
    resources: Obj = {"requests": {"cpu": "5m", "memory": "8Mi"}}
    if claim:
        resources["claims"] = [{"name": "gpus"}]
    else:
        resources["requests"]["nvidia.com/gpu"] = str(PER_POD)
        resources["limits"] = {"nvidia.com/gpu": str(PER_POD)}
    pod_spec: Obj = {
        "terminationGracePeriodSeconds": 1,
        "automountServiceAccountToken": False,
        "nodeSelector": fleet.selector,
        "containers": [{"name": "pause", "image": PAUSE_IMAGE, "resources": resources}],
    }
    if claim:
        pod_spec["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "two-gpus"}]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": FILL // 2,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name, frag.WORKLOAD_LABEL: "true"}}, "spec": pod_spec},
        },
    }


def claims(kube: Kube, namespace: str) -> list[Obj]:
    return list(api_request(kube, "GET", f"{RESOURCE}/namespaces/{namespace}/resourceclaims")[1].get("items") or [])


def devices_by_node(kube: Kube, namespace: str) -> Counter[str]:
    """Allocated devices per node (pool = node name, as the fake driver publishes them)."""
    return Counter(
        r["pool"]
        for c in claims(kube, namespace)
        for r in (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
    )


def fragment(kube: Kube, namespace: str, fleet: Fleet) -> None:
    """Steps 1 and 2 of the module docstring; checks the layout before handing the cluster over."""
    create_workloads(kube, namespace, fleet)
    by_node: dict[str, list[Obj]] = {}
    for pod in frag.pods(kube, namespace):
        by_node.setdefault(frag.node_of(pod), []).append(pod)
    assert sorted(len(v) for v in by_node.values()) == [FILL // NODES] * NODES, describe_pods(
        frag.pods(kube, namespace)
    )
    kept: Counter[str] = Counter()
    for node in fleet.names:  # two per node, one of each kind where the node runs both
        mine = sorted(by_node[node], key=lambda p: (frag.app_of(p), name_of(p)))
        first = {frag.app_of(p): p for p in reversed(mine)}
        chosen = list(first.values())[:KEPT_PER_NODE]
        chosen += [p for p in mine if p not in chosen][: KEPT_PER_NODE - len(chosen)]
        for pod in chosen:
            frag.protect(kube, namespace, name_of(pod))
            kept[frag.app_of(pod)] += 1
    for name in (SERVE, PLAIN):
        frag.scale(kube, namespace, name, kept[name])
    wait_for(settle_check(kube, namespace), timeout=180, what="the workloads scaled down")
    wait_for(
        lambda: (
            dict(devices_by_node(kube, namespace)) == dict.fromkeys(fleet.names, KEPT_PER_NODE * PER_POD),
            str(devices_by_node(kube, namespace)),
        ),
        timeout=60,
        what="the claims of the removed replicas deallocated",
    )


def settle_check(kube: Kube, namespace: str) -> Any:
    return frag.whole_again(kube, namespace)


def as_device_plugin(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same cluster as NVIDIA's device plugin would show it, worked out here from the live objects: each node's
    slice devices in its allocatable, each pod's allocated devices as its nvidia.com/gpu request; no DRA object."""
    per_node = Counter(
        str(o["spec"]["nodeName"])
        for o in objects
        if o["kind"] == "ResourceSlice"
        for _ in o["spec"].get("devices") or ()
    )
    claimed = {
        (o["metadata"]["namespace"], o["metadata"]["name"]): len(
            ((o.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
        )
        for o in objects
        if o["kind"] == "ResourceClaim"
    }
    twin = []
    for o in objects:
        if o["kind"] in ("ResourceSlice", "ResourceClaim", "DeviceClass"):
            continue
        o = json.loads(json.dumps(o))
        if o["kind"] == "Node" and per_node.get(o["metadata"]["name"]):
            for section in ("allocatable", "capacity"):
                o["status"][section]["nvidia.com/gpu"] = str(per_node[o["metadata"]["name"]])
            o["metadata"]["labels"]["nvidia.com/gpu.product"] = PRODUCT
        if o["kind"] == "Pod" and o["spec"].get("resourceClaims"):
            namespace = o["metadata"]["namespace"]
            made = {
                s["name"]: s.get("resourceClaimName")
                for s in (o.get("status") or {}).get("resourceClaimStatuses") or []
            }
            gpus = sum(claimed.get((namespace, made.get(e["name"]) or ""), 0) for e in o["spec"]["resourceClaims"])
            del o["spec"]["resourceClaims"]
            resources = o["spec"]["containers"][0].setdefault("resources", {})
            resources.pop("claims", None)
            resources.setdefault("requests", {})["nvidia.com/gpu"] = str(gpus)
            resources.setdefault("limits", {})["nvidia.com/gpu"] = str(gpus)
        twin.append(o)
    return twin


def test_dra_gpus_are_counted_as_their_device_plugin_twin_and_a_run_frees_a_node(
    kube: Kube, dra_fleet: Fleet, dra_namespace: str, steering_policy: str, tmp_path: Path
) -> None:
    namespace, fleet = dra_namespace, dra_fleet
    fragment(kube, namespace, fleet)
    config = tmp_path / "compactor.yaml"
    config.write_text(yaml.safe_dump(compactor_config(namespace)), encoding="utf-8")

    live = [o for o in read_cluster(kube.api_client) if _of_this_test(o, fleet, namespace)]
    dra, twin = build_snapshot(live, source="live"), build_snapshot(as_device_plugin(live), source="twin")
    assert twin_figures(dra) == twin_figures(twin), (twin_figures(dra), twin_figures(twin))
    assert sum(n.gpu.physical_gpus for n in dra.nodes) == NODES * GPUS and {n.pool for n in dra.nodes} == {PRODUCT}

    report = run_compactor("report", *kubeconfig_args(), "--config", str(config), "--output", "json", timeout=120)
    assert report.returncode == 0, report.describe()

    # Issue 43: a tenant's claim of 10^15 devices (any namespace editor may make one; the API server admits it) and a
    # pod naming it. The cluster is still reported, planned and compacted below, in about the same memory, and the pod
    # is named as pending demand no node could hold.
    without = peak_memory_kib("report", *kubeconfig_args(), "--config", str(config), "--output", "json")
    hostile = plant_a_claim_of(10**15, kube, namespace)
    text = run_compactor("report", *kubeconfig_args(), "--config", str(config), timeout=120)
    assert text.returncode == 0, text.describe()
    unplaceable = text.stdout.split("Pending GPU pods larger than the free capacity", 1)
    assert len(unplaceable) == 2 and f"{namespace}/{hostile}" in unplaceable[1], text.describe()
    within = peak_memory_kib("report", *kubeconfig_args(), "--config", str(config), "--output", "json")
    print(f"compactor report: peak memory {within} KiB with the claim of 10^15 devices, {without} KiB without")
    assert within <= 1.10 * without, f"peak memory {within} KiB with the claim, {without} KiB without"

    planned = run_compactor("plan", *kubeconfig_args(), "--config", str(config), "--output", "json", timeout=300)
    assert planned.returncode == 0, planned.describe()
    plan = planned.json()
    assert len(plan["freedNodes"]) == 1 and len(plan["moves"]) == KEPT_PER_NODE, planned.describe()
    (freed,) = plan["freedNodes"]

    before = devices_by_node(kube, namespace)
    ran = run_once(config, tmp_path / "unused")
    whole, seen = settle(kube, namespace)
    assert whole, seen
    after = devices_by_node(kube, namespace)
    result = ran.json()
    assert result.get("status") == "succeeded", ran.describe()
    assert after[freed] == 0 and sum(after.values()) == sum(before.values()), (dict(before), dict(after), freed)
    workload_pods = [p for p in frag.pods(kube, namespace) if frag.app_of(p) in (SERVE, PLAIN)]
    placed = Counter(frag.node_of(p) for p in workload_pods)
    assert placed[freed] == 0, describe_pods(workload_pods)
    for pod in workload_pods:  # each pod's claim is allocated on the node it runs on
        status = pod.get("status") or {}
        made = [s["resourceClaimName"] for s in status.get("resourceClaimStatuses") or []]
        made += (
            [(status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName")]
            if frag.app_of(pod) == PLAIN
            else []
        )
        assert len(made) == 1 and made[0], pod
        claim = next(c for c in claims(kube, namespace) if name_of(c) == made[0])
        pools = {r["pool"] for r in claim["status"]["allocation"]["devices"]["results"]}
        assert pools == {frag.node_of(pod)}, (name_of(pod), pools)
    # the run says which devices each replacement got: PER_POD of the planned node's pool (the fake driver names the
    # pool after the node), read from the replacement's claim
    planned_to = {m["pod"]: m["to"] for m in plan["moves"]}
    got = result.get("draDevices") or {}
    assert set(got) == set(planned_to), (got, planned_to)
    for moved, devices in got.items():
        assert len(devices) == PER_POD and {d.split("/")[1] for d in devices} == {planned_to[moved]}, (moved, devices)
    gained = sum(GPUS for n in fleet.names if not after[n]) - sum(GPUS for n in fleet.names if not before[n])
    assert gained == plan["freedGpus"] == GPUS, (dict(before), dict(after), plan["freedGpus"])


HOSTILE = "hostile"


def plant_a_claim_of(count: int, kube: Kube, namespace: str) -> str:
    """A ResourceClaim asking ``count`` GPUs of the driver's class and a pod naming it (it stays Pending: no node has
    that many); the pod's name."""
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": HOSTILE},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": DRIVER, "count": count}}]}},
    }
    status, body = api_request(kube, "POST", f"{RESOURCE}/namespaces/{namespace}/resourceclaims", claim)
    assert status == 201, body
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": HOSTILE, "labels": {"app": HOSTILE}},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "automountServiceAccountToken": False,
            "resourceClaims": [{"name": "gpus", "resourceClaimName": HOSTILE}],
            "containers": [
                {"name": "pause", "image": PAUSE_IMAGE, "resources": {"claims": [{"name": "gpus"}]}},
            ],
        },
    }
    with_retries(lambda: kube.core.create_namespaced_pod(namespace, pod), what="the hostile claim's pod")
    wait_for(not_scheduled(kube, namespace, HOSTILE), timeout=60, what="the scheduler refusing the hostile pod")
    return HOSTILE


def not_scheduled(kube: Kube, namespace: str, name: str) -> Any:
    """A ``wait_for`` check: the pod is unbound and its PodScheduled condition is False (kube-scheduler v1.36 says
    ``SchedulerError``: "number of requested devices 1000000000000000 exceeds the claim limit of 32")."""

    def check() -> tuple[bool, str]:
        pod = kube.core.read_namespaced_pod(name, namespace).to_dict()
        scheduled = [c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"]
        refused = not (pod.get("spec") or {}).get("node_name") and any(c.get("status") == "False" for c in scheduled)
        return refused, str(scheduled)

    return check


def peak_memory_kib(*args: str) -> int:
    """The peak resident memory of ``compactor ARGS`` run to its end (its own ``ru_maxrss``, said at exit)."""
    command, env = compactor_command(*args)
    probe = (
        "import atexit, resource, runpy, sys; "
        "atexit.register(lambda: print(f'peak_kib={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}', file=sys.stderr)); "
        "sys.argv = ['compactor', *sys.argv[1:]]; runpy.run_module('compactor.cli', run_name='__main__')"
    )
    done = subprocess.run(
        [command[0], "-c", probe, *command[3:]], env=env, capture_output=True, text=True, timeout=180, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return int(done.stderr.rsplit("peak_kib=", 1)[1].split()[0])


def _of_this_test(obj: dict[str, Any], fleet: Fleet, namespace: str) -> bool:
    kind = obj.get("kind")
    if kind == "Node":
        return obj["metadata"]["name"] in fleet.names
    if kind == "ResourceSlice":
        return (obj.get("spec") or {}).get("nodeName") in fleet.names
    if kind in ("Pod", "ResourceClaim", "PodDisruptionBudget"):
        return obj["metadata"].get("namespace") == namespace
    return kind == "DeviceClass"

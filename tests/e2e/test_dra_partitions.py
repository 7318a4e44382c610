"""Partitionable DRA devices (dynamic MIG) on a real control plane: a pending ``3g`` blocked by scattered ``1g`` claims
is placed by moves (issue [19]).

Two fake nodes without any GPU in their allocatable (``--gpus 0``); the test's fake DRA driver publishes for each one
A100-80GB as NVIDIA's driver models dynamic MIG: a ResourceSlice sharing one counter set (8 memory slices) and one of
devices consuming them, every MIG placement (``1g.10gb`` at slots 0-6, ``2g``, ``3g`` at 0 and 4, ...) and the whole
GPU (``tests/dra_builders.partition_slices``). Only the real kube-scheduler allocates, first fit on the counters.

1. ``small`` (12 replicas of a ``1g.10gb`` template claim) fills 5 to 7 slots of each GPU;
2. it is scaled down to the 4 replicas holding slots 0 and 4 of each GPU (``pod-deletion-cost``): 6 of 8 slots free on
   each, but no 4 aligned ones, so ``big`` (one replica of a ``3g.40gb`` template claim) stays Pending.

Then ``compactor report`` says ``big`` is blocked by fragmentation (not unplaceable), ``compactor plan`` places it with
one move and names the devices first fit will give, and ``compactor run --once`` carries it out: ``big`` runs on the
planned node with the planned device, the moved pod's replacement got the device the plan said, and nothing else moved.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.dra_builders import DRIVER, partition_slices
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


MIG_CLASS = "mig.nvidia.com"
SMALL, BIG = "small", "big"
FILL, KEPT = 12, (0, 4)  # 1g replicas at first; the slots whose holders stay on each GPU


@pytest.fixture
def partition_fleet(kube: Kube, tmp_path: Path) -> Iterator[Fleet]:
    run_id = f"e2e-{secrets.token_hex(3)}"
    nodes = NodeSet(prefix=f"{run_id}-mig-", count=2, gpus=0, labels={FLEET_LABEL: run_id})
    with fake_nodes(kube.api_client, nodes, tmp_path / "fake-mig-nodes.log") as names, _driver(kube, names):
        yield Fleet(run_id=run_id, names=names, gpus_per_node=1)


def _driver(kube: Kube, names: list[str]) -> contextlib.AbstractContextManager[None]:
    """The DeviceClass of MIG devices and each node's two slices."""
    selector = f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == 'mig'"
    mig_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": MIG_CLASS},
        "spec": {"selectors": [{"cel": {"expression": selector}}]},
    }
    return fake_driver(kube, classes=[mig_class], slices=[s for node in names for s in partition_slices(node)])


@pytest.fixture
def partition_namespace(kube: Kube, partition_fleet: Fleet) -> Iterator[str]:
    with _fresh_namespace(kube, f"compactor-{partition_fleet.run_id}", force_pods=True) as name:
        yield name


def _template(name: str, profile: str) -> Obj:
    selector = f'device.attributes["{DRIVER}"].profile == "{profile}"'
    request = {
        "name": "mig",
        "exactly": {"deviceClassName": MIG_CLASS, "selectors": [{"cel": {"expression": selector}}]},
    }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


def _deployment(name: str, fleet: Fleet, template: str, replicas: int) -> Obj:
    pod_spec: Obj = {
        "terminationGracePeriodSeconds": 1,
        "automountServiceAccountToken": False,
        "nodeSelector": fleet.selector,
        "resourceClaims": [{"name": "mig", "resourceClaimTemplateName": template}],
        "containers": [
            {
                "name": "pause",
                "image": PAUSE_IMAGE,
                "resources": {"requests": {"cpu": "5m", "memory": "8Mi"}, "claims": [{"name": "mig"}]},
            }
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name, frag.WORKLOAD_LABEL: "true"}}, "spec": pod_spec},
        },
    }


def claims(kube: Kube, namespace: str) -> dict[str, Obj]:
    items = api_request(kube, "GET", f"{RESOURCE}/namespaces/{namespace}/resourceclaims")[1].get("items") or []
    return {name_of(c): c for c in items}


def device_of(kube: Kube, namespace: str, pod: Obj) -> tuple[str, str]:
    """(pool, device) of the pod's one allocated claim; ("", "") while it has none."""
    made = [s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []]
    claim = claims(kube, namespace).get(str(made[0])) if made and made[0] else None
    results = (((claim or {}).get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
    return (str(results[0]["pool"]), str(results[0]["device"])) if results else ("", "")


def scatter(kube: Kube, namespace: str, fleet: Fleet) -> None:
    """Steps 1 and 2 of the module docstring, then ``big`` Pending."""
    for name, profile in ((SMALL, "1g.10gb"), (BIG, "3g.40gb")):
        status, body = api_request(
            kube, "POST", f"{RESOURCE}/namespaces/{namespace}/resourceclaimtemplates", _template(name, profile)
        )
        assert status == 201, body
    budget = pod_disruption_budget(SMALL, app_label=SMALL)
    with_retries(lambda: kube.policy.create_namespaced_pod_disruption_budget(namespace, budget), what="a PDB")
    body = _deployment(SMALL, fleet, SMALL, FILL)
    with_retries(lambda: kube.apps.create_namespaced_deployment(namespace, body), what="creating small")
    wait_for(frag.whole_again(kube, namespace), timeout=180, what=f"{FILL} replicas of {SMALL} Running")
    slots = {f"gpu-0-mig-1g-10gb-{s}" for s in KEPT}
    kept = [p for p in frag.pods(kube, namespace) if device_of(kube, namespace, p)[1] in slots]
    assert len(kept) == len(KEPT) * len(fleet.names), [
        (name_of(p), device_of(kube, namespace, p)) for p in frag.pods(kube, namespace)
    ]
    for pod in kept:
        frag.protect(kube, namespace, name_of(pod))
    frag.scale(kube, namespace, SMALL, len(kept))
    wait_for(frag.whole_again(kube, namespace), timeout=180, what=f"{SMALL} scaled down")
    held = sorted(device_of(kube, namespace, p) for p in frag.pods(kube, namespace))
    assert held == sorted((n, d) for n in fleet.names for d in slots), held
    body = _deployment(BIG, fleet, BIG, 1)
    with_retries(lambda: kube.apps.create_namespaced_deployment(namespace, body), what="creating big")
    wait_for(frag.unschedulable(kube, namespace, BIG), timeout=60, what=f"{BIG} Pending")


def test_a_3g_blocked_by_scattered_1g_partitions_is_placed_by_moves(
    kube: Kube, partition_fleet: Fleet, partition_namespace: str, steering_policy: str, tmp_path: Path
) -> None:
    namespace, fleet = partition_namespace, partition_fleet
    scatter(kube, namespace, fleet)
    config = tmp_path / "compactor.yaml"
    config.write_text(yaml.safe_dump(compactor_config(namespace)), encoding="utf-8")

    report = run_compactor("report", *kubeconfig_args(), "--config", str(config), "--output", "json", timeout=120)
    assert report.returncode == 0, report.describe()
    figures = report.json()["figures"]
    blocked = [b for b in figures["blockedPending"] if b["pod"].startswith(f"{namespace}/{BIG}-")]
    assert len(blocked) == 1 and "scattered" in blocked[0]["reason"], report.describe()
    mine = {n["name"]: n for n in figures["nodes"] if n["name"] in fleet.names}
    assert sorted(mine) == sorted(fleet.names) and {n["physicalGpus"] for n in mine.values()} == {1}, mine

    planned = run_compactor("plan", *kubeconfig_args(), "--config", str(config), "--output", "json", timeout=300)
    assert planned.returncode == 0, planned.describe()
    plan = planned.json()
    (move,) = plan["moves"]
    (placement,) = plan["placedPending"]
    assert placement["pod"].startswith(f"{namespace}/{BIG}-") and move["from"] == placement["to"], planned.describe()
    assert move["to"] != move["from"] and len(move["devices"]) == 1 and len(placement["devices"]) == 1, plan
    assert plan["after"]["blockedDemandGpuEquivalents"] == 0, plan["after"]

    before = {name_of(p): device_of(kube, namespace, p) for p in frag.pods(kube, namespace)}
    ran = run_once(config, tmp_path / "unused")
    result = ran.json()
    assert result.get("status") == "succeeded", ran.describe()
    whole, seen = settle(kube, namespace)
    assert whole, seen
    after = {name_of(p): (frag.node_of(p), device_of(kube, namespace, p)) for p in frag.pods(kube, namespace)}
    (big,) = [(node, device) for name, (node, device) in after.items() if name.startswith(f"{BIG}-")]
    assert big == (placement["to"], (placement["to"], placement["devices"][0])), (big, placement)
    moved = move["pod"].split("/", 1)[1]
    assert moved not in after, describe_pods(frag.pods(kube, namespace))
    stayed = {n: d for n, d in before.items() if n != moved and not n.startswith(f"{BIG}-")}
    assert len(stayed) == len(KEPT) * len(fleet.names) - 1, before
    assert all(after[n][1] == d for n, d in stayed.items()), (before, after)
    (replacement,) = [v for n, v in after.items() if n not in before and not n.startswith(f"{BIG}-")]
    assert replacement == (move["to"], (move["to"], move["devices"][0])), (replacement, move)
    # the run read the replacement's claim and found the device the plan named: nothing said about first fit
    assert result["draDevices"][move["pod"]] == [f"{DRIVER}/{move['to']}/{move['devices'][0]}"], result
    assert not [n for n in result.get("notes") or [] if "first fit" in n], result

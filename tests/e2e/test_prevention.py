"""End to end on a real control plane: prevention, the fill-first admission policy (issue 42, item 5;
``manifests/prevention``, ``steering.fill_first``, docs/prevention.md).

On a fleet where the real scheduler has spread one workload's replicas (the default profile puts them on as many nodes
as it can; the bin-packing profile on as few), a ``compactor run --once`` with ``steering.fill_first`` labels the nodes
in use by tier and no other node. Then new GPU pods of six other workloads arrive: the policy gives each its preferred
terms, and each lands on a labelled node although whole-free nodes exist, which the default profile prefers
(LeastAllocated) when nothing else speaks. An 8-GPU pod, which fits no labelled node, still schedules, on a whole-free
node: nothing is required, only preferred. The labels go when the setting is off again.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

from compactor.metrics.fill_first import FILL_FIRST_LABEL
from tests.e2e import fragmentation as frag
from tests.e2e.fleet_runs import RUN_TIMEOUT, compactor_config
from tests.e2e.fragmentation import Fleet
from tests.e2e.helpers import (
    GPU,
    NEEDS_CLUSTER,
    Kube,
    describe_pods,
    kubeconfig_args,
    labels,
    raw,
    run_compactor,
    wait_for,
    with_retries,
)
from tests.e2e.steering import install_fill_first_policy

pytestmark = [NEEDS_CLUSTER, pytest.mark.e2e, pytest.mark.timeout(600)]
IN_USE = 5  # replicas of 2 GPUs: five nodes in use under the default profile, two under bin-packing


def _create(kube: Kube, namespace: str, fleet: Fleet, name: str, *, replicas: int, gpus: int) -> None:
    body = frag.fleet_deployment(name, fleet, replicas=replicas, gpus=gpus)
    with_retries(lambda: kube.apps.create_namespaced_deployment(namespace, body), what=f"creating {name}")


def _running(kube: Kube, namespace: str, apps: list[str], count: int) -> tuple[bool, str]:
    pods = [p for p in frag.pods(kube, namespace) if frag.app_of(p) in apps]
    ready = [p for p in pods if frag.node_of(p) and (p.get("status") or {}).get("phase") == "Running"]
    return len(ready) == count, describe_pods(pods)


def _gpus_per_node(kube: Kube, namespace: str) -> Counter[str]:
    used: Counter[str] = Counter()
    for pod in frag.pods(kube, namespace):
        if node := frag.node_of(pod):
            limits = pod["spec"]["containers"][0]["resources"].get("limits") or {}
            used[node] += int(limits.get(GPU, 0))
    return used


def _run_once(tmp_path: Path, namespace: str, *, fill_first: bool) -> None:
    settings = compactor_config(namespace)
    settings["aims"] = {"objective": "pending-only"}  # labels only: nothing waits, so the run moves nothing
    settings["steering"] = {"fill_first": fill_first}
    config = tmp_path / f"fill-first-{fill_first}.yaml"
    config.write_text(yaml.safe_dump(settings), encoding="utf-8")
    ran = run_compactor(
        "run", "--once", *kubeconfig_args(), "--config", str(config), "--output", "json", timeout=RUN_TIMEOUT
    )
    assert ran.returncode == 0, ran.describe()


def _tiers(kube: Kube, fleet: Fleet) -> dict[str, str]:
    nodes = raw(kube.core.list_node).get("items") or []
    found = {n["metadata"]["name"]: labels(n).get(FILL_FIRST_LABEL) for n in nodes}
    return {name: tier for name, tier in found.items() if name in fleet.names and tier}


def test_new_gpu_pods_prefer_the_nodes_in_use_and_an_8_gpu_pod_still_schedules(
    kube: Kube, gpu_fleet: Fleet, fleet_namespace: str, steering_policy: str, tmp_path: Path
) -> None:
    install_fill_first_policy(kube, fleet_namespace)
    namespace = fleet_namespace
    _create(kube, namespace, gpu_fleet, "serving", replicas=IN_USE, gpus=2)
    wait_for(lambda: _running(kube, namespace, ["serving"], IN_USE), timeout=120, what="serving Running")
    used = _gpus_per_node(kube, namespace)

    _run_once(tmp_path, namespace, fill_first=True)
    expected = {node: str(1 + gpus * 3 // 8) for node, gpus in used.items() if 0 < gpus < 8}
    assert expected, f"no node in use with GPUs free: {dict(used)}"
    assert _tiers(kube, gpu_fleet) == expected

    arrivals = [f"model-{i}" for i in range(6)]  # six workloads of one replica each, as new models arrive
    for name in arrivals:
        _create(kube, namespace, gpu_fleet, name, replicas=1, gpus=1)
    wait_for(lambda: _running(kube, namespace, arrivals, len(arrivals)), timeout=120, what="the arrivals Running")
    pods = [p for p in frag.pods(kube, namespace) if frag.app_of(p) in arrivals]
    preferred = [
        term["preference"]["matchExpressions"][0]
        for term in pods[0]["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    ]
    assert [(e["key"], e["values"]) for e in preferred] == [(FILL_FIRST_LABEL, [t]) for t in ("3", "2", "1")]
    landed = {frag.app_of(p): frag.node_of(p) for p in pods}
    assert set(landed.values()) <= set(expected), f"an arrival left the nodes in use: {landed}, labelled {expected}"

    _create(kube, namespace, gpu_fleet, "big", replicas=1, gpus=8)
    wait_for(lambda: _running(kube, namespace, ["big"], 1), timeout=120, what="the 8-GPU pod Running")
    (big,) = [p for p in frag.pods(kube, namespace) if frag.app_of(p) == "big"]
    assert frag.node_of(big) not in expected  # no labelled node had 8 GPUs free: a whole-free one took it

    _run_once(tmp_path, namespace, fill_first=False)
    assert _tiers(kube, gpu_fleet) == {}

"""End to end on a real control plane: a Job's pod moves only while its Job survives the eviction.

A Job's pod moves only when its owner allows it (``compactor.io/evict=true``), and then each eviction counts, for the
real Job controller (kube-controller-manager), as one failed pod against the Job's ``backoffLimit``. Two fake GPU
nodes: one runs a bare pod (never moved), the other a Job's pod, so the plan moves the Job's pod next to the bare one
to free a whole node. With ``backoffLimit: 0`` the eviction would fail the Job (``BackoffLimitExceeded``: its work lost):
the run refuses the move, no eviction is sent and the Job runs on. With ``backoffLimit: 2`` the move is made: the Job
controller counts one failure and recreates the pod on the planned node, the Job still running.

Placements are the real scheduler's: the nodes are cordoned and uncordoned as an operator would, so that the Job's
pod lands on one node and the bare pod on the other.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from tests.e2e.conftest import _fresh_namespace
from tests.e2e.fragmentation import FLEET_LABEL, H100_LABELS
from tests.e2e.helpers import (
    GPU,
    NEEDS_CLUSTER,
    PAUSE_IMAGE,
    Kube,
    Obj,
    kubeconfig_args,
    name_of,
    pod_disruption_budget,
    raw,
    run_compactor,
    wait_for,
    with_retries,
)
from tests.e2e.kubelets import NodeSet, fake_nodes

pytestmark = [NEEDS_CLUSTER, pytest.mark.e2e, pytest.mark.timeout(600)]

SETTLE_TIMEOUT = 120
RUN_TIMEOUT = 300


def gpu_pod_spec(nodes: str) -> Obj:
    return {
        "terminationGracePeriodSeconds": 1,
        "automountServiceAccountToken": False,
        "restartPolicy": "Never",
        "nodeSelector": {FLEET_LABEL: nodes},
        "containers": [
            {
                "name": "pause",
                "image": PAUSE_IMAGE,
                "resources": {"requests": {"cpu": "5m", "memory": "8Mi", GPU: "1"}, "limits": {GPU: "1"}},
            }
        ],
    }


def batch_job(nodes: str, backoff_limit: int) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "batch"},
        "spec": {
            "backoffLimit": backoff_limit,
            "template": {
                "metadata": {"labels": {"app": "batch"}, "annotations": {"compactor.io/evict": "true"}},
                "spec": gpu_pod_spec(nodes),
            },
        },
    }


def bare_pod(nodes: str, node: str) -> Obj:
    """The bare pod, on ``node`` by its node selector: a cordon just made may not yet be in the scheduler's cache (under
    load the pod once landed on the node cordoned a moment before)."""
    spec = gpu_pod_spec(nodes)
    spec["nodeSelector"] = {**spec["nodeSelector"], "kubernetes.io/hostname": node}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "anchor"}, "spec": spec}


def pods(kube: Kube, namespace: str) -> list[Obj]:
    return list(raw(kube.core.list_namespaced_pod, namespace).get("items") or [])


def running_on(kube: Kube, namespace: str, name_prefix: str) -> list[tuple[str, str, str]]:
    """(pod, node, uid) of the Running, not terminating pods whose name starts with ``name_prefix``."""
    return [
        (name_of(p), str(p["spec"].get("nodeName")), str(p["metadata"]["uid"]))
        for p in pods(kube, namespace)
        if name_of(p).startswith(name_prefix)
        and (p.get("status") or {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    ]


def cordon(kube: Kube, node: str, closed: bool) -> None:
    with_retries(lambda: kube.core.patch_node(node, {"spec": {"unschedulable": closed}}), what=f"cordoning {node}")


def one_running(kube: Kube, namespace: str, prefix: str, node: str) -> Any:
    def check() -> tuple[bool, str]:
        found = running_on(kube, namespace, prefix)
        return [n for _, n, _ in found] == [node], f"{prefix} pods running: {found}"

    return check


@pytest.fixture
def two_nodes(kube: Kube, state_namespace: str, tmp_path: Path) -> Iterator[tuple[str, list[str], str]]:
    """Two fake 8-GPU nodes of this test alone, and a fresh namespace (deleted before the nodes go); the compactor's own
    namespace exists (``state_namespace``)."""
    run_id = f"e2e-{secrets.token_hex(3)}"
    nodes = NodeSet(prefix=f"{run_id}-gpu-", count=2, gpus=8, labels={**H100_LABELS, FLEET_LABEL: run_id})
    with (
        fake_nodes(kube.api_client, nodes, tmp_path / "fake-gpu-nodes.log") as names,
        _fresh_namespace(kube, f"compactor-{run_id}", force_pods=True) as namespace,
    ):
        yield run_id, names, namespace


def start(kube: Kube, namespace: str, run_id: str, names: list[str], backoff_limit: int) -> None:
    """The Job's pod on the first node, the bare pod on the second, each placed by the scheduler with the other node
    cordoned; a PDB lets the Job's pod go (its only replica)."""
    batch = k8s.BatchV1Api(kube.api_client)
    first, second = names
    # minAvailable: a Job has no scale subresource, so a maxUnavailable budget could not sync (the disruption controller)
    budget = {
        **pod_disruption_budget("batch", app_label="batch"),
        "spec": {"minAvailable": 0, "selector": {"matchLabels": {"app": "batch"}}},
    }
    kube.policy.create_namespaced_pod_disruption_budget(namespace, budget)
    cordon(kube, second, True)
    batch.create_namespaced_job(namespace, batch_job(run_id, backoff_limit))
    wait_for(one_running(kube, namespace, "batch-", first), timeout=SETTLE_TIMEOUT, what="the Job's pod to run")
    cordon(kube, second, False)
    cordon(kube, first, True)
    kube.core.create_namespaced_pod(namespace, bare_pod(run_id, second))
    wait_for(one_running(kube, namespace, "anchor", second), timeout=SETTLE_TIMEOUT, what="the bare pod to run")
    cordon(kube, first, False)

    def budget_observed() -> tuple[bool, str]:  # the disruption controller has counted the Job's pod
        status = raw(kube.policy.read_namespaced_pod_disruption_budget, "batch", namespace).get("status") or {}
        return status.get("disruptionsAllowed") == 1, f"PDB status: {status}"

    wait_for(budget_observed, timeout=SETTLE_TIMEOUT, what="the PDB to allow the Job's pod to go")


def run_once(kube: Kube, namespace: str, tmp_path: Path) -> Obj:
    config = tmp_path / "compactor.yaml"
    settings = {
        "mode": "apply",
        "movable": {"namespaces": [namespace]},
        "solver": {"time_limit_seconds": 10},
        # a Job's replacement comes from the Job controller, unpinned by the steering policy: holds steer it
        "steering": {"mechanism": "holds"},
        "executor": {"poll_seconds": 1, "replacement_timeout_seconds": 180},
    }
    config.write_text(yaml.safe_dump(settings), encoding="utf-8")
    planned = run_compactor("plan", *kubeconfig_args(), "--config", str(config), timeout=RUN_TIMEOUT)
    assert "batch-" in planned.stdout, f"the plan does not move the Job's pod:\n{planned.describe()}"
    ran = run_compactor("run", "--once", *kubeconfig_args(), "--config", str(config), "-o", "json", timeout=RUN_TIMEOUT)
    assert ran.returncode == 0, ran.describe()
    report: Obj = ran.json()
    assert report["movesTotal"] == 1, ran.describe()  # the plan moved the Job's pod to free its node
    return report


def job_status(kube: Kube, namespace: str) -> Obj:
    job = k8s.BatchV1Api(kube.api_client).read_namespaced_job("batch", namespace)
    return dict(kube.api_client.sanitize_for_serialization(job).get("status") or {})


def test_a_job_pod_whose_eviction_would_fail_its_job_stays_and_the_job_runs_on(
    kube: Kube, two_nodes: tuple[str, list[str], str], tmp_path: Path
) -> None:
    run_id, names, namespace = two_nodes
    start(kube, namespace, run_id, names, backoff_limit=0)
    (before,) = running_on(kube, namespace, "batch-")
    report = run_once(kube, namespace, tmp_path)
    assert report["status"] == "partial" and "would fail Job" in report["reason"], report
    assert report["outcome"]["evictions"] == 0, report
    assert running_on(kube, namespace, "batch-") == [before]  # the same pod, where it was
    status = job_status(kube, namespace)
    assert not status.get("failed") and not any(c.get("type") == "Failed" for c in status.get("conditions") or [])


def test_a_job_pod_within_its_backoff_limit_moves_and_the_job_runs_on(
    kube: Kube, two_nodes: tuple[str, list[str], str], tmp_path: Path
) -> None:
    run_id, names, namespace = two_nodes
    start(kube, namespace, run_id, names, backoff_limit=2)
    report = run_once(kube, namespace, tmp_path)
    assert report["status"] == "succeeded" and report["freedNodes"] == [names[0]], report
    wait_for(one_running(kube, namespace, "batch-", names[1]), timeout=SETTLE_TIMEOUT, what="the Job's new pod")

    def counted() -> tuple[bool, str]:  # the Job controller counts the evicted pod as one failure, and goes on
        status = job_status(kube, namespace)
        failed = any(c.get("type") == "Failed" for c in status.get("conditions") or [])
        return status.get("failed") == 1 and not failed, f"Job status: {status}"

    wait_for(counted, timeout=SETTLE_TIMEOUT, what="the Job controller to count one failed pod")

"""End to end on a real cluster: a fragmented GPU workload, ``compactor plan``, ``compactor run --once``.

Covers, against the cluster named by ``KUBECONFIG`` (kind, or kwok-style simulated kubelets):
the plan frees a node; the run exits 0; no PodDisruptionBudget ever drops below its
desired healthy count while it runs; only planned nodes are ever cordoned; afterwards the
freed node runs no GPU pod of the test, every Deployment is whole, no node keeps a
``compactor.io/*`` mark, every node that was schedulable still is, and the executor's
state ConfigMap is gone.

Setup and cleanup live in ``conftest.py`` (nodes, namespaces) and ``helpers.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.helpers import (
    FAKE_GPU_LABEL,
    GPU,
    MIG_1G,
    MIXED_NODE_FIRST,
    MIXED_NODE_LATER,
    NEEDS_CLUSTER,
    STATE_CONFIGMAP,
    STATE_NAMESPACE,
    GpuNodes,
    Kube,
    PdbWatcher,
    advertise,
    advertised,
    compactor_marks,
    deployment,
    describe_pods,
    get_or_none,
    is_closed,
    is_running_ready,
    is_terminating,
    kubeconfig_args,
    name_of,
    pod_disruption_budget,
    pod_requests_gpu,
    raw,
    run_compactor,
    wait_for,
    with_retries,
)

pytestmark = [
    NEEDS_CLUSTER,
    pytest.mark.e2e,
    pytest.mark.timeout(1800),
]

# name -> (resource each replica asks for, replicas)
WORKLOADS = {"gpu-a": (GPU, 2), "mig-b": (MIG_1G, 2)}
READY_TIMEOUT = 180
RUN_TIMEOUT = 900


def _config(namespace: str) -> dict[str, object]:
    """Only the test's pods may move; short polls and timeouts that still suit a slow laptop."""
    return {
        "movable": {"namespaces": [namespace]},
        "solver": {"time_limit_seconds": 20, "workers": 2},
        "executor": {
            "after_drain": "uncordon",
            "poll_seconds": 1,
            "replacement_timeout_seconds": 180,
            "backoff_seconds": 1,
            "backoff_max_seconds": 5,
        },
        "caps": {"max_concurrent_evictions": 1},
    }


def _pods(kube: Kube, namespace: str) -> list[dict[str, Any]]:
    return raw(kube.core.list_namespaced_pod, namespace).get("items") or []


def _create_workload(kube: Kube, namespace: str, nodes: GpuNodes, name: str, resource: str, replicas: int) -> None:
    pdb = pod_disruption_budget(name, app_label=name)
    deploy = deployment(
        name,
        replicas=replicas,
        resource=resource,
        app_label=name,
        extra_labels={"gpu-compactor-e2e/workload": "true"},
        node_selector={FAKE_GPU_LABEL: nodes.run_id},
    )
    with_retries(
        lambda: kube.policy.create_namespaced_pod_disruption_budget(namespace, pdb),
        what=f"creating PDB {name}",
        statuses=(429, 500, 503),
    )
    with_retries(
        lambda: kube.apps.create_namespaced_deployment(namespace, deploy),
        what=f"creating Deployment {name}",
        statuses=(429, 500, 503),
    )


def _workload_settled(kube: Kube, namespace: str, names: list[str]) -> Callable[[], tuple[bool, str]]:
    """Every Deployment fully Ready, no stray pods, every PDB observed and allowing exactly one disruption."""

    def check() -> tuple[bool, str]:
        pods = _pods(kube, namespace)
        deployments = {name_of(d): d for d in raw(kube.apps.list_namespaced_deployment, namespace).get("items") or []}
        pdbs = {
            name_of(p): p for p in raw(kube.policy.list_namespaced_pod_disruption_budget, namespace).get("items") or []
        }
        lines: list[str] = []
        done = True
        for name in names:
            spec_replicas = int(((deployments.get(name) or {}).get("spec") or {}).get("replicas") or 0)
            status = (deployments.get(name) or {}).get("status") or {}
            mine = [p for p in pods if (p["metadata"].get("labels") or {}).get("app") == name]
            ready = [p for p in mine if is_running_ready(p) and not is_terminating(p)]
            pdb = pdbs.get(name) or {}
            pdb_status = pdb.get("status") or {}
            observed = int(pdb_status.get("observedGeneration") or 0) >= int(
                (pdb.get("metadata") or {}).get("generation") or 1
            )
            ok = (
                int(status.get("readyReplicas") or 0) == spec_replicas > 0
                and len(ready) == len(mine) == spec_replicas
                and observed
                and int(pdb_status.get("currentHealthy") or 0) == spec_replicas
                and int(pdb_status.get("disruptionsAllowed") or 0) == 1
            )
            done = done and ok
            lines.append(
                f"Deployment {name}: readyReplicas={status.get('readyReplicas')}/{spec_replicas}, {len(ready)}/{len(mine)} pods "
                f"Running+Ready; PDB currentHealthy={pdb_status.get('currentHealthy')} desiredHealthy="
                f"{pdb_status.get('desiredHealthy')} disruptionsAllowed={pdb_status.get('disruptionsAllowed')}"
                f"{'' if observed else ' (not observed yet)'}"
            )
        return done, "\n".join(lines) + "\npods:\n" + describe_pods(pods)

    return check


def _gpu_pods_by_node(kube: Kube, namespace: str) -> dict[str, list[str]]:
    """Node -> the namespace's GPU pods bound there and not finished (terminating ones included: they still hold the GPU)."""
    placed: dict[str, list[str]] = {}
    for pod in _pods(kube, namespace):
        node = (pod.get("spec") or {}).get("nodeName")
        if node and pod_requests_gpu(pod) and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            placed.setdefault(node, []).append(name_of(pod))
    return placed


def test_run_once_frees_a_node_without_violating_any_pdb(
    kube: Kube, gpu_nodes: GpuNodes, namespace: str, steering_policy: str, tmp_path: Path
) -> None:
    # 1. A fragmented workload. The mixed node advertises only MIG slices so far, so the MIG pods can run only
    #    there and the whole-GPU pods only on the whole node; then the mixed node's 4 whole GPUs come online.
    for name, (resource, replicas) in WORKLOADS.items():
        _create_workload(kube, namespace, gpu_nodes, name, resource, replicas)
    wait_for(
        _workload_settled(kube, namespace, list(WORKLOADS)),
        timeout=READY_TIMEOUT,
        interval=2,
        what="every Deployment Ready and every PDB allowing one disruption",
    )
    placement = _gpu_pods_by_node(kube, namespace)
    assert sorted(placement) == sorted(gpu_nodes.names), (
        f"setup did not fragment: each of {gpu_nodes.names} should run GPU pods, got {placement}\n{describe_pods(_pods(kube, namespace))}"
    )
    advertise(kube.core, gpu_nodes.mixed, MIXED_NODE_LATER)
    wait_for(
        advertised(kube.core, gpu_nodes.mixed, {**MIXED_NODE_FIRST, **MIXED_NODE_LATER}),
        timeout=60,
        what=f"node {gpu_nodes.mixed} to advertise its whole GPUs",
    )

    config = tmp_path / "compactor.yaml"
    config.write_text(yaml.safe_dump(_config(namespace)), encoding="utf-8")
    cluster = kubeconfig_args()

    # 2. The plan (read-only) frees at least one of the two GPU nodes, moving only the test's pods.
    planned = run_compactor("plan", *cluster, "--config", str(config), "--output", "json", timeout=300)
    assert planned.returncode == 0, planned.describe()
    plan = planned.json()
    freed = list(plan.get("freedNodes") or [])
    assert freed, f"the plan frees no node (placement {placement}):\n{planned.describe()}"
    assert set(freed) <= set(gpu_nodes.names), f"the plan frees {freed}, expected only nodes among {gpu_nodes.names}"
    strangers = [m["pod"] for m in plan.get("moves") or [] if not str(m.get("pod", "")).startswith(f"{namespace}/")]
    assert not strangers, f"movable.namespaces is [{namespace}] but the plan moves {strangers}"

    # 3. The real run, watched: PDBs sampled every 0.5 s, cordons recorded.
    watcher = PdbWatcher(kube.core, kube.policy, namespace, gpu_nodes.names, interval=0.5)
    watcher.start()
    try:
        ran = run_compactor("run", "--once", *cluster, "--config", str(config), "--output", "json", timeout=RUN_TIMEOUT)
        assert ran.returncode == 0, ran.describe()
        report = ran.json()
        assert report.get("status") == "succeeded", f"run report: {report}\n{ran.describe()}"
        assert report.get("movesDone") == report.get("movesTotal"), f"run report: {report}"
        run_freed = list(report.get("freedNodes") or [])
        assert run_freed and set(run_freed) <= set(gpu_nodes.names), f"the run freed {run_freed}; report {report}"
        freed_all = sorted({*freed, *run_freed})

        # 4. The freed nodes end without GPU pods of the test (evicted pods may take a moment to terminate).
        wait_for(
            lambda: (
                not any(_gpu_pods_by_node(kube, namespace).get(n) for n in freed_all),
                f"GPU pods by node: {_gpu_pods_by_node(kube, namespace)}\n{describe_pods(_pods(kube, namespace))}",
            ),
            timeout=120,
            interval=2,
            what=f"no GPU pod of {namespace} on the freed node(s) {freed_all}",
        )
        wait_for(
            _deployments_whole(kube, namespace),
            timeout=120,
            interval=2,
            what="every Deployment to have readyReplicas == replicas",
        )
    finally:
        watch = watcher.stop()

    assert watch.samples > 0, f"the PDB watcher took no sample: {watch.errors}"
    assert not watch.violations, "a PodDisruptionBudget was violated during the run:\n" + "\n".join(
        watch.violations[:20]
    )
    cordoned = sorted(watch.cordoned)
    assert set(cordoned) <= set(freed_all), (
        f"nodes {cordoned} were seen cordoned, but only the freed nodes {freed_all} may be (seen at {watch.cordoned})"
    )

    # 5. Nothing is left behind: no marks, nothing newly unschedulable, no executor state.
    nodes = raw(kube.core.list_node).get("items") or []
    marked = {name_of(n): compactor_marks(n) for n in nodes if compactor_marks(n)}
    assert not marked, f"nodes still carry compactor marks: {marked}"
    unschedulable = sorted(name_of(n) for n in nodes if is_closed(n))
    newly = sorted(set(unschedulable) & gpu_nodes.schedulable_before)
    assert not newly, f"nodes schedulable before the test are cordoned now: {newly}"
    leftover = get_or_none(kube.core.read_namespaced_config_map, STATE_CONFIGMAP, STATE_NAMESPACE)
    assert leftover is None, (
        f"the executor's state configmap {STATE_NAMESPACE}/{STATE_CONFIGMAP} is still there: {leftover.get('data')}"
    )


def _deployments_whole(kube: Kube, namespace: str) -> Callable[[], tuple[bool, str]]:
    def check() -> tuple[bool, str]:
        items = raw(kube.apps.list_namespaced_deployment, namespace).get("items") or []
        state = {
            name_of(d): (
                int((d.get("status") or {}).get("readyReplicas") or 0),
                int((d.get("spec") or {}).get("replicas") or 0),
            )
            for d in items
        }
        done = len(state) == len(WORKLOADS) and all(ready == want for ready, want in state.values())
        return done, f"(readyReplicas, replicas) by Deployment: {state}\n{describe_pods(_pods(kube, namespace))}"

    return check

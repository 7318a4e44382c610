"""Fixtures for the end-to-end suite: an API client, two worker nodes with fake GPUs, a fleet of fake GPU nodes, fresh namespaces.

Teardown order (the reverse of setup) matters and is always run, also after a failed
setup: the test namespace goes first (its GPU pods leave the nodes), then the nodes
lose their fake GPU capacity and labels (and any compactor cordon left behind), then
the compactor's own namespace, when this suite created it.

On a cluster without two usable workers (realk8s: a control plane only), ``gpu_nodes``
first creates two plain ones served by this suite's in-process fake kubelets
(``kubelets.py``), as ``gpu_fleet`` creates its 16 GPU nodes on any cluster (on kind, extra
Node objects beside the real workers); both delete exactly those nodes at the end.

These fixtures only run when a test in ``tests/e2e`` runs, which needs ``KUBECONFIG``
(see ``test_compaction.py``).
"""

from __future__ import annotations

import os
import secrets
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from compactor.actions.cluster.run_state import decode_plan
from tests.e2e.fragmentation import FLEET_LABEL, H100_LABELS, Fleet
from tests.e2e.helpers import (
    CREATED_LABEL,
    FAKE_GPU_LABEL,
    FAKE_LABEL_KEYS,
    FAKE_RESOURCES,
    MIXED_NODE_FIRST,
    MIXED_NODE_LABELS,
    NODES_ENV,
    STATE_CONFIGMAP,
    STATE_NAMESPACE,
    WHOLE_NODE_LABELS,
    WHOLE_NODE_RESOURCES,
    GpuNodes,
    Kube,
    advertise,
    advertised,
    get_or_none,
    labels,
    name_of,
    pick_worker_nodes,
    raw,
    release_compactor_marks,
    set_labels,
    wait_for,
    why_not_candidate,
    with_retries,
    withdraw,
)
from tests.e2e.kubelets import NodeSet, fake_nodes
from tests.e2e.steering import install_policy

FLEET_NODES = 16
FLEET_GPUS_PER_NODE = 8


@pytest.fixture(scope="session")
def kube() -> Iterator[Kube]:
    api_client = k8s_config.new_client_from_config(config_file=os.environ["KUBECONFIG"], persist_config=False)  # type: ignore[no-untyped-call]
    try:
        yield Kube(api_client, k8s.CoreV1Api(api_client), k8s.AppsV1Api(api_client), k8s.PolicyV1Api(api_client))
    finally:
        api_client.close()


@pytest.fixture
def state_namespace(kube: Kube) -> Iterator[str]:
    """The compactor's namespace (its state ConfigMap lives there); created when missing, then removed again."""
    leftover = get_or_none(kube.core.read_namespaced_config_map, STATE_CONFIGMAP, STATE_NAMESPACE)
    if leftover is not None and _left_by_this_suite(leftover):
        warnings.warn(
            f"removing {STATE_NAMESPACE}/{STATE_CONFIGMAP} left by an interrupted end-to-end run", stacklevel=1
        )
        kube.core.delete_namespaced_config_map(STATE_CONFIGMAP, STATE_NAMESPACE)
    elif leftover is not None:
        pytest.fail(
            f"configmap {STATE_NAMESPACE}/{STATE_CONFIGMAP} already exists: a compactor is running in this cluster or an earlier "
            f"run was interrupted (plan {(leftover.get('data') or {}).get('planId', '?')}). The end-to-end suite needs a cluster "
            f"where nothing else compacts; delete it (kubectl -n {STATE_NAMESPACE} delete configmap {STATE_CONFIGMAP}) once no "
            "compactor runs."
        )
    created = False
    wait_for(
        _not_terminating(kube, STATE_NAMESPACE),
        timeout=120,
        interval=1,
        what=f"namespace {STATE_NAMESPACE}, deleted by the previous test, to go",
    )
    if get_or_none(kube.core.read_namespace, STATE_NAMESPACE) is None:
        body = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": STATE_NAMESPACE, "labels": {CREATED_LABEL: "true"}},
        }
        with_retries(
            lambda: kube.core.create_namespace(body),
            what=f"creating namespace {STATE_NAMESPACE}",
            statuses=(429, 500, 503),
        )
        created = True
    try:
        yield STATE_NAMESPACE
    finally:
        if created:
            try:
                kube.core.delete_namespace(STATE_NAMESPACE)
            except ApiException as exc:
                if exc.status != 404:
                    warnings.warn(
                        f"could not delete namespace {STATE_NAMESPACE}: {exc.status} {exc.reason}", stacklevel=1
                    )


@pytest.fixture(scope="session")
def _steering_installed(kube: Kube) -> None:
    """Policy and binding installed for the suite and left installed, as ``kubectl apply -k manifests/steering`` leaves them:
    a policy deleted and created again can stay inert on kube-apiserver v1.36.2 (see ``install_policy``)."""
    install_policy(kube, only="MutatingAdmissionPolicy")
    install_policy(kube, only="MutatingAdmissionPolicyBinding")


@pytest.fixture
def steering_policy(kube: Kube, state_namespace: str, _steering_installed: None) -> str:
    """The steering admission policy as a cluster admin installs it (manifests/steering and the parameter ConfigMap)."""
    install_policy(kube)
    return state_namespace


NOT_INSTALLED = "gpu-compactor-steering-not-installed"


@pytest.fixture
def without_steering_policy(kube: Kube, state_namespace: str, _steering_installed: None) -> str:
    """``steering.policy_name`` for a cluster without the steering policy: a name no policy, binding or ConfigMap has.

    The installed policy stays: deleting it and creating it again can leave it inert on kube-apiserver v1.36.2 until the
    API server restarts (``install_policy``), which would break every later test. From the compactor's side a policy of
    another name is exactly an absent one: the same three reads, the same 404."""
    return NOT_INSTALLED


@pytest.fixture
def tenant_namespace(kube: Kube) -> Iterator[str]:
    """A namespace for another team's pods, created and deleted around the test."""
    with _fresh_namespace(kube, f"compactor-tenant-{secrets.token_hex(3)}", force_pods=True) as name:
        yield name


def _not_terminating(kube: Kube, name: str) -> Callable[[], tuple[bool, str]]:
    def check() -> tuple[bool, str]:
        found = get_or_none(kube.core.read_namespace, name)
        return found is None or not (found.get("metadata") or {}).get(
            "deletionTimestamp"
        ), f"namespace {name}: {(found or {}).get('status')}"

    return check


def _left_by_this_suite(config_map: dict[str, Any]) -> bool:
    """The state of a plan that moved only pods of this suite's namespaces (all deleted by now)."""
    try:
        plan = decode_plan((config_map.get("data") or {}).get("plan") or "").model_dump(by_alias=True, mode="json")
    except ValueError:
        return False
    pods = [str(m.get("pod", "")) for m in plan.get("moves") or []]
    return bool(pods) and all(p.startswith("compactor-e2e-") for p in pods)


@pytest.fixture
def gpu_nodes(kube: Kube, state_namespace: str, tmp_path: Path) -> Iterator[GpuNodes]:
    """Two schedulable workers with fake GPU capacity and GFD-like labels; everything is taken back afterwards."""
    run_id = f"e2e-{secrets.token_hex(3)}"
    override = [n.strip() for n in os.environ.get(NODES_ENV, "").split(",") if n.strip()]
    with ExitStack() as fake_workers:
        nodes = raw(kube.core.list_node).get("items") or []
        if not override and sum(not why_not_candidate(n) for n in nodes) < 2:
            fake_workers.enter_context(_fake_workers(kube, run_id, tmp_path))
            nodes = raw(kube.core.list_node).get("items") or []
        yield from _gpu_nodes_on(kube, pick_worker_nodes(nodes, 2, override or None), nodes, run_id)


def _fake_workers(kube: Kube, run_id: str, tmp_path: Path) -> AbstractContextManager[list[str]]:
    """Two plain fake nodes (no GPU resources) for a cluster without two usable workers (realk8s), deleted afterwards."""
    workers = NodeSet(prefix=f"{run_id}-worker-", count=2, gpus=0, cpu="8", memory="32Gi")
    return fake_nodes(kube.api_client, workers, tmp_path / "fake-workers.log")


def _gpu_nodes_on(
    kube: Kube, chosen: list[dict[str, Any]], nodes: list[dict[str, Any]], run_id: str
) -> Iterator[GpuNodes]:
    mixed, whole = (name_of(n) for n in chosen)
    original_labels = {name_of(n): labels(n) for n in chosen}
    schedulable = {name_of(n) for n in nodes if not (n.get("spec") or {}).get("unschedulable")}
    touched: list[str] = []
    try:
        roles = ((mixed, MIXED_NODE_FIRST, MIXED_NODE_LABELS), (whole, WHOLE_NODE_RESOURCES, WHOLE_NODE_LABELS))
        for name, resources, node_labels in roles:
            touched.append(name)
            release_compactor_marks(kube.core, raw(kube.core.read_node, name))  # left by an interrupted run on our node
            # first: a crash from here on leaves a recognisable node
            set_labels(kube.core, name, {FAKE_GPU_LABEL: run_id})
            # e.g. the mixed node's whole GPUs, which come later
            stale = [r for r in FAKE_RESOURCES if r not in resources]
            if stale:
                withdraw(kube.core, name, stale)  # leftovers of an earlier, interrupted run
            advertise(kube.core, name, resources)
            set_labels(kube.core, name, {**dict.fromkeys(FAKE_LABEL_KEYS), **node_labels})
        for name, resources in ((mixed, MIXED_NODE_FIRST), (whole, WHOLE_NODE_RESOURCES)):
            wait_for(advertised(kube.core, name, resources), timeout=60, what=f"node {name} to advertise {resources}")
        yield GpuNodes(mixed=mixed, whole=whole, run_id=run_id, schedulable_before=schedulable)
    finally:
        _restore_nodes(kube, touched, original_labels)


def _restore_nodes(kube: Kube, names: list[str], original_labels: dict[str, dict[str, str]]) -> None:
    problems: list[str] = []
    for name in names:
        try:
            node = get_or_none(kube.core.read_node, name)
            if node is None:
                continue
            if release_compactor_marks(kube.core, node):
                warnings.warn(f"node {name} still carried compactor marks at teardown; released them", stacklevel=1)
            withdraw(kube.core, name, FAKE_RESOURCES)
            before = original_labels.get(name, {})
            if FAKE_GPU_LABEL in before:  # the node was left over by an interrupted run: its GPU labels were ours too
                before = {}
            set_labels(kube.core, name, {key: before.get(key) for key in [*FAKE_LABEL_KEYS, FAKE_GPU_LABEL]})
        except Exception as exc:  # keep cleaning the other node
            problems.append(f"node {name}: {exc}")
    if problems:
        raise AssertionError(
            "cleanup of the fake GPU nodes failed (remove the nvidia.com/* capacity by hand):\n" + "\n".join(problems)
        )


@contextmanager
def _fresh_namespace(kube: Kube, name: str, *, force_pods: bool = False) -> Iterator[str]:
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {CREATED_LABEL: "true"}}}
    with_retries(lambda: kube.core.create_namespace(body), what=f"creating namespace {name}", statuses=(429, 500, 503))
    try:
        yield name
    finally:
        _delete_namespace(kube, name, force_pods=force_pods)


@pytest.fixture
def namespace(kube: Kube, gpu_nodes: GpuNodes) -> Iterator[str]:
    """A fresh ``compactor-e2e-<random>`` namespace, deleted (and waited for) before the nodes are cleaned up."""
    with _fresh_namespace(kube, f"compactor-{gpu_nodes.run_id}") as name:
        yield name


@pytest.fixture
def gpu_fleet(kube: Kube, tmp_path: Path) -> Iterator[Fleet]:
    """16 fake H100 nodes (8 GPUs, 64 CPUs, 512Gi each) of this test alone, labelled for its nodeSelector; deleted afterwards."""
    run_id = f"e2e-{secrets.token_hex(3)}"
    nodes = NodeSet(
        prefix=f"{run_id}-gpu-",
        count=FLEET_NODES,
        gpus=FLEET_GPUS_PER_NODE,
        cpu="64",
        memory="512Gi",
        labels={**H100_LABELS, FLEET_LABEL: run_id},
    )
    with fake_nodes(kube.api_client, nodes, tmp_path / "fake-gpu-nodes.log") as names:
        yield Fleet(run_id=run_id, names=names, gpus_per_node=FLEET_GPUS_PER_NODE)


MIG_NODE_LABELS = {
    "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
    "nvidia.com/gpu.count": "1",
    "nvidia.com/gpu.present": "true",
    "nvidia.com/mig.capable": "true",
    "nvidia.com/mig.strategy": "mixed",
    "nvidia.com/mig.config": "all-1g.10gb",
    "nvidia.com/mig.config.state": "success",
}


@pytest.fixture
def mig_fleet(kube: Kube, tmp_path: Path) -> Iterator[Fleet]:
    """Two fake A100-80GB nodes of this test alone, one GPU each cut all-1g.10gb (7 x nvidia.com/mig-1g.10gb)."""
    run_id = f"e2e-{secrets.token_hex(3)}"
    nodes = NodeSet(
        prefix=f"{run_id}-mig-",
        count=2,
        gpus=0,
        cpu="32",
        memory="256Gi",
        labels={**MIG_NODE_LABELS, FLEET_LABEL: run_id},
        resources={"nvidia.com/mig-1g.10gb": "7"},
    )
    with fake_nodes(kube.api_client, nodes, tmp_path / "fake-mig-nodes.log") as names:
        yield Fleet(run_id=run_id, names=names, gpus_per_node=1)


@pytest.fixture
def mig_namespace(kube: Kube, mig_fleet: Fleet) -> Iterator[str]:
    with _fresh_namespace(kube, f"compactor-{mig_fleet.run_id}", force_pods=True) as name:
        yield name


@pytest.fixture
def fleet_namespace(kube: Kube, gpu_fleet: Fleet) -> Iterator[str]:
    """A fresh ``compactor-e2e-<random>`` namespace, deleted (its pods forcibly, then waited for) before the fleet goes."""
    with _fresh_namespace(kube, f"compactor-{gpu_fleet.run_id}", force_pods=True) as name:
        yield name


def _delete_namespace(kube: Kube, name: str, timeout: float = 180, *, force_pods: bool = False) -> None:
    try:
        kube.core.delete_namespace(name, grace_period_seconds=0)
    except ApiException as exc:
        if exc.status == 404:
            return
        raise
    if force_pods:  # no kubelet needed to finish them (a fake one may be gone already)
        for attempt in range(5):  # a busy API server answers a large collection delete with 504 (it goes on deleting)
            try:
                kube.core.delete_collection_namespaced_pod(name, grace_period_seconds=0)
                break
            except ApiException as exc:
                if exc.status == 404:
                    break
                if exc.status not in (429, 500, 503, 504) or attempt == 4:
                    raise
                time.sleep(2)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if get_or_none(kube.core.read_namespace, name) is None:
            return
        time.sleep(2)
    warnings.warn(
        f"namespace {name} still exists {timeout:g}s after its deletion; cleaning the nodes anyway", stacklevel=1
    )

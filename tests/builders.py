"""Cluster-description helpers for tests: raw Kubernetes objects, as ``kubectl -o json`` prints them.

``cluster(node(...), pod(...), pdb(...))`` parses them through the real loader, so
every test also exercises the parser. The same dicts feed the fake cluster.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import yaml

from compactor.model.load import DEFAULT_POOL_LABEL, build_snapshot
from compactor.model.types import Snapshot

_uid = itertools.count(1)

A100_40 = "NVIDIA-A100-SXM4-40GB"
A100_80 = "NVIDIA-A100-SXM4-80GB"
H100_80 = "NVIDIA-H100-80GB-HBM3"


def node(
    name: str,
    *,
    gpus: int = 0,
    mig: dict[str, int] | None = None,
    cpu: str = "64",
    memory: str = "512Gi",
    pods: int = 110,
    product: str | None = None,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    ready: bool = True,
    replicas: int = 1,
    extra: dict[str, str] | None = None,
    physical_gpus: int | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Node; ``gpus`` whole GPUs (times ``replicas`` if time-sliced), ``mig`` profile -> count (mixed strategy)."""
    allocatable: dict[str, str] = {"cpu": cpu, "memory": memory, "pods": str(pods), "ephemeral-storage": "100Gi"}
    node_labels = {"kubernetes.io/hostname": name}
    if gpus or mig:
        node_labels["nvidia.com/gpu.product"] = product or A100_40
        mig_gpus = 0
        if mig:
            node_labels["nvidia.com/mig.strategy"] = "mixed"
            for profile, count in mig.items():
                allocatable["nvidia.com/mig-" + profile.replace("+", ".")] = str(count)
        if gpus:
            allocatable["nvidia.com/gpu"] = str(gpus * replicas)
        if physical_gpus is not None:
            node_labels["nvidia.com/gpu.count"] = str(physical_gpus)
        elif not mig:
            node_labels["nvidia.com/gpu.count"] = str(gpus + mig_gpus)
        if replicas > 1:
            node_labels["nvidia.com/gpu.replicas"] = str(replicas)
            node_labels["nvidia.com/gpu.sharing-strategy"] = "time-slicing"
    node_labels.update(labels or {})
    allocatable.update(extra or {})
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"node-{next(_uid)}",
            "labels": node_labels,
            **({"annotations": annotations} if annotations else {}),
        },
        "spec": spec,
        "status": {
            "allocatable": allocatable,
            "capacity": dict(allocatable),
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(
    name: str,
    *,
    on: str | None = None,
    gpus: int = 0,
    mig: str | None = None,
    cpu: str = "1",
    memory: str = "1Gi",
    namespace: str = "default",
    owner: str | None = "ReplicaSet/app",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    phase: str | None = None,
    priority: int | None = None,
    priority_class: str | None = None,
    tolerations: list[dict[str, str]] | None = None,
    node_selector: dict[str, str] | None = None,
    affinity: dict[str, Any] | None = None,
    volumes: list[dict[str, Any]] | None = None,
    extra_requests: dict[str, str] | None = None,
    deleting: bool = False,
    spread: list[dict[str, Any]] | None = None,
    host_ports: list[int] | None = None,
    scheduler: str | None = None,
    anti_affinity: list[dict[str, Any]] | None = None,
    created: str = "2026-01-01T00:00:00Z",
    ready_since: str | None = None,
    scheduled: str | None = None,
) -> dict[str, Any]:
    """A Pod with one container; bound to ``on`` (Running) or Pending when ``on`` is None.

    ``spread`` is ``spec.topologySpreadConstraints`` as given; ``anti_affinity`` the required pod anti-affinity terms;
    ``host_ports`` TCP ports the container binds on the host; ``scheduled`` the PodScheduled condition's time (with
    ``ready_since``, the pod's start-up).
    """
    requests: dict[str, str] = {"cpu": cpu, "memory": memory}
    limits: dict[str, str] = {}
    if gpus:
        limits["nvidia.com/gpu"] = str(gpus)
    if mig:
        limits["nvidia.com/mig-" + mig.replace("+", ".")] = "1"
    requests.update(extra_requests or {})
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"pod-{next(_uid)}",
        "labels": labels if labels is not None else {"app": (owner or "bare").split("/")[-1]},
        "creationTimestamp": created,
    }
    if annotations:
        meta["annotations"] = annotations
    if owner:
        kind, owner_name = owner.split("/", 1)
        meta["ownerReferences"] = [
            {
                "apiVersion": "batch/v1" if kind == "Job" else "apps/v1",
                "kind": kind,
                "name": owner_name,
                "uid": f"{kind}-{owner_name}",
                "controller": True,
            }
        ]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    container: dict[str, Any] = {
        "name": "main",
        "image": "example",
        "resources": {"requests": requests, "limits": limits},
    }
    if host_ports:
        container["ports"] = [{"containerPort": port, "hostPort": port, "protocol": "TCP"} for port in host_ports]
    spec: dict[str, Any] = {"containers": [container]}
    if anti_affinity is not None:
        affinity = {
            **(affinity or {}),
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": anti_affinity},
        }
    if on:
        spec["nodeName"] = on
    for key, value in (
        ("priority", priority),
        ("priorityClassName", priority_class),
        ("tolerations", tolerations),
        ("nodeSelector", node_selector),
        ("affinity", affinity),
        ("volumes", volumes),
        ("topologySpreadConstraints", spread),
        ("schedulerName", scheduler),
    ):
        if value is not None:
            spec[key] = value
    running = phase or ("Running" if on else "Pending")
    conditions = [
        {
            "type": "Ready",
            "status": "True" if running == "Running" else "False",
            **({"lastTransitionTime": ready_since} if ready_since else {}),
        }
    ]
    if scheduled:
        conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": running, "conditions": conditions},
    }


def job(
    name: str,
    *,
    backoff_limit: int | None = None,
    failed: int = 0,
    ignore_disruptions: bool = False,
    namespace: str = "default",
) -> dict[str, Any]:
    """A batch/v1 Job (its pods: ``pod(..., owner="Job/<name>")``); ``backoff_limit`` None leaves the API's default (6);
    ``ignore_disruptions``: a podFailurePolicy rule that does not count pods failed by a disruption (an eviction)."""
    spec: dict[str, Any] = {"template": {}}
    if backoff_limit is not None:
        spec["backoffLimit"] = backoff_limit
    if ignore_disruptions:
        spec["podFailurePolicy"] = {
            "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]
        }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "uid": f"Job-{name}"},
        "spec": spec,
        "status": {"active": 1, **({"failed": failed} if failed else {})},
    }


def pdb(
    name: str,
    *,
    match: dict[str, str],
    allowed: int = 1,
    namespace: str = "default",
    max_unavailable: int | str | None = 1,
    min_available: int | str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": {"matchLabels": match}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    elif max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace, "uid": f"pdb-{next(_uid)}"},
        "spec": spec,
        "status": {"disruptionsAllowed": allowed, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0},
    }


def pv(name: str, *, on_nodes: list[str] | None = None, zone: str | None = None) -> dict[str, Any]:
    """A PersistentVolume; ``on_nodes`` (a local disk) or ``zone`` (zonal storage) set its node affinity."""
    spec: dict[str, Any] = {"capacity": {"storage": "100Gi"}, "accessModes": ["ReadWriteOnce"]}
    requirement = None
    if on_nodes is not None:
        requirement = {"key": "kubernetes.io/hostname", "operator": "In", "values": on_nodes}
    elif zone is not None:
        requirement = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}
    if requirement is not None:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [requirement]}]}}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "uid": f"pv-{next(_uid)}"},
        "spec": spec,
        "status": {"phase": "Bound"},
    }


def pvc(name: str, *, volume: str | None = None, namespace: str = "default") -> dict[str, Any]:
    """A PersistentVolumeClaim, bound to ``volume`` when given."""
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "100Gi"}}}
    if volume:
        spec["volumeName"] = volume
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": f"pvc-{next(_uid)}"},
        "spec": spec,
        "status": {"phase": "Bound" if volume else "Pending"},
    }


def claim_volume(claim: str) -> list[dict[str, Any]]:
    """``spec.volumes`` mounting one PersistentVolumeClaim."""
    return [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]


def cluster(*objects: dict[str, Any], pool_label: str = DEFAULT_POOL_LABEL) -> Snapshot:
    return build_snapshot(list(objects), source="test", pool_label=pool_label)


def as_list(*objects: dict[str, Any]) -> dict[str, Any]:
    """The v1 List that ``kubectl get ... -o json`` prints."""
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": list(objects)}


def fill_first_policy() -> list[dict[str, Any]]:
    """The fill-first admission policy and its binding as a cluster admin installs them: ``manifests/prevention``."""
    root = Path(__file__).resolve().parents[1] / "manifests"
    return list(yaml.safe_load_all((root / "prevention" / "policy.yaml").read_text(encoding="utf-8")))


def steering_policy(*, binding: bool = True, parameters: bool = True) -> list[dict[str, Any]]:
    """The steering admission policy as a cluster admin installs it: ``manifests/steering`` (policy, binding) and the
    parameter ConfigMap of ``manifests/base``, read from the repository's own manifests."""
    root = Path(__file__).resolve().parents[1] / "manifests"
    policy, bound = yaml.safe_load_all((root / "steering" / "policy.yaml").read_text(encoding="utf-8"))
    config_map = yaml.safe_load((root / "base" / "steering.yaml").read_text(encoding="utf-8"))
    return [policy, *([bound] if binding else []), *([config_map] if parameters else [])]

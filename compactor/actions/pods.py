"""Small readers over raw pod/PDB dicts, shared by the executor and recovery."""

from __future__ import annotations

from typing import Any

from compactor.actions.client import ClusterClient, Obj
from compactor.model.parse import parse_label_selector
from compactor.model.requests import effective_requests
from compactor.model.resources import is_gpu_resource
from compactor.model.scheduling import label_selector_matches


def pod_key(pod: Obj) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"


def controller_uid(pod: Obj) -> str:
    for owner in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if owner.get("controller"):
            return str(owner.get("uid") or f"{owner.get('kind')}/{owner.get('name')}")
    return ""


def is_terminating(pod: Obj) -> bool:
    meta = pod.get("metadata") or {}
    phase = (pod.get("status") or {}).get("phase")
    return bool(meta.get("deletionTimestamp")) or phase in ("Succeeded", "Failed")


def is_ready(pod: Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def requests_gpu(pod: Obj) -> bool:
    try:
        requests = effective_requests(pod.get("spec") or {})
    except Exception:  # a malformed pod from the API still counts as GPU if it names a GPU resource anywhere
        return "nvidia.com/" in str((pod.get("spec") or {}).get("containers"))
    return any(is_gpu_resource(r) for r in requests)


def gpu_pods(pods: list[Obj]) -> list[Obj]:
    """The GPU pods among ``pods`` that still run (not terminating, not finished)."""
    return [p for p in pods if not is_terminating(p) and requests_gpu(p)]


def gpu_pods_on(client: ClusterClient, node: str) -> list[Obj]:
    return gpu_pods(client.list_pods(node_name=node))


def pdbs_selecting(pdbs: list[Obj], pod: Obj) -> list[Obj]:
    meta = pod.get("metadata") or {}
    labels: dict[str, Any] = meta.get("labels") or {}
    namespace = meta.get("namespace", "default")
    found = []
    for pdb in pdbs:
        if (pdb.get("metadata") or {}).get("namespace", "default") != namespace:
            continue
        selector = parse_label_selector(
            (pdb.get("spec") or {}).get("selector"), source="api", obj="pdb", field="spec.selector"
        )
        if label_selector_matches(selector, {str(k): str(v) for k, v in labels.items()}):
            found.append(pdb)
    return found


def grace_seconds(pod: Obj) -> float:
    """How long the evicted pod may take to stop: ``terminationGracePeriodSeconds``, 30 when unset (the API default)."""
    value = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    return float(value) if isinstance(value, int | float) and value >= 0 else 30.0


def is_bound(pod: Obj) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))

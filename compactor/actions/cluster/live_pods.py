"""What the executor and recovery ask of live pods and PDBs, through their typed views (``actions/port/objects.py``)."""

from __future__ import annotations

from compactor.actions.port.client import ClusterClient, Obj
from compactor.actions.port.objects import ObjectView, PodView
from compactor.model.parse import parse_label_selector
from compactor.model.requests import effective_requests
from compactor.model.resources import is_gpu_resource
from compactor.model.scheduling import label_selector_matches


def pod_key(pod: Obj) -> str:
    return PodView(pod).key


def controller_uid(pod: Obj) -> str:
    owner = PodView(pod).controller
    return "" if owner is None else str(owner.get("uid") or f"{owner.get('kind')}/{owner.get('name')}")


def is_terminating(pod: Obj) -> bool:
    return PodView(pod).terminating


def is_ready(pod: Obj) -> bool:
    return PodView(pod).ready


def requests_gpu(pod: Obj) -> bool:
    try:
        requests = effective_requests(PodView(pod).spec)
    except Exception:  # a malformed pod from the API still counts as GPU if it names a GPU resource anywhere
        return "nvidia.com/" in str(PodView(pod).spec.get("containers"))
    return any(is_gpu_resource(r) for r in requests)


def gpu_pods(pods: list[Obj]) -> list[Obj]:
    """The GPU pods among ``pods`` that still run (not terminating, not finished)."""
    return [p for p in pods if not is_terminating(p) and requests_gpu(p)]


def gpu_pods_on(client: ClusterClient, node: str) -> list[Obj]:
    return gpu_pods(client.list_pods(node_name=node))


def pdbs_selecting(pdbs: list[Obj], pod: Obj) -> list[Obj]:
    view = PodView(pod)
    found = []
    for pdb in pdbs:
        budget = ObjectView(pdb)
        if budget.namespace != view.namespace:
            continue
        selector = parse_label_selector(budget.spec.get("selector"), source="api", obj="pdb", field="spec.selector")
        if label_selector_matches(selector, view.labels):
            found.append(pdb)
    return found


def grace_seconds(pod: Obj) -> float:
    """How long the evicted pod may take to stop: ``terminationGracePeriodSeconds``, 30 when unset (the API default)."""
    return PodView(pod).grace_seconds


def is_bound(pod: Obj) -> bool:
    return bool(PodView(pod).node_name)

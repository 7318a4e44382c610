"""The cluster store: ``ClusterStore`` holds the objects (nodes, pods, PDBs, controllers, ConfigMaps, ...) as
API-shaped dicts and keeps their books; ``FakeCluster`` (``cluster.py``) serves them through ``ClusterClient``.
"""

from __future__ import annotations

import itertools
import random
from typing import TYPE_CHECKING, Any

from compactor.actions.port.client import Obj
from compactor.model.parse import parse_label_selector, parse_pod
from compactor.model.resources import Resources
from compactor.model.scheduling import label_selector_matches
from tests.fakecluster.objects import (
    SOURCE,
    STEERING_CONFIGMAP,
    Call,
    Controller,
    _controller_ref,
    _controller_ref_of,
    _key,
    _phase,
    _template,
    _terminating,
)

if TYPE_CHECKING:
    from tests.fakecluster.clock import FakeClock


ADMISSION_KINDS = ("MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding")


class ClusterStore:
    """The in-memory store of API-shaped dicts, and its bookkeeping: loading objects, admitting pods (a controller owner
    made for each), uids and resourceVersions, and the reads every part of the fake makes of it. ``FakeCluster.__init__``
    sets every attribute declared here."""

    time: float
    ready_after: float
    schedule_after: float
    grace_seconds: float
    taint_lag: float
    nodes: dict[str, Obj]
    pods: dict[tuple[str, str], Obj]
    pdbs: dict[tuple[str, str], Obj]
    dra: list[Obj]
    controllers: dict[tuple[str, str, str], Controller]
    state: dict[str, dict[str, str]]
    config_maps: dict[str, Obj]
    admissions: dict[tuple[str, str], Obj]
    deployments: dict[tuple[str, str], Obj]
    deployment_of: dict[tuple[str, str], str]
    autoscalers: list[Obj]
    jobs: dict[tuple[str, str], Obj]
    scale_downs: list[str]
    pinned: list[tuple[str, str]]
    events: list[dict[str, Any]]
    calls: list[Call]
    history: list[Call]
    evicted: list[str]
    violations: list[str]
    clock: FakeClock
    _lost: list[str]
    _pending_since: dict[str, float]
    _bound_at: dict[str, float]
    _deleting_at: dict[str, float]
    _flipped_at: dict[str, float]
    _overrides: dict[tuple[str, str], int]
    _granted: dict[tuple[str, str], list[str]]
    _rng: random.Random
    _uids: itertools.count[int]
    _versions: itertools.count[int]

    def _load(self, obj: Obj) -> None:
        kind = obj.get("kind")
        if kind == "List":
            for item in obj.get("items") or []:
                self._load(item)
        elif kind == "Node":
            self.nodes[obj["metadata"]["name"]] = obj
            self.touch_node(obj["metadata"]["name"])
        elif kind == "Pod":
            self._admit(obj)
        elif kind == "PodDisruptionBudget":
            obj["metadata"].setdefault("namespace", "default")
            obj.setdefault("status", {})
            self.pdbs[_key(obj)] = obj
        elif kind == "ConfigMap" and obj["metadata"]["name"] == STEERING_CONFIGMAP:
            obj["metadata"]["resourceVersion"] = str(next(self._versions))
            self.config_maps[obj["metadata"]["name"]] = obj
        elif kind == "ConfigMap":
            self.state[obj["metadata"]["name"]] = dict(obj.get("data") or {})
        elif kind in ADMISSION_KINDS:
            self.admissions[(kind, obj["metadata"]["name"])] = obj
        elif kind in ("ResourceSlice", "ResourceClaim", "ResourceClaimTemplate", "DeviceClass"):
            self.dra.append(obj)
        elif kind == "Deployment":
            obj["metadata"].setdefault("namespace", "default")
            obj["metadata"]["uid"] = obj["metadata"].get("uid") or self._new_uid()
            self.deployments[(obj["metadata"]["namespace"], obj["metadata"]["name"])] = obj
        elif kind == "ReplicaSet":  # only whom it belongs to: its pods make its controller (``_admit``)
            owner = _controller_ref_of(obj)
            if owner is not None and owner.get("kind") == "Deployment":
                self.deployment_of[(obj["metadata"].get("namespace", "default"), obj["metadata"]["name"])] = str(
                    owner["name"]
                )
        elif kind == "HorizontalPodAutoscaler":
            obj["metadata"].setdefault("namespace", "default")
            self.autoscalers.append(obj)
        elif (
            kind == "Job"
        ):  # its pods make its controller (``_admit``); the Job says when it gives up (``_job_failed``)
            obj["metadata"].setdefault("namespace", "default")
            obj.setdefault("status", {})
            self.jobs[_key(obj)] = obj

    def _new_uid(self) -> str:
        return f"fake-uid-{next(self._uids)}"

    def _admit(self, pod: Obj, *, scale_up: bool = True) -> None:
        meta = pod["metadata"]
        meta["namespace"] = meta.get("namespace") or "default"
        meta["uid"] = meta.get("uid") or self._new_uid()
        if _key(pod) in self.pods:
            raise ValueError(f"pod {_key(pod)} already exists")
        self.pods[_key(pod)] = pod
        self._touch_pod(pod)
        ref = _controller_ref(pod)
        if ref is not None:
            ctl = self.controllers.get(ref)
            if ctl is None:
                ctl = self.controllers[ref] = Controller(*ref, replicas=0, template=_template(pod))
            if scale_up and not _terminating(pod):
                ctl.replicas += 1
                ctl.names.append(meta["name"])
        uid = meta["uid"]
        if _terminating(pod):
            self._deleting_at[uid] = self.time
        elif pod.get("spec", {}).get("nodeName"):
            if _phase(pod) != "Running":
                self._bound_at[uid] = self.time
        elif _phase(pod) == "Pending":
            self._pending_since[uid] = self.time

    def _forget(self, uid: str) -> None:
        for table in (self._pending_since, self._bound_at, self._deleting_at):
            table.pop(uid, None)

    @staticmethod
    def _requests(pod: Obj) -> Resources:
        return parse_pod(pod, source=SOURCE).requests

    def _live(self, ctl: Controller) -> list[Obj]:
        return [
            p
            for p in self.pods.values()
            if _controller_ref(p) == (ctl.kind, ctl.namespace, ctl.name) and not _terminating(p)
        ]

    def _selects(self, pdb: Obj, pod: Obj) -> bool:
        if _key(pdb)[0] != _key(pod)[0]:
            return False
        selector = parse_label_selector(
            (pdb.get("spec") or {}).get("selector"), source=SOURCE, obj=_key(pdb)[1], field="spec.selector"
        )
        return label_selector_matches(selector, pod["metadata"].get("labels") or {})

    def _touch_pod(self, pod: Obj) -> None:
        """A new resourceVersion for the pod, as every write to it (bind, status, patch) gets."""
        pod["metadata"]["resourceVersion"] = str(next(self._versions))

    def touch_node(self, name: str) -> None:
        """A new resourceVersion for the node, as every write to it gets (tests call it after editing ``nodes`` directly)."""
        self.nodes[name].setdefault("metadata", {})["resourceVersion"] = str(next(self._versions))

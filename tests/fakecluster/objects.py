"""What the fake cluster's parts share: the simulated epoch, the constants of the objects it stores, and helpers that
read and write API-shaped dicts (``merge_patch``, ``is_fenced``, owner references, conditions, label selectors).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from compactor.actions.port.annotations import FENCE_TAINT_PREFIX
from compactor.actions.port.client import Obj


def is_fenced(node: Obj) -> bool:
    """The node carries a compactor's ``compactor.io/fence-<installation>`` taint."""
    return any(
        str(t.get("key", "")).startswith(FENCE_TAINT_PREFIX) for t in (node.get("spec") or {}).get("taints") or []
    )


EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
STEERING_CONFIGMAP = "gpu-compactor-steering"  # steering.policy_name's default: policy, binding and parameters
SOURCE = "fakecluster"
CONTROLLER_KINDS = ("ReplicaSet", "StatefulSet", "Job")  # a Job recreates an evicted pod too (while under backoffLimit)
TERMINAL = ("Succeeded", "Failed")
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
T = TypeVar("T")


@dataclass(frozen=True)
class Call:
    method: str
    args: dict[str, Any]
    time: float  # simulated seconds since EPOCH


@dataclass
class Controller:
    kind: str  # ReplicaSet | StatefulSet | Job
    namespace: str
    name: str
    replicas: int
    template: Obj
    names: list[str] = field(default_factory=list)  # the pod names it started with (StatefulSet identities)

    @property
    def ref(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: null deletes a key, objects merge, anything else (lists too) replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _iso(seconds: float) -> str:
    return (EPOCH + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _key(obj: Obj) -> tuple[str, str]:
    meta = obj["metadata"]
    return meta.get("namespace") or "default", meta["name"]


def _phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def _terminating(pod: Obj) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def _ready(pod: Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _set_condition(pod: Obj, type_: str, status: bool) -> None:
    conditions = [c for c in pod.setdefault("status", {}).get("conditions") or [] if c.get("type") != type_]
    pod["status"]["conditions"] = [*conditions, {"type": type_, "status": "True" if status else "False"}]


def _set_unschedulable(pod: Obj, at: str) -> None:
    """As kube-scheduler records a failed attempt: ``PodScheduled`` False, reason ``Unschedulable``, the transition time
    kept while it stays so (the API server's UpdatePodCondition moves it only when status or reason change)."""
    conditions = pod.setdefault("status", {}).get("conditions") or []
    old = next((c for c in conditions if c.get("type") == "PodScheduled"), {})
    if old.get("status") == "False" and old.get("reason") == "Unschedulable":
        return
    pod["status"]["conditions"] = [
        *(c for c in conditions if c.get("type") != "PodScheduled"),
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "lastTransitionTime": at,
            "message": "no node fits the pod (the fake scheduler)",
        },
    ]


def _controller_ref_of(pod: Obj) -> Obj | None:
    return next((ref for ref in pod["metadata"].get("ownerReferences") or [] if ref.get("controller")), None)


def _controller_ref(pod: Obj) -> tuple[str, str, str] | None:
    for ref in pod["metadata"].get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") in CONTROLLER_KINDS:
            return str(ref["kind"]), _key(pod)[0], str(ref["name"])
    return None


def _selects(selector: Obj | None, labels: dict[str, str]) -> bool:
    """A label selector (metav1.LabelSelector) against ``labels``; absent or empty selects everything."""
    selector = selector or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        present = key in labels
        if not {
            "In": present and labels.get(key) in values,
            "NotIn": not present or labels.get(key) not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }[operator]:
            return False
    return True


def _template(pod: Obj) -> Obj:
    template = copy.deepcopy(pod)
    template.pop("status", None)
    template.setdefault("spec", {}).pop("nodeName", None)
    for key in ("uid", "deletionTimestamp", "deletionGracePeriodSeconds", "creationTimestamp", "resourceVersion"):
        template["metadata"].pop(key, None)
    return template

"""The PodDisruptionBudget status the disruption controller writes, for the fake API server.

A real API server only *decrements* ``disruptionsAllowed`` when it grants an eviction (and
records the pod under ``disruptedPods``); kube-controller-manager's disruption controller is
what recomputes the status from the pods and their controllers' scale. Attach a
``DisruptionController`` to a ``FakeApiServer`` and it does the same after every write, so a
budget spent by an eviction comes back once the replacement is Ready, as on a real cluster.

The rules follow pkg/controller/disruption/disruption.go (v1.36):

* ``maxUnavailable`` (int or %) and a percentage ``minAvailable``: ``expectedPods`` is the sum
  of the scale of the pods' controllers (a ReplicaSet owned by a Deployment counts the
  Deployment's replicas); pods without a controller are left out; a controller that cannot be
  found makes the sync fail, and the fail-safe writes ``disruptionsAllowed: 0``;
* an integer ``minAvailable``: ``expectedPods`` is the number of selected pods;
* percentages round up; ``currentHealthy`` counts Ready pods that are neither being deleted nor
  listed in ``disruptedPods`` (an entry lasts until the pod is gone or terminating, or 2 minutes;
  here the 2 minutes are checked at the next write in the namespace, where the real controller
  re-queues the budget for that moment);
* ``disruptionsAllowed = currentHealthy - desiredHealthy``, 0 when negative or when no pod is expected.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

JSON = dict[str, Any]
DELETION_TIMEOUT = timedelta(minutes=2)
_SCALED_KINDS = {"ReplicaSet": "apps/replicasets", "StatefulSet": "apps/statefulsets", "Deployment": "apps/deployments"}


class SyncFailed(Exception):
    pass


def _controller_ref(obj: JSON) -> JSON | None:
    return next(
        (ref for ref in (obj.get("metadata") or {}).get("ownerReferences") or [] if ref.get("controller")), None
    )


def _scaled(value: int | str, total: int) -> int:
    if isinstance(value, int):
        return value
    return math.ceil(int(value.rstrip("%")) * total / 100)


def _ready(pod: JSON) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


class DisruptionController:
    """Recomputes every PodDisruptionBudget's status from the store, as kube-controller-manager does."""

    def __init__(self, now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.now = now

    def sync(
        self,
        store: dict[str, dict[tuple[str, str], JSON]],
        matches: Callable[[JSON | None, dict[str, str]], bool],
        next_rv: Callable[[], str],
        namespaces: Iterable[str] | None = None,
    ) -> None:
        """Recompute the budgets of ``namespaces`` (all when None): those where a write happened."""
        wanted = None if namespaces is None else set(namespaces)
        pods_by_namespace: dict[str, list[JSON]] = {}
        for (namespace, _), pod in store["pods"].items():
            if wanted is None or namespace in wanted:
                pods_by_namespace.setdefault(namespace, []).append(pod)
        indexes = {namespace: _LabelIndex(pods) for namespace, pods in pods_by_namespace.items()}
        for (namespace, _), budget in sorted(store["policy/poddisruptionbudgets"].items()):
            if wanted is not None and namespace not in wanted:
                continue
            selector = (budget.get("spec") or {}).get("selector")
            index = indexes.get(namespace)
            pods = index.select(selector, matches) if index is not None and selector else []
            try:
                status = self._status(budget, pods, lambda ref, ns=namespace: self._scale(store, ns, ref))
            except SyncFailed as failure:
                status = {
                    **(budget.get("status") or {}),
                    "disruptionsAllowed": 0,
                    "conditions": [
                        {
                            "type": "DisruptionAllowed",
                            "status": "False",
                            "reason": "SyncFailed",
                            "message": str(failure),
                        }
                    ],
                }
            if status != budget.get("status"):
                budget["status"] = status
                budget["metadata"]["resourceVersion"] = next_rv()

    def _status(self, budget: JSON, pods: list[JSON], scale: Callable[[JSON], tuple[str, int]]) -> JSON:
        expected, desired = self._expected_and_desired(budget.get("spec") or {}, pods, scale)
        now = self.now()
        disrupted = self._still_disrupted(budget, pods, now)
        healthy = sum(
            1
            for p in pods
            if not p["metadata"].get("deletionTimestamp") and p["metadata"]["name"] not in disrupted and _ready(p)
        )
        allowed = healthy - desired if expected > 0 and healthy > desired else 0
        status: JSON = {
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "expectedPods": expected,
            "disruptionsAllowed": allowed,
            "observedGeneration": budget["metadata"].get("generation", 1),
            "conditions": [
                {
                    "type": "DisruptionAllowed",
                    "status": "True" if allowed > 0 else "False",
                    "reason": "SufficientPods" if allowed > 0 else "InsufficientPods",
                }
            ],
        }
        if disrupted:
            status["disruptedPods"] = disrupted
        return status

    @staticmethod
    def _expected_and_desired(
        spec: JSON, pods: list[JSON], scale: Callable[[JSON], tuple[str, int]]
    ) -> tuple[int, int]:
        if spec.get("maxUnavailable") is not None:
            expected = _controllers_scale(pods, scale)
            return expected, max(0, expected - _scaled(spec["maxUnavailable"], expected))
        if isinstance(spec.get("minAvailable"), int):
            return len(pods), int(spec["minAvailable"])
        if spec.get("minAvailable") is not None:
            expected = _controllers_scale(pods, scale)
            return expected, _scaled(spec["minAvailable"], expected)
        return 0, 0

    @staticmethod
    def _still_disrupted(budget: JSON, pods: Iterable[JSON], now: datetime) -> dict[str, str]:
        recorded = (budget.get("status") or {}).get("disruptedPods") or {}
        return {
            p["metadata"]["name"]: recorded[p["metadata"]["name"]]
            for p in pods
            if not p["metadata"].get("deletionTimestamp")
            and p["metadata"]["name"] in recorded
            and _parse_time(recorded[p["metadata"]["name"]]) + DELETION_TIMEOUT > now
        }

    @staticmethod
    def _scale(store: dict[str, dict[tuple[str, str], JSON]], namespace: str, ref: JSON) -> tuple[str, int]:
        key = _SCALED_KINDS.get(str(ref.get("kind")))
        owner = store[key].get((namespace, str(ref.get("name")))) if key else None
        stale = ref.get("uid") and owner is not None and owner["metadata"].get("uid") not in (None, ref["uid"])
        if owner is None or stale:
            raise SyncFailed(f"found no controllers for {ref.get('kind')} {ref.get('name')}")
        parent = _controller_ref(owner)
        if ref.get("kind") == "ReplicaSet" and parent is not None and parent.get("kind") == "Deployment":
            return DisruptionController._scale(store, namespace, parent)
        return str(owner["metadata"].get("uid") or ref.get("name")), int((owner.get("spec") or {}).get("replicas", 1))


class _LabelIndex:
    """A namespace's pods by label, so a ``matchLabels`` selector costs a set intersection, not a scan."""

    def __init__(self, pods: list[JSON]) -> None:
        self.pods = pods
        self.by_label: dict[tuple[str, str], list[int]] = {}
        for i, pod in enumerate(pods):
            for item in ((pod.get("metadata") or {}).get("labels") or {}).items():
                self.by_label.setdefault(item, []).append(i)

    def select(self, selector: JSON, matches: Callable[[JSON | None, dict[str, str]], bool]) -> list[JSON]:
        match_labels = selector.get("matchLabels") or {}
        if not match_labels:
            return [p for p in self.pods if matches(selector, (p.get("metadata") or {}).get("labels") or {})]
        candidates = set.intersection(*(set(self.by_label.get(item, ())) for item in match_labels.items()))
        return [
            self.pods[i]
            for i in sorted(candidates)
            if matches(selector, (self.pods[i].get("metadata") or {}).get("labels") or {})
        ]


def _controllers_scale(pods: list[JSON], scale: Callable[[JSON], tuple[str, int]]) -> int:
    scales: dict[str, int] = {}
    for pod in pods:
        ref = _controller_ref(pod)
        if ref is not None:
            uid, replicas = scale(ref)
            scales[uid] = replicas
    return sum(scales.values())

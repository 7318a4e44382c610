"""Typed views of the objects the port returns (``ClusterClient``: plain dicts, as the API sends them).

A view reads its object where it is asked, with the API's defaults for what is unset (a missing ``metadata``, a
``null`` list), so the executor says ``PodView(pod).node_name`` rather than digging through ``spec`` by hand each
time. What a pod is doing (bound, terminating, ready, its grace period) is the planner model's own fact
(``compactor.model.pod_facts``), so the executor and the plan never read one pod two ways. Views never copy or change
the object: a patch is still built from the dict.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from compactor.actions.port.client import Obj
from compactor.model.pod_facts import TERMINATED_PHASES, grace_seconds, holds_its_node, is_ready


def _section(obj: Obj, name: str) -> dict[str, Any]:
    value = obj.get(name)
    return value if isinstance(value, dict) else {}


class ObjectView:
    """What every object has: its metadata."""

    __slots__ = ("raw",)

    def __init__(self, raw: Obj) -> None:
        self.raw = raw

    @property
    def metadata(self) -> dict[str, Any]:
        return _section(self.raw, "metadata")

    @property
    def spec(self) -> dict[str, Any]:
        return _section(self.raw, "spec")

    @property
    def status(self) -> dict[str, Any]:
        return _section(self.raw, "status")

    @property
    def name(self) -> str:
        return str(self.metadata.get("name") or "")

    @property
    def namespace(self) -> str:
        """The object's namespace; ``default`` when unset, as the API fills it in for a namespaced object."""
        return str(self.metadata.get("namespace") or "default")

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def uid(self) -> str:
        return str(self.metadata.get("uid") or "")

    @property
    def resource_version(self) -> str | None:
        value = self.metadata.get("resourceVersion")
        return None if value is None else str(value)

    @property
    def labels(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in (self.metadata.get("labels") or {}).items()}

    @property
    def annotations(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in (self.metadata.get("annotations") or {}).items()}

    @property
    def owner_references(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self.metadata.get("ownerReferences") or [] if isinstance(r, dict)]

    @property
    def controller(self) -> dict[str, Any] | None:
        """The owner reference marked ``controller: true`` (the one that recreates the object), or None."""
        return next((r for r in self.owner_references if r.get("controller")), None)

    @property
    def replicas(self) -> int:
        """``spec.replicas`` of a workload (Deployment, ReplicaSet, StatefulSet); 0 when unset."""
        return int(self.spec.get("replicas") or 0)


class PodView(ObjectView):
    """A pod: where it runs and what it is doing."""

    __slots__ = ()

    @property
    def node_name(self) -> str:
        """The node it is bound to; "" while it waits for one."""
        return str(self.spec.get("nodeName") or "")

    @property
    def phase(self) -> str:
        return str(self.status.get("phase") or "")

    @property
    def terminating(self) -> bool:
        """Being deleted (``deletionTimestamp`` set) or finished: on its way out, whatever its node."""
        return bool(self.metadata.get("deletionTimestamp")) or self.phase in TERMINATED_PHASES

    @property
    def holds_its_node(self) -> bool:
        """Bound and not terminated: it uses its node's capacity (``Pod.is_bound`` of the planner's model)."""
        return holds_its_node(self.node_name, self.phase)

    @property
    def ready(self) -> bool:
        conditions = self.status.get("conditions") or []
        return is_ready((c.get("type"), c.get("status")) for c in conditions if isinstance(c, dict))

    @property
    def grace_seconds(self) -> float:
        """How long it may take to stop once evicted (``terminationGracePeriodSeconds``, 30 when unset)."""
        return grace_seconds(self.spec.get("terminationGracePeriodSeconds"))

    @property
    def tolerations(self) -> list[dict[str, Any]]:
        return [dict(t) for t in self.spec.get("tolerations") or [] if isinstance(t, dict)]

    @property
    def scheduler_name(self) -> str:
        return str(self.spec.get("schedulerName") or "default-scheduler")

    @property
    def unschedulable_since(self) -> datetime | None:
        """When its scheduler last found no node for it (the ``PodScheduled`` condition: ``False``, reason
        ``Unschedulable``, its ``lastTransitionTime``); None when it did not, or has not tried yet."""
        for condition in self.status.get("conditions") or []:
            if isinstance(condition, dict) and condition.get("type") == "PodScheduled":
                unschedulable = condition.get("status") == "False" and condition.get("reason") == "Unschedulable"
                return api_time(str(condition.get("lastTransitionTime") or "")) if unschedulable else None
        return None

    @property
    def scheduled_at(self) -> datetime | None:
        """When its scheduler bound it (the ``PodScheduled`` condition ``True``: its ``lastTransitionTime``); None when
        not bound yet, or the condition does not say."""
        for condition in self.status.get("conditions") or []:
            if isinstance(condition, dict) and condition.get("type") == "PodScheduled":
                bound = condition.get("status") == "True"
                return api_time(str(condition.get("lastTransitionTime") or "")) if bound else None
        return None


def api_time(text: str) -> datetime | None:
    """A timestamp as the API writes it (RFC 3339, ``Z``); None when empty or not one."""
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None
    except ValueError:
        return None


def is_waiting(pod: PodView) -> bool:
    """No node holds it yet and it is not finished: what ``list_pending_pods`` lists."""
    return not pod.node_name and pod.phase in ("Pending", "")  # "": as a snapshot without status shows a new pod


class NodeView(ObjectView):
    """A node: its taints and whether an operator cordoned it."""

    __slots__ = ()

    @property
    def taints(self) -> list[dict[str, Any]]:
        return [dict(t) for t in self.spec.get("taints") or [] if isinstance(t, dict)]

    @property
    def unschedulable(self) -> bool:
        """The cordon bit (``spec.unschedulable``), which belongs to operators."""
        return bool(self.spec.get("unschedulable"))

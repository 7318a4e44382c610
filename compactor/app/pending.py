"""The controller's pending trigger: a GPU pod its scheduler has found no node for, for a while, starts a cycle before
the interval is up, since waiting for it is what fragmentation costs. The trigger reads one narrow list (the pods no node
holds: ``ClusterClient.list_pending_pods``) and decides here, on plain data.

It fires for a pod that newly became blocked, never twice for the same pod (a cycle that could not place it will not
place it the next minute either: the interval's cycle tries again), and at most once per ``gap`` after any cycle
began. A GPU pod is one that asks for a GPU or a MIG slice, or holds a DRA claim (whose devices the list cannot tell:
a cycle finds out), of a scheduler the plan may place pods of (``movable.scheduler_names``), not held back by
scheduling gates.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from compactor.actions.cluster.live_pods import requests_gpu
from compactor.actions.cluster.trust import in_scope
from compactor.actions.port.client import Obj
from compactor.actions.port.objects import PodView, is_waiting
from compactor.metrics.figure_types import Figures
from compactor.model.requests import effective_requests
from compactor.model.resources import is_gpu_resource
from compactor.settings.bundles import PlannerSettings


@dataclass(frozen=True)
class Blocked:
    """A GPU pod its scheduler found no node for, and how long ago it first did."""

    key: str
    waited_seconds: float


def blocked_gpu_pods(
    pods: Iterable[Obj],
    now: datetime,
    scheduler_names: Iterable[str],
    *,
    scope: PlannerSettings | None = None,
    largest: Mapping[str, int] | None = None,
) -> list[Blocked]:
    """The GPU pods among ``pods`` that wait for a node after their scheduler found none, longest waiting first. With
    ``scope``, only those of namespaces the planner may place pods of; with ``largest`` (GPU resource -> the most any
    node offers), none that asks more of a GPU resource than any node has: no cycle could place it."""
    schedulers = set(scheduler_names)
    found = []
    for raw in pods:
        pod = PodView(raw)
        since = pod.unschedulable_since
        if (
            since is None
            or not is_waiting(pod)
            or pod.terminating
            or pod.spec.get("schedulingGates")
            or pod.scheduler_name not in schedulers
            or not (requests_gpu(raw) or pod.spec.get("resourceClaims"))
            or (scope is not None and not in_scope(pod.namespace, scope))
            or (largest is not None and _larger_than_any_node(raw, largest))
        ):
            continue
        found.append(Blocked(pod.key, max(0.0, (now - since).total_seconds())))
    return sorted(found, key=lambda b: (-b.waited_seconds, b.key))


def largest_gpu_offers(figures: Figures) -> dict[str, int]:
    """GPU resource -> the most of it any node's allocatable offers (``blocked_gpu_pods``'s ``largest``)."""
    largest: dict[str, int] = {}
    for node in figures.nodes:
        for resource, amount in node.allocatable.items():
            if is_gpu_resource(resource):
                largest[resource] = max(largest.get(resource, 0), amount)
    return largest


def _larger_than_any_node(raw: Obj, largest: Mapping[str, int]) -> bool:
    try:
        requests = effective_requests(PodView(raw).spec)
    except Exception:  # a pod the model cannot read is the cycle's to say, not the trigger's to drop
        return False
    return any(is_gpu_resource(r) and amount > largest.get(r, 0) for r, amount in requests.items())


@dataclass(frozen=True)
class Bound:
    """A pod that started a cycle, bound since: where, and how many seconds after its trigger."""

    key: str
    node: str
    seconds: float


@dataclass
class PendingTrigger:
    """When blocked GPU pods should start a cycle early: after ``after_seconds`` of waiting, at most once per ``gap_seconds``
    after a cycle began, once per pod."""

    after_seconds: float
    gap_seconds: float
    _fired_for: set[str] = field(default_factory=set)
    _fired_at: dict[str, datetime] = field(default_factory=dict)  # pod -> when it started a cycle, until bound or gone

    def due(
        self, blocked: list[Blocked], since_last_cycle: float | None, *, now: datetime | None = None
    ) -> list[Blocked]:
        """The pods that start a cycle now (empty: none); ``since_last_cycle``: seconds since the last cycle ended
        (None: none has). Those returned are remembered: they never start another; with ``now``, so is when they did
        (``bound``)."""
        waiting = {b.key for b in blocked}
        self._fired_for &= waiting  # a pod placed, gone or no longer blocked may start one again if blocked anew
        ready = [b for b in blocked if b.waited_seconds >= self.after_seconds and b.key not in self._fired_for]
        if not ready or (since_last_cycle is not None and since_last_cycle < self.gap_seconds):
            return []
        self._fired_for |= {b.key for b in ready}
        if now is not None:
            for pod in ready:
                self._fired_at.setdefault(pod.key, now)
        return ready

    def bound(self, waiting: Iterable[Obj], read: Callable[[str, str], Obj | None], now: datetime) -> list[Bound]:
        """The pods that started a cycle, no longer among ``waiting`` (the pods no node holds) and bound since, with the
        seconds from their trigger to their binding (their ``PodScheduled`` condition, else ``now``); ``read`` gets one
        pod (namespace, name). A pod gone, or deleted before a node took it, is forgotten."""
        still = {PodView(p).key for p in waiting}
        found = []
        for key in [k for k in self._fired_at if k not in still]:
            pod = read(*key.split("/", 1))  # a failure leaves it remembered: asked again next round
            fired = self._fired_at.pop(key)
            view = PodView(pod) if pod is not None else None
            if view is not None and view.node_name:
                seconds = ((view.scheduled_at or now) - fired).total_seconds()
                found.append(Bound(key, view.node_name, max(0.0, seconds)))
        return found

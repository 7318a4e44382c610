"""Every Event the executor and recovery record, one named constructor each (Karpenter's habit).

An Event is a value here (``Event``); ``Run.event`` sends it, and a failure to send one never
fails a run. The reasons are the API the users alert and filter on (``kubectl get events
--field-selector reason=CompactorAbort``), so they are listed in docs/executor.md and never
written anywhere else.
"""

from __future__ import annotations

from dataclasses import dataclass

from compactor.actions.port.client import ObjectRef


@dataclass(frozen=True)
class Event:
    involved: ObjectRef
    reason: str
    message: str
    type: str = "Normal"


def _node(name: str) -> ObjectRef:
    return ObjectRef("Node", name)


def _pod(key: str) -> ObjectRef:
    namespace, name = key.split("/", 1)
    return ObjectRef("Pod", name, namespace)


def cordoned(node: str, plan: str, fence: str) -> Event:
    """The reason keeps its name (kubectl field selectors and alert routes match it); the fence is a taint of the
    installation's own (``fence``), not the cordon bit."""
    return Event(_node(node), "CompactorCordon", f"fenced by gpu-compactor (taint {fence}:NoSchedule) for plan {plan}")


def evicted(pod: str, node: str, plan: str, why: str) -> Event:
    return Event(_pod(pod), "CompactorEvict", f"evicted from {node} by plan {plan}: {why}")


def surged(pod: str, node: str, plan: str, why: str) -> Event:
    return Event(
        _pod(pod),
        "CompactorSurge",
        f"replacement started before the pod leaves {node} (make-before-break) by plan {plan}: {why}",
    )


def uncordoned(node: str, plan: str, why: str) -> Event:
    """``why``: after the plan, rolled back, opened for a pending pod."""
    return Event(_node(node), "CompactorUncordon", f"{why} (plan {plan})")


def kept_cordoned(node: str, plan: str) -> Event:
    return Event(_node(node), "CompactorKeepCordoned", f"freed by plan {plan}; kept fenced (after_drain: keepCordoned)")


def reserved(node: str, pod: str, until: str, plan: str) -> Event:
    return Event(_node(node), "CompactorReserve", f"reserved for {pod or 'pending pods'} until {until} (plan {plan})")


def aborted(node: str, plan: str, reason: str) -> Event:
    return Event(_node(node), "CompactorAbort", f"plan {plan} aborted: {reason}", "Warning")


def recut_started(node: str, from_config: str, to_config: str, plan: str) -> Event:
    return Event(_node(node), "CompactorMigRecut", f"{from_config} -> {to_config} for plan {plan}")


def recut_failed(node: str, message: str) -> Event:
    return Event(_node(node), "CompactorMigRecutFailed", message, "Warning")


def released(node: str, plan: str) -> Event:
    return Event(_node(node), "CompactorUncordon", f"released by gpu-compactor (plan {plan} no longer active)")


def reservation_expired(node: str, plan: str) -> Event:
    return Event(
        _node(node), "CompactorReservationExpired", f"released by gpu-compactor (plan {plan} no longer active)"
    )


def reservation_lifted(node: str, plan: str, why: str) -> Event:
    return Event(
        _node(node), "CompactorReservationLifted", f"reservation of plan {plan} lifted by gpu-compactor: {why}"
    )


def state_discarded(node: str, plan: str, why: str) -> Event:
    return Event(
        _node(node),
        "CompactorStateDiscarded",
        f"released by gpu-compactor (plan {plan} no longer active); {why}; rolled back by its node marks",
        "Warning",
    )


def steering_failed(pod: str, message: str) -> Event:
    """A steered replacement that did not land where the plan said (the policy not in effect, or its node lost the room)."""
    return Event(_pod(pod), "CompactorSteeringFailed", message, "Warning")


def unpinned_pending(pod: str, node: str, plan: str) -> Event:
    """A pod pinned to ``node`` that cannot bind there, evicted while Pending so that its owner recreates it unpinned."""
    return Event(
        _pod(pod),
        "CompactorUnpin",
        f"pinned to {node} by plan {plan} but cannot bind there; evicted while Pending "
        "so that its owner recreates it unpinned",
    )


def run_summary(namespace: str, config_map: str, message: str, *, failed: bool) -> Event:
    """The end of a ``run --once``, on the ConfigMap that holds its summary (``compactor/last_run.py``): Warning when it failed."""
    return Event(
        ObjectRef("ConfigMap", config_map, namespace), "CompactorRunSummary", message, "Warning" if failed else "Normal"
    )


def breaker_opened(namespace: str, config_map: str, until: str, why: str) -> Event:
    """The circuit breaker paused compaction (``compactor/planner/rules/history.py``), on the ConfigMap that remembers it."""
    return Event(
        ObjectRef("ConfigMap", config_map, namespace),
        "CompactorPaused",
        f"compaction paused until {until}: {why}",
        "Warning",
    )


def breaker_reset(namespace: str, config_map: str, said: str) -> Event:
    """The circuit breaker closed by hand (``compactor breaker reset``), on the ConfigMap that remembers it."""
    return Event(ObjectRef("ConfigMap", config_map, namespace), "CompactorBreakerReset", said)


def state_refused(namespace: str, config_map: str, why: str) -> Event:
    """A state record naming what its plan does not, or outside the planner's scope (``trust.py``): dropped, not acted on."""
    return Event(
        ObjectRef("ConfigMap", config_map, namespace),
        "CompactorStateRefused",
        f"executor state refused and dropped, nothing in it acted on ({why}); nodes released by their own marks",
        "Warning",
    )

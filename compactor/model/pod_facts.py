"""The facts of a pod that both the planner's model (``model/parse.py``, ``Pod``) and the executor's view of a live pod
(``actions/port/objects.py``) ask, defined once so the two never disagree on what a pod is doing."""

from __future__ import annotations

from collections.abc import Iterable

TERMINATED_PHASES = frozenset({"Succeeded", "Failed"})  # a pod in these phases holds nothing on its node any more
DEFAULT_GRACE_SECONDS = 30.0  # terminationGracePeriodSeconds when unset (the API's default)


def holds_its_node(node_name: str | None, phase: str | None) -> bool:
    """Bound to a node and not terminated: its requests use the node's capacity."""
    return bool(node_name) and phase not in TERMINATED_PHASES


def is_ready(conditions: Iterable[tuple[object, object]]) -> bool:
    """Whether the pod's ``Ready`` condition, given as (type, status) pairs, says ``True`` (no condition: not ready)."""
    for kind, status in conditions:
        if kind == "Ready":
            return status == "True"
    return False


def grace_seconds(value: object) -> float:
    """How long an evicted pod may take to stop: its ``terminationGracePeriodSeconds``, the default when unset."""
    return (
        float(value)
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
        else DEFAULT_GRACE_SECONDS
    )

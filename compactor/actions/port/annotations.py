"""The marks the executor leaves on nodes, so any restart can account for every node it touched.

The keys keep the names they had when fences were cordons (``cordoned-by``, ``cordoned-at``, ``after-drain:
keepCordoned``): they are state on the nodes, written by older runs and found by recovery.
"""

from __future__ import annotations

import re
from typing import Any

from compactor.actions.port.objects import NodeView

CORDONED_BY = "compactor.io/cordoned-by"
PLAN_ID = "compactor.io/plan-id"
CORDONED_AT = "compactor.io/cordoned-at"
AFTER_DRAIN = "compactor.io/after-drain"
RESERVED_UNTIL = "compactor.io/reserved-until"
RESERVED_FOR = "compactor.io/reserved-for"
HELD_FOR = "compactor.io/held-for"  # a node fenced for a moment so that this pod binds only on its planned node
IDENTITY = "gpu-compactor"
STATE_CONFIGMAP = "gpu-compactor-state"

MIG_EXPECTED = "compactor.io/mig-expected"  # the GPU resources a re-cut should bring (actions.migmanager)
MIG_RECUT_FAILED = "compactor.io/mig-recut-failed"
MIG_PREVIOUS = "compactor.io/mig-previous"  # the layout a re-cut replaced: what an operator restores after a failure

OUR_ANNOTATIONS = (
    CORDONED_BY,
    PLAN_ID,
    CORDONED_AT,
    AFTER_DRAIN,
    RESERVED_UNTIL,
    RESERVED_FOR,
    HELD_FOR,
    MIG_EXPECTED,
    MIG_RECUT_FAILED,
    MIG_PREVIOUS,
)


FENCE_TAINT_PREFIX = "compactor.io/fence-"  # + the installation: each installation fences with a taint key of its own


def fence_key(identity: str) -> str:
    """The ``NoSchedule`` taint key this installation fences nodes with. Only it ever writes this key, so finding it on a
    node proves the fence is its own; the cordon bit (``spec.unschedulable``) belongs to operators and is never touched."""
    return FENCE_TAINT_PREFIX + identity


def node_annotations(node: dict[str, Any]) -> dict[str, str]:
    return NodeView(node).annotations


def _taints(node: dict[str, Any]) -> list[dict[str, Any]]:
    return NodeView(node).taints


def has_fence(node: dict[str, Any], identity: str) -> bool:
    key = fence_key(identity)
    return any(t.get("key") == key for t in _taints(node))


def is_ours(node: dict[str, Any], identity: str) -> bool:
    """Marked or fenced by this installation (another installation's marks and fences are never ours)."""
    return node_annotations(node).get(CORDONED_BY) == identity or has_fence(node, identity)


def is_unschedulable(node: dict[str, Any]) -> bool:
    return NodeView(node).unschedulable


def without_taints(taints: list[dict[str, Any]], *keys: str) -> list[dict[str, Any]]:
    return [t for t in taints if t.get("key") not in keys]


def fence_patch(node: dict[str, Any], identity: str, plan_id: str, at: str, *, held_for: str = "") -> dict[str, Any]:
    """One merge patch: our fence taint and our marks together, so a crash never leaves one without the other.

    Built from a fresh read (``patching.patch_fresh`` sends its resourceVersion): a merge patch replaces ``spec.taints``
    whole, and every other taint on the node stays as read.
    """
    key = fence_key(identity)
    fence = {"key": key, "value": plan_id, "effect": "NoSchedule"}
    marks = {CORDONED_BY: identity, PLAN_ID: plan_id, CORDONED_AT: at}
    if held_for:
        marks[HELD_FOR] = held_for
    return {"metadata": {"annotations": marks}, "spec": {"taints": [*without_taints(_taints(node), key), fence]}}


def is_held(node: dict[str, Any], identity: str) -> bool:
    return has_fence(node, identity) and bool(node_annotations(node).get(HELD_FOR))


def release_patch(node: dict[str, Any], identity: str, reservation_key: str) -> dict[str, Any] | None:
    """Our fence taint off; our marks and our reservation taint too when the marks are ours (other taints, the cordon
    bit, and another installation's marks stay). None when the node carries nothing of ours."""
    mine = node_annotations(node).get(CORDONED_BY) == identity
    drop = (fence_key(identity), reservation_key) if mine else (fence_key(identity),)
    taints = _taints(node)
    kept = without_taints(taints, *drop)
    patch: dict[str, Any] = {}
    if mine:
        patch["metadata"] = {"annotations": dict.fromkeys(OUR_ANNOTATIONS)}
    if len(kept) != len(taints):
        patch["spec"] = {"taints": kept or None}
    return patch or None


def taint_value(pod: str) -> str:
    """The pod's ``namespace.name`` as a valid taint value (a label value: at most 63 characters, alphanumeric at both ends).

    The full key is in the ``reserved-for`` annotation; a long one is cut here, or the API would refuse the whole patch.
    """
    value = re.sub(r"[^A-Za-z0-9_.-]", ".", pod.replace("/", "."))[:63].strip("-_.")
    return value or "any"


def reservation_patch(
    node: dict[str, Any], identity: str, key: str, *, pod: str, until: str, after_drain: bool = False
) -> dict[str, Any] | None:
    """Our fence swapped for a ``NoSchedule`` taint ``key=<pod>`` (``any`` for no pod) that only pods tolerating it pass,
    with the pod and the deadline marked; ``after_drain``: a freed node kept so (``after_drain: taint``). Built from a fresh
    read, like ``fence_patch``; None when the node is neither fenced nor reserved by this installation (a node hosting
    several pending pods is reserved for each in turn: the taint's value changes, the node never opens between them)."""
    reserved = node_annotations(node).get(CORDONED_BY) == identity and any(t.get("key") == key for t in _taints(node))
    if not (has_fence(node, identity) or reserved):
        return None
    marks = {RESERVED_FOR: pod, RESERVED_UNTIL: until, **({AFTER_DRAIN: "taint"} if after_drain else {})}
    taint = {"key": key, "value": taint_value(pod), "effect": "NoSchedule"}
    return {
        "metadata": {"annotations": marks},
        "spec": {"taints": [*without_taints(_taints(node), key, fence_key(identity)), taint]},
    }


def keep_cordoned_patch() -> dict[str, Any]:
    """``after_drain: keepCordoned``: the fence stays, marked as kept on purpose (recovery leaves it)."""
    return {"metadata": {"annotations": {AFTER_DRAIN: "keepCordoned"}}}

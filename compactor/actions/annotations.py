"""The marks the executor leaves on nodes, so any restart can account for every node it touched."""

from __future__ import annotations

from typing import Any

CORDONED_BY = "compactor.io/cordoned-by"
PLAN_ID = "compactor.io/plan-id"
CORDONED_AT = "compactor.io/cordoned-at"
AFTER_DRAIN = "compactor.io/after-drain"
RESERVED_UNTIL = "compactor.io/reserved-until"
RESERVED_FOR = "compactor.io/reserved-for"
HELD_FOR = "compactor.io/held-for"  # a node cordoned for a moment so that this pod binds only on its planned node
IDENTITY = "gpu-compactor"
STATE_CONFIGMAP = "gpu-compactor-state"

MIG_EXPECTED = "compactor.io/mig-expected"  # the GPU resources a re-cut should bring (actions.migmanager)
MIG_RECUT_FAILED = "compactor.io/mig-recut-failed"

OUR_ANNOTATIONS = (CORDONED_BY, PLAN_ID, CORDONED_AT, AFTER_DRAIN, RESERVED_UNTIL, RESERVED_FOR, HELD_FOR, MIG_EXPECTED, MIG_RECUT_FAILED)


CORDON_TAINT = "node.kubernetes.io/unschedulable"  # added and removed by the node lifecycle controller


def without_taints(taints: list[dict[str, Any]], taint_key: str) -> list[dict[str, Any]]:
    """The taints an uncordon keeps: all but our reservation and the cordon's own taint."""
    return [t for t in taints if t.get("key") not in (taint_key, CORDON_TAINT)]


def node_annotations(node: dict[str, Any]) -> dict[str, str]:
    return dict((node.get("metadata") or {}).get("annotations") or {})


def is_ours(node: dict[str, Any]) -> bool:
    return node_annotations(node).get(CORDONED_BY) == IDENTITY


def is_unschedulable(node: dict[str, Any]) -> bool:
    return bool((node.get("spec") or {}).get("unschedulable"))


def cordon_patch(plan_id: str, at: str) -> dict[str, Any]:
    """One merge patch: cordon and mark together, so a crash never leaves one without the other."""
    return {
        "metadata": {"annotations": {CORDONED_BY: IDENTITY, PLAN_ID: plan_id, CORDONED_AT: at}},
        "spec": {"unschedulable": True},
    }


def hold_patch(plan_id: str, at: str, pod: str) -> dict[str, Any]:
    """Cordon for a moment while ``pod`` binds elsewhere."""
    patch = cordon_patch(plan_id, at)
    patch["metadata"]["annotations"][HELD_FOR] = pod
    return patch


def is_held(node: dict[str, Any]) -> bool:
    return is_ours(node) and bool(node_annotations(node).get(HELD_FOR))


def uncordon_patch(node: dict[str, Any], taint_key: str) -> dict[str, Any]:
    """Uncordon, drop our marks and our reservation taint (other taints stay).

    The node lifecycle controller's ``node.kubernetes.io/unschedulable`` taint reflects the cordon
    being lifted here; it is dropped with it, never written back from the read (the controller
    would remove it again, a moment later).
    """
    patch: dict[str, Any] = {"metadata": {"annotations": dict.fromkeys(OUR_ANNOTATIONS)}, "spec": {"unschedulable": None}}
    taints = (node.get("spec") or {}).get("taints") or []
    kept = without_taints(taints, taint_key)
    if len(kept) != len(taints):
        patch["spec"]["taints"] = kept or None
    return patch

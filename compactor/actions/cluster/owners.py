"""A moved pod's owner and its other pods, read narrowly: by the owner's own label selector, in its namespace.

Finding a replacement means listing the owner's pods before and after the eviction. Listing the
namespace grows with it (a shared ``inference`` namespace may hold thousands of pods); the
owner's ``spec.selector`` matches exactly the pods the owner may adopt, so the list the API server
sends is the workload's pods only (docs/executor.md, "What a move costs").
"""

from __future__ import annotations

from typing import Any

from compactor.actions.cluster.live_pods import controller_uid
from compactor.actions.port.client import ClusterClient, Obj
from compactor.actions.port.objects import ObjectView
from compactor.errors import ClusterError

SELECTOR_KINDS = ("ReplicaSet", "StatefulSet")  # apps/v1 owners whose spec.selector is read
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
FIRST_TO_GO = str(-(2**31))  # the lowest int32: a ReplicaSet scaling down deletes this pod first among its Ready ones


def controller_ref(pod: Obj) -> dict[str, Any] | None:
    return ObjectView(pod).controller


def selector_text(selector: dict[str, Any] | None) -> str:
    """A ``LabelSelector`` object as the API's ``labelSelector`` text: ``a=b,c in (d,e),!f``; "" matches everything."""
    if not selector:
        return ""
    parts = [f"{key}={value}" for key, value in sorted((selector.get("matchLabels") or {}).items())]
    for requirement in selector.get("matchExpressions") or []:
        key, operator, values = (
            requirement.get("key", ""),
            requirement.get("operator", ""),
            sorted(requirement.get("values") or []),
        )
        if operator == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif operator == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif operator == "Exists":
            parts.append(key)
        elif operator == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)


def selector_text_matches(text: str, labels: dict[str, str]) -> bool:
    """Whether ``labels`` match a selector text as ``selector_text`` writes it (``a=b``, ``k in (x,y)``, ``k notin (x)``, ``k``,
    ``!k``, comma-separated); the dry run's reads filter with it as the API server would."""
    for part in _requirements(text):
        if " notin (" in part or " in (" in part:
            key, _, rest = part.partition(" notin (" if " notin (" in part else " in (")
            values = {v.strip() for v in rest.rstrip(")").split(",") if v.strip()}
            inside = labels.get(key.strip()) in values
            if inside == (" notin (" in part):
                return False
        elif "=" in part:
            key, _, value = part.partition("=")
            if labels.get(key.strip()) != value.strip():
                return False
        elif part.startswith("!"):
            if part[1:].strip() in labels:
                return False
        elif part.strip() not in labels:
            return False
    return True


def _requirements(text: str) -> list[str]:
    """``a=b,k in (x,y)`` -> ``["a=b", "k in (x,y)"]``: commas inside parentheses belong to a value list."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return [p.strip() for p in [*parts, current] if p.strip()]


def owner_selector(client: ClusterClient, pod: Obj) -> str:
    """The label selector of ``pod``'s controller (ReplicaSet or StatefulSet), "" when it cannot be read: the caller then
    lists the namespace, which finds the same pods, only less narrowly."""
    ref = controller_ref(pod)
    if ref is None or ref.get("kind") not in SELECTOR_KINDS:
        return ""
    namespace = ObjectView(pod).namespace
    try:
        owner = client.get_owner(namespace, str(ref["kind"]), str(ref.get("name", "")))
    except ClusterError:
        return ""
    if owner is None or ObjectView(owner).uid not in ("", ref.get("uid")):
        return ""
    return selector_text(ObjectView(owner).spec.get("selector"))


def owner_pods(client: ClusterClient, namespace: str, owner: str, selector: str) -> list[Obj]:
    """The pods of controller ``owner`` (uid) in ``namespace``, listed by ``selector`` (the namespace when "")."""
    return [
        p for p in client.list_pods(namespace=namespace, label_selector=selector or None) if controller_uid(p) == owner
    ]

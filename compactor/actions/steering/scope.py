"""Which namespaces the steering policy pins pods in: its ``matchConstraints`` and its binding's ``matchResources``.

kube-apiserver matches a namespaced request against the labels of its namespace. Every namespace carries the immutable
label ``kubernetes.io/metadata.name`` (its name), so a selector on that label alone (``matchLabels``, ``In``, ``NotIn``,
``Exists``, ``DoesNotExist``) says which namespaces by name, and the planner can leave out pods whose replacement the
policy would not pin. A selector on other labels, or an ``objectSelector``, cannot be read that way without listing
namespaces: then the policy is not used (holds instead), and the run says why.
"""

from __future__ import annotations

from typing import Any

from compactor.actions.port.client import Obj
from compactor.actions.port.objects import ObjectView
from compactor.planner.rules.movability import EVERY_NAMESPACE, NamespaceScope

NAME_LABEL = "kubernetes.io/metadata.name"


def scope_of(policy: Obj, binding: Obj) -> NamespaceScope | str:
    """The namespaces both ``policy`` and ``binding`` match, or why they cannot be told by name."""
    scope = EVERY_NAMESPACE
    for kind, obj, field in (("policy", policy, "matchConstraints"), ("binding", binding, "matchResources")):
        match = ObjectView(obj).spec.get(field) or {}
        if match.get("objectSelector") not in (None, {}):
            return f"the steering {kind}'s {field}.objectSelector selects pods by label: which pods it pins is unknown"
        selected = _by_name(match.get("namespaceSelector") or {})
        if isinstance(selected, str):
            return f"the steering {kind}'s {field}.namespaceSelector {selected}: which namespaces it pins pods in is unknown"
        scope = _both(scope, selected)
    return scope


def _by_name(selector: dict[str, Any]) -> NamespaceScope | str:
    scope = EVERY_NAMESPACE
    for key, value in (selector.get("matchLabels") or {}).items():
        if key != NAME_LABEL:
            return f"selects by label {key}"
        scope = _both(scope, NamespaceScope(only=frozenset({str(value)})))
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = (
            expression.get("key"),
            expression.get("operator"),
            frozenset(expression.get("values") or ()),
        )
        if key != NAME_LABEL:
            return f"selects by label {key}"
        term = {
            "In": NamespaceScope(only=values),
            "NotIn": NamespaceScope(never=values),
            "Exists": EVERY_NAMESPACE,
            "DoesNotExist": NamespaceScope(only=frozenset()),
        }.get(str(operator))
        if term is None:
            return f"has operator {operator}"
        scope = _both(scope, term)
    return scope


def _both(a: NamespaceScope, b: NamespaceScope) -> NamespaceScope:
    """The namespaces ``a`` and ``b`` both cover (requirements of a selector are ANDed, as the policy's and binding's)."""
    only = a.only if b.only is None else b.only if a.only is None else a.only & b.only
    never = a.never | b.never
    return NamespaceScope(only=None if only is None else only - never, never=never)

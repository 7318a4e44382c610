"""Scheduler predicates over snapshot types: taints, tolerations, node selectors, node affinity, label selectors.

Semantics follow ``k8s.io/api/core/v1`` ``Toleration.ToleratesTaint``,
``k8s.io/component-helpers/scheduling/corev1/nodeaffinity`` and
``apimachinery/pkg/labels`` exactly (see the tests for each rule).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from compactor.model.types import (
    LabelSelector,
    Node,
    NodeSelectorTerm,
    Pod,
    SelectorRequirement,
    Taint,
    Toleration,
)

HARD_EFFECTS = ("NoSchedule", "NoExecute")


class Ineligible(str, enum.Enum):
    """Why a pod may not be placed on a node (resources aside)."""

    NOT_READY = "node is not Ready"
    UNSCHEDULABLE = "node is cordoned (unschedulable)"
    TAINT = "node has a taint the pod does not tolerate"
    NODE_SELECTOR = "pod's nodeSelector does not match the node"
    NODE_AFFINITY = "pod's required node affinity does not match the node"


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    if toleration.operator in ("Equal", ""):
        return toleration.value == taint.value
    return False


def untolerated_taint(tolerations: tuple[Toleration, ...], taints: tuple[Taint, ...]) -> Taint | None:
    """The first NoSchedule/NoExecute taint no toleration covers, if any."""
    for taint in taints:
        if taint.effect in HARD_EFFECTS and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def _parse_int(value: str) -> int | None:
    try:
        return int(value)
    except ValueError:
        return None


def requirement_matches(req: SelectorRequirement, labels: Mapping[str, str]) -> bool:
    present = req.key in labels
    value = labels.get(req.key, "")
    op = req.operator
    if op == "In":
        return present and value in req.values
    if op == "NotIn":
        return not present or value not in req.values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        if not present or len(req.values) != 1:
            return False
        have, want = _parse_int(value), _parse_int(req.values[0])
        if have is None or want is None:
            return False
        return have > want if op == "Gt" else have < want
    return False


def _term_matches(term: NodeSelectorTerm, node: Node) -> bool:
    # An empty term (no expressions, no fields) matches no objects.
    if not term.match_expressions and not term.match_fields:
        return False
    fields = {"metadata.name": node.name}
    return all(requirement_matches(r, node.labels) for r in term.match_expressions) and all(
        requirement_matches(r, fields) for r in term.match_fields
    )


def node_affinity_matches(terms: tuple[NodeSelectorTerm, ...] | None, node: Node) -> bool:
    """Terms are ORed; ``None`` means no requirement; an empty list matches nothing."""
    if terms is None:
        return True
    return any(_term_matches(term, node) for term in terms)


def node_selector_matches(selector: tuple[tuple[str, str], ...], labels: Mapping[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector)


def why_ineligible(pod: Pod, node: Node, *, ignore_unschedulable: bool = False) -> Ineligible | None:
    """The first rule (resources aside) that keeps ``pod`` off ``node``, or None when it may go there."""
    if not node.ready:
        return Ineligible.NOT_READY
    if node.unschedulable and not ignore_unschedulable:
        return Ineligible.UNSCHEDULABLE
    if untolerated_taint(pod.tolerations, node.taints) is not None:
        return Ineligible.TAINT
    if not node_selector_matches(pod.node_selector, node.labels):
        return Ineligible.NODE_SELECTOR
    if not node_affinity_matches(pod.affinity.required_node_terms, node):
        return Ineligible.NODE_AFFINITY
    return None


def label_selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """``None`` selects nothing (as a PDB without selector); an empty selector selects everything."""
    if selector is None:
        return False
    return all(labels.get(k) == v for k, v in selector.match_labels) and all(
        requirement_matches(r, labels) for r in selector.match_expressions if r.operator in ("In", "NotIn", "Exists", "DoesNotExist")
    )

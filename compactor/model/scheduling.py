"""Scheduler predicates over snapshot types: taints, tolerations, node selectors, node affinity, label selectors.

Semantics follow ``k8s.io/api/core/v1`` ``Toleration.ToleratesTaint``, the scheduler's
NodeUnschedulable plugin, ``k8s.io/component-helpers/scheduling/corev1/nodeaffinity`` and
``apimachinery/pkg/labels`` (``NewRequirement`` validation included: an invalid
requirement makes its node-selector term, or its label selector, select nothing).
One deliberate difference: a NotReady node takes no pods here, whatever they tolerate.
See tests/unit/model/test_scheduling.py for each rule.
"""

from __future__ import annotations

import enum
import re
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
# pkg/scheduler/framework/plugins/nodeunschedulable: a cordoned node still takes pods that tolerate this taint.
UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")


class Ineligible(str, enum.Enum):  # noqa: UP042 - str() and format() of members stay as they are
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


def evicting_taint(tolerations: tuple[Toleration, ...], taints: tuple[Taint, ...]) -> Taint | None:
    """A NoExecute taint the pod tolerates only for ``tolerationSeconds``: the taint manager would evict it again.

    As ``GetMatchingTolerations`` in the taint manager: each NoExecute taint is matched
    by the first toleration that tolerates it, and any of those with seconds bounds the stay.
    """
    for taint in taints:
        if taint.effect != "NoExecute":
            continue
        first = next((t for t in tolerations if tolerates(t, taint)), None)
        if first is not None and first.seconds is not None:
            return taint
    return None


_INT64 = re.compile(r"[+-]?[0-9]+")
# apimachinery/pkg/util/validation: IsValidLabelValue and IsQualifiedName.
_LABEL_NAME = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)"
_LABEL_VALUE = re.compile(rf"{_LABEL_NAME}?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*")
_NAME = re.compile(_LABEL_NAME)
LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
NODE_OPERATORS = (*LABEL_OPERATORS, "Gt", "Lt")


def _parse_int(value: str) -> int | None:
    """``strconv.ParseInt(value, 10, 64)``: ASCII digits with an optional sign, within int64.

    Python's ``int`` also takes ``1_0``, `` 5`` and non-ASCII digits; Go does not.
    """
    if not _INT64.fullmatch(value):
        return None
    number = int(value)
    return number if -(1 << 63) <= number < (1 << 63) else None


def _valid_label_key(key: str) -> bool:
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_NAME.fullmatch(name))


def _valid_label_value(value: str) -> bool:
    return len(value) <= 63 and bool(_LABEL_VALUE.fullmatch(value))


def requirement_is_valid(req: SelectorRequirement, operators: tuple[str, ...] = NODE_OPERATORS) -> bool:
    """Whether ``labels.NewRequirement`` accepts it: known operator, right number of values, valid key and values.

    Kubernetes does not match with an invalid requirement: the node-selector term
    (or the whole label selector) that holds it selects nothing.
    """
    op, values = req.operator, req.values
    if op not in operators or not _valid_label_key(req.key):
        return False
    if op in ("In", "NotIn") and not values:
        return False
    if op in ("Exists", "DoesNotExist") and values:
        return False
    if op in ("Gt", "Lt") and (len(values) != 1 or _parse_int(values[0]) is None):
        return False
    return all(_valid_label_value(v) for v in values)


def requirement_matches(req: SelectorRequirement, labels: Mapping[str, str]) -> bool:
    """``labels.Requirement.Matches`` (validity is checked separately, see ``requirement_is_valid``)."""
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


def _field_matches(req: SelectorRequirement, fields: Mapping[str, str]) -> bool:
    """``nodeSelectorRequirementsAsFieldSelector``: only In/NotIn with exactly one value; a missing field reads as ""."""
    if req.operator not in ("In", "NotIn") or len(req.values) != 1:
        return False
    equal = fields.get(req.key, "") == req.values[0]
    return equal if req.operator == "In" else not equal


def _term_matches(term: NodeSelectorTerm, node: Node) -> bool:
    # An empty term (no expressions, no fields) matches no objects.
    if not term.match_expressions and not term.match_fields:
        return False
    # A term with an invalid requirement fails as a whole (its parse error); other terms still count.
    if not all(requirement_is_valid(r) for r in term.match_expressions):
        return False
    fields = {"metadata.name": node.name}
    return all(requirement_matches(r, node.labels) for r in term.match_expressions) and all(
        _field_matches(r, fields) for r in term.match_fields
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
    if (
        node.unschedulable
        and not ignore_unschedulable
        and not any(tolerates(t, UNSCHEDULABLE_TAINT) for t in pod.tolerations)
    ):
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
    # metav1.LabelSelectorAsSelector fails on an invalid requirement (Gt in a label
    # selector, In without values, ...); the eviction API then treats the PDB as
    # selecting no pod, it does not drop the bad requirement.
    if not all(_valid_label_key(k) and _valid_label_value(v) for k, v in selector.match_labels):
        return False
    if not all(requirement_is_valid(r, LABEL_OPERATORS) for r in selector.match_expressions):
        return False
    return all(labels.get(k) == v for k, v in selector.match_labels) and all(
        requirement_matches(r, labels) for r in selector.match_expressions
    )

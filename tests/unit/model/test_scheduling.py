"""Scheduler predicates: taints and tolerations, nodeSelector, required node affinity, node state, label selectors.

Covers: ``v1.Toleration.ToleratesTaint`` (empty key with Exists, empty effect,
Equal/empty operator, PreferNoSchedule ignored, NoExecute enforced); the
NodeUnschedulable plugin (a cordoned node takes pods tolerating
``node.kubernetes.io/unschedulable``); ``component-helpers`` nodeaffinity (In, NotIn,
Exists, DoesNotExist, Gt/Lt with ``strconv.ParseInt`` semantics, ORed terms, ANDed
expressions, empty and invalid terms, ``matchFields`` on ``metadata.name``); NotReady
nodes; ``metav1.LabelSelectorAsSelector`` for PDBs (None selects nothing, empty selects
everything, invalid selectors select nothing).
"""

from __future__ import annotations

from typing import Any

import pytest

from compactor.model.scheduling import (
    Ineligible,
    label_selector_matches,
    node_affinity_matches,
    requirement_is_valid,
    tolerates,
    untolerated_taint,
    why_ineligible,
)
from compactor.model.types import LabelSelector, NodeSelectorTerm, SelectorRequirement, Taint, Toleration
from tests.builders import cluster, node, pdb, pod


def verdict(node_raw: dict[str, Any], pod_raw: dict[str, Any], **kwargs: bool) -> Ineligible | None:
    snap = cluster(node_raw, pod_raw)
    (loaded_node,), (loaded_pod,) = snap.nodes, snap.pods
    return why_ineligible(loaded_pod, loaded_node, **kwargs)


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)} if values else {"key": key, "operator": operator}


def term(*expressions: dict[str, Any], fields: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if expressions:
        out["matchExpressions"] = list(expressions)
    if fields:
        out["matchFields"] = fields
    return out


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def affinity_allows(labels: dict[str, str], *terms: dict[str, Any], name: str = "n1") -> bool:
    return verdict(node(name, labels=labels), pod("p", affinity=required(*terms))) is None


def taint(key: str, effect: str = "NoSchedule", value: str = "") -> dict[str, str]:
    return {"key": key, "value": value, "effect": effect} if value else {"key": key, "effect": effect}


# --- tolerations -----------------------------------------------------------------------------------------------

GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")


@pytest.mark.parametrize(
    ("toleration", "taint_", "expected"),
    [
        pytest.param(Toleration(operator="Exists"), GPU_TAINT, True, id="exists-empty-key-tolerates-any-key"),
        pytest.param(
            Toleration(operator="Exists"), Taint("x", "y", "NoExecute"), True, id="exists-empty-key-any-effect"
        ),
        pytest.param(
            Toleration(operator="Exists", effect="NoSchedule"),
            Taint("x", "", "NoExecute"),
            False,
            id="exists-empty-key-but-effect-given",
        ),
        pytest.param(Toleration("nvidia.com/gpu", "Exists"), GPU_TAINT, True, id="exists-ignores-value"),
        pytest.param(Toleration("nvidia.com/gpu", "Equal", "present"), GPU_TAINT, True, id="equal-value-matches"),
        pytest.param(Toleration("nvidia.com/gpu", "Equal", "absent"), GPU_TAINT, False, id="equal-value-differs"),
        pytest.param(Toleration("nvidia.com/gpu", "", "present"), GPU_TAINT, True, id="empty-operator-means-equal"),
        pytest.param(Toleration("nvidia.com/gpu", "Equal"), GPU_TAINT, False, id="equal-empty-value-vs-valued-taint"),
        pytest.param(
            Toleration("dedicated", "Equal"), Taint("dedicated", "", "NoSchedule"), True, id="equal-both-empty-values"
        ),
        pytest.param(Toleration("other", "Exists"), GPU_TAINT, False, id="key-differs"),
        pytest.param(Toleration("nvidia.com/gpu", "Exists", effect="NoExecute"), GPU_TAINT, False, id="effect-differs"),
        pytest.param(Toleration("nvidia.com/gpu", "Exists", effect="NoSchedule"), GPU_TAINT, True, id="effect-equal"),
        pytest.param(
            Toleration("nvidia.com/gpu", "Gt", "1"),
            Taint("nvidia.com/gpu", "2", "NoSchedule"),
            False,
            id="unknown-operator-tolerates-nothing",
        ),
    ],
)
def test_tolerations_match_taints_as_v1_toleration_tolerates_taint(
    toleration: Toleration, taint_: Taint, expected: bool
) -> None:
    assert tolerates(toleration, taint_) is expected


def test_prefer_no_schedule_taints_do_not_keep_pods_off() -> None:
    assert untolerated_taint((), (Taint("soft", "", "PreferNoSchedule"),)) is None
    assert verdict(node("n1", taints=[taint("soft", "PreferNoSchedule")]), pod("p")) is None


@pytest.mark.parametrize("effect", ["NoSchedule", "NoExecute"])
def test_no_schedule_and_no_execute_taints_keep_untolerating_pods_off(effect: str) -> None:
    assert verdict(node("n1", taints=[taint("dedicated", effect, "ml")]), pod("p")) is Ineligible.TAINT


def test_one_untolerated_taint_among_tolerated_ones_is_enough_to_keep_a_pod_off() -> None:
    taints = [taint("nvidia.com/gpu", value="present"), taint("dedicated", "NoExecute", "ml")]
    tolerations = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    assert verdict(node("n1", taints=taints), pod("p", tolerations=tolerations)) is Ineligible.TAINT
    assert untolerated_taint(
        (Toleration("nvidia.com/gpu", "Exists"),), (GPU_TAINT, Taint("dedicated", "ml", "NoExecute"))
    ) == Taint("dedicated", "ml", "NoExecute")


def test_a_toleration_without_effect_covers_both_hard_effects() -> None:
    taints = [taint("dedicated", "NoSchedule", "ml"), taint("dedicated", "NoExecute", "ml")]
    tolerations = [{"key": "dedicated", "operator": "Equal", "value": "ml"}]
    assert verdict(node("n1", taints=taints), pod("p", tolerations=tolerations)) is None


def test_a_tolerate_everything_pod_goes_on_any_tainted_node() -> None:
    taints = [taint("a"), taint("b", "NoExecute", "x")]
    assert verdict(node("n1", taints=taints), pod("p", tolerations=[{"operator": "Exists"}])) is None


# --- node state ------------------------------------------------------------------------------------------------


def test_a_not_ready_node_takes_no_pods() -> None:
    assert verdict(node("n1", ready=False), pod("p")) is Ineligible.NOT_READY


def test_not_ready_is_reported_before_cordoned() -> None:
    assert verdict(node("n1", ready=False, unschedulable=True), pod("p")) is Ineligible.NOT_READY


def test_a_cordoned_node_takes_no_ordinary_pods() -> None:
    assert verdict(node("n1", unschedulable=True), pod("p")) is Ineligible.UNSCHEDULABLE


def test_a_cordoned_node_can_be_looked_at_as_if_uncordoned() -> None:
    assert verdict(node("n1", unschedulable=True), pod("p"), ignore_unschedulable=True) is None


@pytest.mark.parametrize(
    "toleration",
    [
        pytest.param(
            {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
            id="daemonset-style",
        ),
        pytest.param({"operator": "Exists"}, id="tolerate-everything"),
    ],
)
def test_a_cordoned_node_still_takes_pods_that_tolerate_the_unschedulable_taint(toleration: dict[str, str]) -> None:
    assert verdict(node("n1", unschedulable=True), pod("p", tolerations=[toleration])) is None


def test_a_node_without_conditions_is_taken_as_ready() -> None:
    raw = node("n1")
    del raw["status"]["conditions"]
    assert verdict(raw, pod("p")) is None


# --- nodeSelector ----------------------------------------------------------------------------------------------


def test_node_selector_needs_every_label_with_the_same_value() -> None:
    labels = {"pool": "a100", "zone": "z1"}
    assert verdict(node("n1", labels=labels), pod("p", node_selector={"pool": "a100", "zone": "z1"})) is None
    assert (
        verdict(node("n1", labels=labels), pod("p", node_selector={"pool": "a100", "zone": "z2"}))
        is Ineligible.NODE_SELECTOR
    )
    assert verdict(node("n1", labels=labels), pod("p", node_selector={"rack": "r1"})) is Ineligible.NODE_SELECTOR


def test_a_node_selector_with_an_empty_value_needs_the_label_present_and_empty() -> None:
    assert verdict(node("n1", labels={"flag": ""}), pod("p", node_selector={"flag": ""})) is None
    assert verdict(node("n1"), pod("p", node_selector={"flag": ""})) is Ineligible.NODE_SELECTOR


def test_node_selector_and_node_affinity_must_both_match() -> None:
    raw = pod("p", node_selector={"pool": "a100"}, affinity=required(term(expr("zone", "In", "z2"))))
    assert verdict(node("n1", labels={"pool": "a100", "zone": "z1"}), raw) is Ineligible.NODE_AFFINITY


# --- node affinity ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("labels", "expression", "expected"),
    [
        pytest.param({"zone": "z1"}, expr("zone", "In", "z1", "z2"), True, id="in-matches"),
        pytest.param({"zone": "z3"}, expr("zone", "In", "z1", "z2"), False, id="in-other-value"),
        pytest.param({}, expr("zone", "In", "z1"), False, id="in-absent-key"),
        pytest.param({"zone": "z3"}, expr("zone", "NotIn", "z1"), True, id="notin-other-value"),
        pytest.param({"zone": "z1"}, expr("zone", "NotIn", "z1"), False, id="notin-listed-value"),
        pytest.param({}, expr("zone", "NotIn", "z1"), True, id="notin-absent-key-matches"),
        pytest.param({"gpu": ""}, expr("gpu", "Exists"), True, id="exists-empty-value"),
        pytest.param({}, expr("gpu", "Exists"), False, id="exists-absent"),
        pytest.param({}, expr("gpu", "DoesNotExist"), True, id="doesnotexist-absent"),
        pytest.param({"gpu": "x"}, expr("gpu", "DoesNotExist"), False, id="doesnotexist-present"),
        pytest.param({"mem": "10"}, expr("mem", "Gt", "9"), True, id="gt-compares-integers-not-strings"),
        pytest.param({"mem": "9"}, expr("mem", "Gt", "9"), False, id="gt-is-strict"),
        pytest.param({"mem": "9"}, expr("mem", "Lt", "10"), True, id="lt-compares-integers"),
        pytest.param({"mem": "10"}, expr("mem", "Lt", "10"), False, id="lt-is-strict"),
        pytest.param({"mem": "007"}, expr("mem", "Gt", "6"), True, id="gt-leading-zeros"),
        pytest.param({}, expr("mem", "Gt", "1"), False, id="gt-absent-key"),
        pytest.param({"mem": "large"}, expr("mem", "Gt", "1"), False, id="gt-non-integer-label"),
        pytest.param({"mem": "1.5"}, expr("mem", "Gt", "1"), False, id="gt-decimal-label"),
        pytest.param({"mem": "1_0"}, expr("mem", "Gt", "5"), False, id="gt-underscore-label-is-not-an-integer-in-go"),
        pytest.param({"mem": "99999999999999999999"}, expr("mem", "Gt", "5"), False, id="gt-label-beyond-int64"),
        pytest.param({"mem": "10"}, expr("mem", "Gt", "x"), False, id="gt-non-integer-bound"),
        pytest.param({"mem": "10"}, expr("mem", "Gt", "1", "2"), False, id="gt-two-bounds"),
        pytest.param({"mem": "10"}, expr("mem", "Gt"), False, id="gt-no-bound"),
        pytest.param({"mem": "10"}, expr("mem", "Gt", "-5"), False, id="gt-negative-bound-is-not-a-label-value"),
        pytest.param({"mem": "\u0665"}, expr("mem", "Lt", "9"), False, id="lt-non-ascii-digit-label"),
        pytest.param({"zone": "z1"}, expr("zone", "NotIn"), False, id="notin-without-values-is-invalid"),
        pytest.param({}, expr("zone", "In"), False, id="in-without-values-is-invalid"),
        pytest.param({"gpu": "x"}, expr("gpu", "Exists", "x"), False, id="exists-with-values-is-invalid"),
        pytest.param({"zone": "z1"}, expr("zone", "Equals", "z1"), False, id="unknown-operator"),
        pytest.param({}, expr("bad key", "DoesNotExist"), False, id="invalid-key"),
    ],
)
def test_node_affinity_expressions_follow_component_helpers(
    labels: dict[str, str], expression: dict[str, Any], expected: bool
) -> None:
    assert affinity_allows(labels, term(expression)) is expected


def test_expressions_in_one_term_are_anded() -> None:
    both = term(expr("zone", "In", "z1"), expr("pool", "In", "a100"))
    assert affinity_allows({"zone": "z1", "pool": "a100"}, both)
    assert not affinity_allows({"zone": "z1", "pool": "h100"}, both)


def test_terms_are_ored() -> None:
    terms = (term(expr("zone", "In", "z1")), term(expr("zone", "In", "z2")))
    assert affinity_allows({"zone": "z2"}, *terms)
    assert not affinity_allows({"zone": "z3"}, *terms)


def test_an_invalid_term_fails_alone_and_other_terms_still_match() -> None:
    terms = (term(expr("mem", "Gt", "lots")), term(expr("zone", "In", "z1")))
    assert affinity_allows({"zone": "z1", "mem": "5"}, *terms)


def test_an_empty_term_matches_no_node() -> None:
    assert not affinity_allows({"zone": "z1"}, term())
    assert affinity_allows({"zone": "z1"}, term(), term(expr("zone", "Exists")))


def test_an_empty_list_of_terms_matches_no_node_and_no_requirement_matches_all() -> None:
    assert verdict(node("n1"), pod("p", affinity=required())) is Ineligible.NODE_AFFINITY
    loaded = cluster(node("n1")).nodes[0]
    assert node_affinity_matches(None, loaded)
    assert not node_affinity_matches((), loaded)


def test_match_fields_select_the_node_by_metadata_name() -> None:
    by_name = term(fields=[expr("metadata.name", "In", "gpu-7")])
    assert affinity_allows({}, by_name, name="gpu-7")
    assert not affinity_allows({}, by_name, name="gpu-8")
    not_name = term(fields=[expr("metadata.name", "NotIn", "gpu-7")])
    assert affinity_allows({}, not_name, name="gpu-8")
    assert not affinity_allows({}, not_name, name="gpu-7")


@pytest.mark.parametrize(
    "field_requirement",
    [
        pytest.param(expr("metadata.name", "In", "gpu-7", "gpu-8"), id="two-values"),
        pytest.param(expr("metadata.name", "Exists"), id="exists"),
        pytest.param(expr("metadata.name", "NotIn"), id="no-value"),
    ],
)
def test_match_fields_accept_only_in_and_notin_with_exactly_one_value(field_requirement: dict[str, Any]) -> None:
    assert not affinity_allows({}, term(fields=[field_requirement]), name="gpu-7")


def test_match_fields_on_another_field_read_it_as_empty() -> None:
    assert not affinity_allows({}, term(fields=[expr("spec.unschedulable", "In", "true")]))
    assert affinity_allows({}, term(fields=[expr("spec.unschedulable", "NotIn", "true")]))


def test_match_fields_and_match_expressions_in_one_term_are_anded() -> None:
    both = term(expr("zone", "In", "z1"), fields=[expr("metadata.name", "In", "gpu-7")])
    assert affinity_allows({"zone": "z1"}, both, name="gpu-7")
    assert not affinity_allows({"zone": "z2"}, both, name="gpu-7")
    assert not affinity_allows({"zone": "z1"}, both, name="gpu-8")


def test_preferred_node_affinity_does_not_restrict_placement() -> None:
    preferred = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": term(expr("zone", "In", "elsewhere"))}
            ]
        }
    }
    assert verdict(node("n1"), pod("p", affinity=preferred)) is None


# --- label selectors (PDB) -------------------------------------------------------------------------------------


def req(key: str, operator: str, *values: str) -> SelectorRequirement:
    return SelectorRequirement(key, operator, values)


def test_no_selector_selects_nothing_and_an_empty_one_selects_everything() -> None:
    assert not label_selector_matches(None, {"app": "x"})
    assert label_selector_matches(LabelSelector(), {"app": "x"})
    assert label_selector_matches(LabelSelector(), {})


def test_match_labels_need_every_pair() -> None:
    selector = LabelSelector(match_labels=(("app", "bert"), ("tier", "train")))
    assert label_selector_matches(selector, {"app": "bert", "tier": "train", "extra": "1"})
    assert not label_selector_matches(selector, {"app": "bert"})


@pytest.mark.parametrize(
    ("requirement", "labels", "expected"),
    [
        pytest.param(req("app", "In", "a", "b"), {"app": "b"}, True, id="in"),
        pytest.param(req("app", "NotIn", "a"), {}, True, id="notin-absent"),
        pytest.param(req("app", "NotIn", "a"), {"app": "a"}, False, id="notin-listed"),
        pytest.param(req("app", "Exists"), {"app": ""}, True, id="exists"),
        pytest.param(req("app", "DoesNotExist"), {"app": "a"}, False, id="doesnotexist"),
    ],
)
def test_match_expressions_follow_labels_requirement(
    requirement: SelectorRequirement, labels: dict[str, str], expected: bool
) -> None:
    assert label_selector_matches(LabelSelector(match_expressions=(requirement,)), labels) is expected


@pytest.mark.parametrize(
    "selector",
    [
        pytest.param(
            LabelSelector(match_expressions=(req("rank", "Gt", "1"),)), id="gt-is-not-a-label-selector-operator"
        ),
        pytest.param(LabelSelector(match_expressions=(req("app", "In"),)), id="in-without-values"),
        pytest.param(LabelSelector(match_expressions=(req("app", "Exists", "x"),)), id="exists-with-values"),
        pytest.param(LabelSelector(match_labels=(("bad key", "x"),)), id="invalid-key"),
        pytest.param(LabelSelector(match_labels=(("app", "not a value"),)), id="invalid-value"),
    ],
)
def test_an_invalid_label_selector_selects_nothing_rather_than_dropping_the_bad_part(selector: LabelSelector) -> None:
    assert not label_selector_matches(selector, {"app": "x", "rank": "5"})


def test_loaded_pdbs_keep_none_and_empty_selectors_apart() -> None:
    without, empty, with_expr = pdb("without", match={}), pdb("empty", match={}), pdb("expr", match={"app": "bert"})
    del without["spec"]["selector"]
    empty["spec"]["selector"] = {}
    with_expr["spec"]["selector"]["matchExpressions"] = [expr("tier", "NotIn", "serve")]
    snap = cluster(without, empty, with_expr)
    by_name = {p.name: p.selector for p in snap.pdbs}
    assert by_name["without"] is None
    assert by_name["empty"] == LabelSelector()
    assert by_name["expr"] == LabelSelector((("app", "bert"),), (req("tier", "NotIn", "serve"),))
    assert label_selector_matches(by_name["expr"], {"app": "bert", "tier": "train"})
    assert not label_selector_matches(by_name["expr"], {"app": "bert", "tier": "serve"})


@pytest.mark.parametrize(
    ("requirement", "valid"),
    [
        pytest.param(req("nvidia.com/gpu.product", "In", "NVIDIA-A100-SXM4-80GB"), True, id="prefixed-key"),
        pytest.param(req("a" * 63, "Exists"), True, id="63-char-name"),
        pytest.param(req("a" * 64, "Exists"), False, id="64-char-name"),
        pytest.param(req("Example.com/x", "Exists"), False, id="uppercase-prefix"),
        pytest.param(req("/x", "Exists"), False, id="empty-prefix"),
        pytest.param(req("x", "In", ""), True, id="empty-value-is-valid"),
        pytest.param(req("x", "In", "a" * 64), False, id="64-char-value"),
        pytest.param(req("x", "Gt", "+5"), False, id="plus-sign-is-not-a-label-value"),
    ],
)
def test_requirement_validity_follows_label_key_and_value_rules(requirement: SelectorRequirement, valid: bool) -> None:
    assert requirement_is_valid(requirement) is valid


def test_node_selector_terms_built_in_code_follow_the_same_rules() -> None:
    loaded = cluster(node("n1", labels={"zone": "z1"})).nodes[0]
    assert node_affinity_matches((NodeSelectorTerm((req("zone", "In", "z1"),)),), loaded)
    assert not node_affinity_matches((NodeSelectorTerm((req("zone", "NotIn"),)),), loaded)

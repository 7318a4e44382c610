"""Which namespaces the steering policy pins pods in, read from its policy and binding (issue [18]: "the policy is limited
to the namespaces the planner may move")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from compactor.actions.steering.scope import scope_of
from compactor.planner.rules.movability import EVERY_NAMESPACE, NamespaceScope
from compactor.settings.origins import load_settings
from tests.builders import steering_policy

NAME = "kubernetes.io/metadata.name"


def policy(selector: dict[str, Any] | None = None, **match: Any) -> dict[str, Any]:
    return {
        "spec": {"matchConstraints": {**({"namespaceSelector": selector} if selector is not None else {}), **match}}
    }


def binding(selector: dict[str, Any] | None = None, **match: Any) -> dict[str, Any]:
    return {"spec": {"matchResources": {**({"namespaceSelector": selector} if selector is not None else {}), **match}}}


def names(operator: str, *values: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": NAME, "operator": operator, "values": list(values)}]}


def test_no_selector_anywhere_pins_in_every_namespace() -> None:
    assert scope_of(policy(), binding()) == EVERY_NAMESPACE
    assert scope_of(policy({}), binding({})) == EVERY_NAMESPACE


def test_not_in_leaves_those_namespaces_out() -> None:
    scope = scope_of(policy(), binding(names("NotIn", "kube-system", "monitoring")))
    assert isinstance(scope, NamespaceScope)
    assert not scope.covers("kube-system") and not scope.covers("monitoring") and scope.covers("team-a")


def test_in_and_match_labels_keep_only_those_namespaces() -> None:
    scope = scope_of(policy(names("In", "team-a", "team-b")), binding({"matchLabels": {NAME: "team-b"}}))
    assert isinstance(scope, NamespaceScope)
    assert scope.covers("team-b") and not scope.covers("team-a") and not scope.covers("default")


def test_the_policy_and_the_binding_both_have_to_match() -> None:
    scope = scope_of(policy(names("In", "team-a", "team-b")), binding(names("NotIn", "team-a")))
    assert isinstance(scope, NamespaceScope)
    assert [n for n in ("team-a", "team-b", "team-c") if scope.covers(n)] == ["team-b"]


def test_exists_covers_all_and_does_not_exist_covers_none() -> None:
    assert scope_of(policy(), binding({"matchExpressions": [{"key": NAME, "operator": "Exists"}]})) == EVERY_NAMESPACE
    nothing = scope_of(policy(), binding({"matchExpressions": [{"key": NAME, "operator": "DoesNotExist"}]}))
    assert isinstance(nothing, NamespaceScope) and not nothing.covers("default")


@pytest.mark.parametrize(
    ("pol", "bind", "said"),
    [
        (
            policy(),
            binding({"matchLabels": {"team": "a"}}),
            "binding's matchResources.namespaceSelector selects by label team",
        ),
        (policy(names("Gt", "1")), binding(), "policy's matchConstraints.namespaceSelector has operator Gt"),
        (policy(), binding(objectSelector={"matchLabels": {"a": "b"}}), "binding's matchResources.objectSelector"),
    ],
)
def test_a_selector_not_by_name_is_said_not_guessed(pol: dict[str, Any], bind: dict[str, Any], said: str) -> None:
    problem = scope_of(pol, bind)
    assert isinstance(problem, str) and said in problem


def test_the_shipped_binding_pins_exactly_where_the_shipped_config_lets_the_planner_move() -> None:
    shipped_policy, shipped_binding, _ = steering_policy()
    scope = scope_of(shipped_policy, shipped_binding)
    assert isinstance(scope, NamespaceScope)
    config = Path(__file__).resolve().parents[3] / "manifests" / "base" / "config.yaml"
    planner = load_settings(str(config)).for_planner
    assert scope.only is None and planner.movable.namespaces == []
    assert scope.never == frozenset(planner.movable.exclude_namespaces)

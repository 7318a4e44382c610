"""Issue 43: the state guard names its namespace and its one writer as literals; an installation moved elsewhere, or run as
another user, meets a guard that guards nothing or refuses its every state write, and neither showed until something
went wrong. A run that acts now reads the guard and who it is first, and says so."""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from compactor.actions.cluster import state_guard
from compactor.actions.cluster.state_guard import STATE_GUARD, GuardMismatch, check_state_guard, judge, read_guard
from tests.fakecluster import FakeCluster
from tests.scenarios.controller import make_controller
from tests.scenarios.steering import node_drained_for_a_pending_pod

SHIPPED = next(
    d
    for d in yaml.safe_load_all(
        (Path(__file__).resolve().parents[3] / "manifests" / "guard" / "state.yaml").read_text(encoding="utf-8")
    )
    if d and d["kind"] == "ValidatingAdmissionPolicy"
)
SERVICE_ACCOUNT = "system:serviceaccount:gpu-compactor:gpu-compactor"


def guard_for(namespace: str, writer: str) -> dict[str, Any]:
    """The shipped guard, edited as an admin moving the installation would edit it."""
    policy = copy.deepcopy(SHIPPED)
    policy["spec"]["matchConditions"] = [
        {"name": "namespace", "expression": f"request.namespace == '{namespace}'"},
        {"name": "not-gpu-compactor", "expression": f"request.userInfo.username != '{writer}'"},
    ]
    return policy


def test_the_shipped_guard_reads_as_the_shipped_installation() -> None:
    guard = read_guard(SHIPPED)
    assert (guard.namespace, guard.writer) == ("gpu-compactor", SERVICE_ACCOUNT)
    assert judge(guard, namespace="gpu-compactor", username=SERVICE_ACCOUNT)[0] == logging.DEBUG


def test_a_guard_of_another_namespace_guards_nothing_here_and_says_so() -> None:
    level, message = judge(read_guard(SHIPPED), namespace="platform-tools", username=SERVICE_ACCOUNT)
    assert level == logging.WARNING
    assert "watches namespace gpu-compactor" in message and "platform-tools" in message


def test_a_run_as_another_user_than_the_guard_admits_fails_before_it_changes_anything(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An operator's kubeconfig (system:admin) against the shipped guard: every state write would be refused; the cycle
    fails at its start, nothing fenced or evicted."""
    c = FakeCluster(node_drained_for_a_pending_pod())
    c.admissions[("ValidatingAdmissionPolicy", STATE_GUARD)] = SHIPPED
    c.advance(70)
    controller = make_controller(c)
    try:
        with caplog.at_level(logging.ERROR):
            assert controller.tick() is None
    finally:
        controller.server.stop()
    assert "lets only system:serviceaccount:gpu-compactor:gpu-compactor write the state" in caplog.text
    assert "this run is system:admin" in caplog.text
    assert not any(call.method in ("evict", "patch_node") for call in c.calls)


def test_the_service_account_under_its_guard_acts_as_before() -> None:
    c = FakeCluster(node_drained_for_a_pending_pod())
    c.admissions[("ValidatingAdmissionPolicy", STATE_GUARD)] = SHIPPED
    c.username = SERVICE_ACCOUNT
    c.advance(70)
    controller = make_controller(c)
    try:
        report = controller.tick()
    finally:
        controller.server.stop()
    assert report is not None and report.run is not None
    assert any(call.method == "evict" for call in c.calls)


def test_without_the_guard_the_warning_is_said_once_per_process(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(state_guard, "_warned_absent", False)
    c = FakeCluster([])
    with caplog.at_level(logging.WARNING, logger="compactor.guards"):
        check_state_guard(c, "gpu-compactor")
        check_state_guard(c, "gpu-compactor")
    assert caplog.text.count("is not installed") == 1
    assert not [call for call in c.calls if call.method == "who_am_i"], "nothing to compare: who it is is not asked"


def test_a_user_the_api_server_cannot_name_is_not_refused() -> None:
    """SelfSubjectReview not served (before v1.28) or refused: the guard's namespace is still checked, the user not."""
    c = FakeCluster([])
    c.admissions[("ValidatingAdmissionPolicy", STATE_GUARD)] = guard_for("gpu-compactor", SERVICE_ACCOUNT)
    c.username = None
    check_state_guard(c, "gpu-compactor")
    c.username = "system:serviceaccount:gpu-compactor:someone-else"
    with pytest.raises(GuardMismatch, match="this run is system:serviceaccount:gpu-compactor:someone-else"):
        check_state_guard(c, "gpu-compactor")

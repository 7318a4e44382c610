"""The finish step (``compactor/actions/steps/finish.py``): each freed node released as ``after_drain`` says
(uncordon, keepCordoned, or taint: the reservation it makes, with a taint value the API server accepts), and the
state deleted, retried through a brownout without turning a done run into a rollback.

Lifting a reservation once it is used, or at its TTL, is ``test_step_reservations.py``.

Against the fake cluster (``tests/fakecluster/``) in simulated time: each scenario is planned by the real
planner, or by hand (``hand_plan``), and carried out by ``Executor`` through the ``ClusterClient`` interface. The
scenarios and helpers (``setup``, ``run``, ``assert_clean``, ...) live in ``tests/scenarios/executor.py``.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from compactor.actions.port import annotations as ann
from compactor.actions.recovery import recover
from compactor.errors import ClusterError
from tests.fakecluster import EPOCH, FakeCluster
from tests.scenarios.executor import (
    PLAN_ID,
    SETTINGS,
    Obj,
    assert_clean,
    events,
    hand_plan,
    involved,
    marks,
    run,
    setup,
    two_freed_nodes,
)


def test_after_drain_uncordon() -> None:
    c, plan = setup()
    run(c, plan)
    assert [involved(e) for e in events(c, "CompactorUncordon")] == ["Node/gpu-2", "Node/gpu-3"]
    assert_clean(c)


def test_after_drain_keep_cordoned_and_recovery_keeps_it() -> None:
    c, plan = setup()
    settings = SETTINGS.amended(after_drain="keepCordoned")
    report = run(c, plan, settings)
    assert report.status == "succeeded" and c.cordoned_nodes() == ["gpu-2", "gpu-3"]
    for name in ("gpu-2", "gpu-3"):
        assert marks(c, name)[ann.AFTER_DRAIN] == "keepCordoned" and marks(c, name)[ann.PLAN_ID] == PLAN_ID
    assert [involved(e) for e in events(c, "CompactorKeepCordoned")] == ["Node/gpu-2", "Node/gpu-3"]
    assert c.state == {}
    recovered = recover(c, settings, c.clock)
    assert recovered.kept == ["gpu-2", "gpu-3"] and not recovered.changed
    assert c.cordoned_nodes() == ["gpu-2", "gpu-3"]


def test_after_drain_taint_reserves_the_freed_nodes_and_the_same_run_lifts_them_at_their_ttl() -> None:
    c, plan = setup()
    foreign = {"key": "dedicated", "value": "ml", "effect": "PreferNoSchedule"}
    c.nodes["gpu-2"]["spec"]["taints"] = [foreign]
    settings = SETTINGS.amended(after_drain="taint", taint_ttl_seconds=300)
    reserved = {"key": "compactor.io/reserved", "value": "any", "effect": "NoSchedule"}
    seen: dict[str, tuple[list[Obj], dict[str, str], float]] = {}
    real_patch = c.patch_node

    def watching(name: str, patch: Obj) -> Obj:
        out = real_patch(name, patch)
        if (patch.get("metadata") or {}).get("annotations", {}).get(ann.AFTER_DRAIN) == "taint":
            seen[name] = (list(out["spec"].get("taints") or []), dict(marks(c, name)), c.clock.monotonic())
        return out

    c.patch_node = watching  # type: ignore[method-assign]
    report = run(c, plan, settings)
    assert report.status == "succeeded" and c.cordoned_nodes() == []
    assert seen["gpu-2"][0] == [foreign, reserved] and seen["gpu-3"][0] == [reserved]
    reserved_at = seen["gpu-3"][2]
    until = (EPOCH + timedelta(seconds=reserved_at + 300)).isoformat().replace("+00:00", "Z")
    assert seen["gpu-3"][1][ann.RESERVED_UNTIL] == until
    # the same run lifted both at their TTL: nothing of the compactor is left, and no recovery was needed
    assert c.clock.monotonic() >= reserved_at + 300
    assert c.nodes["gpu-2"]["spec"]["taints"] == [foreign] and not c.nodes["gpu-3"]["spec"].get("taints")
    assert [(involved(e), "300s are over" in e["message"]) for e in events(c, "CompactorReservationLifted")] == [
        ("Node/gpu-2", True),
        ("Node/gpu-3", True),
    ]
    assert_clean(c)


LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")  # what the API server accepts as a taint value


@pytest.mark.parametrize(
    ("pending", "value"),
    [
        ("default/big-job", "default.big-job"),
        (
            "research-team-gpu-workloads/" + "llm-finetune-" + "x" * 40 + "-7",
            "research-team-gpu-workloads.llm-finetune-" + "x" * 22,
        ),
        ("team-a/" + "job-" + "y" * 53 + "-.-z", "team-a.job-" + "y" * 52),
    ],
)
def test_the_reservation_taint_value_is_one_the_api_server_accepts(pending: str, value: str) -> None:
    c = FakeCluster(two_freed_nodes())
    plan = hand_plan(
        [
            ("default/serve-a", "gpu-2", "gpu-1", "ReplicaSet/serve"),
            ("default/train-a", "gpu-2", "gpu-1", "ReplicaSet/train"),
        ],
        freed=["gpu-2"],
        pending=[(pending, "gpu-2")],
        c=c,
    )
    report = run(c, plan, SETTINGS.amended(after_drain="taint"))
    # the cluster has no such pod
    assert report.status == "partial" and f"pending pod {pending} is gone" in report.reason
    (reservation,) = [
        call.args["patch"]
        for call in c.history
        if call.method == "patch_node"
        and call.args["name"] == "gpu-2"
        and call.args["patch"]["metadata"]["annotations"].get(ann.AFTER_DRAIN) == "taint"
    ]
    (taint,) = reservation["spec"]["taints"]
    assert len(taint["value"]) <= 63 and LABEL_VALUE.fullmatch(taint["value"]) and taint["value"] == value
    # the full name is kept where length does not matter
    assert reservation["metadata"]["annotations"][ann.RESERVED_FOR] == pending
    assert not c.nodes["gpu-2"]["spec"].get("taints"), "the same run lifts the reservation at its TTL"


@pytest.mark.parametrize("outage", [3, 1000], ids=["brownout", "down-for-good"])
def test_a_failing_final_state_delete_is_retried_and_never_turns_a_done_run_into_a_rollback(outage: int) -> None:
    c, plan = setup()
    write_state = c.write_state
    refused: list[int] = []

    def delete_refused(
        name: str, data: dict[str, str] | None
    ) -> None:  # the API server refuses the delete `outage` times
        if data is None and len(refused) < outage:
            refused.append(1)
            raise ClusterError("service unavailable", status=503)
        write_state(name, data)

    c.write_state = delete_refused  # type: ignore[method-assign]
    report = run(c, plan, SETTINGS.amended(release_deadline_seconds=30.0))
    assert report.status == "succeeded", report.reason
    assert events(c, "CompactorAbort") == [] and c.cordoned_nodes() == []
    if outage > 3:
        assert c.state, "the state outlived the run: the next recovery deletes it"
        c.write_state = write_state  # type: ignore[method-assign]  # the API server is back
        recovered = recover(c, SETTINGS, c.clock)
        assert recovered.resumed is not None and recovered.resumed.status == "succeeded"
        assert c.evicted.count(plan.moves[0].pod) == 1  # nothing moved twice
    assert_clean(c)

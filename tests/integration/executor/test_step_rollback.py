"""The rollback step (``compactor/actions/steps/rollback.py``): an aborted run releases its own fences (an
operator's cordon stays), leaves the moves already done where they are, says why in a Warning Event and the log,
retries its releases through a brownout, and leaves its state to recovery when a fence outlasts the deadline.

Against the fake cluster (``tests/fakecluster/``) in simulated time: each scenario is planned by the real
planner, or by hand (``hand_plan``), and carried out by ``Executor`` through the ``ClusterClient`` interface. The
scenarios and helpers (``setup``, ``run``, ``assert_clean``, ...) live in ``tests/scenarios/executor.py``.
"""

from __future__ import annotations

import logging

import pytest

from compactor.actions.recovery import recover
from compactor.errors import ClusterError
from tests.fakecluster import FakeCluster
from tests.scenarios.executor import (
    PLAN_ID,
    SETTINGS,
    assert_clean,
    events,
    hand_plan,
    involved,
    marks,
    on_progress,
    run,
    setup,
    two_freed_nodes,
)


def test_abort_rolls_back_with_an_event_a_log_line_and_a_failed_report(caplog: pytest.LogCaptureFixture) -> None:
    c, plan = setup()
    c.nodes["gpu-3"]["spec"]["unschedulable"] = True  # not ours: must stay
    c.fail_next("evict", 403)
    with caplog.at_level(logging.ERROR, logger="compactor.executor"):
        report = run(c, plan)
    assert report.status == "failed" and "refused (403)" in report.reason
    (abort,) = events(c, "CompactorAbort")
    assert abort["type"] == "Warning" and PLAN_ID in abort["message"] and report.reason in abort["message"]
    (line,) = [r for r in caplog.records if r.name == "compactor.executor" and r.levelno == logging.ERROR]
    assert line.getMessage() == "aborting plan" and line.reason == report.reason and line.plan == PLAN_ID  # type: ignore[attr-defined]
    assert [involved(e) for e in events(c, "CompactorUncordon")] == ["Node/gpu-2", "Node/gpu-3"]
    assert c.cordoned_nodes() == ["gpu-3"] == c.operator_cordons() and marks(c, "gpu-2") == marks(c, "gpu-3") == {}
    assert_clean(c, still_cordoned=("gpu-3",))


def test_rollback_after_some_moves_leaves_the_moved_pods_where_they_are() -> None:
    c, plan = setup()
    progress = on_progress(lambda p: p.done == 2, lambda: c.fail_next("evict", 403))
    report = run(c, plan, progress=progress)
    assert report.status == "failed" and report.moves_done == 2 and len(c.evicted) == 2
    assert c.cordoned_nodes() == [] and c.node_gpu_pods("gpu-2") == [] and len(c.node_gpu_pods("gpu-1")) == 3
    assert_clean(c)


def test_an_abort_without_freed_nodes_still_raises_an_event() -> None:
    objects = two_freed_nodes()
    c = FakeCluster(objects)
    plan = hand_plan([("default/serve-a", "gpu-2", "gpu-1", "ReplicaSet/serve")], freed=[], c=c)
    c.fail_next("evict", 403)
    report = run(c, plan)
    assert report.status == "failed"
    (abort,) = events(c, "CompactorAbort")
    assert abort["type"] == "Warning" and PLAN_ID in abort["message"]
    assert_clean(c)


def test_events_on_abort_name_the_plan() -> None:
    c, plan = setup(scheduler="never")
    run(c, plan)
    reasons = [(e["reason"], involved(e)) for e in c.events]
    assert reasons[-3:] == [
        ("CompactorUncordon", "Node/gpu-2"),
        ("CompactorUncordon", "Node/gpu-3"),
        ("CompactorAbort", "Node/gpu-2"),
    ]
    assert all(PLAN_ID in e["message"] for e in c.events)


@pytest.mark.parametrize("failure", [500, 429, 503, 0], ids=["500", "429", "503", "no-reply"])
def test_a_brownout_during_the_rollback_is_retried_until_every_fence_is_released(failure: int) -> None:
    c, plan = setup()

    def refuse_and_break_the_next_patches() -> (
        None
    ):  # once fenced: the eviction is refused, the API fails the next 4 patches
        c.fail_next("evict", 403)
        c.fail_next("patch_node", ClusterError("brownout", status=failure, retry_after=3.0), times=4)

    started = c.clock.monotonic()
    report = run(
        c, plan, progress=on_progress(lambda p: p.current.startswith("evicting"), refuse_and_break_the_next_patches)
    )
    assert report.status == "failed" and "refused (403)" in report.reason
    assert c.clock.monotonic() - started >= 4 * 3.0  # each retry waited at least as long as the API server asked
    assert_clean(c)  # nothing fenced, no state: the next cycle has nothing to clean up


def test_a_rollback_that_cannot_release_a_fence_by_its_deadline_keeps_the_state_and_recovery_finishes_it() -> None:
    c, plan = setup()
    settings = SETTINGS.amended(release_deadline_seconds=30.0)

    def refuse_and_break_the_patches() -> None:
        c.fail_next("evict", 403)
        c.fail_next("patch_node", 503, times=1000)

    report = run(
        c,
        plan,
        settings,
        progress=on_progress(lambda p: p.current.startswith("evicting"), refuse_and_break_the_patches),
    )
    assert report.status == "failed"
    assert c.cordoned_nodes() == ["gpu-2", "gpu-3"] and c.state, "the state stays while a fence it records is still on"
    c._failures.clear()  # the API server is back
    recovered = recover(c, settings, c.clock)
    assert recovered.resumed is not None and recovered.resumed.status == "failed"
    assert_clean(c)

"""The executor against the fake cluster, in simulated time: cordon first, evict under PDBs, verify, finish or roll back.

Every scenario is planned by the real planner (``build_plan``) from the same raw objects
the fake cluster is loaded with, then carried out by ``Executor`` through the
``ClusterClient`` interface. The fake cluster enforces PDBs on the eviction subresource,
recreates evicted ReplicaSet pods, schedules them and starts them after a delay, so an
executor that skips a wait or a check shows up as a PDB violation, a lost pod, a node
left cordoned or a wrong report.

The scenarios and helpers (``two_freed_nodes``, ``run``, ``assert_clean``, ...) live in
``tests/scenarios/executor.py``, shared with the other executor tests.
"""

from __future__ import annotations

import itertools
import logging
import re
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from compactor.actions import annotations as ann
from compactor.actions.client import EvictionOutcome, EvictionResult
from compactor.actions.clock import Interrupted, StoppableClock
from compactor.actions.executor import Executor, Progress
from compactor.actions.recovery import recover
from compactor.app.carry_out import window_keeper
from compactor.app.plan_document import build_plan
from compactor.errors import ClusterError
from compactor.settings import DisruptionSettings, Settings
from tests.builders import cluster, node, pdb, pod
from tests.fakecluster import EPOCH, Crash, FakeCluster
from tests.scenarios.executor import (
    PLAN_ID,
    PLANNER,
    SETTINGS,
    Obj,
    adds_fence,
    assert_clean,
    events,
    evict_calls,
    hand_plan,
    in_flight,
    intercept_evictions,
    involved,
    make_plan,
    marks,
    on_progress,
    one_freed_node,
    owner_of,
    rs,
    run,
    setup,
    two_freed_nodes,
    writes,
)
from tests.scenarios.steering import spare_node_beside_a_freeable_one

# --------------------------------------------------------------------------- the scenarios themselves


def test_the_scenarios_plan_what_the_tests_assume() -> None:
    plan = make_plan(two_freed_nodes())
    assert sorted(plan.freed_nodes) == ["gpu-2", "gpu-3"] and len(plan.moves) == 4
    assert sorted(m.pod for m in plan.moves) == [
        "default/serve-a",
        "default/serve-b",
        "default/train-a",
        "default/train-b",
    ]
    plan = make_plan(one_freed_node())
    assert plan.freed_nodes == ["gpu-3"] and len(plan.moves) == 3


@pytest.mark.parametrize("scenario", [two_freed_nodes, one_freed_node])
def test_a_plan_runs_to_the_end(scenario: Callable[[], list[Obj]]) -> None:
    c, plan = setup(scenario())
    report = run(c, plan)
    assert (report.status, report.reason) == ("succeeded", "")
    assert (report.moves_done, report.moves_total, report.skipped_moves) == (len(plan.moves), len(plan.moves), [])
    assert sorted(report.freed_nodes) == sorted(plan.freed_nodes) and not report.dry_run
    for name in plan.freed_nodes:
        assert c.node_gpu_pods(name) == []
    assert c.evicted == [m.pod for m in plan.moves]  # in plan order, each exactly once, through the Eviction API
    assert_clean(c)


# --------------------------------------------------------------------------- cordon first


def test_every_freed_node_is_cordoned_and_marked_before_the_first_eviction() -> None:
    c, plan = setup()
    seen: list[dict[str, Any]] = []
    intercept_evictions(c, lambda _ns, _name: seen.append({n: (c.is_fenced(n), marks(c, n)) for n in plan.freed_nodes}))
    assert run(c, plan).status == "succeeded"
    assert len(seen) == 4
    for name in plan.freed_nodes:
        unschedulable, node_marks = seen[0][name]
        assert unschedulable is True
        assert node_marks == {
            ann.CORDONED_BY: "gpu-compactor",
            ann.PLAN_ID: PLAN_ID,
            ann.CORDONED_AT: "2026-01-01T00:00:00Z",
        }
    first_evict = c.history.index(writes(c, "evict")[0])
    cordons = [i for i, call in enumerate(c.history) if call.method == "patch_node" and adds_fence(call.args["patch"])]
    assert [c.history[i].args["name"] for i in cordons] == plan.freed_nodes and max(cordons) < first_evict


def test_the_state_is_written_before_each_cordon() -> None:
    c, plan = setup()
    run(c, plan)
    for name in plan.freed_nodes:
        cordon = next(
            i for i, call in enumerate(c.history) if call.method == "patch_node" and call.args["name"] == name
        )
        ahead = [call for call in c.history[:cordon] if call.method == "write_state"]
        assert ahead and name in ahead[-1].args["data"]["cordoned"] and ahead[-1].args["data"]["planId"] == PLAN_ID


@pytest.mark.parametrize("abort", [False, True], ids=["succeeded", "rolled-back"])
def test_a_node_cordoned_before_the_run_is_never_uncordoned(abort: bool) -> None:
    c, plan = setup()
    c.nodes["gpu-3"]["spec"]["unschedulable"] = True  # an operator's cordon, no marks of ours
    if abort:
        c.fail_next("evict", 403)
    report = run(c, plan)
    # gpu-3 is emptied as planned, but an operator's cordon keeps every pod off it: the cluster shows 8 usable
    # whole-free GPUs of the 16 planned, and the run says so (a freed node counts only when schedulable).
    assert report.status == ("failed" if abort else "partial")
    if not abort:
        assert report.outcome is not None and (report.outcome.freed_gpus, report.outcome.planned_freed_gpus) == (8, 16)
    assert c.operator_cordons() == ["gpu-3"] and marks(c, "gpu-3") == {}  # the fence went, the operator's cordon stayed
    assert not any("unschedulable" in (call.args["patch"].get("spec") or {}) for call in writes(c, "patch_node"))
    assert_clean(c, still_cordoned=("gpu-3",))


# --------------------------------------------------------------------------- eviction API outcomes


def test_evictions_go_through_the_eviction_api_only() -> None:
    c, plan = setup()
    run(c, plan)
    assert {call.method for call in c.history} <= {"patch_node", "evict", "create_event", "write_state"}
    assert [f"{call.args['namespace']}/{call.args['name']}" for call in evict_calls(c)] == [m.pod for m in plan.moves]


def test_429_backs_off_and_checks_again() -> None:
    c, plan = setup()
    first = plan.moves[0].pod
    c.fail_next("evict", 429, times=2)
    report = run(c, plan)
    assert report.status == "succeeded"
    times = [call.time for call in evict_calls(c, first)]
    assert len(times) == 3 and [b - a for a, b in itertools.pairwise(times)] == [1.0, 2.0]  # backoff 1 s, doubled
    assert c.evicted.count(first) == 1
    assert_clean(c)


def test_a_refused_eviction_lets_go_of_its_holds_while_it_waits_to_retry() -> None:
    """Issue 18: a PDB's 429 retried with every rival node still held kept them fenced through the backoff (62 s
    reproduced). The holds go before each wait and are taken again, read afresh, before the retry."""
    objects = spare_node_beside_a_freeable_one()  # gpu-2 and gpu-4 could take serve-a too: held while it moves
    c, plan = FakeCluster(objects), make_plan(objects)
    first = plan.moves[0].pod
    held_while_sleeping: list[tuple[float, list[str]]] = []
    sleep = c.clock.sleep

    def watched(seconds: float) -> None:
        held = sorted(n for n, obj in c.nodes.items() if (obj["metadata"].get("annotations") or {}).get(ann.HELD_FOR))
        held_while_sleeping.append((c.clock.monotonic(), held))
        sleep(seconds)

    c.clock.sleep = watched  # type: ignore[method-assign]
    c.fail_next("evict", 429, times=2)
    assert run(c, plan).status == "succeeded"
    attempts = [call.time for call in evict_calls(c, first)]
    assert len(attempts) == 3
    backoffs = [held for at, held in held_while_sleeping if attempts[0] <= at < attempts[-1]]
    assert backoffs and all(held == [] for held in backoffs), held_while_sleeping
    holds_made = [
        call
        for call in c.history
        if call.method == "patch_node" and call.args["patch"]["metadata"]["annotations"].get(ann.HELD_FOR) == first
    ]
    assert len({call.time for call in holds_made}) == 3  # made afresh before each of the three attempts
    assert_clean(c)


def test_429_that_persists_aborts_after_the_retry_limit() -> None:
    c, plan = setup()
    c.fail_next("evict", 429, times=50)
    report = run(c, plan)
    assert report.status == "failed" and "failed 4 times" in report.reason and "429" in report.reason
    assert len(evict_calls(c)) == 1 + SETTINGS.eviction_retry_limit and c.evicted == []
    assert_clean(c)


def test_backoff_is_bounded() -> None:
    c, plan = setup()
    c.fail_next("evict", 429, times=5)
    settings = SETTINGS.model_copy(update={"backoff_seconds": 1, "backoff_max_seconds": 3, "eviction_retry_limit": 5})
    assert run(c, plan, settings).status == "succeeded"
    times = [call.time for call in evict_calls(c, plan.moves[0].pod)]
    assert [b - a for a, b in itertools.pairwise(times)] == [1.0, 2.0, 3.0, 3.0, 3.0]


def test_404_counts_as_evicted() -> None:
    c, plan = setup()
    first = plan.moves[0].pod
    namespace, name = first.split("/")

    def gone_meanwhile(ns: str, pod_name: str) -> None:
        if (ns, pod_name) == (namespace, name) and (ns, pod_name) in c.pods:
            del c.pods[(ns, pod_name)]  # deleted by someone else between our read and our eviction: the API answers 404

    intercept_evictions(c, gone_meanwhile)
    report = run(c, plan)
    assert report.status == "succeeded" and report.moves_done == 4
    assert len(evict_calls(c, first)) == 1 and first not in c.evicted  # no retry: 404 is success
    assert_clean(c)


@pytest.mark.parametrize(
    "failure",
    [409, 500, 503, EvictionResult(EvictionOutcome.ERROR, 0, "timed out")],
    ids=["409", "500", "503", "timeout"],
)
def test_transient_failures_are_retried(failure: Any) -> None:
    c, plan = setup()
    c.fail_next("evict", failure, times=SETTINGS.eviction_retry_limit)
    report = run(c, plan)
    assert report.status == "succeeded", report.reason
    assert len(evict_calls(c, plan.moves[0].pod)) == SETTINGS.eviction_retry_limit + 1
    assert_clean(c)


@pytest.mark.parametrize(
    "failure", [409, 500, EvictionResult(EvictionOutcome.ERROR, 0, "timed out")], ids=["409", "500", "timeout"]
)
def test_transient_failures_are_retried_a_bounded_number_of_times(failure: Any) -> None:
    c, plan = setup()
    c.fail_next("evict", failure, times=SETTINGS.eviction_retry_limit + 1)
    report = run(c, plan)
    assert report.status == "failed" and f"failed {SETTINGS.eviction_retry_limit + 1} times" in report.reason
    assert len(evict_calls(c)) == SETTINGS.eviction_retry_limit + 1 and c.evicted == []
    assert_clean(c)


@pytest.mark.parametrize("status", [403, 400, 422])
def test_a_refused_eviction_aborts_the_run_at_once(status: int) -> None:
    c, plan = setup()
    c.fail_next("evict", status)
    report = run(c, plan)
    assert report.status == "failed" and f"refused ({status})" in report.reason
    assert len(evict_calls(c)) == 1 and c.evicted == [] and report.moves_done == 0
    assert_clean(c)


# --------------------------------------------------------------------------- one at a time per PDB/owner, bounded overall


def test_one_at_a_time_the_owner_is_whole_before_each_eviction() -> None:
    c, plan = setup()
    broken_at_eviction: list[set[str]] = []
    intercept_evictions(c, lambda _ns, _name: broken_at_eviction.append(in_flight(c)))
    assert run(c, plan).status == "succeeded"
    assert broken_at_eviction == [set()] * 4  # every controller whole (replacement Ready) before the next eviction
    evictions = [call.time for call in evict_calls(c)]
    assert all(b - a >= c.ready_after for a, b in itertools.pairwise(evictions))
    assert_clean(c)


def test_concurrent_evictions_never_two_of_one_owner() -> None:
    c, plan = setup()
    seen: list[tuple[str, set[str]]] = []
    intercept_evictions(c, lambda ns, name: seen.append((owner_of(c, ns, name), in_flight(c))))
    # holds steer one at a time
    settings = SETTINGS.model_copy(update={"max_concurrent_evictions": 2, "steering": "off"})
    assert run(c, plan, settings).status == "succeeded"
    assert len(seen) == 4
    assert all(owner not in busy for owner, busy in seen)  # never a second pod of an owner still being replaced
    assert all(len(busy) <= 1 for _, busy in seen)  # at most 2 in flight with this one
    assert any(busy for _, busy in seen)  # and the width was used: two owners did move at once
    assert_clean(c)


def test_concurrent_evictions_never_two_under_one_pdb() -> None:
    """Two ReplicaSets under one PDB that would allow 2 disruptions: still one eviction at a time in that PDB."""
    c, plan = setup(two_freed_nodes(shared_pdb=True))
    seen: list[set[str]] = []
    intercept_evictions(c, lambda _ns, _name: seen.append(in_flight(c)))
    settings = SETTINGS.model_copy(update={"max_concurrent_evictions": 2})
    report = run(c, plan, settings)
    assert report.status == "succeeded", report.reason
    assert seen == [set()] * 4  # everything the PDB selects was whole at each eviction
    assert_clean(c)


def test_the_per_cycle_cap_bounds_the_evictions() -> None:
    c, plan = setup()
    settings = SETTINGS.model_copy(update={"max_evictions_per_cycle": 2, "after_drain": "keepCordoned"})
    report = run(c, plan, settings)
    assert len(c.evicted) == 2 and c.evicted == [m.pod for m in plan.moves[:2]]
    assert report.moves_done == 2 and report.status == "partial"
    assert "max_evictions_per_cycle" in report.reason
    # gpu-2 lost both its GPU pods and stays cordoned as asked; gpu-3 was not freed and is uncordoned whatever the mode
    assert report.freed_nodes == ["gpu-2"] and c.cordoned_nodes() == ["gpu-2"]
    assert marks(c, "gpu-3") == {} and marks(c, "gpu-2")[ann.AFTER_DRAIN] == "keepCordoned"


def test_a_cap_that_cuts_a_node_in_half_leaves_that_node_untouched_and_the_run_does_not_wait_for_it() -> None:
    c, plan = setup()
    assert [m.from_node for m in plan.moves] == ["gpu-2", "gpu-2", "gpu-3", "gpu-3"]
    report = run(c, plan, SETTINGS.model_copy(update={"max_evictions_per_cycle": 3}))
    assert c.evicted == [m.pod for m in plan.moves[:2]]  # gpu-2 whole; gpu-3's first move alone would free nothing
    assert report.status == "partial" and "max_evictions_per_cycle (3)" in report.reason
    drain_cordons = [
        call
        for call in c.history
        if call.method == "patch_node"
        and call.args["name"] == "gpu-3"
        and adds_fence(call.args["patch"])
        and not call.args["patch"]["metadata"]["annotations"].get(ann.HELD_FOR)
    ]
    assert drain_cordons == []  # held for a moment while gpu-2's pods bound on gpu-1, never cordoned to be drained
    assert report.outcome is not None and (report.outcome.planned_freed_gpus, report.outcome.freed_gpus) == (8, 8)
    assert c.clock.monotonic() < SETTINGS.replacement_timeout_seconds  # no wait for a node this run never drained
    assert_clean(c)


def test_a_plan_a_run_budget_cut_runs_its_whole_nodes_and_the_run_names_the_budget() -> None:
    objects = two_freed_nodes()
    c = FakeCluster(objects)
    plan = build_plan(
        cluster(*objects),
        PLANNER,
        source="test",
        now=EPOCH,
        plan_id=PLAN_ID,
        budgets=DisruptionSettings(max_draining_per_pool=1),
    )
    assert plan.freed_nodes == ["gpu-2"] and plan.held_back.startswith("disruption.max_draining_per_pool (1 of pool")
    report = run(c, plan)
    assert c.evicted == [m.pod for m in plan.moves] and len(c.evicted) == 2
    assert report.status == "partial" and report.reason.startswith("disruption.max_draining_per_pool (1 of pool")
    assert report.reason.endswith("reached; the rest waits for the next run")
    assert marks(c, "gpu-3") == {}  # the node the budget held back was never fenced
    assert_clean(c)


def test_a_cap_smaller_than_every_node_does_nothing_and_says_why() -> None:
    c, plan = setup()
    report = run(c, plan, SETTINGS.model_copy(update={"max_evictions_per_cycle": 1}))
    assert report.status == "failed" and "needs more evictions than max_evictions_per_cycle (1)" in report.reason
    assert c.evicted == [] and c.history == []


# --------------------------------------------------------------------------- verify as you go


def test_a_replacement_landing_on_a_freed_node_aborts_and_rolls_back() -> None:
    c, plan = setup(scheduler="ignore-cordon")
    report = run(c, plan)
    assert report.status == "failed"
    assert "landed on gpu-" in report.reason and "a node this plan frees" in report.reason, report.reason
    assert len(c.evicted) == 1 and report.moves_done == 0  # stopped at the first move
    c.scheduler = "cooperative"
    assert_clean(c)


def test_a_replacement_stuck_pending_aborts_after_the_timeout() -> None:
    c, plan = setup(scheduler="never")
    report = run(c, plan)
    assert report.status == "failed" and "still Pending after 60s" in report.reason
    assert len(c.evicted) == 1 and c.clock.monotonic() >= SETTINGS.replacement_timeout_seconds
    assert c.cordoned_nodes() == [] and c.state == {}
    c.scheduler = "cooperative"  # the pending replacement gets a node eventually: nothing was lost
    assert_clean(c)


def test_a_slow_scheduler_within_the_timeout_is_waited_for() -> None:
    c, plan = setup(scheduler="slow")
    report = run(c, plan)
    assert report.status == "succeeded" and c.clock.monotonic() >= 4 * (10 * c.schedule_after + c.ready_after)
    assert_clean(c)


def test_a_replacement_that_never_gets_ready_aborts() -> None:
    c, plan = setup(ready_after=1000)
    report = run(c, plan)
    assert report.status == "failed" and "still not Ready after 60s" in report.reason
    assert_clean(c)


def test_a_pdb_forced_to_zero_waits_then_aborts() -> None:
    c, plan = setup()
    serve = [m.pod for m in plan.moves if m.owner == "ReplicaSet/serve"]
    progress = on_progress(lambda p: p.done == 1, lambda: c.set_pdb_allowed("default", "serve", 0))
    report = run(c, plan, progress=progress)
    assert report.status == "failed" and "PodDisruptionBudget default/serve allows no disruption" in report.reason
    assert [call for call in evict_calls(c) if f"default/{call.args['name']}" in serve[1:]] == []  # never even asked
    started = writes(c, "evict")[-1].time
    assert c.clock.monotonic() - started >= SETTINGS.replacement_timeout_seconds
    c.set_pdb_allowed("default", "serve", None)
    assert_clean(c)


def test_a_pdb_at_zero_that_recovers_within_the_wait_lets_the_run_go_on() -> None:
    c, plan = setup()
    waits: list[float] = []

    def progress(p: Progress) -> None:
        if p.done == 0 and not waits and not p.waiting:
            c.set_pdb_allowed("default", "serve", 0)
            waits.append(c.time)
        elif "allows no disruption" in p.waiting and c.time - waits[0] >= 10:
            c.set_pdb_allowed("default", "serve", None)

    report = run(c, plan, progress=progress)
    assert report.status == "succeeded" and report.moves_done == 4
    assert evict_calls(c)[0].time >= 10  # it waited for the budget instead of evicting into a 429
    assert_clean(c)


def test_a_new_gpu_pod_on_a_fenced_source_aborts() -> None:
    c, plan = setup()
    intruder = pod("intruder", on="gpu-3", gpus=1, owner=None, labels={"app": "intruder"})
    progress = on_progress(lambda p: "replacement" in p.waiting, lambda: c.add_pod(intruder))
    report = run(c, plan, progress=progress)
    assert report.status == "failed" and report.reason == "new GPU pod default/intruder appeared on fenced node gpu-3"
    assert "default/intruder" not in c.evicted and c.pod("default", "intruder")["spec"]["nodeName"] == "gpu-3"
    assert_clean(c)


def test_a_new_cpu_pod_on_a_cordoned_source_is_no_reason_to_abort() -> None:
    c, plan = setup()
    visitor = pod("visitor", on="gpu-3", owner=None, labels={"app": "visitor"})
    progress = on_progress(lambda p: "replacement" in p.waiting, lambda: c.add_pod(visitor))
    assert run(c, plan, progress=progress).status == "succeeded"
    assert_clean(c)


def test_a_stale_plan_is_refused_before_anything_changes() -> None:
    c, plan = setup()
    c.add_pod(pod("newcomer", on="gpu-2", gpus=1, owner=None, labels={"app": "newcomer"}))
    report = run(c, plan)
    assert report.status == "failed" and "plan is stale" in report.reason and "default/newcomer" in report.reason
    assert writes(c, "patch_node") == [] and writes(c, "evict") == []
    assert_clean(c)


def test_a_node_that_disappeared_makes_the_plan_stale() -> None:
    c, plan = setup()
    del c.nodes["gpu-3"]
    report = run(c, plan)
    assert report.status == "failed" and report.reason == "plan is stale: node gpu-3 no longer exists"
    assert writes(c, "patch_node") == [] and writes(c, "evict") == []


def test_a_planned_pod_already_gone_is_skipped() -> None:
    c, plan = setup()
    gone = plan.moves[0].pod
    del c.pods[tuple(gone.split("/"))]  # type: ignore[arg-type]
    report = run(c, plan)
    assert report.status == "succeeded" and report.skipped_moves == [gone] and report.moves_done == 4
    assert gone not in [f"{x.args['namespace']}/{x.args['name']}" for x in evict_calls(c)]
    assert_clean(c)


# --------------------------------------------------------------------------- abort and roll back


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
    settings = SETTINGS.model_copy(update={"release_deadline_seconds": 30.0})

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


# --------------------------------------------------------------------------- after a node is freed


def test_after_drain_uncordon() -> None:
    c, plan = setup()
    run(c, plan)
    assert [involved(e) for e in events(c, "CompactorUncordon")] == ["Node/gpu-2", "Node/gpu-3"]
    assert_clean(c)


def test_after_drain_keep_cordoned_and_recovery_keeps_it() -> None:
    c, plan = setup()
    settings = SETTINGS.model_copy(update={"after_drain": "keepCordoned"})
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
    settings = SETTINGS.model_copy(update={"after_drain": "taint", "taint_ttl_seconds": 300})
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


def test_a_reservation_is_lifted_as_soon_as_a_pod_tolerating_it_is_bound_there() -> None:
    c, plan = setup()
    settings = SETTINGS.model_copy(update={"after_drain": "taint", "taint_ttl_seconds": 600})
    real_patch = c.patch_node
    trainer = pod(
        "trainer",
        gpus=8,
        owner="ReplicaSet/trainer",
        labels={"app": "trainer"},
        tolerations=[{"key": "compactor.io/reserved", "operator": "Exists", "effect": "NoSchedule"}],
    )
    trainer["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "gpu-3"}

    def reserving(name: str, patch: Obj) -> Obj:
        out = real_patch(name, patch)
        if name == "gpu-3" and (patch.get("metadata") or {}).get("annotations", {}).get(ann.AFTER_DRAIN) == "taint":
            c.add_pod(trainer)  # the job the node was kept for arrives
        return out

    c.patch_node = reserving  # type: ignore[method-assign]
    run(c, plan, settings)
    lifted = {involved(e): e["message"] for e in events(c, "CompactorReservationLifted")}
    assert "default/trainer is bound there" in lifted["Node/gpu-3"] and "600s are over" in lifted["Node/gpu-2"]
    assert c.pod("default", "trainer")["spec"]["nodeName"] == "gpu-3"
    assert_clean(c)


def test_a_run_stopped_while_reservations_wait_leaves_them_to_recovery_at_their_ttl() -> None:
    c, plan = setup()
    settings = SETTINGS.model_copy(update={"after_drain": "taint", "taint_ttl_seconds": 300})
    stop = threading.Event()
    real_patch = c.patch_node

    def stopping(name: str, patch: Obj) -> Obj:
        out = real_patch(name, patch)
        if name == "gpu-3" and (patch.get("metadata") or {}).get("annotations", {}).get(ann.AFTER_DRAIN) == "taint":
            stop.set()  # SIGTERM while the run waits for its reservations to be used
        return out

    c.patch_node = stopping  # type: ignore[method-assign]
    with pytest.raises(Interrupted):
        Executor(c, settings, StoppableClock(c.clock, stop)).execute(plan)
    assert c.state == {}, "every move was done: the state is gone, the reservations are accounted for by their marks"
    early = recover(c, settings, c.clock)
    assert early.kept == ["gpu-2", "gpu-3"] and early.expired == []
    c.advance(301)
    late = recover(c, settings, c.clock)
    assert late.expired == ["gpu-2", "gpu-3"]
    assert [involved(e) for e in events(c, "CompactorReservationExpired")] == ["Node/gpu-2", "Node/gpu-3"]
    assert_clean(c)


def test_a_resumed_run_does_not_fence_again_a_node_whose_fence_an_operator_lifted_while_it_was_stopped() -> None:
    c, plan = setup()
    first = plan.moves[0]

    def die(
        namespace: str, name: str
    ) -> None:  # the process dies as its first eviction goes out: every fence is placed
        raise Crash("evict", "before")

    intercept_evictions(c, die)
    with pytest.raises(Crash):
        run(c, plan)
    assert sorted(n for n in c.nodes if c.is_fenced(n)) == ["gpu-2", "gpu-3"]
    lifted = first.from_node  # the operator needs that node open: kubectl taint node gpu-2 compactor.io/fence-...-
    c.nodes[lifted]["spec"]["taints"] = [
        t for t in c.nodes[lifted]["spec"]["taints"] if not t["key"].startswith("compactor.io/fence-")
    ]
    c.touch_node(lifted)
    c.evict = FakeCluster.evict.__get__(c)  # type: ignore[method-assign]  # the process is back
    recovered = recover(c, SETTINGS, c.clock)
    assert recovered.resumed is not None and recovered.resumed.status == "partial", recovered.resumed
    assert f"the fence on {lifted} was lifted by someone else" in recovered.resumed.reason
    assert not c.is_fenced(lifted), "fenced again after an operator lifted the fence"
    assert not [
        call
        for call in c.history
        if call.method == "evict"
        and call.args["name"] in {m.pod.split("/")[1] for m in plan.moves if m.from_node == lifted}
    ], "a pod of the node left open was evicted"
    assert c.cordoned_nodes() == [] and c.state == {}


# --------------------------------------------------------------------------- events


def test_events_on_each_cordon_eviction_and_uncordon_name_the_plan() -> None:
    c, plan = setup()
    run(c, plan)
    assert [(e["reason"], involved(e)) for e in c.events] == [
        ("CompactorCordon", "Node/gpu-2"),
        ("CompactorCordon", "Node/gpu-3"),
        *[("CompactorEvict", f"Pod/{m.pod}") for m in plan.moves],
        ("CompactorUncordon", "Node/gpu-2"),
        ("CompactorUncordon", "Node/gpu-3"),
    ]
    assert all(PLAN_ID in e["message"] and e["type"] == "Normal" for e in c.events)


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


def test_a_failing_event_never_fails_the_run() -> None:
    c, plan = setup()
    c.fail_next("create_event", 500, times=3)
    assert run(c, plan).status == "succeeded"
    assert_clean(c)


def test_progress_is_reported() -> None:
    c, plan = setup()
    seen: list[Progress] = []
    run(c, plan, progress=seen.append)
    assert seen[-1] == Progress(PLAN_ID, 4, 4, "done")
    assert [p.done for p in seen] == sorted(p.done for p in seen)
    assert any("replacement" in p.waiting for p in seen)


def test_nothing_to_do() -> None:
    c = FakeCluster(two_freed_nodes())
    plan = hand_plan([], freed=[], c=c)
    report = run(c, plan)
    assert report.status == "nothing-to-do" and c.history == []


def test_a_statefulset_pod_is_replaced_under_its_own_name() -> None:
    objects = [
        node("gpu-1", gpus=8),
        node("gpu-2", gpus=8),
        pod("pinned", on="gpu-1", gpus=4, owner=None),
        rs("db-0", "gpu-2", "db", kind="StatefulSet"),
        rs("db-1", "gpu-2", "db", kind="StatefulSet"),
        pdb("db", match={"app": "db"}, max_unavailable=1),
    ]
    c = FakeCluster(objects)
    plan = hand_plan(
        [("default/db-0", "gpu-2", "gpu-1", "StatefulSet/db"), ("default/db-1", "gpu-2", "gpu-1", "StatefulSet/db")],
        freed=["gpu-2"],
        c=c,
    )
    report = run(c, plan)
    assert report.status == "succeeded", report.reason
    assert (
        c.pod("default", "db-0")["spec"]["nodeName"] == "gpu-1"
        and c.pod("default", "db-1")["spec"]["nodeName"] == "gpu-1"
    )
    assert c.evicted == ["default/db-0", "default/db-1"]
    assert_clean(c)


def test_a_new_gpu_pod_on_a_source_cordoned_by_someone_else_aborts_too() -> None:
    c, plan = setup()
    c.nodes["gpu-3"]["spec"]["unschedulable"] = True  # the operator's cordon: not ours, but still a node the plan frees
    intruder = pod("intruder", on="gpu-3", gpus=1, owner=None, labels={"app": "intruder"})
    progress = on_progress(lambda p: "replacement" in p.waiting, lambda: c.add_pod(intruder))
    report = run(c, plan, progress=progress)
    assert report.status == "failed" and report.reason == "new GPU pod default/intruder appeared on fenced node gpu-3"
    assert_clean(c, still_cordoned=("gpu-3",))


def test_an_unexpected_error_rolls_back_instead_of_escaping() -> None:
    c, plan = setup()
    progress = on_progress(
        lambda p: "replacement" in p.waiting, lambda: c.fail_next("list_pods", RuntimeError("connection reset by peer"))
    )
    report = run(c, plan, progress=progress)
    assert report.status == "failed" and "connection reset by peer" in report.reason and "RuntimeError" in report.reason
    assert len(events(c, "CompactorAbort")) == 1
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
    report = run(c, plan, SETTINGS.model_copy(update={"after_drain": "taint"}))
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


def test_a_missing_state_namespace_fails_the_run_before_any_change_with_a_hint() -> None:
    c, plan = setup()
    c.fail_next("write_state", 404)
    report = run(c, plan)
    assert report.status == "failed"
    assert "create the state namespace" in report.reason and "executor.state_namespace" in report.reason
    assert writes(c, "patch_node") == [] and evict_calls(c) == []
    assert_clean(c)


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
    report = run(c, plan, SETTINGS.model_copy(update={"release_deadline_seconds": 30.0}))
    assert report.status == "succeeded", report.reason
    assert events(c, "CompactorAbort") == [] and c.cordoned_nodes() == []
    if outage > 3:
        assert c.state, "the state outlived the run: the next recovery deletes it"
        c.write_state = write_state  # type: ignore[method-assign]  # the API server is back
        recovered = recover(c, SETTINGS, c.clock)
        assert recovered.resumed is not None and recovered.resumed.status == "succeeded"
        assert c.evicted.count(plan.moves[0].pod) == 1  # nothing moved twice
    assert_clean(c)


def test_a_run_stops_before_its_next_eviction_once_its_window_has_closed() -> None:
    """Issue 18, item 8: the window was checked only when a run started, so a run started a minute before it closed evicted
    until it ended. Now it is asked before each eviction; here the window closes once the first pod is evicted."""
    objects = two_freed_nodes()
    c, plan = FakeCluster(objects), make_plan(objects)
    closed = "the end of the disruption window (outside the disruption windows: the next opens at 2026-01-02T00:00:00Z)"
    executor = Executor(c, SETTINGS, c.clock, rules=PLANNER, may_go_on=lambda: closed if c.evicted else "")
    report = executor.execute(plan)
    assert len(plan.moves) > 1 and len(c.evicted) == 1
    assert report.status == "partial" and report.reason == f"{closed} reached; the rest waits for the next run"
    assert_clean(c)


def test_the_window_keeper_reads_the_windows_at_each_ask() -> None:
    """``carry_out.window_keeper``: nothing configured never stops; a window open now, then closed a minute later, stops."""
    c = FakeCluster([])
    assert window_keeper(Settings(), c.clock)() == ""
    now = c.clock.now()
    opens = {"schedule": f"{now.minute} {now.hour} * * *", "duration_minutes": 1, "timezone": "UTC"}
    keeper = window_keeper(Settings(disruption=DisruptionSettings(windows=[opens])), c.clock)
    assert keeper() == ""
    c.advance(120)
    assert keeper().startswith("the end of the disruption window (outside the disruption windows: the next opens at")

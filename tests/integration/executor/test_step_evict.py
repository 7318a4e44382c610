"""The eviction step (``compactor/actions/steps/evict.py``): each planned pod through the Eviction API only, its
replies (429 backed off, transient failures retried a bounded number of times, 404 taken as done, a refusal
aborting), one eviction at a time per owner and per PodDisruptionBudget, a budget at zero waited for, a pod gone
since planning skipped, and the stop asked before each eviction (the disruption window closing).

What the re-check before each eviction refuses is ``test_recheck.py``; make-before-break moves
(``actions/services/surge.py``) are ``test_make_before_break.py``.

Against the fake cluster (``tests/fakecluster/``) in simulated time: each scenario is planned by the real
planner, or by hand (``hand_plan``), and carried out by ``Executor`` through the ``ClusterClient`` interface. The
scenarios and helpers (``setup``, ``run``, ``assert_clean``, ...) live in ``tests/scenarios/executor.py``.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from compactor.actions.executor import Executor, Progress
from compactor.actions.port.client import EvictionOutcome, EvictionResult
from tests.fakecluster import FakeCluster
from tests.scenarios.executor import (
    PLANNER,
    SETTINGS,
    assert_clean,
    evict_calls,
    in_flight,
    intercept_evictions,
    make_plan,
    on_progress,
    owner_of,
    run,
    setup,
    two_freed_nodes,
)

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


def test_429_that_persists_aborts_after_the_retry_limit() -> None:
    c, plan = setup()
    c.fail_next("evict", 429, times=50)
    report = run(c, plan)
    assert report.status == "failed" and "failed 4 times" in report.reason and "429" in report.reason
    assert len(evict_calls(c)) == 1 + SETTINGS.executor.eviction_retry_limit and c.evicted == []
    assert_clean(c)


def test_backoff_is_bounded() -> None:
    c, plan = setup()
    c.fail_next("evict", 429, times=5)
    settings = SETTINGS.amended(backoff_seconds=1, backoff_max_seconds=3, eviction_retry_limit=5)
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
    c.fail_next("evict", failure, times=SETTINGS.executor.eviction_retry_limit)
    report = run(c, plan)
    assert report.status == "succeeded", report.reason
    assert len(evict_calls(c, plan.moves[0].pod)) == SETTINGS.executor.eviction_retry_limit + 1
    assert_clean(c)


@pytest.mark.parametrize(
    "failure", [409, 500, EvictionResult(EvictionOutcome.ERROR, 0, "timed out")], ids=["409", "500", "timeout"]
)
def test_transient_failures_are_retried_a_bounded_number_of_times(failure: Any) -> None:
    c, plan = setup()
    c.fail_next("evict", failure, times=SETTINGS.executor.eviction_retry_limit + 1)
    report = run(c, plan)
    assert report.status == "failed" and f"failed {SETTINGS.executor.eviction_retry_limit + 1} times" in report.reason
    assert len(evict_calls(c)) == SETTINGS.executor.eviction_retry_limit + 1 and c.evicted == []
    assert_clean(c)


@pytest.mark.parametrize("status", [403, 400, 422])
def test_a_refused_eviction_aborts_the_run_at_once(status: int) -> None:
    c, plan = setup()
    c.fail_next("evict", status)
    report = run(c, plan)
    assert report.status == "failed" and f"refused ({status})" in report.reason
    assert len(evict_calls(c)) == 1 and c.evicted == [] and report.moves_done == 0
    assert_clean(c)


# --------------------------------------------------------------------------- one at a time per PDB/owner


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
    settings = SETTINGS.amended(max_concurrent_evictions=2, mechanism="off")
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
    settings = SETTINGS.amended(max_concurrent_evictions=2)
    report = run(c, plan, settings)
    assert report.status == "succeeded", report.reason
    assert seen == [set()] * 4  # everything the PDB selects was whole at each eviction
    assert_clean(c)


# --------------------------------------------------------------------------- the budget asked before each eviction


def test_a_pdb_forced_to_zero_waits_then_refuses_that_move_and_the_run_goes_on() -> None:
    """Issue 42: a budget at 0 is the workload's owner saying "not now". The move waits for it, then is refused with
    what hung on it (the other moves off its node), never evicted; what was done stands, nothing rolls back, and no
    move counts as failed."""
    c, plan = setup()
    serve = [m.pod for m in plan.moves if m.owner == "ReplicaSet/serve"]
    progress = on_progress(lambda p: p.done == 1, lambda: c.set_pdb_allowed("default", "serve", 0))
    report = run(c, plan, progress=progress)
    assert report.status == "partial", report.reason
    assert "PodDisruptionBudget default/serve allowed no disruption for 60s" in report.reason
    assert [call for call in evict_calls(c) if f"default/{call.args['name']}" in serve[1:]] == []  # never even asked
    assert report.failed_pods == [] and set(serve[1:]) <= set(report.skipped_moves)
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


# --------------------------------------------------------------------------- the pod read fresh, the run's stop asked before each eviction


def test_a_planned_pod_already_gone_is_skipped() -> None:
    c, plan = setup()
    gone = plan.moves[0].pod
    del c.pods[tuple(gone.split("/"))]  # type: ignore[arg-type]
    report = run(c, plan)
    assert report.status == "succeeded" and report.skipped_moves == [gone] and report.moves_done == 4
    assert gone not in [f"{x.args['namespace']}/{x.args['name']}" for x in evict_calls(c)]
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

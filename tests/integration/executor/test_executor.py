"""The executor as a whole (``compactor/actions/executor.py``), against the fake cluster in simulated time: a plan
carried out to the end, its steps in order, the run cut to its caps and budgets, its events, progress and report,
an unexpected error rolled back, the state's first write.

Every scenario is planned by the real planner (``build_plan``) from the same raw objects
the fake cluster is loaded with, then carried out by ``Executor`` through the
``ClusterClient`` interface. The fake cluster enforces PDBs on the eviction subresource,
recreates evicted ReplicaSet pods, schedules them and starts them after a delay, so an
executor that skips a wait or a check shows up as a PDB violation, a lost pod, a node
left cordoned or a wrong report.

Each step of a run (``compactor/actions/steps/``) has its own module, ``test_step_<step>.py``; the steering by
holds ``test_steerer_holds.py``, by policy ``test_steerer_policy.py``, the validation of a plan before any change
``test_check_validate.py``. The scenarios and helpers (``two_freed_nodes``, ``run``, ``assert_clean``, ...) live in
``tests/scenarios/executor.py``, shared with the other executor tests.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from compactor.actions.executor import Progress
from compactor.actions.port import annotations as ann
from compactor.app.plan_document import build_plan
from compactor.planner.request import PlanRequest
from compactor.settings.caps import CapsSettings
from tests.builders import cluster
from tests.fakecluster import EPOCH, FakeCluster
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
    involved,
    make_plan,
    marks,
    on_progress,
    one_freed_node,
    run,
    setup,
    two_freed_nodes,
    writes,
)

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


# --------------------------------------------------------------------------- bounded overall: the per-cycle cap and the run budgets


def test_the_per_cycle_cap_bounds_the_evictions() -> None:
    c, plan = setup()
    settings = SETTINGS.amended(max_evictions_per_cycle=2, after_drain="keepCordoned")
    report = run(c, plan, settings)
    assert len(c.evicted) == 2 and c.evicted == [m.pod for m in plan.moves[:2]]
    # issue 45: it did all the cap allowed, whole nodes only: succeeded, and the rest waits (not "partial")
    assert report.moves_done == 2 and report.status == "succeeded" and report.more_waits
    assert "max_evictions_per_cycle" in report.reason
    # gpu-2 lost both its GPU pods and stays cordoned as asked; gpu-3 was not freed and is uncordoned whatever the mode
    assert report.freed_nodes == ["gpu-2"] and c.cordoned_nodes() == ["gpu-2"]
    assert marks(c, "gpu-3") == {} and marks(c, "gpu-2")[ann.AFTER_DRAIN] == "keepCordoned"


def test_a_cap_that_cuts_a_node_in_half_leaves_that_node_untouched_and_the_run_does_not_wait_for_it() -> None:
    c, plan = setup()
    assert [m.from_node for m in plan.moves] == ["gpu-2", "gpu-2", "gpu-3", "gpu-3"]
    report = run(c, plan, SETTINGS.amended(max_evictions_per_cycle=3))
    assert c.evicted == [m.pod for m in plan.moves[:2]]  # gpu-2 whole; gpu-3's first move alone would free nothing
    assert report.status == "succeeded" and report.more_waits and "max_evictions_per_cycle (3)" in report.reason
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
    assert (
        c.clock.monotonic() < SETTINGS.executor.replacement_timeout_seconds
    )  # no wait for a node this run never drained
    assert_clean(c)


def test_a_plan_a_run_budget_cut_runs_its_whole_nodes_and_the_run_names_the_budget() -> None:
    objects = two_freed_nodes()
    c = FakeCluster(objects)
    plan = build_plan(
        PlanRequest.of(
            cluster(*objects),
            PLANNER,
            source="test",
            now=EPOCH,
            plan_id=PLAN_ID,
            budgets=CapsSettings(max_draining_per_pool=1),
        )
    )
    assert plan.freed_nodes == ["gpu-2"] and plan.held_back.startswith("caps.max_draining_per_pool (1 of pool")
    report = run(c, plan)
    assert c.evicted == [m.pod for m in plan.moves] and len(c.evicted) == 2
    assert report.status == "succeeded" and report.reason.startswith("caps.max_draining_per_pool (1 of pool")
    assert report.to_dict()["moreWaits"] is True
    assert report.reason.endswith("reached; the rest waits for the next run")
    assert marks(c, "gpu-3") == {}  # the node the budget held back was never fenced
    assert_clean(c)


def test_a_cap_smaller_than_every_node_does_nothing_and_says_why() -> None:
    c, plan = setup()
    report = run(c, plan, SETTINGS.amended(max_evictions_per_cycle=1))
    assert report.status == "failed" and "needs more evictions than max_evictions_per_cycle (1)" in report.reason
    assert c.evicted == [] and c.history == []


# --------------------------------------------------------------------------- events and progress


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


# --------------------------------------------------------------------------- the run as a whole


def test_nothing_to_do() -> None:
    c = FakeCluster(two_freed_nodes())
    plan = hand_plan([], freed=[], c=c)
    report = run(c, plan)
    assert report.status == "nothing-to-do" and c.history == []


def test_an_unexpected_error_rolls_back_instead_of_escaping() -> None:
    c, plan = setup()
    progress = on_progress(
        lambda p: "replacement" in p.waiting, lambda: c.fail_next("list_pods", RuntimeError("connection reset by peer"))
    )
    report = run(c, plan, progress=progress)
    assert report.status == "failed" and "connection reset by peer" in report.reason and "RuntimeError" in report.reason
    assert len(events(c, "CompactorAbort")) == 1
    assert_clean(c)


def test_a_missing_state_namespace_fails_the_run_before_any_change_with_a_hint() -> None:
    c, plan = setup()
    c.fail_next("write_state", 404)
    report = run(c, plan)
    assert report.status == "failed"
    assert "create the state namespace" in report.reason and "executor.state_namespace" in report.reason
    assert writes(c, "patch_node") == [] and evict_calls(c) == []
    assert_clean(c)

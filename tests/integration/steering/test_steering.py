"""Steering: with a scheduler that spreads (the default profile), every replacement still lands where the plan says.

The fake scheduler's ``spread`` mode binds a pod to the feasible node with the most free
GPUs, as LeastAllocated does; the real control plane shows the same in ``tests/e2e``. The runs steer by holds
(``compactor/actions/steering/holds.py``; more in ``test_steerer_holds.py``), or not at all (``UNSTEERED``).

The node drained for a pending pod (``steps/steer.py``) is ``test_step_steer.py``; steering by admission policy
``test_steerer_policy.py``.
"""

from __future__ import annotations

import pytest

from compactor.actions.executor import Progress
from compactor.actions.port import annotations as ann
from compactor.actions.recovery import recover
from tests.builders import pod
from tests.fakecluster import Crash, FakeCluster
from tests.scenarios.executor import SETTINGS, assert_clean, make_plan, marks, run
from tests.scenarios.steering import (
    UNSTEERED,
    gpu_nodes_of,
    spare_node_beside_a_freeable_one,
)


def test_a_spreading_scheduler_is_steered_to_the_planned_node() -> None:
    objects = spare_node_beside_a_freeable_one()
    c, plan = FakeCluster(objects, scheduler="spread"), make_plan(objects)
    assert plan.freed_nodes == ["gpu-3"] and {m.to_node for m in plan.moves} == {"gpu-1"} and plan.freed_gpus == 8
    report = run(c, plan)
    assert report.status == "succeeded", report.reason
    assert gpu_nodes_of(c, "serve") == ["gpu-1", "gpu-1"]
    assert report.outcome is not None and report.outcome.freed_gpus == 8 and report.outcome.freed_nodes == ["gpu-3"]
    assert report.outcome.evictions == 2 and report.outcome.replacements_ready == 2
    assert report.outcome.held_node_seconds > 0 and report.outcome.holds == 4  # gpu-2 and gpu-4, for each of 2 moves
    assert_clean(c)


def test_without_steering_the_run_reports_the_real_gain_not_the_planned_one() -> None:
    objects = spare_node_beside_a_freeable_one()
    c, plan = FakeCluster(objects, scheduler="spread"), make_plan(objects)
    report = run(c, plan, UNSTEERED)
    assert gpu_nodes_of(c, "serve") == ["gpu-4", "gpu-4"]  # the emptiest node took both replacements
    assert report.status == "partial"
    assert report.reason == "cluster gained 0 whole-free GPU(s) (plan: 8); 0/0 pending pod(s) placed as planned"
    assert (
        report.outcome is not None
        and report.outcome.taken_nodes == ["gpu-4"]
        and report.outcome.freed_nodes == ["gpu-3"]
    )
    assert_clean(c)


def test_only_nodes_that_could_take_the_replacement_are_held_and_only_while_it_binds() -> None:
    objects = spare_node_beside_a_freeable_one()
    c, plan = FakeCluster(objects, scheduler="spread"), make_plan(objects)
    seen: list[tuple[str, list[str]]] = []

    def watch(progress: Progress) -> None:
        held = sorted(n for n in c.nodes if marks(c, n).get(ann.HELD_FOR))
        seen.append((progress.waiting, held))

    assert run(c, plan, progress=watch).status == "succeeded"
    holds = {tuple(held) for _, held in seen if held}
    assert holds == {("gpu-2", "gpu-4")}  # gpu-1 is the target; gpu-3 is cordoned as the node being freed
    held_at: dict[str, float] = {}
    durations = []
    for call in c.history:
        if call.method != "patch_node":
            continue
        if call.args["patch"]["metadata"]["annotations"].get(ann.HELD_FOR):
            held_at[call.args["name"]] = call.time
        elif call.args["name"] in held_at:
            durations.append(call.time - held_at.pop(call.args["name"]))
    assert len(durations) == 4 and not held_at  # two nodes held per move, each released once
    assert all(d < c.ready_after for d in durations)  # released at the bind, not when the replacement is Ready
    assert_clean(c)


def test_a_replacement_bound_off_plan_stops_the_run_and_rolls_back() -> None:
    objects = spare_node_beside_a_freeable_one()
    c, plan = FakeCluster(objects, scheduler="ignore-cordon"), make_plan(objects)  # binds to cordoned nodes first
    report = run(c, plan)
    assert report.status == "failed"
    assert "not the planned gpu-1; stopped after 0/2 moves and rolled back" in report.reason
    assert c.evicted == ["default/serve-a"]  # nothing evicted after the wrong landing
    assert_clean(c)


def test_a_target_without_room_is_caught_before_the_eviction() -> None:
    objects = spare_node_beside_a_freeable_one()
    c, plan = FakeCluster(objects, scheduler="spread"), make_plan(objects)
    c.add_pod(pod("newcomer", on="gpu-1", gpus=4, owner=None))  # takes gpu-1's room after the plan was made
    report = run(c, plan)
    # gpu-2 takes one 2-GPU pod, not both; gpu-4 is whole-free: gpu-3 cannot be emptied, so nothing moves for nothing
    assert report.status == "partial" and "gpu-1 has no room for default/serve-a now" in report.reason
    assert "no other node may take it and the 1 other move(s) off gpu-3" in report.reason
    assert c.evicted == [] and report.failed_pods == []
    assert_clean(c)


def test_a_crash_while_nodes_are_held_resumes_the_wait_and_then_releases_them() -> None:
    objects = spare_node_beside_a_freeable_one()
    baseline = FakeCluster(objects, scheduler="spread")
    plan = make_plan(objects)
    run(baseline, plan)
    first_eviction = next(i for i, call in enumerate(baseline.history, 1) if call.method == "evict")

    c = FakeCluster(objects, scheduler="spread")
    c.crash_after(first_eviction, when="after")
    with pytest.raises(Crash):
        run(c, plan)
    assert sorted(n for n in c.nodes if marks(c, n).get(ann.HELD_FOR)) == ["gpu-2", "gpu-4"]
    c.scheduler = "never"  # the controller is down for longer than a hold may last; nothing binds meanwhile
    c.advance(3 * SETTINGS.steering.steer_timeout_seconds)
    c.scheduler = "spread"
    recovered = recover(c, SETTINGS, c.clock)
    assert recovered.resumed is not None and recovered.resumed.status == "succeeded", recovered.resumed.reason
    assert gpu_nodes_of(c, "serve") == ["gpu-1", "gpu-1"]
    assert_clean(c)

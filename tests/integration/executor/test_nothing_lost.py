"""Lose nothing: evict only the pod that was planned, only when something recreates it, and keep the state small enough to write."""

from __future__ import annotations

import pytest

from compactor.actions.cluster.run_state import decode_plan
from compactor.actions.executor import Executor
from compactor.actions.port import annotations as ann
from compactor.actions.recovery import recover
from tests.builders import node, pdb, pod
from tests.fakecluster import Crash, FakeCluster
from tests.scenarios.executor import (
    SETTINGS,
    assert_clean,
    evict_calls,
    hand_plan,
    intercept_evictions,
    on_progress,
    rs,
    run,
    setup,
    synthetic_moves,
    two_freed_nodes,
)

TWO_MOVES = [
    ("default/train-a", "gpu-2", "gpu-1", "ReplicaSet/train"),
    ("default/serve-a", "gpu-2", "gpu-1", "ReplicaSet/serve"),
]


def test_a_pod_recreated_under_the_same_name_is_never_evicted_in_its_place() -> None:
    c, _ = setup()
    plan = hand_plan(TWO_MOVES, freed=["gpu-2"], c=c)
    stored = c.pod("default", "train-a")

    def recreate(namespace: str, name: str) -> None:  # between the executor's last read and its eviction
        if name == "train-a":
            stored["metadata"]["uid"] = "recreated-uid"

    intercept_evictions(c, recreate)
    run(c, plan)
    sent = [call.args for call in evict_calls(c) if call.args["name"] == "train-a"]
    assert sent and all(args["uid"] == plan.moves[0].uid for args in sent)  # every attempt names the planned pod
    assert "default/train-a" not in c.evicted  # the newcomer with the same name stays
    assert_clean(c)


def test_a_pod_that_lost_its_controller_since_planning_is_not_evicted() -> None:
    c, _ = setup()
    plan = hand_plan(TWO_MOVES, freed=["gpu-2"], c=c)
    for ref in c.pod("default", "train-a")["metadata"]["ownerReferences"]:
        ref["controller"] = False  # orphaned (e.g. kubectl delete rs --cascade=orphan, then adopted by nobody)
    report = run(c, plan)
    assert report.status == "partial" and "not moved default/train-a: no controller owner" in report.reason, (
        report.reason
    )
    # refused before any eviction: train-b, whose node it was, not moved either
    assert c.evicted == [] and evict_calls(c) == []
    assert "depends on the move of default/train-a" in report.reason
    assert_clean(c)


def test_a_second_budget_appearing_after_planning_refuses_the_move_before_asking() -> None:
    c = FakeCluster(two_freed_nodes())
    plan = hand_plan(TWO_MOVES, freed=["gpu-2"], c=c)
    c.pdbs[("default", "train-too")] = pdb("train-too", match={"app": "train"}, max_unavailable=1)
    c.tick()
    report = run(c, plan)
    assert report.status == "partial" and "more than one PodDisruptionBudget" in report.reason
    # refused at its eviction, as the planner would have: the Eviction API refuses such pods
    assert evict_calls(c) == []
    assert c.evicted == []
    assert_clean(c)


def test_the_state_holds_what_recovery_needs_not_the_figures() -> None:
    c, plan = setup()
    per_node = {
        f"gpu-{i:05d}": {"allocatable": 8, "allocated": 3, "free": 5, "fragmentation": 0.25} for i in range(5000)
    }
    # a 5,000-node cluster's worth
    heavy = plan.model_copy(
        update={
            "before": {"nodes": per_node},
            "after": {"nodes": per_node},
            "moves": plan.moves + synthetic_moves(2000),
        }
    )
    assert len(heavy.to_json()) > 1024 * 1024  # as a whole, the plan would not fit in a ConfigMap
    states: list[dict[str, str]] = []
    original = c.write_state

    def record(name: str, data: dict[str, str] | None) -> None:
        if data is not None:
            states.append(dict(data))
        original(name, data)

    c.write_state = record  # type: ignore[method-assign]
    report = Executor(c, SETTINGS.amended(max_evictions_per_cycle=5000), c.clock).execute(heavy)
    assert report.status == "succeeded", report.reason
    largest = max(sum(len(k) + len(v) for k, v in s.items()) for s in states)
    assert largest < 256 * 1024
    kept = decode_plan(states[-1]["plan"])
    assert [(m.pod, m.from_node, m.to_node, m.uid, m.owner) for m in kept.moves] == [
        (m.pod, m.from_node, m.to_node, m.uid, m.owner) for m in heavy.moves
    ]
    assert (kept.freed_nodes, kept.placed_pending, kept.freed_gpus) == (
        heavy.freed_nodes,
        heavy.placed_pending,
        heavy.freed_gpus,
    )
    assert ann.STATE_CONFIGMAP not in c.state


def test_a_transient_read_error_while_waiting_is_retried_not_rolled_back() -> None:
    c, plan = setup()
    flaky = on_progress(lambda p: "replacement" in p.waiting, lambda: c.fail_next("list_pods", 503, times=2))
    report = run(c, plan, progress=flaky)
    assert report.status == "succeeded", report.reason
    assert_clean(c)


def test_a_permanent_read_error_while_waiting_still_rolls_back() -> None:
    c, plan = setup()
    forbidden = on_progress(lambda p: "replacement" in p.waiting, lambda: c.fail_next("list_pods", 403))
    report = run(c, plan, progress=forbidden)
    assert report.status == "failed" and "HTTP 403" in report.reason
    assert_clean(c)


@pytest.mark.parametrize(
    "damage",
    [
        {"plan": "{not json"},
        {"plan": '{"apiVersion": "compactor/v0", "kind": "CompactionPlan"}'},  # another version's plan
        {"cordoned": '{"gpu-2": true}'},  # a list field that is not a list
    ],
)
def test_an_unreadable_state_rolls_back_by_the_node_marks_and_says_so(damage: dict[str, str]) -> None:
    c, plan = setup()
    c.crash_after(4, when="after")  # state written, gpu-2 cordoned, state written again: a run interrupted early
    with pytest.raises(Crash):
        run(c, plan)
    assert c.cordoned_nodes()
    c.state[ann.STATE_CONFIGMAP] = {**c.state[ann.STATE_CONFIGMAP], **damage}
    recovered = recover(c, SETTINGS, c.clock)
    assert recovered.resumed is None and recovered.discarded.startswith("state ConfigMap gpu-compactor-state")
    warnings = [e for e in c.events if e["reason"] == "CompactorStateDiscarded"]
    assert warnings and all(e["type"] == "Warning" for e in warnings)
    assert_clean(c)


def test_a_long_grace_period_is_waited_out_not_taken_for_a_stuck_replacement() -> None:
    objects = [
        node("gpu-1", gpus=8),
        node("gpu-2", gpus=8),
        pod("pinned", on="gpu-1", gpus=4, owner=None),
        rs("db-0", "gpu-2", "db", kind="StatefulSet"),
        rs("db-1", "gpu-2", "db", kind="StatefulSet"),
        pdb("db", match={"app": "db"}, max_unavailable=1),
    ]
    for obj in objects:
        if obj["kind"] == "Pod" and obj["metadata"]["name"].startswith("db-"):
            obj["spec"]["terminationGracePeriodSeconds"] = 200  # a model server that drains its requests
    c = FakeCluster(objects)
    plan = hand_plan(
        [("default/db-0", "gpu-2", "gpu-1", "StatefulSet/db"), ("default/db-1", "gpu-2", "gpu-1", "StatefulSet/db")],
        freed=["gpu-2"],
        c=c,
    )
    # replacement_timeout_seconds 60 < 200: a StatefulSet recreates only once the pod is gone
    report = run(c, plan, SETTINGS)
    assert report.status == "succeeded", report.reason
    assert report.outcome is not None and report.outcome.freed_nodes == ["gpu-2"]
    assert c.clock.monotonic() >= 400  # both pods took their full grace period
    assert_clean(c)


def test_a_run_past_its_time_budget_starts_no_further_eviction() -> None:
    c, plan = setup()
    report = run(c, plan, SETTINGS.amended(max_run_seconds=1))  # each move takes longer than that
    assert report.status == "partial" and report.reason.startswith(
        "max_run_seconds (1) reached; the rest waits for the next run"
    )
    assert len(c.evicted) == 1 and report.moves_done == 1
    # the nodes whose moves did not start are released at once, not waited for until replacement_timeout_seconds
    assert c.clock.monotonic() < SETTINGS.executor.replacement_timeout_seconds
    assert_clean(c)

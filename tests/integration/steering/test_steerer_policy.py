"""Steering by admission policy (``compactor/actions/steering/policy.py``, ``PolicySteerer``): one entry per move in
flight in the parameter ConfigMap, recorded in the state before it is written and removed once the replacement is
bound; each replacement pinned to its planned node with no other node fenced; moves of different owners at once; a
replacement arriving unpinned, or pinned and unable to bind, stopping the run; a pod the owner makes meanwhile evicted
so it comes back unpinned; entries across a crash, a recovery without resume, a dry run and a stop.

Against the fake cluster with the repository's own policy, binding and parameters installed. The fake cluster applies
the policy as kube-apiserver does (``compactor.actions.steering.pin``, checked against a real API server in
``tests/e2e/test_steering_policy.py``): a pod its controller creates while the parameter ConfigMap names the
controller's uid comes pinned (``matchFields: metadata.name In [node]``) and annotated. Its scheduler spreads, like the
default profile, so an unpinned replacement goes to the emptiest node.

Which mechanism a run steers with (the policy found, missing, or concluded not in effect) is
``test_steering_detect.py``; the node reserved for a pending pod is ``test_step_steer.py``. The scenarios and helpers
live in ``tests/scenarios/executor.py`` and ``tests/scenarios/steering.py``.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from compactor.actions.dryrun import RecordingClient
from compactor.actions.executor import Executor, Progress
from compactor.actions.port import annotations as ann
from compactor.actions.recovery import recover
from compactor.actions.steering.detect import choose
from compactor.actions.steering.pin import STEERED_TO
from compactor.clock import Interrupted, SimulatedClock, StoppableClock
from compactor.planner.plan import CompactionPlan
from compactor.settings.bundles import PlannerSettings
from tests.builders import node, pod, steering_policy
from tests.fakecluster import EPOCH, Crash, FakeCluster
from tests.scenarios.executor import SETTINGS, Obj, agents, assert_clean, events, hand_plan, make_plan, marks, rs, run
from tests.scenarios.steering import (
    PARAMETERS,
    POLICY,
    assert_no_steering_left,
    cordoned_ever,
    entries,
    gpu_nodes_of,
    spare_node_beside_a_freeable_one,
    two_owners_onto_two_targets,
    with_policy,
)

RULES = PlannerSettings.of(
    min_replicas=1
)  # single replicas on purpose: the replica guard is tested in test_nothing_lost


def test_each_replacement_is_pinned_to_its_planned_node_and_no_other_node_is_cordoned() -> None:
    c, plan = with_policy(spare_node_beside_a_freeable_one())
    assert {m.to_node for m in plan.moves} == {"gpu-1"} and plan.freed_nodes == ["gpu-3"]
    report = run(c, plan)
    assert report.status == "succeeded", report.reason
    assert (
        report.steering == "policy"
        and "MutatingAdmissionPolicy gpu-compactor-steering installed" in report.steering_why
    )
    assert gpu_nodes_of(c, "serve") == ["gpu-1", "gpu-1"]  # the spreading scheduler would have chosen gpu-4
    assert [node for _, node in c.pinned] == ["gpu-1", "gpu-1"]
    assert cordoned_ever(c) == {"gpu-3"}  # only the node being freed; no hold anywhere
    assert (
        report.outcome is not None
        and report.outcome.held_node_seconds == 0
        and report.outcome.holds == 0
        and report.outcome.freed_gpus == 8
    )
    assert_no_steering_left(c)


def test_an_entry_is_recorded_before_it_is_written_and_removed_once_the_replacement_is_bound() -> None:
    c, plan = with_policy(spare_node_beside_a_freeable_one())
    assert run(c, plan).status == "succeeded"
    order = [call.method for call in c.history if call.method in ("write_state", "patch_config_map", "evict")]
    pins = [call for call in c.history if call.method == "patch_config_map"]
    assert [set(call.args["patch"]["data"].values()) for call in pins] == [{"gpu-1"}, {None}, {"gpu-1"}, {None}]
    # a precondition, as every other write
    assert all("resourceVersion" in call.args["patch"]["metadata"] for call in pins)
    first_pin = order.index("patch_config_map")
    # state, entry, eviction
    assert order[first_pin - 1 : first_pin + 2] == [
        "write_state",
        "patch_config_map",
        "evict",
    ]
    # removed, then the move's end saved
    assert order[first_pin + 2 : first_pin + 4] == [
        "patch_config_map",
        "write_state",
    ]
    assert pins[1].time - pins[0].time < c.ready_after  # removed at the bind, before the replacement is Ready
    assert_no_steering_left(c)


def test_moves_of_different_owners_run_at_once_and_each_lands_where_planned() -> None:
    objects = two_owners_onto_two_targets()
    c, plan = with_policy(objects)
    assert sorted((m.pod, m.to_node) for m in plan.moves) == [
        ("default/serve-a", "gpu-1"),
        ("default/train-a", "gpu-2"),
    ] or sorted(m.to_node for m in plan.moves) == ["gpu-1", "gpu-2"]
    in_flight: list[int] = []
    report = run(
        c,
        plan,
        POLICY.amended(max_concurrent_evictions=2),
        progress=lambda _p: in_flight.append(len(c.config_maps[PARAMETERS].get("data") or {})),
    )
    assert report.status == "succeeded", report.reason
    assert max(in_flight) == 2  # both owners pinned at once
    assert {(m.pod.split("/")[1].split("-")[0], m.to_node) for m in plan.moves} == {
        (app, node) for app in ("serve", "train") for node in gpu_nodes_of(c, app)
    }
    assert cordoned_ever(c) == {"gpu-3"}
    assert_no_steering_left(c)


def test_concurrent_moves_finish_sooner_than_one_at_a_time() -> None:
    objects = two_owners_onto_two_targets()
    c1, plan = with_policy(objects)
    assert run(c1, plan, POLICY).status == "succeeded"
    c2, _ = with_policy(objects)
    assert run(c2, plan, POLICY.amended(max_concurrent_evictions=2)).status == "succeeded"
    assert c2.time < c1.time


def test_a_replacement_arriving_unpinned_stops_the_run_and_says_the_policy_is_not_in_effect() -> None:
    c, plan = with_policy(spare_node_beside_a_freeable_one())
    c._admission = lambda pod, creator: pod  # type: ignore[method-assign]  # installed, found, but never applied
    report = run(c, plan)
    assert report.status == "failed"
    assert "was created without the steering pin" in report.reason and "is not in effect" in report.reason
    assert [e["reason"] for e in events(c, "CompactorSteeringFailed")] == ["CompactorSteeringFailed"]
    assert c.evicted == ["default/serve-a"]
    assert_no_steering_left(c)
    # one workload's replacement is evidence, not a conclusion: the next run still steers with the policy, and says so
    next_run = choose(c, SETTINGS, now=c.clock.now())
    assert next_run.mechanism == "policy" and not next_run.not_in_effect
    assert "a replacement of 1 workload(s) arrived unpinned" in next_run.why


def test_a_tenant_stripping_the_steered_to_annotation_neither_fails_the_move_nor_counts_against_the_policy() -> None:
    """Issue 43, item 4: "was this replacement pinned?" was read from the annotation, which the pod's owner may remove:
    a correctly landed move then failed, and two such workloads in a day concluded the policy not in effect for
    everyone. The pin is judged by the required node affinity the policy added (immutable) and where the pod bound."""
    c, plan = with_policy(spare_node_beside_a_freeable_one())
    admit = c._admission

    def stripped(pod: Obj, *, creator: str) -> Obj:
        admitted = admit(pod, creator=creator)
        (admitted["metadata"].get("annotations") or {}).pop(STEERED_TO, None)  # the owner's doing, after admission
        return admitted

    c._admission = stripped  # type: ignore[method-assign]
    report = run(c, plan)
    assert report.status == "succeeded", report.reason
    assert gpu_nodes_of(c, "serve") == ["gpu-1", "gpu-1"]
    assert events(c, "CompactorSteeringFailed") == []
    next_run = choose(c, SETTINGS, now=c.clock.now())
    assert next_run.mechanism == "policy" and "arrived unpinned" not in next_run.why
    assert_no_steering_left(c)


def test_a_pinned_replacement_that_cannot_bind_is_unpinned_evicted_while_pending_and_the_run_stops() -> None:
    objects = spare_node_beside_a_freeable_one()
    c, plan = with_policy(objects)
    original = c.evict

    def evict_then_fill_the_target(namespace: str, name: str, **options: Any) -> Any:
        result = original(namespace, name, **options)
        if name == "serve-a":
            # the target's room goes before the replacement binds
            c.add_pod(pod("squatter", on="gpu-1", gpus=4, owner=None))
        return result

    c.evict = evict_then_fill_the_target  # type: ignore[method-assign]
    report = run(c, plan)
    assert report.status == "failed" and "did not bind within 60s" in report.reason and "lost the room" in report.reason
    assert [e["reason"] for e in events(c, "CompactorUnpin")] == ["CompactorUnpin"]
    c.settle()
    serve = [p for p in c.pods.values() if (p["metadata"].get("labels") or {}).get("app") == "serve"]
    assert len(serve) == 2 and all(p["spec"].get("nodeName") for p in serve)  # recreated unpinned, bound elsewhere
    assert not any(STEERED_TO in (p["metadata"].get("annotations") or {}) for p in serve)
    assert_no_steering_left(c)


def test_a_pinned_replacement_that_binds_just_before_its_eviction_is_not_evicted_past_its_budget() -> None:
    """Issue [18]: the API server evicts a phase-Pending pod without asking its PodDisruptionBudget, and a pod just bound
    is still Pending while its containers start. The eviction carries the resourceVersion it was read Pending with, so
    the pod that bound since answers 409 and stays; the move ends on its planned node."""
    objects = spare_node_beside_a_freeable_one()
    c, plan = with_policy(objects)
    original = c.evict
    squatter = ("default", "squatter")
    answers: list[int] = []  # of the evictions of pinned Pending pods

    def evict_then_fill_the_target(namespace: str, name: str, **options: Any) -> Any:
        pinned_pending = name not in ("serve-a", "serve-b")  # not a planned pod: the pinned replacement
        if pinned_pending:
            # between the executor's read (Pending, unbound) and its eviction: the room comes back and it binds
            del c.pods[squatter]
            c.tick()
            bound = c.pods[(namespace, name)]
            assert bound["spec"].get("nodeName") == "gpu-1" and bound["status"].get("phase") == "Pending"
        result = original(namespace, name, **options)
        if pinned_pending:
            answers.append(result.status)
        if name == "serve-a":
            c.add_pod(pod("squatter", on="gpu-1", gpus=4, owner=None))
        return result

    c.evict = evict_then_fill_the_target  # type: ignore[method-assign]
    report = run(c, plan)
    assert answers == [409]
    assert events(c, "CompactorUnpin") == []
    assert report.status == "succeeded", report.reason
    assert gpu_nodes_of(c, "serve") == ["gpu-1", "gpu-1"]
    assert_no_steering_left(c)


def test_a_pod_the_owner_makes_meanwhile_and_that_cannot_bind_is_evicted_so_it_comes_back_unpinned() -> None:
    objects = [
        node("gpu-1", gpus=8),
        node("gpu-2", gpus=8),
        node("gpu-3", gpus=8),
        pod("pin-1", on="gpu-1", gpus=6, owner=None),
        pod("pin-2", on="gpu-2", gpus=4, owner=None),
        rs("serve-a", "gpu-3", "serve", gpus=2),
        *agents("gpu-1", "gpu-2", "gpu-3"),
    ]
    c = FakeCluster([*objects, *steering_policy()], scheduler="spread")
    plan = hand_plan([("default/serve-a", "gpu-3", "gpu-1", "ReplicaSet/serve")], freed=["gpu-3"], c=c)
    scaled: list[bool] = []

    def scale_up_while_pinned(progress: Progress) -> None:
        if not scaled and entries(c):
            scaled.append(True)
            c.controllers[
                ("ReplicaSet", "default", "serve")
            ].replicas += 1  # created pinned too; gpu-1 fits only one of them

    report = run(c, plan, progress=scale_up_while_pinned, rules=RULES)
    assert scaled and report.status == "succeeded", report.reason
    assert [e["reason"] for e in events(c, "CompactorUnpin")] == ["CompactorUnpin"]
    c.settle()
    serve = [p for p in c.pods.values() if (p["metadata"].get("labels") or {}).get("app") == "serve"]
    assert len(serve) == 2 and all(p["spec"].get("nodeName") for p in serve)  # none left Pending for good
    assert [
        STEERED_TO in (p["metadata"].get("annotations") or {})
        for p in sorted(serve, key=lambda p: p["spec"]["nodeName"])
        # the replacement pinned on gpu-1; the scale-up came back unpinned, wherever the scheduler sent it
    ] == [
        True,
        False,
    ]
    assert_no_steering_left(c)


def test_a_crash_between_writing_an_entry_and_removing_it_is_healed_by_the_next_runs_recovery() -> None:
    objects = spare_node_beside_a_freeable_one()
    c, plan = with_policy(objects)
    first_pin = next(
        i for i, call in enumerate(_baseline_history(objects, plan), 1) if call.method == "patch_config_map"
    )
    c.crash_after(first_pin, when="after")
    with pytest.raises(Crash):
        run(c, plan)
    assert set(entries(c).values()) == {"gpu-1"}
    recovered = recover(c, SETTINGS, c.clock)
    assert recovered.resumed is not None and recovered.resumed.status == "succeeded", recovered.resumed.reason
    assert gpu_nodes_of(c, "serve") == ["gpu-1", "gpu-1"]
    assert_no_steering_left(c)


def test_an_entry_no_state_accounts_for_is_removed_by_recovery() -> None:
    objects = spare_node_beside_a_freeable_one()
    c = FakeCluster([*objects, *steering_policy()], scheduler="spread")
    c.config_maps[PARAMETERS]["data"] = {"some-owner-uid": "gpu-1"}  # left by a process that died without a state
    recovered = recover(c, SETTINGS, c.clock)
    assert recovered.unpinned == ["some-owner-uid"] and entries(c) == {}


def test_without_resume_recovery_removes_the_entry_and_evicts_a_pinned_pod_left_pending() -> None:
    objects = spare_node_beside_a_freeable_one()
    c, plan = with_policy(objects)
    first_eviction = next(i for i, call in enumerate(_baseline_history(objects, plan), 1) if call.method == "evict")
    c.scheduler = "never"  # the replacement is created pinned, and nothing binds it before the crash
    c.crash_after(first_eviction, when="after")
    with pytest.raises(Crash):
        run(c, plan)
    c.advance(1)
    assert any(STEERED_TO in (p["metadata"].get("annotations") or {}) for p in c.pods.values())
    recovered = recover(c, SETTINGS, c.clock, resume=False)
    assert recovered.resumed is not None and recovered.resumed.status == "failed"
    assert entries(c) == {}
    c.scheduler = "spread"
    c.settle()
    # recreated unpinned
    assert not any(STEERED_TO in (p["metadata"].get("annotations") or {}) for p in c.pods.values())
    assert_clean(c)


def test_a_pinned_pod_left_pending_by_a_run_whose_state_was_lost_is_released_by_the_next_recovery() -> None:
    """Issue 43, item 5: with the state gone (an operator deleted it, or a later change of scope made it untrusted),
    nothing used to sweep a pinned replacement that could not bind: it stayed Pending for good. Recovery now evicts a
    pod the policy pinned once it has waited steer_timeout_seconds, so its owner recreates it unpinned."""
    objects = spare_node_beside_a_freeable_one()
    c, plan = with_policy(objects)
    first_eviction = next(i for i, call in enumerate(_baseline_history(objects, plan), 1) if call.method == "evict")
    c.scheduler = "never"  # the replacement is created pinned, and nothing binds it before the crash
    c.crash_after(first_eviction, when="after")
    with pytest.raises(Crash):
        run(c, plan)
    c.state.clear()  # the operator deleted the state ConfigMap
    c.advance(1)
    early = recover(c, SETTINGS, c.clock)
    assert early.released_pods == []  # waited 1 s: it may still be binding
    c.advance(SETTINGS.steering.steer_timeout_seconds)
    recovered = recover(c, SETTINGS, c.clock)
    assert recovered.released_pods and recovered.released_pods[0].startswith("default/serve-")
    assert "evicted pinned pod(s) left Pending" in recovered.said()
    c.scheduler = "spread"
    c.settle()
    assert not any(STEERED_TO in (p["metadata"].get("annotations") or {}) for p in c.pods.values())
    assert_clean(c)  # the lost run's fence was released by its own marks


def test_a_dry_run_with_the_policy_in_the_snapshot_shows_each_entry_and_changes_nothing() -> None:
    base = spare_node_beside_a_freeable_one()
    objects, plan = [*base, *steering_policy()], make_plan(base)
    client = RecordingClient(objects, plan)
    report = Executor(client, SETTINGS, SimulatedClock(EPOCH), dry_run=True, rules=RULES).execute(plan)
    assert report.shown_status == "dry-run" and report.steering == "policy"
    lines = client.intended_changes()
    pins = [line for line in lines if line.startswith("patch configmap/gpu-compactor/gpu-compactor-steering")]
    assert (
        len(pins) == 4
        and "(pin the next pod of ReplicaSet default/serve to node/gpu-1)" in pins[0]
        and "(unpin ReplicaSet default/serve)" in pins[1]
    )
    assert not any(line.startswith("cordon node/gpu-1") or "held-for" in line for line in lines)
    assert all(not marks(FakeCluster(objects), n) for n in ("gpu-1", "gpu-2", "gpu-3"))
    assert ann.HELD_FOR not in " ".join(lines)


def _baseline_history(objects: list[Obj], plan: CompactionPlan) -> list[Any]:
    baseline, _ = with_policy(objects)
    run(baseline, plan)
    return baseline.history


def test_a_stop_while_a_replacement_is_awaited_keeps_its_entry_and_the_next_run_finishes_the_move() -> None:
    c, plan = with_policy(spare_node_beside_a_freeable_one())
    stop = threading.Event()

    def stop_while_pinned(progress: Progress) -> None:
        if entries(c) and "replacement" in progress.waiting:
            stop.set()  # SIGTERM between the eviction and the replacement's binding

    c.scheduler = "never"  # the replacement is created, pinned, and waits for the scheduler
    with pytest.raises(Interrupted):
        Executor(c, SETTINGS, StoppableClock(c.clock, stop), progress=stop_while_pinned, rules=RULES).execute(plan)
    assert set(entries(c).values()) == {"gpu-1"}  # removing it now would let a replacement made later arrive unpinned
    c.scheduler = "spread"
    recovered = recover(c, SETTINGS, c.clock)
    assert recovered.resumed is not None and recovered.resumed.status == "succeeded", recovered.resumed.reason
    assert gpu_nodes_of(c, "serve") == ["gpu-1", "gpu-1"]
    assert_no_steering_left(c)

"""Make-before-break moves (issue [15] item 5) against the fake cluster, in simulated time.

``web`` is a Deployment of three 1-GPU replicas that opted in (``compactor.io/make-before-break``); two of them run on
gpu-2, which the plan frees onto gpu-1. The fake plays the Deployment controller (``spec.replicas`` passed to its one
ReplicaSet) and the ReplicaSet's scale-down order (not Ready first, then lower ``pod-deletion-cost``, then newer), so a
surge that scaled back without marking the old pod would remove the new one, and the test would see it."""

from __future__ import annotations

import contextlib
from typing import Any

from compactor.actions.cluster.run_state import STATE_CONFIGMAP, InFlight, Phase, RunState, Surge, encode_plan
from compactor.actions.dryrun import RecordingClient
from compactor.actions.executor import Executor
from compactor.actions.recovery import recover
from compactor.actions.services.report import RunReport
from compactor.actions.services.surge import OPT_IN, SURGE_NOTE, SURGED_BY
from compactor.planner.plan import CompactionPlan
from compactor.settings.bundles import RunSettings
from tests.builders import node, pod
from tests.fakecluster import Crash, FakeCluster
from tests.scenarios.executor import PLANNER, SETTINGS, agents, assert_clean, make_plan

Obj = dict[str, Any]
REPLICA_SET = "web-7d9f"


def deployment(name: str = "web", replicas: int = 3) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default", "uid": f"deploy-{name}"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}},
    }


def replica_set(name: str = REPLICA_SET, owner: str = "web", replicas: int = 3) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": name,
            "namespace": "default",
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": owner,
                    "uid": f"deploy-{owner}",
                    "controller": True,
                }
            ],
        },
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": owner}}},
    }


def web(name: str, on: str, *, opted: bool = True) -> Obj:
    return pod(
        name,
        on=on,
        gpus=1,
        owner=f"ReplicaSet/{REPLICA_SET}",
        labels={"app": "web"},
        annotations={OPT_IN: "true"} if opted else None,
    )


def fleet(*extra: Obj, opted: bool = True) -> list[Obj]:
    """gpu-1 has room (a bare pod keeps it the only target); gpu-2 runs two web replicas, gpu-1 the third."""
    return [
        node("gpu-1", gpus=8),
        node("gpu-2", gpus=8),
        pod("pinned", on="gpu-1", gpus=4, owner=None),
        web("web-a", "gpu-2", opted=opted),
        web("web-b", "gpu-2", opted=opted),
        web("web-c", "gpu-1", opted=opted),
        deployment(),
        replica_set(),
        *agents("gpu-1", "gpu-2"),
        *extra,
    ]


def web_pods(c: FakeCluster) -> list[Obj]:
    return [p for (ns, name), p in sorted(c.pods.items()) if name.startswith("web-")]


def ready_web(c: FakeCluster) -> int:
    """Replicas serving: Ready and not terminating (a terminating pod leaves its Service's endpoints at once)."""
    return sum(
        1
        for p in web_pods(c)
        if not p["metadata"].get("deletionTimestamp")
        and any(x["type"] == "Ready" and x["status"] == "True" for x in p["status"].get("conditions") or [])
    )


def watch_ready(c: FakeCluster) -> list[int]:
    """Ready web replicas after every step of the simulated world."""
    seen: list[int] = []
    tick = c.tick

    def watched() -> None:
        tick()
        seen.append(ready_web(c))

    c.tick = watched  # type: ignore[method-assign]
    return seen


def run(c: FakeCluster, plan: CompactionPlan, settings: RunSettings = SETTINGS) -> RunReport:
    return Executor(c, settings, c.clock).execute(plan)


def test_a_make_before_break_move_keeps_every_replica_serving_lands_as_planned_and_leaves_the_spec_as_it_was() -> None:
    objects = fleet()
    c, plan = FakeCluster(objects), make_plan(objects)
    assert sorted(m.pod for m in plan.moves) == ["default/web-a", "default/web-b"] and plan.freed_nodes == ["gpu-2"]
    seen = watch_ready(c)
    report = run(c, plan)
    assert report.status == "succeeded", report.reason
    assert c.evicted == []  # no eviction: the owner removed each old pod itself, after its replacement was Ready
    assert sorted(c.scale_downs) == ["default/web-a", "default/web-b"]  # exactly the planned pods, not a new one
    assert seen and min(seen) >= 3  # never fewer Ready replicas than the spec, at any step of the run
    assert c.deployments[("default", "web")]["spec"]["replicas"] == 3
    c.settle()
    assert sorted(p["spec"]["nodeName"] for p in web_pods(c)) == ["gpu-1", "gpu-1", "gpu-1"]
    scales = [(call.args["expect"], call.args["to"]) for call in c.history if call.method == "scale_deployment"]
    assert scales == [(3, 4), (4, 3), (3, 4), (4, 3)]  # one surge at a time
    assert [e["reason"] for e in c.events if e.get("reason") == "CompactorSurge"] == ["CompactorSurge"] * 2
    assert_clean(c)


def test_pods_that_did_not_opt_in_are_evicted_as_before() -> None:
    objects = fleet(opted=False)
    c, plan = FakeCluster(objects), make_plan(objects)
    report = run(c, plan)
    assert report.status == "succeeded", report.reason
    assert sorted(c.evicted) == ["default/web-a", "default/web-b"] and c.scale_downs == []
    assert all(call.method != "scale_deployment" for call in c.history)


def test_a_selector_opts_a_workload_in_without_annotations() -> None:
    objects = fleet(opted=False)
    c, plan = FakeCluster(objects), make_plan(objects)
    report = run(c, plan, SETTINGS.amended(make_before_break_selector={"app": "web"}))
    assert (
        report.status == "succeeded" and c.evicted == [] and sorted(c.scale_downs) == ["default/web-a", "default/web-b"]
    )


def _hpa() -> Obj:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 2,
            "maxReplicas": 6,
        },
    }


def test_a_workload_an_autoscaler_scales_is_evicted_and_the_run_says_why() -> None:
    objects = fleet(_hpa())
    c, plan = FakeCluster(objects), make_plan(objects)
    executor = Executor(c, SETTINGS, c.clock)
    report = executor.execute(plan)
    assert report.status == "succeeded", report.reason
    assert sorted(c.evicted) == ["default/web-a", "default/web-b"] and c.scale_downs == []
    notes = report.outcome.notes if report.outcome else []
    assert any("HorizontalPodAutoscaler" in note and "evicted, not moved make-before-break" in note for note in notes)


def test_a_deployment_in_a_rollout_is_not_surged() -> None:
    # another ReplicaSet holds 2
    objects = [o for o in fleet() if o.get("kind") != "Deployment"] + [deployment(replicas=5)]
    c, plan = FakeCluster(objects), make_plan(objects)
    report = run(c, plan)
    assert sorted(c.evicted) == ["default/web-a", "default/web-b"], report.reason
    assert any("rolling out" in note for note in (report.outcome.notes if report.outcome else []))


def test_a_surge_whose_replacement_never_starts_is_undone_the_old_pod_serving_and_the_spec_as_it_was() -> None:
    objects = fleet()
    c, plan = FakeCluster(objects, scheduler="never"), make_plan(objects)
    report = run(c, plan)
    assert report.status == "failed" and "still Pending" in report.reason
    c.settle()
    assert c.deployments[("default", "web")]["spec"]["replicas"] == 3 and c.evicted == []
    assert sorted(p["metadata"]["name"] for p in web_pods(c) if not p["metadata"].get("deletionTimestamp")) == [
        "web-a",
        "web-b",
        "web-c",
    ]
    assert all(
        "controller.kubernetes.io/pod-deletion-cost" not in (p["metadata"].get("annotations") or {})
        for p in web_pods(c)
    )
    assert_clean(c)


def test_someone_scaling_the_deployment_during_a_surge_keeps_their_replicas() -> None:
    objects = fleet()
    c, plan = FakeCluster(objects), make_plan(objects)
    scale = c.scale_deployment

    def operator_scales(namespace: str, name: str, *, expect: int, to: int) -> bool:
        if to < expect:  # the compactor is about to scale back: an operator scaled to 6 just before
            c.deployments[("default", "web")]["spec"]["replicas"] = 6
            c.controllers[("ReplicaSet", "default", REPLICA_SET)].replicas = 6
        return scale(namespace, name, expect=expect, to=to)

    c.scale_deployment = operator_scales  # type: ignore[method-assign]
    report = run(c, plan)
    assert report.status == "failed" and "scaled to 6 by someone else" in report.reason
    assert c.deployments[("default", "web")]["spec"]["replicas"] == 6  # theirs: never overwritten
    assert all(
        (p["metadata"].get("annotations") or {}).get("controller.kubernetes.io/pod-deletion-cost") is None
        for p in web_pods(c)
    )
    assert_clean(c)


def test_a_crash_mid_surge_resumes_without_surging_twice() -> None:
    objects = fleet()
    c, plan = FakeCluster(objects), make_plan(objects)
    scale = c.scale_deployment

    def crash_once_scaled(namespace: str, name: str, *, expect: int, to: int) -> bool:
        scale(namespace, name, expect=expect, to=to)
        c.scale_deployment = scale  # type: ignore[method-assign]
        raise Crash("scale_deployment", "after")  # the process dies right after its first surge took effect

    c.scale_deployment = crash_once_scaled  # type: ignore[method-assign]
    with contextlib.suppress(Crash):
        run(c, plan)
    surges = [call for call in c.history if call.method == "scale_deployment"]
    assert [(s.args["expect"], s.args["to"]) for s in surges][:1] == [(3, 4)], [call.method for call in c.history]
    recovery = recover(c, SETTINGS, c.clock, rules=PLANNER)
    assert recovery.resumed is not None and recovery.resumed.status == "succeeded", (
        recovery.resumed and recovery.resumed.reason
    )
    c.settle()
    assert c.deployments[("default", "web")]["spec"]["replicas"] == 3 and c.evicted == []
    assert sorted(c.scale_downs) == ["default/web-a", "default/web-b"]
    assert len([p for p in web_pods(c) if not p["metadata"].get("deletionTimestamp")]) == 3
    assert_clean(c)


def test_a_dry_run_says_the_scale_and_the_annotation_a_real_run_would_make() -> None:
    objects = fleet()
    plan = make_plan(objects)
    client = RecordingClient(objects, plan)
    report = Executor(client, SETTINGS, FakeCluster(objects).clock, dry_run=True).execute(plan)
    assert report.status == "succeeded", report.reason
    lines = client.intended_changes()
    assert "scale deployment/default/web --current-replicas=3 --replicas=4 (make-before-break)" in lines
    assert "annotate pod/default/web-a controller.kubernetes.io/pod-deletion-cost=-2147483648" in lines
    assert not any(line.startswith("evict ") for line in lines)


def _surged_once(c: FakeCluster, plan: CompactionPlan) -> None:
    """The run dies right after its first surge took effect (Deployment web at 4)."""
    scale = c.scale_deployment

    def crash_once_scaled(namespace: str, name: str, *, expect: int, to: int) -> bool:
        scale(namespace, name, expect=expect, to=to)
        c.scale_deployment = scale  # type: ignore[method-assign]
        raise Crash("scale_deployment", "after")

    c.scale_deployment = crash_once_scaled  # type: ignore[method-assign]
    with contextlib.suppress(Crash):
        run(c, plan)
    assert c.deployments[("default", "web")]["spec"]["replicas"] == 4


def test_a_surge_whose_state_is_lost_is_undone_by_the_mark_it_left_on_the_old_pod() -> None:
    """Issue 18, item 4: the state was lost (deleted by hand, or dropped as unreadable); the Deployment used to stay one
    replica over for good. The surge's mark on the old pod says what to undo."""
    objects = fleet()
    c, plan = FakeCluster(objects), make_plan(objects)
    _surged_once(c, plan)
    c.state.clear()  # the state is gone
    recovered = recover(c, SETTINGS, c.clock, rules=PLANNER)
    assert recovered.unsurged == ["default/web"] and "scaled back surged Deployment(s) default/web" in recovered.said()
    c.settle()
    assert c.deployments[("default", "web")]["spec"]["replicas"] == 3
    assert not any(SURGED_BY in (p["metadata"].get("labels") or {}) for p in web_pods(c))
    assert not any(SURGE_NOTE in (p["metadata"].get("annotations") or {}) for p in web_pods(c))


def test_a_surge_record_for_a_pod_that_carries_no_mark_of_it_scales_nothing() -> None:
    """Issue 18, item 2: a record (planted in scope, or from a run that died before marking) names a surge of web-a from
    3 replicas; the Deployment is at 3 + 1 because someone scaled it, not the compactor. No mark on web-a: no scale."""
    objects = fleet()
    c, plan = FakeCluster(objects), make_plan(objects)
    c.deployments[("default", "web")]["spec"]["replicas"] = 4
    move = plan.moves[0]
    pod = c.pods[tuple(move.pod.split("/", 1))]  # type: ignore[index]
    flight = InFlight(owner="rs", surge=Surge(deployment="web", replicas=3, pod_uid=str(pod["metadata"]["uid"])))
    c.state[STATE_CONFIGMAP] = RunState(
        plan_id=plan.metadata.id, phase=Phase.ROLLING_BACK, inflight={move.pod: flight}
    ).to_data(encode_plan(plan))
    recover(c, SETTINGS, c.clock, resume=False, rules=PLANNER)
    assert [call for call in c.history if call.method == "scale_deployment"] == []
    assert c.deployments[("default", "web")]["spec"]["replicas"] == 4

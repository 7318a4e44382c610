"""The step that awaits each replacement (``compactor/actions/steps/await_replacement.py``): the run waits for a
slow scheduler within the timeout, stops and rolls back when a replacement lands on a node the plan frees, stays
Pending or never gets Ready, sees a StatefulSet's pod replaced under its own name, and checks a fenced source for
a GPU pod the plan does not move once its last move is done (``checks/validate.no_strangers_on``).

Against the fake cluster (``tests/fakecluster/``) in simulated time: each scenario is planned by the real
planner, or by hand (``hand_plan``), and carried out by ``Executor`` through the ``ClusterClient`` interface. The
scenarios and helpers (``setup``, ``run``, ``assert_clean``, ...) live in ``tests/scenarios/executor.py``.
"""

from __future__ import annotations

from tests.builders import node, pdb, pod
from tests.fakecluster import FakeCluster
from tests.scenarios.executor import SETTINGS, assert_clean, hand_plan, make_plan, on_progress, rs, run, setup
from tests.scenarios.steering import gpu_nodes_of


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
    assert len(c.evicted) == 1 and c.clock.monotonic() >= SETTINGS.executor.replacement_timeout_seconds
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


def test_a_new_gpu_pod_on_a_source_cordoned_by_someone_else_aborts_too() -> None:
    c, plan = setup()
    c.nodes["gpu-3"]["spec"]["unschedulable"] = True  # the operator's cordon: not ours, but still a node the plan frees
    intruder = pod("intruder", on="gpu-3", gpus=1, owner=None, labels={"app": "intruder"})
    progress = on_progress(lambda p: "replacement" in p.waiting, lambda: c.add_pod(intruder))
    report = run(c, plan, progress=progress)
    assert report.status == "failed" and report.reason == "new GPU pod default/intruder appeared on fenced node gpu-3"
    assert_clean(c, still_cordoned=("gpu-3",))


def test_the_gpu_pods_a_plan_leaves_on_a_node_drained_for_a_pending_pod_are_no_strangers() -> None:
    """Issue 42: gpu-3 keeps a 2-GPU pod nobody may move and is drained of two others for a 6-GPU pending pod. After the
    last move off it, the check for strangers used to flag the pod the plan leaves there and roll back a run that did
    exactly what it planned; the pending pod now binds beside it and the run succeeds."""
    objects = [
        node("gpu-1", gpus=8),
        node("gpu-2", gpus=8),
        node("gpu-3", gpus=8),
        pod("pin-1", on="gpu-1", gpus=6, owner=None),
        pod("pin-2", on="gpu-2", gpus=6, owner=None),
        pod("keep", on="gpu-3", gpus=2, owner=None),
        rs("serve-a", "gpu-3", "serve", gpus=2),
        rs("train-a", "gpu-3", "train", gpus=2),
        pod("big", gpus=6, owner=None),
        pdb("serve", match={"app": "serve"}, max_unavailable=1),
        pdb("train", match={"app": "train"}, max_unavailable=1),
    ]
    c, plan = FakeCluster(objects, scheduler="spread"), make_plan(objects)
    assert [(p.pod, p.to_node) for p in plan.placed_pending] == [("default/big", "gpu-3")]
    assert sorted(m.pod for m in plan.moves) == ["default/serve-a", "default/train-a"]
    report = run(c, plan)
    assert report.status == "succeeded", report.reason
    assert sorted(c.node_gpu_pods("gpu-3")) == ["default/big", "default/keep"]
    assert report.failed_pods == []
    assert_clean(c)


def test_a_node_drained_for_a_pending_pod_that_lost_its_room_is_a_note_not_a_rollback() -> None:
    """A pod tolerating every taint lands on the drained node during the last move: the moves made stand (the run is
    partial: the pending pod is not placed), nothing is rolled back, and no move counts as failed."""
    objects = [
        node("gpu-1", gpus=8),
        node("gpu-2", gpus=8),
        node("gpu-3", gpus=8),
        pod("pin-1", on="gpu-1", gpus=6, owner=None),
        pod("pin-2", on="gpu-2", gpus=6, owner=None),
        rs("serve-a", "gpu-3", "serve", gpus=2),
        rs("train-a", "gpu-3", "train", gpus=2),
        pod("big", gpus=8, owner=None),
        pdb("serve", match={"app": "serve"}, max_unavailable=1),
        pdb("train", match={"app": "train"}, max_unavailable=1),
    ]
    c, plan = FakeCluster(objects, scheduler="spread"), make_plan(objects)
    intruder = pod("intruder", on="gpu-3", gpus=1, owner=None, labels={"app": "intruder"})
    added: list[bool] = []

    def arrive() -> None:
        if not added:
            added.append(True)
            c.add_pod(intruder)

    progress = on_progress(lambda p: "replacement of default/" in p.waiting and p.done == 1, arrive)
    report = run(c, plan, progress=progress)
    assert added and report.status == "partial", report.reason
    assert "gpu-3 would have no room for pending pod default/big" in report.reason
    assert not c.pod("default", "big")["spec"].get("nodeName") and report.failed_pods == []
    assert sorted(gpu_nodes_of(c, "serve") + gpu_nodes_of(c, "train")) == ["gpu-1", "gpu-2"]  # the moves stand
    assert c.cordoned_nodes() == []

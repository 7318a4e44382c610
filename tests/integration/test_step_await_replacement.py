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
from tests.scenarios.executor import SETTINGS, assert_clean, hand_plan, on_progress, rs, run, setup


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

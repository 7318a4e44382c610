"""The plan checked against the cluster before any eviction (``compactor/actions/checks/validate.py``,
``plan_still_holds``): the nodes it frees run no GPU pod it does not move and the nodes it drains for a pending pod still
have room for it, as the run read them when it began (a stale plan is refused before anything changes) and again behind
the fences (a plan gone stale meanwhile is rolled back, nothing evicted). No move of a stale plan counts as attempted.

Against the fake cluster (``tests/fakecluster/``) in simulated time: each scenario is planned by the real
planner, or by hand (``hand_plan``), and carried out by ``Executor`` through the ``ClusterClient`` interface. The
scenarios and helpers (``setup``, ``run``, ``assert_clean``, ...) live in ``tests/scenarios/executor.py``.
"""

from __future__ import annotations

from tests.builders import node, pod
from tests.fakecluster import FakeCluster
from tests.scenarios.executor import assert_clean, make_plan, run, setup, writes
from tests.scenarios.steering import node_drained_for_a_pending_pod


def test_a_stale_plan_is_refused_before_anything_changes() -> None:
    c, plan = setup()
    c.add_pod(pod("newcomer", on="gpu-2", gpus=1, owner=None, labels={"app": "newcomer"}))
    report = run(c, plan)
    assert report.status == "failed" and "plan is stale" in report.reason and "default/newcomer" in report.reason
    assert report.abort_reason == "plan_stale" and report.failed_pods == []  # nothing attempted: no failure to count
    assert writes(c, "patch_node") == [] and writes(c, "evict") == []
    assert_clean(c)


def test_a_pod_bound_while_the_fences_go_up_is_seen_behind_them_before_any_eviction() -> None:
    c, plan = setup()
    newcomer = pod("newcomer", on="gpu-2", gpus=1, owner=None, labels={"app": "newcomer"})
    fenced: list[str] = []
    real_patch = c.patch_node

    def patch_node(name: str, patch: dict[str, object]) -> dict[str, object]:
        result = real_patch(name, patch)
        if not fenced:  # bound as the first fence goes up: the look before the fences did not see it
            fenced.append(name)
            c.add_pod(newcomer)
        return result

    c.patch_node = patch_node  # type: ignore[method-assign]
    report = run(c, plan)
    assert fenced and report.status == "failed" and "default/newcomer" in report.reason, report.reason
    assert report.abort_reason == "plan_stale" and report.failed_pods == []  # nothing attempted: no failure to count
    assert writes(c, "evict") == [] and c.cordoned_nodes() == []  # fenced, seen stale, the fences lifted
    assert_clean(c)


def test_a_pod_bound_on_a_node_drained_for_a_pending_pod_while_planning_stops_the_run_before_any_eviction() -> None:
    """Issue 42: the plan drains gpu-3 for an 8-GPU pod; while it was made, a 2-GPU pod bound there. The run used to find
    that only after both evictions (the check looked at the nodes a plan frees); now it looks behind the fence first."""
    objects = node_drained_for_a_pending_pod()
    c, plan = FakeCluster(objects, scheduler="spread"), make_plan(objects)
    assert [(p.pod, p.to_node) for p in plan.placed_pending] == [("default/big", "gpu-3")] and plan.freed_nodes == []
    c.add_pod(pod("latecomer", on="gpu-3", gpus=2, owner=None, labels={"app": "latecomer"}))
    report = run(c, plan)
    assert report.status == "failed" and report.abort_reason == "plan_stale", report.reason
    assert "gpu-3 would have no room for pending pod default/big" in report.reason
    assert "default/latecomer" in report.reason
    assert writes(c, "evict") == [] and report.failed_pods == []
    assert_clean(c)


def test_a_pending_pod_bound_elsewhere_while_planning_makes_its_drain_stale() -> None:
    objects = node_drained_for_a_pending_pod()
    c, plan = FakeCluster(objects, scheduler="spread"), make_plan(objects)
    c.nodes["gpu-9"] = node("gpu-9", gpus=8)
    c.pod("default", "big")["spec"]["nodeName"] = "gpu-9"  # another node came up and the scheduler took it
    report = run(c, plan)
    assert report.status == "failed" and "pending pod default/big was bound to gpu-9 meanwhile" in report.reason
    assert writes(c, "evict") == []


def test_a_node_that_disappeared_makes_the_plan_stale() -> None:
    c, plan = setup()
    del c.nodes["gpu-3"]
    report = run(c, plan)
    assert report.status == "failed" and report.reason == "plan is stale: node gpu-3 no longer exists"
    assert writes(c, "patch_node") == [] and writes(c, "evict") == []

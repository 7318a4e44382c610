"""The plan checked against the cluster before any change (``compactor/actions/checks/validate.py``,
``plan_still_holds``): a stale plan is refused with nothing fenced or evicted.

Against the fake cluster (``tests/fakecluster/``) in simulated time: each scenario is planned by the real
planner, or by hand (``hand_plan``), and carried out by ``Executor`` through the ``ClusterClient`` interface. The
scenarios and helpers (``setup``, ``run``, ``assert_clean``, ...) live in ``tests/scenarios/executor.py``.
"""

from __future__ import annotations

from tests.builders import pod
from tests.scenarios.executor import assert_clean, run, setup, writes


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

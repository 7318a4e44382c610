"""The step that places pending pods (``compactor/actions/steps/steer.py``): the node drained for a pending pod stays
fenced while the moves run, so no replacement takes it, and is then opened for that pod, which binds there. Steering by
admission policy reserves the node for that pod alone (a ``NoSchedule`` taint, the matching toleration added to the pod,
no other node held), so no other pending pod takes it, and the reservation goes once the pod is bound.

Against the fake cluster (``tests/fakecluster/``) in simulated time, with a scheduler that spreads: each scenario is
planned by the real planner and carried out by ``Executor`` through the ``ClusterClient`` interface. The scenarios and
helpers live in ``tests/scenarios/executor.py`` and ``tests/scenarios/steering.py``.
"""

from __future__ import annotations

from typing import Any

from compactor.actions.executor import Progress
from tests.builders import pod, steering_policy
from tests.fakecluster import FakeCluster
from tests.scenarios.executor import SETTINGS, assert_clean, make_plan, run
from tests.scenarios.steering import (
    assert_no_steering_left,
    cordoned_ever,
    gpu_nodes_of,
    node_drained_for_a_pending_pod,
    with_policy,
)


def test_a_node_drained_for_a_pending_pod_is_fenced_until_the_pending_pod_binds_there() -> None:
    objects = node_drained_for_a_pending_pod()
    c, plan = FakeCluster(objects, scheduler="spread"), make_plan(objects)
    assert [(p.pod, p.to_node) for p in plan.placed_pending] == [("default/big", "gpu-3")] and plan.freed_nodes == []
    fenced: list[bool] = []
    report = run(c, plan, progress=lambda p: fenced.append(c.is_fenced("gpu-3")))
    assert report.status == "succeeded", report.reason
    assert c.pod("default", "big")["spec"]["nodeName"] == "gpu-3"
    assert sorted(gpu_nodes_of(c, "serve") + gpu_nodes_of(c, "train")) == ["gpu-1", "gpu-2"]
    assert fenced[0] and any(fenced)  # cordoned from the start, so no replacement went back to gpu-3
    assert report.outcome is not None and (report.outcome.pending_placed, report.outcome.pending_planned) == (1, 1)
    assert_clean(c)


def test_a_steered_pending_pod_gets_its_node_reserved_and_no_other_node_is_held() -> None:
    objects = node_drained_for_a_pending_pod()
    c, plan = with_policy(objects)
    assert [(p.pod, p.to_node) for p in plan.placed_pending] == [("default/big", "gpu-3")]
    reserved: list[list[dict[str, Any]]] = []

    def watch(progress: Progress) -> None:
        if progress.current.startswith("placing pending"):
            reserved.append(
                [t for t in c.nodes["gpu-3"]["spec"].get("taints") or [] if t["key"] == SETTINGS.executor.taint_key]
            )

    report = run(c, plan, progress=watch)
    assert report.status == "succeeded", report.reason
    assert c.pod("default", "big")["spec"]["nodeName"] == "gpu-3"
    assert reserved and reserved[0] == [
        {"key": SETTINGS.executor.taint_key, "value": "default.big", "effect": "NoSchedule"}
    ]
    tolerations = c.pod("default", "big")["spec"]["tolerations"]
    assert {
        "key": SETTINGS.executor.taint_key,
        "operator": "Equal",
        "value": "default.big",
        "effect": "NoSchedule",
    } in tolerations
    assert cordoned_ever(c) == {"gpu-3"}  # the fence only; nothing held for the pending pod either
    assert not c.nodes["gpu-3"]["spec"].get("taints")  # the reservation goes once it is bound
    assert_no_steering_left(c)


def test_a_reserved_node_is_taken_by_no_other_pending_pod() -> None:
    base = node_drained_for_a_pending_pod()
    rival = pod("rival", gpus=4, owner=None)  # fits only gpu-3, once it is open, and arrives after the plan was made
    c, plan = FakeCluster([*base, rival, *steering_policy()], scheduler="spread"), make_plan(base)
    report = run(c, plan)
    assert report.status == "succeeded", report.reason
    assert c.pod("default", "big")["spec"]["nodeName"] == "gpu-3"
    assert not c.pod("default", "rival")["spec"].get("nodeName")  # kept off by the reservation until big was bound
    assert_no_steering_left(c)

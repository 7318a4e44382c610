"""A move whose target lost its room to an arrival is re-targeted under the plan's rules, not the run's end (issue 42;
``compactor/actions/checks/retarget.py``, ``compactor/planner/search/retarget.py``).

A live cluster keeps scheduling while a run goes on: on the real control plane, a run's next move found its target taken
by a new pod ("has no room ... now") and rolled back, and its planned moves counted as failures. Now the evict step looks
for another node that the plan's rules allow (busy GPU nodes of the same pool, not a node the plan frees, drains or
empties, not a whole-free node) and sends the replacement there; with none, that move and what hung on it are refused and
the run goes on with the rest.

Against the fake cluster in simulated time, steered by the repository's admission policy (a spreading scheduler otherwise
sends a replacement to the emptiest node).
"""

from __future__ import annotations

import pytest

from compactor.planner.plan import CompactionPlan
from tests.builders import node, pdb, pod, steering_policy
from tests.fakecluster import FakeCluster
from tests.scenarios.executor import agents, hand_plan, rs, run
from tests.scenarios.steering import POLICY, assert_no_steering_left, gpu_nodes_of


def _world(*, room_on_gpu_2: int) -> list[dict[str, object]]:
    """gpu-3 runs two 2-GPU replicas the plan sends to gpu-1 (4 free); gpu-2 has ``room_on_gpu_2`` free GPUs; gpu-4 is
    whole-free (what a spreading scheduler likes best, and what the plan keeps whole)."""
    return [
        node("gpu-1", gpus=8),
        node("gpu-2", gpus=8),
        node("gpu-3", gpus=8),
        node("gpu-4", gpus=8),
        pod("pin-1", on="gpu-1", gpus=4, owner=None),
        pod("pin-2", on="gpu-2", gpus=8 - room_on_gpu_2, owner=None),
        rs("serve-a", "gpu-3", "serve", gpus=2),
        rs("train-a", "gpu-3", "train", gpus=2),
        *agents("gpu-1", "gpu-2", "gpu-3", "gpu-4"),
        pdb("serve", match={"app": "serve"}, max_unavailable=1),
        pdb("train", match={"app": "train"}, max_unavailable=1),
    ]


def _planned_and_squatted(room_on_gpu_2: int) -> tuple[FakeCluster, CompactionPlan]:
    c = FakeCluster([*_world(room_on_gpu_2=room_on_gpu_2), *steering_policy()], scheduler="spread")
    plan = hand_plan(
        [
            ("default/serve-a", "gpu-3", "gpu-1", "ReplicaSet/serve"),
            ("default/train-a", "gpu-3", "gpu-1", "ReplicaSet/train"),
        ],
        freed=["gpu-3"],
        c=c,
    )
    c.add_pod(pod("squatter", on="gpu-1", gpus=4, owner=None))  # bound after the plan was made: gpu-1 is full
    return c, plan


def test_a_target_taken_by_an_arrival_is_replaced_by_another_busy_node_and_the_run_succeeds() -> None:
    c, plan = _planned_and_squatted(room_on_gpu_2=4)
    report = run(c, plan, POLICY)
    assert report.status == "succeeded", report.reason
    assert gpu_nodes_of(c, "serve") == ["gpu-2"] and gpu_nodes_of(c, "train") == ["gpu-2"]
    assert c.node_gpu_pods("gpu-3") == [] and c.node_gpu_pods("gpu-4") == []  # freed as planned; the spare kept whole
    assert report.outcome is not None and report.outcome.notes == [
        "default/serve-a moved to gpu-2, not the planned gpu-1 (it lost its room to an arrival)",
        "default/train-a moved to gpu-2, not the planned gpu-1 (it lost its room to an arrival)",
    ]
    assert report.failed_pods == [] and sorted(report.done_pods) == ["default/serve-a", "default/train-a"]
    assert_no_steering_left(c)


@pytest.mark.parametrize("room_on_gpu_2", [1, 2], ids=["room-for-neither", "room-for-one-of-two"])
def test_when_the_source_cannot_be_emptied_its_moves_are_refused_before_any_eviction(room_on_gpu_2: int) -> None:
    """gpu-2 takes neither pod, or only one of the two (gpu-4 is whole-free: out of reach). Moving one pod would not empty
    gpu-3: a move for nothing. Both moves are refused before either eviction, and nothing counts as failed."""
    c, plan = _planned_and_squatted(room_on_gpu_2=room_on_gpu_2)
    report = run(c, plan, POLICY)
    assert report.status == "partial", report.reason
    assert "gpu-1 has no room for default/serve-a now" in report.reason
    assert c.evicted == [] and report.failed_pods == [] and report.done_pods == []
    assert gpu_nodes_of(c, "serve") == ["gpu-3"] and gpu_nodes_of(c, "train") == ["gpu-3"]  # nothing moved for nothing
    assert c.cordoned_nodes() == []
    assert_no_steering_left(c)

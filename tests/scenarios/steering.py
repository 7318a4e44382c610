"""Steering scenarios on the fake cluster: worlds where the scheduler, left alone, would not put a replacement where the plan says.

``spare_node_beside_a_freeable_one`` (a spreading scheduler prefers the empty gpu-4 to the planned gpu-1),
``node_drained_for_a_pending_pod`` (a node freed for an 8-GPU pod that waits), ``two_owners_onto_two_targets`` (two
ReplicaSets' pods moved to two nodes at once), ``gpu_nodes_of`` (where an app's pods run now) and ``UNSTEERED``
(the executor settings with steering off).

Steering by admission policy: ``POLICY`` (the executor settings that insist on it), ``with_policy`` (a spreading fake
cluster with the repository's policy, binding and parameter ConfigMap ``PARAMETERS`` installed, and the plan),
``entries`` (the steering entries in the parameter ConfigMap now), ``cordoned_ever`` (every node the run fenced) and
``assert_no_steering_left``.
"""

from __future__ import annotations

from typing import Any

from compactor.actions.port import annotations as ann
from compactor.planner.plan import CompactionPlan
from tests.builders import node, pod, steering_policy
from tests.builders import pdb as budget
from tests.fakecluster import FakeCluster
from tests.scenarios.executor import SETTINGS, Obj, agents, assert_clean, make_plan, rs, writes

UNSTEERED = SETTINGS.amended(mechanism="off")
POLICY = SETTINGS.amended(mechanism="policy")
PARAMETERS = "gpu-compactor-steering"  # the steering policy's parameter ConfigMap


def spare_node_beside_a_freeable_one() -> list[Obj]:
    """gpu-3's two pods fit gpu-1's 4 free GPUs; gpu-4 is GPU-free, so a spreading scheduler prefers it."""
    return [
        node("gpu-1", gpus=8),
        node("gpu-2", gpus=8),
        node("gpu-3", gpus=8),
        node("gpu-4", gpus=8),
        pod("pin-1", on="gpu-1", gpus=4, owner=None),
        pod("pin-2", on="gpu-2", gpus=6, owner=None),
        rs("serve-a", "gpu-3", "serve", gpus=2),
        rs("serve-b", "gpu-3", "serve", gpus=2),
        *agents("gpu-1", "gpu-2", "gpu-3", "gpu-4"),
        budget("serve", match={"app": "serve"}, max_unavailable=1),
    ]


def node_drained_for_a_pending_pod() -> list[Obj]:
    """An 8-GPU pod waits; gpu-3 runs two 2-GPU pods that fit the 2 free GPUs on each of gpu-1 and gpu-2."""
    return [
        node("gpu-1", gpus=8),
        node("gpu-2", gpus=8),
        node("gpu-3", gpus=8),
        pod("pin-1", on="gpu-1", gpus=6, owner=None),
        pod("pin-2", on="gpu-2", gpus=6, owner=None),
        rs("serve-a", "gpu-3", "serve", gpus=2),
        rs("train-a", "gpu-3", "train", gpus=2),
        pod("big", gpus=8, owner=None),
        *agents("gpu-1", "gpu-2", "gpu-3"),
        budget("serve", match={"app": "serve"}, max_unavailable=1),
        budget("train", match={"app": "train"}, max_unavailable=1),
    ]


def two_owners_onto_two_targets() -> list[Obj]:
    """gpu-3 runs two pods of two ReplicaSets; the plan moves them to gpu-1 and gpu-2; gpu-4 is empty (a spreader's choice)."""
    return [
        node("gpu-1", gpus=8),
        node("gpu-2", gpus=8),
        node("gpu-3", gpus=8),
        node("gpu-4", gpus=8),
        pod("pin-1", on="gpu-1", gpus=6, owner=None),
        pod("pin-2", on="gpu-2", gpus=6, owner=None),
        rs("serve-a", "gpu-3", "serve", gpus=2),
        rs("train-a", "gpu-3", "train", gpus=2),
        *agents("gpu-1", "gpu-2", "gpu-3", "gpu-4"),
        budget("serve", match={"app": "serve"}, max_unavailable=1),
        budget("train", match={"app": "train"}, max_unavailable=1),
    ]


def gpu_nodes_of(c: FakeCluster, app: str) -> list[str]:
    return sorted(
        p["spec"]["nodeName"] for p in c.pods.values() if (p["metadata"].get("labels") or {}).get("app") == app
    )


def with_policy(objects: list[Obj], **fake: Any) -> tuple[FakeCluster, CompactionPlan]:
    return FakeCluster([*objects, *steering_policy()], scheduler="spread", **fake), make_plan(objects)


def entries(c: FakeCluster) -> dict[str, str]:
    return dict(c.config_maps[PARAMETERS].get("data") or {})


def cordoned_ever(c: FakeCluster) -> set[str]:
    """Every node a patch of the run fenced (this installation's taint put on)."""
    key = ann.fence_key(ann.IDENTITY)
    return {
        call.args["name"]
        for call in writes(c, "patch_node")
        if any(t.get("key") == key for t in (call.args["patch"].get("spec") or {}).get("taints") or [])
    }


def assert_no_steering_left(c: FakeCluster) -> None:
    assert entries(c) == {}, "a steering entry outlived the run"
    assert_clean(c)

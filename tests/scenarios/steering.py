"""Steering scenarios on the fake cluster: worlds where the scheduler, left alone, would not put a replacement where the plan says.

``spare_node_beside_a_freeable_one`` (a spreading scheduler prefers the empty gpu-4 to the planned gpu-1),
``node_drained_for_a_pending_pod`` (a node freed for an 8-GPU pod that waits), ``gpu_nodes_of`` (where an app's
pods run now) and ``UNSTEERED`` (the executor settings with steering off).
"""

from __future__ import annotations

from tests.builders import node, pod
from tests.builders import pdb as budget
from tests.fakecluster import FakeCluster
from tests.scenarios.executor import SETTINGS, Obj, agents, rs

UNSTEERED = SETTINGS.model_copy(update={"steering": "off"})


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


def gpu_nodes_of(c: FakeCluster, app: str) -> list[str]:
    return sorted(
        p["spec"]["nodeName"] for p in c.pods.values() if (p["metadata"].get("labels") or {}).get("app") == app
    )

"""Which nodes a hold must cover: every other node where the replacement could bind now, and no more."""

from __future__ import annotations

from compactor.actions.services.outcome import whole_free_gpu_nodes
from compactor.actions.steering.room import rivals, room_on
from tests.builders import node, pod

LINGERING = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def mover() -> dict[str, object]:
    return pod("serve-a", on="gpu-1", gpus=2, node_selector={"pool": "h100"})


def h100(name: str, **kwargs: object) -> dict[str, object]:
    return node(name, gpus=8, labels={"pool": "h100"}, **kwargs)  # type: ignore[arg-type]


def test_every_other_node_with_room_is_a_rival_and_the_target_is_not() -> None:
    nodes = [h100("gpu-1"), h100("gpu-2"), h100("gpu-3"), h100("gpu-4")]
    pods = [mover(), pod("big", on="gpu-3", gpus=7, owner=None)]
    # gpu-3 has 1 GPU free; gpu-1 is the source
    assert rivals(nodes, pods, mover(), target="gpu-2") == [
        "gpu-1",
        "gpu-4",
    ]


def test_nodes_the_scheduler_would_filter_out_need_no_hold() -> None:
    nodes = [
        h100("gpu-1"),
        h100("cordoned", unschedulable=True),
        node("other-pool", gpus=8, labels={"pool": "a100"}),
        h100("tainted", taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]),
        h100("gpu-2"),
    ]
    assert rivals(nodes, [mover()], mover(), target="gpu-2") == ["gpu-1"]


def test_a_node_uncordoned_a_moment_ago_is_held_although_its_cordon_taint_lingers() -> None:
    nodes = [h100("gpu-1"), h100("just-released", taints=[LINGERING]), h100("not-ready", ready=False), h100("gpu-2")]
    assert rivals(nodes, [mover()], mover(), target="gpu-2") == ["gpu-1", "just-released", "not-ready"]


def test_terminating_pods_count_as_gone_so_their_node_is_held() -> None:
    nodes = [h100("gpu-1"), h100("gpu-2"), h100("gpu-3")]
    pods = [mover(), pod("leaving", on="gpu-3", gpus=8, deleting=True), pod("full", on="gpu-1", gpus=6, owner=None)]
    assert rivals(nodes, pods, mover(), target="gpu-2") == ["gpu-1", "gpu-3"]  # gpu-1: the mover's own 2 GPUs free up


def test_the_target_must_have_room_and_says_what_it_lacks() -> None:
    nodes = [h100("gpu-1"), h100("gpu-2")]
    pods = [mover(), pod("full", on="gpu-2", gpus=7, owner=None)]
    room = room_on(nodes, pods, mover(), target="gpu-2")
    assert not room.fits and room.short == {"nvidia.com/gpu": 1}
    assert room_on(nodes, pods, mover(), target="gpu-1").fits
    assert not room_on(nodes, pods, mover(), target="gone").fits


def test_whole_free_gpu_nodes_count_physical_gpus_of_nodes_without_gpu_pods() -> None:
    nodes = [h100("gpu-1"), h100("gpu-2"), h100("gpu-3"), node("cpu-1")]
    pods = [mover(), pod("cpu-only", on="gpu-2"), pod("leaving", on="gpu-3", gpus=1, deleting=True)]
    assert whole_free_gpu_nodes(nodes, pods) == {"gpu-2": 8}  # a terminating pod still holds gpu-3

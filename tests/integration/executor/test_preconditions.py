"""Never race: every node patch is built from a fresh read and sent with its resourceVersion, so changes made meanwhile survive."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from compactor.actions.port import annotations as ann
from tests.fakecluster import FakeCluster, Obj
from tests.scenarios.executor import SETTINGS, assert_clean, make_plan, run, setup
from tests.scenarios.steering import spare_node_beside_a_freeable_one

AUTOSCALER_TAINT = {"key": "ToBeDeletedByClusterAutoscaler", "value": "1767225600", "effect": "NoSchedule"}


def before_first_patch(
    c: FakeCluster, wanted: Callable[[str, Obj], bool], meanwhile: Callable[[str], None]
) -> list[str]:
    """Run ``meanwhile(node)`` just before the first node patch that ``wanted`` picks reaches the cluster; the nodes it ran on."""
    original = c.patch_node
    fired: list[str] = []

    def patch_node(name: str, patch: Obj) -> Obj:
        if not fired and wanted(name, patch):
            fired.append(name)
            meanwhile(name)
            c.touch_node(name)
        return original(name, patch)

    c.patch_node = patch_node  # type: ignore[method-assign]
    return fired


def test_a_taint_added_while_the_node_is_released_survives_the_reservation() -> None:
    c, plan = setup()
    settings = SETTINGS.amended(after_drain="taint")
    releasing = before_first_patch(
        c,
        lambda _n, p: ann.AFTER_DRAIN in p["metadata"].get("annotations", {}),
        lambda n: c.nodes[n]["spec"].setdefault("taints", []).append(dict(AUTOSCALER_TAINT)),
    )
    reserved: list[list[str]] = []
    real_patch = c.patch_node

    def watching(name: str, patch: dict[str, Any]) -> dict[str, Any]:
        out = real_patch(name, patch)
        if patch["metadata"].get("annotations", {}).get(ann.AFTER_DRAIN) == "taint" and name in releasing:
            reserved.append([t["key"] for t in out["spec"]["taints"]])
        return out

    c.patch_node = watching  # type: ignore[method-assign]
    report = run(c, plan, settings)
    assert report.status == "succeeded", report.reason
    (node,) = releasing
    # the autoscaler's taint is kept beside ours
    assert reserved == [["ToBeDeletedByClusterAutoscaler", settings.executor.taint_key]]
    # and when the same run lifts the reservation at its TTL, the autoscaler's taint is still kept
    assert [t["key"] for t in c.nodes[node]["spec"]["taints"]] == ["ToBeDeletedByClusterAutoscaler"]
    assert not c.nodes[node]["spec"].get("unschedulable")


def test_a_node_an_operator_cordons_while_it_is_being_held_stays_the_operators() -> None:
    objects = spare_node_beside_a_freeable_one()
    c, plan = FakeCluster(objects, scheduler="spread"), make_plan(objects)
    taken = before_first_patch(
        c,
        lambda _n, p: bool(p["metadata"].get("annotations", {}).get(ann.HELD_FOR)),
        lambda n: c.nodes[n]["spec"].update(unschedulable=True),
    )
    report = run(c, plan)
    assert report.status == "succeeded", report.reason
    (node,) = taken
    # our hold lifted, their cordon kept
    assert c.operator_cordons() == [node] and not ann.is_ours(c.nodes[node], ann.IDENTITY)
    assert_clean(c, still_cordoned=(node,))

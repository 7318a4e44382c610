"""A pod the steering policy pinned may move again (found on a real control plane: every pod a run had moved stayed put).

The policy ANDs ``metadata.name In [node]`` into the replacement's required node affinity and marks it
``compactor.io/steered-to``; its owner's template has neither, so the next replacement of that pod goes wherever a later
plan sends it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from compactor.actions.steering.pin import pinned
from compactor.app.plan_document import build_plan
from compactor.planner.request import PlanRequest
from compactor.planner.rules.pins import without_own_pins
from compactor.settings.bundles import PlannerSettings
from tests.builders import cluster, node, pod
from tests.plancheck import check_plan

NOW = datetime(2026, 1, 1, tzinfo=UTC)
SETTINGS = PlannerSettings.of(min_replicas=1, objective="max-free", time_limit_seconds=5)
ZONE_A = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
        }
    }
}


def _cluster(moved: dict[str, Any]) -> list[dict[str, Any]]:
    """g1 runs only ``moved``; g0 has room for it (a bare pod keeps g0 busy)."""
    return [
        node("g0", gpus=8, labels={"zone": "a"}),
        node("g1", gpus=8, labels={"zone": "a"}),
        pod("anchor", on="g0", gpus=4, owner=None),
        moved,
    ]


def _parsed(raw: dict[str, Any]) -> Any:
    return cluster(*_cluster(raw)).pods[-1]


def test_a_replacement_the_policy_pinned_is_planned_like_its_siblings() -> None:
    moved = pinned(pod("web-1", on="g1", gpus=1, owner="ReplicaSet/web"), "g1")
    snapshot = cluster(*_cluster(moved))
    plan = build_plan(PlanRequest.of(snapshot, SETTINGS, source="test", now=NOW))
    assert [(m.pod, m.from_node, m.to_node) for m in plan.moves] == [
        ("default/web-1", "g1", "g0")
    ] and plan.freed_nodes == ["g1"]
    assert check_plan(snapshot, plan, SETTINGS) == []


def test_the_pod_keeps_its_own_node_affinity_and_a_pin_its_template_wrote_itself() -> None:
    own = pod("web-1", on="g1", gpus=1, owner="ReplicaSet/web", affinity=ZONE_A)
    seen = without_own_pins(cluster(*_cluster(pinned(own, "g1")))).pods[-1]
    assert seen.affinity == _parsed(own).affinity  # the zone rule stays, the pin goes
    fixed = pod(
        "web-1",
        on="g1",
        gpus=1,
        owner="ReplicaSet/web",
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["g1"]}]}
                    ]
                }
            }
        },
    )
    plan = build_plan(PlanRequest.of(cluster(*_cluster(fixed)), SETTINGS, source="test", now=NOW))
    assert plan.moves == []  # no steered-to mark: the pin is the owner's own rule
    twice = without_own_pins(cluster(*_cluster(pinned(fixed, "g1")))).pods[-1]
    assert twice.affinity == _parsed(fixed).affinity  # the policy's copy goes, the template's stays


def test_a_pending_pod_keeps_its_pin_it_belongs_to_a_run_in_progress() -> None:
    waiting = pinned(pod("web-2", gpus=1, owner="ReplicaSet/web"), "g1")
    snapshot = cluster(node("g1", gpus=8), waiting)
    assert without_own_pins(snapshot) is snapshot

"""What a move costs (issue [15] item 0): the capacity a replica holds, how long it takes to start, what its owners said.

A cluster shaped like the source article's: A100-40GB nodes cut into seven 1g.5gb slices each (56 per 8-GPU node), BERT
replicas on single slices. Moving a slice restarts an eighth of a GPU; the old price counted it like an 8-GPU replica,
and balanced declined the node five such moves free."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from compactor.app.plan_document import build_plan
from compactor.model.types import Pod
from compactor.planner.request import PlanRequest
from compactor.planner.rules.price import Pricing, describe, gpu_equivalents, resource_equivalents
from compactor.settings.bundles import PlannerSettings
from compactor.settings.cost import MoveCostSettings
from tests.builders import cluster, node, pod

NOW = datetime(2026, 1, 1, tzinfo=UTC)
SLICES = {"1g.5gb": 56}  # an A100-40GB x 8, all-1g.5gb


def _pricing(*objects: dict[str, Any], **cfg: Any) -> tuple[Pricing, dict[str, Pod]]:
    snapshot = cluster(*objects)
    return Pricing.of(snapshot, MoveCostSettings(**cfg)), {p.name: p for p in snapshot.pods}


def test_a_move_costs_what_its_replica_holds_a_slice_little_and_an_eight_gpu_server_much() -> None:
    pricing, pods = _pricing(
        node("m", mig=SLICES),
        node("g", gpus=8),
        pod("slice", on="m", mig="1g.5gb"),
        pod("one", on="g", gpus=1),
        pod("eight", gpus=8),
        pod("web", on="g"),
    )
    assert gpu_equivalents(pods["slice"], pricing.equivalents) == 0.125
    assert {name: pricing.cost(p) for name, p in pods.items()} == {"slice": 56, "one": 100, "eight": 450, "web": 50}
    flat, pods = _pricing(
        node("m", mig=SLICES),
        node("g", gpus=8),
        pod("slice", on="m", mig="1g.5gb"),
        pod("eight", gpus=8),
        capacity_share=0,
    )
    assert {flat.cost(p) for p in pods.values()} == {100}  # capacity_share 0: every move one move, as before


def test_start_up_is_the_workloads_longest_from_scheduled_to_ready_in_whole_minutes_and_capped() -> None:
    slow = {"on": "g", "gpus": 1, "owner": "ReplicaSet/llm", "scheduled": "2026-01-01T00:00:00Z"}
    pricing, pods = _pricing(
        node("g", gpus=8),
        pod("llm-a", ready_since="2026-01-01T00:10:10Z", **slow),  # 10 min 10 s: 10 minutes
        pod("llm-b", ready_since="2026-01-01T00:02:00Z", **slow),  # started faster, priced like its workload
        pod(
            "other",
            on="g",
            gpus=1,
            owner="ReplicaSet/other",
            scheduled="2026-01-01T00:00:00Z",
            ready_since="2026-01-01T00:00:20Z",
        ),
    )
    assert pods["llm-a"].startup_seconds == 610
    assert [pricing.price(pods[n]).startup for n in ("llm-a", "llm-b", "other")] == [50, 50, 0]
    said, pods = _pricing(
        node("g", gpus=8),
        pod("x", on="g", gpus=1, annotations={"compactor.io/startup-seconds": "1e9"}),
        pod("y", on="g", gpus=1, annotations={"compactor.io/startup-seconds": "soon"}),
    )
    assert said.price(pods["x"]).startup == 5 * 60  # the annotation wins, counted up to max_startup_minutes
    assert said.price(pods["y"]).startup == 0  # not a number: nothing said


def test_owners_say_what_a_replica_is_worth_by_priority_deletion_cost_and_annotation() -> None:
    cost = "controller.kubernetes.io/pod-deletion-cost"
    pricing, pods = _pricing(
        node("g", gpus=8),
        pod("kept", on="g", gpus=1, annotations={cost: "250"}),
        pod("spare", on="g", gpus=1, annotations={cost: "-500"}),
        pod("vip", on="g", gpus=1, priority=3000),
        pod("dear", on="g", gpus=1, annotations={"compactor.io/move-cost": "inf"}),
        pod("odd", on="g", gpus=1, annotations={"compactor.io/move-cost": "nan", cost: "many"}),
        per_deletion_cost_step=10,
        per_priority_step=20,
    )
    owner = {name: pricing.price(p).owner for name, p in pods.items()}
    assert owner == {"kept": 20, "spare": 0, "vip": 60, "dear": 1_000_000, "odd": 0}


def test_the_price_in_words_names_every_part_that_counts() -> None:
    assert describe(MoveCostSettings()) == (
        "a move costs 0.5 + 0.5 x GPU-equivalents restarted + 0.05 per minute of start-up "
        "(up to 60) + the pod's compactor.io/move-cost annotation (in moves)"
    )
    assert describe(MoveCostSettings(capacity_share=0, per_startup_minute=0, per_priority_step=10)).startswith(
        "a move costs 1 per restart + 0.1 per 1000 of priority"
    )


def test_resources_stand_for_what_their_nodes_say() -> None:
    snapshot = cluster(node("m", mig=SLICES), node("g", gpus=8))
    assert resource_equivalents(snapshot) == {"nvidia.com/mig-1g.5gb": 0.125, "nvidia.com/gpu": 1.0}


def _article_cluster() -> list[dict[str, Any]]:
    """Five 8-GPU A100 nodes cut into 1g.5gb slices: m0 runs five BERT replicas, the others ten each (room for m0's five)."""
    objects: list[dict[str, Any]] = [node(f"m{i}", mig=SLICES) for i in range(5)]
    objects += [
        pod(f"bert-{i}-{k}", on=f"m{i}", mig="1g.5gb", owner="ReplicaSet/bert")
        for i in range(5)
        for k in range(5 if i == 0 else 10)
    ]
    return objects


@pytest.mark.parametrize(("share", "freed"), [(0.5, ["m0"]), (0.0, [])])
def test_on_a_cluster_like_the_articles_the_default_plan_frees_the_node_five_slice_moves_free(
    share: float, freed: list[str]
) -> None:
    settings = PlannerSettings.of(min_replicas=1, time_limit_seconds=5, move_cost={"capacity_share": share})
    plan = build_plan(PlanRequest.of(cluster(*_article_cluster()), settings, source="test", now=NOW))
    assert plan.objective == "balanced" and plan.freed_nodes == freed
    # 5 x 0.56 = 2.8 moves for 8 GPUs (0.35 a GPU) is within the 0.5 balanced pays; 5 moves of 1 (0.625 a GPU) is not.
    assert len(plan.moves) == len(freed) * 5
    assert {m.cost for m in plan.moves} <= {0.56}


@pytest.mark.parametrize(("per_minute", "freed"), [(5, ["g1"]), (0, ["g0", "g1"])])
def test_a_model_server_with_a_long_warm_up_is_left_where_a_quick_one_moves(per_minute: int, freed: list[str]) -> None:
    """g0's replica took 40 minutes to become Ready, g1's 30 s: at a price of 0.2 moves a GPU, freeing g1 (1 move for 8
    GPUs) pays and freeing g0 (1 + 40 x 0.05 = 3 moves) does not; with start-up not counted both pay."""

    def replica(name: str, on: str, ready: str) -> dict[str, Any]:
        return pod(name, on=on, gpus=1, owner=f"ReplicaSet/{name}", scheduled="2026-01-01T00:00:00Z", ready_since=ready)

    objects = [
        node("g0", gpus=8),
        node("g1", gpus=8),
        node("g2", gpus=8),
        pod("fill", on="g2", gpus=4, owner="ReplicaSet/fill"),
        replica("slow", "g0", "2026-01-01T00:40:00Z"),
        replica("quick", "g1", "2026-01-01T00:00:30Z"),
    ]
    settings = PlannerSettings.of(
        min_replicas=1, time_limit_seconds=5, balanced_moves_per_gpu=0.2, move_cost={"per_startup_minute": per_minute}
    )
    plan = build_plan(PlanRequest.of(cluster(*objects), settings, source="test", now=NOW))
    assert sorted(plan.freed_nodes) == freed
    assert {m.pod: m.cost for m in plan.moves}["default/quick"] == 1.0

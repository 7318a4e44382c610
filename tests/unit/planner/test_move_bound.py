"""Whole-cluster move bounds (issue 13, items 3 and 4): the fewest moves any plan needs to free so many GPUs, and the
most GPUs any plan frees within N moves. Each is a bound the plan report prints, so each must never claim more than
the cluster allows: hand-checked clusters here, random ones against a brute force in tests/property."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from compactor.app.plan_document import build_plan
from compactor.planner.cpsat.deadline import Deadline
from compactor.planner.problem import Problem, build_problem
from compactor.planner.request import PlanRequest
from compactor.planner.search.move_bound import fewest_moves_cost, most_freed_within
from compactor.settings.bundles import PlannerSettings
from tests.builders import cluster, node, pod

NOW = datetime(2026, 1, 1, tzinfo=UTC)
MOVE = PlannerSettings.of().aims.move_cost.base  # the cost of one move
BY_COUNT = {"capacity_share": 0.0}  # every move costs one: these bounds are read as move counts


def _problem(*objects: dict[str, Any], **settings: Any) -> Problem:
    snapshot = cluster(*objects)
    return build_problem(
        snapshot, PlannerSettings.of(min_replicas=1, move_cost=BY_COUNT, **settings), max_targets=len(snapshot.nodes)
    )


def _fewest(problem: Problem, gpus: int, pending: int = 0) -> int | None:
    found = fewest_moves_cost(problem, freed_gpus=gpus, pending_weight=pending, deadline=Deadline(5, 1))
    return None if found is None else found // MOVE


def _three_nodes() -> list[dict[str, Any]]:
    """g0 runs one 2-GPU pod, g1 three 1-GPU pods, g2 two 2-GPU pods: 9 GPUs of 24 in use."""
    return [
        node("g0", gpus=8),
        node("g1", gpus=8),
        node("g2", gpus=8),
        pod("a", on="g0", gpus=2),
        pod("b1", on="g1", gpus=1),
        pod("b2", on="g1", gpus=1),
        pod("b3", on="g1", gpus=1),
        pod("c1", on="g2", gpus=2),
        pod("c2", on="g2", gpus=2),
    ]


def test_freeing_a_node_moves_at_least_the_pods_of_the_cheapest_node_that_frees_as_much() -> None:
    problem = _problem(*_three_nodes())
    assert _fewest(problem, 8) == 1  # g0's one pod
    assert _fewest(problem, 0) == 0


def test_no_bound_is_claimed_for_more_gpus_than_any_plan_frees() -> None:
    # Freeing two nodes leaves 8 GPUs for 9 GPUs of pods: no plan does it, so nothing is claimed about its moves.
    assert _fewest(_problem(*_three_nodes()), 16) is None


def test_a_pending_pod_needing_a_whole_node_adds_the_moves_that_empty_one() -> None:
    problem = _problem(*_three_nodes(), pod("big", gpus=8, owner="Job/big"))
    # Placing big empties a node (1 move at least: g0), and freeing 8 GPUs more empties another (2 more: g2's pods).
    assert _fewest(problem, 0, pending=1) == 1
    assert _fewest(problem, 8, pending=1) is None  # 9 + 8 GPUs of pods on the one node left: no plan


def test_moves_leaving_a_node_are_counted_by_its_cheapest_pods() -> None:
    """Costly pods (compactor.io/move-cost) count as such when their node must be emptied."""
    costly = {"compactor.io/move-cost": "4"}
    problem = _problem(
        node("g0", gpus=8),
        node("g1", gpus=8),
        node("g2", gpus=8),
        pod("a", on="g0", gpus=1, annotations=costly),
        pod("b1", on="g1", gpus=1),
        pod("b2", on="g1", gpus=1),
    )
    assert _fewest(problem, 8) == 2  # g1's two ordinary pods (2 moves) beat g0's one pod costed at 1 + 4 moves


def test_a_pod_asking_a_whole_node_needs_a_whole_hole_not_the_scattered_free_gpus() -> None:
    """Free GPUs scattered one per node hold no 8-GPU pod: moving 'big' (one move by GPU count) first needs a node
    emptied for it, so freeing 8 GPUs takes the 7 moves that empty a node of 1-GPU pods (the chunk rows; a fluid count
    of free GPUs claimed 1)."""
    nodes = [node(f"s{i}", gpus=8) for i in range(8)]
    small = [pod(f"p{i}-{j}", on=f"s{i}", gpus=1, owner=f"ReplicaSet/w{j}") for i in range(8) for j in range(7)]
    problem = _problem(node("big-node", gpus=8), pod("big", on="big-node", gpus=8), *nodes, *small)
    assert _fewest(problem, 8) == 7
    assert most_freed_within(problem, max_moves=6, pending_weight=0, deadline=Deadline(5, 1)) == 0


def test_pods_that_reach_only_part_of_their_pool_need_room_there() -> None:
    """a1's pod may only run on zone-a nodes, and a2 (the other) is full: a1 cannot be freed however much room zone b
    has, so freeing 8 GPUs takes b1's two pods (the restricted-target rows; the pool's total room claimed 1 move)."""
    zone_a = {"zone": "a"}
    only_a = {"zone": "a"}
    problem = _problem(
        node("a1", gpus=8, labels=zone_a),
        node("a2", gpus=8, labels=zone_a),
        node("b1", gpus=8, labels={"zone": "b"}),
        pod("r0", on="a1", gpus=1, node_selector=only_a, owner="ReplicaSet/r"),
        *[pod(f"r{i}", on="a2", gpus=1, node_selector=only_a, owner="ReplicaSet/r") for i in range(1, 9)],
        pod("u1", on="b1", gpus=1, owner="ReplicaSet/u"),
        pod("u2", on="b1", gpus=1, owner="ReplicaSet/u"),
    )
    assert _fewest(problem, 8) == 2


def test_within_a_move_cap_no_plan_frees_more_than_the_nodes_that_many_moves_empty() -> None:
    problem = _problem(*_three_nodes())
    assert most_freed_within(problem, max_moves=0, pending_weight=0, deadline=Deadline(5, 1)) == 0
    assert most_freed_within(problem, max_moves=1, pending_weight=0, deadline=Deadline(5, 1)) == 8
    # a third node holds 9 GPUs
    assert most_freed_within(problem, max_moves=5, pending_weight=0, deadline=Deadline(5, 1)) == 8


def test_mig_nodes_whose_pods_use_several_profiles_are_bounded() -> None:
    """A node running pods of two MIG profiles: the room its leaving pods make is counted per profile (a regression: the
    profile with fewer pods had too short a table, and every bound at 5,000 nodes came out 'no plan')."""
    mig = {"3g.20gb": 2, "2g.10gb": 3}
    problem = _problem(
        node("m0", mig=mig),
        node("m1", mig=mig),
        pod("p1", on="m0", mig="3g.20gb"),
        pod("q1", on="m0", mig="2g.10gb"),
        pod("q2", on="m0", mig="2g.10gb"),
        pod("q3", on="m1", mig="2g.10gb"),
    )
    gpus = problem.nodes[1].gpus
    assert _fewest(problem, gpus) == 1  # m1's one pod joins m0
    assert most_freed_within(problem, max_moves=1, pending_weight=0, deadline=Deadline(5, 1)) == gpus


def test_the_plan_report_states_the_bound_on_its_moves() -> None:
    plan = build_plan(
        PlanRequest.of(
            cluster(*_three_nodes()), PlannerSettings.of(min_replicas=1, objective="max-free"), source="test", now=NOW
        )
    )
    assert (plan.freed_gpus, len(plan.moves)) == (8, 1)
    # g0's one 2-GPU pod: 0.5 + 0.5 x 2 moves at the default price
    assert (plan.solver.move_cost, plan.solver.move_cost_bound, plan.solver.move_cost_gap) == (1.5, 1.5, 0)


def test_a_narrowed_plan_under_a_move_cap_is_measured_against_what_that_many_moves_can_free() -> None:
    """Three nodes could be freed (24 GPUs) but one move frees one: the bound the report states is 8, not 24."""
    objects = [
        node("g0", gpus=8),
        node("g1", gpus=8),
        node("g2", gpus=8),
        node("t", gpus=8),
        pod("anchor", on="t", gpus=4, owner=None),
        pod("a", on="g0", gpus=1),
        pod("b", on="g1", gpus=1),
        pod("c1", on="g2", gpus=1),
        pod("c2", on="g2", gpus=1),
    ]
    config = PlannerSettings.of(min_replicas=1, objective="max-free", max_moves=1, max_candidate_pods=1)
    plan = build_plan(PlanRequest.of(cluster(*objects), config, source="test", now=NOW))
    assert "searched" in plan.solver.note  # narrowed: its own proofs hold only there
    assert (plan.freed_gpus, len(plan.moves)) == (8, 1)
    assert (plan.solver.bound, plan.solver.gap) == (8, 0)
    uncapped = build_plan(PlanRequest.of(cluster(*objects), config.amended(max_moves=None), source="test", now=NOW))
    assert uncapped.freed_gpus == 24


def test_pending_pods_that_may_cross_pools_do_not_pool_the_scraps_of_each() -> None:
    """Two pools, each with room for 5 more GPUs (3 beside an unmovable 5-GPU pod, 2 on the node of three 2-GPU pods):
    too little to empty a node of either. A pending 8-GPU pod may go to either pool; linking the pools by it, the bound
    counted 5 + 5 GPUs of room, enough to free a node: none can be."""

    def pool(prefix: str, product: str) -> list[dict[str, Any]]:
        return [
            node(f"{prefix}0", gpus=8, product=product),
            node(f"{prefix}1", gpus=8, product=product),
            pod(f"{prefix}-anchor", on=f"{prefix}0", gpus=5, owner=None),
            *[pod(f"{prefix}{i}", on=f"{prefix}1", gpus=2) for i in range(3)],
        ]

    objects = [*pool("a", "A100-SXM4-80GB"), *pool("h", "H100-80GB-HBM3"), pod("big", gpus=8, owner="Job/big")]
    config = PlannerSettings.of(min_replicas=1, objective="max-free", max_candidate_pods=1)
    plan = build_plan(PlanRequest.of(cluster(*objects), config, source="test", now=NOW))
    assert "searched" in plan.solver.note  # narrowed: the whole-cluster bound is the one stated
    assert (plan.freed_gpus, len(plan.placed_pending)) == (0, 0)
    assert plan.solver.bound == 0

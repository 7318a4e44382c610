"""The large-neighbourhood search (``planner/search/lns/improve.py``): it only ever improves a plan, and every plan it returns is valid.

Validity is checked by the independent checker's rules (``tests/plancheck``) on the plan's concrete moves: each pod
may move, each target accepts it, every node fits its load after the plan, the move limits hold, and the freed GPUs
the planner counts are the ones recomputed from scratch. (The order of the moves is not checked: ``improve`` returns
end states; ``solver.solve`` makes them runnable one eviction at a time.)
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from compactor.model.load import build_snapshot
from compactor.model.types import Snapshot
from compactor.planner.cpsat.deadline import Deadline
from compactor.planner.objective import Assignment, empty_nodes, rank, within_limits
from compactor.planner.problem import Problem, build_problem, gpu_pods_before
from compactor.planner.search.greedy import greedy
from compactor.planner.search.lns.improve import Stats, improve
from compactor.planner.solution import pairs
from compactor.settings.bundles import PlannerSettings
from tests.builders import cluster, node, pod
from tests.plancheck import (
    add,
    capacity_of,
    demand,
    freed_filled,
    loads_before,
    movable_pods,
    over,
    placeable_reason,
    target_reason,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from generate_cluster import generate  # benchmarks/ is not a package

SETTINGS = PlannerSettings.of(min_replicas=1, workers=2)


def violations(snapshot: Snapshot, problem: Problem, assignment: Assignment, settings: PlannerSettings) -> list[str]:
    """What the independent checker's rules find wrong with the assignment's moves and placements (empty: valid)."""
    moves, placements = pairs(problem, assignment, empty_nodes(problem, assignment))
    movable = movable_pods(snapshot, settings)
    nodes = {n.name: n for n in snapshot.nodes}
    before = loads_before(snapshot)
    after = {name: dict(load) for name, load in before.items()}
    where: dict[str, str] = {}
    errors: list[str] = []
    for move in moves:
        source, target = problem.nodes[move.source].node.name, problem.nodes[move.target].node.name
        if movable[move.pod.key] or move.pod.node_name != source:
            errors.append(f"{move.pod.key}: may not move from {source} ({movable[move.pod.key]})")
        why = target_reason(move.pod, nodes[target], snapshot, settings)
        if why:
            errors.append(f"{move.pod.key} -> {target}: {why}")
        add(after[source], demand(move.pod), -1)
        add(after[target], demand(move.pod))
        where[move.pod.key] = target
    for placement in placements:
        target = problem.nodes[placement.target].node.name
        why = placeable_reason(placement.pod, snapshot, settings) or target_reason(
            placement.pod, nodes[target], snapshot, settings
        )
        if why:
            errors.append(f"{placement.pod.key} placed on {target}: {why}")
        add(after[target], demand(placement.pod))
        where[placement.pod.key] = target
    for name, load in after.items():
        if over(load, capacity_of(nodes[name], before[name], snapshot)):
            errors.append(f"{name} over capacity")
    if settings.caps.max_moves is not None and len(moves) > settings.caps.max_moves:
        errors.append(f"{len(moves)} moves > maxMoves {settings.caps.max_moves}")
    per_node = Counter(problem.nodes[m.source].node.name for m in moves)
    if (
        settings.caps.max_moves_per_node is not None
        and max(per_node.values(), default=0) > settings.caps.max_moves_per_node
    ):
        errors.append(f"a node loses more than {settings.caps.max_moves_per_node} pods")
    _, _, net = freed_filled(snapshot, where)
    if net != rank(problem, assignment)[1] - problem.empty_before_gpus:
        errors.append(
            f"net freed GPUs {net} recomputed, {rank(problem, assignment)[1] - problem.empty_before_gpus} counted"
        )
    return errors


def _one_cheap_node_or_one_costly_node(**config: Any) -> tuple[Snapshot, Problem, PlannerSettings]:
    """Four 8-GPU nodes: ``t`` keeps 4 GPUs free beside an unmovable anchor; ``x`` and ``y`` run one 4-GPU pod each,
    ``z`` three 2-GPU pods. 18 GPUs in use on 32 and ``t`` cannot be freed, so one of x, y, z can: x or y by one move
    (onto the other), z by three (two onto t, one onto x or y)."""
    objects = [
        node("t", gpus=8),
        node("x", gpus=8),
        node("y", gpus=8),
        node("z", gpus=8),
        pod("anchor", on="t", gpus=4, owner=None),
        pod("x1", on="x", gpus=4, owner="ReplicaSet/x"),
        pod("y1", on="y", gpus=4, owner="ReplicaSet/y"),
        *(pod(f"z{i}", on="z", gpus=2, owner="ReplicaSet/z") for i in range(3)),
    ]
    snapshot = cluster(*objects)
    settings = SETTINGS.amended(**config)
    return snapshot, build_problem(snapshot, settings, max_targets=len(snapshot.nodes)), settings


def _drained_z(problem: Problem) -> Assignment:
    """The greedy drain of ``z`` alone: frees 8 GPUs with three moves."""
    z = next(s.index for s in problem.nodes if s.node.name == "z")
    start = greedy(problem, order=[z])
    assert empty_nodes(problem, start) == {z} and start.moves(problem) == 3
    return start


def test_a_freed_node_that_cost_three_moves_is_traded_for_one_that_costs_one() -> None:
    snapshot, problem, settings = _one_cheap_node_or_one_costly_node()
    start = _drained_z(problem)
    stats = Stats()
    better = improve(problem, start, Deadline(5), stats=stats)
    assert rank(problem, better)[1] == rank(problem, start)[1] == 8  # the same GPUs freed
    assert better.moves(problem) == 1
    assert stats.accepted >= 1
    assert violations(snapshot, problem, better, settings) == []


def test_the_move_cap_holds_and_the_fixed_part_counts_against_it() -> None:
    """maxMoves 3: the start spends all three on z. The cheaper plan (one move) is within the cap too."""
    snapshot, problem, settings = _one_cheap_node_or_one_costly_node(max_moves=3)
    start = _drained_z(problem)
    assert within_limits(problem, start)
    better = improve(problem, start, Deadline(5))
    assert better.moves(problem) == 1 and within_limits(problem, better)
    assert violations(snapshot, problem, better, settings) == []


def test_a_pending_pod_the_start_left_pending_is_placed_where_a_drain_makes_room() -> None:
    """``a`` and ``b`` run one 4-GPU pod each; a 6-GPU pod is pending. The start does nothing; the pending pod fits only
    once one of them moves onto the other, which the search finds (placing a pod outranks everything else)."""
    snapshot = cluster(
        node("a", gpus=8),
        node("b", gpus=8),
        pod("a1", on="a", gpus=4, owner="ReplicaSet/a"),
        pod("b1", on="b", gpus=4, owner="ReplicaSet/b"),
        pod("wants6", gpus=6),
    )
    problem = build_problem(snapshot, SETTINGS, max_targets=len(snapshot.nodes))
    start = Assignment.unchanged(problem)
    better = improve(problem, start, Deadline(5))
    assert rank(problem, better)[0] == 1 and better.moves(problem) == 1
    assert violations(snapshot, problem, better, SETTINGS) == []


def test_an_expired_budget_returns_the_start_unchanged_at_once() -> None:
    _, problem, _ = _one_cheap_node_or_one_costly_node()
    start = _drained_z(problem)
    budget = Deadline(1e-6)
    time.sleep(0.001)
    started = time.monotonic()
    stats = Stats()
    assert improve(problem, start, budget, stats=stats) is start
    assert stats.iterations == 0 and time.monotonic() - started < 0.5


def _generated(seed: int, settings: PlannerSettings) -> tuple[Snapshot, Problem]:
    snapshot = build_snapshot(generate(60, 480, seed=seed)["items"], source=f"generated-{seed}")
    return snapshot, build_problem(snapshot, settings, max_targets=len(snapshot.nodes))


def _busiest_first(problem: Problem) -> Assignment:
    """A poor start: greedy draining the nodes with the most GPU pods first (greedy's own order, least used first, is
    optimal on these small clusters and would leave nothing to improve)."""
    pods = gpu_pods_before(problem)
    return greedy(
        problem,
        order=sorted((s.index for s in problem.nodes if s.can_empty and pods[s.index]), key=lambda n: (-pods[n], n)),
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_on_generated_clusters_a_poor_start_improves_and_every_plan_is_valid(seed: int) -> None:
    snapshot, problem = _generated(seed, SETTINGS)
    start = _busiest_first(problem)
    stats = Stats()
    better = improve(problem, start, Deadline(3), seed=seed, stats=stats)
    assert rank(problem, better) > rank(problem, start) and stats.accepted >= 1
    assert within_limits(problem, better)
    assert violations(snapshot, problem, start, SETTINGS) == violations(snapshot, problem, better, SETTINGS) == []


@pytest.mark.parametrize("seed", [1, 2])
def test_on_generated_clusters_greedy_is_never_made_worse(seed: int) -> None:
    snapshot, problem = _generated(seed, SETTINGS)
    start = greedy(problem)
    better = improve(problem, start, Deadline(2), seed=seed)
    assert rank(problem, better) >= rank(problem, start)
    assert violations(snapshot, problem, better, SETTINGS) == []


@pytest.mark.parametrize("seed", [1, 2])
def test_on_generated_clusters_move_limits_hold(seed: int) -> None:
    settings = SETTINGS.amended(max_moves=6, max_moves_per_node=2)
    snapshot, problem = _generated(seed, settings)
    start = _busiest_first(problem)
    better = improve(problem, start, Deadline(3), seed=seed)
    assert rank(problem, better) >= rank(problem, start)
    assert within_limits(problem, better) and better.moves(problem) <= 6
    assert violations(snapshot, problem, better, settings) == []


def test_a_narrowed_plan_is_searched_further_and_what_runs_passes_the_checker() -> None:
    """``solve`` follows a narrowed model with the search (``solver._improved``): the note says how far it went, and the
    plan, whichever found it, is valid and frees what the better of the two frees (one node, one move here)."""
    from datetime import UTC, datetime

    from compactor.app.plan_document import build_plan
    from compactor.planner.request import PlanRequest
    from tests.plancheck import check_plan

    snapshot, _, settings = _one_cheap_node_or_one_costly_node(max_candidate_pods=1, objective="max-free")
    plan = build_plan(PlanRequest.of(snapshot, settings, source="test", now=datetime(2026, 1, 1, tzinfo=UTC)))
    assert "neighbourhood(s) of the whole cluster" in plan.solver.note
    assert (plan.freed_gpus, len(plan.moves)) == (8, 1)
    assert check_plan(snapshot, plan, settings) == []

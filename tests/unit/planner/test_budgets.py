"""Run budgets (issue [15] item 1): nodes of a pool drained at once, replicas of a workload moved in one run.

The plan is the best point of the trade-off curve one run can carry out whole (issue 17: one plan, one story); when
none can, the chosen point cut to whole source nodes, a row of the curve of its own. The plan says which budget held
the rest back for a later run."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from compactor.app.plan_document import build_plan
from compactor.app.sources import example_path
from compactor.model.load import load_files
from compactor.model.types import Snapshot
from compactor.planner.budget_cut import point_within_budgets
from compactor.planner.cpsat.deadline import deadline_for
from compactor.planner.plan import CompactionPlan
from compactor.planner.problem import Problem, build_problem
from compactor.planner.request import PlanRequest
from compactor.planner.rules.budgets import groups, koordinator_unavailable, share_of, within_cap
from compactor.planner.search.frontier import Point, summarise
from compactor.planner.search.greedy import greedy
from compactor.render.plan import render_plan
from compactor.settings.bundles import PlannerSettings
from compactor.settings.caps import CapsSettings
from tests.builders import cluster, node, pdb, pod
from tests.plancheck import check_plan

NOW = datetime(2026, 1, 1, tzinfo=UTC)
SETTINGS = PlannerSettings.of(min_replicas=1, objective="max-free", time_limit_seconds=5)


def _plan(objects: list[dict[str, Any]], **budgets: Any) -> CompactionPlan:
    snapshot = cluster(*objects)
    plan = build_plan(PlanRequest.of(snapshot, SETTINGS, source="test", now=NOW, budgets=CapsSettings(**budgets)))
    assert check_plan(snapshot, plan, SETTINGS) == []
    return plan


def _four_nodes_to_free() -> list[dict[str, Any]]:
    """g0..g3 each run one 1-GPU replica of their own workload; t has room for all four: max-free frees g0..g3."""
    return [
        node("t", gpus=8),
        pod("anchor", on="t", gpus=4, owner=None),
        *[node(f"g{i}", gpus=8) for i in range(4)],
        *[pod(f"w{i}", on=f"g{i}", gpus=1, owner=f"ReplicaSet/w{i}") for i in range(4)],
    ]


def test_koordinators_default_unavailability_per_workload() -> None:
    assert [koordinator_unavailable(r) for r in (1, 3, 4, 10, 11, 25, 100)] == [1, 1, 2, 2, 2, 3, 10]


def test_a_pool_share_is_rounded_down_but_never_below_one() -> None:
    assert (share_of(3, 40), share_of("10%", 40), share_of("10%", 5), share_of("100%", 7)) == (3, 4, 1, 7)


@pytest.mark.parametrize("limit", [2, "40%"])
def test_at_most_so_many_nodes_of_a_pool_are_drained_by_one_run(limit: int | str) -> None:
    plan = _plan(_four_nodes_to_free(), max_draining_per_pool=limit)
    assert len(plan.freed_nodes) == 2 and len(plan.moves) == 2 and plan.freed_gpus == 16
    assert plan.held_back == (
        "caps.max_draining_per_pool (2 of pool NVIDIA-A100-SXM4-40GB's 5 nodes at once) reached by the max-free "
        "point (4 moves, 32 usable GPUs): this plan is the best point one run can carry out whole (2 move(s)); the rest "
        "waits for a later run"
    )
    chosen = [p for p in plan.frontier if p.chosen]  # the curve's mark is on the plan printed
    assert [(p.freed_nodes, p.moves) for p in chosen] == [(2, 2)]
    assert _plan(_four_nodes_to_free()).held_back == ""  # no budget: the whole point


def _replicas_of_one_workload(replicas: int) -> list[dict[str, Any]]:
    """``replicas`` of ReplicaSet/llm, one per node g0.., and room on t for every one of them."""
    return [
        node("t", gpus=8),
        pod("anchor", on="t", gpus=1, owner=None),
        *[node(f"g{i}", gpus=8) for i in range(replicas)],
        *[pod(f"llm-{i}", on=f"g{i}", gpus=1, owner="ReplicaSet/llm", labels={"app": "llm"}) for i in range(replicas)],
    ]


def test_auto_moves_a_workload_without_a_pdb_as_koordinator_would_and_leaves_one_with_a_pdb_to_its_pdb() -> None:
    plan = _plan(_replicas_of_one_workload(5), max_moves_per_workload="auto")
    assert len(plan.moves) == 2  # 5 replicas, no PDB: 2 per run
    assert plan.held_back.startswith(
        "caps.max_moves_per_workload (default/ReplicaSet/llm: 2 per run: 5 replicas, no "
        "PodDisruptionBudget) reached by the max-free point (5 moves, 40 usable GPUs)"
    )
    guarded = _plan(
        [*_replicas_of_one_workload(5), pdb("llm", match={"app": "llm"}, allowed=1)], max_moves_per_workload="auto"
    )
    # the PDB governs: the executor moves one at a time under it
    assert len(guarded.moves) == 5 and guarded.held_back == ""
    fixed = _plan(_replicas_of_one_workload(5), max_moves_per_workload=1)
    assert len(fixed.moves) == 1 and "default/ReplicaSet/llm: 1 per run" in fixed.held_back


def test_a_node_whose_moves_would_pass_a_budget_is_skipped_and_a_later_one_that_fits_is_taken() -> None:
    """g0 runs two llm replicas (a cap of 1 refuses it whole), g1 one replica of another workload: g1 is taken."""
    objects = [
        node("t", gpus=8),
        pod("anchor", on="t", gpus=1, owner=None),
        node("g0", gpus=8),
        node("g1", gpus=8),
        pod("llm-0", on="g0", gpus=1, owner="ReplicaSet/llm"),
        pod("llm-1", on="g0", gpus=1, owner="ReplicaSet/llm"),
        pod("web-0", on="g1", gpus=1, owner="ReplicaSet/web"),
    ]
    plan = _plan(objects, max_moves_per_workload=1)
    assert [m.pod for m in plan.moves] == ["default/web-0"] and plan.freed_nodes == ["g1"]
    assert "caps.max_moves_per_workload (default/ReplicaSet/llm: 1 per run)" in plan.held_back


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("max_draining_per_pool", "ten", "expected a node count or a share"),
        ("max_draining_per_pool", "0%", "expected a node count"),
        ("max_draining_per_pool", 0, "at least 1"),
        ("max_moves_per_workload", 0, "at least 1"),
        ("max_moves_per_workload", "some", "auto"),
    ],
)
def test_budgets_that_mean_nothing_are_refused(field: str, value: object, says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        CapsSettings(**{field: value})


def test_a_count_from_the_environment_is_a_count() -> None:
    assert CapsSettings(max_draining_per_pool="3").max_draining_per_pool == 3


def test_the_node_drained_for_a_pending_pod_is_taken_first_whatever_its_place_in_the_plan() -> None:
    """The bundled example: the plan drains a100-gpu-03 for the pending 8-GPU pod and frees a100-gpu-02 (and a MIG
    node); one node of
    the pool at once keeps a100-gpu-03, since placing pending pods is the plan's first goal (and its drain comes first in
    the plan's own order too: issue 42)."""
    snapshot = load_files([example_path()])
    settings = PlannerSettings.of(time_limit_seconds=5)
    full = build_plan(PlanRequest.of(snapshot, settings, source="example", now=NOW))
    assert full.moves[0].from_node == "a100-gpu-03" and "a100-gpu-02" in full.freed_nodes
    cut = build_plan(
        PlanRequest.of(snapshot, settings, source="example", now=NOW, budgets=CapsSettings(max_draining_per_pool=1))
    )
    # its pod goes to a100-gpu-01 or -02, equally good: which one is the solver's (wall-clock) choice
    assert [m.from_node for m in cut.moves] == ["a100-gpu-03"] and cut.moves[0].to_node != "a100-gpu-03"
    assert [(p.pod, p.to_node) for p in cut.placed_pending] == [("llm/llama-70b-0", "a100-gpu-03")]
    assert check_plan(snapshot, cut, settings) == []


def test_when_no_point_fits_whole_the_chosen_one_is_cut_and_marked_as_a_row_of_its_own() -> None:
    """Two pending 8-GPU pods, each placed by moving one pod off g0 or g1: every point of the curve takes 2 evictions,
    over a cap of 1. The chosen point is cut to the node that fits, and the curve marks the cut, not the point."""
    objects = [
        node("t", gpus=8),
        pod("anchor", on="t", gpus=1, owner=None),
        *[node(f"g{i}", gpus=8) for i in range(2)],
        *[pod(f"w{i}", on=f"g{i}", gpus=1, owner=f"ReplicaSet/w{i}") for i in range(2)],
        *[pod(f"big-{i}", gpus=8, owner="Job/big") for i in range(2)],
    ]
    snapshot = cluster(*objects)
    plan = build_plan(
        PlanRequest.of(snapshot, SETTINGS, source="test", now=NOW, budgets=CapsSettings(), max_evictions=1)
    )
    assert check_plan(snapshot, plan, SETTINGS) == []
    assert len(plan.moves) == 1 and len(plan.placed_pending) == 1
    assert plan.held_back == "max_evictions_per_cycle (1) reached: 1 of 2 moves wait for a later run"
    rows = [p for p in plan.frontier if p.chosen]
    assert len(rows) == 1 and rows[0].budget_cut and rows[0].moves == 1
    assert "within the run budgets" in render_plan(plan, "text")


def test_a_move_onto_a_node_that_loses_pods_is_taken_or_left_with_that_node() -> None:
    """Issue 18: a budget cut kept a move onto a source node whose own moves it left out (the room it needed never
    came, and the run aborted as stale). A chain's nodes go together: web leaves b (for c) so that gpu-x lands on b."""
    plan = CompactionPlan.model_validate(
        {
            "metadata": {"id": "plan-chain", "createdAt": "2026-01-01T00:00:00Z", "source": "test"},
            "moves": [
                {"pod": "ml/gpu-x", "from": "a", "to": "b"},
                {"pod": "ml/web", "from": "b", "to": "c"},
                {"pod": "ml/other", "from": "d", "to": "c"},
            ],
            "solver": {"status": "OPTIMAL", "wallSeconds": 0.0},
        }
    )
    assert groups(plan.moves, []) == [["a", "b"], ["d"]]
    cut = within_cap(plan, 1, {})  # a and b need 2 evictions together: left whole, d's one fits
    assert [m.pod for m in cut.moves] == ["ml/other"]
    cut = within_cap(plan, 2, {})
    assert [m.pod for m in cut.moves] == ["ml/gpu-x", "ml/web"]


class _Unreplayable:
    """A greedy step whose plan nobody may ask for: concretising it would cost the time a large cluster's does."""

    def assignment(self, step: int) -> object:
        raise AssertionError(f"step {step} was concretised")


def _points_of_four_nodes() -> tuple[Problem, Snapshot, list[Point]]:
    snapshot = cluster(*_four_nodes_to_free())
    problem = build_problem(snapshot, SETTINGS, max_targets=len(snapshot.nodes))
    one = summarise(problem, greedy(problem))
    more = one.moves + 1
    wide = [Point(4, 32, more + i, one.cost + 1 + i, "FEASIBLE", 0, None, i, _Unreplayable(), 32) for i in range(40)]  # type: ignore[arg-type]
    return problem, snapshot, [one, *wide]


def test_points_with_more_moves_than_the_eviction_cap_are_refused_without_concretising_them() -> None:
    """At 5,000 nodes the max-free point and the 29 next ones each had thousands of moves over a cap of 50: concretising
    each took half a second, 17 s in all past the time limit. Their move counts alone refuse them."""
    problem, snapshot, points = _points_of_four_nodes()
    chosen = points[-1]
    point, held = point_within_budgets(
        problem, snapshot, points, chosen, CapsSettings(), points[0].moves, "max-free", deadline_for(SETTINGS, 5)
    )
    assert point is points[0]
    assert held.startswith(
        f"max_evictions_per_cycle ({points[0].moves}) reached by the max-free point ({chosen.moves} moves"
    )


def test_no_point_is_tried_once_the_time_is_spent_and_the_chosen_one_is_left_to_be_cut() -> None:
    problem, snapshot, points = _points_of_four_nodes()
    spent = deadline_for(SETTINGS, 0)
    chosen = points[-1]
    assert point_within_budgets(problem, snapshot, points, chosen, CapsSettings(), None, "max-free", spent) == (
        chosen,
        "",
    )

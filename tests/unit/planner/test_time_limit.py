"""The time limit is a contract (issue 13): ``solver.time_limit_seconds`` bounds the whole planning call, and a plan cut
short is still a valid plan, never less than the greedy warm start within the move limits, reported as unproven.

No test here measures time: a limit of a microsecond has run out, on any machine, before the problem is built, so every
phase after it takes its out-of-time path; the deterministic clock, which only CP-SAT spends, never cuts a phase.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

import pytest

from compactor.app.plan_document import build_plan
from compactor.cli import main
from compactor.planner import cpsat
from compactor.planner.cpsat.deadline import Deadline, OutOfTime
from compactor.planner.cpsat.levels import LevelResult
from compactor.planner.cpsat.variables import make_variables
from compactor.planner.objective import empty_nodes, within_limits
from compactor.planner.plan import CompactionPlan, SolverReport
from compactor.planner.problem import build_problem
from compactor.planner.request import PlanRequest
from compactor.planner.search.greedy import greedy
from compactor.planner.search.solver import SolveResult
from compactor.planner.search_stage import enough_time_limit
from compactor.planner.solver_report import solver_report
from compactor.render.plan import render_plan
from compactor.settings.bundles import PlannerSettings
from tests.builders import cluster, node, pod
from tests.plancheck import assert_valid

NOW = datetime(2026, 1, 1, tzinfo=UTC)
NO_TIME = 1e-6  # seconds: gone before the problem is built


def _three_drainable() -> list[dict[str, Any]]:
    """``t`` keeps 6 GPUs free beside an unmovable anchor; ``a`` runs one 1-GPU pod, ``b`` and ``c`` two each. Greedy
    drains the least used first, each onto ``t``: a (1 move), b (2), c (2): 24 GPUs for 5 moves."""
    return [
        node("t", gpus=8),
        node("a", gpus=8),
        node("b", gpus=8),
        node("c", gpus=8),
        pod("anchor", on="t", gpus=2, owner=None),
        pod("a1", on="a", gpus=1),
        pod("b1", on="b", gpus=1),
        pod("b2", on="b", gpus=1),
        pod("c1", on="c", gpus=1),
        pod("c2", on="c", gpus=1),
    ]


def _plan(objects: list[dict[str, Any]], **config: Any) -> CompactionPlan:
    snapshot = cluster(*objects)
    settings = PlannerSettings.of(**{"min_replicas": 1, "workers": 2, "objective": "max-free", **config})
    plan = build_plan(PlanRequest.of(snapshot, settings, source="test", now=NOW))
    assert_valid(snapshot, plan, settings)
    return plan


def test_with_time_enough_the_plan_is_proven() -> None:
    plan = _plan(_three_drainable(), time_limit_seconds=5)
    assert (plan.freed_gpus, len(plan.moves), plan.solver.status) == (24, 5, "OPTIMAL")
    assert "time limit" not in plan.solver.note
    assert plan.solver.plan_seconds > 0 and plan.solver.load_seconds is None


def test_with_no_time_left_the_plan_is_the_greedy_warm_start_and_says_so() -> None:
    plan = _plan(_three_drainable(), time_limit_seconds=NO_TIME)
    assert (plan.freed_gpus, len(plan.moves)) == (24, 5)  # what greedy drains
    assert plan.solver.status == "FEASIBLE"  # not proven: no level was solved
    assert all(level["status"] == "UNKNOWN" and level["bound"] is None for level in plan.solver.levels)
    assert plan.solver.bound is None and plan.solver.gap is None
    assert "time limit: no CP-SAT model could be built" in plan.solver.note
    assert "no trade-off curve" in plan.solver.note
    # The curve is the max-free plan alone (its point may still be proven cheapest: freeing 3 nodes moves their 5 pods).
    assert [(p.freed_gpus, p.moves, p.chosen) for p in plan.frontier] == [(24, 5, True)]


@pytest.mark.parametrize("objective", ["balanced", "pending-only"])
def test_with_no_time_left_every_objective_gets_the_warm_start(objective: str) -> None:
    """Without a curve the max-free plan is the only point: no objective falls back to doing nothing."""
    plan = _plan(_three_drainable(), time_limit_seconds=NO_TIME, objective=objective)
    assert (plan.freed_gpus, len(plan.moves), plan.solver.status) == (24, 5, "FEASIBLE")


def test_a_cap_below_greedy_keeps_the_drains_that_fit_when_no_level_has_time() -> None:
    """The issue's report: with --max-moves under greedy's move count and every level out of time the plan had no move,
    because the uncapped warm start broke the cap and was dropped for the unchanged cluster. Greedy now keeps the cap:
    draining a (1 move) and b (2 moves) fit 3, c would not."""
    plan = _plan(_three_drainable(), time_limit_seconds=NO_TIME, max_moves=3)
    assert (plan.freed_gpus, len(plan.moves), plan.solver.status) == (16, 3, "FEASIBLE")
    assert sorted(plan.freed_nodes) == ["a", "b"]
    proven = _plan(_three_drainable(), time_limit_seconds=5, max_moves=3)  # with time: the same, proven
    assert (proven.freed_gpus, len(proven.moves), proven.solver.status) == (16, 3, "OPTIMAL")


def test_a_cap_that_no_drain_fits_leaves_the_cluster_as_it_is() -> None:
    plan = _plan(_three_drainable(), time_limit_seconds=NO_TIME, max_moves=0)
    assert plan.moves == [] and plan.freed_gpus == 0


@pytest.mark.parametrize(
    ("limits", "freed", "moves"),
    [
        ({"max_moves": 4}, 16, 3),  # a and b; c would make 5
        ({"max_moves_per_node": 1}, 8, 1),  # only a leaves one pod
        # a: 8 GPUs for 1 move, then b: 16 for 3 (5.3); c would make 24 for 5 (4.8)
        (
            {"min_gain_per_move": 5.0},
            16,
            3,
        ),
        ({"min_gain_per_move": 6.0}, 8, 1),  # b or c after a: 16 for 3
    ],
)
def test_greedy_keeps_every_move_limit(limits: dict[str, Any], freed: int, moves: int) -> None:
    snapshot = cluster(*_three_drainable())
    problem = build_problem(snapshot, PlannerSettings.of(min_replicas=1, **limits), max_targets=len(snapshot.nodes))
    assignment = greedy(problem)
    assert within_limits(problem, assignment)
    assert assignment.moves(problem) == moves
    plan = _plan(_three_drainable(), time_limit_seconds=NO_TIME, **limits)
    assert (plan.freed_gpus, len(plan.moves)) == (freed, moves)


def test_a_pending_placement_that_would_break_the_cap_is_taken_back() -> None:
    """The pending pod needs all of ``a`` (two pods to move; ``b`` is too small for it); a cap of one move keeps it
    pending, and greedy still drains ``b`` (one move)."""
    objects = [
        node("t", gpus=8),
        node("a", gpus=8),
        node("b", gpus=4),
        pod("anchor", on="t", gpus=5, owner=None),
        pod("a1", on="a", gpus=1),
        pod("a2", on="a", gpus=1),
        pod("b1", on="b", gpus=1),
        pod("big", gpus=8, phase="Pending"),
    ]
    uncapped = _plan(objects, time_limit_seconds=NO_TIME)
    assert [p.pod for p in uncapped.placed_pending] == ["default/big"]
    plan = _plan(objects, time_limit_seconds=NO_TIME, max_moves=1)
    assert plan.placed_pending == [] and len(plan.moves) == 1 and plan.freed_nodes == ["b"]


def test_deterministic_runs_ignore_the_wall_clock() -> None:
    """solver.deterministic: the budget is CP-SAT's deterministic time, which building the problem does not spend, so
    even a microsecond's limit leaves the levels their (tiny) solves: the plan is the same on any machine."""
    plan = _plan(_three_drainable(), time_limit_seconds=NO_TIME, deterministic=True)
    assert "no CP-SAT model" not in plan.solver.note
    assert plan.solver.variables > 0


def test_an_expired_budget_stops_model_building_only_on_the_wall_clock() -> None:
    problem = build_problem(cluster(*_three_drainable()), PlannerSettings.of(min_replicas=1))
    with pytest.raises(OutOfTime):
        make_variables(problem, Deadline(0.0))
    assert make_variables(problem, Deadline(0.0, deterministic=True)).final
    assert not Deadline(0.0, deterministic=True).expired() and Deadline(-1.0).expired()


def test_compactor_plan_reports_loading_apart(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--example", "--output", "json", "--time-limit", "5"]) == 0
    solver = json.loads(capsys.readouterr().out)["solver"]
    assert solver["loadSeconds"] is not None and solver["loadSeconds"] >= 0
    assert solver["planSeconds"] > 0


def test_a_plan_cut_before_its_model_names_the_limit_that_would_have_left_time_for_one() -> None:
    plan = _plan(_three_drainable(), time_limit_seconds=NO_TIME)
    assert (
        plan.solver.enough_time_limit == 5
    )  # nothing took time here but the levels' own second: the least round limit
    said = render_plan(plan, "text", 1000)
    assert "no CP-SAT model in the time limit, the greedy warm start's plan (unproven): about 5 s would have" in said
    assert "(--time-limit 5)" in said
    assert _plan(_three_drainable(), time_limit_seconds=5).solver.enough_time_limit is None


def test_the_limit_named_holds_what_the_run_spent_before_its_model_the_model_and_a_solve() -> None:
    """Measured at 5,000 nodes / 50,000 pods with one other core busy, limit 10 s: 7.5 s of figures, problem and greedy
    before the model, the problem built in 2.7 s; at 20 and 30 s the model was built and its levels solved."""
    assert enough_time_limit(before_model=7.5, built=2.7) == 30  # (7.5 + 2.7 + 1) / 0.5 = 22.4
    assert enough_time_limit(before_model=4.0, built=2.0) == 15  # 14
    assert enough_time_limit(before_model=3000.0, built=100.0) is None  # beyond an hour: no round figure


def _proven_by_the_bounds(moves_bound: int) -> SolverReport:
    """A narrowed search whose levels the time limit cut, its plan freeing all three nodes: the whole-cluster bound
    says no plan frees more; ``moves_bound``: the fewest moves any plan freeing as much needs."""
    snapshot = cluster(*_three_drainable())
    problem = build_problem(snapshot, PlannerSettings.of(min_replicas=1), max_targets=len(snapshot.nodes))
    plan = greedy(problem)
    result = SolveResult(
        problem=problem,
        assignment=plan,
        empty_nodes=empty_nodes(problem, plan),
        status="FEASIBLE",
        levels=[LevelResult("freedGpus", "UNKNOWN", 24.0, math.nan, 0.0)],
        restricted="the best 1 target nodes per pod type",
        whole_bound=24 + problem.empty_before_gpus,
        unsolved=["freedGpus", "moveCost"],
    )
    return solver_report(problem, result, moves_bound=moves_bound)


def test_levels_the_limit_cut_are_not_called_unproven_when_the_bounds_prove_the_plan() -> None:
    """At 5,000 nodes the report said "OPTIMAL, gap 0.0%" beside "level(s) freedGpus, moveCost not solved (the incumbent
    stands, unproven)": the whole-cluster bounds had proven what the levels could not."""
    proven = _proven_by_the_bounds(moves_bound=10**9)
    assert proven.status == "OPTIMAL"
    assert "not solved by CP-SAT, the plan proven all the same by the whole-cluster bounds" in proven.note
    assert "unproven" not in proven.note
    unproven = _proven_by_the_bounds(moves_bound=0)
    assert unproven.status == "FEASIBLE"
    assert "level(s) freedGpus, moveCost not solved (the incumbent stands, unproven)" in unproven.note


def test_a_deterministic_plan_says_when_the_wall_clock_cap_stopped_a_solve_and_so_may_differ_elsewhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The deterministic clock's promise (same snapshot, settings and seed: same plan on any machine) holds only while
    no solve reaches its wall-clock safety cap; a machine too slow or too busy for it gets the plan all the same, and
    the note says it may differ on another."""
    plain = _plan(_three_drainable(), time_limit_seconds=5, deterministic=True)
    assert "safety cap" not in plain.solver.note
    monkeypatch.setattr(cpsat, "WALL_CAP", 0.0)
    monkeypatch.setattr(cpsat, "WALL_FLOOR", 0.0)  # every solve stops at once, on the wall clock
    capped = _plan(_three_drainable(), time_limit_seconds=5, deterministic=True)
    assert "stopped at their wall-clock safety cap" in capped.solver.note, capped.solver.note
    assert "may differ" in capped.solver.note and capped.freed_gpus == 24  # greedy's plan, still valid

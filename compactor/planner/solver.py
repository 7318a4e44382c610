"""Solve a ``Problem`` with CP-SAT, level by level (lexicographic objective).

Level 1 places pending GPU pods (priority-weighted), level 2 maximises whole-free
GPU capacity (or shape headroom), level 3 minimises move cost. Each level fixes the
previous one's value and starts from its solution (hint), all within one time budget.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from compactor.model.resources import is_gpu_resource
from compactor.planner import constraints as c
from compactor.planner.greedy import Assignment, greedy
from compactor.planner.problem import Problem
from compactor.planner.variables import Variables, make_variables

_STATUS = {
    cp_model.OPTIMAL: "OPTIMAL",
    cp_model.FEASIBLE: "FEASIBLE",
    cp_model.INFEASIBLE: "INFEASIBLE",
    cp_model.MODEL_INVALID: "MODEL_INVALID",
    cp_model.UNKNOWN: "UNKNOWN",
}


@dataclass
class LevelResult:
    name: str
    status: str
    objective: float
    bound: float
    seconds: float


@dataclass
class SolveResult:
    assignment: Assignment
    empty_nodes: set[int]
    status: str
    levels: list[LevelResult] = field(default_factory=list)
    wall_seconds: float = 0.0
    variables: int = 0
    greedy_assignment: Assignment | None = None


def _empty_nodes(problem: Problem, assignment: Assignment) -> set[int]:
    gpu_load = [0] * len(problem.nodes)
    for ptype in problem.types:
        if not ptype.uses_gpu:
            continue
        source = assignment.placed if ptype.pending else assignment.counts
        for node, count in source.get(ptype.index, {}).items():
            gpu_load[node] += count
    fixed_gpu = {s.index for s in problem.nodes if any(is_gpu_resource(r) and v for r, v in s.fixed.items())}
    return {s.index for s in problem.nodes if s.gpus and s.can_empty and gpu_load[s.index] == 0 and s.index not in fixed_gpu}


def _extract(problem: Problem, v: Variables, solver: cp_model.CpSolver) -> Assignment:
    counts: dict[int, dict[int, int]] = {}
    placed: dict[int, dict[int, int]] = {}
    for (t, n), var in v.final.items():
        value = solver.value(var)
        if value:
            counts.setdefault(t, {})[n] = value
    for (t, n), var in v.placed.items():
        value = solver.value(var)
        if value:
            placed.setdefault(t, {})[n] = value
    return Assignment(counts, placed)


class _Levels:
    """Runs the levels on one model, carrying the incumbent from level to level."""

    def __init__(self, problem: Problem, deadline: float, workers: int) -> None:
        self.problem = problem
        self.deadline = deadline
        self.workers = workers
        self.v = make_variables(problem)
        if problem.target_shapes:
            c.add_headroom_vars(problem, self.v)
        for build in c.ALL_CONSTRAINTS:
            build(problem, self.v)
        self.results: list[LevelResult] = []
        self.best = greedy(problem)
        self.greedy = self.best
        self.status = "OPTIMAL"

    def run(self, name: str, expr: cp_model.LinearExprT, maximize: bool, share: float) -> None:
        model = self.v.model
        self.v.hint(self.problem, self.best, _empty_nodes(self.problem, self.best))
        model.maximize(expr) if maximize else model.minimize(expr)
        solver = cp_model.CpSolver()
        remaining = max(0.05, self.deadline - time.monotonic())
        solver.parameters.max_time_in_seconds = max(0.05, remaining * share)
        solver.parameters.num_workers = self.workers
        solver.parameters.random_seed = 1
        started = time.monotonic()
        status = solver.solve(model)
        took = time.monotonic() - started
        name_status = _STATUS.get(status, "UNKNOWN")
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            self.best = _extract(self.problem, self.v, solver)
            value = round(solver.objective_value)
            model.add(expr >= value) if maximize else model.add(expr <= value)
            self.results.append(LevelResult(name, name_status, solver.objective_value, solver.best_objective_bound, took))
        else:
            # Keep the incumbent (always feasible: the greedy plan or an earlier level's).
            self.results.append(LevelResult(name, name_status, float("nan"), float("nan"), took))
        if status != cp_model.OPTIMAL:
            self.status = "FEASIBLE" if status == cp_model.FEASIBLE or self.results else name_status


def solve(problem: Problem, *, time_limit: float | None = None, workers: int | None = None) -> SolveResult:
    started = time.monotonic()
    limit = time_limit if time_limit is not None else problem.settings.time_limit_seconds
    levels = _Levels(problem, started + limit, workers or problem.settings.workers)
    plan: list[tuple[str, Callable[[], cp_model.LinearExprT], bool, float]] = []
    if levels.v.placed:
        plan.append(("pending", lambda: c.pending_placed(problem, levels.v), True, 0.3))
    if problem.target_shapes:
        plan.append(("headroom", lambda: c.headroom_gain(problem, levels.v), True, 0.6))
    else:
        plan.append(("freedGpus", lambda: c.freed_gpus(problem, levels.v), True, 0.6))
    plan.append(("moveCost", lambda: c.move_cost(problem, levels.v), False, 1.0))
    for name, expr, maximize, share in plan:
        levels.run(name, expr(), maximize, share)
    return SolveResult(
        assignment=levels.best,
        empty_nodes=_empty_nodes(problem, levels.best),
        status=levels.status,
        levels=levels.results,
        wall_seconds=time.monotonic() - started,
        variables=len(levels.v.model.proto.variables),
        greedy_assignment=levels.greedy,
    )

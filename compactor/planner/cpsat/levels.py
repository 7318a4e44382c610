"""Solve one (sub)problem level by level: the objective's terms (``objective.py``) as CP-SAT levels, most important first.

The levels are data: each ``Level`` pairs an objective term (its name, sense and value in Python) with the term's
CP-SAT expression (``constraints.py``) and the share of the time left its solve may take; ``levels_for`` gives the
problem's levels in the objective's order, and ``solve_levels`` iterates them on one model. Each level fixes the
previous ones' values and starts from their solution (hint), all within one deadline; a level out of time keeps the
incumbent (always feasible), unproven. A level whose best value the warm start already reaches (``ceiling``: every
pending pod placed) is fixed without a search.

Imports: CP-SAT through ``cpsat`` (never ``ortools`` itself), the model's variables and constraints, the objective,
the problem, the deadline.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from compactor.planner import cpsat, objective
from compactor.planner.cpsat import constraints as c
from compactor.planner.cpsat.deadline import Deadline, OutOfTime
from compactor.planner.cpsat.variables import Variables, make_variables
from compactor.planner.objective import Assignment, empty_nodes
from compactor.planner.problem import Problem

if TYPE_CHECKING:
    from compactor.planner.cpsat import CpModel, LinearExprT

# variables: past the solves' share, a model this small still gets a moment per level (while time lasts)
SMALL_MODEL = 20_000


def _always(problem: Problem) -> bool:
    return True


def _has_pending(problem: Problem) -> bool:
    """Some pending pod may go somewhere: else the pending level has nothing to decide."""
    return any(t.pending and t.targets for t in problem.types)


def _every_pending_pod(problem: Problem) -> int:
    return sum(t.weight * t.count for t in problem.types if t.pending)


@dataclass(frozen=True)
class Level:
    """One level of the lexicographic solve."""

    term: objective.Term  # name, sense, value of an assignment in Python
    expression: Callable[[Problem, Variables], LinearExprT]  # the same term in the model
    share: float  # of the deadline's time left, for this level's solve
    applies: Callable[[Problem], bool] = _always  # a level that does not apply is not solved nor reported
    # the best value any plan may reach: a warm start reaching it needs no search
    ceiling: Callable[[Problem], int] | None = None

    @property
    def name(self) -> str:
        return self.term.name

    @property
    def maximize(self) -> bool:
        return self.term.maximize

    def value(self, problem: Problem, assignment: Assignment) -> int:
        return self.term.value(problem, assignment)


PENDING = Level(objective.PENDING, c.pending_placed, 0.25, applies=_has_pending, ceiling=_every_pending_pod)
FREED_GPUS = Level(objective.FREED_GPUS, c.freed_gpus, 0.55)
HEADROOM = Level(objective.HEADROOM, c.headroom_gain, 0.7)
MOVE_COST = Level(objective.MOVE_COST, c.move_cost, 1.0)
_BY_TERM = {level.term.name: level for level in (PENDING, FREED_GPUS, HEADROOM, MOVE_COST)}


def levels_for(problem: Problem) -> tuple[Level, ...]:
    """The problem's levels, in the objective's order (``objective.terms_for``), those that apply."""
    return tuple(level for term in objective.terms_for(problem) if (level := _BY_TERM[term.name]).applies(problem))


@dataclass
class LevelResult:
    name: str
    status: str
    objective: float
    bound: float
    seconds: float


@dataclass
class BuiltModel:
    """A levels model as built, before any level was added to it (``CpModel.clone``): the trade-off curve's cost model
    starts from it rather than building the same constraints again (seconds at thousands of nodes)."""

    problem: Problem
    model: CpModel
    v: Variables
    seconds: float  # wall-clock seconds building it took


def extract(problem: Problem, v: Variables, solved: cpsat.Solved) -> Assignment:
    """The solve's solution as an assignment."""
    counts: dict[int, dict[int, int]] = {}
    placed: dict[int, dict[int, int]] = {}
    for (t, n), var in v.final.items():
        value = solved.value(var)
        if value:
            counts.setdefault(t, {})[n] = value
    for (t, n), var in v.placed.items():
        value = solved.value(var)
        if value:
            placed.setdefault(t, {})[n] = value
    return Assignment(counts, placed)


class LevelSolve:
    """The levels on one model, carrying the incumbent from level to level."""

    def __init__(self, problem: Problem, deadline: Deadline, start: Assignment, build: Deadline | None = None) -> None:
        """``deadline``: the solves'. ``build``: the deadline building the model may take (default ``deadline``): a model
        finished after the solves' time is still the trade-off curve's (``base``), whose time it then takes."""
        build = build or deadline
        self.problem = problem
        self.deadline = deadline
        self.cutoff = build  # past it, nothing more is done here
        self.seconds = 0.0  # building the model took
        self.results: list[LevelResult] = []
        self.best = start
        self.greedy = start
        self.status = "OPTIMAL"
        self.fixed: list[tuple[Level, int]] = []  # (level, value) every later solution must keep
        self.unsolved: list[str] = []  # levels the time limit left unsolved
        self.v: Variables | None = None  # None: the time limit ran out before the model was built
        self.base: BuiltModel | None = None
        if build.expired():
            return
        started = time.monotonic()
        try:
            v = make_variables(problem, build)
            if problem.target_shapes:
                c.add_headroom_vars(problem, v)
            for add in c.ALL_CONSTRAINTS:
                add(problem, v)
        except OutOfTime:
            return
        v.deadline = None  # built: each solve keeps to its own time limit
        self.v = v
        self.seconds = time.monotonic() - started
        if problem.settings.aims.goal == "free-nodes" and not problem.target_shapes:
            self.base = BuiltModel(problem, v.model.clone(), v, self.seconds)

    def start_reaches(self, level: Level) -> bool:
        """Does the warm start already reach the level's ceiling (no search needed)?"""
        return level.ceiling is not None and level.value(self.problem, self.greedy) >= level.ceiling(self.problem)

    def fix(self, level: Level) -> None:
        """The level at its ceiling, proven without a search (the warm start reaches it)."""
        assert level.ceiling is not None
        best = level.ceiling(self.problem)
        if self.v is not None:
            expr = level.expression(self.problem, self.v)
            self.v.model.add(expr >= best) if level.maximize else self.v.model.add(expr <= best)
        if level.maximize:
            self.fixed.append((level, best))
        self.results.append(LevelResult(level.name, "OPTIMAL", float(best), float(best), 0.0))

    def _satisfies(self, assignment: Assignment) -> bool:
        return all(level.value(self.problem, assignment) >= value for level, value in self.fixed)

    def run(self, level: Level) -> None:
        name, maximize, problem = level.name, level.maximize, self.problem
        if (
            not maximize
            and self.greedy is not self.best
            and self._satisfies(self.greedy)
            and level.value(problem, self.greedy) < level.value(problem, self.best)
        ):
            self.best = self.greedy  # the warm start is cheaper and still meets every level fixed so far
        if (
            self.v is None
            or self.cutoff.expired()
            or (self.deadline.expired() and cpsat.size(self.v.model) > SMALL_MODEL)
        ):
            # Out of time: the incumbent (always feasible) stands, unproven; no later level has time either. (A small
            # model past its share, the curve's time not yet gone, still gets its moment below: often enough to prove it.)
            value = level.value(problem, self.best)
            self.results.append(LevelResult(name, "UNKNOWN", float(value), float("nan"), 0.0))
            if maximize:
                self.fixed.append((level, value))
            self.unsolved.append(name)
            self.status = "FEASIBLE"
            return
        model = self.v.model
        expr = level.expression(problem, self.v)
        self.v.hint(problem, self.best, empty_nodes(problem, self.best))
        model.maximize(expr) if maximize else model.minimize(expr)
        started = time.monotonic()
        solved = cpsat.solve(model, self.deadline, max(0.05, self.deadline.remaining() * level.share))
        took = time.monotonic() - started
        if solved.found:
            self.best = extract(problem, self.v, solved)
            value = round(solved.objective)
            self.results.append(LevelResult(name, solved.status, solved.objective, solved.bound, took))
        else:
            # No solution in time: keep the incumbent (always feasible) and its value.
            value = level.value(problem, self.best)
            self.results.append(LevelResult(name, solved.status, float(value), float("nan"), took))
        # Later levels may not give back what this one reached.
        model.add(expr >= value) if maximize else model.add(expr <= value)
        if maximize:
            self.fixed.append((level, value))
        if not solved.optimal:
            self.status = "FEASIBLE"


def solve_levels(
    problem: Problem, start: Assignment, deadline: Deadline, build: Deadline | None = None
) -> tuple[LevelSolve, int]:
    """Run the lexicographic levels on one (sub)problem; returns the levels and the model size (0: not built in time)."""
    levels = LevelSolve(problem, deadline, start, build)
    for level in levels_for(problem):
        if levels.start_reaches(level):
            levels.fix(level)
        else:
            levels.run(level)
    return levels, cpsat.size(levels.v.model) if levels.v is not None else 0

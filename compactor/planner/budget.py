"""The time the planner may spend, and the CP-SAT parameters that spend it.

Two clocks. By default, wall-clock seconds with CP-SAT's parallel portfolio: the best plans within
the limit, but two runs may differ (the workers race). ``planner.deterministic``: CP-SAT's
*deterministic time* (a work count, roughly seconds on a typical machine) with interleaved search,
which the OR-Tools documentation describes as deterministic whatever the number of workers; every
budget decision of the planner then reads that clock too, so the same snapshot, settings and
``planner.seed`` give the same plan on any machine (at the price of one search thread).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ortools.sat.python import cp_model
from ortools.sat.python.cp_model import CpSolverStatus

WALL_CAP = 10.0  # deterministic runs: a wall-clock safety cap, this many times the deterministic limit (+1 s)


class OutOfTime(Exception):
    """A budget ran out in the middle of a phase that checks it (``Budget.check``), e.g. while building a model."""


@dataclass
class _Spent:
    deterministic_seconds: float = 0.0


@dataclass
class Budget:
    """A time limit on one clock; ``until`` makes a shorter budget on the same clock (what it spends counts here too)."""

    seconds: float
    workers: int = 2
    seed: int = 1
    deterministic: bool = False
    _spent: _Spent = field(default_factory=_Spent)
    _start: float = field(default=-1.0)

    def __post_init__(self) -> None:
        if self._start < 0:
            self._start = self.now()

    def now(self) -> float:
        return self._spent.deterministic_seconds if self.deterministic else time.monotonic()

    def elapsed(self) -> float:
        return self.now() - self._start

    def remaining(self) -> float:
        return self.seconds - self.elapsed()

    def expired(self) -> bool:
        """Nothing remains on the wall clock: a phase should not start (or go on). Never on the deterministic clock, which
        only solves spend: there every phase runs as it always did, and only the solves' own limits shrink."""
        return not self.deterministic and self.remaining() <= 0

    def check(self) -> None:
        """Raise ``OutOfTime`` once ``expired`` (cheap enough to call in a model-building loop)."""
        if self.expired():
            raise OutOfTime

    def until(self, seconds: float) -> Budget:
        """A budget of at most ``seconds`` from now, never past this one's end."""
        return Budget(min(seconds, self.remaining()), self.workers, self.seed, self.deterministic, self._spent, self.now())

    def solve(self, model: cp_model.CpModel, seconds: float, *, workers: int | None = None) -> tuple[cp_model.CpSolver, CpSolverStatus]:
        """Solve ``model`` within ``seconds`` of this budget's clock: (the solver, its status)."""
        solver = cp_model.CpSolver()
        params = solver.parameters
        params.random_seed = self.seed
        params.num_workers = workers or self.workers
        if self.deterministic:
            params.interleave_search = True
            params.max_deterministic_time = seconds
            params.max_time_in_seconds = WALL_CAP * seconds + 1.0
        else:
            params.max_time_in_seconds = seconds
        status = solver.solve(model)
        self._spent.deterministic_seconds += solver.deterministic_time
        return solver, status

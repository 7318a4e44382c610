"""The planner's time limit: a ``Deadline`` on one of two clocks, and what a solve may spend of it.

Not to be confused with the run budgets (``budgets.py``: nodes drained per pool, moves per workload) nor with
PodDisruptionBudgets (``movability.py``): this is only how long the planner may think.

Two clocks. By default, wall-clock seconds with CP-SAT's parallel portfolio: the best plans within
the limit, but two runs may differ (the workers race). ``solver.deterministic``: CP-SAT's
*deterministic time* (a work count, roughly seconds on a typical machine) with interleaved search,
which the OR-Tools documentation describes as deterministic whatever the number of workers; every
time decision of the planner then reads that clock too, so the same snapshot, settings and
``solver.seed`` give the same plan on any machine (at the price of one search thread). The solves
themselves run in ``cpsat.solve``, which charges what they spend here (``spend``).

Imports: the standard library and ``compactor.settings`` only (no solver).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from compactor.settings.bundles import PlannerSettings


class OutOfTime(Exception):
    """A deadline passed in the middle of a phase that checks it (``Deadline.check``), e.g. while building a model."""


@dataclass
class _Spent:
    deterministic_seconds: float = 0.0
    wall_capped: int = 0  # deterministic solves stopped by their wall-clock safety cap (``cpsat.solve``)


@dataclass
class Deadline:
    """A time limit on one clock, with the CP-SAT settings its solves use (workers, seed, clock); ``until`` makes a
    shorter deadline on the same clock (what it spends counts here too)."""

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

    def until(self, seconds: float) -> Deadline:
        """A deadline at most ``seconds`` from now, never past this one."""
        return Deadline(
            min(seconds, self.remaining()), self.workers, self.seed, self.deterministic, self._spent, self.now()
        )

    @property
    def wall_capped(self) -> int:
        """Solves on the deterministic clock that the wall-clock safety cap stopped first: their results, and so the
        plan, may differ on a faster or idler machine."""
        return self._spent.wall_capped

    def capped_by_wall(self) -> None:
        self._spent.wall_capped += 1

    def spend(self, deterministic_seconds: float) -> None:
        """Charge a solve's deterministic time (``cpsat.solve`` does, after every solve)."""
        self._spent.deterministic_seconds += deterministic_seconds


def deadline_for(settings: PlannerSettings, seconds: float | None = None) -> Deadline:
    """A deadline on the clock the settings ask for (``solver.deterministic``), ``seconds`` (default: the time limit) from now."""
    return Deadline(
        settings.solver.time_limit_seconds if seconds is None else seconds,
        settings.solver.workers,
        settings.solver.seed,
        settings.solver.deterministic,
    )

"""How the solver searches: its time, threads, seed, determinism, and how large a model it is given (the ``solver``
group; docs/planner.md)."""

from __future__ import annotations

from pydantic import Field

from compactor.settings.base import Group


class SolverSettings(Group):
    time_limit_seconds: float = Field(10.0, gt=0, description="the whole plan, trade-off curve included")
    workers: int = Field(2, ge=1)
    seed: int = Field(1, ge=0, description="CP-SAT's random seed")
    deterministic: bool = Field(
        False,
        description="the same plan for the same snapshot, settings and seed, on any machine: CP-SAT's "
        "deterministic time and interleaved search (one thread) instead of wall-clock "
        "seconds and the parallel portfolio (see docs/planner.md)",
    )
    max_candidate_pods: int = Field(
        1500, ge=1, description="movable pods the model may move; beyond it, the least-loaded freeable nodes' pods"
    )
    max_targets_per_type: int = Field(24, ge=1, description="candidate target nodes per group of identical pods")

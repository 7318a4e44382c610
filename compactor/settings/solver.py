"""How the solver searches: its time, threads, seed, determinism, and how large a model it is given (``planner``
settings; docs/planner.md).

The fields are specified here, each with its default, bounds and meaning; ``PlannerSettings`` (planner.py)
lays the group out in the YAML's order.
"""

from __future__ import annotations

from pydantic import Field

TIME_LIMIT_SECONDS: float = Field(10.0, gt=0, description="the whole plan, trade-off curve included")
WORKERS: int = Field(2, ge=1)
SEED: int = Field(1, ge=0, description="CP-SAT's random seed")
DETERMINISTIC: bool = Field(
    False,
    description="the same plan for the same snapshot, settings and seed, on any machine: CP-SAT's "
    "deterministic time and interleaved search (one thread) instead of wall-clock "
    "seconds and the parallel portfolio (see docs/planner.md)",
)
MAX_CANDIDATE_PODS: int = Field(
    1500, ge=1, description="movable pods the model may move; beyond it, the least-loaded freeable nodes' pods"
)
MAX_TARGETS_PER_TYPE: int = Field(24, ge=1, description="candidate target nodes per group of identical pods")

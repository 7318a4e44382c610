"""How much the compactor may disrupt: the caps on one plan (``planner.max_moves`` and its per-node and per-namespace
kin) and the limits all runs share (the ``disruption`` group: moves per hour and day, per pool and per workload,
cooldowns, oscillation, the circuit breaker, the history they are counted in). When runs may act is windows.py.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from compactor.settings.base import Group
from compactor.settings.windows import WINDOWS, WindowSettings

# The caps on one plan, fields of the ``planner`` group (PlannerSettings in planner.py lays it out).
MAX_MOVES: int | None = Field(None, ge=0)
MAX_MOVES_PER_NODE: int | None = Field(None, ge=0)
MAX_MOVES_PER_NAMESPACE: int | None = Field(None, ge=0)


class DisruptionSettings(Group):
    windows: list[WindowSettings] = WINDOWS
    workload_cooldown_minutes: float = Field(
        0.0,
        ge=0,
        description="a workload (a pod's controller) moved less than this long ago is not moved again (0: off)",
    )
    node_cooldown_minutes: float = Field(
        0.0,
        ge=0,
        description="a node a move left or reached less than this long ago is neither drained nor filled (0: off)",
    )
    max_moves_per_hour: int | None = Field(
        None, ge=0, description="moves all runs together may make in any hour (null: no cap)"
    )
    max_moves_per_day: int | None = Field(
        None, ge=0, description="moves all runs together may make in any 24 hours (null: no cap)"
    )
    breaker_failures: int = Field(
        0,
        ge=0,
        description="circuit breaker: this many failed moves among the last "
        "breaker_of_last pause every run for breaker_pause_minutes (0: off)",
    )
    breaker_of_last: int = Field(10, ge=1, description="how many of the latest moves the circuit breaker looks at")
    breaker_pause_minutes: float = Field(60.0, gt=0, description="how long the circuit breaker pauses runs once open")
    oscillation_hours: float = Field(
        0.0,
        ge=0,
        description="a plan that takes a workload back to a node a move of the "
        "last this many hours took it from is refused (0: off)",
    )
    max_draining_per_pool: int | str | None = Field(
        None,
        description="nodes of one pool (metrics.pool_label) a run drains at "
        'once: a count, or a share of the pool\'s nodes like "10%" (rounded '
        "down, at least 1); null: no cap",
    )
    max_moves_per_workload: int | Literal["auto"] | None = Field(
        None,
        description="replicas of one workload (a pod's "
        "controller) one run moves; auto: Koordinator's default for "
        "workloads no PodDisruptionBudget covers (1 below 4 replicas, "
        "2 up to 10, 10% above), the PDB for the others; null: no cap",
    )
    history_limit: int = Field(
        500,
        ge=10,
        le=5000,
        description="moves remembered in the gpu-compactor-history ConfigMap "
        "(oldest dropped first; a day is always kept when it fits)",
    )

    @field_validator("max_draining_per_pool")
    @classmethod
    def _count_or_share(cls, value: int | str | None) -> int | str | None:
        if isinstance(value, str) and value.strip().isdigit():  # from an environment variable
            value = int(value)
        if isinstance(value, str):
            number = value.removesuffix("%")
            try:
                ok = value.endswith("%") and 0 < float(number) <= 100
            except ValueError:
                ok = False
            if not ok:
                raise ValueError(f'expected a node count or a share like "10%" (0-100%), got {value!r}')
        elif value is not None and value < 1:
            raise ValueError(f"must be at least 1 (null: no cap), got {value}")
        return value

    @field_validator("max_moves_per_workload")
    @classmethod
    def _positive_moves(cls, value: int | str | None) -> int | str | None:
        if isinstance(value, int) and value < 1:
            raise ValueError(f"must be at least 1, auto or null, got {value}")
        return value

    @model_validator(mode="after")
    def _breaker(self) -> DisruptionSettings:
        if self.breaker_failures > self.breaker_of_last:
            raise ValueError(
                f"disruption.breaker_failures ({self.breaker_failures}) cannot exceed disruption.breaker_of_last "
                f"({self.breaker_of_last})"
            )
        return self

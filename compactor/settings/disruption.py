"""The disruption calendar and memory (the ``disruption`` group): when runs may act (``disruption_windows.py``
specifies a window), how long a moved workload or a touched node rests, oscillation, the circuit breaker, and the
history they are counted in. How many moves and evictions are allowed is caps.py."""

from __future__ import annotations

from pydantic import Field, model_validator

from compactor.settings.base import Group
from compactor.settings.disruption_windows import WINDOWS, WindowSettings


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
    history_limit: int = Field(
        500,
        ge=10,
        le=5000,
        description="moves remembered in the gpu-compactor-history ConfigMap "
        "(oldest dropped first; a day is always kept when it fits)",
    )

    @model_validator(mode="after")
    def _breaker(self) -> DisruptionSettings:
        if self.breaker_failures > self.breaker_of_last:
            raise ValueError(
                f"disruption.breaker_failures ({self.breaker_failures}) cannot exceed disruption.breaker_of_last "
                f"({self.breaker_of_last})"
            )
        return self

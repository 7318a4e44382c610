"""No steering (``steering.mechanism: off``): replacements go where kube-scheduler sends them.

The landing check still stops a run whose replacement lands on a node the plan frees; anything
else is accepted, so the gain may fall short of the plan on a spreading scheduler profile, and the
run says so (``partial``).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from compactor.actions.port.client import Obj
from compactor.actions.run.steerer import Mechanism
from compactor.planner.plan import Move, Placement
from compactor.planner.rules.movability import Steerability

if TYPE_CHECKING:
    from compactor.actions.run.context import Run


class NoSteering:
    mechanism = Mechanism.OFF
    exact = False
    parallel = True
    release_on_stop = False

    def __init__(self, why: str, steerability: Steerability) -> None:
        self.why = why
        self.steerability = steerability

    def prepare(self, run: Run, move: Move, pod: Obj) -> None:
        return None

    def engage(self, run: Run, move: Move) -> None:
        return None

    def observe(self, run: Run, move: Move, fresh: list[Obj]) -> None:
        return None

    def after_move(self, run: Run, move: Move, fresh: list[Obj]) -> None:
        return None

    def before_placement(self, run: Run, placement: Placement, pod: Obj) -> None:
        return None

    def after_placement(self, run: Run) -> None:
        return None

    def release(self, run: Run) -> None:
        return None

    def step_aside(self, run: Run) -> None:
        return None

    def step_in(self, run: Run, move: Move, pod: Obj) -> None:
        return None

    def preflight(self, run: Run, move: Move, *, fencing: Collection[str]) -> None:
        return None

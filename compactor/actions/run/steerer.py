"""How a run steers replacements onto their planned nodes: the mechanisms (``Mechanism``) and the interface each one
offers the executor (``Steerer``; the mechanisms are in ``actions/steering/``: policy, holds, off).

``Steerer`` is generic in the run it is given (``Steerer[Run]``, in ``actions/run/context.py``), so this interface knows nothing
of ``Run`` while a ``Run`` holds its steerer: the two stay one module each, with no import between them in either
direction.
"""

from __future__ import annotations

import enum
from collections.abc import Collection
from typing import Protocol, TypeVar

from compactor.actions.port.client import Obj
from compactor.planner.plan import Move, Placement
from compactor.planner.rules.movability import Steerability

R = TypeVar("R", contravariant=True)  # the run a steerer is given (``actions.run.Run``)


class Mechanism(enum.StrEnum):
    """How a run steers replacements onto their planned nodes (``actions/steering/``)."""

    POLICY = "policy"
    HOLDS = "holds"
    OFF = "off"


class Steerer(Protocol[R]):
    """One steering mechanism, as a run drives it (``actions/steering/``: policy, holds, off)."""

    mechanism: Mechanism
    why: str  # how it was chosen, for the plan, the run report and the log
    steerability: Steerability  # what it can keep where a plan puts a replacement (asked again before each eviction)
    exact: bool  # the replacement must land on its planned node (else the run stops and rolls back)
    parallel: bool  # moves of different owners may be in flight together (max_concurrent_evictions)
    release_on_stop: (
        bool  # let go at once when the process stops (holds keep other pods out); else recovery resumes them
    )

    def prepare(self, run: R, move: Move, pod: Obj) -> None:
        """Before the eviction, reads only: the target's room checked (``Abort`` when the plan no longer holds), what steering
        will write recorded in the run's state, inside the eviction's ``Run.write_ahead`` (saved before ``engage``)."""

    def engage(self, run: R, move: Move) -> None:
        """Steering written into the cluster for the move's replacement, just before the eviction."""

    def observe(self, run: R, move: Move, fresh: list[Obj]) -> None:
        """Each look at the owner's new pods (``fresh``) while waiting: release what is no longer needed; ``Abort`` when
        steering failed."""

    def after_move(self, run: R, move: Move, fresh: list[Obj]) -> None:
        """The replacement is Ready: whatever steering still holds for this move goes."""

    def before_placement(self, run: R, placement: Placement, pod: Obj) -> None:
        """Steering for a pending pod about to be let onto the node drained for it."""

    def after_placement(self, run: R) -> None:
        """The pending pod is bound (or its wait is over)."""

    def release(self, run: R) -> None:
        """Stopping or rolling back: let go of everything this mechanism holds for the run."""

    def step_aside(self, run: R) -> None:
        """The eviction was refused for now (a PodDisruptionBudget, throttling) and will be retried: let go, while the run
        waits, of what keeps other pods off other nodes (holds); ``step_in`` takes it up again before the retry."""

    def step_in(self, run: R, move: Move, pod: Obj) -> None:
        """Before an eviction is retried: steering as ``prepare`` and ``engage`` made it, read afresh."""

    def preflight(self, run: R, move: Move, *, fencing: Collection[str]) -> None:
        """Before the run changes anything (no state, no fence): ``StopHere`` when this mechanism could not start the
        plan's first move, ``move``, once the nodes in ``fencing`` are fenced: a run that cannot start changes nothing.
        A mechanism that needs the pod for it reads it; the others read nothing."""

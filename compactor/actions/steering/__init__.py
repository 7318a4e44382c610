"""Steering: making kube-scheduler bind each replacement (and each pending pod the plan places) where the plan says.

kube-scheduler, not the executor, decides where a replacement goes; with the default profile it
picks the emptiest feasible node. Three mechanisms, one interface (``Steerer``):

* ``policy`` (``policy.py``): the MutatingAdmissionPolicy of ``manifests/steering`` pins the owner's
  next pod to the planned node from one entry in a parameter ConfigMap; no node is touched.
* ``holds`` (``holds.py``): every other node that could take the replacement is cordoned for the
  moment between the eviction and the binding (bounded by ``executor.max_holds_per_move``).
* ``off`` (``off.py``): nothing; the landing check still stops a run whose replacement lands on a
  node being freed.

``detect.choose`` picks one per run (``executor.steering``: auto | policy | holds | off) and says why.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Protocol

from compactor.actions.client import Obj
from compactor.planner.plan import Move, Placement

if TYPE_CHECKING:
    from compactor.actions.run import Run


class Mechanism(enum.StrEnum):
    POLICY = "policy"
    HOLDS = "holds"
    OFF = "off"


class Steerer(Protocol):
    mechanism: Mechanism
    why: str  # how it was chosen, for the plan, the run report and the log
    exact: bool  # the replacement must land on its planned node (else the run stops and rolls back)
    parallel: bool  # moves of different owners may be in flight together (max_concurrent_evictions)
    release_on_stop: bool  # let go at once when the process stops (holds keep other pods out); else recovery resumes them

    def prepare(self, run: Run, move: Move, pod: Obj) -> None:
        """Before the eviction, reads only: the target's room checked (``Abort`` when the plan no longer holds), what steering
        will write recorded in ``run.state``, which the executor then saves (the write-ahead)."""

    def engage(self, run: Run, move: Move) -> None:
        """Steering written into the cluster for the move's replacement, just before the eviction."""

    def observe(self, run: Run, move: Move, fresh: list[Obj]) -> None:
        """Each look at the owner's new pods (``fresh``) while waiting: release what is no longer needed; ``Abort`` when
        steering failed."""

    def after_move(self, run: Run, move: Move, fresh: list[Obj]) -> None:
        """The replacement is Ready: whatever steering still holds for this move goes."""

    def before_placement(self, run: Run, placement: Placement, pod: Obj) -> None:
        """Steering for a pending pod about to be let onto the node drained for it."""

    def after_placement(self, run: Run) -> None:
        """The pending pod is bound (or its wait is over)."""

    def release(self, run: Run) -> None:
        """Stopping or rolling back: let go of everything this mechanism holds for the run."""

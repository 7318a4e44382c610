"""What a run did, as the executor hands it back: ``RunReport``, and its JSON form (``to_dict``).

The commands print it (``render/run.py``), the run's summary and history keep it (``app/last_run.py``,
``actions/services/memory.py``) and the controller exports it (``app/tick.py``); the executor fills it in as the run ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from compactor.actions.run.context import AbortReason
from compactor.actions.services.outcome import Outcome
from compactor.statuses import RunStatus


@dataclass
class RunReport:
    plan_id: str
    status: RunStatus
    moves_total: int
    moves_done: int = 0
    freed_nodes: list[str] = field(default_factory=list)
    skipped_moves: list[str] = field(default_factory=list)
    # pods whose move is over (replaced, or found gone): the history's "moved"
    done_pods: list[str] = field(default_factory=list)
    # pods whose move was attempted (evicted, or the eviction refused for good) and not made: the history's "failed",
    # the only moves the circuit breaker counts
    failed_pods: list[str] = field(default_factory=list)
    reason: str = ""
    abort_reason: AbortReason | None = None  # why the run rolled back, in a word (None when it did not)
    dry_run: bool = False
    outcome: Outcome | None = None  # measured on the cluster once the run is over (None when it never started)
    recuts: dict[str, str] = field(default_factory=dict)  # MIG re-cuts attempted: node -> success | failed | timeout
    devices: dict[str, list[str]] = field(default_factory=dict)  # moved pod -> its replacement's DRA devices
    steering: str = ""  # the mechanism in force: policy | holds | off
    steering_why: str = ""
    steering_not_in_effect: bool = False  # the policy is installed but runs concluded it is not in effect
    # why each earlier plan of this cycle went stale before its first eviction (the cycle planned again: app/cycle.py)
    replanned: list[str] = field(default_factory=list)
    more_waits: bool = False  # a cap or budget left moves for a later run (the run may still have succeeded)

    def ended(self, status: RunStatus, reason: str) -> RunReport:
        """This report, ended with ``status`` for ``reason``."""
        self.status, self.reason = status, reason
        return self

    def rolled_back(self, why: AbortReason, reason: str) -> RunReport:
        """This report, ended ``failed`` by a rollback: ``why`` in a word, ``reason`` in words."""
        self.abort_reason = why
        return self.ended(RunStatus.FAILED, reason)

    @property
    def stale_before_any_eviction(self) -> bool:
        """Rolled back because the cluster no longer matched the plan, before any pod was evicted: nothing happened but
        fences lifted, and a plan made afresh may well hold."""
        evicted = self.outcome.evictions if self.outcome is not None else 0
        return self.abort_reason == AbortReason.PLAN_STALE and not evicted and not self.failed_pods

    @property
    def shown_status(self) -> str:
        """The status as output says it: ``dry-run`` for a dry run that walked the plan (its ``succeeded`` or ``partial``
        judges a simulated world); a dry run that failed or had nothing to do says so as a real run would."""
        if self.dry_run and self.status in (RunStatus.SUCCEEDED, RunStatus.PARTIAL):
            return RunStatus.DRY_RUN
        return self.status

    def to_dict(self) -> dict[str, Any]:
        return {
            "planId": self.plan_id,
            "status": self.shown_status,
            "movesTotal": self.moves_total,
            "movesDone": self.moves_done,
            "freedNodes": self.freed_nodes,
            "skippedMoves": self.skipped_moves,
            "reason": self.reason,
            # only a run that rolled back has one: the other reports keep the keys they always had
            **({"abortReason": self.abort_reason.value} if self.abort_reason is not None else {}),
            "dryRun": self.dry_run,
            "outcome": self.outcome.to_dict() if self.outcome else None,
            "migRecuts": self.recuts,
            "draDevices": self.devices,
            **({"replanned": self.replanned} if self.replanned else {}),
            **({"moreWaits": True} if self.more_waits else {}),
            "steering": {
                "mechanism": self.steering,
                "why": self.steering_why,
                "policyNotInEffect": self.steering_not_in_effect,
            },
        }

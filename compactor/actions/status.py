"""How a run ended: the one list of its statuses, which reports, metrics (``runs_total{status}``) and the CLI's exit code
all read. A ``StrEnum``: each status is its own string in JSON, logs and labels."""

from __future__ import annotations

import enum


class RunStatus(enum.StrEnum):
    SUCCEEDED = "succeeded"
    PARTIAL = "partial"  # a cap, a budget or a closing window left moves for a later run; what was done holds
    FAILED = "failed"  # stopped and rolled back, or refused before it began
    NOTHING_TO_DO = "nothing-to-do"
    DRY_RUN = "dry-run"  # shown for a dry run that walked the plan: its succeeded or partial judged a simulated world


FINISHED = frozenset({RunStatus.SUCCEEDED, RunStatus.PARTIAL, RunStatus.NOTHING_TO_DO})  # ended without a rollback

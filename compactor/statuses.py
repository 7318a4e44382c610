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


class CommandStatus(enum.StrEnum):
    """How a ``run --once`` that carried no plan to its end ended, beside ``RunStatus`` in its summary and metrics."""

    HELD = "held"  # changed nothing on purpose: outside every disruption window, or the circuit breaker open
    MEASURED = "measured"  # mode: report, or it failed before it had a plan
    STOPPED = "stopped"  # a stop signal before the run's end; the next run's recovery resumes or rolls back

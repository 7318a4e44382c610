"""What a run may do now: the configured mode, the disruption windows, the history's restraints (cooldowns, budgets,
the circuit breaker). Each only ever makes a run safer."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime

from compactor.actions.memory import restraints_now
from compactor.app.invocation import Invocation
from compactor.app.reading import cluster_client
from compactor.app.windows import window_state
from compactor.errors import CompactorError
from compactor.planner.history import Restraints

log = logging.getLogger("compactor.commands")  # what the command line says of its runs, under the name it always had


def within_mode(inv: Invocation) -> Invocation:
    """The invocation as the configured mode allows it: ``mode: plan`` makes a run a dry run (said in the log).
    ``apply --plan`` names one plan to carry out, so outside apply mode it is refused rather than quietly simulated.
    (``mode: report`` makes ``run`` a report: see ``commands.execute``.)"""
    settings = inv.settings
    if settings.mode == "apply" or inv.dry_run:
        return inv
    if inv.command == "apply":
        raise CompactorError(
            f"mode is {settings.mode!r} (config or COMPACTOR_MODE): this installation does not act; add --dry-run "
            "to see what the plan would do, or set mode: apply"
        )
    if settings.mode == "plan":
        log.info("mode: plan: a dry run, nothing is changed (set mode: apply to act)")
        return replace(inv, dry_run=True)
    return inv


def window_closed(inv: Invocation, now: datetime) -> str | None:
    """Why a run that would act may not act now (outside every disruption window), or None when it may. A dry run
    changes nothing, so it may run at any time."""
    if inv.dry_run:
        return None
    state = window_state(inv.settings.disruption.windows, now)
    return None if state.open else state.why


def restraints(inv: Invocation, now: datetime) -> Restraints | None:
    """What earlier runs' history forbids now (cooldowns, budgets, the circuit breaker), read from a live cluster; None
    for a snapshot file (it holds no history)."""
    if not inv.live:
        return None
    return restraints_now(cluster_client(inv, dry_run=True), inv.settings, now)

"""Carrying a plan out: ``execute`` is one plan through the executor, refused when it would undo recent moves,
remembered in the history after a real run; a real run stops before its next eviction once every disruption window has
closed (``window_keeper``). Every cycle (``cycle.py``) carries its plan out here, for real or as a dry run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from compactor.actions.executor import Executor, Progress
from compactor.actions.port.client import ClusterClient
from compactor.actions.recovery import RecoveryReport, recover
from compactor.actions.services.memory import remember_run, reversals
from compactor.actions.services.report import RunReport
from compactor.actions.steering.detect import Choice
from compactor.app.windows import window_state
from compactor.clock import Clock
from compactor.errors import CompactorError
from compactor.model.shorten import listed
from compactor.planner.plan import CompactionPlan
from compactor.planner.rules.history import Restraints
from compactor.settings.origins import Settings

log = logging.getLogger("compactor.commands")  # what the command line says of its runs, under the name it always had


@dataclass(frozen=True)
class Carried:
    """How carrying a plan out ended: its report, or the plan it was stopped in (``stopped``, "" before any plan)."""

    client: ClusterClient  # what the run went through: a dry run's ``RecordingClient`` holds the calls a real run would make
    report: RunReport | None = None
    stopped: str | None = None


def execute(
    client: ClusterClient,
    settings: Settings,
    clock: Clock,
    plan: CompactionPlan,
    *,
    dry_run: bool,
    steering: Choice | None,
    progress: Callable[[Progress], None] | None = None,
    restraints: Restraints | None = None,
) -> RunReport:
    """Run ``plan`` through ``client``; a real run is refused when it would undo recent moves (``restraints``), and its
    moves join the history."""
    executor = Executor(
        client,
        settings.for_executor,
        clock,
        dry_run=dry_run,
        progress=progress,
        rules=settings.for_planner,
        steering=steering,
        may_go_on=None if dry_run else window_keeper(settings, clock),
        dra_drivers=settings.dra.mappings(),
    )
    if not dry_run and (undone := reversals(plan, restraints)):
        raise CompactorError(
            f"plan {plan.metadata.id} would undo recent moves ({listed(undone, 3)}): refused, to keep "
            "workloads from going back and forth (disruption.oscillation_hours)"
        )
    report = executor.execute(plan)
    if not dry_run:
        remember_run(client, settings, plan, report, clock.now())
    return report


def recover_run(client: ClusterClient, settings: Settings, clock: Clock, *, resume: bool) -> RecoveryReport:
    """Recovery before a run (``resume``: an interrupted plan carried on), or of a run that may not act (rolled back,
    never resumed), with the movability rules and DRA drivers a resumed run checks its evictions against."""
    return recover(
        client,
        settings.for_executor,
        clock,
        resume=resume,
        rules=settings.for_planner,
        dra_drivers=settings.dra.mappings(),
        may_go_on=window_keeper(settings, clock) if resume else None,
    )


def window_keeper(settings: Settings, clock: Clock) -> Callable[[], str]:
    """What stops a real run before its next eviction once every disruption window has closed (a run started a minute
    before the window closes used to evict until it ended: up to an hour with the shipped settings)."""
    windows = settings.disruption.windows

    def may_go_on() -> str:
        if not windows:
            return ""
        state = window_state(windows, clock.now())
        return "" if state.open else f"the end of the disruption window ({state.why})"

    return may_go_on


def say_recovered(recovered: RecoveryReport) -> None:
    """What recovery did before this run, on stderr: an interrupted plan's end, nodes released or kept."""
    if recovered.resumed is not None:
        resumed = recovered.resumed
        outcome = f"; {resumed.outcome.summary()}" if resumed.outcome else ""
        log.info(
            f"recovered plan {resumed.plan_id}: {resumed.status}{outcome}{f' ({resumed.reason})' if resumed.reason else ''}"
        )
    if recovered.discarded:
        log.warning(f"recovery discarded the executor state: {recovered.discarded}")
    if recovered.released or recovered.expired:
        log.info(f"recovery released node(s): {', '.join([*recovered.released, *recovered.expired])}")

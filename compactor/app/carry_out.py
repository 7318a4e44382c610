"""Carrying a plan out: recover an interrupted run, then execute, for real or as a dry run.

``carry_out`` is ``apply`` and ``run --once``: under the Lease the controller holds too (every write checked against it
first) and the stop signals (a real run stops at its next wait, a safe point), recover first (real runs), plan if no plan
is given (a real ``run --once`` plans only once it holds the Lease and has recovered: on the state it alone changes),
then ``execute``. ``execute`` is one plan through the executor, refused when it would undo recent moves, remembered in the
history after a real run: the controller's cycle (``cycle.py``) runs its plans through it too. ``clean_up`` is the
recovery of a run that may not act: it clears a dead run's leftovers and resumes nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from compactor.actions.client import ClusterClient
from compactor.actions.clock import Clock, Interrupted, RealClock, StoppableClock, on_stop_signals
from compactor.actions.executor import Executor, Progress, RunReport
from compactor.actions.memory import remember_run, reversals
from compactor.actions.recovery import RecoveryReport, leftovers, recover
from compactor.actions.steering.detect import Choice, choose, steerability_of
from compactor.app.invocation import Invocation
from compactor.app.last_run import RunRecord
from compactor.app.windows import window_state
from compactor.app.wiring import cluster_client, exclusive, executor_for
from compactor.errors import CompactorError
from compactor.model.text import listed
from compactor.planner.history import Restraints
from compactor.planner.movability import Steerability
from compactor.planner.plan import CompactionPlan
from compactor.settings import Settings

log = logging.getLogger("compactor.commands")  # what the command line says of its runs, under the name it always had

EXIT_STOPPED = 143  # 128 + SIGTERM, as a shell reports a process that a TERM stopped


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
        settings.executor,
        clock,
        dry_run=dry_run,
        progress=progress,
        rules=settings.planner,
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


def carry_out(
    inv: Invocation,
    plan: CompactionPlan | None,
    make_plan: Callable[[Steerability], CompactionPlan] | None = None,
    *,
    record: RunRecord | None = None,
    restraints: Restraints | None = None,
    progress: Callable[[Progress], None] | None = None,
) -> Carried:
    """Under the Lease and the stop signals: recover (real runs), plan if not given (``make_plan(steerability)``), execute.
    ``restraints``: what the history forbids (a plan that undoes a recent move is refused); ``record``: filled in."""
    settings = inv.settings
    live, real_clock, dry_run = executor_for(inv, plan)
    with stoppable(real_clock, dry_run) as clock, exclusive(live, settings, dry_run) as client:
        try:
            if not dry_run:
                say_recovered(
                    recover(
                        client, settings.executor, clock, rules=settings.planner, dra_drivers=settings.dra.mappings()
                    )
                )
            choice = None
            if plan is None:
                if make_plan is None:
                    raise CompactorError("no plan to carry out")
                choice = choose(
                    client, settings.executor, clock.now()
                )  # the plan leaves in place what this steering cannot place
                plan = make_plan(steerability_of(choice, settings.executor.identity))
            if make_plan is not None:  # `run` made the plan itself: say what it is about to do
                log.info(
                    f"plan {plan.metadata.id}: {len(plan.moves)} move(s), frees {listed(plan.freed_nodes) or 'nothing'}"
                )
            if record is not None:
                record.plan = plan
            report = execute(
                client,
                settings,
                clock,
                plan,
                dry_run=dry_run,
                steering=choice,
                progress=progress,
                restraints=restraints,
            )
            if record is not None:
                record.report = report
            return Carried(client, report)
        except Interrupted:
            return Carried(client, stopped=plan.metadata.id if plan else "")


def clean_up(inv: Invocation) -> RecoveryReport | None:
    """What a dead run left, cleared by a run that may not act (``mode: report`` or ``plan``, outside every window, the
    circuit breaker open): under the Lease, recovery rolls an interrupted plan back, never resumes it, and releases the
    fences, holds, reservations past their time and steering entries no run accounts for, as cluster-autoscaler clears
    its leftover taints at every start. Such leftovers would otherwise wait for the next run that may act: a week for a
    weekly window, for ever in ``mode: report``. None for a snapshot or an operator's ``--dry-run``: those change
    nothing, leftovers included."""
    if not inv.live or inv.dry_run:
        return None
    live = cluster_client(inv, dry_run=False)
    if not leftovers(live, inv.settings.executor):  # the common case: no Lease taken, nothing written
        return None
    with stoppable(RealClock(), False) as clock, exclusive(live, inv.settings, False) as client:
        recovered = recover(
            client,
            inv.settings.executor,
            clock,
            resume=False,
            rules=inv.settings.planner,
            dra_drivers=inv.settings.dra.mappings(),
        )
    say_recovered(recovered)
    return recovered


@contextmanager
def stoppable(clock: Clock, dry_run: bool) -> Iterator[Clock]:
    """SIGTERM/SIGINT stop a real run at its next wait (a safe point): the state stays, the next run recovers it."""
    if dry_run or threading.current_thread() is not threading.main_thread():
        yield clock
        return
    stop = threading.Event()
    with on_stop_signals(stop.set):
        yield StoppableClock(clock, stop)


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

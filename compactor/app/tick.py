"""The controller's tick: one ``cycle`` on the leader's client, watched by the Prometheus exporter.

The controller holds the Lease by leader election, so a cycle acts through the client it was given (every write checked
against the Lease) on the controller's clock (stopped when leadership is lost or the process is asked to stop). What a
cycle saw and did goes to a ``CycleRecorder`` (the controller's exporter) and into the ``CycleReport`` it returns,
never printed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from compactor.actions.executor import Progress
from compactor.actions.port.client import ClusterClient
from compactor.actions.recovery import RecoveryReport
from compactor.actions.services.memory import restraints_now
from compactor.actions.services.report import RunReport
from compactor.actions.steering.detect import Choice
from compactor.app.carry_out import Carried, recover_run
from compactor.app.cycle import Ports, cycle
from compactor.app.figures import cordoned_nodes, figures_for
from compactor.app.last_run import RunRecorder, evictions, gained, record_report
from compactor.app.planning import steering_in
from compactor.app.policy import Admission, HeldBy, Verdict, admit
from compactor.app.reading import world_of
from compactor.app.wiring import recording_client
from compactor.clock import Clock, Interrupted
from compactor.metrics.fragmentation import Figures, ReferenceShape
from compactor.model.types import Snapshot
from compactor.planner.plan import CompactionPlan
from compactor.planner.rules.history import Restraints
from compactor.settings.origins import Settings

log = logging.getLogger("compactor.controller")  # what a cycle says, under the controller's name


class CycleRecorder(RunRecorder, Protocol):
    """Where a cycle reports what it measured and did (``compactor.controller.exporter.Exporter``)."""

    def set_figures(self, figures: Figures, *, cordoned_nodes: int | None = None) -> None: ...

    def record_plan(self, *, seconds: float, gap: float | None, moves: int) -> None: ...

    def set_pause(self, until: float) -> None: ...

    def record_cycle(self, timestamp: float) -> None: ...


@dataclass
class CycleReport:
    started: datetime
    figures: Figures | None = None
    cordoned_nodes: int = 0
    recovery: RecoveryReport | None = None
    plan_id: str = ""
    planned_moves: int = 0
    planned_freed: list[str] = field(default_factory=list)
    plan: CompactionPlan | None = None
    steering: Choice | None = None  # the steering the run went through (chosen before planning)
    run: RunReport | None = None
    paused_until: datetime | None = None  # the circuit breaker's pause, as the cycle's gate read it (None: not paused)

    def summary(self) -> dict[str, Any]:
        cluster = self.figures.cluster if self.figures else None
        return {
            "fragmentationRate": None
            if cluster is None or cluster.fragmentation_rate is None
            else round(cluster.fragmentation_rate, 4),
            "freeGpuEquivalents": None if cluster is None else round(cluster.free_gpus, 2),
            "plan": self.plan_id,
            "plannedMoves": self.planned_moves,
            "status": self.run.status if self.run else "",
            "freedNodes": ",".join(self.run.freed_nodes) if self.run else "",
        }


@dataclass
class ExporterWatcher:
    """A cycle's ``Watcher`` for the controller: the exporter's gauges and counters, and the cycle's report."""

    report: CycleReport
    exporter: CycleRecorder
    settings: Settings
    shapes: tuple[ReferenceShape, ...] | None = None
    wants_figures: bool = True  # the gauges are the controller's figures, every cycle

    def recovered(self, recovery: RecoveryReport, *, acting: bool) -> None:
        self.report.recovery = recovery
        if (resumed := recovery.resumed) is not None:
            self.exporter.record_run(
                resumed.status,
                evictions=evictions(resumed),
                gained=gained(resumed),
                steering=resumed.steering,
                abort_reason=resumed.abort_reason,
            )
        if not acting and recovery.said():
            log.info("cleared a dead run's leftovers: %s", recovery.said())

    def measured(self, snapshot: Snapshot, shapes: tuple[ReferenceShape, ...], figures: Figures | None) -> None:
        self.shapes = shapes
        self._shown(snapshot, figures if figures is not None else figures_for(snapshot, self.settings, shapes))

    def held(self, why: str) -> None:
        return None  # said by the cycle; the breaker's pause is exported when the gate reads it

    def planned(self, plan: CompactionPlan, steering: Choice | None, *, made: bool) -> None:
        report = self.report
        report.plan, report.plan_id, report.planned_moves = plan, plan.metadata.id, len(plan.moves)
        report.planned_freed, report.steering = list(plan.freed_nodes), steering
        self.exporter.record_plan(seconds=plan.solver.plan_seconds, gap=plan.solver.gap, moves=len(plan.moves))

    def carried_out(self, report: RunReport) -> None:
        self.report.run = report
        record_report(self.exporter, report)

    def measured_after(self, snapshot: Snapshot) -> None:
        self._shown(snapshot, figures_for(snapshot, self.settings, self.shapes))

    def _shown(self, snapshot: Snapshot, figures: Figures) -> None:
        self.report.figures, self.report.cordoned_nodes = figures, cordoned_nodes(snapshot)
        self.exporter.set_figures(figures, cordoned_nodes=self.report.cordoned_nodes)


def run_cycle(  # noqa: PLR0913
    load_snapshot: Callable[[], Snapshot],
    client: ClusterClient,
    settings: Settings,
    clock: Clock,
    exporter: CycleRecorder,
    *,
    execute: bool,
    dry_run: bool = False,
    clean: bool = False,
    progress: Callable[[Progress], None] | None = None,
) -> CycleReport:
    """One controller cycle (``cycle.cycle``); the exporter sees the figures and the run's outcome. ``execute=False``:
    figures only (report-only mode, or a replica that is not the leader). ``dry_run``: the plan runs against a
    ``RecordingClient`` over what ``client`` reads. ``clean``: the leader, and not an operator's ``--dry-run``: a dead
    run's leftovers are cleared by a cycle that may not act. Raises ``Interrupted`` when the clock was stopped mid-run
    (the state stays for the next cycle's recovery), ``CompactorError`` when the cluster cannot be read or the settings
    do not fit it."""
    watcher = ExporterWatcher(CycleReport(started=clock.now()), exporter, settings)
    admission = _admitted(client, settings, clock, watcher, dry_run=dry_run) if execute else _MEASURE_ONLY
    ports = Ports(
        settings=settings,
        read=load_snapshot,
        clock=clock,
        acting=lambda: nullcontext((client, clock)),
        simulating=lambda plan: recording_client(world_of(client), plan, settings, reader=client),
        dry_steering=lambda: steering_in(client, settings)[1],
        clean_up=(lambda: recover_run(client, settings, clock, resume=False)) if clean else None,
        progress=progress,
    )
    ended = cycle(admission, ports, watcher)
    if isinstance(ended, Carried) and ended.stopped is not None:
        raise Interrupted
    exporter.record_cycle(clock.now().timestamp())
    return watcher.report


_MEASURE_ONLY = Admission(Verdict.REPORT, "report only", HeldBy.MODE)  # a follower, or --report-only


def _admitted(
    client: ClusterClient, settings: Settings, clock: Clock, watcher: ExporterWatcher, *, dry_run: bool
) -> Admission:
    """The gate, for the configured mode and the command line's ``dry_run``. The breaker's pause is exported once read,
    and kept in the cycle's report (the pending trigger waits it out)."""
    now = clock.now()

    def history() -> Restraints:
        restraints = restraints_now(client, settings, now)
        watcher.exporter.set_pause(restraints.paused_until.timestamp() if restraints.paused_until else 0.0)
        watcher.report.paused_until = restraints.paused_until
        return restraints

    return admit(settings.mode, settings.disruption.windows, now, dry_run=dry_run, history=history)

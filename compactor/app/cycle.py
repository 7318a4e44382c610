"""One controller cycle: recover -> snapshot -> figures -> plan -> execute -> figures again.

The same use cases as the command line (``figures.measure``, ``planning.plan_of``, ``carry_out.execute``), so a cycle
measures and plans a cluster exactly as ``report``, ``plan`` and ``run --once`` do. What a cycle saw and did goes to a
``CycleRecorder`` (the controller's Prometheus exporter), never printed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from compactor.actions.client import ClusterClient
from compactor.actions.clock import Clock, SimulatedClock
from compactor.actions.executor import Progress, RunReport
from compactor.actions.memory import restraints_now
from compactor.actions.recovery import RecoveryReport, recover
from compactor.actions.status import RunStatus
from compactor.actions.steering.detect import Choice, choose, steerability_of
from compactor.app.carry_out import execute as execute_plan
from compactor.app.figures import cordoned_nodes, figures_for, measure
from compactor.app.last_run import RunRecorder, evictions, gained, record_report
from compactor.app.planning import plan_of
from compactor.app.policy import Admission, HeldBy, Verdict, admit
from compactor.app.reading import world_of
from compactor.app.sources import check_selection
from compactor.app.wiring import recording_client
from compactor.metrics.fragmentation import Figures
from compactor.model.types import Snapshot
from compactor.planner.history import Restraints
from compactor.planner.plan import CompactionPlan
from compactor.settings import Settings

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
    """One cycle; the exporter sees the figures and the run's outcome. Raises ``CompactorError`` when the cluster cannot be
    read or the settings do not fit it (a shape no node offers, a planner selection that moves no GPU pod).

    ``execute=False``: figures only (report-only mode, or a replica that is not the leader).
    ``execute=True``: the gate (``policy.admit``: outside every disruption window, or with the circuit breaker open, the
    cycle measures only), then recover an interrupted run, plan, and carry the plan out through ``client``.
    ``dry_run``: the plan runs against a ``RecordingClient`` over what ``client``
    reads, so nothing is changed (it counts in ``runs_total{status="dry-run"}``, never as succeeded nor in evictions).
    ``clean``: the leader, and not an operator's ``--dry-run``: a dead run's leftovers are cleared first whatever the
    mode, window or breaker say; an interrupted plan is resumed only by a cycle that may act, else rolled back.
    """
    report = CycleReport(started=clock.now())
    admission = _admitted(client, settings, clock, exporter, dry_run=dry_run) if execute else None
    acting = admission is not None and admission.acts
    if clean or acting:
        report.recovery = _recovered(client, settings, clock, exporter, acting=acting)
    snapshot = load_snapshot()
    _shown(report, measure(snapshot, settings).figures, snapshot, exporter)
    if admission is not None and admission.plans:
        _planned(report, snapshot, client, settings, clock, exporter, admission)
        report.run = _carried_out(report, client, settings, clock, exporter, admission, progress)
        if admission.acts and _changed(report):
            after = load_snapshot()  # the figures after the run, not the ones it started from
            _shown(report, figures_for(after, settings), after, exporter)
    exporter.record_cycle(clock.now().timestamp())
    return report


def _changed(report: CycleReport) -> bool:
    """Whether the cycle's run or recovery changed the cluster (then its figures are measured again)."""
    ran = report.run is not None and report.run.status != RunStatus.NOTHING_TO_DO
    return ran or bool(report.recovery and report.recovery.changed)


def _admitted(
    client: ClusterClient, settings: Settings, clock: Clock, exporter: CycleRecorder, *, dry_run: bool
) -> Admission:
    """The gate, as the command line asks it: the controller's dry run (``--dry-run`` or ``mode: plan``) runs at any
    time; else a closed window or the open breaker make the cycle measure only. The pause is exported once read."""
    now = clock.now()

    def history() -> Restraints:
        restraints = restraints_now(client, settings, now)
        exporter.set_pause(restraints.paused_until.timestamp() if restraints.paused_until else 0.0)
        return restraints

    admission = admit("apply", settings.disruption.windows, now, dry_run=dry_run, history=history)
    if admission.verdict is Verdict.HELD:
        (log.info if admission.held_by is HeldBy.WINDOW else log.warning)("%s: this cycle measures only", admission.why)
    return admission


def _recovered(
    client: ClusterClient, settings: Settings, clock: Clock, exporter: CycleRecorder, *, acting: bool
) -> RecoveryReport:
    """An interrupted run resumed by a cycle that acts, else rolled back; a dead run's leftovers cleared either way."""
    recovery = recover(
        client, settings.executor, clock, resume=acting, rules=settings.planner, dra_drivers=settings.dra.mappings()
    )
    if (resumed := recovery.resumed) is not None:
        exporter.record_run(
            resumed.status,
            evictions=evictions(resumed),
            gained=gained(resumed),
            steering=resumed.steering,
            abort_reason=resumed.abort_reason,
        )
    if not acting and recovery.said():
        log.info("cleared a dead run's leftovers: %s", recovery.said())
    return recovery


def _shown(report: CycleReport, figures: Figures, snapshot: Snapshot, exporter: CycleRecorder) -> None:
    report.figures, report.cordoned_nodes = figures, cordoned_nodes(snapshot)
    exporter.set_figures(figures, cordoned_nodes=report.cordoned_nodes)


def _planned(
    report: CycleReport,
    snapshot: Snapshot,
    client: ClusterClient,
    settings: Settings,
    clock: Clock,
    exporter: CycleRecorder,
    admission: Admission,
) -> None:
    """The cycle's plan, made with the steering the run will use (the plan leaves in place what it cannot place)."""
    check_selection(snapshot, settings)
    report.steering = choose(client, settings.executor, clock.now())
    assert report.figures is not None  # measured first
    plan = plan_of(
        snapshot,
        settings,
        report.figures.shapes,
        source=snapshot.source,
        now=clock.now(),
        steering=steerability_of(report.steering, settings.executor.identity),
        restraints=admission.restraints,
    )
    report.plan, report.plan_id, report.planned_moves = plan, plan.metadata.id, len(plan.moves)
    report.planned_freed = list(plan.freed_nodes)
    exporter.record_plan(seconds=plan.solver.plan_seconds, gap=plan.solver.gap, moves=len(plan.moves))


def _carried_out(
    report: CycleReport,
    client: ClusterClient,
    settings: Settings,
    clock: Clock,
    exporter: CycleRecorder,
    admission: Admission,
    progress: Callable[[Progress], None] | None,
) -> RunReport:
    """The plan through ``client``, or simulated over a copy of what it reads (a dry run), and its outcome exported."""
    assert report.plan is not None  # planned first
    if admission.acts:
        run = execute_plan(
            client,
            settings,
            clock,
            report.plan,
            dry_run=False,
            steering=report.steering,
            progress=progress,
            restraints=admission.restraints,
        )
    else:
        recording = recording_client(world_of(client), report.plan, settings, reader=client)
        simulated = SimulatedClock(clock.now())
        run = execute_plan(
            recording, settings, simulated, report.plan, dry_run=True, steering=report.steering, progress=progress
        )
    record_report(exporter, run)
    return run

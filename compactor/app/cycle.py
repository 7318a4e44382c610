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
from compactor.actions.steering.detect import choose, steerability_of
from compactor.app.carry_out import execute as execute_plan
from compactor.app.figures import cordoned_nodes, figures_for, measure
from compactor.app.last_run import evictions, gained
from compactor.app.planning import plan_of
from compactor.app.reading import recording_client, world_of
from compactor.app.sources import check_selection
from compactor.metrics.fragmentation import Figures
from compactor.model.types import Snapshot
from compactor.planner.plan import CompactionPlan
from compactor.settings import Settings

log = logging.getLogger("compactor.controller")  # what a cycle says, under the controller's name


class CycleRecorder(Protocol):
    """Where a cycle reports what it measured and did (``compactor.controller.exporter.Exporter``)."""

    def set_figures(self, figures: Figures, *, cordoned_nodes: int | None = None) -> None: ...

    def record_run(
        self,
        status: str,
        *,
        evictions: int = 0,
        gained: tuple[int, int] | None = None,
        recuts: tuple[str, ...] = (),
        steering: str = "",
        steering_not_in_effect: bool = False,
    ) -> None: ...

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
    ``execute=True``: recover an interrupted run, plan, and carry the plan out through ``client``.
    ``dry_run``: the plan runs against a ``RecordingClient`` over what ``client``
    reads, so nothing is changed (it counts in ``runs_total{status="dry-run"}``, never as succeeded nor in evictions).
    ``clean``: the leader, and not an operator's ``--dry-run``: a dead run's leftovers are cleared first whatever the
    mode, window or breaker say; an interrupted plan is resumed only by a cycle that may act, else rolled back.
    """
    report = CycleReport(started=clock.now())
    restraints = restraints_now(client, settings, clock.now()) if execute else None
    if restraints is not None:
        exporter.set_pause(restraints.paused_until.timestamp() if restraints.paused_until else 0.0)
    if restraints is not None and restraints.paused and not dry_run:
        log.warning("%s: this cycle measures only", restraints.paused)
        execute = False
    if clean or (execute and not dry_run):
        acting = execute and not dry_run
        report.recovery = recover(
            client,
            settings.executor,
            clock,
            resume=acting,
            rules=settings.planner,
            dra_drivers=settings.dra.mappings(),
        )
        if report.recovery.resumed is not None:
            resumed = report.recovery.resumed
            exporter.record_run(
                resumed.status, evictions=evictions(resumed), gained=gained(resumed), steering=resumed.steering
            )
        if not acting and report.recovery.said():
            log.info("cleared a dead run's leftovers: %s", report.recovery.said())
    snapshot = load_snapshot()
    figures = measure(snapshot, settings).figures
    exporter.set_figures(figures, cordoned_nodes=cordoned_nodes(snapshot))
    report.figures, report.cordoned_nodes = figures, cordoned_nodes(snapshot)
    if execute:
        check_selection(snapshot, settings)
        steering = choose(
            client, settings.executor, clock.now()
        )  # the plan leaves in place what this steering cannot place
        plan = plan_of(
            snapshot,
            settings,
            figures.shapes,
            source=snapshot.source,
            now=clock.now(),
            steering=steerability_of(steering, settings.executor.identity),
            restraints=restraints,
        )
        report.plan, report.plan_id, report.planned_moves, report.planned_freed = (
            plan,
            plan.metadata.id,
            len(plan.moves),
            list(plan.freed_nodes),
        )
        exporter.record_plan(seconds=plan.solver.plan_seconds, gap=plan.solver.gap, moves=len(plan.moves))
        if dry_run:
            recording = recording_client(world_of(client), plan, settings, reader=client)
            run = execute_plan(
                recording,
                settings,
                SimulatedClock(clock.now()),
                plan,
                dry_run=True,
                steering=steering,
                progress=progress,
            )
        else:
            run = execute_plan(
                client,
                settings,
                clock,
                plan,
                dry_run=False,
                steering=steering,
                progress=progress,
                restraints=restraints,
            )
        report.run = run
        exporter.record_run(
            run.shown_status,
            evictions=evictions(run),
            gained=gained(run),
            recuts=tuple(run.recuts.values()),
            steering=run.steering,
            steering_not_in_effect=run.steering_not_in_effect,
        )
        if not dry_run and (run.status != RunStatus.NOTHING_TO_DO or (report.recovery and report.recovery.changed)):
            snapshot = load_snapshot()  # the figures after the run, not the ones it started from
            report.figures, report.cordoned_nodes = figures_for(snapshot, settings), cordoned_nodes(snapshot)
            exporter.set_figures(report.figures, cordoned_nodes=report.cordoned_nodes)
    exporter.record_cycle(clock.now().timestamp())
    return report

"""The command line's two runs: ``run --once`` (one cycle) and ``apply`` (a cycle carrying out a written plan).

Both ask the one gate (``policy.admit``: mode, then window, then breaker) and run the one pipeline (``cycle.cycle``) on
the command's ports: the invocation's cluster or snapshot, the Lease and the stop signals for a real run, a recording
client for a dry run. What they return is a value the command renders: the figures of a report-only run, why a run was
held, or how carrying the plan out ended. Nothing here prints.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from compactor.actions.executor import Progress
from compactor.actions.recovery import RecoveryReport, leftovers
from compactor.actions.services.report import RunReport
from compactor.actions.steering.detect import Choice
from compactor.app.carry_out import Carried, recover_run, say_recovered
from compactor.app.cycle import Ended, Ports, cycle
from compactor.app.invocation import Invocation
from compactor.app.last_run import RunRecord
from compactor.app.planning import Solving, offline_steerability, steering_in
from compactor.app.policy import HeldBy, Verdict, admit_invocation
from compactor.app.reading import load_for_planning
from compactor.app.sources import mig_parted_namespace
from compactor.app.wiring import (
    acting,
    cluster_client,
    exclusive,
    server_dry_run_needs_a_cluster,
    simulating,
    stoppable,
)
from compactor.clock import RealClock
from compactor.errors import CompactorError
from compactor.metrics.fragmentation import Figures, ReferenceShape
from compactor.model.types import Snapshot
from compactor.planner.plan import CompactionPlan, load_plan
from compactor.planner.rules.movability import Steerability

log = logging.getLogger("compactor.commands")  # what the command line says of its runs, under the name it always had


def run_once(
    inv: Invocation, record: RunRecord, *, progress: Callable[[Progress], None], solving: Callable[[], Solving]
) -> Ended:
    """One cycle of ``run --once``: the gate, then the cycle it allows (a dead run's leftovers cleared by a run that may
    not act; the figures only, a held run, or a plan carried out, simulated when the gate says dry run)."""
    settings = inv.settings
    admission = admit_invocation(inv, datetime.now(UTC))
    if admission.acts:
        _warn_unlike_shipped(inv)
    if admission.verdict is Verdict.REPORT:
        log.info("mode: report: measured only, nothing planned or changed (set mode: plan or apply)")
    elif admission.held_by is HeldBy.MODE:
        log.info("mode: plan: a dry run, nothing is changed (set mode: apply to act)")
    if admission.plans:
        mig_parted_namespace(settings)  # a mig.config_map outside the GPU Operator's namespace: refused before anything
        record.dry_run = not admission.acts
    ports = command_ports(inv, progress=progress, solving=solving)
    return cycle(admission, ports, CommandWatcher(inv, record))


def _warn_unlike_shipped(inv: Invocation) -> None:
    """Before a run acts with no --config: each setting the shipped config would set otherwise (issues 18, 45)."""
    if inv.unlike_shipped:
        log.warning(inv.unlike_shipped + "; this run acts: --dry-run to only look")


def apply(inv: Invocation, plan_file: str, *, progress: Callable[[Progress], None]) -> Carried:
    """``apply``: a cycle carrying out a written plan, refused (not simulated) when the gate would not let a run act:
    ``apply`` names one plan to carry out, so outside apply mode, a window or under the breaker only ``--dry-run``
    shows it."""
    admission = admit_invocation(inv, datetime.now(UTC))
    if admission.held_by is HeldBy.MODE:
        raise CompactorError(
            f"mode is {inv.settings.mode!r} (config or COMPACTOR_MODE): this installation does not act; add --dry-run "
            "to see what the plan would do, or set mode: apply"
        )
    if admission.verdict is Verdict.HELD:
        where = " (disruption.windows)" if admission.held_by is HeldBy.WINDOW else ""
        raise CompactorError(f"{admission.why}{where}; --dry-run shows what the plan would do")
    if admission.acts:
        _warn_unlike_shipped(inv)
    ended = cycle(admission, command_ports(inv, progress=progress), CommandWatcher(inv), plan=load_plan(plan_file))
    assert isinstance(ended, Carried)  # the gate let it plan (act or dry run): it carried the plan out
    return ended


def command_ports(
    inv: Invocation, *, progress: Callable[[Progress], None] | None = None, solving: Callable[[], Solving] | None = None
) -> Ports:
    """What a command's cycle runs on: the invocation's input, the Lease for a real run, a recording client for a dry
    run; a dead run's leftovers are the business of a live run that is not an operator's ``--dry-run``."""
    settings = inv.settings
    server_dry_run_needs_a_cluster(inv)

    def dry_steering() -> Steerability:
        return (
            steering_in(cluster_client(inv, dry_run=True), settings)[1] if inv.live else offline_steerability(settings)
        )

    return Ports(
        settings=settings,
        read=lambda: load_for_planning(inv),
        clock=RealClock(),
        acting=lambda: acting(inv),
        simulating=lambda plan: simulating(inv, plan),
        dry_steering=dry_steering,
        clean_up=None if inv.dry_run or not inv.live else lambda: clean_up(inv),
        progress=progress,
        solving=solving,
    )


def clean_up(inv: Invocation) -> RecoveryReport | None:
    """What a dead run left, cleared by a run that may not act (``mode: report`` or ``plan``, outside every window, the
    circuit breaker open): under the Lease, recovery rolls an interrupted plan back, never resumes it, and releases the
    fences, holds, reservations past their time and steering entries no run accounts for, as cluster-autoscaler clears
    its leftover taints at every start. Such leftovers would otherwise wait for the next run that may act: a week for a
    weekly window, for ever in ``mode: report``. None when there is nothing to clear (no Lease taken, nothing written)."""
    live = cluster_client(inv, dry_run=False)
    if not leftovers(live, inv.settings.for_executor):
        return None
    settings = inv.settings
    with stoppable(RealClock()) as clock, exclusive(live, settings, False) as client:
        return recover_run(client, settings, clock, resume=False)


@dataclass
class CommandWatcher:
    """A command's ``Watcher``: what recovery did, on stderr; what the run saw and did, in its record (``run --once``
    leaves it in the cluster; ``apply`` keeps none)."""

    inv: Invocation
    record: RunRecord | None = None

    @property
    def wants_figures(self) -> bool:
        """A live ``run --once`` leaves a summary with the figures after a real run (and the Pushgateway the figures
        before): worth reading the cluster again for."""
        return self.record is not None and self.inv.live

    def recovered(self, recovery: RecoveryReport, *, acting: bool) -> None:
        say_recovered(recovery)
        if not acting and self.record is not None:
            self.record.recovery = recovery

    def measured(self, snapshot: Snapshot, shapes: tuple[ReferenceShape, ...], figures: Figures | None) -> None:
        if self.record is not None:
            self.record.saw(snapshot, shapes, figures)

    def held(self, why: str) -> None:
        if self.record is not None:
            self.record.held = why

    def planned(self, plan: CompactionPlan, steering: Choice | None, *, made: bool) -> None:
        if self.record is not None:
            self.record.plan = plan

    def carried_out(self, report: RunReport) -> None:
        if self.record is not None:
            self.record.report = report

    def measured_after(self, snapshot: Snapshot) -> None:
        if self.record is not None:
            self.record.measure_after(snapshot, self.inv.settings)

"""The command line's two runs: ``run --once`` (plan and carry out one cycle) and ``apply`` (carry out a written plan).

Both ask the one gate (``policy.admit``: mode, then window, then breaker) and carry the plan out through
``carry_out.carry_out`` (the Lease, the stop signals, recovery first), as the controller's cycle does (``cycle.py``).
What they return is a value the command renders: the figures of a report-only run, why a run was held, or how carrying
the plan out ended. Nothing here prints.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from compactor.actions.executor import Progress
from compactor.app.carry_out import Carried, carry_out, clean_up
from compactor.app.figures import Measured, measure
from compactor.app.invocation import Invocation
from compactor.app.last_run import RunRecord
from compactor.app.planning import Solving, offline_steerability, plan_of, prepare, steering_in
from compactor.app.policy import Admission, HeldBy, Verdict, admit_invocation
from compactor.app.reading import load_for_planning, load_snapshot
from compactor.app.sources import mig_parted_namespace
from compactor.app.wiring import cluster_client
from compactor.errors import CompactorError
from compactor.planner.movability import Steerability
from compactor.planner.plan import CompactionPlan, load_plan

log = logging.getLogger("compactor.commands")  # what the command line says of its runs, under the name it always had


@dataclass(frozen=True)
class Held:
    """A run that changes nothing on purpose (a closed window, the circuit breaker), and why."""

    why: str


Ended = Measured | Held | Carried  # report only | held | carried out (or stopped)


def run_once(
    inv: Invocation, record: RunRecord, *, progress: Callable[[Progress], None], solving: Callable[[], Solving]
) -> Ended:
    """One cycle of ``run --once``: the gate, a dead run's leftovers cleared by a run that may not act, then the figures
    only (``mode: report``), a held run, or a plan carried out (simulated when the gate says dry run)."""
    settings = inv.settings
    now = datetime.now(UTC)
    if inv.live and not inv.dry_run and settings.mode == "apply" and "mode" not in settings.model_fields_set:
        log.warning(
            "mode: apply is the code's default (neither a config file nor COMPACTOR_MODE set one); the shipped config "
            "(manifests/base/config.yaml) says mode: plan. This run acts; --dry-run or mode: plan to only look"
        )
    admission = admit_invocation(inv, now)
    if admission.held_by is not HeldBy.NOTHING:  # a run that may not act still clears a dead run's leftovers
        record.recovery = clean_up(inv)
    if admission.verdict is Verdict.REPORT:
        log.info("mode: report: measured only, nothing planned or changed (set mode: plan or apply)")
        measured = measure(load_snapshot(inv), settings)
        record.saw(measured.snapshot, measured.figures.shapes, measured.figures)
        return measured
    if admission.verdict is Verdict.HELD:
        say = log.info if admission.held_by is HeldBy.WINDOW else log.warning
        say(f"{admission.why}: this run changes nothing")
        record.held = admission.why
        return Held(admission.why)
    if admission.held_by is HeldBy.MODE:
        log.info("mode: plan: a dry run, nothing is changed (set mode: apply to act)")
    return _plan_and_carry_out(replace(inv, dry_run=not admission.acts), record, admission, progress, solving)


def _plan_and_carry_out(
    inv: Invocation,
    record: RunRecord,
    admission: Admission,
    progress: Callable[[Progress], None],
    solving: Callable[[], Solving],
) -> Carried:
    """A real run plans once it holds the Lease and has recovered (``carry_out`` calls ``plan_now``); a dry run's client
    is made over its plan, so it plans first, with the steering asked of the cluster (if any)."""
    settings, source = inv.settings, inv.input()
    record.dry_run = inv.dry_run
    mig_parted_namespace(settings)  # a mig.config_map outside the GPU Operator's namespace: refused before anything

    def plan_now(steering: Steerability) -> CompactionPlan:
        snapshot = load_for_planning(inv)
        shapes = prepare(snapshot, settings)
        record.saw(snapshot, shapes)
        with solving() as watch:
            return plan_of(
                snapshot,
                settings,
                shapes,
                source=source.describe(),
                now=datetime.now(UTC),
                steering=steering,
                stage=watch.stage,
                restraints=admission.restraints,
            )

    first = None
    if inv.dry_run:
        steerability = (
            steering_in(cluster_client(inv, dry_run=True), settings)[1] if inv.live else offline_steerability(settings)
        )
        first = plan_now(steerability)
    return carry_out(inv, first, plan_now, record=record, restraints=admission.restraints, progress=progress)


def apply(inv: Invocation, plan_file: str, *, progress: Callable[[Progress], None]) -> Carried:
    """``apply``: carry out a written plan, refused (not simulated) when the gate would not let a run act: ``apply``
    names one plan to carry out, so outside apply mode, a window or under the breaker only ``--dry-run`` shows it."""
    admission = admit_invocation(inv, datetime.now(UTC))
    if admission.held_by is HeldBy.MODE:
        raise CompactorError(
            f"mode is {inv.settings.mode!r} (config or COMPACTOR_MODE): this installation does not act; add --dry-run "
            "to see what the plan would do, or set mode: apply"
        )
    if admission.verdict is Verdict.HELD:
        where = " (disruption.windows)" if admission.held_by is HeldBy.WINDOW else ""
        raise CompactorError(f"{admission.why}{where}; --dry-run shows what the plan would do")
    restraints = None if inv.dry_run else admission.restraints
    return carry_out(inv, load_plan(plan_file), restraints=restraints, progress=progress)

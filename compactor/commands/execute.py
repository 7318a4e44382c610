"""``compactor apply`` (carry out a written plan) and ``compactor run --once`` (plan and carry out one cycle)."""

from __future__ import annotations

import argparse
import logging
import sys
from datetime import UTC, datetime

from compactor.app.carry_out import EXIT_STOPPED, Carried, carry_out, clean_up
from compactor.app.figures import measure
from compactor.app.invocation import Invocation, from_args
from compactor.app.last_run import RunRecord, finish
from compactor.app.planning import offline_steerability, plan_of, prepare, steering_in
from compactor.app.policy import restraints, window_closed, within_mode
from compactor.app.reading import cluster_client, load_for_planning, load_snapshot
from compactor.app.sources import mig_parted_namespace
from compactor.commands.options import add_common_options, add_source_options
from compactor.commands.progress import SolveProgress, TerminalProgress
from compactor.commands.render import held_text, print_run
from compactor.controller.exporter import Exporter
from compactor.errors import CompactorError
from compactor.planner.history import Restraints
from compactor.planner.movability import Steerability
from compactor.planner.plan import CompactionPlan, load_plan
from compactor.render.report import render_report

log = logging.getLogger("compactor.commands")

EXIT_FAILED = 1
EXIT_BAD_INPUT = 2


def cmd_apply(args: argparse.Namespace) -> int:
    inv = within_mode(from_args(args, "apply"))
    if (closed := window_closed(inv, datetime.now(UTC))) is not None:
        raise CompactorError(f"{closed} (disruption.windows); --dry-run shows what the plan would do")
    restrained = None if inv.dry_run else restraints(inv, datetime.now(UTC))
    if restrained is not None and restrained.paused:
        raise CompactorError(f"{restrained.paused}; --dry-run shows what the plan would do")
    return _shown(
        inv, carry_out(inv, load_plan(args.plan), restraints=restrained, progress=TerminalProgress(inv.log_format))
    )


def cmd_run(args: argparse.Namespace) -> int:
    if not args.once:
        raise CompactorError(
            "compactor run carries out one cycle and needs --once to say so; for cycles on a schedule run "
            "`compactor controller --interval SECONDS` (or the CronJob in manifests/)"
        )
    inv = from_args(args, "run")
    settings = inv.settings
    record = RunRecord(
        mode=settings.mode,
        installation=settings.executor.identity,
        started=datetime.now(UTC),
        keep_figures=bool(settings.metrics.pushgateway_url) and inv.live,
        dry_run=inv.dry_run,
    )
    try:
        code = _run_once(inv, record)
    except Exception as exc:  # a failed run is recorded too, then fails as it would have
        record.error = str(exc) or type(exc).__name__
        _leave_record(inv, record, EXIT_BAD_INPUT if isinstance(exc, CompactorError) else EXIT_FAILED)
        raise
    _leave_record(inv, record, code)
    return code


def _run_once(inv: Invocation, record: RunRecord) -> int:
    settings = inv.settings
    now = datetime.now(UTC)
    if inv.live and not inv.dry_run and settings.mode == "apply" and "mode" not in settings.model_fields_set:
        log.warning(
            "mode: apply is the code's default (neither a config file nor COMPACTOR_MODE set one); the shipped config "
            "(manifests/base/config.yaml) says mode: plan. This run acts; --dry-run or mode: plan to only look"
        )
    restrained = None
    if not inv.dry_run:  # an operator's --dry-run changes nothing; any other run clears leftovers, acting or not
        held, restrained = _why_not_act(inv, now)
        if held:
            record.recovery = clean_up(inv)
    if settings.mode == "report" and not inv.dry_run:
        return _report_only(inv, record)
    inv = within_mode(inv)
    record.dry_run = inv.dry_run
    if (closed := window_closed(inv, now)) is not None:
        log.info(f"{closed}: this run changes nothing")
        return _held(inv, record, closed)
    if restrained is None:
        restrained = restraints(inv, now)
    if restrained is not None and restrained.paused and not inv.dry_run:
        log.warning(f"{restrained.paused}: this run changes nothing")
        return _held(inv, record, restrained.paused)
    source = inv.input()
    mig_parted_namespace(settings)  # a mig.config_map outside the GPU Operator's namespace: refused before anything

    def plan_now(steering: Steerability) -> CompactionPlan:
        snapshot = load_for_planning(inv)
        shapes = prepare(snapshot, settings)
        record.saw(snapshot, shapes)
        with SolveProgress() as progress:
            return plan_of(
                snapshot,
                settings,
                shapes,
                source=source.describe(),
                now=datetime.now(UTC),
                steering=steering,
                stage=progress.stage,
                restraints=restrained,
            )

    progress = TerminalProgress(inv.log_format)
    if inv.dry_run:  # the dry-run client is made over the plan, so the steering is asked of the cluster (if any) first
        steerability = (
            steering_in(cluster_client(inv, dry_run=True), settings)[1] if inv.live else offline_steerability(settings)
        )
        return _shown(
            inv,
            carry_out(
                inv,
                plan_now(steerability),
                plan_now,
                record=record,
                restraints=restrained,
                progress=progress,
            ),
        )
    return _shown(inv, carry_out(inv, None, plan_now, record=record, restraints=restrained, progress=progress))


def _shown(inv: Invocation, carried: Carried) -> int:
    """The run's report on stdout and its exit code, or the stop it met."""
    if carried.report is None:
        plan_id = carried.stopped or ""
        log.warning(
            f"stopped at a safe point{f' during plan {plan_id}' if plan_id else ''}; held nodes were released, "
            "the rest (fences, the state ConfigMap) is resumed or rolled back by the next run's recovery"
        )
        return EXIT_STOPPED
    return print_run(carried.report, carried.client, inv.output, inv.verbose)


def _why_not_act(inv: Invocation, now: datetime) -> tuple[str, Restraints | None]:
    """Why this run may not act ("" when it may: then it recovers, resuming, under the Lease it acts under), and what the
    history forbids (read once)."""
    mode = inv.settings.mode
    if mode != "apply":
        return f"mode: {mode}", None
    if (closed := window_closed(inv, now)) is not None:
        return closed, None
    restrained = restraints(inv, now)
    return (restrained.paused if restrained is not None and restrained.paused else ""), restrained


def _report_only(inv: Invocation, record: RunRecord) -> int:
    """``mode: report``: measure and print the figures; nothing is planned or changed."""
    measured = measure(load_snapshot(inv), inv.settings)
    record.saw(measured.snapshot, measured.figures.shapes, measured.figures)
    log.info("mode: report: measured only, nothing planned or changed (set mode: plan or apply)")
    sys.stdout.write(render_report(measured.figures, measured.snapshot, "json" if inv.output == "json" else "text"))
    return 0


def _held(inv: Invocation, record: RunRecord, why: str) -> int:
    record.held = why
    sys.stdout.write(held_text(why, inv.output, record.cleaned_up))
    return 0


def _leave_record(inv: Invocation, record: RunRecord, exit_code: int) -> None:
    """A live run's summary ConfigMap and Event, and the Pushgateway if configured (compactor/last_run.py); never raises.
    Nothing for a snapshot file: there is no cluster to write to."""
    if not inv.live:
        return
    try:
        # The run's own bookkeeping, like its log: written through the real client in every mode, dry runs included
        # (never through the recording client), and a failure to write it is a warning that leaves the exit code alone.
        finish(
            record,
            inv.settings,
            exit_code=exit_code,
            client=lambda: cluster_client(inv, dry_run=False),
            reload=lambda: load_for_planning(inv),
            exporter=Exporter,
        )
    except Exception as exc:
        log.warning(f"could not record the run (the run itself is unaffected): {type(exc).__name__}: {exc}")


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    apply = commands.add_parser("apply", help="carry out a plan written by `compactor plan --write`")
    apply.add_argument("--plan", required=True, metavar="FILE", help="plan JSON")
    run = commands.add_parser("run", help="plan and carry out one compaction cycle")
    run.add_argument("--once", action="store_true", help="one cycle, then exit")
    for parser in (apply, run):
        add_source_options(parser)
        add_common_options(parser)
        parser.add_argument(
            "--dry-run", action="store_true", help="change nothing; print the calls a real run would make"
        )
        parser.add_argument(
            "--server-dry-run",
            action="store_true",
            help="with --dry-run on a live cluster: ask the API server (dryRun=All) whether each eviction would be admitted",
        )
        parser.add_argument("--output", "-o", choices=("text", "json"), default="text")
    run.add_argument("--shape", action="append", metavar="RES=QTY,...", help=argparse.SUPPRESS)
    apply.set_defaults(handler=cmd_apply)
    run.set_defaults(handler=cmd_run)

"""``compactor apply`` (carry out a written plan) and ``compactor run --once`` (plan and carry out one cycle)."""

from __future__ import annotations

import argparse
import logging
import sys
from datetime import UTC, datetime

from compactor.app.carry_out import Carried
from compactor.app.cycle import Held
from compactor.app.figures import Measured
from compactor.app.invocation import Invocation
from compactor.app.last_run import RunRecord, finish
from compactor.app.once import apply, run_once
from compactor.app.wiring import cluster_client
from compactor.commands.options import add_common_options, add_source_options, from_args
from compactor.commands.progress import SolveProgress, TerminalProgress
from compactor.controller.exporter import Exporter
from compactor.errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, EXIT_STOPPED, CompactorError
from compactor.render.report import render_report
from compactor.render.run import held_text, run_output

log = logging.getLogger("compactor.commands")


def cmd_apply(args: argparse.Namespace) -> int:
    inv = from_args(args, "apply")
    return _shown(inv, apply(inv, args.plan, progress=TerminalProgress(inv.log_format)))


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
    ended = run_once(inv, record, progress=TerminalProgress(inv.log_format), solving=SolveProgress)
    if isinstance(ended, Measured):
        fmt = "json" if inv.output == "json" else "text"
        sys.stdout.write(render_report(ended.figures, ended.snapshot, fmt))
        return EXIT_OK
    if isinstance(ended, Held):
        sys.stdout.write(held_text(ended.why, inv.output, record.cleaned_up))
        return EXIT_OK
    return _shown(inv, ended)


def _shown(inv: Invocation, carried: Carried) -> int:
    """The run's report on stdout and its exit code, or the stop it met."""
    if carried.report is None:
        plan_id = carried.stopped or ""
        log.warning(
            f"stopped at a safe point{f' during plan {plan_id}' if plan_id else ''}; held nodes were released, "
            "the rest (fences, the state ConfigMap) is resumed or rolled back by the next run's recovery"
        )
        return EXIT_STOPPED
    text, code = run_output(carried.report, carried.client, inv.output, inv.verbose)
    sys.stdout.write(text)
    return code


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

"""``compactor controller`` on the command line: its options, and the wiring of one live cluster into the ``Controller``."""

from __future__ import annotations

import argparse
import logging

from compactor.app.invocation import for_cluster
from compactor.app.policy import may_change
from compactor.app.sources import mig_parted_namespace
from compactor.app.wiring import wire_controller
from compactor.commands.options import add_common_options, note_the_defaults, settings_from_args
from compactor.controller.exporter import Exporter
from compactor.controller.http import parse_listen
from compactor.controller.loop import (
    DEFAULT_INTERVAL,
    DEFAULT_LISTEN,
    DEFAULT_PENDING_AFTER,
    DEFAULT_PENDING_GAP,
    MIN_PENDING_AFTER,
    MIN_PENDING_GAP,
    Controller,
    ControllerOptions,
)
from compactor.errors import CompactorError

log = logging.getLogger("compactor.commands")


def cmd_controller(args: argparse.Namespace) -> int:
    if args.interval <= 0:
        raise CompactorError(f"--interval must be > 0, got {args.interval:g}")
    if args.stale_after is not None and args.stale_after <= args.interval:
        raise CompactorError(
            f"--stale-after must be longer than --interval ({args.interval:g} s), got {args.stale_after:g}"
        )
    if args.pending_after != 0 and args.pending_after < MIN_PENDING_AFTER:
        raise CompactorError(
            f"--pending-after must be 0 (off) or at least {MIN_PENDING_AFTER:g} s (the trigger lists the pending pods "
            f"at most that often), got {args.pending_after:g}"
        )
    if args.pending_gap < MIN_PENDING_GAP:
        raise CompactorError(f"--pending-gap must be at least {MIN_PENDING_GAP:g} s, got {args.pending_gap:g}")
    parse_listen(args.listen)
    settings = settings_from_args(args)
    options = controller_options(args)
    inv = for_cluster(
        settings, kubeconfig=args.kubeconfig, context=args.context, in_cluster=args.in_cluster, dry_run=options.dry_run
    )
    # a mig.config_map outside the GPU Operator's namespace: refused at the start, not every cycle
    mig_parted_namespace(settings)
    acts = may_change(settings.mode, dry_run=options.dry_run) and not options.report_only
    noted = note_the_defaults(args, settings, acts=acts)
    if noted:
        log.log(*noted)  # the controller runs until stopped: said at its start, once the options were found sound
    wired = wire_controller(inv, leader_election=not args.no_leader_election)
    controller = Controller(
        load_snapshot=wired.load_snapshot,
        client=wired.client,
        settings=settings,
        exporter=Exporter(),
        options=options,
        elector=wired.elector,
    )
    try:
        return controller.run_forever()
    finally:
        wired.close()


def controller_options(args: argparse.Namespace) -> ControllerOptions:
    """The flags. The configured mode is the gate's to read (``app.policy.admit``, each cycle): ``plan`` dry-runs every
    cycle, ``report`` only measures, and neither undoes a flag."""
    return ControllerOptions(
        interval=args.interval,
        listen=args.listen,
        dry_run=args.dry_run,
        report_only=args.report_only,
        clean_up=not args.dry_run,
        stale_after=args.stale_after,
        pending_after=args.pending_after,
        pending_gap=args.pending_gap,
    )


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("controller", help="run compaction cycles on a schedule; serve /metrics and /healthz")
    group = parser.add_argument_group("cluster")
    group.add_argument(
        "--kubeconfig",
        metavar="PATH",
        help="kubeconfig of the cluster (default: in a pod the service account, else ~/.kube/config)",
    )
    group.add_argument("--context", metavar="NAME", help="kubeconfig context")
    group.add_argument("--in-cluster", action="store_true", help="use the pod's service account")
    add_common_options(parser)
    parser.add_argument(
        "--interval",
        type=float,
        default=DEFAULT_INTERVAL,
        metavar="SECONDS",
        help=f"seconds between cycles (default {DEFAULT_INTERVAL:g}; the first runs at start)",
    )
    parser.add_argument(
        "--stale-after",
        type=float,
        default=None,
        metavar="SECONDS",
        help="/healthz fails when no cycle started or ended for this long (default 3 x --interval "
        "+ solver.time_limit_seconds), when one cycle runs longer than twice the worst-case run, "
        "or when the Lease was neither renewed nor seen to change for two lease durations",
    )
    _add_pending_options(parser)
    parser.add_argument(
        "--listen",
        default=DEFAULT_LISTEN,
        metavar="[HOST]:PORT",
        help=f"/metrics, /healthz, /readyz (default {DEFAULT_LISTEN})",
    )
    parser.add_argument("--dry-run", action="store_true", help="plan and simulate each run; change nothing")
    parser.add_argument("--no-leader-election", action="store_true", help="act without the Lease (one replica only!)")
    parser.add_argument("--report-only", action="store_true", help="export the figures; never recover, plan or execute")
    parser.set_defaults(handler=cmd_controller)


def _add_pending_options(parser: argparse.ArgumentParser) -> None:
    """The pending trigger (compactor/app/pending.py): a blocked GPU pod starts a cycle before the interval is up."""
    parser.add_argument(
        "--pending-after",
        type=float,
        default=DEFAULT_PENDING_AFTER,
        metavar="SECONDS",
        help="a GPU pod its scheduler has found no node for, for this long, starts a cycle at once, not at the next "
        f"--interval (default {DEFAULT_PENDING_AFTER:g}; 0: off; else at least {MIN_PENDING_AFTER:g}); once per pod",
    )
    parser.add_argument(
        "--pending-gap",
        type=float,
        default=DEFAULT_PENDING_GAP,
        metavar="SECONDS",
        help=f"such a cycle starts at least this long after the last one ended (default {DEFAULT_PENDING_GAP:g}; "
        f"at least {MIN_PENDING_GAP:g})",
    )

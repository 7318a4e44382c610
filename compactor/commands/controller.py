"""``compactor controller`` on the command line: its options, and the wiring of one live cluster into the ``Controller``."""

from __future__ import annotations

import argparse

from compactor.actions.client import ClusterClient
from compactor.actions.fencing import FencedClient
from compactor.app.invocation import for_cluster, settings_from_args
from compactor.app.reading import load_for_planning
from compactor.app.sources import mig_parted_namespace
from compactor.commands.options import add_common_options
from compactor.controller.exporter import Exporter
from compactor.controller.http import parse_listen
from compactor.controller.loop import DEFAULT_INTERVAL, DEFAULT_LISTEN, Controller, ControllerOptions
from compactor.errors import CompactorError
from compactor.kube.client import connect
from compactor.kube.cluster_client import KubeClusterClient
from compactor.kube.lease import LeaderElector, identity
from compactor.model.types import Snapshot
from compactor.settings import Settings


def cmd_controller(args: argparse.Namespace) -> int:
    if args.interval <= 0:
        raise CompactorError(f"--interval must be > 0, got {args.interval:g}")
    if args.stale_after is not None and args.stale_after <= args.interval:
        raise CompactorError(
            f"--stale-after must be longer than --interval ({args.interval:g} s), got {args.stale_after:g}"
        )
    parse_listen(args.listen)
    settings = settings_from_args(args)
    options = controller_options(args, settings)
    inv = for_cluster(
        settings, kubeconfig=args.kubeconfig, context=args.context, in_cluster=args.in_cluster, dry_run=options.dry_run
    )
    # a mig.config_map outside the GPU Operator's namespace: refused at the start, not every cycle
    mig_parted_namespace(settings)
    connection = connect(args.kubeconfig, args.context, in_cluster=args.in_cluster)
    namespace = settings.executor.state_namespace
    # writes give up well within the Lease's margin (leader_election.write_timeout_seconds, validated with the settings)
    client = KubeClusterClient(
        connection.api_client, namespace=namespace, write_timeout=settings.leader_election.write_timeout_seconds
    )

    def load_snapshot() -> Snapshot:  # as `run --once` reads it, through the controller's one connection
        return load_for_planning(inv, connection=connection)

    elector = (
        None
        if args.no_leader_election
        else LeaderElector.configured(connection.api_client, namespace, identity(), settings.leader_election)
    )
    # writes only while leading
    acting: ClusterClient = client if elector is None else FencedClient(client, elector.holds, elector.ref)
    controller = Controller(
        load_snapshot=load_snapshot,
        client=acting,
        settings=settings,
        exporter=Exporter(),
        options=options,
        elector=elector,
    )
    try:
        return controller.run_forever()
    finally:
        client.close()


def controller_options(args: argparse.Namespace, settings: Settings) -> ControllerOptions:
    """The flags, made safer by the configured mode: plan dry-runs every cycle, report only measures."""
    return ControllerOptions(
        interval=args.interval,
        listen=args.listen,
        dry_run=args.dry_run or settings.mode == "plan",
        report_only=args.report_only or settings.mode == "report",
        clean_up=not args.dry_run,
        stale_after=args.stale_after,
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
        "+ planner.time_limit_seconds), when one cycle runs longer than twice the worst-case run, "
        "or when the Lease was neither renewed nor seen to change for two lease durations",
    )
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

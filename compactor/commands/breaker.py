"""``compactor breaker reset``: close the circuit breaker by hand (docs/executor.md, "Disruption controls")."""

from __future__ import annotations

import argparse
import sys

from compactor.app.breaker_reset import reset
from compactor.commands.options import add_common_options, from_args, is_live
from compactor.errors import EXIT_OK, CompactorError


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    breaker = commands.add_parser("breaker", help="close the circuit breaker by hand once its cause is fixed")
    actions = breaker.add_subparsers(dest="action", required=True, metavar="ACTION")
    resetting = actions.add_parser(
        "reset",
        help="lift the pause and forget the failed moves (the moves made stay, with their cooldowns); an Event says so",
    )
    cluster = resetting.add_argument_group("cluster (one of)")
    cluster.add_argument("--kubeconfig", metavar="PATH", help="the live cluster, through this kubeconfig")
    cluster.add_argument("--context", metavar="NAME", help="kubeconfig context of the live cluster")
    cluster.add_argument("--in-cluster", action="store_true", help="the live cluster, with the pod's service account")
    add_common_options(resetting)
    breaker.set_defaults(handler=cmd_breaker)


def cmd_breaker(args: argparse.Namespace) -> int:
    if not is_live(args):
        raise CompactorError(
            "compactor breaker reset acts on a live cluster: name it (--kubeconfig, --context, --in-cluster)"
        )
    inv = from_args(args, "breaker")
    sys.stdout.write(reset(inv) + "\n")
    return EXIT_OK

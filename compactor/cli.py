"""The ``compactor`` command line: report, plan, apply, run, controller, config.

The parser and the top-level error handling; each command is an adapter of its own (``compactor.commands``,
``compactor.commands.config``) over ``compactor.app``.

Every user-facing failure is a ``CompactorError`` printed as one line on stderr with exit code 2; tracebacks are
reserved for bugs.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from compactor import __version__
from compactor.commands import breaker, controller, execute, plan, report
from compactor.commands import config as config_command
from compactor.commands.options import AT_THE_END, said_at_the_end
from compactor.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_OK, CompactorError
from compactor.logs import configure_logging

log = logging.getLogger("compactor")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="compactor", description="Measure and repair GPU fragmentation in Kubernetes clusters."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    report.register(commands)
    plan.register(commands)
    execute.register(commands)
    controller.register(commands)
    config_command.register(commands)
    breaker.register(commands)
    for name, sub in commands.choices.items():
        description, examples = COMMAND_HELP[name]
        sub.description = description
        sub.epilog = "examples:\n" + "\n".join(f"  {example}" for example in examples)
        sub.formatter_class = argparse.RawDescriptionHelpFormatter
    return parser


# Each command's --help: what it does, in one paragraph, and two ways to call it.
COMMAND_HELP: dict[str, tuple[str, tuple[str, ...]]] = {
    "breaker": (
        "Close the circuit breaker by hand once the cause of the failed moves is fixed: the pause lifts and the failed "
        "moves are forgotten, the moves made stay in the history with their cooldowns. Holds the Lease as a run does; "
        "an Event (CompactorBreakerReset) on the ConfigMap gpu-compactor-history says so. A history that does not parse "
        "is started anew.",
        (
            "compactor breaker reset --context prod",
            "compactor breaker reset --in-cluster --config /etc/gpu-compactor/compactor.yaml",
        ),
    ),
    "report": (
        "Measure GPU fragmentation: the headline figures first (whole-free GPUs, blocked demand, stranded share), then "
        "allocatable against the requests of bound pods, per node, pool and cluster; whole-free "
        "GPU nodes, stranded capacity, idle MIG slices, the fragmentation rates, headroom per request shape, and the pending "
        "GPU pods that fragmentation alone keeps Pending. Reads only; changes nothing.",
        (
            "compactor report --example",
            "kubectl get nodes,pods,pdb,pv,pvc -A -o json | compactor report --snapshot - --output markdown",
        ),
    ),
    "plan": (
        "Compute a compaction plan: which pods to move where so that pending GPU pods fit and whole GPU nodes become free, "
        "with the fewest and cheapest moves, never against PDBs, taints, affinity or capacity. Shows the trade-off curve "
        "(nodes freed against moves) and why each pod moves or stays. Reads only; --write saves the plan for `compactor apply`.",
        (
            "compactor plan --example --objective max-free",
            "compactor plan --context prod --output json --write plan.json",
        ),
    ),
    "apply": (
        "Carry out a plan written by `compactor plan --write`: re-check it against the cluster as it is now, fence the "
        "nodes to free (a NoSchedule taint of the installation's own; an operator's cordon is never touched), evict "
        "through the Eviction API, steer each replacement onto its planned node, then measure what the cluster gained. "
        "Recovers an interrupted run first and holds the controller's Lease while it acts. --dry-run prints the calls instead.",
        (
            "compactor apply --plan plan.json --snapshot cluster.json --dry-run",
            "compactor apply --plan plan.json --context prod",
        ),
    ),
    "run": (
        "One compaction cycle: recover, read the cluster, plan and carry the plan out (plan + apply in one step). It needs "
        "--once: a single cycle is what it does; for cycles on a schedule, run `compactor controller --interval SECONDS` "
        "(or the CronJob in manifests/).",
        ("compactor run --once --context prod --dry-run", "compactor run --once --in-cluster"),
    ),
    "controller": (
        "The long-running controller: a compaction cycle every --interval seconds on the replica that holds the Lease "
        "(leader election), fragmentation figures always; serves Prometheus /metrics, /healthz and /readyz.",
        (
            "compactor controller --in-cluster --interval 900",
            "compactor controller --context staging --report-only --listen :8080",
        ),
    ),
    "config": (
        "Check a config before applying it, and see what a run would use. `validate FILE` reads a settings YAML or the "
        "ConfigMap that mounts it (data.compactor.yaml) and exits 2 naming the key of the first error; `show` prints the "
        "effective settings: defaults, then --config, then COMPACTOR_* environment variables.",
        (
            "compactor config validate manifests/base/config.yaml",
            "compactor config show --config manifests/base/config.yaml --output json",
        ),
    ),
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(getattr(args, "log_format", "text"), getattr(args, "verbose", False))
    try:
        AT_THE_END.clear()  # a command that failed in this process before said nothing of its end: nor does this one
        code: int = args.handler(args)
        said_at_the_end()
        return code
    except CompactorError as exc:
        print(f"compactor: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("compactor: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())

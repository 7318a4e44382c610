"""The ``compactor`` command line: report, plan, apply, run, controller.

Every user-facing failure is a ``CompactorError`` printed as one line on stderr
with exit code 2; tracebacks are reserved for bugs.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from compactor import __version__
from compactor.errors import CompactorError
from compactor.logs import configure_logging
from compactor.settings import Settings, load_settings, parse_shape
from compactor.sources import SnapshotSource, check_shapes

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2

log = logging.getLogger("compactor")


def _add_source_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("input (one of)")
    group.add_argument("--snapshot", nargs="+", metavar="FILE", help="kubectl get nodes,pods,pdb,pv,pvc -A -o json|yaml output ('-' = stdin)")
    group.add_argument("--example", action="store_true", help="the bundled example cluster (no Kubernetes needed)")
    group.add_argument("--kubeconfig", metavar="PATH", help="read the live cluster through this kubeconfig")
    group.add_argument("--context", metavar="NAME", help="kubeconfig context of the live cluster")
    group.add_argument("--in-cluster", action="store_true", help="read the live cluster with the pod's service account")
    parser.add_argument("--allow-empty", action="store_true", help="accept input without Node objects (otherwise an error)")


def _add_common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", help="YAML settings file (see config/compactor.yaml)")
    parser.add_argument("--log-format", choices=("text", "json"), default="text")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")


def is_live(args: argparse.Namespace) -> bool:
    """Whether the command names a live cluster (kubeconfig, context or in-cluster) rather than a snapshot."""
    return bool(getattr(args, "kubeconfig", None) or getattr(args, "context", None) or getattr(args, "in_cluster", False))


def source_from_args(args: argparse.Namespace) -> SnapshotSource:
    chosen = sum(bool(x) for x in (args.snapshot, args.example, args.kubeconfig or args.context or args.in_cluster))
    if chosen > 1:
        raise CompactorError("choose one input: --snapshot, --example, or a live cluster (--kubeconfig/--context/--in-cluster)")
    if chosen == 0:
        raise CompactorError("no input: give --snapshot FILE, --example, or --kubeconfig/--context/--in-cluster")
    return SnapshotSource(
        files=tuple(args.snapshot or ()),
        example=bool(args.example),
        kubeconfig=args.kubeconfig,
        context=args.context,
        live=is_live(args),
        in_cluster=bool(args.in_cluster),
        allow_empty=bool(getattr(args, "allow_empty", False)),
    )


def settings_from_args(args: argparse.Namespace) -> Settings:
    overrides: dict[str, dict[str, object]] = {}
    if getattr(args, "shape", None):
        for text in args.shape:
            try:
                parse_shape(text)
            except ValueError as exc:
                raise CompactorError(f"--shape {text!r}: {exc}") from None
        overrides.setdefault("metrics", {})["reference_shapes"] = list(args.shape)
    if getattr(args, "pool_label", None):
        overrides.setdefault("metrics", {})["pool_label"] = args.pool_label
    return load_settings(args.config, overrides)


def cmd_report(args: argparse.Namespace) -> int:
    from compactor.advice_report import advice_from_args
    from compactor.metrics.fragmentation import compute_figures, reference_shapes
    from compactor.report import render_report

    settings = settings_from_args(args)
    snapshot = source_from_args(args).load(pool_label=settings.metrics.pool_label, mig_config_map=settings.mig.config_map,
                                           mig_selector=settings.mig.selector)
    check_shapes(snapshot, settings)
    shapes = reference_shapes(
        snapshot,
        configured=settings.metrics.shapes() or None,
        coverage=settings.metrics.shape_coverage,
        max_shapes=settings.metrics.max_shapes,
    )
    figures = compute_figures(snapshot, shapes)
    advice = advice_from_args(args, snapshot, figures, settings)  # --advise: normalisation advice (None without it)
    if args.output == "html":  # a page with the occupancy picture: it needs the nodes, not only the report's tables
        from compactor.html_report import render_report_html

        sys.stdout.write(render_report_html(figures, snapshot, advice))
        return EXIT_OK
    sys.stdout.write(render_report(figures, snapshot, args.output, advice=advice))
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="compactor", description="Measure and repair GPU fragmentation in Kubernetes clusters.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    report = commands.add_parser("report", help="fragmentation figures per node, pool and cluster")
    _add_source_options(report)
    _add_common_options(report)
    report.add_argument("--output", "-o", choices=("text", "json", "markdown", "html"), default="text")
    report.add_argument("--shape", action="append", metavar="RES=QTY,...", help="reference request shape (repeatable), e.g. nvidia.com/gpu=4")
    report.add_argument("--pool-label", metavar="LABEL", help="node label that groups nodes into pools")
    report.add_argument("--advise", action="store_true", help="normalisation advice: the request shapes that strand the most "
                        "capacity and what rounding them up to a larger request in use would change (docs/metrics.md)")
    report.add_argument("--advise-top", type=int, metavar="N", help="with --advise: measure the roundings of the first N shapes (default 5)")
    report.set_defaults(handler=cmd_report)

    _register_extra_commands(commands)
    return parser


def _register_extra_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Commands implemented in their own module (plan, apply, run, controller)."""
    from compactor.commands import register_all

    register_all(commands)
    for name, sub in commands.choices.items():
        description, examples = COMMAND_HELP[name]
        sub.description = description
        sub.epilog = "examples:\n" + "\n".join(f"  {example}" for example in examples)
        sub.formatter_class = argparse.RawDescriptionHelpFormatter


# Each command's --help: what it does, in one paragraph, and two ways to call it.
COMMAND_HELP: dict[str, tuple[str, tuple[str, ...]]] = {
    "report": (
        "Measure GPU fragmentation: the headline figures first (whole-free GPUs, blocked demand, stranded share), then "
        "allocatable against the requests of bound pods, per node, pool and cluster; whole-free "
        "GPU nodes, stranded capacity, idle MIG slices, the fragmentation rates, headroom per request shape, and the pending "
        "GPU pods that fragmentation alone keeps Pending. Reads only; changes nothing.",
        ("compactor report --example",
         "kubectl get nodes,pods,pdb,pv,pvc -A -o json | compactor report --snapshot - --output markdown"),
    ),
    "plan": (
        "Compute a compaction plan: which pods to move where so that pending GPU pods fit and whole GPU nodes become free, "
        "with the fewest and cheapest moves, never against PDBs, taints, affinity or capacity. Shows the trade-off curve "
        "(nodes freed against moves) and why each pod moves or stays. Reads only; --write saves the plan for `compactor apply`.",
        ("compactor plan --example --objective max-free",
         "compactor plan --context prod --output json --write plan.json"),
    ),
    "apply": (
        "Carry out a plan written by `compactor plan --write`: re-check it against the cluster as it is now, cordon, evict "
        "through the Eviction API, steer each replacement onto its planned node, then measure what the cluster gained. "
        "Recovers an interrupted run first and holds the controller's Lease while it acts. --dry-run prints the calls instead.",
        ("compactor apply --plan plan.json --snapshot cluster.json --dry-run",
         "compactor apply --plan plan.json --context prod"),
    ),
    "run": (
        "One compaction cycle: recover, read the cluster, plan and carry the plan out (plan + apply in one step). It needs "
        "--once: a single cycle is what it does; for cycles on a schedule, run `compactor controller --interval SECONDS` "
        "(or the CronJob in manifests/).",
        ("compactor run --once --context prod --dry-run",
         "compactor run --once --in-cluster"),
    ),
    "controller": (
        "The long-running controller: a compaction cycle every --interval seconds on the replica that holds the Lease "
        "(leader election), fragmentation figures always; serves Prometheus /metrics, /healthz and /readyz.",
        ("compactor controller --in-cluster --interval 900",
         "compactor controller --context staging --report-only --listen :8080"),
    ),
    "config": (
        "Check a config before applying it, and see what a run would use. `validate FILE` reads a settings YAML or the "
        "ConfigMap that mounts it (data.compactor.yaml) and exits 2 naming the key of the first error; `show` prints the "
        "effective settings: defaults, then --config, then COMPACTOR_* environment variables.",
        ("compactor config validate manifests/base/config.yaml",
         "compactor config show --config manifests/base/config.yaml --output json"),
    ),
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(getattr(args, "log_format", "text"), getattr(args, "verbose", False))
    try:
        code: int = args.handler(args)
        return code
    except CompactorError as exc:
        print(f"compactor: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("compactor: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())

"""``compactor report``: the fragmentation figures of a snapshot or a live cluster, as text, JSON, markdown or a page."""

from __future__ import annotations

import argparse
import sys

from compactor.app.figures import measure
from compactor.app.reading import load_snapshot
from compactor.commands.options import add_common_options, add_source_options, from_args
from compactor.errors import EXIT_OK, CompactorError
from compactor.metrics.advice import DEFAULT_PER_SHAPE, DEFAULT_TOP, Advice, advise
from compactor.metrics.figure_types import Figures
from compactor.model.types import Snapshot
from compactor.render.html import render_report_html
from compactor.render.report import render_report
from compactor.settings.origins import Settings


def cmd_report(args: argparse.Namespace) -> int:
    inv = from_args(args, "report")
    measured = measure(load_snapshot(inv), inv.settings)
    # --advise: normalisation advice (None without it)
    advice = advice_from_args(args, measured.snapshot, measured.figures, inv.settings)
    if args.output == "html":  # a page with the occupancy picture: it needs the nodes, not only the report's tables
        sys.stdout.write(render_report_html(measured.figures, measured.snapshot, advice))
        return EXIT_OK
    sys.stdout.write(render_report(measured.figures, measured.snapshot, args.output, advice=advice))
    return EXIT_OK


def advice_from_args(
    args: argparse.Namespace, snapshot: Snapshot, figures: Figures, settings: Settings
) -> Advice | None:
    """The advice ``--advise`` asks for (None without it); ``--advise-top N`` measures the roundings of N shapes."""
    top = getattr(args, "advise_top", None)
    if not getattr(args, "advise", False):
        if top is not None:
            raise CompactorError("--advise-top goes with --advise")
        return None
    if top is not None and top < 1:
        raise CompactorError(f"--advise-top must be >= 1, got {top}")
    return advise(
        snapshot,
        figures,
        coverage=settings.metrics.shape_coverage,
        max_shapes=settings.metrics.max_shapes,
        top=DEFAULT_TOP if top is None else top,
        per_shape=DEFAULT_PER_SHAPE,
    )


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    report = commands.add_parser("report", help="fragmentation figures per node, pool and cluster")
    add_source_options(report)
    add_common_options(report)
    report.add_argument("--output", "-o", choices=("text", "json", "markdown", "html"), default="text")
    report.add_argument(
        "--shape",
        action="append",
        metavar="RES=QTY,...",
        help="reference request shape (repeatable), e.g. nvidia.com/gpu=4",
    )
    report.add_argument("--pool-label", metavar="LABEL", help="node label that groups nodes into pools")
    report.add_argument(
        "--advise",
        action="store_true",
        help="normalisation advice: the request shapes that strand the most "
        "capacity and what rounding them up to a larger request in use would change, and CPU-only pods on GPU "
        "nodes that keep GPU demand out (docs/metrics.md)",
    )
    report.add_argument(
        "--advise-top",
        type=int,
        metavar="N",
        help="with --advise: measure the roundings of the first N shapes (default 5)",
    )
    report.set_defaults(handler=cmd_report)

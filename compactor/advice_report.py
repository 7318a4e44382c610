"""``compactor report --advise``: the "Normalisation advice" section and the command-line glue around ``advise``.

The advice itself is ``compactor.metrics.advice`` (pure); this module words it as a report section (the report's own
``Section``/``Table`` types, so text and markdown carry the same facts) and reads the command's options.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from compactor.errors import CompactorError
from compactor.metrics.advice import DEFAULT_PER_SHAPE, DEFAULT_TOP, Advice, Headline, advise

if TYPE_CHECKING:
    from compactor.metrics.fragmentation import Figures
    from compactor.model.types import Snapshot
    from compactor.report import Section
    from compactor.settings import Settings

TITLE = "Normalisation advice"
SHAPES_SHOWN = 10


def advice_from_args(args: argparse.Namespace, snapshot: Snapshot, figures: Figures, settings: Settings) -> Advice | None:
    """The advice ``--advise`` asks for (None without it); ``--advise-top N`` measures the roundings of N shapes."""
    top = getattr(args, "advise_top", None)
    if not getattr(args, "advise", False):
        if top is not None:
            raise CompactorError("--advise-top goes with --advise")
        return None
    if top is not None and top < 1:
        raise CompactorError(f"--advise-top must be >= 1, got {top}")
    return advise(snapshot, figures, coverage=settings.metrics.shape_coverage, max_shapes=settings.metrics.max_shapes,
                  top=DEFAULT_TOP if top is None else top, per_shape=DEFAULT_PER_SHAPE)


def _arrow(before: str, after: str) -> str:
    return before if before == after else f"{before} -> {after}"


def advice_section(advice: Advice) -> Section:
    from compactor.report import Section, Table, fmt_gpus, fmt_pct  # the report imports this module

    def gpus(before: float, after: float) -> str:
        return _arrow(fmt_gpus(before), fmt_gpus(after))

    def fit(h: Headline) -> str:
        return f"{h.pending_fit}/{h.pending}"

    if not advice.shapes:
        return Section(TITLE, tuple(f"- {note}" for note in advice.notes))
    shown = advice.shapes[:SHAPES_SHOWN]
    shape_rows = tuple(
        (s.label, str(s.bound_pods), str(s.pending_pods), fmt_gpus(s.held_gpus), fmt_gpus(s.stranded_gpus), fmt_gpus(s.blocked_demand_gpus))
        for s in shown
    )
    blocks: list[Table | str] = [
        f"Stranded capacity ({fmt_gpus(advice.stranded_gpus)} GPU-equivalents) by the GPU request shapes whose pods run on each "
        "node, shared by the GPU-equivalents they hold there (docs/metrics.md, \"Normalisation advice\"):",
        Table(("GPU request", "Bound pods", "Pending pods", "Held (GPU-eq.)", "Stranded (GPU-eq.)", "Blocked demand (GPU-eq.)"),
              shape_rows, frozenset({1, 2, 3, 4, 5})),
    ]
    if len(advice.shapes) > len(shown):
        blocks.append(f"... and {len(advice.shapes) - len(shown)} more shape(s) in the JSON output")
    if advice.roundings:
        rows = tuple(
            (f"{r.shape} -> {r.rounded_to}", str(r.pods), fmt_gpus(r.extra_gpus),
             gpus(r.before.stranded_gpus, r.after.stranded_gpus), _arrow(fmt_pct(r.before.stranded_share), fmt_pct(r.after.stranded_share)),
             _arrow(str(r.before.whole_free_physical_gpus), str(r.after.whole_free_physical_gpus)),
             gpus(r.before.blocked_demand_gpus, r.after.blocked_demand_gpus), _arrow(fit(r.before), fit(r.after)),
             f"{r.displaced} ({r.displaced_fit})", fmt_gpus(r.benefit_gpus))
            for r in advice.roundings
        )
        headers = ("Rounding", "Pods", "Extra (GPU-eq.)", "Stranded (GPU-eq.)", "Stranded share", "Whole-free GPUs",
                   "Blocked demand (GPU-eq.)", "Pending that fit", "Displaced (fit elsewhere)", "Benefit (GPU-eq.)")
        blocks += [
            "Rounding a shape's GPU request up (CPU and memory as asked; pods stay where the rounded request fits, the others are "
            "displaced and pending), measured with the headline figures; benefit = stranded capacity recovered + pending demand "
            "that gets a place - displaced demand that fits nowhere:",
            Table(headers, rows, frozenset({1, 2, 3, 4, 5, 6, 7, 8, 9})),
            *(f"- {r.sentence}" for r in advice.roundings),
        ]
    blocks += [f"- {note}" for note in advice.notes]
    return Section(TITLE, tuple(blocks))

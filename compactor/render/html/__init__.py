"""``compactor report -o html`` and ``compactor plan -o html``: one self-contained HTML file to attach to a change ticket.

Inline CSS and inline SVG only: no script, font, image or link to fetch (a Content-Security-Policy tells the browser so
too), so the file reads the same offline, in a ticket system's preview or years later. The occupancy picture draws a
cell per GPU or MIG slice of every GPU node, grouped by pool; a plan adds the picture after it, the trade-off curve, the
moves with their reasons and what stays. Deterministic (no clock: the only time shown is the plan's own) and pure: it
builds a string, writes nothing.

The page's parts are modules of their own: ``page`` (the skeleton, stylesheet and building blocks),
``occupancy`` (the picture of the nodes), ``curve`` (the trade-off curve) and ``plan`` (the plan's
sections); this module puts them in order.
"""

from __future__ import annotations

from collections.abc import Sequence

from compactor.metrics.advice import Advice
from compactor.metrics.figure_types import Figures
from compactor.metrics.fragmentation import ReferenceShape, compute_figures, reference_shapes
from compactor.model.numbers import fmt_gpus, fmt_pct
from compactor.model.types import Snapshot
from compactor.planner.plan import CompactionPlan, apply_plan
from compactor.render.html.curve import curve_section
from compactor.render.html.occupancy import NO_MARKS, occupancy, plan_marks
from compactor.render.html.page import cards, esc, page, report_section, table, warning_paragraphs
from compactor.render.html.plan import (
    moves_section,
    nodes_changed,
    pending_section,
    plan_cards,
    recuts_section,
    solver_list,
    staying_section,
)
from compactor.render.plan import figure_notes, figure_rows
from compactor.render.report_sections import report_sections


def render_report_html(figures: Figures, snapshot: Snapshot, advice: Advice | None = None) -> str:
    """The fragmentation report as one HTML page: headline cards, the occupancy picture, then report.py's sections (with
    the normalisation advice of ``report --advise``)."""
    title = f"GPU fragmentation report: {snapshot.source}" if snapshot.source else "GPU fragmentation report"
    body = [
        f"<h1>{esc(title)}</h1>",
        warning_paragraphs((*snapshot.warnings, *figures.warnings)),
        _report_cards(figures),
        occupancy(figures, NO_MARKS, section_id="occupancy", title="Occupancy"),
        # Warnings are above already; the headline section repeats the cards in words, which is what a reader quotes.
        *(report_section(s) for s in report_sections(figures, snapshot, advice) if s.title != "Warnings"),
    ]
    return page(title, body)


def _report_cards(figures: Figures) -> str:
    """The headline figures, big: whole-free GPUs, blocked demand, stranded share."""
    c = figures.cluster
    return cards(
        (
            (
                "Whole-free GPUs (physical)",
                str(c.whole_free_physical_gpus),
                f"on {c.whole_free_nodes} node(s) running no GPU pod",
            ),
            (
                "Blocked demand (GPU-equivalents)",
                fmt_gpus(figures.blocked_demand_gpus),
                f"{len(figures.blocked_pending)} pending GPU pod(s) that fit in total but on no single node",
            ),
            (
                "Stranded share",
                fmt_pct(c.stranded_share),
                f"{fmt_gpus(c.stranded_gpus)} of {fmt_gpus(c.free_gpus)} free GPU-equivalents",
            ),
        )
    )


def render_plan_html(plan: CompactionPlan, snapshot: Snapshot, shapes: Sequence[ReferenceShape] | None = None) -> str:
    """The plan as one HTML page; ``snapshot`` is the one it was planned on, ``shapes`` its reference shapes (default: the
    workload's), with which the pictures before and after are measured as the plan's own figures were."""
    shapes = tuple(shapes) if shapes is not None else reference_shapes(snapshot)
    before_marks, after_marks = plan_marks(plan, snapshot)
    before = compute_figures(snapshot, shapes)
    after = compute_figures(apply_plan(snapshot, plan), shapes)
    meta = plan.metadata
    title = f"Compaction plan {meta.id}"
    body = [
        f"<h1>{esc(title)}</h1>",
        f'<p class="meta">{esc(meta.source)} \u00b7 computed {esc(meta.created_at)} \u00b7 objective {esc(plan.objective)}</p>',
        warning_paragraphs(plan.warnings),
        plan_cards(plan),
        solver_list(plan),
        nodes_changed(plan),
        occupancy(before, before_marks, section_id="before", title="Occupancy before the plan"),
        occupancy(after, after_marks, section_id="after", title="Occupancy after the plan"),
        curve_section(plan),
        moves_section(plan, snapshot),
        pending_section(plan),
        staying_section(plan),
        recuts_section(plan),
        "<h2>Before and after</h2>",
        table(("figure", "before", "after"), figure_rows(plan), (1, 2)),
        *(f"<p class=note>{esc(note)}</p>" for note in figure_notes(plan)),
    ]
    return page(title, body)

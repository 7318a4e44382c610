"""Render fragmentation figures for people (text, markdown) and for programs (JSON).

The content is built once as sections of tables and notes, then written out in
the requested format, so the text and markdown reports always carry the same facts.
Pure: returns a string, writes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from compactor.advice_report import advice_section
from compactor.metrics.advice import Advice, advice_to_dict
from compactor.metrics.fragmentation import AggregateFigures, BlockedPod, Figures, NodeFigures, figures_to_dict
from compactor.model.types import Snapshot

API_VERSION = "compactor/v1alpha1"
KIND = "FragmentationReport"
FORMATS = ("text", "markdown", "json")
WORST_NODES = 10


# ---------------------------------------------------------------------------
# Number formatting


def fmt_gpus(value: float) -> str:
    """GPU counts with up to 2 decimals: ``3``, ``3.5``, ``0.13``."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def fmt_pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def fmt_mig(idle: Mapping[str, int], total: Mapping[str, int]) -> str:
    return ", ".join(f"{profile} {idle.get(profile, 0)}/{count}" for profile, count in sorted(total.items())) or "-"


# ---------------------------------------------------------------------------
# Content


@dataclass(frozen=True)
class Table:
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    right: frozenset[int] = frozenset()  # columns aligned right (numbers)
    show_headers: bool = True  # False: a key/value list in text form


@dataclass(frozen=True)
class Section:
    title: str
    blocks: tuple[Table | str, ...] = field(default=())


def _headline(c: AggregateFigures, figures: Figures) -> Table:
    """The three figures compaction moves (docs/metrics.md, "Headline figures"): first in every report."""
    blocked = figures.blocked_pending
    rows = (
        ("Blocked demand", f"{len(blocked)} pending GPU pod(s) asking {fmt_gpus(figures.blocked_demand_gpus)} GPU-equivalents fit the "
                           "free capacity in total but no single node"),
        ("Whole-free GPUs", f"{c.whole_free_physical_gpus} (physical) on {c.whole_free_nodes} node(s) running no GPU pod"),
        ("Stranded share", f"{fmt_pct(c.stranded_share)} of the free GPU capacity ({fmt_gpus(c.stranded_gpus)} of "
                           f"{fmt_gpus(c.free_gpus)} GPU-equivalents) no request shape in use can take"),
    )
    return Table(("Figure", "Value"), rows, show_headers=False)


def _summary(c: AggregateFigures, figures: Figures) -> Table:
    rows = [
        ("Nodes", f"{c.node_count} ({c.gpu_node_count} with GPUs)"),
        ("GPUs (physical)", f"{c.gpus} devices on {c.gpu_node_count} nodes"),
        ("GPU capacity (GPU-equivalents)", f"{fmt_gpus(c.allocatable_gpus)} allocatable: {fmt_gpus(c.allocated_gpus)} allocated, "
                                           f"{fmt_gpus(c.free_gpus)} free ({fmt_pct(c.gpu_utilisation)} utilised)"),
        ("Whole-free GPU nodes", f"{c.whole_free_nodes}: {c.whole_free_physical_gpus} GPUs (physical, Ready and schedulable), "
                                 f"{fmt_gpus(c.whole_free_gpus)} GPU-equivalents"),
        ("Free on busy GPU nodes", f"{fmt_gpus(c.busy_free_gpus)} GPU-equivalents (free on nodes that run GPU pods)"),
        ("Free capacity on unavailable nodes", f"{fmt_gpus(c.unavailable_free_gpus)} GPU-equivalents (NotReady or cordoned)"),
        ("MIG idle", f"{fmt_mig(c.mig_idle, c.mig_total)} (idle rate {fmt_pct(c.mig_idle_rate)})" if c.mig_total else "no MIG instances"),
        ("Fragmentation rate", f"{fmt_pct(c.fragmentation_rate)} ({fmt_gpus(c.fragmented_gpus)} of {fmt_gpus(c.free_gpus)} free "
                               "GPU-equivalents cannot host the reference shapes)"),
        ("FGD fragmentation rate", f"{fmt_pct(c.fgd_fragmentation_rate)} ({fmt_gpus(c.fgd_fragmented_gpus)} GPU-equivalents)"),
        ("Pending GPU pods", f"{figures.pending_gpu_pods} ({len(figures.blocked_pending)} blocked by fragmentation, "
                             f"{len(figures.unplaceable_pending)} larger than the free capacity)"),
    ]
    return Table(("Figure", "Value"), tuple(rows), show_headers=False)


def _shapes(figures: Figures) -> Section:
    if not figures.shapes:
        return Section("Reference shapes", ("No reference shapes (no GPU pods and none configured): fragmentation rates are undefined.",))
    rows = tuple(
        (s.label, fmt_pct(s.weight), s.source, str(s.pods) if s.source == "workload" else "-", str(h.copies), str(h.nodes))
        for s, h in zip(figures.shapes, figures.headroom, strict=True)
    )
    table = Table(("Shape", "Weight", "Source", "Pods", "Fits now", "On nodes"), rows, frozenset({1, 3, 4, 5}))
    return Section("Reference shapes and headroom", (table,))


def _pools(figures: Figures) -> Section:
    rows = tuple(
        (p.name, str(p.node_count), str(p.gpus), fmt_gpus(p.allocated_gpus), fmt_gpus(p.free_gpus), str(p.whole_free_nodes),
         str(p.whole_free_physical_gpus), fmt_pct(p.stranded_share), fmt_gpus(p.busy_free_gpus), fmt_mig(p.mig_idle, p.mig_total),
         fmt_pct(p.fragmentation_rate), fmt_pct(p.fgd_fragmentation_rate))
        for p in figures.pools
    )
    headers = ("Pool", "Nodes", "GPUs (physical)", "Allocated (GPU-eq.)", "Free (GPU-eq.)", "Whole-free nodes", "Whole-free GPUs",
               "Stranded share", "Free on busy nodes (GPU-eq.)", "MIG idle", "Frag rate", "FGD rate")
    return Section("Pools", (Table(headers, rows, frozenset({1, 2, 3, 4, 5, 6, 7, 8, 10, 11})),))


def _state(node: NodeFigures) -> str:
    parts = [] if node.ready else ["NotReady"]
    if not node.schedulable:
        parts.append("cordoned")
    if node.overcommitted:
        parts.append("overcommitted")
    return ", ".join(parts) or "Ready"


def _worst_nodes(figures: Figures) -> Section:
    title = f"Most fragmented nodes (top {WORST_NODES})"
    if figures.cluster.fragmentation_rate is None:
        return Section(title, ("Not defined: no free GPU capacity or no GPU reference shape.",))
    worst = sorted((n for n in figures.nodes if n.fragmented_gpus > 0), key=lambda n: (-n.fragmented_gpus, n.name))[:WORST_NODES]
    if not worst:
        return Section(title, ("No fragmented GPU capacity: every free GPU can host the reference shapes.",))
    rows = tuple(
        (n.name, n.pool, str(n.gpus), fmt_gpus(n.free_gpus), fmt_gpus(n.fragmented_gpus), fmt_gpus(n.fgd_fragmented_gpus),
         fmt_mig(n.mig_idle, n.mig_total), n.limited_by or "-", _state(n))
        for n in worst
    )
    headers = ("Node", "Pool", "GPUs (physical)", "Free (GPU-eq.)", "Fragmented (GPU-eq.)", "FGD (GPU-eq.)", "MIG idle", "Limited by", "State")
    return Section(title, (Table(headers, rows, frozenset({2, 3, 4, 5})),))


def _pods_table(pods: Sequence[BlockedPod]) -> Table:
    rows = tuple((p.pod, str(p.priority), p.requests, p.reason) for p in pods)
    return Table(("Pod", "Priority", "Requests", "Reason"), rows, frozenset({1}))


def _pending(figures: Figures) -> list[Section]:
    blocked: tuple[Table | str, ...] = (
        (_pods_table(figures.blocked_pending),) if figures.blocked_pending
        else ("None: no pending GPU pod is kept out by fragmentation alone.",)
    )
    sections = [Section("Pending GPU pods blocked by fragmentation", blocked)]
    if figures.unplaceable_pending:
        sections.append(Section("Pending GPU pods larger than the free capacity", (_pods_table(figures.unplaceable_pending),)))
    return sections


def report_sections(figures: Figures, snapshot: Snapshot, advice: Advice | None = None) -> list[Section]:
    """The report's content, independent of the output format."""
    warnings = (*snapshot.warnings, *figures.warnings)
    return [
        *([Section("Warnings", tuple(f"- {w}" for w in warnings))] if warnings else []),  # first: they qualify every figure below
        Section("Headline", (_headline(figures.cluster, figures),)),
        Section("Cluster", (_summary(figures.cluster, figures),)),
        _shapes(figures),
        _pools(figures),
        _worst_nodes(figures),
        *_pending(figures),
        *([advice_section(advice)] if advice is not None else []),  # report --advise
    ]


# ---------------------------------------------------------------------------
# Writers


def _text_table(table: Table) -> list[str]:
    lines = [table.headers, *table.rows] if table.show_headers else list(table.rows)
    widths = [max(len(row[i]) for row in lines) for i in range(len(table.headers))]
    last = len(widths) - 1

    def cell(i: int, value: str) -> str:
        if i in table.right:
            return value.rjust(widths[i])
        return value if i == last else value.ljust(widths[i])  # no trailing spaces

    out = ["  ".join(cell(i, v) for i, v in enumerate(row)).rstrip() for row in lines]
    if table.show_headers:
        out.insert(1, "  ".join("-" * w for w in widths))
    return ["  " + line for line in out]


def _render_text(title: str, sections: Sequence[Section]) -> str:
    out = [title, "=" * len(title)]
    for section in sections:
        out += ["", section.title, "-" * len(section.title)]
        for block in section.blocks:
            out += _text_table(block) if isinstance(block, Table) else [f"  {block}"]
    return "\n".join(out) + "\n"


def _md_cell(value: str) -> str:
    return value.replace("|", "\\|")


def _md_table(table: Table) -> list[str]:
    align = ["---:" if i in table.right else "---" for i in range(len(table.headers))]
    rows = [table.headers, tuple(align), *table.rows]
    return ["| " + " | ".join(_md_cell(v) if r != 1 else v for v in row) + " |" for r, row in enumerate(rows)]


def _render_markdown(title: str, sections: Sequence[Section]) -> str:
    out = [f"# {title}"]
    for section in sections:
        out += ["", f"## {section.title}", ""]
        for block in section.blocks:
            out += _md_table(block) if isinstance(block, Table) else [_md_cell(block)]
    return "\n".join(out) + "\n"


def report_document(figures: Figures, snapshot: Snapshot, advice: Advice | None = None) -> dict[str, object]:
    """The JSON report: a versioned envelope around ``figures_to_dict``."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"source": snapshot.source, "warnings": list(snapshot.warnings)},
        "figures": figures_to_dict(figures),
        **({"advice": advice_to_dict(advice)} if advice is not None else {}),
    }


def render_report(figures: Figures, snapshot: Snapshot, fmt: str, advice: Advice | None = None) -> str:
    """``fmt`` is text, markdown or json; ``advice`` (``report --advise``) adds its section and the JSON key ``advice``."""
    if fmt == "json":
        return json.dumps(report_document(figures, snapshot, advice), indent=2) + "\n"
    writers: dict[str, Callable[[str, Sequence[Section]], str]] = {"text": _render_text, "markdown": _render_markdown}
    if fmt not in writers:
        raise ValueError(f"unknown report format {fmt!r}; expected one of {', '.join(FORMATS)}")
    title = f"GPU fragmentation report: {snapshot.source}" if snapshot.source else "GPU fragmentation report"
    return writers[fmt](title, report_sections(figures, snapshot, advice))

"""Render fragmentation figures for people (text, markdown) and for programs (JSON).

The content is built once as sections of tables and notes, then written out in
the requested format, so the text and markdown reports always carry the same facts.
Pure: returns a string, writes nothing.
"""

from __future__ import annotations

import json
import math
import shutil
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from compactor.metrics.advice import Advice, advice_to_dict
from compactor.metrics.cpu_pods import CpuPodsOnGpuNodes, cpus, memory, stranded_change
from compactor.metrics.figure_types import AggregateFigures, BlockedPod, Figures, NodeFigures
from compactor.metrics.figures_json import figures_to_dict
from compactor.metrics.headline import Headline
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
        (
            "Blocked demand",
            f"{len(blocked)} pending GPU pod(s) asking {fmt_gpus(figures.blocked_demand_gpus)} GPU-equivalents fit the "
            "free capacity in total but no single node",
        ),
        (
            "Whole-free GPUs",
            f"{c.whole_free_physical_gpus} (physical) on {c.whole_free_nodes} node(s) running no GPU pod",
        ),
        (
            "Stranded share",
            f"{fmt_pct(c.stranded_share)} of the free GPU capacity ({fmt_gpus(c.stranded_gpus)} of "
            f"{fmt_gpus(c.free_gpus)} GPU-equivalents) no request shape in use can take",
        ),
    )
    return Table(("Figure", "Value"), rows, show_headers=False)


def _summary(c: AggregateFigures, figures: Figures) -> Table:
    rows = [
        ("Nodes", f"{c.node_count} ({c.gpu_node_count} with GPUs)"),
        ("GPUs (physical)", f"{c.gpus} devices on {c.gpu_node_count} nodes"),
        (
            "GPU capacity (GPU-equivalents)",
            f"{fmt_gpus(c.allocatable_gpus)} allocatable: {fmt_gpus(c.allocated_gpus)} allocated, "
            f"{fmt_gpus(c.free_gpus)} free ({fmt_pct(c.gpu_utilisation)} utilised)",
        ),
        (
            "Whole-free GPU nodes",
            f"{c.whole_free_nodes}: {c.whole_free_physical_gpus} GPUs (physical, Ready and schedulable), "
            f"{fmt_gpus(c.whole_free_gpus)} GPU-equivalents",
        ),
        ("Free on busy GPU nodes", f"{fmt_gpus(c.busy_free_gpus)} GPU-equivalents (free on nodes that run GPU pods)"),
        (
            "Free capacity on unavailable nodes",
            f"{fmt_gpus(c.unavailable_free_gpus)} GPU-equivalents (NotReady or cordoned)",
        ),
        (
            "MIG idle",
            f"{fmt_mig(c.mig_idle, c.mig_total)} (idle rate {fmt_pct(c.mig_idle_rate)})"
            if c.mig_total
            else "no MIG instances",
        ),
        (
            "Fragmentation rate",
            f"{fmt_pct(c.fragmentation_rate)} ({fmt_gpus(c.fragmented_gpus)} of {fmt_gpus(c.free_gpus)} free "
            "GPU-equivalents cannot host the reference shapes)",
        ),
        (
            "FGD fragmentation rate",
            f"{fmt_pct(c.fgd_fragmentation_rate)} ({fmt_gpus(c.fgd_fragmented_gpus)} GPU-equivalents)",
        ),
        (
            "Pending GPU pods",
            f"{figures.pending_gpu_pods} ({len(figures.blocked_pending)} blocked by fragmentation, "
            f"{len(figures.unplaceable_pending)} larger than the free capacity)",
        ),
    ]
    return Table(("Figure", "Value"), tuple(rows), show_headers=False)


def _shapes(figures: Figures) -> Section:
    if not figures.shapes:
        return Section(
            "Reference shapes",
            ("No reference shapes (no GPU pods and none configured): fragmentation rates are undefined.",),
        )
    rows = tuple(
        (
            s.label,
            fmt_pct(s.weight),
            s.source,
            str(s.pods) if s.source == "workload" else "-",
            str(h.copies),
            str(h.nodes),
        )
        for s, h in zip(figures.shapes, figures.headroom, strict=True)
    )
    table = Table(("Shape", "Weight", "Source", "Pods", "Fits now", "On nodes"), rows, frozenset({1, 3, 4, 5}))
    return Section("Reference shapes and headroom", (table,))


def _pools(figures: Figures) -> Section:
    rows = tuple(
        (
            p.name,
            str(p.node_count),
            str(p.gpus),
            fmt_gpus(p.allocated_gpus),
            fmt_gpus(p.free_gpus),
            str(p.whole_free_physical_gpus),
            fmt_pct(p.stranded_share),
            fmt_mig(p.mig_idle, p.mig_total),
            fmt_pct(p.fragmentation_rate),
        )
        for p in figures.pools
    )
    headers = (
        "Pool",
        "Nodes",
        "GPUs (physical)",
        "Allocated (GPU-eq.)",
        "Free (GPU-eq.)",
        "Whole-free GPUs",
        "Stranded share",
        "MIG idle",
        "Frag rate",
    )
    return Section(
        "Pools",
        (
            Table(headers, rows, frozenset({1, 2, 3, 4, 5, 6, 8})),
            "Whole-free nodes, free capacity on busy nodes and the FGD rate per pool: -o json.",
        ),
    )


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
    worst = sorted((n for n in figures.nodes if n.fragmented_gpus > 0), key=lambda n: (-n.fragmented_gpus, n.name))[
        :WORST_NODES
    ]
    if not worst:
        return Section(title, ("No fragmented GPU capacity: every free GPU can host the reference shapes.",))
    rows = tuple(
        (
            n.name,
            str(n.gpus),
            fmt_gpus(n.free_gpus),
            fmt_gpus(n.fragmented_gpus),
            fmt_gpus(n.stranded_gpus),
            fmt_mig(n.mig_idle, n.mig_total),
            _state(n),
            n.limited_by or "-",
        )
        for n in worst
    )
    headers = (
        "Node",
        "GPUs (physical)",
        "Free (GPU-eq.)",
        "Fragmented (GPU-eq.)",
        "Stranded (GPU-eq.)",
        "MIG idle",
        "State",
        "Limited by",
    )
    return Section(title, (Table(headers, rows, frozenset({1, 2, 3, 4})),))


def _pods_table(pods: Sequence[BlockedPod]) -> Table:
    rows = tuple((p.pod, str(p.priority), p.requests, p.reason) for p in pods)
    return Table(("Pod", "Priority", "Requests", "Reason"), rows, frozenset({1}))


def _pending(figures: Figures) -> list[Section]:
    blocked: tuple[Table | str, ...] = (
        (_pods_table(figures.blocked_pending),)
        if figures.blocked_pending
        else ("None: no pending GPU pod is kept out by fragmentation alone.",)
    )
    sections = [Section("Pending GPU pods blocked by fragmentation", blocked)]
    if figures.unplaceable_pending:
        sections.append(
            Section("Pending GPU pods larger than the free capacity", (_pods_table(figures.unplaceable_pending),))
        )
    return sections


def report_sections(figures: Figures, snapshot: Snapshot, advice: Advice | None = None) -> list[Section]:
    """The report's content, independent of the output format."""
    warnings = (*snapshot.warnings, *figures.warnings)
    return [
        # first: they qualify every figure below
        *([Section("Warnings", tuple(f"- {w}" for w in warnings))] if warnings else []),
        Section("Headline", (_headline(figures.cluster, figures),)),
        Section("Cluster", (_summary(figures.cluster, figures),)),
        _shapes(figures),
        _pools(figures),
        _worst_nodes(figures),
        *_pending(figures),
        *(advice_sections(advice) if advice is not None else []),  # report --advise
    ]


# ---------------------------------------------------------------------------
# Writers


DEFAULT_WIDTH = 100  # when neither $COLUMNS nor a terminal says
MIN_COLUMN = 10  # a column is never squeezed below this many characters


def report_width() -> int:
    """$COLUMNS, else the terminal's width, else DEFAULT_WIDTH (a pipe, a file, CI)."""
    return max(40, shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns)


def _fitted_widths(widths: list[int], right: frozenset[int], room: int) -> list[int]:
    """Column widths summing to at most ``room`` where they can: text columns give way in proportion to what they have
    above MIN_COLUMN, then the first column (what a row is about) if it must; numbers never do."""
    fitted = list(widths)
    for flexible in ([i for i in range(1, len(fitted)) if i not in right], [0] if 0 not in right else []):
        excess = sum(fitted) - room
        slack = sum(max(0, fitted[i] - MIN_COLUMN) for i in flexible)
        if excess <= 0 or slack <= 0:
            continue
        for i in flexible:
            fitted[i] -= min(max(0, fitted[i] - MIN_COLUMN), math.ceil(excess * max(0, fitted[i] - MIN_COLUMN) / slack))
    return fitted


def _wrapped_row(
    cells: Sequence[str], widths: Sequence[int], right: frozenset[int], *, clip: bool = False
) -> list[str]:
    """One table row as text lines: each text cell wraps within its column (a header clips to three lines)."""
    parts = [[v] if i in right and not clip else textwrap.wrap(v, widths[i]) or [""] for i, v in enumerate(cells)]
    if clip:
        parts = [p[:3] for p in parts]
    last = len(cells) - 1
    lines = []
    for depth in range(max(map(len, parts))):
        words = [p[depth] if depth < len(p) else "" for p in parts]
        line = "".join(
            (w.rjust(widths[i]) if i in right else w.ljust(widths[i])) + "  " for i, w in enumerate(words[:last])
        )
        lines.append(("  " + line + (words[last].rjust(widths[last]) if last in right else words[last])).rstrip())
    return lines


def _text_table(table: Table, width: int = DEFAULT_WIDTH) -> list[str]:
    """The table within ``width`` columns where it can be: headers wrap over up to three lines and text cells wrap in
    their column (the widest give way first); the first column and numbers keep their width."""
    headers = table.headers if table.show_headers else ()
    natural = [
        max([len(row[i]) for row in table.rows] + [max(map(len, h.split()), default=0) for h in headers[i : i + 1]])
        for i in range(len(table.headers))
    ]
    spare = width - 2 - 2 * (len(natural) - 1) - sum(natural)
    for i, header in enumerate(headers):  # a header wider than its values takes what is left, on one line
        grow = min(max(0, len(header) - natural[i]), max(0, spare))
        natural[i] += grow
        spare -= grow
    widths = _fitted_widths(natural, table.right, width - 2 - 2 * (len(natural) - 1))
    out = _wrapped_row(headers, widths, table.right, clip=True) if headers else []
    if headers:
        out.append("  " + "  ".join("-" * w for w in widths))
    for row in table.rows:
        out += _wrapped_row(row, widths, table.right)
    return out


def _render_text(title: str, sections: Sequence[Section], width: int = DEFAULT_WIDTH) -> str:
    out = [title, "=" * len(title)]
    for section in sections:
        out += ["", section.title, "-" * len(section.title)]
        for block in section.blocks:
            out += (
                _text_table(block, width)
                if isinstance(block, Table)
                else textwrap.wrap(block, width, initial_indent="  ", subsequent_indent="    ") or [""]
            )
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


def render_report(
    figures: Figures, snapshot: Snapshot, fmt: str, advice: Advice | None = None, width: int | None = None
) -> str:
    """``fmt`` is text, markdown or json; ``advice`` (``report --advise``) adds its section and the JSON key ``advice``;
    text fits ``width`` columns (default ``report_width()``)."""
    if fmt == "json":
        return json.dumps(report_document(figures, snapshot, advice), indent=2) + "\n"
    writers: dict[str, Callable[[str, Sequence[Section]], str]] = {
        "text": lambda title, sections: _render_text(title, sections, width or report_width()),
        "markdown": _render_markdown,
    }
    if fmt not in writers:
        raise ValueError(f"unknown report format {fmt!r}; expected one of {', '.join(FORMATS)}")
    title = f"GPU fragmentation report: {snapshot.source}" if snapshot.source else "GPU fragmentation report"
    return writers[fmt](title, report_sections(figures, snapshot, advice))


# --------------------------------------------------------------------------- report --advise: the "Normalisation advice" section

ADVICE_TITLE = "Normalisation advice"
ADVICE_SHAPES_SHOWN = 10
CPU_PODS_TITLE = "CPU-only pods on GPU nodes"


def advice_sections(advice: Advice) -> list[Section]:
    """What ``report --advise`` adds: the CPU-only pods on GPU nodes when they keep GPU demand out (the cause first),
    then the request-shape advice."""
    cpu_pods = advice.cpu_pods_on_gpu_nodes
    return [*([cpu_pods_section(cpu_pods)] if cpu_pods is not None else []), advice_section(advice)]


def cpu_pods_section(a: CpuPodsOnGpuNodes) -> Section:
    """The cause and the pools as a table, then the measured effect, the room CPU-only nodes have and the remedy."""
    cause, *rest = a.sentences
    rows = tuple(
        (p.pool, str(p.gpu_nodes), f"{p.pods:,}", cpus(p.cpu_millicores), memory(p.memory_bytes), stranded_change(p))
        for p in a.pools
    )
    headers = ("Pool", "GPU nodes", "CPU-only pods", "CPUs", "Memory", "Stranded (GPU-eq.)")
    return Section(CPU_PODS_TITLE, (cause, Table(headers, rows, frozenset({1, 2, 3, 4, 5})), *(f"- {s}" for s in rest)))


def _arrow(before: str, after: str) -> str:
    return before if before == after else f"{before} -> {after}"


def advice_section(advice: Advice) -> Section:
    def gpus(before: float, after: float) -> str:
        return _arrow(fmt_gpus(before), fmt_gpus(after))

    def fit(h: Headline) -> str:
        return f"{h.pending_fit}/{h.pending}"

    if not advice.shapes:
        return Section(ADVICE_TITLE, tuple(f"- {note}" for note in advice.notes))
    shown = advice.shapes[:ADVICE_SHAPES_SHOWN]
    shape_rows = tuple(
        (
            s.label,
            str(s.bound_pods),
            str(s.pending_pods),
            fmt_gpus(s.held_gpus),
            fmt_gpus(s.stranded_gpus),
            fmt_gpus(s.blocked_demand_gpus),
        )
        for s in shown
    )
    blocks: list[Table | str] = [
        f"Stranded capacity ({fmt_gpus(advice.stranded_gpus)} GPU-equivalents) by the GPU request shapes whose pods run on each "
        'node, shared by the GPU-equivalents they hold there (docs/metrics.md, "Normalisation advice"):',
        Table(
            (
                "GPU request",
                "Bound pods",
                "Pending pods",
                "Held (GPU-eq.)",
                "Stranded (GPU-eq.)",
                "Blocked demand (GPU-eq.)",
            ),
            shape_rows,
            frozenset({1, 2, 3, 4, 5}),
        ),
    ]
    if len(advice.shapes) > len(shown):
        blocks.append(f"... and {len(advice.shapes) - len(shown)} more shape(s) in the JSON output")
    if advice.roundings:
        rows = tuple(
            (
                f"{r.shape} -> {r.rounded_to}",
                str(r.pods),
                fmt_gpus(r.extra_gpus),
                gpus(r.before.stranded_gpus, r.after.stranded_gpus),
                _arrow(fmt_pct(r.before.stranded_share), fmt_pct(r.after.stranded_share)),
                _arrow(str(r.before.whole_free_physical_gpus), str(r.after.whole_free_physical_gpus)),
                gpus(r.before.blocked_demand_gpus, r.after.blocked_demand_gpus),
                _arrow(fit(r.before), fit(r.after)),
                f"{r.displaced} ({r.displaced_fit})",
                fmt_gpus(r.benefit_gpus),
            )
            for r in advice.roundings
        )
        headers = (
            "Rounding",
            "Pods",
            "Extra (GPU-eq.)",
            "Stranded (GPU-eq.)",
            "Stranded share",
            "Whole-free GPUs",
            "Blocked demand (GPU-eq.)",
            "Pending that fit",
            "Displaced (fit elsewhere)",
            "Benefit (GPU-eq.)",
        )
        blocks += [
            "Rounding a shape's GPU request up (CPU and memory as asked; pods stay where the rounded request fits, the others are "
            "displaced and pending), measured with the headline figures; benefit = stranded capacity recovered + pending demand "
            "that gets a place - displaced demand that fits nowhere:",
            Table(headers, rows, frozenset({1, 2, 3, 4, 5, 6, 7, 8, 9})),
            *(f"- {r.sentence}" for r in advice.roundings),
        ]
    blocks += [f"- {note}" for note in advice.notes]
    return Section(ADVICE_TITLE, tuple(blocks))

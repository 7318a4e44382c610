"""The fragmentation report's sections: the headline, the cluster, the reference shapes, the pools, the most fragmented
nodes and the pending pods, with the advice of ``report --advise`` after them.

Apart from the writers (``text``, ``markdown``, ``report``'s JSON, the HTML page) because every format shows these same
sections: what the report says is decided here once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from compactor.metrics.advice import Advice
from compactor.metrics.figure_types import AggregateFigures, BlockedPod, Figures, NodeFigures
from compactor.model.numbers import fmt_gpus, fmt_pct
from compactor.model.shapes import MAX_JUDGED_SHAPES
from compactor.model.types import Snapshot
from compactor.render.advice import advice_sections
from compactor.render.content import Section, Table

WORST_NODES = 10


def fmt_mig(idle: Mapping[str, int], total: Mapping[str, int]) -> str:
    """Idle of all MIG instances per profile: ``1g.5gb 3/7, 3g.20gb 0/2``; ``-`` without MIG."""
    return ", ".join(f"{profile} {idle.get(profile, 0)}/{count}" for profile, count in sorted(total.items())) or "-"


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
    shown = sum(1 for s in figures.shapes if s.source == "workload" and s.uses_gpu)
    if shown and figures.shapes_in_use > shown:
        n = figures.shapes_in_use
        capped = n >= MAX_JUDGED_SHAPES  # pods asking requests of their own: only the most frequent are judged
        cut = (
            f"The {shown} most frequent of the {f'{n} or more' if capped else n} GPU request shapes the pods ask "
            "(metrics.shape_coverage, metrics.max_shapes): they weight the rates; stranded capacity and what limits a "
            f"node are judged against {f'the {n} most frequent' if capped else f'all {n}'}."
        )
        return Section("Reference shapes and headroom", (table, cut))
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

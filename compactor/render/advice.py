"""How ``report --advise`` words the normalisation advice: its report sections (the CPU-only pods on GPU nodes, the
request shapes and their roundings) and its JSON form.

Apart from ``compactor.metrics.advice``, which measures the advice and says nothing about how it is shown; the sections
use the report's ``Section``/``Table`` types, so text, markdown and HTML carry the same facts.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from compactor.metrics.advice import Advice, Rounding
from compactor.metrics.cpu_pods import CpuPodsOnGpuNodes, stranded_change
from compactor.metrics.headline import Headline
from compactor.metrics.spreading import Spreading
from compactor.model.numbers import fmt_cpus, fmt_gpus, fmt_memory, fmt_pct
from compactor.model.resources import Resources
from compactor.render.content import Section, Table

ADVICE_TITLE = "Normalisation advice"
ADVICE_SHAPES_SHOWN = 10
CPU_PODS_TITLE = "CPU-only pods on GPU nodes"
SPREADING_TITLE = "The scheduler spreads GPU pods"
# The remedies in the order to try them, each with its effect as measured on the day's replay (docs/benchmarks.md,
# "A fair day"; figures to refresh with it).
REMEDIES = (
    "First, where the scheduler's configuration can change: kube-scheduler's bin-packing profile for GPU pods "
    "(NodeResourcesFit scoringStrategy MostAllocated with nvidia.com/gpu weighted, NodeResourcesBalancedAllocation off, "
    "no default topology spread), for the whole scheduler or as a second scheduler GPU pods name. On the day's fair "
    "replay (docs/benchmarks.md, 400 nodes, 12 h, 3 seeds) it alone cut blocked GPU demand from 8,752 to 68 GPU-hours.",
    "Where it cannot (most managed control planes): prevention, steering.fill_first with the fill-first admission policy "
    "of manifests/prevention: new GPU pods prefer the nodes already in use (docs/prevention.md). With the controller on "
    "the default profile it cut blocked demand from 896 to 605 GPU-hours, and evictions from 415 to 323.",
    "Then compaction (compactor run, the controller with its pending trigger) for what is left: on the default profile "
    "alone it cut blocked demand from 8,752 to 896 GPU-hours (8-GPU pods waited a median 16 min instead of never "
    "starting).",
)


def advice_sections(advice: Advice) -> list[Section]:
    """What ``report --advise`` adds: a scheduler that spreads GPU pods while demand waits (its remedy comes first: the
    scheduler's profile), the CPU-only pods on GPU nodes when they keep GPU demand out, then the request-shape advice."""
    cpu_pods, spread = advice.cpu_pods_on_gpu_nodes, advice.spreading
    return [
        *([spreading_section(spread)] if spread is not None else []),
        *([cpu_pods_section(cpu_pods)] if cpu_pods is not None else []),
        advice_section(advice),
    ]


def spreading_section(s: Spreading) -> Section:
    """The pools that spread, then the remedies in the order to try them, each with its measured effect."""
    first = s.pools[0]
    waiting = f"; {s.blocked_pending} GPU pod(s) wait for a node no single node fits" if s.blocked_pending else ""
    cause = (
        f"GPU pods hold {first.nodes_in_use} nodes of pool {first.pool} where {first.nodes_needed} would hold them "
        f"({s.extra_nodes} node(s) more than needed in all{waiting}): the scheduler spreads them, as kube-scheduler's "
        "default profile does (LeastAllocated, BalancedAllocation, the system-default topology spread)."
    )
    rows = tuple(
        (p.pool, str(p.gpu_nodes), str(p.nodes_in_use), str(p.nodes_needed), str(p.whole_free_nodes)) for p in s.pools
    )
    headers = ("Pool", "GPU nodes", "In use", "Would do", "Whole-free")
    return Section(
        SPREADING_TITLE, (cause, Table(headers, rows, frozenset({1, 2, 3, 4})), *(f"- {r}" for r in REMEDIES))
    )


def cpu_pods_section(a: CpuPodsOnGpuNodes) -> Section:
    """The cause and the pools as a table, then the measured effect, the room CPU-only nodes have and the remedy."""
    cause, *rest = a.sentences
    rows = tuple(
        (
            p.pool,
            str(p.gpu_nodes),
            f"{p.pods:,}",
            fmt_cpus(p.cpu_millicores),
            fmt_memory(p.memory_bytes),
            stranded_change(p),
        )
        for p in a.pools
    )
    headers = ("Pool", "GPU nodes", "CPU-only pods", "CPUs", "Memory", "Stranded (GPU-eq.)")
    return Section(CPU_PODS_TITLE, (cause, Table(headers, rows, frozenset({1, 2, 3, 4, 5})), *(f"- {s}" for s in rest)))


def advice_section(advice: Advice) -> Section:
    """The shapes ranked by the capacity they strand, then the roundings measured, each with its sentence; the notes."""
    if not advice.shapes:
        return Section(ADVICE_TITLE, tuple(f"- {note}" for note in advice.notes))
    blocks = [*_shapes_blocks(advice), *(_roundings_blocks(advice) if advice.roundings else [])]
    blocks += [f"- {note}" for note in advice.notes]
    return Section(ADVICE_TITLE, tuple(blocks))


def _shapes_blocks(advice: Advice) -> list[Table | str]:
    shown = advice.shapes[:ADVICE_SHAPES_SHOWN]
    rows = tuple(
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
    headers = (
        "GPU request",
        "Bound pods",
        "Pending pods",
        "Held (GPU-eq.)",
        "Stranded (GPU-eq.)",
        "Blocked demand (GPU-eq.)",
    )
    blocks: list[Table | str] = [
        f"Stranded capacity ({fmt_gpus(advice.stranded_gpus)} GPU-equivalents) by the GPU request shapes whose pods run on each "
        'node, shared by the GPU-equivalents they hold there (docs/metrics.md, "Normalisation advice"):',
        Table(headers, rows, frozenset({1, 2, 3, 4, 5})),
    ]
    if len(advice.shapes) > len(shown):
        blocks.append(f"... and {len(advice.shapes) - len(shown)} more shape(s) in the JSON output")
    return blocks


def _arrow(before: str, after: str) -> str:
    return before if before == after else f"{before} -> {after}"


def _fit(h: Headline) -> str:
    return f"{h.pending_fit}/{h.pending}"


def _rounding_row(r: Rounding) -> tuple[str, ...]:
    b, a = r.before, r.after
    return (
        f"{r.shape} -> {r.rounded_to}",
        str(r.pods),
        fmt_gpus(r.extra_gpus),
        _arrow(fmt_gpus(b.stranded_gpus), fmt_gpus(a.stranded_gpus)),
        _arrow(fmt_pct(b.stranded_share), fmt_pct(a.stranded_share)),
        _arrow(str(b.whole_free_physical_gpus), str(a.whole_free_physical_gpus)),
        _arrow(fmt_gpus(b.blocked_demand_gpus), fmt_gpus(a.blocked_demand_gpus)),
        _arrow(_fit(b), _fit(a)),
        f"{r.displaced} ({r.displaced_fit})",
        fmt_gpus(r.benefit_gpus),
    )


def _roundings_blocks(advice: Advice) -> list[Table | str]:
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
    rows = tuple(_rounding_row(r) for r in advice.roundings)
    return [
        "Rounding a shape's GPU request up (CPU and memory as asked; pods stay where the rounded request fits, the others are "
        "displaced and pending), measured with the headline figures; benefit = stranded capacity recovered + pending demand "
        "that gets a place - displaced demand that fits nowhere:",
        Table(headers, rows, frozenset({1, 2, 3, 4, 5, 6, 7, 8, 9})),
        *(f"- {r.sentence}" for r in advice.roundings),
    ]


# ---------------------------------------------------------------------------
# JSON form


def _value(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 4) + 0.0
    if isinstance(value, Resources):
        return {key: int(value[key]) for key in sorted(value)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {_camel(f.name): _value(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [_value(item) for item in value]
    return value


_JSON_NAMES = {
    "whole_free_physical_gpus": "wholeFreePhysicalGpus",
    "blocked_pending": "blockedPendingPods",
    "unplaceable_pending": "unplaceablePendingPods",
    "pending_fit": "pendingPodsThatFit",
    "pending": "pendingPods",
}


def _camel(name: str) -> str:
    if name in _JSON_NAMES:
        return _JSON_NAMES[name]
    if name.endswith("_gpus"):
        name = name.removesuffix("_gpus") + "_gpu_equivalents"
    head, *rest = name.split("_")
    return head + "".join(word.capitalize() for word in rest)


def advice_to_dict(advice: Advice) -> dict[str, Any]:
    """JSON-ready form: camelCase keys, GPU capacity in ``...GpuEquivalents``, floats to 4 places (as ``figures_to_dict``)."""
    result: dict[str, Any] = _value(advice)
    return result

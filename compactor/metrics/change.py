"""Why a ratio moved: the notes a before/after table shows beside a share that rose only because its denominator fell.

The stranded share, the fragmentation rates and FGD's are shares of the *free* GPU capacity. A plan that places pending
pods uses free capacity, so the share can rise while the stranded (or fragmented) capacity itself stays or falls: on the
bundled example, placing one 8-GPU pod takes the stranded share from 18.7% to 23.0% with 8.00 GPU-equivalents stranded
before and after. Shown bare, that reads as a plan making things worse. Every renderer (text, markdown, JSON, HTML) shows
the note these functions write beside such a ratio; the quantities a good plan cannot make worse (blocked demand,
stranded GPU-equivalents) lead the tables.

Imports: nothing of the project; reads the JSON form of the figures (``fragmentation.figures_to_dict``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from compactor.model.numbers import fmt_gpus_aligned

# ratio -> (what it is a share of: its numerator, the denominator), by their JSON names in ``figures.cluster``
RATIOS = {
    "strandedShare": ("strandedGpuEquivalents", "freeGpuEquivalents"),
    "fragmentationRate": ("fragmentedGpuEquivalents", "freeGpuEquivalents"),
    "fgdFragmentationRate": ("fgdFragmentedGpuEquivalents", "freeGpuEquivalents"),
}
_NAMES = {
    "strandedGpuEquivalents": "stranded capacity",
    "fragmentedGpuEquivalents": "fragmented capacity",
    "fgdFragmentedGpuEquivalents": "FGD-fragmented capacity",
}
_EPSILON = 1e-9


def ratio_notes(before: Mapping[str, Any], after: Mapping[str, Any], placed: int = 0) -> dict[str, str]:
    """For each ratio of ``RATIOS`` that rose while its numerator did not (the cluster figures before and after, JSON
    form): why, in one sentence. ``placed``: pending pods the plan places (what used the free capacity)."""
    notes: dict[str, str] = {}
    for ratio, (part, whole) in RATIOS.items():
        was, now = before.get(ratio), after.get(ratio)
        if was is None or now is None or now <= was + _EPSILON:
            continue
        part_was, part_now = before.get(part, 0.0), after.get(part, 0.0)
        whole_was, whole_now = before.get(whole, 0.0), after.get(whole, 0.0)
        if part_now > part_was + _EPSILON or whole_now >= whole_was - _EPSILON:
            continue  # the part itself grew, or the whole did not shrink: a real rise, shown as it is
        used = (
            f"{placed} pending pod(s) placed use {fmt_gpus_aligned(whole_was - whole_now)} of it"
            if placed
            else "pods use more of it"
        )
        notes[ratio] = (
            f"up only because the free GPU capacity it is a share of fell {fmt_gpus_aligned(whole_was)} -> {fmt_gpus_aligned(whole_now)} "
            f"GPU-equivalents ({used}); the {_NAMES[part]} itself went {fmt_gpus_aligned(part_was)} -> {fmt_gpus_aligned(part_now)}"
        )
    return notes

"""The headline figures of one cluster state, as the advice compares them before and after a change it measures.

Pure: reads ``Figures``; shared by the request-shape roundings (``advice.py``) and the CPU-only pods on GPU nodes
(``cpu_pods.py``), so both measure their "what if" the same way.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from compactor.metrics.fragmentation import Figures


@dataclass(frozen=True)
class Headline:
    """The headline figures of one cluster state (``compute_figures``), and how many of the snapshot's own pending GPU
    pods fit a node."""

    stranded_gpus: float
    free_gpus: float
    stranded_share: float | None
    whole_free_physical_gpus: int
    blocked_demand_gpus: float
    blocked_pending: int
    unplaceable_pending: int
    pending_fit: int  # the snapshot's pending GPU pods neither blocked nor unplaceable
    pending: int  # the snapshot's pending GPU pods


def headline(figures: Figures, pending_keys: Collection[str]) -> Headline:
    """``figures``' headline; ``pending_keys``: the snapshot's own pending GPU pods, whose fit is counted."""
    out = not_fitting(figures)
    c = figures.cluster
    return Headline(
        stranded_gpus=c.stranded_gpus,
        free_gpus=c.free_gpus,
        stranded_share=c.stranded_share,
        whole_free_physical_gpus=c.whole_free_physical_gpus,
        blocked_demand_gpus=figures.blocked_demand_gpus,
        blocked_pending=len(figures.blocked_pending),
        unplaceable_pending=len(figures.unplaceable_pending),
        pending_fit=sum(1 for key in pending_keys if key not in out),
        pending=len(pending_keys),
    )


def not_fitting(figures: Figures) -> set[str]:
    """Keys of the pending GPU pods that fit no node now: blocked or unplaceable."""
    return {b.pod for b in figures.blocked_pending} | {b.pod for b in figures.unplaceable_pending}

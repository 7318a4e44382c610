"""Pool and cluster figures: node figures summed into ``AggregateFigures``, with the rates taken over the sums.

Apart from ``fragmentation.py`` and ``node_figures.py`` because it reads only ``NodeFigures``, never the snapshot or
the shapes: its concern is summing without depending on node order (``math.fsum`` over kept terms).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from compactor.metrics.figure_types import AggregateFigures, NodeFigures
from compactor.model.resources import Resources

CLUSTER = "cluster"


def _rate(part: float, whole: float) -> float | None:
    return None if whole <= 0 else min(1.0, max(0.0, part / whole))


_FLOATS = (
    "allocatable_gpus",
    "allocated_gpus",
    "free_gpus",
    "busy_free_gpus",
    "stranded_gpus",
    "fragmented_gpus",
    "fgd_fragmented_gpus",
    "mig_idle_gpus",
    "mig_gpus",
)
_ALL_FLOATS = (*_FLOATS, "whole_free_gpus", "unavailable_free_gpus")
_COUNTS = ("gpus", "pod_count", "gpu_pod_count")


def _add_into(acc: dict[str, int], amounts: Mapping[str, int]) -> None:
    for key, value in amounts.items():
        acc[key] = acc.get(key, 0) + value


@dataclass(slots=True)
class _Totals:
    """Running sums over nodes; float figures keep their terms so ``math.fsum`` makes them order-independent."""

    counts: Counter[str] = field(default_factory=Counter)
    floats: dict[str, list[float]] = field(default_factory=lambda: {name: [] for name in _ALL_FLOATS})
    vectors: dict[str, dict[str, int]] = field(default_factory=lambda: {"allocatable": {}, "allocated": {}, "free": {}})
    mig_idle: Counter[str] = field(default_factory=Counter)
    mig_total: Counter[str] = field(default_factory=Counter)

    def add(self, n: NodeFigures) -> None:
        counts, floats = self.counts, self.floats
        counts["node_count"] += 1
        counts["gpu_node_count"] += n.gpus > 0
        counts["whole_free_nodes"] += n.whole_free
        counts["whole_free_physical_gpus"] += n.countable_gpus if n.whole_free else 0
        counts["overcommitted_nodes"] += bool(n.overcommitted)
        for name in _COUNTS:
            counts[name] += getattr(n, name)
        for name in _FLOATS:
            floats[name].append(getattr(n, name))
        floats["whole_free_gpus"].append(n.free_gpus if n.whole_free else 0.0)
        floats["unavailable_free_gpus"].append(0.0 if n.ready and n.schedulable else n.free_gpus)
        _add_into(self.vectors["allocatable"], n.allocatable.as_dict())
        _add_into(self.vectors["allocated"], n.allocated.as_dict())
        _add_into(self.vectors["free"], n.free.as_dict())
        self.mig_idle.update(n.mig_idle)
        self.mig_total.update(n.mig_total)

    def merge(self, other: _Totals) -> None:
        self.counts.update(other.counts)
        for name, terms in other.floats.items():
            self.floats[name].extend(terms)
        for name, vector in other.vectors.items():
            _add_into(self.vectors[name], vector)
        self.mig_idle.update(other.mig_idle)
        self.mig_total.update(other.mig_total)

    def finish(self, name: str, *, has_shapes: bool, has_gpu_shapes: bool) -> AggregateFigures:
        t = {key: math.fsum(terms) for key, terms in self.floats.items()}
        c = self.counts
        return AggregateFigures(
            name=name,
            node_count=c["node_count"],
            gpu_node_count=c["gpu_node_count"],
            allocatable=Resources(self.vectors["allocatable"]),
            allocated=Resources(self.vectors["allocated"]),
            free=Resources(self.vectors["free"]),
            gpus=c["gpus"],
            allocatable_gpus=t["allocatable_gpus"],
            allocated_gpus=t["allocated_gpus"],
            free_gpus=t["free_gpus"],
            whole_free_nodes=c["whole_free_nodes"],
            whole_free_physical_gpus=c["whole_free_physical_gpus"],
            whole_free_gpus=t["whole_free_gpus"],
            busy_free_gpus=t["busy_free_gpus"],
            stranded_gpus=t["stranded_gpus"],
            stranded_share=_rate(t["stranded_gpus"], t["free_gpus"]) if has_gpu_shapes else None,
            unavailable_free_gpus=t["unavailable_free_gpus"],
            mig_idle={k: self.mig_idle[k] for k in sorted(self.mig_total)},
            mig_total={k: self.mig_total[k] for k in sorted(self.mig_total)},
            mig_idle_gpus=t["mig_idle_gpus"],
            mig_gpus=t["mig_gpus"],
            mig_idle_rate=_rate(t["mig_idle_gpus"], t["mig_gpus"]),
            fragmented_gpus=t["fragmented_gpus"],
            fgd_fragmented_gpus=t["fgd_fragmented_gpus"],
            fragmentation_rate=_rate(t["fragmented_gpus"], t["free_gpus"]) if has_gpu_shapes else None,
            fgd_fragmentation_rate=_rate(t["fgd_fragmented_gpus"], t["free_gpus"]) if has_shapes else None,
            gpu_utilisation=_rate(t["allocatable_gpus"] - t["free_gpus"], t["allocatable_gpus"]),
            overcommitted_nodes=c["overcommitted_nodes"],
            pod_count=c["pod_count"],
            gpu_pod_count=c["gpu_pod_count"],
        )


def pool_and_cluster(
    nodes: Sequence[NodeFigures], *, has_shapes: bool, has_gpu_shapes: bool
) -> tuple[AggregateFigures, tuple[AggregateFigures, ...]]:
    """(cluster, pools sorted by name) in one pass over the nodes."""
    by_pool: dict[str, _Totals] = {}
    for node in nodes:
        by_pool.setdefault(node.pool, _Totals()).add(node)
    cluster = _Totals()
    for pool in sorted(by_pool):
        cluster.merge(by_pool[pool])
    pools = tuple(
        by_pool[pool].finish(pool, has_shapes=has_shapes, has_gpu_shapes=has_gpu_shapes) for pool in sorted(by_pool)
    )
    return cluster.finish(CLUSTER, has_shapes=has_shapes, has_gpu_shapes=has_gpu_shapes), pools

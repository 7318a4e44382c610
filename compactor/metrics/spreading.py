"""Spreading: GPU pods held on more nodes than their GPUs need, the signature of a scheduler that spreads (kube-scheduler's
default profile: LeastAllocated, BalancedAllocation, the system-default topology spread). When it is the cause of the
blocked demand, the first remedy is the scheduler's, not compaction's (``report --advise`` says so first; issue 42).

Pure: figures in, a frozen result out. Per pool of GPU nodes (Ready and schedulable, not MIG: slices do not pack, a
re-cut is their remedy): the nodes running GPU pods, and
the fewest nodes of the pool's size that would hold the GPU capacity those pods hold (ceiling of allocated over the
pool's largest node, in GPU-equivalents). Advice only when some pool holds its GPU pods on at least
``MIN_EXTRA_NODES`` nodes more than that, and GPU demand waits for a whole node's worth (blocked pending pods) or no
node of that pool is whole-free.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from compactor.metrics.figure_types import Figures, NodeFigures

MIN_EXTRA_NODES = 2
_EPS = 1e-9


@dataclass(frozen=True)
class PoolSpread:
    pool: str
    gpu_nodes: int  # Ready, schedulable GPU nodes of the pool
    nodes_in_use: int  # of them, those running GPU pods
    nodes_needed: int  # the fewest that would hold what the GPU pods hold
    whole_free_nodes: int

    @property
    def extra_nodes(self) -> int:
        return max(0, self.nodes_in_use - self.nodes_needed)


@dataclass(frozen=True)
class Spreading:
    pools: tuple[PoolSpread, ...]  # the pools that spread, most extra nodes first
    blocked_pending: int  # GPU pods pending that no single node fits now

    @property
    def extra_nodes(self) -> int:
        return sum(p.extra_nodes for p in self.pools)


def spreading(figures: Figures) -> Spreading | None:
    """The pools whose GPU pods are spread over more nodes than they need, when that keeps demand waiting; else None."""
    by_pool: dict[str, list[NodeFigures]] = defaultdict(list)
    for node in figures.nodes:
        if node.gpus > 0 and node.ready and node.schedulable and not node.mig_total:  # MIG: slices, a re-cut's case
            by_pool[node.pool].append(node)
    blocked = len(figures.blocked_pending)
    pools = [_pool(name, nodes) for name, nodes in sorted(by_pool.items())]
    spread = [p for p in pools if p.extra_nodes >= MIN_EXTRA_NODES and (blocked or p.whole_free_nodes == 0)]
    if not spread:
        return None
    return Spreading(tuple(sorted(spread, key=lambda p: (-p.extra_nodes, p.pool))), blocked)


def _pool(name: str, nodes: list[NodeFigures]) -> PoolSpread:
    size = max(n.allocatable_gpus for n in nodes)
    held = sum(n.allocated_gpus for n in nodes)
    needed = math.ceil(held / size - _EPS) if size > 0 else 0
    return PoolSpread(
        pool=name,
        gpu_nodes=len(nodes),
        nodes_in_use=sum(1 for n in nodes if n.runs_gpu_pods),
        nodes_needed=needed,
        whole_free_nodes=sum(1 for n in nodes if n.whole_free),
    )

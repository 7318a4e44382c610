"""Run budgets: the part of a plan one run may carry out, cut by whole source nodes, and which budget cut it.

A run fences every node it takes pods off at once and moves one replica of a workload at a time, so what it may take is
counted in source nodes: at most ``disruption.max_draining_per_pool`` nodes (or a share) of one pool drained together,
and at most ``disruption.max_moves_per_workload`` replicas of one workload moved in one run (``auto``: Koordinator's
per-workload unavailability for workloads no PodDisruptionBudget covers, 1 below 4 replicas, 2 up to 10, 10% above;
a PDB's own budget governs the others). Nodes are taken in plan order, each with all its moves, while every budget
holds; the others stay untouched (not even fenced) for a later run, which re-plans from live state. Cutting the move list
itself would fence nodes the run then leaves half drained.

Not the planner's time limit (``deadline.py``), nor a PodDisruptionBudget (``movability.py``), which the executor asks
before every eviction.

Imports: the plan model, history, movability, ``compactor.model``, ``compactor.settings``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from compactor.model.types import Snapshot
from compactor.planner.history import workload_key
from compactor.planner.movability import pdbs_by_pod
from compactor.planner.plan import CompactionPlan, Move
from compactor.settings import DisruptionSettings

# (source node, its moves) -> "" to take it, else the budget it would break
Admit = Callable[[str, Sequence[Move]], str]


def within_cap(plan: CompactionPlan, cap: int, gpus: Mapping[str, int]) -> CompactionPlan:
    """The whole source nodes of ``plan``, in order, whose moves add up to at most ``cap``; ``gpus``: node -> physical GPUs."""
    left = [cap]

    def admit(_: str, moves: Sequence[Move]) -> str:
        if len(moves) > left[0]:
            return f"max_evictions_per_cycle ({cap})"
        left[0] -= len(moves)
        return ""

    return take_nodes(plan, admit, gpus)[0]


def take_nodes(plan: CompactionPlan, admit: Admit, gpus: Mapping[str, int]) -> tuple[CompactionPlan, str]:
    """``plan`` with only the source nodes ``admit`` takes (each whole; those drained for a pending pod first, then in plan
    order), and the first budget that left one."""
    per_node: dict[str, list[Move]] = {}
    for move in plan.moves:  # insertion order: the plan's order of source nodes
        per_node.setdefault(move.from_node, []).append(move)
    taken: set[str] = set()
    first = ""
    # Nodes drained for a pending pod first: placing pending pods is the plan's first goal (the moves keep plan order).
    for_pending = {p.to_node for p in plan.placed_pending}
    for node, moves in sorted(per_node.items(), key=lambda item: item[0] not in for_pending):
        why = admit(node, moves)
        if why:
            first = first or why
        else:
            taken.add(node)
    if not first:
        return plan, ""
    moves = [m for m in plan.moves if m.from_node in taken]
    placed = [p for p in plan.placed_pending if p.to_node in taken or p.to_node not in per_node]
    targets = {m.to_node for m in moves} | {p.to_node for p in placed}
    freed = [n for n in plan.freed_nodes if n in taken]
    filled = [n for n in plan.filled_nodes if n in targets]
    return plan.model_copy(
        update={
            "moves": moves,
            "placed_pending": placed,
            "freed_nodes": freed,
            "filled_nodes": filled,
            "freed_gpus": sum(gpus.get(n, 0) for n in freed) - sum(gpus.get(n, 0) for n in filled),
        }
    ), first


def koordinator_unavailable(replicas: int) -> int:
    """Koordinator's default MaxUnavailablePerWorkload: 1 below 4 replicas, 2 up to 10, 10% (rounded up) above."""
    if replicas < 4:
        return 1
    if replicas <= 10:
        return 2
    return math.ceil(replicas / 10)


def share_of(limit: int | str, total: int) -> int:
    """``limit`` as a count: an integer, or "P%" of ``total`` rounded down but at least 1."""
    if isinstance(limit, int):
        return limit
    return max(1, math.floor(total * float(limit.rstrip("%")) / 100))


@dataclass
class RunBudgets:
    """The budgets of one run resolved against a snapshot: per pool a node cap, per workload a move cap."""

    pool_of: dict[str, str] = field(default_factory=dict)  # node -> pool
    pool_cap: dict[str, tuple[int, int]] = field(default_factory=dict)  # pool -> (cap, pool size)
    workload_cap: dict[str, tuple[int, str]] = field(default_factory=dict)  # workload -> (cap, why)
    workload_of: dict[str, str] = field(default_factory=dict)  # pod key -> workload

    @classmethod
    def of(cls, snapshot: Snapshot, cfg: DisruptionSettings, pods: Sequence[str]) -> RunBudgets:
        """Resolved for the planned pods ``pods`` (namespace/name)."""
        found = cls()
        if cfg.max_draining_per_pool is not None:
            sizes = Counter(n.pool for n in snapshot.nodes)
            found.pool_of = {n.name: n.pool for n in snapshot.nodes}
            found.pool_cap = {pool: (share_of(cfg.max_draining_per_pool, size), size) for pool, size in sizes.items()}
        if cfg.max_moves_per_workload is not None:
            found._workloads(snapshot, cfg.max_moves_per_workload, set(pods))
        return found

    def _workloads(self, snapshot: Snapshot, limit: int | str, planned: set[str]) -> None:
        replicas = Counter(key for p in snapshot.pods if p.is_bound and (key := workload_key(p.namespace, p.owners)))
        moved = [p for p in snapshot.pods if p.key in planned]
        covered = pdbs_by_pod(moved, snapshot.pdbs) if limit == "auto" else {}
        for pod in moved:
            key = workload_key(pod.namespace, pod.owners)
            if not key:
                continue
            self.workload_of[pod.key] = key
            if isinstance(limit, int):
                self.workload_cap[key] = (limit, f"{limit} per run")
            elif not covered.get(pod.key):
                cap = koordinator_unavailable(replicas[key])
                self.workload_cap[key] = (cap, f"{cap} per run: {replicas[key]} replicas, no PodDisruptionBudget")

    def admit(self) -> Admit:
        draining: Counter[str] = Counter()
        moving: Counter[str] = Counter()

        def admit(node: str, moves: Sequence[Move]) -> str:
            pool = self.pool_of.get(node)
            if pool is not None and pool in self.pool_cap and draining[pool] + 1 > self.pool_cap[pool][0]:
                cap, size = self.pool_cap[pool]
                return f"disruption.max_draining_per_pool ({cap} of pool {pool}'s {size} nodes at once)"
            counts = Counter(self.workload_of[m.pod] for m in moves if m.pod in self.workload_of)
            for key, count in counts.items():
                if key in self.workload_cap and moving[key] + count > self.workload_cap[key][0]:
                    return f"disruption.max_moves_per_workload ({key}: {self.workload_cap[key][1]})"
            if pool is not None:
                draining[pool] += 1
            moving.update(counts)
            return ""

        return admit

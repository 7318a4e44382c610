"""Run budgets: the part of a plan one run may carry out, cut by whole source nodes, and which budget cut it.

A run fences every node it takes pods off at once and moves one replica of a workload at a time, so what it may take is
counted in source nodes (taken in groups: a node that receives a pod and loses pods to make room for it goes with the
node the pod comes from): at most ``caps.max_draining_per_pool`` nodes (or a share) of one pool drained together,
and at most ``caps.max_moves_per_workload`` replicas of one workload moved in one run (``auto``: Koordinator's
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
from compactor.planner.plan import CompactionPlan, Move, Placement
from compactor.planner.rules.history import workload_key
from compactor.planner.rules.movability import pdbs_by_pod
from compactor.settings.caps import CapsSettings

# (source nodes, each with its moves), taken together -> "" to take them all, else the budget one of them would break;
# a refused group changes no count
Admit = Callable[[Sequence[tuple[str, Sequence[Move]]]], str]


def within_cap(plan: CompactionPlan, cap: int, gpus: Mapping[str, int]) -> CompactionPlan:
    """The whole source nodes of ``plan``, in order, whose moves add up to at most ``cap``; ``gpus``: node -> physical GPUs."""
    return take_nodes(plan, RunBudgets().admit(cap), gpus)[0]


@dataclass(frozen=True)
class EvictionCap:
    """``caps.max_evictions_per_cycle``, asked in one place: the evictions one run may start, what it says when it
    holds a plan back, and the whole-node cut of a plan it holds back (the planner's budgets, the executor and the
    plan's "as deployed" line all ask it)."""

    most: int

    @classmethod
    def of(cls, caps: CapsSettings) -> EvictionCap:
        return cls(caps.max_evictions_per_cycle)

    @property
    def held(self) -> str:
        return f"max_evictions_per_cycle ({self.most})"

    def holds_back(self, moves: int) -> bool:
        return moves > self.most

    def one_run(self, plan: CompactionPlan) -> CompactionPlan | None:
        """What one run takes of ``plan``: its whole source nodes in order up to the cap; None when it takes it all."""
        return within_cap(plan, self.most, {}) if self.holds_back(len(plan.moves)) else None


def refusal(moves: Sequence[Move], placed: Sequence[Placement], admit: Admit) -> str:
    """ "" when ``admit`` takes every source node of ``moves`` (a run could carry all of them out), else the first budget
    that refuses one; ``placed``: the pending pods the moves make room for."""
    per_node = _per_node(moves)
    for group in groups(moves, placed):
        why = admit([(node, per_node[node]) for node in group])
        if why:
            return why
    return ""


def _per_node(moves: Sequence[Move]) -> dict[str, list[Move]]:
    per_node: dict[str, list[Move]] = {}
    for move in moves:  # insertion order: the plan's order of source nodes
        per_node.setdefault(move.from_node, []).append(move)
    return per_node


def groups(moves: Sequence[Move], placed: Sequence[Placement], idle: Sequence[str] = ()) -> list[list[str]]:
    """The plan's source nodes in the groups a run takes or leaves whole: a node that receives a pod is grouped with
    the node it comes from when it loses pods itself (the room the move needs is made by its own departures: a chain),
    so no kept move waits for a move left to a later run. ``idle``: nodes no move leaves that a run still takes out of
    service (re-cut), each a group of its own after the others. Nodes drained for a pending pod first, then in plan
    order."""
    order: dict[str, None] = {}
    for move in moves:
        order.setdefault(move.from_node, None)
    parent = {node: node for node in order}

    def find(node: str) -> str:
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for move in moves:
        if move.to_node in parent:
            parent[find(move.to_node)] = find(move.from_node)
    grouped: dict[str, list[str]] = {}
    for node in order:
        grouped.setdefault(find(node), []).append(node)
    for_pending = {p.to_node for p in placed}
    units = [*grouped.values(), *([node] for node in idle if node not in parent)]
    return sorted(units, key=lambda nodes: not any(n in for_pending for n in nodes))


def take_nodes(plan: CompactionPlan, admit: Admit, gpus: Mapping[str, int]) -> tuple[CompactionPlan, str]:
    """``plan`` with only the source nodes ``admit`` takes, group by group (``groups``: those drained for a pending pod
    first, then in plan order), and the first budget that left one. A node re-cut with no move off it (whole-free
    already) is a group of its own with no move: out of service while mig-manager works, it counts against its pool's
    budget as a drained node does. A re-cut whose node is left is left with it, and the pending pods it would host."""
    per_node = _per_node(plan.moves)
    taken: set[str] = set()
    first = ""
    for group in groups(plan.moves, plan.placed_pending, idle=[r.node for r in plan.mig_repartition]):
        why = admit([(node, per_node.get(node, [])) for node in group])
        if why:
            first = first or why
        else:
            taken.update(group)
    if not first:
        return plan, ""
    left = {r.node for r in plan.mig_repartition} - taken
    moves = [m for m in plan.moves if m.from_node in taken]
    placed = [
        p for p in plan.placed_pending if p.to_node not in left and (p.to_node in taken or p.to_node not in per_node)
    ]
    targets = {m.to_node for m in moves} | {p.to_node for p in placed}
    freed = [n for n in plan.freed_nodes if n in taken]
    filled = [n for n in plan.filled_nodes if n in targets]
    return plan.model_copy(
        update={
            "moves": moves,
            "placed_pending": placed,
            "mig_repartition": [r for r in plan.mig_repartition if r.node in taken],
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
    def of(cls, snapshot: Snapshot, cfg: CapsSettings, pods: Sequence[str]) -> RunBudgets:
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

    def admit(self, cap: int | None = None) -> Admit:
        """Admits groups of source nodes while every budget holds, and (``cap``: ``caps.max_evictions_per_cycle``)
        their moves add up to at most ``cap``."""
        eviction_cap = EvictionCap(cap) if cap is not None else None
        draining: Counter[str] = Counter()
        moving: Counter[str] = Counter()
        total = [0]

        def admit(group: Sequence[tuple[str, Sequence[Move]]]) -> str:
            evictions = sum(len(moves) for _, moves in group)
            if eviction_cap is not None and eviction_cap.holds_back(total[0] + evictions):
                return eviction_cap.held
            pools = Counter(pool for node, _ in group if (pool := self.pool_of.get(node)) is not None)
            for pool, nodes in pools.items():
                if pool in self.pool_cap and draining[pool] + nodes > self.pool_cap[pool][0]:
                    most, size = self.pool_cap[pool]
                    return f"caps.max_draining_per_pool ({most} of pool {pool}'s {size} nodes at once)"
            counts = Counter(self.workload_of[m.pod] for _, moves in group for m in moves if m.pod in self.workload_of)
            for key, moved in counts.items():
                if key in self.workload_cap and moving[key] + moved > self.workload_cap[key][0]:
                    return f"caps.max_moves_per_workload ({key}: {self.workload_cap[key][1]})"
            draining.update(pools)
            moving.update(counts)
            total[0] += evictions
            return ""

        return admit

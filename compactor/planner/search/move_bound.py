"""Whole-cluster bounds on moves: the least a plan must move to free so many GPUs, and the most it can free within N moves.

A relaxation of the whole problem (never a narrowed one), solved with CP-SAT. GPU nodes alike in everything it reads
(pool, GPUs, room, movable GPU pods' amounts and costs, which pending pods may land there, which restricted target sets
they belong to) form one *kind*; per kind it counts how many of its nodes end whole-free (``freed``) and how many lose
exactly k of their movable GPU pods (``kept[k]``, k = 0 .. all). A node losing k pods costs at least its k cheapest pods'
costs and makes at most its k largest pods' room. Rows, each the sum over nodes of what holds on every node of a plan:

* pool: per group of nodes GPU pods can reach (``problem.gpu_pools``) and GPU resource, the nodes left busy hold every
  movable GPU pod and every pending pod placed (a freed node's room is lost, its pods need room elsewhere);
* chunks: a pod of s = q·a + r GPUs needs q whole chunks of a GPUs on the node it lands on, and a node offers at most
  floor(room left for arrivals / a) of them. Per pool, resource and a >= 2: the chunks the busy nodes offer (for a node
  losing k pods: floor((free + the k largest remainders mod a) / a), its leaving pods' chunks counted as needed) cover
  the chunks freed nodes' pods and placed pending pods need. This is what the fluid pool row misses where pods ask 2-8
  GPUs and the free GPUs are scattered one per node;
* restricted targets: per target set of pod types that reach only part of their pool, the GPUs of such pods on freed
  nodes and of pending pods placed there fit in the set's free room and the room its nodes' departures make;
* pending: per kind, pending pods placed fit in the room its nodes have once their leaving pods are gone (in GPUs and in
  chunks of each pending size), never on a freed node.

Every plan of the whole problem gives such counts with the same freed GPUs, pending pods placed and no more moves or cost
(CPU, memory, placement rules and move limits other than ``max_moves``/``max_moves_per_node`` are relaxed away), so the
model's proven bounds hold for every plan: loose, never wrong. Moves of pods without GPUs are never needed by it.
Counting per kind rather than per node keeps the model a few hundred variables at 1,000+ nodes, which CP-SAT proves in
well under a second where a per-node model with the chunk rows needed ten.

Imports: CP-SAT through ``cpsat`` (never ``ortools`` itself), the problem, the deadline.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import accumulate
from typing import TYPE_CHECKING

from compactor.model.resources import is_gpu_resource
from compactor.planner import cpsat
from compactor.planner.cpsat.deadline import Deadline
from compactor.planner.problem import Problem, gpu_pools, holds_gpu_load

if TYPE_CHECKING:
    from compactor.planner.cpsat import CpModel, IntVar, LinearExpr

BOUND_SECONDS = 1.0  # at most this for each bound: CP-SAT usually proves the model in a tenth of that
CAPPED_MIN_SECONDS = 0.25  # a capped bound's solve gets at least this (at 5,000 nodes it proves 80 of 80 in about that)
MAX_TARGET_SETS = 40  # restricted target sets given a row, those holding the most GPUs first
MAX_CHUNK = 16  # chunk sizes 2 .. this (and every larger pod amount) get a row


@dataclass
class _Node:
    """A GPU node as the relaxation sees it."""

    gpus: int  # what freeing it counts (0: freeing it gains nothing)
    freeable: bool  # may end whole-free
    costs: list[int] = field(default_factory=list)  # its movable GPU pods' move costs
    # GPU resource -> those pods' amounts
    amounts: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))


@dataclass(frozen=True)
class _Kind:
    """Nodes the relaxation cannot tell apart."""

    group: int
    gpus: int
    freeable: bool
    costs: tuple[int, ...]  # ascending
    # GPU resource -> its movable pods' amounts (0 for other pods), descending
    amounts: tuple[tuple[str, tuple[int, ...]], ...]
    rooms: tuple[tuple[str, int], ...]  # GPU resource -> capacity less what stays for good
    pending: frozenset[int]  # pending GPU types that may land here
    member: tuple[bool, ...]  # in each restricted target set
    need: tuple[int, ...]  # GPUs of its movable pods that only reach each restricted target set

    def amounts_of(self, resource: str) -> tuple[int, ...]:
        return dict(self.amounts).get(resource, (0,) * len(self.costs))

    def free(self, resource: str) -> int:
        return dict(self.rooms)[resource] - sum(self.amounts_of(resource))


@dataclass
class _Model:
    model: CpModel
    kinds: list[_Kind]
    size: list[int]  # nodes of each kind
    kept: list[list[IntVar]] = field(default_factory=list)  # kind -> [nodes losing exactly k pods]
    freed: list[IntVar] = field(default_factory=list)  # kind -> nodes ending whole-free
    placed: dict[tuple[int, int], IntVar] = field(default_factory=dict)  # (pending type, kind) -> pods
    asks: dict[int, dict[str, int]] = field(default_factory=dict)  # pending GPU type -> its GPU requests

    def sum(self, terms: Iterable[tuple[IntVar, int]]) -> LinearExpr:
        listed = [(v, c) for v, c in terms if c]
        return cpsat.weighted_sum([v for v, _ in listed], [c for _, c in listed])

    def cost(self) -> LinearExpr:
        terms = []
        for kind, kept, freed in zip(self.kinds, self.kept, self.freed, strict=True):
            cheapest = [0, *accumulate(kind.costs)]
            terms += [(v, cheapest[k]) for k, v in enumerate(kept)] + [(freed, cheapest[-1])]
        return self.sum(terms)

    def moves(self) -> LinearExpr:
        terms = [(v, k) for kept in self.kept for k, v in enumerate(kept)]
        return self.sum(terms + [(f, len(kind.costs)) for kind, f in zip(self.kinds, self.freed, strict=True)])

    def freed_gpus(self) -> LinearExpr:
        return self.sum((f, kind.gpus) for kind, f in zip(self.kinds, self.freed, strict=True))

    def pending_weight(self, problem: Problem) -> LinearExpr:
        return self.sum((v, problem.types[t].weight) for (t, _), v in self.placed.items())


def fewest_moves_cost(problem: Problem, *, freed_gpus: int, pending_weight: int, deadline: Deadline) -> int | None:
    """A lower bound on the move cost of any plan of ``problem`` (the whole one) leaving at least ``freed_gpus`` net GPUs
    whole-free and placing pending pods of at least ``pending_weight`` (priority-weighted): None when CP-SAT proved none
    in time. 0 when nothing need move."""
    if freed_gpus <= 0 and pending_weight <= 0:
        return 0
    nodes = _nodes(problem)
    floor = _fractional_cost(problem, nodes, freed_gpus + problem.empty_before_gpus)
    built = _build(problem, nodes)
    built.model.add(built.freed_gpus() >= freed_gpus + problem.empty_before_gpus)
    built.model.add(built.pending_weight(problem) >= pending_weight)
    built.model.minimize(built.cost())
    solved = cpsat.solve(built.model, deadline, max(0.05, min(BOUND_SECONDS, deadline.remaining())), workers=1)
    if solved.infeasible:
        return None  # no plan reaches it: the caller's figures are wrong, claim nothing
    if solved.optimal:
        return max(round(solved.objective), floor)
    bound = solved.bound
    found = math.ceil(bound - 1e-6) if math.isfinite(bound) else 0
    return max(found, floor) if max(found, floor) > 0 else None


def _fractional_cost(problem: Problem, nodes: dict[int, _Node], gross: int) -> int:
    """The knapsack's linear relaxation, at once: freeing ``gross`` GPUs moves at least the GPU pods of the nodes that
    free GPUs most cheaply, the last one in part (a floor under CP-SAT's bound when it has no time to prove more)."""
    ratios = sorted(
        (sum(node.costs) / problem.nodes[n].gpus, problem.nodes[n].gpus) for n, node in nodes.items() if node.freeable
    )
    total, left = 0.0, gross
    for per_gpu, gpus in ratios:
        if left <= 0:
            break
        take = min(gpus, left)
        total += per_gpu * take
        left -= take
    return math.ceil(total - 1e-6)


def most_freed_within(problem: Problem, *, max_moves: int, pending_weight: int, deadline: Deadline) -> int | None:
    """An upper bound on the net GPUs any plan of ``problem`` with at most ``max_moves`` moves placing pending pods of
    at least ``pending_weight`` leaves whole-free; None when CP-SAT proved none in time."""
    built = _build(problem, _nodes(problem))
    built.model.add(built.moves() <= max_moves)
    built.model.add(built.pending_weight(problem) >= pending_weight)
    built.model.maximize(built.freed_gpus())
    # A moment even out of time: under a cap this is the only honest bound (the uncapped one is ~100x too high).
    solved = cpsat.solve(
        built.model, deadline, max(CAPPED_MIN_SECONDS, min(BOUND_SECONDS, deadline.remaining())), workers=1
    )
    if solved.optimal:
        return round(solved.objective) - problem.empty_before_gpus
    bound = solved.bound
    return math.floor(bound + 1e-6) - problem.empty_before_gpus if math.isfinite(bound) else None


def _nodes(problem: Problem) -> dict[int, _Node]:
    """GPU nodes with something to decide: movable GPU pods, GPUs to free, or a pending pod that may land there."""
    found: dict[int, _Node] = {}
    for state in problem.nodes:
        if state.gpus or holds_gpu_load(state.capacity):
            found[state.index] = _Node(
                state.gpus, state.gpus > 0 and state.can_empty and not holds_gpu_load(state.fixed)
            )
    for ptype in problem.types:
        if not ptype.uses_gpu or ptype.pending:
            continue
        gpu = [(r, v) for r, v in ptype.items if is_gpu_resource(r)]
        for node, pods in ptype.initial.items():
            entry = found.setdefault(node, _Node(0, False))
            entry.costs += [ptype.cost] * len(pods)
            for resource, amount in gpu:
                entry.amounts[resource] += [amount] * len(pods)
    return found


def _gpus(items: Iterable[tuple[str, int]]) -> int:
    return sum(v for r, v in items if is_gpu_resource(r))


def _room(problem: Problem, n: int, resource: str) -> int:
    state = problem.nodes[n]
    return state.capacity.get(resource, 0) - state.fixed.get(resource, 0)


def _target_sets(problem: Problem, group: list[int]) -> list[frozenset[int]]:
    """Target sets of movable GPU types that reach only part of their pool, those holding the most GPUs first."""
    pool_size = Counter(group)
    held: Counter[frozenset[int]] = Counter()
    for ptype in problem.types:
        if ptype.uses_gpu and not ptype.pending and ptype.targets:
            held[frozenset(ptype.targets)] += _gpus(ptype.items) * ptype.count
    partial = [s for s, _ in held.most_common() if len(s) < pool_size[group[next(iter(s))]]]
    return partial[:MAX_TARGET_SETS]


def _kinds(
    problem: Problem, nodes: dict[int, _Node], group: list[int], sets: list[frozenset[int]]
) -> tuple[list[_Kind], list[int]]:
    """The kinds of ``nodes`` (``group``: node -> its pool), and how many nodes each has."""
    landing: dict[int, set[int]] = defaultdict(set)
    need: dict[int, list[int]] = defaultdict(lambda: [0] * len(sets))
    for ptype in problem.types:
        if ptype.uses_gpu and ptype.pending:
            for n in ptype.targets:
                landing[n].add(ptype.index)
        elif ptype.uses_gpu:
            within = [j for j, s in enumerate(sets) if s.issuperset(ptype.targets)]
            for n, pods in ptype.initial.items():
                for j in within:
                    need[n][j] += _gpus(ptype.items) * len(pods)
    count: Counter[_Kind] = Counter()
    for n, node in nodes.items():
        rooms = tuple(sorted((r, _room(problem, n, r)) for r in problem.nodes[n].capacity if is_gpu_resource(r)))
        amounts = tuple(
            sorted(
                (r, tuple(sorted([*v, *[0] * (len(node.costs) - len(v))], reverse=True)))
                for r, v in node.amounts.items()
            )
        )
        count[
            _Kind(
                group[n],
                node.gpus,
                node.freeable,
                tuple(sorted(node.costs)),
                amounts,
                rooms,
                frozenset(landing[n]),
                tuple(n in s for s in sets),
                tuple(need[n]),
            )
        ] += 1
    kinds = sorted(count, key=repr)
    return kinds, [count[k] for k in kinds]


def _build(problem: Problem, nodes: dict[int, _Node]) -> _Model:
    group = gpu_pools(problem)
    sets = _target_sets(problem, group)
    kinds, size = _kinds(problem, nodes, group, sets)
    built = _Model(cpsat.new_model(), kinds, size)
    _choices(problem, built)
    _pending(problem, built)
    _pool_rows(built)
    _chunk_rows(built)
    _target_rows(built, len(sets))
    return built


def _choices(problem: Problem, built: _Model) -> None:
    """Per kind: its nodes each lose k = 0 .. all of their movable GPU pods, or end whole-free."""
    cap = problem.limits.per_node
    model = built.model
    for i, (kind, size) in enumerate(zip(built.kinds, built.size, strict=True)):
        pods = len(kind.costs)
        most = pods if cap is None else min(pods, cap)
        kept = [model.new_int_var(0, size, f"kept_{i}_{k}") for k in range(most + 1)]
        freed = model.new_int_var(0, size if kind.freeable and most == pods else 0, f"freed_{i}")
        model.add(cpsat.total([*kept, freed]) == size)
        built.kept.append(kept)
        built.freed.append(freed)


def _arrival_room(kind: _Kind, resource: str, k: int) -> int:
    """Room a node of ``kind`` has for arrivals once its k largest movable pods of ``resource`` left."""
    return kind.free(resource) + sum(kind.amounts_of(resource)[:k])


def _pending(problem: Problem, built: _Model) -> None:
    """Pending GPU pods land on busy nodes of the kinds they may, within the room (in GPUs and in chunks of their size)
    those nodes have once their leaving pods are gone."""
    model = built.model
    for ptype in problem.types:
        if not ptype.pending or not ptype.uses_gpu:
            continue
        built.asks[ptype.index] = {r: v for r, v in ptype.items if is_gpu_resource(r)}
        mine = [i for i, kind in enumerate(built.kinds) if ptype.index in kind.pending]
        for i in mine:
            built.placed[ptype.index, i] = model.new_int_var(0, ptype.count, f"placed_{ptype.index}_{i}")
        model.add(cpsat.total([built.placed[ptype.index, i] for i in mine]) <= ptype.count)
    arrivals: dict[tuple[int, str], list[tuple[IntVar, int]]] = defaultdict(list)
    for (t, i), var in built.placed.items():
        for resource, amount in built.asks[t].items():
            arrivals[i, resource].append((var, amount))
    for (i, resource), terms in arrivals.items():
        kind = built.kinds[i]
        if resource not in dict(kind.rooms):
            model.add(built.sum(terms) <= 0)
            continue
        room = [(v, _arrival_room(kind, resource, k)) for k, v in enumerate(built.kept[i])]
        model.add(built.sum(terms) <= built.sum(room))
        for chunk in sorted({a for _, a in terms}):
            model.add(built.sum((v, a // chunk) for v, a in terms) <= built.sum((v, r // chunk) for v, r in room))


def _placed(built: _Model, kinds: set[int], resource: str, chunk: int = 1) -> list[tuple[IntVar, int]]:
    """Pending pods placed on ``kinds`` (indices), weighted by their chunks of ``resource``."""
    return [(v, built.asks[t].get(resource, 0) // chunk) for (t, i), v in built.placed.items() if i in kinds]


def _in_pool(built: _Model, group: int) -> set[int]:
    return {i for i, kind in enumerate(built.kinds) if kind.group == group}


def _pool_rows(built: _Model) -> None:
    """Per pool and GPU resource: the busy nodes' room holds every movable GPU pod and every pending pod placed."""
    lost: dict[tuple[int, str], list[tuple[IntVar, int]]] = defaultdict(list)
    spare: dict[tuple[int, str], int] = defaultdict(int)
    for kind, size, freed in zip(built.kinds, built.size, built.freed, strict=True):
        for resource, room in kind.rooms:
            spare[kind.group, resource] += size * kind.free(resource)
            lost[kind.group, resource].append((freed, room))
    for (group, resource), terms in lost.items():
        placed = _placed(built, _in_pool(built, group), resource)
        built.model.add(built.sum(terms + placed) <= spare[group, resource])


def _chunks(kinds: list[_Kind], asks: Iterable[dict[str, int]]) -> dict[tuple[int, str], list[int]]:
    """Per pool and GPU resource: the chunk sizes worth a row (2 .. MAX_CHUNK, up to the largest amount asked)."""
    largest: dict[tuple[int, str], int] = defaultdict(int)
    pending = [a for ask in asks for a in ask.items()]
    for kind in kinds:
        for resource, amounts in kind.amounts:
            largest[kind.group, resource] = max(largest[kind.group, resource], *amounts, 0)
        for resource, amount in pending:
            if resource in dict(kind.rooms):
                largest[kind.group, resource] = max(largest[kind.group, resource], amount)
    return {key: list(range(2, min(top, MAX_CHUNK) + 1)) for key, top in largest.items() if top >= 2}


def _chunk_row(built: _Model, group: int, resource: str, chunk: int) -> None:
    """Chunks of ``chunk`` GPUs the pool's busy nodes offer cover those its moving and placed pods need."""
    offered: list[tuple[IntVar, int]] = []
    for kind, kept, freed in zip(built.kinds, built.kept, built.freed, strict=True):
        if kind.group != group or resource not in dict(kind.rooms):
            continue
        amounts, free = kind.amounts_of(resource), kind.free(resource)
        rest = [0, *accumulate(sorted((a % chunk for a in amounts), reverse=True))]
        offered += [(v, (free + rest[k]) // chunk) for k, v in enumerate(kept)]
        offered.append((freed, -sum(a // chunk for a in amounts)))
    needed = _placed(built, _in_pool(built, group), resource, chunk)
    built.model.add(built.sum(offered + [(v, -c) for v, c in needed]) >= 0)


def _chunk_rows(built: _Model) -> None:
    for (group, resource), chunks in _chunks(built.kinds, built.asks.values()).items():
        for chunk in chunks:
            _chunk_row(built, group, resource, chunk)


def _target_rows(built: _Model, sets: int) -> None:
    """Per restricted target set: GPUs of pods that reach only it, on freed nodes, and of pending pods placed in it fit in
    its busy nodes' room once their leaving pods are gone."""
    for j in range(sets):
        need = [(f, kind.need[j]) for kind, f in zip(built.kinds, built.freed, strict=True)]
        room: list[tuple[IntVar, int]] = []
        placed: list[tuple[IntVar, int]] = []
        for kind, kept in zip(built.kinds, built.kept, strict=True):
            if kind.member[j]:
                room += [(v, sum(_arrival_room(kind, r, k) for r, _ in kind.rooms)) for k, v in enumerate(kept)]
        members = {i for i, kind in enumerate(built.kinds) if kind.member[j]}
        for resource in sorted({r for ask in built.asks.values() for r in ask}):
            placed += _placed(built, members, resource)
        built.model.add(built.sum(need + placed) <= built.sum(room))

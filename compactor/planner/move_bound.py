"""Whole-cluster bounds on moves: the least a plan must move to free so many GPUs, and the most it can free within N moves.

A relaxation of the whole problem (never a narrowed one) to one decision per node, solved with CP-SAT:

* ``freed[n]``: node n ends whole-free (it may: every GPU pod on it may move, and it counts GPUs); then every movable
  GPU pod on it moves;
* ``out[n]``: how many of its movable GPU pods leave. Leaving pods cost at least its ``out[n]`` cheapest pods' costs,
  and make at most its ``out[n]`` largest pods' GPU room (per GPU resource);
* ``placed[t, n]``: pending pods of GPU type t placed on n: they fit in n's room once ``out[n]`` pods left, never on a
  node counted as freed;
* per group of nodes GPU pods can reach (``problem.linked_nodes``) and GPU resource, the nodes left busy hold every
  movable GPU pod and every pending pod placed.

Every plan of the whole problem gives such a choice with the same freed GPUs, pending pods placed and no more moves or
cost (CPU, memory, placement rules and move limits other than ``max_moves``/``max_moves_per_node`` are relaxed away), so
the model's proven bounds hold for every plan: loose, never wrong. Moves of pods without GPUs are never needed by it.

Imports: CP-SAT through ``cpsat`` (never ``ortools`` itself), the problem, the deadline.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from itertools import accumulate

from compactor.model.resources import is_gpu_resource
from compactor.planner import cpsat
from compactor.planner.cpsat import CpModel, IntVar, LinearExpr
from compactor.planner.deadline import Deadline
from compactor.planner.problem import Problem, gpu_pools, holds_gpu_load

BOUND_SECONDS = 1.0  # at most this for each bound: the model is one row per node, CP-SAT usually proves it in milliseconds
CAPPED_MIN_SECONDS = 0.25  # a capped bound's solve gets at least this (at 5,000 nodes it proves 80 of 80 in about that)


@dataclass
class _Node:
    """A GPU node as the relaxation sees it."""

    gpus: int  # what freeing it counts (0: freeing it gains nothing)
    freeable: bool  # may end whole-free
    costs: list[int] = field(default_factory=list)  # its movable GPU pods' move costs
    amounts: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))  # GPU resource -> those pods' amounts


@dataclass
class _Model:
    model: CpModel
    freed: dict[int, IntVar] = field(default_factory=dict)
    out: dict[int, IntVar] = field(default_factory=dict)
    cost: list[IntVar] = field(default_factory=list)
    placed: dict[tuple[int, int], IntVar] = field(default_factory=dict)

    def freed_gpus(self, problem: Problem) -> LinearExpr:
        return LinearExpr.weighted_sum(list(self.freed.values()), [problem.nodes[n].gpus for n in self.freed])

    def pending_weight(self, problem: Problem) -> LinearExpr:
        return LinearExpr.weighted_sum(list(self.placed.values()), [problem.types[t].weight for t, _ in self.placed])


def fewest_moves_cost(problem: Problem, *, freed_gpus: int, pending_weight: int, deadline: Deadline) -> int | None:
    """A lower bound on the move cost of any plan of ``problem`` (the whole one) leaving at least ``freed_gpus`` net GPUs
    whole-free and placing pending pods of at least ``pending_weight`` (priority-weighted): None when CP-SAT proved none
    in time. 0 when nothing need move."""
    if freed_gpus <= 0 and pending_weight <= 0:
        return 0
    nodes = _nodes(problem)
    floor = _fractional_cost(problem, nodes, freed_gpus + problem.empty_before_gpus)
    built = _build(problem, nodes)
    built.model.add(built.freed_gpus(problem) >= freed_gpus + problem.empty_before_gpus)
    built.model.add(built.pending_weight(problem) >= pending_weight)
    built.model.minimize(LinearExpr.sum(built.cost))
    solved = cpsat.solve(built.model, deadline, max(0.05, min(BOUND_SECONDS, deadline.remaining())), workers=1)
    if solved.infeasible:
        return None  # no plan reaches it: the caller's figures are wrong, claim nothing
    if solved.optimal:
        return round(solved.objective)
    bound = solved.bound
    found = math.ceil(bound - 1e-6) if math.isfinite(bound) else 0
    return max(found, floor) if max(found, floor) > 0 else None


def _fractional_cost(problem: Problem, nodes: dict[int, _Node], gross: int) -> int:
    """The knapsack's linear relaxation, at once: freeing ``gross`` GPUs moves at least the GPU pods of the nodes that
    free GPUs most cheaply, the last one in part (a floor under CP-SAT's bound when it has no time to prove more)."""
    ratios = sorted((sum(node.costs) / problem.nodes[n].gpus, problem.nodes[n].gpus) for n, node in nodes.items() if node.freeable)
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
    built.model.add(LinearExpr.sum(list(built.out.values())) <= max_moves)
    built.model.add(built.pending_weight(problem) >= pending_weight)
    built.model.maximize(built.freed_gpus(problem))
    # A moment even out of time: under a cap this is the only honest bound (the uncapped one is ~100x too high).
    solved = cpsat.solve(built.model, deadline, max(CAPPED_MIN_SECONDS, min(BOUND_SECONDS, deadline.remaining())), workers=1)
    if solved.optimal:
        return round(solved.objective) - problem.empty_before_gpus
    bound = solved.bound
    return math.floor(bound + 1e-6) - problem.empty_before_gpus if math.isfinite(bound) else None


def _nodes(problem: Problem) -> dict[int, _Node]:
    """GPU nodes with something to decide: movable GPU pods, GPUs to free, or a pending pod that may land there."""
    found: dict[int, _Node] = {}
    for state in problem.nodes:
        if state.gpus or holds_gpu_load(state.capacity):
            found[state.index] = _Node(state.gpus, state.gpus > 0 and state.can_empty and not holds_gpu_load(state.fixed))
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


def _build(problem: Problem, nodes: dict[int, _Node]) -> _Model:
    built = _Model(CpModel())
    made: dict[tuple[int, str], IntVar] = {}  # (node, resource) -> GPU room its leaving pods make
    for n, node in nodes.items():
        if node.freeable:
            built.freed[n] = built.model.new_bool_var(f"freed_{n}")
        if node.costs:
            _departures(problem, n, node, built, made)
    _pending(problem, nodes, built, made)
    _group_capacity(problem, nodes, built)
    return built


def _departures(problem: Problem, n: int, node: _Node, built: _Model, made: dict[tuple[int, str], IntVar]) -> None:
    """Pods leaving ``n`` (all of them when it ends whole-free) cost at least its cheapest ones and make at most the room
    of its largest ones."""
    model, cap = built.model, problem.settings.max_moves_per_node
    most = len(node.costs) if cap is None else min(len(node.costs), cap)
    out = built.out[n] = model.new_int_var(0, most, f"out_{n}")
    cheapest = [0, *accumulate(sorted(node.costs))][: most + 1]
    cost = model.new_int_var(0, cheapest[-1], f"cost_{n}")
    model.add_element(out, cheapest, cost)
    built.cost.append(cost)
    if n in built.freed:
        if len(node.costs) > most:
            model.add(built.freed[n] == 0)
        else:
            model.add(out == len(node.costs)).only_enforce_if(built.freed[n])
    for resource, amounts in node.amounts.items():
        # Pods without this resource (another MIG profile) make none of its room: zeros, so every count indexes.
        padded = sorted(amounts, reverse=True) + [0] * (len(node.costs) - len(amounts))
        largest = [0, *accumulate(padded)][: most + 1]
        made[n, resource] = model.new_int_var(0, largest[-1], f"made_{n}_{resource}")
        model.add_element(out, largest, made[n, resource])


def _room(problem: Problem, n: int, resource: str) -> int:
    state = problem.nodes[n]
    return state.capacity.get(resource, 0) - state.fixed.get(resource, 0)


def _pending(problem: Problem, nodes: dict[int, _Node], built: _Model, made: dict[tuple[int, str], IntVar]) -> None:
    """Pending GPU pods fit where their node has room once its leaving pods are gone, and free no node they land on."""
    arrivals: dict[tuple[int, str], list[tuple[IntVar, int]]] = defaultdict(list)
    model = built.model
    for ptype in problem.types:
        if not ptype.pending or not ptype.uses_gpu:
            continue
        for n in ptype.targets:
            var = built.placed[ptype.index, n] = model.new_int_var(0, ptype.count, f"placed_{ptype.index}_{n}")
            if n in built.freed:
                model.add(var == 0).only_enforce_if(built.freed[n])
            for resource, amount in ptype.items:
                if is_gpu_resource(resource):
                    arrivals[n, resource].append((var, amount))
    for (n, resource), terms in arrivals.items():
        node = nodes.get(n)
        staying = sum(node.amounts.get(resource, ())) if node else 0
        room = _room(problem, n, resource) - staying
        lhs = LinearExpr.weighted_sum([v for v, _ in terms], [a for _, a in terms])
        extra = made.get((n, resource))
        model.add(lhs <= room + extra if extra is not None else lhs <= room)


def _group_capacity(problem: Problem, nodes: dict[int, _Node], built: _Model) -> None:
    """Per group of nodes movable GPU pods link (pools) and GPU resource: the nodes left busy hold every movable and every
    placed GPU pod (pending pods, which may cross pools, are counted where they land: linking the pools by them would
    pool each pool's scraps into room that no movable pod can use)."""
    group = gpu_pools(problem)
    load: dict[tuple[int, str], int] = defaultdict(int)
    room: dict[tuple[int, str], int] = defaultdict(int)
    lost: dict[tuple[int, str], list[tuple[IntVar, int]]] = defaultdict(list)  # room a freed node takes away
    for n, node in nodes.items():
        for resource, amounts in node.amounts.items():
            load[group[n], resource] += sum(amounts)
        for resource in problem.nodes[n].capacity:
            if is_gpu_resource(resource):
                amount = _room(problem, n, resource)
                room[group[n], resource] += amount
                if n in built.freed and amount:
                    lost[group[n], resource].append((built.freed[n], amount))
    for (t, n), var in built.placed.items():
        for resource, amount in problem.types[t].items:
            if is_gpu_resource(resource):
                lost[group[n], resource].append((var, amount))
    for key, terms in lost.items():
        expr = LinearExpr.weighted_sum([v for v, _ in terms], [a for _, a in terms])
        built.model.add(expr <= room[key] - load[key])

"""The CP-SAT constraints, one small function per family.

Kept in one module (rather than one file each) because every family is a few
lines over the same ``Variables``; each function's docstring is the rule it states.
The objective's expressions (``freed_gpus``, ``pending_placed``, ``headroom_gain``,
``move_cost``) are the model's form of ``objective.py``'s terms (``levels.py`` pairs them).

Imports: the CP-SAT types through ``cpsat`` (never ``ortools`` itself), ``int64``, the problem, the variables.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING

from compactor.model.resources import is_gpu_resource
from compactor.planner import cpsat
from compactor.planner.cpsat.int64 import (
    REACH_LIMIT,
    LinearTerms,
    ModelRangeError,
    at_most,
    at_most_unless_empty,
    checked,
    reach,
    too_large,
)
from compactor.planner.cpsat.variables import Variables
from compactor.planner.problem import Problem

if TYPE_CHECKING:
    from compactor.planner.cpsat import IntVar, LinearExpr, LinearExprT


def _weighted(terms: LinearTerms) -> LinearExpr:
    return cpsat.weighted_sum([v for v, _ in terms], [c for _, c in terms])


def _fits(
    problem: Problem, node: int, resource: str, terms: LinearTerms, room: int, v: Variables, total: int | None = None
) -> None:
    """``sum(terms) <= room`` on a node, restated in small numbers; refused when still beyond the solver's integers.
    ``total``: the terms' reach (``int64.reach``) when the caller has it."""
    total = reach(terms, v.upper) if total is None else total
    restated = at_most(terms, room, v.upper, total=total)
    if restated is not None:
        terms, room = restated
        if total > REACH_LIMIT:  # restated amounts are never larger, so only then can they be too large
            checked(
                terms,
                too_large(problem.snapshot.source, problem.nodes[node].node.name, resource, f"{resource} amounts"),
                bound=v.upper,
            )
        v.model.add(_weighted(terms) <= room)


def conservation(problem: Problem, v: Variables) -> None:
    """Every movable pod ends on exactly one node; moves out/in are the differences from where it started."""
    for ptype in problem.types:
        v.tick()
        if ptype.pending:
            v.model.add(cpsat.total([v.placed[ptype.index, n] for n in ptype.targets]) <= ptype.count)
            continue
        v.model.add(cpsat.total([v.final[ptype.index, n] for n in ptype.targets]) == ptype.count)
        for node, pods in ptype.initial.items():
            v.model.add(v.out[ptype.index, node] + v.final[ptype.index, node] >= len(pods))


def capacity(problem: Problem, v: Variables) -> None:
    """After the plan, every node fits every resource any pod requests (an overcommitted node gets no worse)."""
    per_node: dict[int, dict[str, LinearTerms]] = defaultdict(lambda: defaultdict(list))
    # the rows' reach, summed as they are made
    reaches: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for ptype in problem.types:
        v.tick()
        source = v.placed if ptype.pending else v.final
        for node in ptype.targets:
            var = source[ptype.index, node]
            most = v.upper(var)
            rows, reach_of = per_node[node], reaches[node]
            for resource, amount in ptype.items:
                rows[resource].append((var, amount))
                reach_of[resource] += abs(amount) * most
    for node, by_resource in per_node.items():
        v.tick()
        state = problem.nodes[node]
        for resource, terms in by_resource.items():
            _fits(
                problem,
                node,
                resource,
                terms,
                state.capacity.get(resource, 0) - state.fixed.get(resource, 0),
                v,
                reaches[node][resource],
            )
    # Shape mode: each shape's copies are counted against the free room on their own, as the headroom figure is.
    for (shape_index, node), var in v.headroom.items():
        state = problem.nodes[node]
        for resource, amount in problem.target_shapes[shape_index].items():
            terms = [*per_node.get(node, {}).get(resource, []), (var, amount)]
            _fits(problem, node, resource, terms, state.capacity.get(resource, 0) - state.fixed.get(resource, 0), v)


ORDER_LEVELS = 5  # moves that wait for other moves: chains up to this long (a pod leaves b for d, then one a -> b, ...)


def one_eviction_at_a_time(problem: Problem, v: Variables) -> None:
    """Some order of single moves carries the plan out (``problem.ordered_moves``): each node with movable pods gets a
    level, each pod type a threshold, and a type leaves only nodes above its threshold and arrives only at or below it.
    Moves into the lowest level run first; a node's arrivals then find its departures done (they went lower). Two pods
    swapping nodes, which no order of single evictions reaches, need each node above the other: no levels allow it."""
    if not problem.ordered_moves:
        return
    model = v.model
    level = {
        n: model.new_int_var(0, ORDER_LEVELS - 1, f"level_{n}")
        for t in problem.types
        if not t.pending
        for n in t.initial
    }
    for ptype in problem.types:
        v.tick()
        if ptype.pending:
            continue
        threshold = model.new_int_var(0, ORDER_LEVELS - 2, f"threshold_{ptype.index}")
        for node in ptype.targets:
            if node not in level:
                continue  # runs no movable pod, so loses none: level 0, at or below every threshold
            initial = len(ptype.initial.get(node, ()))
            final = v.final[ptype.index, node]
            if initial:
                leaves = model.new_bool_var(f"leaves_{ptype.index}_{node}")
                model.add(v.out[ptype.index, node] <= initial * leaves)
                model.add(level[node] >= threshold + 1).only_enforce_if(leaves)
            arrives = model.new_bool_var(f"arrives_{ptype.index}_{node}")
            arrivals = final - initial + v.out[ptype.index, node] if initial else final
            model.add(arrivals <= ptype.count * arrives)
            model.add(level[node] <= threshold).only_enforce_if(arrives)


def sinks(problem: Problem, v: Variables) -> None:
    """Pods without GPUs arrive only on nodes that lose no pod (sinks). Where they land (nodes without GPUs, full GPU
    nodes) is rarely where room is made, and the rule keeps the plans one eviction at a time can run: two nodes that
    both give and take pods are what swaps are made of, and CPU pods, movable almost anywhere, made most of them."""
    plain = [t for t in problem.types if not t.pending and not t.uses_gpu]
    if not plain:
        return
    losing: dict[int, list[tuple[IntVar, int]]] = defaultdict(list)  # node -> its out variables and their pods
    for (t, node), var in v.out.items():
        losing[node].append((var, len(problem.types[t].initial[node])))
    for ptype in plain:
        v.tick()
        for node in ptype.targets:
            if node not in losing or node in ptype.stay_only:
                continue
            sink = v.sink.get(node)
            if sink is None:
                sink = v.sink[node] = v.new_bool_var(f"sink_{node}")
                pods = sum(k for _, k in losing[node])
                v.model.add(cpsat.total([var for var, _ in losing[node]]) + pods * sink <= pods)
            initial = len(ptype.initial.get(node, ()))
            v.model.add(v.final[ptype.index, node] <= initial + (ptype.count - initial) * sink)


def emptiness(problem: Problem, v: Variables) -> None:
    """A node counted as freed ends with no GPU pod: none stays, none arrives, no pending pod lands.

    Stated as capacity (``GPU load <= capacity * (1 - empty)`` per GPU resource), the
    bin-packing form whose LP relaxation is tight, rather than an enforced ``== 0``.
    """
    gpu_terms: dict[int, dict[str, LinearTerms]] = defaultdict(lambda: defaultdict(list))
    for ptype in problem.types:
        v.tick()
        if not ptype.uses_gpu:
            continue
        source = v.placed if ptype.pending else v.final
        for node in ptype.targets:
            for resource, amount in ptype.items:
                if is_gpu_resource(resource):
                    gpu_terms[node][resource].append((source[ptype.index, node], amount))
    for node, empty in v.empty.items():
        v.tick()
        room = problem.nodes[node]
        for resource, terms in gpu_terms.get(node, {}).items():
            restated = at_most_unless_empty(
                terms, room.capacity.get(resource, 0) - room.fixed.get(resource, 0), v.upper
            )
            if restated is None:
                continue  # every amount is zero: the type never holds the node
            small, cap = restated
            checked(
                small,
                too_large(problem.snapshot.source, room.node.name, resource, f"{resource} amounts"),
                extra=cap,
                bound=v.upper,
            )
            v.model.add(_weighted(small) + cap * empty <= cap)


def move_limits(problem: Problem, v: Variables) -> None:
    """maxMoves in total, per source node and per namespace."""
    limits = problem.limits
    if limits.total is not None:
        v.model.add(cpsat.total(list(v.out.values())) <= limits.total)
    if limits.per_node is not None:
        by_node: dict[int, list[IntVar]] = defaultdict(list)
        for (_, node), var in v.out.items():
            by_node[node].append(var)
        for terms in by_node.values():
            v.model.add(cpsat.total(terms) <= limits.per_node)
    if limits.per_namespace is not None:
        by_ns: dict[str, list[IntVar]] = defaultdict(list)
        for (t, _), var in v.out.items():
            by_ns[problem.types[t].namespace].append(var)
        for terms in by_ns.values():
            v.model.add(cpsat.total(terms) <= limits.per_namespace)


def min_gain(problem: Problem, v: Variables) -> None:
    """The net freed GPUs must reach ``minGainPerMove`` per move (in hundredths, to stay integral)."""
    per_move = problem.limits.gain_per_move
    if per_move <= 0:
        return
    # 100 x (freed GPUs - GPUs free before) >= per_move x moves
    terms = [(var, 100 * gpus) for var, gpus in freed_gpu_terms(problem, v)] + [
        (var, -per_move) for var in v.out.values()
    ]
    before = 100 * problem.empty_before_gpus
    v.model.add(
        _weighted(checked(terms, _gpus_too_large(problem, "GPU count (minGainPerMove)"), extra=before, bound=v.upper))
        >= before
    )


def _gpus_too_large(problem: Problem, what: str) -> Callable[[int], ModelRangeError]:
    """The refusal when GPU counts overflow an objective: names the node that counts the most GPUs."""
    most = max(problem.nodes, key=lambda s: (s.gpus, s.free_gpus_before))
    return too_large(
        problem.snapshot.source, most.node.name, "status.allocatable", f"{what} ({most.gpus} GPUs on this node)"
    )


def freed_gpu_terms(problem: Problem, v: Variables) -> LinearTerms:
    return [(var, problem.nodes[n].gpus) for n, var in v.empty.items()]


def freed_gpus(problem: Problem, v: Variables) -> LinearExprT:
    """Physical GPUs on GPU nodes that run no GPU pod after the plan (before-free nodes included)."""
    terms = checked(freed_gpu_terms(problem, v), _gpus_too_large(problem, "GPU count"), bound=v.upper)
    return _weighted(terms) if terms else 0


def pending_placed(problem: Problem, v: Variables) -> LinearExprT:
    terms = [(var, problem.types[t].weight) for (t, _), var in v.placed.items()]
    return _weighted(terms) if terms else 0


def headroom_gain(problem: Problem, v: Variables) -> LinearExprT:
    """Shape mode: copies of each target shape that fit after the plan (summed over nodes)."""
    if not v.headroom:
        return 0
    refuse = too_large(problem.snapshot.source, None, "", "shape headroom (copies of the target shapes that fit)")
    return _weighted(checked([(var, 1) for var in v.headroom.values()], refuse, bound=v.upper))


def move_cost(problem: Problem, v: Variables) -> LinearExprT:
    """Each move costs its type's cost; arriving on a node with spare GPUs costs a little more (prefer full targets)."""
    terms = checked(move_cost_terms(problem, v), move_costs_too_large(problem), bound=v.upper)
    return _weighted(terms) if terms else 0


def move_costs_too_large(problem: Problem) -> Callable[[int], ModelRangeError]:
    return too_large(
        problem.snapshot.source,
        None,
        "",
        "move costs (aims.move_cost settings, compactor.io/move-cost, spare GPUs of the targets)",
    )


def move_cost_terms(problem: Problem, v: Variables) -> LinearTerms:
    terms: LinearTerms = [(var, problem.types[t].cost) for (t, _), var in v.out.items()]
    weight = problem.settings.aims.move_cost.prefer_full_targets
    if weight:
        # Pods arriving where none of their type was: the final count is the arrivals.
        for (t, n), var in v.final.items():
            spare = round(problem.nodes[n].free_gpus_before)
            if spare and n not in problem.types[t].initial:
                terms.append((var, weight * spare))
    return terms


def add_headroom_vars(problem: Problem, v: Variables) -> None:
    for s, shape in enumerate(problem.target_shapes):
        for state in problem.nodes:
            if not state.is_target_pool:
                continue
            room = [
                (state.capacity.get(r, 0) - state.fixed.get(r, 0)) // amount for r, amount in shape.items() if amount
            ]
            upper = max(0, min(room)) if room else 0
            if upper > REACH_LIMIT:
                raise too_large(problem.snapshot.source, state.node.name, "shape headroom", "copies of a target shape")(
                    upper
                )
            if upper:
                v.headroom[s, state.index] = v.new_int_var(0, upper, f"head_{s}_{state.index}")


ALL_CONSTRAINTS = (conservation, capacity, one_eviction_at_a_time, sinks, emptiness, move_limits, min_gain)

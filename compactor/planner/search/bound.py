"""An upper bound on the GPUs any plan can leave whole-free, valid for the whole cluster.

The CP-SAT model works on a narrowed problem at scale (``max_targets_per_type``
targets per pod type, ``max_candidate_pods`` movable pods): its proven bound says
nothing about plans outside that restriction. This bound relaxes the whole problem
instead: a node can end whole-free only if no unmovable GPU pod holds it, and the GPU
pods of each group of nodes they can reach (the nodes their types may start on or go
to) must fit, per GPU resource, on the nodes of the group left non-free. Choosing the
free nodes is then a small knapsack (one item per node, one constraint per group and
GPU resource), solved with CP-SAT; its proven bound is valid even if the solve stops
early. CPU, memory and placement rules are relaxed away: the bound may be loose,
never wrong.

Imports: CP-SAT through ``cpsat`` (never ``ortools`` itself), ``int64``, the problem, the deadline.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import TYPE_CHECKING

from compactor.model.resources import is_gpu_resource
from compactor.planner import cpsat
from compactor.planner.cpsat.deadline import Deadline
from compactor.planner.cpsat.int64 import at_most, checked, too_large
from compactor.planner.problem import NodeState, PodType, Problem, gpu_pools, holds_gpu_load

if TYPE_CHECKING:
    from compactor.planner.cpsat import IntVar

BOUND_SECONDS = 1.0


def whole_free_bound(problem: Problem, *, all_pending_placed: bool, deadline: Deadline | None = None) -> int:
    """An upper bound on the GPUs of nodes left with no GPU pod (``empty_nodes``), over every plan of the unrestricted
    ``problem``. Pending pods count as load only when every one must be placed (the pending level placed them all); each
    is placed in one group of the nodes it may go to (pending pods may cross pools, which keep movable pods apart: were
    they to link the pools, each pool's unusable scraps would add up to room for one more node)."""
    group = gpu_pools(problem)  # GPU load stays within its group
    candidates = [s for s in problem.nodes if s.gpus and s.can_empty and not holds_gpu_load(s.fixed)]
    if not candidates:
        return 0
    spare: dict[tuple[int, str], int] = defaultdict(int)  # (group, GPU resource) -> capacity minus every GPU load
    for state in problem.nodes:
        for resource, amount in state.capacity.items():
            if is_gpu_resource(resource):
                spare[group[state.index], resource] += amount - state.fixed.get(resource, 0)
    for ptype in problem.types:
        if ptype.pending:
            continue
        nodes = (*ptype.initial, *ptype.targets)
        if not nodes:
            continue
        for resource, amount in ptype.requests.items():
            if is_gpu_resource(resource):
                spare[group[nodes[0]], resource] -= amount * ptype.count
    pending = [t for t in problem.types if t.pending and t.uses_gpu and t.targets] if all_pending_placed else []
    deadline = deadline or Deadline(BOUND_SECONDS, workers=1)
    return _knapsack(problem, candidates, group, spare, pending, deadline.until(BOUND_SECONDS))


def _knapsack(
    problem: Problem,
    candidates: list[NodeState],
    group: list[int],
    spare: dict[tuple[int, str], int],
    pending: list[PodType],
    deadline: Deadline,
) -> int:
    model = cpsat.new_model()
    chosen = {s.index: model.new_bool_var(f"free_{s.index}") for s in candidates}
    terms: dict[tuple[int, str], list[tuple[IntVar, int]]] = defaultdict(list)
    for state in candidates:
        for resource, amount in state.capacity.items():
            if is_gpu_resource(resource) and amount:
                terms[group[state.index], resource].append((chosen[state.index], amount))
    for ptype in pending:  # every pod placed, each in one group its targets reach
        into = {
            g: model.new_int_var(0, ptype.count, f"pending_{ptype.index}_{g}")
            for g in sorted({group[n] for n in ptype.targets})
        }
        model.add(cpsat.total(list(into.values())) == ptype.count)
        for resource, amount in ptype.items:
            if is_gpu_resource(resource):
                for g, var in into.items():
                    terms[g, resource].append((var, amount))
    for key, items in terms.items():
        resource = key[1]
        restated = at_most(items, max(0, spare.get(key, 0)))  # small numbers, the same solutions
        if restated is not None:
            small, room = restated
            checked(small, too_large(problem.snapshot.source, None, resource, f"{resource} amounts"))
            model.add(cpsat.weighted_sum([v for v, _ in small], [a for _, a in small]) <= room)
    gpus = checked(
        [(var, problem.nodes[n].gpus) for n, var in chosen.items()],
        too_large(problem.snapshot.source, None, "status.allocatable", "GPU counts"),
    )
    model.maximize(cpsat.weighted_sum([v for v, _ in gpus], [g for _, g in gpus]))
    solved = cpsat.solve(model, deadline, max(0.05, deadline.remaining()), workers=1)  # small: one worker
    if solved.optimal:
        return round(solved.objective)
    if math.isfinite(solved.bound):
        return math.floor(solved.bound + 1e-6)
    return sum(s.gpus for s in candidates)

"""Baselines the planner is measured against (benchmarks/bench_planner.py).

- ``high_node_utilization``: descheduler's HighNodeUtilization. Every movable pod on
  an under-utilised node is evicted (the node is *not* cordoned), then re-placed by a
  default-scheduler simulation scoring either LeastAllocated (the default) or
  MostAllocated (the bin-packing profile the descheduler docs pair it with).
- ``greedy_drain``: cluster-autoscaler style scale-down. Repeatedly drain the
  least-used GPU node if all its GPU pods fit elsewhere (never onto a drained node).
- ``chain_placement``: pending pods only, by evictions and one-hop chains, first fit (issue 17's heuristic: on GPU
  nodes crowded by pods without GPUs, what a simple constructive method places).

All return the same ``BaselineResult`` figures the planner reports.

Imports: the problem, greedy, the loads, the objective's ``Assignment``, eligibility, solution, ``compactor.model``, ``compactor.settings``; no solver.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from compactor.model.resources import CPU, MEMORY, is_gpu_resource
from compactor.model.shapes import shapes_in_use
from compactor.model.types import Pod, Snapshot
from compactor.planner.objective import Assignment
from compactor.planner.problem import Problem, build_problem, gpu_pods_before
from compactor.planner.rules.eligibility import TargetRules
from compactor.planner.rules.move_limits import NO_MOVE_LIMITS
from compactor.planner.search.greedy import greedy
from compactor.planner.search.loads import first_fit
from compactor.planner.solution import concretise, gpu_nodes_changed, usable_freed
from compactor.planner.usable import usage_shapes
from compactor.settings.bundles import PlannerSettings


@dataclass(frozen=True)
class BaselineResult:
    name: str
    moves: int
    freed_nodes: tuple[str, ...]
    filled_nodes: tuple[str, ...]
    freed_gpus: int
    pending_placed: int = 0
    usable_gpus: int | None = None  # of freed_gpus, those a request shape in use can take (``usable.py``)


def greedy_drain(snapshot: Snapshot, settings: PlannerSettings) -> BaselineResult:
    problem = build_problem(snapshot, _unbounded(settings), max_targets=len(snapshot.nodes))
    assignment = greedy(problem, chains=False)  # cluster-autoscaler moves a pod only where it fits as it is
    return _result("greedy-drain", problem, assignment)


def warm_start(snapshot: Snapshot, settings: PlannerSettings) -> BaselineResult:
    """The planner's own greedy warm start (pending pods placed with chains, then drains) within the settings' move
    limits: what a plan never does worse than (the capped benchmarks compare with it)."""
    problem = build_problem(snapshot, settings.amended(max_candidate_pods=10**9), max_targets=len(snapshot.nodes))
    return _result("warm-start", problem, greedy(problem))


def chain_placement(snapshot: Snapshot, settings: PlannerSettings) -> BaselineResult:
    """Place pending pods only: for each, make room on the node that needs the fewest evictions (GPU pods and pods
    without GPUs alike), re-place every evicted pod first fit, and where a displaced GPU pod finds free GPUs but not the
    CPU or memory to go with them, first move pods without GPUs off that node (a chain of one hop: ``chains.py``)."""
    problem = build_problem(snapshot, _unbounded(settings), max_targets=len(snapshot.nodes))
    return _result("chain-placement", problem, greedy(problem, drain=False, fit=first_fit))


def _result(name: str, problem: Problem, assignment: Assignment) -> BaselineResult:
    freed_set = {s.index for s in problem.nodes if s.gpus}
    moves, placements = concretise(problem, assignment, freed_set)
    freed, filled = gpu_nodes_changed(problem, moves, placements)
    judged = replace(
        problem, usage_shapes=usage_shapes(problem, [s.requests for s in shapes_in_use(problem.snapshot.pods)])
    )
    return BaselineResult(
        name,
        len(moves),
        tuple(problem.nodes[i].node.name for i in freed),
        tuple(problem.nodes[i].node.name for i in filled),
        sum(problem.nodes[i].gpus for i in freed) - sum(problem.nodes[i].gpus for i in filled),
        len(placements),
        usable_freed(judged, moves, placements),
    )


def _unbounded(settings: PlannerSettings) -> PlannerSettings:
    """Baselines see every node and pod, and no move limit: no model-size limit (``max_candidate_pods``) applies to them, nor the planner's
    move limits (which ``greedy`` keeps as the planner's warm start)."""
    return settings.amended(max_candidate_pods=10**9, **NO_MOVE_LIMITS)


def _scored_resources(pod: Pod) -> list[str]:
    return [CPU, MEMORY, *[r for r in pod.requests if is_gpu_resource(r)]]


def high_node_utilization(
    snapshot: Snapshot, settings: PlannerSettings, *, scoring: str = "LeastAllocated", threshold: float = 0.5
) -> BaselineResult:
    """Evict movable GPU pods from GPU nodes whose GPU utilisation is under ``threshold``, then re-schedule them."""
    problem = build_problem(snapshot, _unbounded(settings), max_targets=len(snapshot.nodes))
    loads = _loads(problem)
    evicted = _evicted_from_underused(problem, loads, threshold)
    moves = 0
    after_gpu_pods = gpu_pods_before(problem)
    for pod, source, requests in evicted:
        target = _schedule(problem, loads, pod, requests, scoring)
        target = source if target is None else target
        for r, v in requests.items():
            loads[target][r] = loads[target].get(r, 0) + v
        if target != source:
            moves += 1
            after_gpu_pods[source] -= 1
            after_gpu_pods[target] += 1
    before_pods = gpu_pods_before(problem)
    freed = [s for s in problem.nodes if s.gpus and before_pods[s.index] > 0 and after_gpu_pods[s.index] == 0]
    filled = [s for s in problem.nodes if s.gpus and before_pods[s.index] == 0 and after_gpu_pods[s.index] > 0]
    return BaselineResult(
        f"descheduler-HighNodeUtilization/{scoring}",
        moves,
        tuple(s.node.name for s in freed),
        tuple(s.node.name for s in filled),
        sum(s.gpus for s in freed) - sum(s.gpus for s in filled),
    )


def _loads(problem: Problem) -> list[dict[str, int]]:
    """Each node's requested resources: its fixed load and its movable pods'."""
    loads = [dict(s.fixed) for s in problem.nodes]
    for ptype in problem.types:
        for node, pods in ptype.initial.items():
            for r, v in ptype.requests.items():
                loads[node][r] = loads[node].get(r, 0) + v * len(pods)
    return loads


def _evicted_from_underused(
    problem: Problem, loads: list[dict[str, int]], threshold: float
) -> list[tuple[Pod, int, dict[str, int]]]:
    """The movable GPU pods of every GPU node under ``threshold`` GPU utilisation, taken off ``loads``: (pod, its node,
    its requests), as the descheduler's HighNodeUtilization evicts them."""
    before_gpu = [sum(v for r, v in load.items() if is_gpu_resource(r)) for load in loads]
    evicted: list[tuple[Pod, int, dict[str, int]]] = []
    for state in problem.nodes:
        alloc = sum(v for r, v in state.node.allocatable.items() if is_gpu_resource(r))
        if not state.gpus or alloc == 0 or before_gpu[state.index] / alloc >= threshold:
            continue
        for ptype in problem.types:
            if ptype.uses_gpu and not ptype.pending:
                for pod in ptype.initial.get(state.index, []):
                    evicted.append((pod, state.index, dict(ptype.requests)))
                    for r, v in ptype.requests.items():
                        loads[state.index][r] -= v
    return evicted


def _schedule(
    problem: Problem, loads: list[dict[str, int]], pod: Pod, requests: dict[str, int], scoring: str
) -> int | None:
    """kube-scheduler's NodeResourcesFit scoring (equal weights) over feasible nodes."""
    best: tuple[float, str] | None = None
    chosen: int | None = None
    for state in problem.nodes:
        load = loads[state.index]
        if not state.is_target_pool or not all(
            load.get(r, 0) + v <= state.capacity.get(r, 0) for r, v in requests.items()
        ):
            continue
        if (problem.rules or TargetRules(problem.snapshot)).why_not(pod, state.node) is not None:
            continue
        fractions = []
        for r in _scored_resources(pod):
            cap = state.node.allocatable.get(r, 0)
            if cap:
                used = (load.get(r, 0) + requests.get(r, 0)) / cap
                fractions.append(1 - used if scoring == "LeastAllocated" else used)
        score = sum(fractions) / len(fractions) if fractions else 0.0
        key = (-score, state.node.name)
        if best is None or key < best:
            best, chosen = key, state.index
    return chosen

"""Why a pending GPU pod stays pending after the plan: the one sentence a user needs to act on it.

Imports: ``compactor.model``, the problem, movability, and from the figures what CPU-only pods hold on GPU nodes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence

from compactor.model.cpu_only_pods import cpu_pods_hold
from compactor.model.quantity import format_amount
from compactor.model.resources import is_gpu_resource, is_mig_resource
from compactor.model.types import Pod
from compactor.planner.problem import NodeState, PodType, Problem
from compactor.planner.rules.movability import Unmovable, pdbs_by_pod

FreeAfter = Mapping[str, Mapping[str, int]]  # node name -> its free resources once the plan is carried out
# GPU node name -> what its CPU-only pods request once the plan is carried out
HeldAfter = Mapping[str, Mapping[str, int]]


def left_pending(
    problem: Problem,
    placed: Collection[str],
    free_after: FreeAfter | None = None,
    cpu_pods_after: HeldAfter | None = None,
) -> dict[str, str]:
    """Pending GPU pod -> why the plan does not place it, for every one it does not place (``free_after``: what each
    node has free after the plan, to name the resource that is short; ``cpu_pods_after``: what CPU-only pods hold on
    each GPU node after the plan, ``model.cpu_pods.held_by_node``, to say when they hold it)."""
    reasons = dict(problem.not_placeable)
    blocked = _pdb_blocked_load(problem)
    for ptype in problem.types:
        if not ptype.pending:
            continue
        for pod in ptype.pending_pods:
            if pod.key not in placed:
                reasons[pod.key] = _why_unplaced(problem, ptype, pod, blocked, free_after or {}, cpu_pods_after or {})
    return dict(sorted(reasons.items()))


def _short_after(ptype: PodType, receivers: Sequence[NodeState], free_after: FreeAfter, held_after: HeldAfter) -> str:
    """What the eligible nodes lack after the plan (per resource, on how many of them), and the node closest to taking
    the pod (fewest resources short, then the smallest shortfall) with what it has and needs: what to add or free."""
    short: Counter[str] = Counter()
    closest: tuple[int, float, str, list[str]] | None = None
    for state in receivers:
        free = free_after.get(state.node.name)
        if free is None:
            continue
        lacking = [r for r, v in ptype.items if free.get(r, 0) < v]
        short.update(lacking)
        shortfall = sum((v - free.get(r, 0)) / v for r, v in ptype.items if free.get(r, 0) < v)
        if lacking and (closest is None or (len(lacking), shortfall, state.node.name) < closest[:3]):
            closest = (len(lacking), shortfall, state.node.name, lacking)
    if closest is None:
        return ""
    counts = ", ".join(f"{r} on {short[r]}" for r in sorted(short, key=lambda r: (-short[r], r)))
    node = next(s.node for s in receivers if s.node.name == closest[2])
    free = free_after[node.name]
    has = ", ".join(
        f"{format_amount(r, max(0, free.get(r, 0)))} {r} free, needs {format_amount(r, ptype.requests[r])}"
        for r in closest[3]
    )
    return (
        f"; after the plan, of {len(receivers)} eligible node(s) {counts} lack room (closest: {node.name}, pool "
        f"{node.pool}: {has}){_cpu_pods_there(ptype, receivers, free_after, held_after)}"
    )


def _cpu_pods_there(ptype: PodType, receivers: Sequence[NodeState], free_after: FreeAfter, held: HeldAfter) -> str:
    """What CPU-only pods hold of the short CPU, memory or pod slots on the eligible nodes that have the pod's GPUs
    free, when without them it would fit one: the room a taint on GPU nodes would give back."""
    gpus_free = {
        s.node.name: free_after[s.node.name]
        for s in receivers
        if s.node.name in free_after
        and all(free_after[s.node.name].get(r, 0) >= v for r, v in ptype.items if is_gpu_resource(r))
    }
    hold = cpu_pods_hold(held, gpus_free, ptype.requests)
    return f"; on the {len(gpus_free)} with its GPUs free, CPU-only pods hold {hold}" if hold else ""


def _why_unplaced(
    problem: Problem,
    ptype: PodType,
    pod: Pod,
    blocked: Mapping[int, tuple[dict[str, int], str]],
    free_after: FreeAfter,
    held_after: HeldAfter,
) -> str:
    missing = [
        r for r in ptype.requests if is_gpu_resource(r) and not any(s.node.allocatable.get(r, 0) for s in problem.nodes)
    ]
    if missing:
        hint = " (a MIG re-cut could: compactor plan --explain-mig)" if any(is_mig_resource(r) for r in missing) else ""
        return f"no node offers {', '.join(missing)}{hint}"
    receivers = [s for s in problem.nodes if _eligible(problem, pod, s)]
    if not receivers:
        return "no node passes its filters (taints, nodeSelector, affinity, volumes, readiness)"
    roomy = [s for s in receivers if _fits(ptype.requests, s, s.fixed)]
    if roomy:
        names = ", ".join(s.node.name for s in roomy[:3])
        limits = problem.limits
        limit = (
            limits.cap_words
            if limits.total is not None
            else "not within the move limits, or the room went to pending pods placed first"
        )
        return f"room could be made on {names} by moving pods, but {limit}{_short_after(ptype, receivers, free_after, held_after)}"
    for state in receivers:
        load, pdb = blocked.get(state.index, ({}, ""))
        if pdb and _fits(ptype.requests, state, load):
            return f"fits on {state.node.name} only if pods protected by PodDisruptionBudget {pdb} (no disruption allowed) moved"
    return "no node fits it even after every pod that may move has left"


def _eligible(problem: Problem, pod: Pod, state: NodeState) -> bool:
    return problem.rules is not None and state.is_target_pool and problem.rules.why_not(pod, state.node) is None


def _fits(requests: Mapping[str, int], state: NodeState, load: Mapping[str, int]) -> bool:
    return all(load.get(r, 0) + v <= state.capacity.get(r, 0) for r, v in requests.items())


def _pdb_blocked_load(problem: Problem) -> dict[int, tuple[dict[str, int], str]]:
    """Node -> (its fixed load without the pods a PDB keeps in place, that PDB), on nodes holding such pods."""
    blocked = {key for key, why in problem.unmovable.items() if why is Unmovable.PDB_BLOCKS}
    if not blocked:
        return {}
    pods = [p for p in problem.snapshot.pods if p.key in blocked]
    covering = pdbs_by_pod(pods, problem.snapshot.pdbs)
    index = {s.node.name: s.index for s in problem.nodes}
    result: dict[int, tuple[dict[str, int], str]] = {}
    for pod in pods:
        node = index.get(pod.node_name)
        if node is None:
            continue
        load, _ = result.setdefault(node, (dict(problem.nodes[node].fixed), covering[pod.key][0].key))
        for r, v in pod.requests.items():
            load[r] = load.get(r, 0) - v
    return result

"""Validate: the plan was computed on a snapshot; check it against the cluster now, before any change (Karpenter's habit).

The executor runs ``plan_still_holds`` first of all; ``await_replacement`` asks ``no_strangers_on`` again once the last
move off a fenced node is done.
"""

from __future__ import annotations

from compactor.actions.pods import gpu_pods, gpu_pods_on, pod_key
from compactor.actions.run import Abort, AbortReason, Run
from compactor.planner.plan import CompactionPlan


def plan_nodes(plan: CompactionPlan) -> set[str]:
    return {
        *plan.freed_nodes,
        *(m.from_node for m in plan.moves),
        *(m.to_node for m in plan.moves),
        *(p.to_node for p in plan.placed_pending),
    }


def plan_belongs_here(run: Run) -> None:
    """A plan none of whose nodes exist was made for another cluster: say so, not "stale" (nothing changed yet). Asked
    only once a node the plan frees is missing; the scan keeps just the names the plan uses."""
    named = plan_nodes(run.plan)
    if not named:
        return
    here = run.client.scan_nodes(lambda n: n["metadata"]["name"] if n["metadata"]["name"] in named else None)
    if not here:
        sample = ", ".join(sorted(named)[:3]) + (", ..." if len(named) > 3 else "")
        raise Abort(
            AbortReason.PLAN_STALE,
            f"plan {run.plan.metadata.id} was made for another cluster ({run.plan.metadata.source}): none of its "
            f"{len(named)} node(s) exist here ({sample})",
        )


def plan_still_holds(run: Run) -> None:
    """Every node the plan frees still exists and runs no GPU pod the plan does not move; else ``Abort`` (nothing changed yet)."""
    for name in run.plan.freed_nodes:
        node, pods = run.node_and_pods(name)
        if node is None:
            plan_belongs_here(run)
            raise Abort(AbortReason.PLAN_STALE, f"plan is stale: node {name} no longer exists")
        run.log.first_reads[name] = (node, [])  # the node read again would be the same: fencing takes it from here
        planned = {m.pod for m in run.plan.moves if m.from_node == name}
        strangers = [key for p in gpu_pods(pods) if (key := pod_key(p)) not in planned and key not in run.state.done]
        if strangers:
            raise Abort(
                AbortReason.PLAN_STALE,
                f"plan is stale: node {name} now runs GPU pod(s) the plan does not move: {', '.join(strangers[:3])}"
                f"{_mismatch(run.plan, name, {pod_key(p) for p in pods}, strangers)}",
            )


def _mismatch(plan: CompactionPlan, name: str, there: set[str], strangers: list[str]) -> str:
    """Why the plan and the node disagree, when the plan itself says: it moves a stranger from another node, or names pods
    on this node that are not there (a plan edited by hand, or made on another snapshot)."""
    elsewhere = [f"{m.pod} from {m.from_node}" for m in plan.moves if m.pod in strangers and m.from_node != name]
    if elsewhere:
        return f" (the plan moves {', '.join(elsewhere[:2])}: the plan does not match the cluster)"
    absent = [m.pod for m in plan.moves if m.from_node == name and m.pod not in there]
    if absent:
        return f" (the plan names {', '.join(absent[:2])} there instead, which is not: the plan does not match the cluster)"
    return ""


def no_strangers_on(run: Run, nodes: list[str]) -> None:
    """A GPU pod the plan does not move appearing on a source the run fenced (cordoned by an operator or not) defeats the
    plan."""
    planned = {m.pod for m in run.plan.moves}
    for name in nodes:
        for pod in gpu_pods_on(run.client, name):
            if pod_key(pod) not in planned:
                raise Abort(AbortReason.PLAN_STALE, f"new GPU pod {pod_key(pod)} appeared on fenced node {name}")

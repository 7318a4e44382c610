"""Validate: the plan was computed on a snapshot; check it against the cluster now, before any eviction (Karpenter's
habit).

The executor asks ``plan_still_holds`` of the nodes as the run read them when it began, before it changes anything,
then fences them and asks again of the nodes as they are behind their fences: nothing can land on them after that look
(but a pod tolerating the fence), so a pod bound while the fences went up is found before the first eviction, not after. A node
the plan frees must run no GPU pod the plan does not move; a node it drains for a pending pod must still have room for
that pod once the plan's moves off it are done (the pods the plan leaves there are meant to stay). ``await_replacement``
asks the same of a node again once its last move is done (``no_strangers_on``, ``pending_room_on``).
"""

from __future__ import annotations

from compactor.actions.cluster.live_pods import gpu_pods, gpu_pods_on, is_terminating, pod_key
from compactor.actions.port.client import Obj
from compactor.actions.port.objects import PodView
from compactor.actions.run.context import Abort, AbortReason, Run
from compactor.actions.steering.room import room_for
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


def plan_still_holds(run: Run, *, fenced: bool) -> None:
    """Every node the plan frees runs no GPU pod the plan does not move, and every node it drains for a pending pod will
    have room for it; else ``Abort`` (no pod evicted yet). Asked before the fences (``fenced`` False) of the nodes as the
    run read them when it began (a plan for another cluster, or edited by hand, is named before anything changes; the
    reads stay for fencing), and again behind them, each node read afresh."""
    for name in run.plan.freed_nodes:
        node, pods = _read(run, name, keep=not fenced)
        if node is None:
            plan_belongs_here(run)
            raise Abort(AbortReason.PLAN_STALE, f"plan is stale: node {name} no longer exists")
        planned = {m.pod for m in run.plan.moves if m.from_node == name}
        strangers = [key for p in gpu_pods(pods) if (key := pod_key(p)) not in planned and key not in run.state.done]
        if strangers:
            raise Abort(
                AbortReason.PLAN_STALE,
                f"plan is stale: node {name} now runs GPU pod(s) the plan does not move: {', '.join(strangers[:3])}"
                f"{_mismatch(run.plan, name, {pod_key(p) for p in pods}, strangers)}",
            )
    for name in run.fences:
        if short := pending_room_on(run, name, keep=not fenced):
            raise Abort(AbortReason.PLAN_STALE, f"plan is stale: {short}")


def _read(run: Run, name: str, *, keep: bool) -> tuple[Obj | None, list[Obj]]:
    """The node and its pods (``Run.node_and_pods``); ``keep``: as read when the run began, left there for fencing."""
    node, pods = run.node_and_pods(name)
    if keep and node is not None:
        run.log.first_reads[name] = (node, pods)
    return node, pods


def pending_room_on(run: Run, name: str, *, keep: bool = False) -> str:
    """Whether the pending pods the plan places on ``name`` (a node it drains for them) still wait and fit there once the
    plan's moves off it are done: "" when they do, else why not. Pods the plan leaves on the node stay and count."""
    placements = [p for p in run.plan.placed_pending if p.to_node == name]
    if not placements or name in {r.node for r in run.plan.mig_repartition}:
        return ""  # a node to re-cut offers the pending pod's slices only once mig-manager is done: judged then
    node, pods = _read(run, name, keep=keep)
    if node is None:
        return f"node {name} no longer exists"
    leaving = {m.pod for m in run.plan.moves if m.from_node == name}
    there = [p for p in pods if pod_key(p) not in leaving]
    for placement in placements:
        namespace, pod_name = placement.pod.split("/", 1)
        pending = run.client.get_pod(namespace, pod_name)
        if pending is None or is_terminating(pending):
            return f"pending pod {placement.pod} is gone"
        bound = PodView(pending).node_name
        if bound and bound != name:
            return f"pending pod {placement.pod} was bound to {bound} meanwhile"
        if bound:
            continue  # already there (a resumed run)
        room = room_for(node, there, pending, target=name, dra=run.log.dra_nodes)
        if not room.fits:
            lacking = ", ".join(f"{r} {v}" for r, v in sorted(room.short.items()))
            return f"{name} would have no room for pending pod {placement.pod} (short of {lacking}): {_newcomers(run, there)}"
        there = [
            *there,
            {**pending, "spec": {**PodView(pending).spec, "nodeName": name}},
        ]  # the next one fits beside it
    return ""


def _newcomers(run: Run, pods: list[Obj]) -> str:
    """The GPU pods on a drained node that the plan neither moves nor knew of (a pod bound while it was made)."""
    known = {m.pod for m in run.plan.moves}
    found = [key for p in gpu_pods(pods) if (key := pod_key(p)) not in known]
    return f"it now runs {', '.join(found[:3])}" if found else "its pods grew"


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

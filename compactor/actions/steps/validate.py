"""Validate: the plan was computed on a snapshot; check it against the cluster now, before any change (Karpenter's habit)."""

from __future__ import annotations

from compactor.actions.pods import gpu_pods, gpu_pods_on, pod_key
from compactor.actions.run import Abort, Run


def plan_still_holds(run: Run) -> None:
    """Every node the plan frees still exists and runs no GPU pod the plan does not move; else ``Abort`` (nothing changed yet)."""
    for name in run.plan.freed_nodes:
        node, pods = run.node_and_pods(name)
        if node is None:
            raise Abort(f"plan is stale: node {name} no longer exists")
        run.first_reads[name] = (node, [])  # the node read again would be the same: fencing takes it from here
        planned = {m.pod for m in run.plan.moves if m.from_node == name}
        strangers = [key for p in gpu_pods(pods) if (key := pod_key(p)) not in planned and key not in run.state.done]
        if strangers:
            raise Abort(f"plan is stale: node {name} now runs GPU pod(s) the plan does not move: {', '.join(strangers[:3])}")


def no_strangers_on(run: Run, nodes: list[str]) -> None:
    """A GPU pod the plan does not move appearing on a fenced source (ours or someone else's cordon) defeats the plan."""
    planned = {m.pod for m in run.plan.moves}
    for name in nodes:
        for pod in gpu_pods_on(run.client, name):
            if pod_key(pod) not in planned:
                raise Abort(f"new GPU pod {pod_key(pod)} appeared on cordoned node {name}")

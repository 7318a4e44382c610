"""CPU-only pods on GPU nodes: which they are, what they hold per node, and what of a pod's lack they hold.

Pure; the figures (``compactor.metrics``: ``docs/metrics.md``, "CPU-only pods on GPU nodes") and the planner's reasons
for pending pods both read them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from compactor.model.pod_facts import TERMINATED_PHASES  # as Pod.is_bound, inlined for the 50k-pod loop
from compactor.model.quantity import format_amount
from compactor.model.resources import is_gpu_resource
from compactor.model.shapes import label_order
from compactor.model.types import Pod, Snapshot

# Owners whose pods belong on every node (a GPU taint would not, and should not, keep them off): the GPU operator's
# device plugin and exporters, kube-proxy, log agents; a kind "Node" owner marks a static (mirror) pod.
_EVERY_NODE_OWNERS = ("DaemonSet", "Node")


def cpu_pods_on_gpu_nodes(snapshot: Snapshot) -> tuple[Pod, ...]:
    """Bound pods that request no GPU resource yet run on a GPU node, DaemonSet and static pods aside: the pods whose
    CPU, memory and pod slots GPU pods could otherwise use there (``docs/metrics.md``, "CPU-only pods on GPU nodes")."""
    gpu_nodes = {n.name for n in snapshot.nodes if n.is_gpu_node}
    uses_gpu: dict[int, bool] = {}  # per requests object: replicas share one
    found = []
    for pod in snapshot.pods:
        if pod.node_name not in gpu_nodes or pod.phase in TERMINATED_PHASES:
            continue
        ident = id(pod.requests)
        if ident not in uses_gpu:
            uses_gpu[ident] = any(is_gpu_resource(r) for r in pod.requests)
        if not uses_gpu[ident] and not any(o.kind in _EVERY_NODE_OWNERS for o in pod.owners):
            found.append(pod)
    return tuple(found)


def held_by_node(pods: Iterable[Pod]) -> dict[str, dict[str, int]]:
    """Node name -> the summed requests of ``pods`` bound to it (``pods`` counts them)."""
    held: dict[str, dict[str, int]] = {}
    for pod in pods:
        acc = held.setdefault(pod.node_name, {})
        for key, value in pod.requests.items():
            acc[key] = acc.get(key, 0) + value
    return held


def cpu_pods_hold(
    held: Mapping[str, Mapping[str, int]], free: Mapping[str, Mapping[str, int]], requests: Mapping[str, int]
) -> str:
    """``40 cpu, 64Gi memory``: what CPU-only pods (``held``, per node) hold of what ``requests`` lacks on the nodes of
    ``free`` (node -> free resources), when without them ``requests`` would fit one of those nodes; "" otherwise, so a
    reason names them only where they are what keeps the pod out."""
    if not any(all(f.get(r, 0) + held.get(n, {}).get(r, 0) >= v for r, v in requests.items()) for n, f in free.items()):
        return ""
    short = {r for f in free.values() for r, v in requests.items() if f.get(r, 0) < v and not is_gpu_resource(r)}
    sums = {r: sum(held.get(n, {}).get(r, 0) for n in free) for r in sorted(short, key=label_order)}
    return ", ".join(f"{format_amount(r, v)} {r}" for r, v in sums.items() if v > 0)

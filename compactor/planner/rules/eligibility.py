"""Where a pod may go: every node-side rule kube-scheduler would apply, plus the plan's own.

The scheduler's filters (readiness, cordon, taints, nodeSelector, node affinity:
``model.scheduling``; existing pods' required anti-affinity: ``model.interpod``; the
node affinity of bound PersistentVolumes: ``model.volumes``), and the planner's rules:
no node labelled ``compactor.io/exclude=true``, no NoExecute taint tolerated only for a
while (the pod would be evicted again), and a GPU pod stays in its pool (GPU product)
unless ``movable.cross_pool_moves``. Host ports and resources are capacity, enforced
by the CP-SAT model for the whole plan.

Imports: ``compactor.model`` and movability only.
"""

from __future__ import annotations

from collections.abc import Hashable

from compactor.model.interpod import AntiAffinityIndex
from compactor.model.resources import is_gpu_resource
from compactor.model.scheduling import evicting_taint, why_ineligible
from compactor.model.types import Node, Pod, Snapshot
from compactor.model.volumes import VolumeIndex
from compactor.planner.rules.movability import EXCLUDE_LABEL

EXCLUDED = "node is labelled compactor.io/exclude=true"
EVICTING_TAINT = "node has a NoExecute taint the pod tolerates only for tolerationSeconds: it would be evicted again"
OTHER_POOL = "node is in another pool (GPU product); movable.cross_pool_moves allows it"
VOLUME = "a PersistentVolume of the pod cannot be attached there (its node affinity)"


def anti_affinity_reason(owner: str) -> str:
    return f"required anti-affinity of {owner} keeps the pod out of the node's topology domain"


class TargetRules:
    """The target rules for one snapshot; pods with equal ``signature`` have equal answers."""

    def __init__(self, snapshot: Snapshot, *, cross_pool: bool = False) -> None:
        self.nodes = snapshot.node_by_name()
        self.anti_affinity = AntiAffinityIndex(snapshot.pods, self.nodes)
        self.volumes = VolumeIndex(snapshot.claims, snapshot.volumes)
        self.cross_pool = cross_pool

    def pool(self, pod: Pod) -> str:
        """The pool a bound GPU pod must stay in ("" = any)."""
        if (
            self.cross_pool or not pod.is_bound or not any(is_gpu_resource(r) for r in pod.requests)
        ):  # Pod.uses_gpu, unbuilt
            return ""
        node = self.nodes.get(pod.node_name)
        return node.pool if node is not None else ""

    def signature(self, pod: Pod) -> Hashable:
        """What, beyond tolerations, selectors and node affinity, decides where the pod may go."""
        closed = frozenset(self.anti_affinity.closed(pod)) if self.anti_affinity.holders else frozenset()
        return self.pool(pod), closed, self.volumes.placement(pod) if pod.claims or pod.ephemeral_volumes else None

    def why_not(self, pod: Pod, node: Node) -> str | None:
        """The first rule that keeps ``pod`` off ``node``, or None when ``node`` may receive it."""
        if node.labels.get(EXCLUDE_LABEL) == "true":
            return EXCLUDED
        reason = why_ineligible(pod, node)
        if reason is not None:
            return reason.value
        if evicting_taint(pod.tolerations, node.taints) is not None:
            return EVICTING_TAINT
        pool = self.pool(pod)
        if pool and node.pool != pool:
            return OTHER_POOL
        if (pod.claims or pod.ephemeral_volumes) and not self.volumes.placement(pod).allows(node):
            return VOLUME
        owner = self.anti_affinity.blocker(pod, node) if self.anti_affinity.holders else None
        return anti_affinity_reason(owner) if owner else None

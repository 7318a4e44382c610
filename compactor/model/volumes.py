"""Where a pod's persistent volumes let it run: the node affinity of the PersistentVolumes its claims are bound to.

kube-scheduler's VolumeBinding filter admits a node only if every bound
PersistentVolume's ``spec.nodeAffinity.required`` matches it (local disks, zonal
block storage). A claim the snapshot does not show, or one not yet bound, leaves the
answer unknown; the planner then neither moves nor places the pod.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from compactor.model.scheduling import node_affinity_matches
from compactor.model.types import Claim, Node, NodeSelectorTerm, PersistentVolume, Pod


@dataclass(frozen=True)
class VolumePlacement:
    """Every bound volume's node terms (each must match), or why it is unknown."""

    terms: tuple[tuple[NodeSelectorTerm, ...], ...] = ()
    unknown: str = ""

    def allows(self, node: Node) -> bool:
        return not self.unknown and all(node_affinity_matches(terms, node) for terms in self.terms)


ANYWHERE = VolumePlacement()


class VolumeIndex:
    def __init__(self, claims: Iterable[Claim], volumes: Iterable[PersistentVolume]) -> None:
        self.claims = {claim.key: claim for claim in claims}
        self.volumes = {volume.name: volume for volume in volumes}

    def placement(self, pod: Pod) -> VolumePlacement:
        if pod.ephemeral_volumes:
            return VolumePlacement(
                unknown="uses a generic ephemeral volume: a new pod gets a new claim, provisioned where its "
                "StorageClass decides, which the planner does not model"
            )
        terms: list[tuple[NodeSelectorTerm, ...]] = []
        for name in pod.claims:
            claim = self.claims.get(f"{pod.namespace}/{name}")
            if claim is None:
                return VolumePlacement(
                    unknown=f"PersistentVolumeClaim {pod.namespace}/{name} is not in the snapshot "
                    "(include pv,pvc: kubectl get nodes,pods,pdb,pv,pvc -A -o json)"
                )
            if not claim.volume_name:
                return VolumePlacement(
                    unknown=f"PersistentVolumeClaim {claim.key} is not bound: its provisioner picks the node"
                )
            volume = self.volumes.get(claim.volume_name)
            if volume is None:
                return VolumePlacement(
                    unknown=f"PersistentVolume {claim.volume_name} (claim {claim.key}) is not in the snapshot"
                )
            if volume.node_terms is not None:
                terms.append(volume.node_terms)
        return VolumePlacement(tuple(terms)) if terms else ANYWHERE

"""What a run really did, measured from the live cluster with the plan's own definitions.

``freedGpus`` in a plan is the GPUs of the GPU nodes that run a GPU pod before and
none after, minus those of nodes that run none before and some after, each node
counting what ``Node.countable_gpus`` says (Ready, schedulable, the physical GPUs its
allocatable offers). Measured on the cluster, that is the change in *whole-free GPUs*:
the same count over GPU nodes with no bound, unfinished GPU pod (a terminating pod
still holds its node). A node the executor itself keeps fenced (``after_drain:
keepCordoned``) still counts. The run compares the two and says ``succeeded`` only
when they agree. In a dry run the figures come from the dry run's own copy of the
objects, changed as the run pretends to change them: ``simulated``, never measured.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from compactor.actions.port.client import ClusterClient, Obj
from compactor.actions.port.objects import ObjectView
from compactor.actions.steering.room import SOURCE
from compactor.model.dra import DriverMapping
from compactor.model.dra.inventory import read_inventory
from compactor.model.load import DEFAULT_POOL_LABEL, DRA_DRIVERS
from compactor.model.parse import parse_node, parse_pod


def node_gpus(raw: Obj, dra_gpus: Mapping[str, int] | None = None) -> tuple[str, int | None]:
    """The node's name and, for a GPU node, the GPUs freeing it is worth, as the planner counts them (None for any other
    node); ``dra_gpus``: node -> the GPUs its ResourceSlices publish (``dra_facts``). Our fence is a taint, which does not
    change that; an operator's cordon does, for the planner too."""
    node = parse_node(raw, source=SOURCE, pool_label=DEFAULT_POOL_LABEL, warnings=[])
    published = (dra_gpus or {}).get(node.name, 0)
    if not node.is_gpu_node and not published:
        return node.name, None
    available = node.ready and not node.unschedulable
    return node.name, (node.countable_gpus if node.is_gpu_node else 0) + (published if available else 0)


@dataclass(frozen=True)
class DraFacts:
    """What dynamic resource allocation adds to the count: each node's GPUs in complete pools (``compactor.model.dra``),
    and the nodes a claim holds a device of, which are never whole-free, whatever their pods say."""

    gpus: Mapping[str, int]
    busy: frozenset[str]


NO_DRA = DraFacts({}, frozenset())


def dra_facts(client: ClusterClient, drivers: Sequence[DriverMapping] = DRA_DRIVERS) -> DraFacts:
    """ResourceSlices and, when there are any, ResourceClaims, as ``client`` reads them now."""
    slices = client.list_dra("ResourceSlice")
    if not slices:
        return NO_DRA
    claims = client.list_dra("ResourceClaim")
    nodes = {str(ObjectView(s).spec.get("nodeName") or "") for s in slices}
    inventory = read_inventory([(SOURCE, o) for o in [*slices, *claims]], nodes, drivers, [], skip_undecodable=True)
    busy = {
        device.node
        for claim in inventory.claims.values()
        for result in claim.results
        if not result.admin and (device := inventory.devices.get((result.driver, result.pool, result.device)))
    }
    gpus = {node: len({d.gpu for d in devices}) for node, devices in inventory.by_node.items()}
    for node, partitions in inventory.partitions.items():  # each counter set one GPU
        gpus[node] = gpus.get(node, 0) + len(partitions.gpus)
    return DraFacts(gpus, frozenset(busy))


def pod_holds_node(raw: Obj) -> tuple[str, bool]:
    """The pod's node ('' when not bound) and whether the pod keeps it from being whole-free: a bound, unfinished GPU pod."""
    pod = parse_pod(raw, source=SOURCE)
    return pod.node_name, pod.is_bound and pod.uses_gpu


def whole_free(gpus: Mapping[str, int], busy: Collection[str]) -> dict[str, int]:
    """GPU node -> its physical GPUs, for every GPU node of ``gpus`` that is not ``busy``."""
    return {name: count for name, count in gpus.items() if name not in busy}


def physical_gpus(nodes: Iterable[Obj]) -> dict[str, int]:
    """GPU node -> the GPUs freeing it is worth (``node_gpus``)."""
    return {name: gpus for name, gpus in map(node_gpus, nodes) if gpus is not None}


def whole_free_gpu_nodes(nodes: Iterable[Obj], pods: Iterable[Obj]) -> dict[str, int]:
    """GPU node -> its physical GPUs, for every GPU node that runs no GPU pod."""
    return whole_free(physical_gpus(nodes), {node for node, holds in map(pod_holds_node, pods) if holds})


@dataclass
class Outcome:
    """The run's result as the cluster shows it, beside what the plan promised."""

    planned_freed_gpus: int
    freed_gpus: int  # net whole-free GPUs gained, measured
    freed_nodes: list[str] = field(default_factory=list)  # GPU nodes whole-free after the run and not before
    taken_nodes: list[str] = field(default_factory=list)  # whole-free before, running GPU pods after
    pending_planned: int = 0
    pending_placed: int = 0  # placed pending pods bound on their planned node
    evictions: int = 0
    replacements_ready: int = 0
    held_node_seconds: float = 0.0  # nodes held for steering x seconds held
    holds: int = 0  # node holds made (a node held for two moves counts twice)
    notes: list[str] = field(default_factory=list)
    simulated: bool = False  # a dry run's figures: its own copy of the objects, changed as it pretends to change them

    @property
    def as_planned(self) -> bool:
        return self.freed_gpus == self.planned_freed_gpus and self.pending_placed == self.pending_planned

    def summary(self) -> str:
        if self.simulated:
            return (
                f"simulated: the cluster would gain {self.freed_gpus} whole-free GPU(s) (plan: {self.planned_freed_gpus}); "
                f"{self.pending_placed}/{self.pending_planned} pending pod(s) placed as planned"
            )
        return (
            f"cluster gained {self.freed_gpus} whole-free GPU(s) (plan: {self.planned_freed_gpus}); "
            f"{self.pending_placed}/{self.pending_planned} pending pod(s) placed as planned"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "plannedFreedGpus": self.planned_freed_gpus,
            "freedGpus": self.freed_gpus,
            "freedNodes": self.freed_nodes,
            "takenNodes": self.taken_nodes,
            "pendingPlanned": self.pending_planned,
            "pendingPlaced": self.pending_placed,
            "evictions": self.evictions,
            "replacementsReady": self.replacements_ready,
            "heldNodeSeconds": round(self.held_node_seconds, 1),
            "holds": self.holds,
            "notes": self.notes,
            "simulated": self.simulated,
        }


def compare(before: Mapping[str, int], after: Mapping[str, int], *, planned: int) -> Outcome:
    return Outcome(
        planned_freed_gpus=planned,
        freed_gpus=sum(after.values()) - sum(before.values()),
        freed_nodes=sorted(set(after) - set(before)),
        taken_nodes=sorted(set(before) - set(after)),
    )

"""Immutable snapshot types: what the pure core knows about a cluster.

Everything here is plain data built once by ``compactor.model.load`` (from a
``kubectl -o json`` List or the live API); the metrics and the planner never see
raw API objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec

from compactor.model.partitions import Partitions
from compactor.model.pod_facts import holds_its_node
from compactor.model.resources import EMPTY, Resources


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # "Equal" | "Exists"
    value: str = ""
    effect: str = ""  # "" matches every effect
    seconds: int | None = None  # tolerationSeconds: a NoExecute taint is tolerated only this long


@dataclass(frozen=True, slots=True)
class SelectorRequirement:
    """One ``matchExpressions``/``matchFields`` entry (node selector or label selector)."""

    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    match_expressions: tuple[SelectorRequirement, ...] = ()
    match_fields: tuple[SelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """``metav1.LabelSelector``. ``None`` in a PDB means "selects nothing"; an empty one selects all."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[SelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class OwnerRef:
    kind: str
    name: str
    uid: str = ""
    controller: bool = False


@dataclass(frozen=True, slots=True)
class GpuInfo:
    """What a node offers in GPUs, in physical-GPU terms.

    ``gpu_equivalent`` maps each GPU resource the node advertises to the physical
    GPUs one unit of it stands for: 1 for a whole GPU, ``1/replicas`` for a
    time-sliced replica, ``memory_slices/slots`` for a MIG instance.
    """

    product: str = ""
    physical_gpus: int = 0
    allocatable_gpus: int = 0  # the physical GPUs allocatable offers now (GFD's gpu.count may say more)
    mig_strategy: str = "none"  # none | single | mixed
    mig_config: str = ""
    mig_config_state: str = ""
    replicas: int = 1
    sharing_strategy: str = "none"
    gpu_equivalent: tuple[tuple[str, float], ...] = ()

    def equivalent(self, resource: str) -> float:
        for name, value in self.gpu_equivalent:
            if name == resource:
                return value
        return 0.0


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    labels: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    annotations: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    allocatable: Resources = EMPTY
    capacity: Resources = EMPTY
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True
    gpu: GpuInfo = GpuInfo()
    pool: str = "cpu-only"
    uid: str = ""
    # DRA partitionable devices (model.partitions): what the node's free counters still allow; None on other nodes
    partitions: Partitions | None = field(default=None, hash=False, compare=False)

    @property
    def is_gpu_node(self) -> bool:
        return self.gpu.physical_gpus > 0

    @property
    def countable_gpus(self) -> int:
        """The GPUs freeing this node is worth: none unless Ready and schedulable, then what allocatable offers."""
        if not self.ready or self.unschedulable:
            return 0
        return min(self.gpu.physical_gpus, self.gpu.allocatable_gpus)


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """One required pod (anti-)affinity term, as kube-scheduler's InterPodAffinity reads it."""

    selector: LabelSelector | None
    topology_key: str
    namespaces: tuple[str, ...] = ()  # empty and no namespace selector: the pod's own namespace
    namespace_selector: LabelSelector | None = None  # namespace labels are not in snapshots: see anti_affinity.py
    match_label_keys: tuple[str, ...] = ()
    mismatch_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Affinity:
    """The parts of ``spec.affinity`` the model evaluates exactly, plus flags for the rest."""

    required_node_terms: tuple[NodeSelectorTerm, ...] | None = None  # None = no requirement
    has_required_pod_affinity: bool = False
    anti_affinity_terms: tuple[PodAffinityTerm, ...] = ()

    @property
    def has_required_pod_anti_affinity(self) -> bool:
        return bool(self.anti_affinity_terms)


class Pod(msgspec.Struct, frozen=True, gc=False):
    """A pod as the model sees it.

    A msgspec ``Struct`` rather than a dataclass like its neighbours: a snapshot builds
    one per pod (50,000+), and a Struct is constructed in C, several times faster than
    a frozen dataclass. Frozen and compared field by field, like them; hashed by
    identity fields only (labels are a dict), which equal pods share.
    """

    namespace: str
    name: str
    uid: str = ""
    node_name: str = ""
    phase: str = "Pending"
    requests: Resources = EMPTY
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    annotations: dict[str, str] = msgspec.field(default_factory=dict)
    owners: tuple[OwnerRef, ...] = ()
    priority: int = 0
    priority_class_name: str = ""
    tolerations: tuple[Toleration, ...] = ()
    node_selector: tuple[tuple[str, str], ...] = ()
    affinity: Affinity = Affinity()
    has_hard_topology_spread: bool = False
    local_storage: bool = False  # emptyDir or hostPath volume
    claims: tuple[str, ...] = ()  # PersistentVolumeClaim names (in the pod's namespace)
    ephemeral_volumes: bool = False  # generic ephemeral volumes: each new pod gets a new claim
    host_ports: tuple[tuple[str, int], ...] = ()  # (protocol, hostPort)
    scheduler_name: str = "default-scheduler"
    # Dynamic resource allocation: (entry name, ResourceClaim name or "" when not made yet, shared) per spec.resourceClaims
    # entry; shared: a named ResourceClaim (resourceClaimName), which other pods may use too
    resource_claims: tuple[tuple[str, str, bool], ...] = ()
    extended_claim: str = ""  # the claim kube-scheduler made for its extended-resource requests on a DRA node
    dra_gpus: bool = False  # every claim is of GPU devices compactor.model.dra maps: its requests include them
    partitioned: bool = False  # holds a partitionable DRA device (model.partitions): moved only to open room for one
    nominated_node: str = ""  # status.nominatedNodeName: a preemption is under way for it
    deletion_timestamp: str = ""
    scheduling_gates: tuple[str, ...] = ()
    ready: bool = False
    created: datetime | None = None
    ready_since: datetime | None = None  # when its Ready condition last turned True (None: not Ready, or not said)
    # Seconds from being bound (PodScheduled) to Ready: the start-up a move makes its replica go through again (image pull,
    # model download, warm-up). None: not Ready, or not said. Late when Ready flapped since, which only makes a move dearer.
    startup_seconds: float | None = None

    def __hash__(self) -> int:
        return hash((self.namespace, self.name, self.uid, self.node_name))

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def controller(self) -> OwnerRef | None:
        for owner in self.owners:
            if owner.controller:
                return owner
        return self.owners[0] if self.owners else None

    @property
    def is_bound(self) -> bool:
        """Uses node capacity: bound and not terminated."""
        return holds_its_node(self.node_name, self.phase)

    @property
    def is_pending_demand(self) -> bool:
        """Waits for a node: unbound, Pending, and not held back by scheduling gates."""
        return not self.node_name and self.phase == "Pending" and not self.scheduling_gates

    @property
    def uses_gpu(self) -> bool:
        return bool(self.requests.gpu_part())


@dataclass(frozen=True, slots=True)
class Pdb:
    namespace: str
    name: str
    selector: LabelSelector | None
    disruptions_allowed: int = 0
    min_available: str = ""
    max_unavailable: str = ""
    current_healthy: int = 0
    desired_healthy: int = 0
    expected_pods: int = 0

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    name: str
    node_terms: tuple[NodeSelectorTerm, ...] | None = None  # spec.nodeAffinity.required; None = attachable anywhere


@dataclass(frozen=True, slots=True)
class Claim:
    """A PersistentVolumeClaim: bound when ``volume_name`` names its PersistentVolume."""

    namespace: str
    name: str
    volume_name: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class ConfigMap:
    namespace: str
    name: str
    data: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    labels: dict[str, str] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class Snapshot:
    """A consistent view of the cluster at one moment."""

    nodes: tuple[Node, ...]
    pods: tuple[Pod, ...]
    pdbs: tuple[Pdb, ...] = ()
    config_maps: tuple[ConfigMap, ...] = ()
    volumes: tuple[PersistentVolume, ...] = ()
    claims: tuple[Claim, ...] = ()
    source: str = ""
    warnings: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    def node_by_name(self) -> dict[str, Node]:
        return {node.name: node for node in self.nodes}

    def bound_pods(self) -> tuple[Pod, ...]:
        return tuple(pod for pod in self.pods if pod.is_bound)

    def pending_pods(self) -> tuple[Pod, ...]:
        return tuple(pod for pod in self.pods if pod.is_pending_demand)

"""The parts of the Kubernetes API objects the model reads, declared once.

``kubectl get -o json`` output is decoded straight into these structs by msgspec
(in C, skipping every field not named here: ``managedFields``, env, probes, ...),
and dicts from YAML or the live API are converted into the same structs, so both
inputs go through one validation and one converter (``compactor.model.parse``).

One ``KubeObject`` covers Nodes, Pods, PodDisruptionBudgets, ConfigMaps,
PersistentVolumes and PersistentVolumeClaims: their
fields do not collide, and a single type lets a whole ``List`` decode in one pass
without knowing each item's kind first. Kind-specific rules (a Pod needs
containers, a Node needs allocatable) are checked by the converter.

Every field is ``X | None``: the API server decodes an explicit ``null`` as the
field's zero value, and so does the model. Resource lists stay ``dict[str, Any]``
so that ``compactor.model.quantity`` checks each quantity and names its key.
Names are the API's JSON names (``rename="camel"``), so a validation error's path
is the field path a user sees in their YAML.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, TypeVar

import msgspec

from compactor.errors import InputError

NonNegative = Annotated[int, msgspec.Meta(ge=0)]
ResourceList = dict[str, Any]


class _Api(msgspec.Struct, rename="camel", gc=False):
    """API field names; no reference cycles, so the cyclic collector need not track these."""


class _Frozen(msgspec.Struct, rename="camel", gc=False, frozen=True):
    """Hashable leaves: replicas of one template share their parsed form through a memo keyed by these."""


class OwnerReference(_Frozen, frozen=True):
    kind: str | None = None
    name: str | None = None
    uid: str | None = None
    controller: bool | None = None


class ObjectMeta(_Api):
    name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[OwnerReference] | None = None
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None


class ResourceRequirements(_Api):
    requests: ResourceList | None = None
    limits: ResourceList | None = None


class ContainerPort(_Api):
    host_port: int | None = None
    protocol: str | None = None


class Container(_Api):
    resources: ResourceRequirements | None = None
    restart_policy: str | None = None  # "Always" on an init container makes it a sidecar
    ports: list[ContainerPort] | None = None


class Toleration(_Frozen, frozen=True):
    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None
    toleration_seconds: int | None = None


class SelectorRequirement(_Api):
    """``NodeSelectorRequirement`` and ``LabelSelectorRequirement`` alike."""

    key: str
    operator: str
    values: list[str] | None = None


class NodeSelectorTerm(_Api):
    match_expressions: list[SelectorRequirement] | None = None
    match_fields: list[SelectorRequirement] | None = None


class NodeSelector(_Api):
    node_selector_terms: list[NodeSelectorTerm] | None = None


class NodeAffinity(_Api):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None


class LabelSelector(_Api):
    match_labels: dict[str, str] | None = None
    match_expressions: list[SelectorRequirement] | None = None


class PodAffinityTerm(_Api):
    label_selector: LabelSelector | None = None
    namespaces: list[str] | None = None
    namespace_selector: LabelSelector | None = None
    topology_key: str | None = None
    match_label_keys: list[str] | None = None
    mismatch_label_keys: list[str] | None = None


class PodAffinity(_Api):
    """Pod (anti-)affinity: the hard terms (an existing pod's anti-affinity terms filter where others may go)."""

    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] | None = None


class Affinity(_Api):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


class TopologySpreadConstraint(_Api):
    when_unsatisfiable: str | None = None


class ClaimSource(_Api):
    claim_name: str | None = None


class Volume(_Api):
    name: str | None = None
    empty_dir: dict[str, Any] | None = None
    host_path: dict[str, Any] | None = None
    persistent_volume_claim: ClaimSource | None = None
    ephemeral: dict[str, Any] | None = None


class SchedulingGate(_Api):
    name: str | None = None


class Taint(_Api):
    key: str | None = None
    value: str | None = None
    effect: str | None = None


class VolumeNodeAffinity(_Api):
    required: NodeSelector | None = None


class ObjectReference(_Api):
    namespace: str | None = None
    name: str | None = None


class ObjectSpec(_Api):
    """Pod, Node and PodDisruptionBudget ``spec`` fields in one struct."""

    # Pod
    containers: list[Container] | None = None
    init_containers: list[Container] | None = None
    overhead: ResourceList | None = None
    resources: ResourceRequirements | None = None  # pod-level resources (KEP-2837)
    node_name: str | None = None
    priority: int | None = None
    priority_class_name: str | None = None
    tolerations: list[Toleration] | None = None
    node_selector: dict[str, str] | None = None
    affinity: Affinity | None = None
    topology_spread_constraints: list[TopologySpreadConstraint] | None = None
    volumes: list[Volume] | None = None
    scheduling_gates: list[SchedulingGate] | None = None
    scheduler_name: str | None = None
    resource_claims: list[dict[str, Any]] | None = None  # dynamic resource allocation
    # Node
    taints: list[Taint] | None = None
    unschedulable: bool | None = None
    # PodDisruptionBudget
    selector: LabelSelector | None = None
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    # PersistentVolume
    node_affinity: VolumeNodeAffinity | None = None
    claim_ref: ObjectReference | None = None
    # PersistentVolumeClaim
    volume_name: str | None = None
    # Dynamic resource allocation (resource.k8s.io/v1; compactor.model.dra converts these): ResourceSlice (driver, pool,
    # devices, sharedCounters; nodeName above), ResourceClaim (devices: its requests), DeviceClass
    # (extendedResourceName). ``devices`` is a list in a slice and an object in a claim: kept as decoded.
    driver: str | None = None
    pool: Any = None
    devices: Any = None
    shared_counters: Any = None
    all_nodes: bool | None = None
    extended_resource_name: str | None = None


class Condition(_Api):
    type: str | None = None
    status: str | None = None
    last_transition_time: datetime | None = None


class ObjectStatus(_Api):
    """Pod, Node and PodDisruptionBudget ``status`` fields in one struct."""

    phase: str | None = None
    conditions: list[Condition] | None = None
    allocatable: ResourceList | None = None
    capacity: ResourceList | None = None
    disruptions_allowed: NonNegative | None = None
    current_healthy: NonNegative | None = None
    desired_healthy: NonNegative | None = None
    expected_pods: NonNegative | None = None
    nominated_node_name: str | None = None
    # Dynamic resource allocation: a Pod's claims as made for it, a ResourceClaim's allocation and consumers
    resource_claim_statuses: list[dict[str, Any]] | None = None
    extended_resource_claim_status: dict[str, Any] | None = None
    allocation: Any = None
    reserved_for: list[dict[str, Any]] | None = None


class KubeObject(_Api):
    kind: str | None = None
    metadata: ObjectMeta | None = None
    spec: ObjectSpec | None = None
    status: ObjectStatus | None = None
    data: dict[str, str] | None = None  # ConfigMap


class KubeList(KubeObject):
    """A whole ``kubectl get ... -o json`` document: a ``List`` (or a typed list) or a single object."""

    items: list[KubeObject] | None = None


T = TypeVar("T")


def convert_section(value: Any, kind: type[T], *, source: str, obj: str, field: str = "") -> T:
    """A raw (dict) value as ``kind``; a mismatch is an ``InputError`` naming the field below ``field``."""
    try:
        return msgspec.convert(value, kind)
    except msgspec.ValidationError as exc:
        raise schema_error(exc, source=source, obj=obj, prefix=field) from None


def schema_error(error: msgspec.ValidationError, *, source: str, obj: str, prefix: str = "") -> InputError:
    message, field = decode_error_field(error)
    if prefix:
        field = f"{prefix}{'' if field.startswith('[') or not field else '.'}{field}"
    return InputError(message, source=source, obj=obj, field=field)


def decode_error_field(error: msgspec.ValidationError) -> tuple[str, str]:
    """(message, field path) of a validation error: ``Expected `str`, got `int` - at `$.spec.nodeName```."""
    text = str(error)
    message, separator, path = text.rpartition(" - at `")
    if not separator:
        message, path = text, ""
    field = path.rstrip("`").removeprefix("$").removeprefix(".").removesuffix("[...]")
    message = message.replace("`", "").replace(" | null", "").replace("array", "list")
    return message[:1].lower() + message[1:], field

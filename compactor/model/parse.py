"""Raw Kubernetes objects (dicts as ``kubectl -o json`` prints them) -> snapshot types."""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Any

from compactor.errors import InputError
from compactor.model import schema
from compactor.model.gpu import derive_gpu_info
from compactor.model.pod_facts import is_ready
from compactor.model.quantity import parse_resource_list
from compactor.model.requests import effective_requests
from compactor.model.resources import Resources
from compactor.model.types import (
    Affinity,
    Claim,
    ConfigMap,
    LabelSelector,
    Node,
    NodeSelectorTerm,
    OwnerRef,
    Pdb,
    PersistentVolume,
    Pod,
    PodAffinityTerm,
    SelectorRequirement,
    Taint,
    Toleration,
)

CPU_ONLY_POOL = "cpu-only"
UNLABELLED_GPU_POOL = "gpu-unlabelled"

RawObject = dict[str, Any] | schema.KubeObject


def object_name(raw: RawObject) -> str:
    """``Pod ml/train-0``, ``Node gpu-1``: how errors and warnings name an object."""
    if isinstance(raw, schema.KubeObject):
        meta = raw.metadata or schema.ObjectMeta()
        kind, ns, name = raw.kind or "object", meta.namespace, meta.name or "<unnamed>"
    else:
        raw_meta = raw.get("metadata")
        found = raw_meta if isinstance(raw_meta, dict) else {}
        kind, ns, name = raw.get("kind", "object"), found.get("namespace"), found.get("name", "<unnamed>")
    return f"{kind} {ns}/{name}" if ns else f"{kind} {name}"


def as_kube_object(raw: RawObject, *, source: str) -> schema.KubeObject:
    """A raw dict (YAML, the live API, tests) checked against the schema; decoded objects pass through."""
    if isinstance(raw, schema.KubeObject):
        return raw
    return schema.convert_section(raw, schema.KubeObject, source=source, obj=object_name(raw))


def _requirements(raw: list[schema.SelectorRequirement] | None) -> tuple[SelectorRequirement, ...]:
    return tuple(SelectorRequirement(r.key, r.operator, tuple(r.values or ())) for r in raw or ())


def label_selector(raw: schema.LabelSelector | None) -> LabelSelector | None:
    if raw is None:
        return None
    return LabelSelector(
        match_labels=tuple(sorted((raw.match_labels or {}).items())),
        match_expressions=_requirements(raw.match_expressions),
    )


def parse_label_selector(raw: Any, *, source: str, obj: str, field: str) -> LabelSelector | None:
    """A raw ``metav1.LabelSelector`` dict (``None`` selects nothing)."""
    if raw is None:
        return None
    return label_selector(schema.convert_section(raw, schema.LabelSelector, source=source, obj=obj, field=field))


def _ready_since(conditions: list[schema.Condition] | None) -> datetime | None:
    for condition in conditions or ():
        if condition.type == "Ready":
            return condition.last_transition_time if condition.status == "True" else None
    return None


def _startup_seconds(conditions: list[schema.Condition] | None) -> float | None:
    times = {c.type: c.last_transition_time for c in conditions or () if c.status == "True" and c.last_transition_time}
    scheduled, ready = times.get("PodScheduled"), times.get("Ready")
    if scheduled is None or ready is None or ready < scheduled:
        return None
    return (ready - scheduled).total_seconds()


def _is_ready(conditions: list[schema.Condition] | None) -> bool:
    return is_ready((c.type, c.status) for c in conditions or ())


def node_pool(labels: dict[str, str], is_gpu: bool, pool_label: str) -> str:
    if not is_gpu:
        return CPU_ONLY_POOL
    return labels.get(pool_label) or UNLABELLED_GPU_POOL


_NO_META, _NO_SPEC, _NO_STATUS = schema.ObjectMeta(), schema.ObjectSpec(), schema.ObjectStatus()


def sections(
    raw: RawObject, *, source: str
) -> tuple[schema.KubeObject, schema.ObjectMeta, schema.ObjectSpec, schema.ObjectStatus]:
    """(object, metadata, spec, status) of an object that must have a name."""
    kube = as_kube_object(raw, source=source)
    meta = kube.metadata or _NO_META
    if not meta.name:
        raise InputError("missing", source=source, obj=object_name(kube), field="metadata.name")
    return kube, meta, kube.spec or _NO_SPEC, kube.status or _NO_STATUS


def parse_node(raw: RawObject, *, source: str, pool_label: str, warnings: list[str]) -> Node:
    kube, meta, spec, status = sections(raw, source=source)
    obj = object_name(kube)
    if status.allocatable is None:
        raise InputError(
            "missing (a Node must report what it can allocate)", source=source, obj=obj, field="status.allocatable"
        )
    labels = meta.labels or {}
    allocatable = parse_resource_list(status.allocatable, source=source, obj=obj, field="status.allocatable")
    capacity = parse_resource_list(status.capacity, source=source, obj=obj, field="status.capacity")
    gpu, gpu_warnings = derive_gpu_info(labels, allocatable)
    warnings.extend(f"{source}: {obj}: {w}" for w in gpu_warnings)
    return Node(
        name=str(meta.name),
        labels=labels,
        annotations=meta.annotations or {},
        allocatable=Resources(allocatable),
        capacity=Resources(capacity),
        taints=tuple(Taint(t.key or "", t.value or "", t.effect or "") for t in spec.taints or ()),
        unschedulable=bool(spec.unschedulable),
        # A node with no conditions at all (hand-written snapshot) is taken as Ready.
        ready=_is_ready(status.conditions) if status.conditions else True,
        gpu=gpu,
        pool=node_pool(labels, gpu.physical_gpus > 0, pool_label),
        uid=meta.uid or "",
    )


@lru_cache(maxsize=10_000)
def _tolerations(raw: tuple[schema.Toleration, ...]) -> tuple[Toleration, ...]:
    """Replicas of one template (and most pods' default not-ready/unreachable pair) share their tolerations."""
    return tuple(
        Toleration(t.key or "", t.operator or "Equal", t.value or "", t.effect or "", t.toleration_seconds) for t in raw
    )


@lru_cache(maxsize=10_000)
def _owners(raw: tuple[schema.OwnerReference, ...]) -> tuple[OwnerRef, ...]:
    return tuple(OwnerRef(o.kind or "", o.name or "", o.uid or "", o.controller is True) for o in raw)


_NO_AFFINITY = Affinity()


def node_selector_terms(raw: schema.NodeSelector | None) -> tuple[NodeSelectorTerm, ...] | None:
    """A required ``NodeSelector`` (node affinity, a PersistentVolume's node affinity); None = no requirement."""
    if raw is None:
        return None
    return tuple(
        NodeSelectorTerm(_requirements(t.match_expressions), _requirements(t.match_fields))
        for t in raw.node_selector_terms or ()
    )


def _pod_affinity_term(raw: schema.PodAffinityTerm) -> PodAffinityTerm:
    return PodAffinityTerm(
        selector=label_selector(raw.label_selector),
        topology_key=raw.topology_key or "",
        namespaces=tuple(raw.namespaces or ()),
        namespace_selector=label_selector(raw.namespace_selector),
        match_label_keys=tuple(raw.match_label_keys or ()),
        mismatch_label_keys=tuple(raw.mismatch_label_keys or ()),
    )


def _affinity(raw: schema.Affinity | None) -> Affinity:
    if raw is None:
        return _NO_AFFINITY
    terms = node_selector_terms(
        raw.node_affinity.required_during_scheduling_ignored_during_execution if raw.node_affinity else None
    )
    pod_affinity = raw.pod_affinity.required_during_scheduling_ignored_during_execution if raw.pod_affinity else None
    anti = raw.pod_anti_affinity.required_during_scheduling_ignored_during_execution if raw.pod_anti_affinity else None
    return Affinity(terms, bool(pod_affinity), tuple(_pod_affinity_term(t) for t in anti or ()))


def _hard_topology_spread(spec: schema.ObjectSpec) -> bool:
    return any(
        (c.when_unsatisfiable or "DoNotSchedule") == "DoNotSchedule" for c in spec.topology_spread_constraints or ()
    )


def _local_storage(spec: schema.ObjectSpec) -> bool:
    return any(v.empty_dir is not None or v.host_path is not None for v in spec.volumes or ())


def _claims(spec: schema.ObjectSpec) -> tuple[str, ...]:
    return tuple(
        v.persistent_volume_claim.claim_name or "" for v in spec.volumes or () if v.persistent_volume_claim is not None
    )


def _host_ports(spec: schema.ObjectSpec) -> tuple[tuple[str, int], ...]:
    """(protocol, hostPort) of every container port bound on the host; sidecars (restartable init containers) count too."""
    containers = [*(spec.containers or ()), *(c for c in spec.init_containers or () if c.restart_policy == "Always")]
    return tuple(
        sorted(
            {
                (p.protocol or "TCP", p.host_port)
                for c in containers
                for p in c.ports or ()
                if p.host_port and p.host_port > 0
            }
        )
    )


def _resource_claims(spec: schema.ObjectSpec, status: schema.ObjectStatus) -> tuple[tuple[str, str, bool], ...]:
    """(entry, ResourceClaim name, shared) per ``spec.resourceClaims`` entry: a named claim is shared; a template's claim
    is the one ``status.resourceClaimStatuses`` names ("" until the resourceclaim controller made it)."""
    made = {str(s.get("name")): str(s.get("resourceClaimName") or "") for s in status.resource_claim_statuses or ()}
    return tuple(
        (str(entry.get("name") or ""), str(entry["resourceClaimName"]), True)
        if entry.get("resourceClaimName")
        else (str(entry.get("name") or ""), made.get(str(entry.get("name")), ""), False)
        for entry in spec.resource_claims or ()
        if isinstance(entry, dict)
    )


def _pod_requests(kube: schema.KubeObject, spec: schema.ObjectSpec, *, source: str) -> Resources:
    if spec.containers is None:
        raise InputError(
            "missing (a Pod needs containers)", source=source, obj=object_name(kube), field="spec.containers"
        )
    try:
        return effective_requests(spec, source=source)
    except InputError as exc:  # the object's name is only worked out when something is wrong with it
        raise exc.located(obj=object_name(kube)) from None


def parse_pod(raw: RawObject, *, source: str) -> Pod:
    kube, meta, spec, status = sections(raw, source=source)
    return Pod(
        namespace=meta.namespace or "default",
        name=str(meta.name),
        uid=meta.uid or "",
        node_name=spec.node_name or "",
        phase=status.phase or "Pending",
        requests=_pod_requests(kube, spec, source=source),
        labels=meta.labels or {},
        annotations=meta.annotations or {},
        owners=_owners(tuple(meta.owner_references)) if meta.owner_references else (),
        priority=spec.priority or 0,
        priority_class_name=spec.priority_class_name or "",
        tolerations=_tolerations(tuple(spec.tolerations)) if spec.tolerations else (),
        node_selector=tuple(sorted(spec.node_selector.items())) if spec.node_selector else (),
        affinity=_affinity(spec.affinity),
        has_hard_topology_spread=_hard_topology_spread(spec) if spec.topology_spread_constraints else False,
        local_storage=_local_storage(spec) if spec.volumes else False,
        claims=_claims(spec) if spec.volumes else (),
        ephemeral_volumes=any(v.ephemeral is not None for v in spec.volumes) if spec.volumes else False,
        host_ports=_host_ports(spec),
        scheduler_name=spec.scheduler_name or "default-scheduler",
        resource_claims=_resource_claims(spec, status) if spec.resource_claims else (),
        extended_claim=str((status.extended_resource_claim_status or {}).get("resourceClaimName") or ""),
        nominated_node=status.nominated_node_name or "",
        deletion_timestamp=meta.deletion_timestamp.isoformat() if meta.deletion_timestamp else "",
        scheduling_gates=tuple(g.name or "" for g in spec.scheduling_gates) if spec.scheduling_gates else (),
        ready=_is_ready(status.conditions),
        created=meta.creation_timestamp,
        ready_since=_ready_since(status.conditions),
        startup_seconds=_startup_seconds(status.conditions),
    )


def parse_pdb(raw: RawObject, *, source: str) -> Pdb:
    _, meta, spec, status = sections(raw, source=source)
    return Pdb(
        namespace=meta.namespace or "default",
        name=str(meta.name),
        selector=label_selector(spec.selector),
        disruptions_allowed=status.disruptions_allowed or 0,
        min_available="" if spec.min_available is None else str(spec.min_available),
        max_unavailable="" if spec.max_unavailable is None else str(spec.max_unavailable),
        current_healthy=status.current_healthy or 0,
        desired_healthy=status.desired_healthy or 0,
        expected_pods=status.expected_pods or 0,
    )


def parse_persistent_volume(raw: RawObject, *, source: str) -> PersistentVolume:
    _, meta, spec, _ = sections(raw, source=source)
    return PersistentVolume(
        name=str(meta.name), node_terms=node_selector_terms(spec.node_affinity.required if spec.node_affinity else None)
    )


def parse_claim(raw: RawObject, *, source: str) -> Claim:
    _, meta, spec, _ = sections(raw, source=source)
    return Claim(namespace=meta.namespace or "default", name=str(meta.name), volume_name=spec.volume_name or "")


def parse_config_map(raw: RawObject, *, source: str) -> ConfigMap:
    kube = as_kube_object(raw, source=source)
    meta = kube.metadata or schema.ObjectMeta()
    return ConfigMap(
        namespace=meta.namespace or "default", name=meta.name or "", data=kube.data or {}, labels=meta.labels or {}
    )

"""Raw Kubernetes objects (dicts as ``kubectl -o json`` prints them) -> snapshot types."""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Any

from compactor.errors import InputError
from compactor.model.fields import as_object, fast_key
from compactor.model.gpu import derive_gpu_info
from compactor.model.quantity import parse_resource_list
from compactor.model.requests import effective_requests
from compactor.model.resources import Resources
from compactor.model.types import (
    Affinity,
    ConfigMap,
    LabelSelector,
    Node,
    NodeSelectorTerm,
    OwnerRef,
    Pdb,
    Pod,
    SelectorRequirement,
    Taint,
    Toleration,
)

CPU_ONLY_POOL = "cpu-only"
UNLABELLED_GPU_POOL = "gpu-unlabelled"


def _str_map(value: Any, *, source: str, obj: str, field: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError("expected a map of strings", source=source, obj=obj, field=field)
    if {type(v) for v in value.values()} <= {str}:
        return value  # the API's own output: JSON object keys are strings already
    return {str(k): "" if v is None else str(v) for k, v in value.items()}


def _list(value: Any, *, source: str, obj: str, field: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError("expected a list", source=source, obj=obj, field=field)
    return value


def _section(raw: dict[str, Any], key: str, *, source: str, obj: str) -> dict[str, Any]:
    """``metadata``/``spec``/``status``: an object, or absent."""
    return as_object(raw.get(key), source=source, obj=obj, field=key)


def _dicts(value: Any, *, source: str, obj: str, field: str, what: str) -> list[dict[str, Any]]:
    """A list whose items must all be objects (taints, owner references, ...)."""
    items = _list(value, source=source, obj=obj, field=field)
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise InputError(f"expected {what}, got {type(item).__name__}", source=source, obj=obj, field=f"{field}[{i}]")
    return items


def object_name(raw: dict[str, Any]) -> str:
    meta = raw.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    kind = raw.get("kind", "object")
    ns = meta.get("namespace")
    name = meta.get("name", "<unnamed>")
    return f"{kind} {ns}/{name}" if ns else f"{kind} {name}"


def _requirements(raw: Any, *, source: str, obj: str, field: str) -> tuple[SelectorRequirement, ...]:
    out = []
    for i, item in enumerate(_list(raw, source=source, obj=obj, field=field)):
        if not isinstance(item, dict) or "key" not in item or "operator" not in item:
            raise InputError("expected {key, operator, values}", source=source, obj=obj, field=f"{field}[{i}]")
        values = tuple(str(v) for v in _list(item.get("values"), source=source, obj=obj, field=f"{field}[{i}].values"))
        out.append(SelectorRequirement(str(item["key"]), str(item["operator"]), values))
    return tuple(out)


def parse_label_selector(raw: Any, *, source: str, obj: str, field: str) -> LabelSelector | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise InputError("expected a label selector", source=source, obj=obj, field=field)
    labels = _str_map(raw.get("matchLabels"), source=source, obj=obj, field=f"{field}.matchLabels")
    return LabelSelector(
        match_labels=tuple(sorted(labels.items())),
        match_expressions=_requirements(raw.get("matchExpressions"), source=source, obj=obj, field=f"{field}.matchExpressions"),
    )


def _is_ready(conditions: list[Any]) -> bool:
    for condition in conditions:
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def node_pool(labels: dict[str, str], is_gpu: bool, pool_label: str) -> str:
    if not is_gpu:
        return CPU_ONLY_POOL
    return labels.get(pool_label) or UNLABELLED_GPU_POOL


def parse_node(raw: dict[str, Any], *, source: str, pool_label: str, warnings: list[str]) -> Node:
    obj = object_name(raw)
    meta = _section(raw, "metadata", source=source, obj=obj)
    spec = _section(raw, "spec", source=source, obj=obj)
    status = _section(raw, "status", source=source, obj=obj)
    if not meta.get("name"):
        raise InputError("missing", source=source, obj=obj, field="metadata.name")
    if "allocatable" not in status or status["allocatable"] is None:
        raise InputError("missing (a Node must report what it can allocate)", source=source, obj=obj, field="status.allocatable")
    labels = _str_map(meta.get("labels"), source=source, obj=obj, field="metadata.labels")
    allocatable = parse_resource_list(status["allocatable"], source=source, obj=obj, field="status.allocatable")
    capacity = parse_resource_list(status.get("capacity"), source=source, obj=obj, field="status.capacity")
    gpu, gpu_warnings = derive_gpu_info(labels, allocatable)
    warnings.extend(f"{source}: {obj}: {w}" for w in gpu_warnings)
    # A taint that cannot be read must not be dropped: the node would look open to every pod.
    taints = tuple(
        Taint(str(t.get("key", "")), str(t.get("value") or ""), str(t.get("effect", "")))
        for t in _dicts(spec.get("taints"), source=source, obj=obj, field="spec.taints", what="a taint")
    )
    unschedulable = spec.get("unschedulable", False)
    if not isinstance(unschedulable, bool):
        raise InputError(f"expected true or false, got {unschedulable!r}", source=source, obj=obj, field="spec.unschedulable")
    conditions = _list(status.get("conditions"), source=source, obj=obj, field="status.conditions")
    return Node(
        name=str(meta["name"]),
        labels=labels,
        annotations=_str_map(meta.get("annotations"), source=source, obj=obj, field="metadata.annotations"),
        allocatable=Resources(allocatable),
        capacity=Resources(capacity),
        taints=taints,
        unschedulable=unschedulable,
        # A node with no conditions at all (hand-written snapshot) is taken as Ready.
        ready=_is_ready(conditions) if conditions else True,
        gpu=gpu,
        pool=node_pool(labels, gpu.physical_gpus > 0, pool_label),
        uid=str(meta.get("uid", "")),
    )


_TOLERATIONS: dict[bytes | str, tuple[Toleration, ...]] = {}


def _tolerations(raw: Any, *, source: str, obj: str) -> tuple[Toleration, ...]:
    """Parsed tolerations; replicas (and every pod's default not-ready/unreachable pair) share them."""
    if not raw:
        return ()
    key = fast_key(raw)
    found = _TOLERATIONS.get(key)
    if found is None:
        found = _parse_tolerations(raw, source=source, obj=obj)
        if len(_TOLERATIONS) > 10_000:
            _TOLERATIONS.clear()
        _TOLERATIONS[key] = found
    return found


def _parse_tolerations(raw: Any, *, source: str, obj: str) -> tuple[Toleration, ...]:
    out = []
    for i, t in enumerate(_list(raw, source=source, obj=obj, field="spec.tolerations")):
        if not isinstance(t, dict):
            raise InputError("expected a toleration", source=source, obj=obj, field=f"spec.tolerations[{i}]")
        key, operator, value, effect = (str(t.get(k) or "") for k in ("key", "operator", "value", "effect"))
        out.append(Toleration(key, operator or "Equal", value, effect))
    return tuple(out)


def _affinity(raw: Any, *, source: str, obj: str) -> Affinity:
    if not raw:
        return Affinity()
    raw = as_object(raw, source=source, obj=obj, field="spec.affinity")
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    node_aff = as_object(raw.get("nodeAffinity"), source=source, obj=obj, field="spec.affinity.nodeAffinity").get(required)
    terms: tuple[NodeSelectorTerm, ...] | None = None
    if node_aff is not None:
        node_aff = as_object(node_aff, source=source, obj=obj, field=f"spec.affinity.nodeAffinity.{required}")
        field = f"spec.affinity.nodeAffinity.{required}.nodeSelectorTerms"
        terms = tuple(
            NodeSelectorTerm(
                _requirements(t.get("matchExpressions"), source=source, obj=obj, field=f"{field}[{i}].matchExpressions"),
                _requirements(t.get("matchFields"), source=source, obj=obj, field=f"{field}[{i}].matchFields"),
            )
            for i, t in enumerate(_dicts(node_aff.get("nodeSelectorTerms"), source=source, obj=obj, field=field, what="a term"))
        )
    pod_aff = as_object(raw.get("podAffinity"), source=source, obj=obj, field="spec.affinity.podAffinity").get(required)
    anti = as_object(raw.get("podAntiAffinity"), source=source, obj=obj, field="spec.affinity.podAntiAffinity").get(required)
    return Affinity(terms, bool(pod_aff), bool(anti))


def _timestamp(value: Any) -> datetime | None:
    if not value:
        return None
    return _parse_timestamp(str(value))


@lru_cache(maxsize=4096)
def _parse_timestamp(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _named_sections(raw: dict[str, Any], *, source: str) -> tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(object name, metadata, spec, status) of a namespaced object that must have a name."""
    obj = object_name(raw)
    meta = _section(raw, "metadata", source=source, obj=obj)
    spec = _section(raw, "spec", source=source, obj=obj)
    status = _section(raw, "status", source=source, obj=obj)
    if not meta.get("name"):
        raise InputError("missing", source=source, obj=obj, field="metadata.name")
    return obj, meta, spec, status


def parse_pod(raw: dict[str, Any], *, source: str) -> Pod:
    obj, meta, spec, status = _named_sections(raw, source=source)
    if not isinstance(spec.get("containers"), list):
        raise InputError("missing (a Pod needs containers)", source=source, obj=obj, field="spec.containers")
    owners = tuple(
        OwnerRef(str(o.get("kind", "")), str(o.get("name", "")), str(o.get("uid", "")), o.get("controller") is True)
        for o in _dicts(meta.get("ownerReferences"), source=source, obj=obj, field="metadata.ownerReferences", what="an owner reference")
    )
    volumes = _list(spec.get("volumes"), source=source, obj=obj, field="spec.volumes")
    priority = spec.get("priority", 0)
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise InputError(f"expected an integer, got {priority!r}", source=source, obj=obj, field="spec.priority")
    node_selector = _str_map(spec.get("nodeSelector"), source=source, obj=obj, field="spec.nodeSelector")
    constraints = _list(spec.get("topologySpreadConstraints"), source=source, obj=obj, field="spec.topologySpreadConstraints")
    hard_spread = any(isinstance(c, dict) and c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule" for c in constraints)
    gates = _dicts(spec.get("schedulingGates"), source=source, obj=obj, field="spec.schedulingGates", what="a scheduling gate")
    return Pod(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta["name"]),
        uid=str(meta.get("uid", "")),
        node_name=str(spec.get("nodeName") or ""),
        phase=str(status.get("phase") or "Pending"),
        requests=effective_requests(spec, source=source, obj=obj),
        labels=_str_map(meta.get("labels"), source=source, obj=obj, field="metadata.labels"),
        annotations=_str_map(meta.get("annotations"), source=source, obj=obj, field="metadata.annotations"),
        owners=owners,
        priority=priority,
        priority_class_name=str(spec.get("priorityClassName") or ""),
        tolerations=_tolerations(spec.get("tolerations"), source=source, obj=obj),
        node_selector=tuple(sorted(node_selector.items())),
        affinity=_affinity(spec.get("affinity"), source=source, obj=obj),
        has_hard_topology_spread=hard_spread,
        local_storage=any(isinstance(v, dict) and ("emptyDir" in v or "hostPath" in v) for v in volumes),
        deletion_timestamp=str(meta.get("deletionTimestamp") or ""),
        scheduling_gates=tuple(str(g.get("name", "")) for g in gates),
        ready=_is_ready(_list(status.get("conditions"), source=source, obj=obj, field="status.conditions")),
        created=_timestamp(meta.get("creationTimestamp")),
    )


def _int_field(value: Any, *, source: str, obj: str, field: str) -> int:
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InputError(f"expected a non-negative integer, got {value!r}", source=source, obj=obj, field=field)
    return value


def parse_pdb(raw: dict[str, Any], *, source: str) -> Pdb:
    obj, meta, spec, status = _named_sections(raw, source=source)
    return Pdb(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta["name"]),
        selector=parse_label_selector(spec.get("selector"), source=source, obj=obj, field="spec.selector"),
        disruptions_allowed=_int_field(status.get("disruptionsAllowed"), source=source, obj=obj, field="status.disruptionsAllowed"),
        min_available="" if spec.get("minAvailable") is None else str(spec["minAvailable"]),
        max_unavailable="" if spec.get("maxUnavailable") is None else str(spec["maxUnavailable"]),
        current_healthy=_int_field(status.get("currentHealthy"), source=source, obj=obj, field="status.currentHealthy"),
        desired_healthy=_int_field(status.get("desiredHealthy"), source=source, obj=obj, field="status.desiredHealthy"),
        expected_pods=_int_field(status.get("expectedPods"), source=source, obj=obj, field="status.expectedPods"),
    )


def parse_config_map(raw: dict[str, Any], *, source: str) -> ConfigMap:
    obj = object_name(raw)
    meta = _section(raw, "metadata", source=source, obj=obj)
    return ConfigMap(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name", "")),
        data=_str_map(raw.get("data"), source=source, obj=obj, field="data"),
    )

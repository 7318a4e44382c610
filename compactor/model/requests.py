"""Effective pod requests, as the scheduler computes them.

Follows ``k8s.io/component-helpers/resource.PodRequests``:
``max(sum(app containers) + sum(sidecars), max over init containers of
(that init container + the sidecars started before it)) + overhead``, per
resource. Sidecars are init containers with ``restartPolicy: Always``.
A container that sets a limit but no request gets request = limit (API
defaulting), which is how extended resources given only as limits count.
Pod-level ``spec.resources.requests`` (KEP-2837), when present, replace the
container aggregate for the resources they name (cpu, memory, hugepages-*);
pod-level limits without a request default the request the way the API server
does (``pkg/apis/core/v1/defaults.go`` ``defaultPodRequests``).
"""

from __future__ import annotations

from typing import Any

import msgspec

from compactor.model.quantity import parse_resource_list
from compactor.model.resources import Resources, elementwise_max
from compactor.model.schema import Container, ObjectSpec, ResourceRequirements, convert_section

_POD_LEVEL_RESOURCES = ("cpu", "memory")
_HUGEPAGES_PREFIX = "hugepages-"


def is_pod_level_resource(name: str) -> bool:
    """``IsSupportedPodLevelResource``: cpu, memory and hugepages-<size>."""
    return name in _POD_LEVEL_RESOURCES or name.startswith(_HUGEPAGES_PREFIX)


def _requests_and_limits(
    resources: ResourceRequirements | None, *, source: str, obj: str, field: str
) -> tuple[dict[str, int], dict[str, int]]:
    if resources is None:
        return {}, {}
    requests = parse_resource_list(resources.requests, source=source, obj=obj, field=f"{field}.requests")
    limits = parse_resource_list(resources.limits, source=source, obj=obj, field=f"{field}.limits")
    return requests, limits


def container_requests(container: Container, *, source: str, obj: str, field: str) -> dict[str, int]:
    requests, limits = _requests_and_limits(container.resources, source=source, obj=obj, field=f"{field}.resources")
    for name, amount in limits.items():
        requests.setdefault(name, amount)
    return requests


def _add_into(acc: dict[str, int], extra: dict[str, int]) -> None:
    for key, value in extra.items():
        acc[key] = acc.get(key, 0) + value


def aggregate_container_requests(spec: ObjectSpec, *, source: str = "", obj: str = "") -> dict[str, int]:
    """``AggregateContainerRequests``: app containers, sidecars and init containers, without pod-level values or overhead."""
    total: dict[str, int] = {}
    for i, container in enumerate(spec.containers or ()):
        _add_into(total, container_requests(container, source=source, obj=obj, field=f"spec.containers[{i}]"))

    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for i, container in enumerate(spec.init_containers or ()):
        reqs = container_requests(container, source=source, obj=obj, field=f"spec.initContainers[{i}]")
        if container.restart_policy == "Always":
            _add_into(total, reqs)
            _add_into(sidecars, reqs)
            during = dict(sidecars)
        else:
            during = dict(reqs)
            _add_into(during, sidecars)
        init_peak = elementwise_max(init_peak, during)
    return elementwise_max(total, init_peak)


def _pod_level_requests(spec: ObjectSpec, aggregate: dict[str, int], *, source: str, obj: str) -> dict[str, int]:
    """Pod-level requests after API defaulting (``defaultPodRequests``), supported resources only."""
    requests, limits = _requests_and_limits(spec.resources, source=source, obj=obj, field="spec.resources")
    if limits:
        for name, amount in limits.items():
            # cpu and memory requested by containers default to their aggregate, which is
            # what the pod would get anyway; everything else defaults to the pod-level limit.
            overcommittable = not name.startswith(_HUGEPAGES_PREFIX)
            if name not in requests and not (overcommittable and name in aggregate):
                requests[name] = amount
    return {name: amount for name, amount in requests.items() if is_pod_level_resource(name)}


_MEMO: dict[bytes, Resources] = {}
_MEMO_LIMIT = 100_000
_encode = msgspec.json.Encoder().encode


def effective_requests(spec: ObjectSpec | dict[str, Any] | None, *, source: str = "", obj: str = "") -> Resources:
    """The pod's effective request vector in scheduler units (``pods`` included as 1).

    ``spec`` is a decoded ``ObjectSpec`` or a raw ``spec`` dict. Replicas of one
    template share the result: the memo key is the encoded part of the spec the
    request depends on (container names and images are not part of the schema).
    """
    if not isinstance(spec, ObjectSpec):
        spec = convert_section(spec or {}, ObjectSpec, source=source, obj=obj, field="spec")
    key = _encode((spec.init_containers, spec.containers, spec.overhead, spec.resources))
    cached = _MEMO.get(key)
    if cached is not None:
        return cached
    resources = _effective_requests(spec, source=source, obj=obj)
    if len(_MEMO) >= _MEMO_LIMIT:
        _MEMO.clear()
    _MEMO[key] = resources
    return resources


def _effective_requests(spec: ObjectSpec, *, source: str, obj: str) -> Resources:
    result = aggregate_container_requests(spec, source=source, obj=obj)
    result.update(_pod_level_requests(spec, result, source=source, obj=obj))
    _add_into(result, parse_resource_list(spec.overhead, source=source, obj=obj, field="spec.overhead"))
    result["pods"] = 1
    return Resources(result)

"""Effective pod requests, as the scheduler computes them.

Follows ``k8s.io/component-helpers/resource.PodRequests``:
``max(sum(app containers) + sum(sidecars), max over init containers of
(that init container + the sidecars started before it)) + overhead``, per
resource. Sidecars are init containers with ``restartPolicy: Always``.
A container that sets a limit but no request gets request = limit (API
defaulting), which is how extended resources given only as limits count.
Pod-level ``spec.resources.requests`` (KEP-2837), when present, replace the
container aggregate for the resources they name.
"""

from __future__ import annotations

from typing import Any

from compactor.model.quantity import parse_resource_list
from compactor.model.resources import Resources, elementwise_max

_POD_LEVEL_RESOURCES = ("cpu", "memory")


def container_requests(container: dict[str, Any], *, source: str, obj: str, field: str) -> dict[str, int]:
    resources = container.get("resources") or {}
    requests = parse_resource_list(resources.get("requests"), source=source, obj=obj, field=f"{field}.resources.requests")
    limits = parse_resource_list(resources.get("limits"), source=source, obj=obj, field=f"{field}.resources.limits")
    for name, amount in limits.items():
        requests.setdefault(name, amount)
    return requests


def _add_into(acc: dict[str, int], extra: dict[str, int]) -> None:
    for key, value in extra.items():
        acc[key] = acc.get(key, 0) + value


def effective_requests(spec: dict[str, Any], *, source: str = "", obj: str = "") -> Resources:
    """The pod's effective request vector in scheduler units (``pods`` included as 1)."""
    total: dict[str, int] = {}
    for i, container in enumerate(spec.get("containers") or []):
        _add_into(total, container_requests(container, source=source, obj=obj, field=f"spec.containers[{i}]"))

    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for i, container in enumerate(spec.get("initContainers") or []):
        reqs = container_requests(container, source=source, obj=obj, field=f"spec.initContainers[{i}]")
        if container.get("restartPolicy") == "Always":
            _add_into(total, reqs)
            _add_into(sidecars, reqs)
            during = dict(sidecars)
        else:
            during = dict(reqs)
            _add_into(during, sidecars)
        init_peak = elementwise_max(init_peak, during)

    result = elementwise_max(total, init_peak)
    pod_level = (spec.get("resources") or {}).get("requests")
    if pod_level:
        parsed = parse_resource_list(pod_level, source=source, obj=obj, field="spec.resources.requests")
        for name in _POD_LEVEL_RESOURCES:
            if name in parsed:
                result[name] = parsed[name]
    _add_into(result, parse_resource_list(spec.get("overhead"), source=source, obj=obj, field="spec.overhead"))
    result["pods"] = 1
    return Resources(result)

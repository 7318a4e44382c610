"""The JSON form of the figures: camelCase keys that name each GPU figure's unit, integer amounts, floats to 4 places.

Apart from ``fragmentation.py`` because it is a view of the result types for programs (plans' ``before``/``after``,
``report --output json``) that the computation never needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from typing import Any

from compactor.metrics.figure_types import Figures
from compactor.model.resources import Resources

# JSON says which unit a GPU figure is in: physical GPUs (devices) or GPU-equivalents (capacity; MIG and time-sliced
# resources mapped back to fractions of a GPU).
_JSON_NAMES = {
    "gpus": "physicalGpus",
    "countable_gpus": "countablePhysicalGpus",
    **{
        name: name.removesuffix("_gpus") + "_gpu_equivalents"
        for name in (
            "allocatable_gpus",
            "allocated_gpus",
            "free_gpus",
            "whole_free_gpus",
            "busy_free_gpus",
            "stranded_gpus",
            "unavailable_free_gpus",
            "mig_idle_gpus",
            "mig_gpus",
            "fragmented_gpus",
            "fgd_fragmented_gpus",
            "blocked_demand_gpus",
        )
    },
}


def _camel(name: str) -> str:
    head, *rest = _JSON_NAMES.get(name, name).split("_")
    return head + "".join(word.capitalize() for word in rest)


_FIELD_NAMES: dict[type, tuple[tuple[str, str], ...] | None] = {}


def _field_names(kind: type) -> tuple[tuple[str, str], ...] | None:
    """(attribute, camelCase key) of a dataclass type, None for other types; cached per type."""
    if kind not in _FIELD_NAMES:
        _FIELD_NAMES[kind] = tuple((f.name, _camel(f.name)) for f in fields(kind)) if is_dataclass(kind) else None
    return _FIELD_NAMES[kind]


def _jsonable(value: Any) -> Any:
    kind = type(value)
    if kind is float:
        return round(value, 4) + 0.0  # + 0.0 turns -0.0 into 0.0
    if value is None or kind in (int, str, bool):
        return value
    if kind is Resources:
        amounts = value.as_dict()
        return {key: int(amounts[key]) for key in sorted(amounts)}
    names = _field_names(kind)
    if names is not None:
        return {key: _jsonable(getattr(value, name)) for name, key in names}
    if isinstance(value, Mapping):
        return {str(key): _jsonable(value[key]) for key in sorted(value)}
    if isinstance(value, tuple | list):
        return [_jsonable(item) for item in value]
    raise TypeError(f"cannot serialise {kind.__name__}")


def figures_to_dict(figures: Figures) -> dict[str, Any]:
    """JSON-ready form (camelCase keys, integer amounts, floats to 4 places); the ``before``/``after`` block of plans."""
    result: dict[str, Any] = _jsonable(figures)
    return result


def headline_dict(figures: Figures) -> dict[str, Any]:
    """The headline figures of the cluster (docs/metrics.md), as ``figures_to_dict`` writes them."""
    cluster = figures.cluster
    return {
        "wholeFreeGpus": cluster.whole_free_physical_gpus,
        "wholeFreeNodes": cluster.whole_free_nodes,
        "blockedDemandGpuEquivalents": round(figures.blocked_demand_gpus, 4),
        "blockedPendingPods": len(figures.blocked_pending),
        "strandedShare": None if cluster.stranded_share is None else round(cluster.stranded_share, 4),
        "strandedGpuEquivalents": round(cluster.stranded_gpus, 4),
        "freeGpuEquivalents": round(cluster.free_gpus, 4),
    }


def headline_of_dict(figures: dict[str, Any]) -> dict[str, Any] | None:
    """``headline_dict`` of a plan's ``before``/``after`` (``figures_to_dict``'s form)."""
    cluster = figures.get("cluster")
    if not isinstance(cluster, dict):
        return None
    return {
        "wholeFreeGpus": cluster.get("wholeFreePhysicalGpus"),
        "wholeFreeNodes": cluster.get("wholeFreeNodes"),
        "blockedDemandGpuEquivalents": figures.get("blockedDemandGpuEquivalents"),
        "blockedPendingPods": len(figures.get("blockedPending") or []),
        "strandedShare": cluster.get("strandedShare"),
        "strandedGpuEquivalents": cluster.get("strandedGpuEquivalents"),
        "freeGpuEquivalents": cluster.get("freeGpuEquivalents"),
    }

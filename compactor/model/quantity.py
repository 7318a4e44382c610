"""Kubernetes resource quantities, parsed exactly.

Parsing is delegated to ``kubernetes.utils.quantity.parse_quantity`` (Decimal, no
float drift).  That parser is more lenient than the API server (it accepts
``NaN``, ``1_000``, surrounding spaces), so a strict syntax check taken from
apimachinery's ``resource.Quantity`` grammar runs first.

Amounts are stored as integers in the units the scheduler uses
(``pkg/scheduler/framework/types.go`` ``Resource.Add``): CPU in millicores
(``MilliValue``), everything else in whole units (``Value``); both round up.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from decimal import Decimal
from functools import lru_cache
from typing import cast

from kubernetes.utils.quantity import parse_quantity as _untyped_parse_quantity

from compactor.errors import InputError

# apimachinery/pkg/api/resource/quantity.go: <signedNumber><suffix>, where the
# suffix is a binary SI, decimal SI or decimal exponent (e3, E-2) suffix.
# Used with ``fullmatch``: ``$`` would also accept a trailing newline ("1\n").
_QUANTITY_SYNTAX = re.compile(
    r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?"
)

MILLI_RESOURCES = frozenset({"cpu"})

# The client library ships py.typed but leaves this function unannotated (mypy --strict: no-untyped-call).
_k8s_parse_quantity = cast(Callable[[str], Decimal], _untyped_parse_quantity)


@lru_cache(maxsize=65536)
def _parse_cached(text: str) -> Decimal:
    if not _QUANTITY_SYNTAX.fullmatch(text):
        raise ValueError(f"invalid quantity {text!r}")
    return Decimal(_k8s_parse_quantity(text))


def parse_quantity(value: object) -> Decimal:
    """Parse a quantity as the API server would; raises ``ValueError`` when it would not."""
    if isinstance(value, bool) or value is None:
        raise ValueError(f"invalid quantity {value!r}")
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"invalid quantity {value!r}")
        return Decimal(repr(value))
    if not isinstance(value, str):
        raise ValueError(f"invalid quantity {value!r}")
    return _parse_cached(value)


def _ceil(value: Decimal) -> int:
    return int(value.to_integral_value(rounding="ROUND_CEILING"))


def to_scheduler_units(resource: str, value: object) -> int:
    """Integer amount in scheduler units (millicores for CPU, units otherwise), rounded up."""
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return _scheduler_units_cached(resource, value)
    return _scheduler_units(resource, value)


@lru_cache(maxsize=65536, typed=True)  # typed: 1, 1.0 and "1" are different inputs (and True is no quantity)
def _scheduler_units_cached(resource: str, value: str | int | float) -> int:
    return _scheduler_units(resource, value)


def _scheduler_units(resource: str, value: object) -> int:
    amount = parse_quantity(value)
    if amount < 0:
        raise ValueError(f"negative quantity {value!r}")
    if resource in MILLI_RESOURCES:
        return _ceil(amount * 1000)
    return _ceil(amount)


def parse_resource_list(
    raw: object, *, source: str = "", obj: str = "", field: str = ""
) -> dict[str, int]:
    """A ``ResourceList`` (name -> quantity) in scheduler units; bad entries raise ``InputError``."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise InputError("expected a map of resource quantities", source=source, obj=obj, field=field)
    result: dict[str, int] = {}
    for name, value in raw.items():
        try:
            result[str(name)] = to_scheduler_units(str(name), value)
        except ValueError as exc:
            raise InputError(str(exc), source=source, obj=obj, field=f"{field}.{name}") from None
    return result


def format_amount(resource: str, amount: int) -> str:
    """Human-readable form of a scheduler-unit amount (``1500m``, ``16Gi``, ``4``)."""
    if resource in MILLI_RESOURCES:
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if resource in {"memory", "ephemeral-storage"} or resource.startswith("hugepages-"):
        for suffix, factor in (("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
            if amount >= factor and amount % factor == 0:
                return f"{amount // factor}{suffix}"
    return str(amount)

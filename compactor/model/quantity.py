"""Kubernetes resource quantities, parsed exactly.

Parsing is delegated to ``kubernetes.utils.quantity.parse_quantity`` (Decimal, no
float drift).  That parser is more lenient than the API server (it accepts
``NaN``, ``1_000``, surrounding spaces), so a strict syntax check taken from
apimachinery's ``resource.Quantity`` grammar runs first.

Amounts are stored as integers in the units the scheduler uses
(``pkg/scheduler/framework/types.go`` ``Resource.Add``): CPU in millicores
(``MilliValue``), everything else in whole units (``Value``); both round up.

Size limits. The API server stores a decimal quantity of any size (a server-side
dry run on v1.36 admits ``cpu: 1e100000`` and keeps it as ``10e99999``) and caps a
binary-SI one at 2^63-1 (``ParseQuantity``: "8Ei" becomes 9223372036854775807).
kube-scheduler counts each amount as an int64 in the units above, so a larger
amount wraps there and no scheduler can place it: it is refused here, before it
reaches arithmetic whose cost grows with its digits or the solver's int64 model.
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

INT64_MAX = 2**63 - 1
# The largest amount kube-scheduler can count, in the quantity's own unit (cores for CPU).
_MAX_AMOUNT = Decimal(INT64_MAX)
_MAX_CORES = _MAX_AMOUNT.scaleb(-3)  # exact: 9223372036854775.807
_BYTE_RESOURCES = frozenset({"memory", "ephemeral-storage"})

# The client library ships py.typed but leaves this function unannotated (mypy --strict: no-untyped-call).
_k8s_parse_quantity = cast(Callable[[str], Decimal], _untyped_parse_quantity)


@lru_cache(maxsize=65536)
def _parse_cached(text: str) -> Decimal:
    if not _QUANTITY_SYNTAX.fullmatch(text):
        raise ValueError(f"invalid quantity {text!r}")
    amount = Decimal(_k8s_parse_quantity(text))
    if text.endswith("i") and abs(amount) > _MAX_AMOUNT:
        return _MAX_AMOUNT.copy_sign(amount)  # ParseQuantity caps binary-SI quantities silently
    return amount


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
    milli = resource in MILLI_RESOURCES
    if amount > (_MAX_CORES if milli else _MAX_AMOUNT):
        unit = (
            "millicores"
            if milli
            else "bytes"
            if resource in _BYTE_RESOURCES or resource.startswith("hugepages-")
            else "units"
        )
        raise ValueError(
            f"quantity {_shown(value)} is too large: kube-scheduler counts {resource} in {unit} "
            f"as a 64-bit integer, at most {format_amount(resource, INT64_MAX)}"
        )
    units = _ceil(amount * 1000) if milli else _ceil(amount)
    # Rounded up, as ParseQuantity rounds to 1n: a positive amount never becomes none (1e-999999999 would underflow to 0).
    return max(units, 1) if amount > 0 else units


def _shown(value: object) -> str:
    """The value as written, shortened: an error message stays one short line even for a 100,000-digit number."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...{text[-12:]} ({len(text)} characters)"


def parse_resource_list(raw: object, *, source: str = "", obj: str = "", field: str = "") -> dict[str, int]:
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
    if resource in _BYTE_RESOURCES or resource.startswith("hugepages-"):
        for suffix, factor in (("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
            if amount >= factor and amount % factor == 0:
                return f"{amount // factor}{suffix}"
    return str(amount)

"""ResourceClaims as the model reads them: what each request asks and which devices are allocated to it.

Apart from the devices (``dra/__init__.py``) and the pools (``inventory``) because a claim is the pod's side of dynamic resource
allocation: what it holds once allocated, and while it is pending, what it asks for (a class, a count, and for a MIG
class the profile its CEL selector names), which is all the model can say of a pod not scheduled yet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from compactor.errors import InputError
from compactor.model.parse import RawObject, sections


@dataclass(frozen=True)
class ClaimResult:
    driver: str
    pool: str
    device: str
    admin: bool


@dataclass(frozen=True)
class ResourceClaim:
    namespace: str
    name: str
    requests: tuple[tuple[str, str, int, str, str], ...]  # (request, deviceClassName, count, allocationMode, profile)
    results: tuple[ClaimResult, ...]
    admin: bool  # a request asks for adminAccess

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def read_claim(raw: RawObject, *, source: str) -> ResourceClaim:
    """Each request's class, count, mode and selected MIG profile, and the devices allocated (none while pending). A
    field of the wrong type is an ``InputError`` naming the claim and the field (the API server validates a live
    claim's types; a snapshot's are whatever the file says). A count is kept as a number, whatever its size: the model
    adds it to the pod's requests, never builds anything that long."""
    _, meta, spec, status = sections(raw, source=source)
    name = f"resourceclaim {meta.namespace or 'default'}/{meta.name}"
    devices = _mapping(spec.devices, source, name, "spec.devices")
    requests, admin = [], False
    for index, request in enumerate(_sequence(devices.get("requests"), source, name, "spec.devices.requests")):
        where = f"spec.devices.requests[{index}]"
        request = _mapping(request, source, name, where)
        exactly = _mapping(request.get("exactly"), source, name, f"{where}.exactly")
        admin = admin or bool(exactly.get("adminAccess"))
        requests.append(
            (
                str(request.get("name") or ""),
                str(exactly.get("deviceClassName") or ""),
                _count(exactly.get("count"), source, name, f"{where}.exactly.count"),
                str(exactly.get("allocationMode") or "ExactCount"),
                _selected_profile(exactly.get("selectors")),
            )
        )
    allocated = ((status.allocation or {}).get("devices") or {}).get("results") or ()
    results = tuple(
        ClaimResult(
            str(r.get("driver") or ""),
            str(r.get("pool") or ""),
            str(r.get("device") or ""),
            bool(r.get("adminAccess")),
        )
        for r in allocated
        if isinstance(r, dict)
    )
    return ResourceClaim(meta.namespace or "default", str(meta.name), tuple(requests), results, admin)


def _mapping(value: Any, source: str, obj: str, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(f"must be an object, got {type(value).__name__}", source=source, obj=obj, field=field)
    return value


def _sequence(value: Any, source: str, obj: str, field: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError(f"must be a list, got {type(value).__name__}", source=source, obj=obj, field=field)
    return value


def _count(value: Any, source: str, obj: str, field: str) -> int:
    """``exactly.count`` (1 when absent, as the API defaults it): a whole number above zero."""
    if value is None:
        return 1
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"must be a whole number above 0, got {value!r}", source=source, obj=obj, field=field)
    return value


_PROFILE_SELECTOR = re.compile(r"""^device\.attributes\[["']([^"']+)["']\]\.profile\s*==\s*["']([^"']+)["']$""")


def _selected_profile(selectors: Any) -> str:
    """The MIG profile a request's CEL selectors ask for, when one of them is exactly a profile equality."""
    for selector in selectors if isinstance(selectors, list) else ():
        expression = str(((selector or {}).get("cel") or {}).get("expression") or "").strip()
        if found := _PROFILE_SELECTOR.match(expression):
            return found.group(2)
    return ""

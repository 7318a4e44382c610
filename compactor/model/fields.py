"""Field checks shared by the parsers: each failure names file, object and field."""

from __future__ import annotations

from typing import Any

from compactor.errors import InputError


def as_object(value: Any, *, source: str, obj: str, field: str) -> dict[str, Any]:
    """A JSON object, or ``{}`` when absent."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(f"expected an object, got {type(value).__name__}", source=source, obj=obj, field=field)
    return value

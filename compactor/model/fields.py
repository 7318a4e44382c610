"""Field checks shared by the parsers: each failure names file, object and field."""

from __future__ import annotations

from typing import Any

import orjson

from compactor.errors import InputError


def as_object(value: Any, *, source: str, obj: str, field: str) -> dict[str, Any]:
    """A JSON object, or ``{}`` when absent."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(f"expected an object, got {type(value).__name__}", source=source, obj=obj, field=field)
    return value


def fast_key(value: Any) -> bytes | str:
    """A memo key for a JSON-shaped value: orjson's encoding (fast, C), or ``repr`` for what JSON cannot hold."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return repr(value)

"""Patches: RFC 7386 JSON merge patches (strategic ones applied alike) and RFC 6902 JSON patches."""

from __future__ import annotations

import copy
from typing import Any


def merge_patch(target: Any, patch: Any, *, strategic: bool = False) -> Any:
    """RFC 7386 JSON merge patch (``strategic`` also drops ``$`` directive keys)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if strategic and key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value, strategic=strategic)
    return result


class PatchError(Exception):
    pass


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"JSON pointer must start with '/': {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str]) -> tuple[Any, str]:
    current = doc
    for part in parts[:-1]:
        if isinstance(current, dict):
            if part not in current:
                raise PatchError(f"path element {part!r} not found")
            current = current[part]
        elif isinstance(current, list):
            try:
                current = current[int(part)]
            except (ValueError, IndexError):
                raise PatchError(f"index {part!r} out of range") from None
        else:
            raise PatchError(f"cannot descend into {type(current).__name__} at {part!r}")
    return current, parts[-1]


def _get(doc: Any, parts: list[str]) -> Any:
    if not parts:
        return doc
    container, last = _parent(doc, parts)
    if isinstance(container, dict):
        if last not in container:
            raise PatchError(f"path element {last!r} not found")
        return container[last]
    if isinstance(container, list):
        try:
            return container[int(last)]
        except (ValueError, IndexError):
            raise PatchError(f"index {last!r} out of range") from None
    raise PatchError("not a container")


def _remove(doc: Any, parts: list[str]) -> Any:
    container, last = _parent(doc, parts)
    if isinstance(container, dict):
        if last not in container:
            raise PatchError(f"cannot remove missing {last!r}")
        return container.pop(last)
    if isinstance(container, list):
        try:
            return container.pop(int(last))
        except (ValueError, IndexError):
            raise PatchError(f"index {last!r} out of range") from None
    raise PatchError("not a container")


def _add(doc: Any, parts: list[str], value: Any, *, replace: bool = False) -> Any:
    if not parts:
        return copy.deepcopy(value)
    container, last = _parent(doc, parts)
    if isinstance(container, dict):
        if replace and last not in container:
            raise PatchError(f"cannot replace missing {last!r}")
        container[last] = copy.deepcopy(value)
    elif isinstance(container, list):
        if last == "-" and not replace:
            container.append(copy.deepcopy(value))
        else:
            try:
                index = int(last)
            except ValueError:
                raise PatchError(f"bad index {last!r}") from None
            if replace:
                if not 0 <= index < len(container):
                    raise PatchError(f"index {index} out of range")
                container[index] = copy.deepcopy(value)
            else:
                if not 0 <= index <= len(container):
                    raise PatchError(f"index {index} out of range")
                container.insert(index, copy.deepcopy(value))
    else:
        raise PatchError("not a container")
    return doc


def json_patch(doc: Any, operations: Any) -> Any:
    """RFC 6902 JSON patch; raises PatchError (422 on the wire) when an operation fails."""
    if not isinstance(operations, list):
        raise ValueError("a JSON patch must be a list of operations")
    result = copy.deepcopy(doc)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise ValueError(f"malformed JSON patch operation: {op!r}")
        kind, parts = op["op"], _pointer(op["path"])
        if kind == "add":
            result = _add(result, parts, op.get("value"))
        elif kind == "remove":
            _remove(result, parts)
        elif kind == "replace":
            result = _add(result, parts, op.get("value"), replace=True) if parts else copy.deepcopy(op.get("value"))
        elif kind == "test":
            if _get(result, parts) != op.get("value"):
                raise PatchError(f"testing value {op['path']} failed")
        elif kind in ("move", "copy"):
            source = _pointer(op.get("from", ""))
            value = _remove(result, source) if kind == "move" else copy.deepcopy(_get(result, source))
            result = _add(result, parts, value)
        else:
            raise ValueError(f"unknown JSON patch operation {kind!r}")
    return result

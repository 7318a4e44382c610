"""Selectors: ``labelSelector`` and ``fieldSelector`` query text, and ``metav1.LabelSelector`` objects (a PDB's)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tests.fakeapi.messages import JSON, ApiError
from tests.fakeapi.resources import ResourceType

_LABEL_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_SET_RE = re.compile(rf"^\s*({_LABEL_KEY})\s+(in|notin)\s+\(([^)]*)\)\s*$")
_EQ_RE = re.compile(rf"^\s*({_LABEL_KEY})\s*(==|!=|=)\s*([-A-Za-z0-9_.]*)\s*$")
_EXISTS_RE = re.compile(rf"^\s*(!?)\s*({_LABEL_KEY})\s*$")


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [p for p in parts if p.strip()]


def label_selector_matcher(text: str) -> Callable[[dict[str, str]], bool]:
    """A predicate on a label map for ``labelSelector`` text; ApiError 400 when malformed."""
    checks: list[Callable[[dict[str, str]], bool]] = []
    for part in _split_top_level(text or ""):
        if m := _SET_RE.match(part):
            key, op = m.group(1), m.group(2)
            values = {v.strip() for v in m.group(3).split(",") if v.strip()}
            if op == "in":
                checks.append(lambda labels, k=key, vs=values: labels.get(k) in vs)
            else:
                checks.append(lambda labels, k=key, vs=values: labels.get(k) not in vs)
        elif m := _EQ_RE.match(part):
            key, op, value = m.groups()
            if op == "!=":
                checks.append(lambda labels, k=key, v=value: labels.get(k) != v)
            else:
                checks.append(lambda labels, k=key, v=value: labels.get(k) == v)
        elif m := _EXISTS_RE.match(part):
            negate, key = m.groups()
            if negate:
                checks.append(lambda labels, k=key: k not in labels)
            else:
                checks.append(lambda labels, k=key: k in labels)
        else:
            raise ApiError(400, f"unable to parse requirement: {part.strip()!r} in labelSelector {text!r}")
    return lambda labels: all(check(labels) for check in checks)


def selector_matches(selector: JSON | None, labels: dict[str, str]) -> bool:
    """``metav1.LabelSelector`` semantics: None selects nothing, ``{}`` selects everything."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), set(expr.get("values") or [])
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _field_value(obj: JSON, path: str) -> str:
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, dict):
            return ""
        current = current.get(part)
    if current is None:
        return ""
    if isinstance(current, bool):
        return "true" if current else "false"
    return str(current)


def field_selector_matcher(rt: ResourceType, text: str) -> Callable[[JSON], bool]:
    checks: list[Callable[[JSON], bool]] = []
    for part in _split_top_level(text or ""):
        m = re.match(r"^\s*([A-Za-z0-9_.]+)\s*(==|!=|=)\s*(.*?)\s*$", part)
        if not m:
            raise ApiError(400, f"invalid field selector: {part.strip()!r}")
        path, op, value = m.groups()
        allowed = path in ("metadata.name", "metadata.namespace") or rt.field_labels is None or path in rt.field_labels
        if not allowed:
            raise ApiError(400, f"field label not supported: {path}")
        if op == "!=":
            checks.append(lambda obj, p=path, v=value: _field_value(obj, p) != v)
        else:
            checks.append(lambda obj, p=path, v=value: _field_value(obj, p) == v)
    return lambda obj: all(check(obj) for check in checks)

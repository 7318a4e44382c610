"""Driving NVIDIA's mig-manager: set ``nvidia.com/mig.config`` on a drained node and read how it went.

mig-manager watches the label, reconfigures every GPU of the node (it evicts nothing:
the executor drains the node first) and reports in ``nvidia.com/mig.config.state``:
``pending``, ``rebooting``, ``success`` or ``failed``. The state label still says
``success`` from the previous layout for a moment after the change, so a re-cut counts
as done only when the state says ``success`` *and* the node's allocatable shows the new
layout's GPU resources (the device plugin restarts and re-advertises them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from compactor.actions.port import annotations as ann
from compactor.actions.port.client import Obj
from compactor.actions.port.objects import NodeView
from compactor.model.gpu import MIG_CONFIG_LABEL, MIG_CONFIG_STATE_LABEL
from compactor.model.quantity import parse_resource_list
from compactor.model.resources import is_gpu_resource

CONFIG_LABEL = MIG_CONFIG_LABEL
STATE_LABEL = MIG_CONFIG_STATE_LABEL
EXPECTED = ann.MIG_EXPECTED  # the GPU resources the new layout should advertise (JSON), for people and dry runs
RECUT_FAILED = ann.MIG_RECUT_FAILED  # why a re-cut failed; the node stays fenced for an operator


def relabel_patch(to_config: str, expected: Mapping[str, int], *, previous: str = "") -> dict[str, Any]:
    """The re-cut asked of mig-manager, with what it should bring and (``previous``) the layout it replaces, recorded on the
    node for an operator who restores it after a failure."""
    marks = {EXPECTED: json.dumps(dict(sorted(expected.items())), separators=(",", ":"))}
    if previous:
        marks[ann.MIG_PREVIOUS] = previous
    return {"metadata": {"labels": {CONFIG_LABEL: to_config}, "annotations": marks}}


def restore_hint(node: str, previous: str) -> str:
    """What an operator runs to give the node its previous layout back (the compactor never re-cuts a node it failed on)."""
    if not previous:
        return "its previous layout was not recorded"
    return f"previous layout {previous}: kubectl label node {node} {CONFIG_LABEL}={previous} --overwrite restores it"


def labels(node: Obj) -> dict[str, str]:
    return NodeView(node).labels


def gpu_allocatable(node: Obj) -> dict[str, int]:
    raw = NodeView(node).status.get("allocatable") or {}
    parsed = parse_resource_list(
        raw, source="cluster", obj=f"Node {(node.get('metadata') or {}).get('name')}", field="status.allocatable"
    )
    return {r: v for r, v in parsed.items() if is_gpu_resource(r) and v}


def progress(node: Obj, to_config: str, expected: Mapping[str, int]) -> str:
    """``done``, ``failed``, or ``waiting`` (pending, rebooting, a stale success, allocatable not yet updated)."""
    found = labels(node)
    if found.get(CONFIG_LABEL) != to_config:
        return "failed"  # someone changed the label back: not ours to fight over
    state = found.get(STATE_LABEL, "")
    if state == "failed":
        return "failed"
    if state == "success" and gpu_allocatable(node) == {r: v for r, v in expected.items() if v}:
        return "done"
    return "waiting"


def simulate(node: Obj) -> None:
    """What mig-manager and the device plugin do once they are done (dry runs): state success, the expected slices advertised."""
    meta = node.setdefault("metadata", {})
    expected = json.loads((meta.get("annotations") or {}).get(EXPECTED, "{}"))
    meta.setdefault("labels", {})[STATE_LABEL] = "success"
    status = node.setdefault("status", {})
    for key in ("allocatable", "capacity"):
        kept = {r: v for r, v in (status.get(key) or {}).items() if not is_gpu_resource(r)}
        status[key] = {**kept, **{r: str(v) for r, v in expected.items()}}


def failed_patch(reason: str) -> dict[str, Any]:
    """Keep the node fenced and marked, so that recovery leaves it to an operator."""
    return {"metadata": {"annotations": {ann.AFTER_DRAIN: "keepCordoned", RECUT_FAILED: reason[:500]}}}

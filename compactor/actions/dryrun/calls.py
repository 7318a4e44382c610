"""The calls a dry run records, and how each is said: as a kubectl user reads it, and as JSON.

Apart from the recording client (``dryrun.py``) because saying a call is a concern of its own, read by the run's
report, and needs nothing of the simulated world but what the call recorded.

``describe`` says each recorded write as a kubectl user reads it, one line per API call: ``cordon node/a``,
``evict pod/ns/p (policy/v1 Eviction)``, ``annotate node/a key=value key-``, ``taint node/a key=value:Effect
key:Effect-``, ``label node/a key=value``, ``event Normal Reason node/a: message``, ``create configmap/ns/name``. A node
patch that does what several kubectl commands would do in one request lists them joined by `` + `` (they happen
together or not at all). Plumbing is left out: the patch's ``resourceVersion`` precondition, the eviction's UID
precondition. ``json_record`` gives the same call as a JSON-ready record (``intendedCalls``).
"""

from __future__ import annotations

import copy
import json
import shlex
from dataclasses import dataclass, field
from typing import Any

from compactor.actions.port.client import EvictionOutcome, EvictionResult, Obj, ObjectRef
from compactor.settings.execution import ExecutorSettings

DEFAULT_STATE_NAMESPACE = str(ExecutorSettings.model_fields["state_namespace"].default)
EVICTION_API = "policy/v1 Eviction"


@dataclass
class RecordedCall:
    method: str
    args: dict[str, Any] = field(default_factory=dict)


def node_marks(node: Obj) -> dict[str, Any]:
    """What a node patch can change, as it was before the patch: to say a patch as the changes it makes."""
    meta, spec = node.get("metadata") or {}, node.get("spec") or {}
    return {
        "labels": dict(meta.get("labels") or {}),
        "annotations": dict(meta.get("annotations") or {}),
        "taints": copy.deepcopy(spec.get("taints") or []),
        "unschedulable": bool(spec.get("unschedulable")),
    }


def describe(call: RecordedCall) -> str:
    """One recorded call as a kubectl user reads it (no Python reprs, no preconditions); see the module's docstring."""
    args = call.args
    if call.method == "patch_node":
        return describe_node_patch(args["name"], args["patch"], args.get("before"))
    if call.method == "evict":
        return _describe_eviction(args)
    if call.method == "create_event":
        involved = args["involved"]
        return f"event {args.get('type') or 'Normal'} {args['reason']} {object_ref(involved)}: {args['message']}"
    if call.method == "patch_config_map":
        return describe_steering_patch(args)
    if call.method == "scale_deployment":
        return (
            f"scale deployment/{args['namespace']}/{args['name']} --current-replicas={args['expect']} --replicas={args['to']} "
            f"(make-before-break)"
        )
    meta = args["patch"].get("metadata") or {} if call.method == "patch_pod" else {}
    if meta.get("annotations") or meta.get("labels"):
        said = [
            f"{verb} pod/{args['namespace']}/{args['name']} "
            + " ".join(f"{k}={v}" if v is not None else f"{k}-" for k, v in meta[key].items())
            for verb, key in (("label", "labels"), ("annotate", "annotations"))
            if meta.get(key)
        ]
        return "; ".join(said)
    if call.method == "patch_pod":
        added = [
            t for t in (args["patch"].get("spec") or {}).get("tolerations") or [] if t not in (args.get("before") or [])
        ]
        shown = " ".join(_toleration(t) for t in added) or "(no change)"
        return f"patch pod/{args['namespace']}/{args['name']} (add toleration {shown})"
    if call.method == "write_state":
        ref = f"configmap/{args.get('namespace') or DEFAULT_STATE_NAMESPACE}/{args['name']}"
        verb = args.get("verb") or ("delete" if args.get("cleared") else "apply")
        phase = f" (executor state, phase {args['phase']})" if args.get("phase") else " (executor state)"
        return f"{verb} {ref}{phase}"
    return f"{call.method} {' '.join(f'{k}={v}' for k, v in args.items())}"


def describe_steering_patch(args: dict[str, Any]) -> str:
    """A steering entry written or removed, as the merge patch does it and what it means for the owner's next pod."""
    ref = f"configmap/{args.get('namespace') or DEFAULT_STATE_NAMESPACE}/{args['name']}"
    owners = args.get("owners") or {}
    parts = []
    for uid, node in (args.get("entries") or {}).items():
        owner = owners.get(uid, uid)
        parts.append(
            f"{uid}={node} (pin the next pod of {owner} to node/{node})" if node else f"{uid}- (unpin {owner})"
        )
    return f"patch {ref} data {'; '.join(parts)}"


def _toleration(toleration: dict[str, Any]) -> str:
    key, value, effect = toleration.get("key", ""), toleration.get("value"), toleration.get("effect", "")
    return f"{key}={value}:{effect}" if value else f"{key}:{effect}"


def object_ref(ref: ObjectRef) -> str:
    """``node/a``, ``pod/ns/name``: kind in lower case, the namespace only for a namespaced object."""
    return "/".join(part for part in (ref.kind.lower(), ref.namespace, ref.name) if part)


def describe_node_patch(name: str, patch: Obj, before: dict[str, Any] | None = None) -> str:
    """A node merge patch as the kubectl commands that make the same changes, joined by `` + `` (one request).

    ``before``: the node's labels, annotations, taints as they were (``node_marks``): a merge patch replaces
    ``spec.taints`` whole, so the taints added and removed are the difference; a removal of a label or
    annotation the node does not carry is left out (it changes nothing). Without it every removal is said
    and the taints are said as the list that replaces the node's.
    """
    ref = f"node/{name}"
    meta, spec = patch.get("metadata") or {}, patch.get("spec") or {}
    parts = []
    if "unschedulable" in spec:
        parts.append(f"{'cordon' if spec['unschedulable'] else 'uncordon'} {ref}")
    if "taints" in spec and before is None:  # the list is replaced whole; what it replaces is not known here
        kept = " ".join(_taint_changes([], spec["taints"] or []))
        parts.append(f"taint {ref} (taints replaced by: {kept})" if kept else f"taint {ref} (all taints removed)")
    elif "taints" in spec:
        changes = _taint_changes((before or {}).get("taints") or [], spec["taints"] or [])
        if changes:
            parts.append(f"taint {ref} {' '.join(changes)}")
    for verb, key in (("label", "labels"), ("annotate", "annotations")):
        changes = _pair_changes(meta.get(key) or {}, None if before is None else before.get(key) or {})
        if changes:
            parts.append(f"{verb} {ref} {' '.join(changes)}")
    return " + ".join(parts) or f"patch {ref} (no change)"


def _pair_changes(patch: dict[str, Any], before: dict[str, Any] | None) -> list[str]:
    """``key=value`` for each key set, ``key-`` for each removed (as ``kubectl label``/``annotate`` take them)."""
    changes = []
    for key, value in patch.items():
        if value is None:
            if before is None or key in before:
                changes.append(f"{key}-")
        else:
            changes.append(f"{key}={_quoted(value)}")
    return changes


def _taint_changes(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[str]:
    """``key=value:Effect`` for each taint added (or given a new value), ``key:Effect-`` for each removed."""

    def ident(taint: dict[str, Any]) -> tuple[str, str]:
        return str(taint.get("key", "")), str(taint.get("effect", ""))

    old = {ident(t): t.get("value") for t in before}
    new = {ident(t): t.get("value") for t in after}
    changes = []
    for (key, effect), value in new.items():
        if (key, effect) not in old or old[(key, effect)] != value:
            changes.append(f"{key}={_quoted(value)}:{effect}" if value else f"{key}:{effect}")
    changes.extend(f"{key}:{effect}-" for key, effect in old if (key, effect) not in new)
    return changes


def _quoted(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return shlex.quote(text)


def _describe_eviction(args: dict[str, Any]) -> str:
    line = f"evict pod/{args['namespace']}/{args['name']} ({EVICTION_API})"
    result = args.get("result")
    if not isinstance(result, EvictionResult):
        return line
    if result.outcome == EvictionOutcome.EVICTED:
        return line + (": admitted by the API server (dryRun=All)" if args.get("admission") else "")
    answer = f"{result.outcome.value} ({result.status})" + (f": {result.message}" if result.message else "")
    return f"{line} -> {answer}"


def json_record(call: RecordedCall) -> dict[str, Any]:
    """A recorded call as JSON (``intendedCalls``), in the same order as ``intended_changes``."""
    args = call.args
    if call.method == "patch_node":
        patch = copy.deepcopy(args["patch"])
        (patch.get("metadata") or {}).pop("resourceVersion", None)
        if patch.get("metadata") == {}:
            del patch["metadata"]
        return {"call": "patch", "object": f"node/{args['name']}", "mergePatch": patch}
    if call.method == "evict":
        record: dict[str, Any] = {"call": "evict", "object": f"pod/{args['namespace']}/{args['name']}"}
        result = args.get("result")
        if isinstance(result, EvictionResult):
            record["answer"] = {"outcome": result.outcome.value, "status": result.status, "message": result.message}
        return record
    if call.method == "create_event":
        return {
            "call": "create",
            "object": "event",
            "involvedObject": object_ref(args["involved"]),
            "type": args.get("type") or "Normal",
            "reason": args["reason"],
            "message": args["message"],
        }
    if call.method == "patch_config_map":
        return {
            "call": "patch",
            "object": f"configmap/{args.get('namespace') or DEFAULT_STATE_NAMESPACE}/{args['name']}",
            "mergePatch": {"data": args.get("entries") or {}},
        }
    if call.method == "patch_pod":
        patch = copy.deepcopy(args["patch"])
        annotations = (patch.pop("metadata", None) or {}).get("annotations")
        if annotations:
            patch["metadata"] = {"annotations": annotations}
        return {"call": "patch", "object": f"pod/{args['namespace']}/{args['name']}", "mergePatch": patch}
    if call.method == "scale_deployment":
        return {
            "call": "patch",
            "object": f"deployment/{args['namespace']}/{args['name']}",
            "jsonPatch": [
                {"op": "test", "path": "/spec/replicas", "value": args["expect"]},
                {"op": "replace", "path": "/spec/replicas", "value": args["to"]},
            ],
        }
    if call.method == "write_state":
        record = {
            "call": args.get("verb") or "apply",
            "object": f"configmap/{args.get('namespace') or DEFAULT_STATE_NAMESPACE}/{args['name']}",
        }
        return {**record, "phase": args["phase"]} if args.get("phase") else record
    return {"call": call.method}

"""The dry-run client: same executor, a world that only pretends to change.

Reads come from a copy of the cluster's objects (a snapshot file or a live read);
writes are recorded, applied to the copy, and never sent, except that with
``admission`` set each eviction is also POSTed with ``dryRun=All`` so the API
server's PDB admission answers for real. An eviction makes the planned
replacement appear, Ready, on the plan's target node, so the executor walks the
same path it would for real.

``intended_changes`` says each recorded write as a kubectl user reads it, one line per
API call: ``cordon node/a``, ``evict pod/ns/p (policy/v1 Eviction)``, ``annotate node/a
key=value key-``, ``taint node/a key=value:Effect key:Effect-``, ``label node/a key=value``,
``event Normal Reason node/a: message``, ``create configmap/ns/name``. A node patch that
does what several kubectl commands would do in one request lists them joined by `` + ``
(they happen together or not at all). Plumbing is left out: the patch's
``resourceVersion`` precondition, the eviction's UID precondition.
"""

from __future__ import annotations

import copy
import itertools
import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from compactor.actions import migmanager
from compactor.actions.client import ClusterClient, EvictionOutcome, EvictionResult, Obj, ObjectRef, T
from compactor.actions.owners import DELETION_COST, FIRST_TO_GO, controller_ref, selector_text_matches
from compactor.actions.pods import pod_key
from compactor.actions.steering.pin import creator_of, pin_for, pinned
from compactor.model.load import DEFAULT_POOL_LABEL
from compactor.model.parse import parse_node, parse_pod
from compactor.model.scheduling import untolerated_taint
from compactor.planner.plan import CompactionPlan
from compactor.settings import ExecutorSettings

DEFAULT_STATE_NAMESPACE = str(ExecutorSettings.model_fields["state_namespace"].default)
EVICTION_API = "policy/v1 Eviction"
# What a dry run cannot know, whatever it shows: said at the end of every dry run's output.
NOT_KNOWN_UNTIL_REAL_RUN = (
    "where kube-scheduler binds each replacement (the run steers it to the planned node and rolls back if it lands elsewhere)",
    "whether each PDB allows each eviction at that moment (--server-dry-run on a live cluster asks the API server now)",
)

CORDON_TAINT = "node.kubernetes.io/unschedulable"  # the node lifecycle controller writes it after a cordon


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """RFC 7386 JSON merge patch."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
    return target


def _consumers(claim: Obj) -> set[tuple[str, str]]:
    namespace = (claim.get("metadata") or {}).get("namespace", "default")
    return {(namespace, str(c.get("name"))) for c in (claim.get("status") or {}).get("reservedFor") or ()}


@dataclass
class RecordedCall:
    method: str
    args: dict[str, Any] = field(default_factory=dict)


class RecordingClient:
    def __init__(
        self,
        objects: list[Obj],
        plan: CompactionPlan | None = None,
        *,
        admission: ClusterClient | None = None,
        namespace: str = DEFAULT_STATE_NAMESPACE,
        probe: ClusterClient | None = None,
    ) -> None:
        self.nodes = {o["metadata"]["name"]: copy.deepcopy(o) for o in objects if o.get("kind") == "Node"}
        self.pods = {pod_key(o): copy.deepcopy(o) for o in objects if o.get("kind") == "Pod"}
        self.pdbs = [copy.deepcopy(o) for o in objects if o.get("kind") == "PodDisruptionBudget"]
        self.dra = [copy.deepcopy(o) for o in objects if o.get("kind") in ("ResourceSlice", "ResourceClaim")]
        self.owners = {
            (o["metadata"].get("namespace", "default"), o["kind"], o["metadata"]["name"]): copy.deepcopy(o)
            for o in objects
            if o.get("kind") in ("ReplicaSet", "StatefulSet", "Deployment")
        }
        self.autoscalers = [copy.deepcopy(o) for o in objects if o.get("kind") == "HorizontalPodAutoscaler"]
        self.admissions = {
            (o["kind"], o["metadata"]["name"]): copy.deepcopy(o)
            for o in objects
            if o.get("kind") in ("MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding")
        }
        self.config_maps = {
            o["metadata"]["name"]: copy.deepcopy(o)
            for o in objects
            if o.get("kind") == "ConfigMap" and (o.get("metadata") or {}).get("namespace") == namespace
        }
        # a live cluster's reads of the steering policy, so a live dry run steers as a real run would
        self.probe = probe
        self.targets = {m.pod: m.to_node for m in plan.moves} if plan else {}
        self.placements = {p.pod: p.to_node for p in plan.placed_pending} if plan else {}
        self.admission = admission
        self.namespace = namespace  # of the state ConfigMap, as the real client would write it
        self.calls: list[RecordedCall] = []
        self.states: dict[str, dict[str, str]] = {}
        self._serial = itertools.count(1)

    # reads
    def list_nodes(self) -> list[Obj]:
        return copy.deepcopy(list(self.nodes.values()))

    def get_node(self, name: str) -> Obj | None:
        return copy.deepcopy(self.nodes.get(name))

    def list_pods(
        self, *, node_name: str | None = None, namespace: str | None = None, label_selector: str | None = None
    ) -> list[Obj]:
        return copy.deepcopy(
            [
                p
                for p in self.pods.values()
                if (node_name is None or (p.get("spec") or {}).get("nodeName") == node_name)
                and (namespace is None or (p.get("metadata") or {}).get("namespace", "default") == namespace)
                and selector_text_matches(label_selector or "", (p.get("metadata") or {}).get("labels") or {})
            ]
        )

    def scan_nodes(self, keep: Callable[[Obj], T | None]) -> list[T]:
        return [k for node in self.nodes.values() if (k := keep(copy.deepcopy(node))) is not None]

    def scan_pods(self, keep: Callable[[Obj], T | None]) -> list[T]:
        return [k for pod in self.pods.values() if (k := keep(copy.deepcopy(pod))) is not None]

    def get_owner(self, namespace: str, kind: str, name: str) -> Obj | None:
        found = self.owners.get((namespace, kind, name))
        if found is None and self.probe is not None:  # a live dry run reads owners as a real run would
            found = self.probe.get_owner(namespace, kind, name)
            if found is not None:
                self.owners[(namespace, kind, name)] = found
        return copy.deepcopy(found)

    def list_autoscalers(self, namespace: str) -> list[Obj]:
        if self.probe is not None:
            return self.probe.list_autoscalers(namespace)
        return copy.deepcopy(
            [o for o in self.autoscalers if (o.get("metadata") or {}).get("namespace", "default") == namespace]
        )

    def get_admission(self, kind: str, name: str) -> Obj | None:
        if self.probe is not None:
            return self.probe.get_admission(kind, name)
        return copy.deepcopy(self.admissions.get((kind, name)))

    def get_config_map(self, name: str) -> Obj | None:
        if name not in self.config_maps and self.probe is not None:
            found = self.probe.get_config_map(name)
            if found is not None:
                self.config_maps[name] = found
        return copy.deepcopy(self.config_maps.get(name))

    def get_pod(self, namespace: str, name: str) -> Obj | None:
        return copy.deepcopy(self.pods.get(f"{namespace}/{name}"))

    def list_dra(self, kind: str) -> list[Obj]:
        """The world's ResourceSlices or ResourceClaims; a claim whose pods were all evicted here is gone with them, as the
        resourceclaim controller deletes a template's claim with its pod (a replacement's own claim is not simulated:
        its node runs pods anyway)."""
        names = {(pod_key(p).split("/", 1)[0], str(p["metadata"]["name"])) for p in self.pods.values()}
        return copy.deepcopy(
            [
                o
                for o in self.dra
                if o.get("kind") == kind and (kind != "ResourceClaim" or not _consumers(o) or _consumers(o) & names)
            ]
        )

    def get_resource_claim(self, namespace: str, name: str) -> Obj | None:
        found = [
            o
            for o in self.dra
            if o.get("kind") == "ResourceClaim"
            and (o.get("metadata") or {}).get("namespace", "default") == namespace
            and (o.get("metadata") or {}).get("name") == name
        ]
        return copy.deepcopy(found[0]) if found else None

    def list_pdbs(self, *, namespace: str | None = None) -> list[Obj]:
        return copy.deepcopy(
            [
                p
                for p in self.pdbs
                if namespace is None or (p.get("metadata") or {}).get("namespace", "default") == namespace
            ]
        )

    # writes (recorded)
    def patch_node(self, name: str, patch: Obj) -> Obj:
        before = _marks(self.nodes[name]) if name in self.nodes else None
        self.calls.append(RecordedCall("patch_node", {"name": name, "patch": copy.deepcopy(patch), "before": before}))
        node = _merge(self.nodes[name], patch)
        if migmanager.CONFIG_LABEL in ((patch.get("metadata") or {}).get("labels") or {}):
            migmanager.simulate(node)  # mig-manager's part in a dry run: the re-cut succeeds
        spec = node.setdefault("spec", {})
        taints = [t for t in spec.get("taints") or [] if t.get("key") != CORDON_TAINT]
        if spec.get("unschedulable"):  # the node lifecycle controller's part: the cordon's taint follows it
            taints.append({"key": CORDON_TAINT, "effect": "NoSchedule"})
        spec["taints"] = taints or None
        if not taints:
            del spec["taints"]
        if not spec.get("unschedulable"):
            self._bind_pending(name)
        return copy.deepcopy(node)

    def _bind_pending(self, node: str) -> None:
        """The scheduler's part in a dry run: a pending pod the plan places here binds once the node is schedulable and the
        pod tolerates its taints (a fence lifted, a reservation it tolerates)."""
        taints = parse_node(self.nodes[node], source="dry run", pool_label=DEFAULT_POOL_LABEL, warnings=[]).taints
        for key, target in self.placements.items():
            pod = self.pods.get(key)
            if (
                target == node
                and pod is not None
                and not (pod.get("spec") or {}).get("nodeName")
                and untolerated_taint(parse_pod(pod, source="dry run").tolerations, taints) is None
            ):
                pod.setdefault("spec", {})["nodeName"] = node
                pod["status"] = {
                    "phase": "Running",
                    "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
                }

    def patch_config_map(self, name: str, patch: Obj) -> Obj:
        entries = dict(patch.get("data") or {})
        owners = {uid: self._owner_named(uid) for uid in entries}
        self.calls.append(
            RecordedCall(
                "patch_config_map", {"namespace": self.namespace, "name": name, "entries": entries, "owners": owners}
            )
        )
        current = self.config_maps.setdefault(
            name, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": self.namespace}}
        )
        return copy.deepcopy(_merge(current, {"data": entries}))

    def patch_pod(self, namespace: str, name: str, patch: Obj) -> Obj:
        before = copy.deepcopy(
            ((self.pods.get(f"{namespace}/{name}") or {}).get("spec") or {}).get("tolerations") or []
        )
        self.calls.append(
            RecordedCall(
                "patch_pod", {"namespace": namespace, "name": name, "patch": copy.deepcopy(patch), "before": before}
            )
        )
        pod = self.pods[f"{namespace}/{name}"]
        meta = {k: v for k, v in (patch.get("metadata") or {}).items() if k in ("annotations", "labels") and v}
        _merge(pod, {k: v for k, v in patch.items() if k != "metadata"} | ({"metadata": meta} if meta else {}))
        target = self.placements.get(f"{namespace}/{name}")
        if (
            target is not None
            and target in self.nodes
            and not (self.nodes[target].get("spec") or {}).get("unschedulable")
        ):
            self._bind_pending(target)  # a toleration of the node's reservation: the scheduler binds it there now
        return copy.deepcopy(pod)

    def _owner_named(self, uid: str) -> str:
        """``ReplicaSet ns/name`` for a controller uid (from any of its pods), the uid itself when no pod names it."""
        for pod in self.pods.values():
            for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
                if ref.get("controller") and ref.get("uid") == uid:
                    return (
                        f"{ref.get('kind')} {(pod.get('metadata') or {}).get('namespace', 'default')}/{ref.get('name')}"
                    )
        return uid

    def scale_deployment(self, namespace: str, name: str, *, expect: int, to: int) -> bool:
        """Recorded; simulated as the Deployment and ReplicaSet controllers would: one more replica lands on the planned
        node of the owner's moving pod, one fewer removes the pod marked first to go."""
        self.calls.append(
            RecordedCall("scale_deployment", {"namespace": namespace, "name": name, "expect": expect, "to": to})
        )
        deployment = self.owners.get((namespace, "Deployment", name))
        if deployment is None or int((deployment.get("spec") or {}).get("replicas") or 0) != expect:
            return False
        deployment = self.owners[(namespace, "Deployment", name)] = _merge(deployment, {"spec": {"replicas": to}})
        if to > expect:
            # the owner's first planned pod still here, in plan order (moved ones are gone): the one this surge moves
            moving = next(
                (
                    key
                    for key in self.targets
                    if key in self.pods
                    and key.startswith(f"{namespace}/")
                    and self._deployment_of(self.pods[key]) == name
                ),
                None,
            )
            if moving is not None:
                self._replace(self.pods[moving], self.targets[moving])
        else:
            first = next(
                (
                    key
                    for key, p in self.pods.items()
                    if key.startswith(f"{namespace}/")
                    and ((p.get("metadata") or {}).get("annotations") or {}).get(DELETION_COST) == FIRST_TO_GO
                ),
                None,
            )
            if first is not None:
                del self.pods[first]
        return True

    def _deployment_of(self, pod: Obj) -> str:
        ref = controller_ref(pod) or {}
        replica_set = self.get_owner(
            (pod.get("metadata") or {}).get("namespace", "default"), "ReplicaSet", str(ref.get("name", ""))
        )
        return str((controller_ref(replica_set or {}) or {}).get("name", ""))

    def evict(
        self, namespace: str, name: str, *, uid: str = "", resource_version: str = "", dry_run: bool = False
    ) -> EvictionResult:
        call = RecordedCall("evict", {"namespace": namespace, "name": name, "admission": self.admission is not None})
        self.calls.append(call)
        result = self._evict(namespace, name, uid, resource_version)
        call.args["result"] = result
        return result

    def _evict(self, namespace: str, name: str, uid: str, resource_version: str = "") -> EvictionResult:
        key = f"{namespace}/{name}"
        if self.admission is not None:
            answer = self.admission.evict(namespace, name, uid=uid, resource_version=resource_version, dry_run=True)
            if answer.outcome not in (EvictionOutcome.EVICTED, EvictionOutcome.GONE):
                return answer
        pod = self.pods.get(key)
        if pod is None:
            return EvictionResult(EvictionOutcome.GONE, 404, "not found")
        if uid and (pod.get("metadata") or {}).get("uid") != uid:
            return EvictionResult(EvictionOutcome.CONFLICT, 409, f"Precondition failed: UID in precondition: {uid}")
        if resource_version and (pod.get("metadata") or {}).get("resourceVersion") not in (None, resource_version):
            return EvictionResult(EvictionOutcome.CONFLICT, 409, "the object has been modified")
        del self.pods[key]
        self._replace(pod, self.targets.get(key))
        return EvictionResult(EvictionOutcome.EVICTED, 201)

    def _replace(self, pod: Obj, target: str | None) -> None:
        if not (pod.get("metadata") or {}).get("ownerReferences") or target is None:
            return
        clone = copy.deepcopy(pod)
        meta = clone["metadata"]
        meta["name"] = f"{meta['name']}-dryrun-{next(self._serial)}"
        meta["uid"] = f"dryrun-{next(self._serial)}"
        meta.pop("deletionTimestamp", None)
        clone["spec"]["nodeName"] = target
        clone["status"] = {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
        }
        for parameters in self.config_maps.values():  # the steering policy's part: the owner's next pod comes pinned
            node = pin_for(clone, (parameters.get("data") or {}), creator_of(clone))
            if node is not None:
                clone = pinned(clone, node)
        self.pods[pod_key(clone)] = clone

    def create_event(self, involved: ObjectRef, *, reason: str, message: str, type_: str = "Normal") -> None:
        self.calls.append(
            RecordedCall("create_event", {"involved": involved, "reason": reason, "message": message, "type": type_})
        )

    def read_state(self, name: str) -> dict[str, str] | None:
        state = self.states.get(name)
        return dict(state) if state is not None else None

    def write_state(self, name: str, data: dict[str, str] | None) -> None:
        verb = "delete" if data is None else "replace" if name in self.states else "create"
        self.calls.append(
            RecordedCall(
                "write_state",
                {
                    "namespace": self.namespace,
                    "name": name,
                    "cleared": data is None,
                    "verb": verb,
                    "phase": (data or {}).get("phase", ""),
                },
            )
        )
        if data is None:
            self.states.pop(name, None)
        else:
            self.states[name] = dict(data)

    def intended_changes(self) -> list[str]:
        """The writes a real run would make, one kubectl-style line per API call (see ``describe``)."""
        return [describe(call) for call in self.calls]

    def intended_calls(self) -> list[dict[str, Any]]:
        """The same writes as JSON-ready records (a node patch as the merge patch it sends, without its precondition)."""
        return [_record(call) for call in self.calls]


def _marks(node: Obj) -> dict[str, Any]:
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

    ``before``: the node's labels, annotations, taints as they were (``_marks``): a merge patch replaces
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


def _record(call: RecordedCall) -> dict[str, Any]:
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

"""The dry-run client: same executor, a world that only pretends to change.

Reads come from a copy of the cluster's objects (a snapshot file or a live read);
writes are recorded, applied to the copy, and never sent, except that with
``admission`` set each eviction is also POSTed with ``dryRun=All`` so the API
server's PDB admission answers for real. An eviction makes the planned
replacement appear, Ready, on the plan's target node, so the executor walks the
same path it would for real.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field
from typing import Any

from compactor.actions import migmanager
from compactor.actions.annotations import CORDON_TAINT
from compactor.actions.client import ClusterClient, EvictionOutcome, EvictionResult, Obj, ObjectRef
from compactor.actions.pods import pod_key
from compactor.planner.plan import CompactionPlan


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


@dataclass
class RecordedCall:
    method: str
    args: dict[str, Any] = field(default_factory=dict)


class RecordingClient:
    def __init__(self, objects: list[Obj], plan: CompactionPlan | None = None, *, admission: ClusterClient | None = None) -> None:
        self.nodes = {o["metadata"]["name"]: copy.deepcopy(o) for o in objects if o.get("kind") == "Node"}
        self.pods = {pod_key(o): copy.deepcopy(o) for o in objects if o.get("kind") == "Pod"}
        self.pdbs = [copy.deepcopy(o) for o in objects if o.get("kind") == "PodDisruptionBudget"]
        self.targets = {m.pod: m.to_node for m in plan.moves} if plan else {}
        self.placements = {p.pod: p.to_node for p in plan.placed_pending} if plan else {}
        self.admission = admission
        self.calls: list[RecordedCall] = []
        self.states: dict[str, dict[str, str]] = {}
        self._serial = itertools.count(1)

    # reads
    def list_nodes(self) -> list[Obj]:
        return copy.deepcopy(list(self.nodes.values()))

    def get_node(self, name: str) -> Obj | None:
        return copy.deepcopy(self.nodes.get(name))

    def list_pods(self, *, node_name: str | None = None, namespace: str | None = None) -> list[Obj]:
        return copy.deepcopy([p for p in self.pods.values()
                              if (node_name is None or (p.get("spec") or {}).get("nodeName") == node_name)
                              and (namespace is None or (p.get("metadata") or {}).get("namespace", "default") == namespace)])

    def get_pod(self, namespace: str, name: str) -> Obj | None:
        return copy.deepcopy(self.pods.get(f"{namespace}/{name}"))

    def list_pdbs(self, *, namespace: str | None = None) -> list[Obj]:
        return copy.deepcopy([p for p in self.pdbs if namespace is None or (p.get("metadata") or {}).get("namespace", "default") == namespace])

    # writes (recorded)
    def patch_node(self, name: str, patch: Obj) -> Obj:
        self.calls.append(RecordedCall("patch_node", {"name": name, "patch": copy.deepcopy(patch)}))
        node = _merge(self.nodes[name], patch)
        if migmanager.CONFIG_LABEL in ((patch.get("metadata") or {}).get("labels") or {}):
            migmanager.simulate(node)  # mig-manager's part in a dry run: the re-cut succeeds
        spec = node.setdefault("spec", {})
        taints = [t for t in spec.get("taints") or [] if t.get("key") != CORDON_TAINT]
        if spec.get("unschedulable"):  # the node lifecycle controller's part: the cordon's taint follows it
            taints.append({"key": CORDON_TAINT, "effect": "NoSchedule"})
        else:
            self._bind_pending(name)
        spec["taints"] = taints or None
        if not taints:
            del spec["taints"]
        return copy.deepcopy(node)

    def _bind_pending(self, node: str) -> None:
        """The scheduler's part in a dry run: a pending pod the plan places here binds once the node is schedulable."""
        for key, target in self.placements.items():
            pod = self.pods.get(key)
            if target == node and pod is not None and not (pod.get("spec") or {}).get("nodeName"):
                pod.setdefault("spec", {})["nodeName"] = node
                pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}]}

    def evict(self, namespace: str, name: str, *, uid: str = "", dry_run: bool = False) -> EvictionResult:
        self.calls.append(RecordedCall("evict", {"namespace": namespace, "name": name}))
        key = f"{namespace}/{name}"
        if self.admission is not None:
            answer = self.admission.evict(namespace, name, uid=uid, dry_run=True)
            if answer.outcome not in (EvictionOutcome.EVICTED, EvictionOutcome.GONE):
                return answer
        pod = self.pods.get(key)
        if pod is None:
            return EvictionResult(EvictionOutcome.GONE, 404, "not found")
        if uid and (pod.get("metadata") or {}).get("uid") != uid:
            return EvictionResult(EvictionOutcome.CONFLICT, 409, f"Precondition failed: UID in precondition: {uid}")
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
        clone["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}]}
        self.pods[pod_key(clone)] = clone

    def create_event(self, involved: ObjectRef, *, reason: str, message: str, type_: str = "Normal") -> None:
        ref = f"{involved.kind}/{involved.namespace}/{involved.name}"
        self.calls.append(RecordedCall("create_event", {"involved": ref, "reason": reason, "message": message, "type": type_}))

    def read_state(self, name: str) -> dict[str, str] | None:
        state = self.states.get(name)
        return dict(state) if state is not None else None

    def write_state(self, name: str, data: dict[str, str] | None) -> None:
        self.calls.append(RecordedCall("write_state", {"name": name, "cleared": data is None}))
        if data is None:
            self.states.pop(name, None)
        else:
            self.states[name] = dict(data)

    def intended_changes(self) -> list[str]:
        """The writes a real run would make, as lines for the report."""
        lines = []
        for call in self.calls:
            if call.method == "patch_node":
                lines.append(f"patch node {call.args['name']}: {call.args['patch']}")
            elif call.method == "evict":
                lines.append(f"evict {call.args['namespace']}/{call.args['name']}")
            elif call.method == "create_event":
                lines.append(f"event {call.args['reason']} on {call.args['involved']}: {call.args['message']}")
        return lines

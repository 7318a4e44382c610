"""The dry-run client: same executor, a world that only pretends to change.

Reads come from a copy of the cluster's objects (a snapshot file or a live read);
writes are recorded, applied to the copy, and never sent, except that with
``admission`` set each eviction is also POSTed with ``dryRun=All`` so the API
server's PDB admission answers for real. An eviction makes the planned
replacement appear, Ready, on the plan's target node, so the executor walks the
same path it would for real.

The copy and what the cluster's controllers make of each write are ``world.py``;
the recorded calls and how each is said (kubectl lines, JSON) are ``calls.py``.
"""

from __future__ import annotations

import copy
from typing import Any

from compactor.actions.dryrun.calls import DEFAULT_STATE_NAMESPACE, RecordedCall, describe, json_record, node_marks
from compactor.actions.dryrun.world import DryRunWorld
from compactor.actions.port.client import ClusterClient, EvictionOutcome, EvictionResult, Obj, ObjectRef
from compactor.planner.plan import CompactionPlan

# What a dry run cannot know, whatever it shows: said at the end of every dry run's output.
NOT_KNOWN_UNTIL_REAL_RUN = (
    "where kube-scheduler binds each replacement (the run steers it to the planned node and rolls back if it lands elsewhere)",
    "whether each PDB allows each eviction at that moment (--server-dry-run on a live cluster asks the API server now)",
)
# With --server-dry-run the API server answered each eviction now: what is left unknown is whether it still would then.
NOT_KNOWN_AFTER_SERVER_DRY_RUN = (
    NOT_KNOWN_UNTIL_REAL_RUN[0],
    "whether each PDB still allows each eviction when the run reaches it (this server dry run asked each one now)",
)


def not_known_until_real_run(client: RecordingClient) -> tuple[str, ...]:
    """What this dry run cannot know (issue 45: a server dry run said "not known" of the PDB answers it had asked)."""
    return NOT_KNOWN_AFTER_SERVER_DRY_RUN if client.admission is not None else NOT_KNOWN_UNTIL_REAL_RUN


class RecordingClient(DryRunWorld):
    """The ``ClusterClient`` of a dry run: the world's reads, and each write recorded in ``calls`` before the world
    answers it. ``admission``: a live cluster asked whether each eviction would be admitted (``dryRun=All``)."""

    def __init__(
        self,
        objects: list[Obj],
        plan: CompactionPlan | None = None,
        *,
        admission: ClusterClient | None = None,
        namespace: str = DEFAULT_STATE_NAMESPACE,
        probe: ClusterClient | None = None,
    ) -> None:
        super().__init__(objects, plan, namespace=namespace, probe=probe)
        self.admission = admission
        self.calls: list[RecordedCall] = []
        self.states: dict[str, dict[str, str]] = {}

    # writes (recorded)
    def patch_node(self, name: str, patch: Obj) -> Obj:
        before = node_marks(self.nodes[name]) if name in self.nodes else None
        self.calls.append(RecordedCall("patch_node", {"name": name, "patch": copy.deepcopy(patch), "before": before}))
        return self._apply_node_patch(name, patch)

    def patch_config_map(self, name: str, patch: Obj) -> Obj:
        entries = dict(patch.get("data") or {})
        owners = {uid: self._owner_named(uid) for uid in entries}
        self.calls.append(
            RecordedCall(
                "patch_config_map", {"namespace": self.namespace, "name": name, "entries": entries, "owners": owners}
            )
        )
        return self._apply_config_map_data(name, entries)

    def patch_pod(self, namespace: str, name: str, patch: Obj) -> Obj:
        before = copy.deepcopy(
            ((self.pods.get(f"{namespace}/{name}") or {}).get("spec") or {}).get("tolerations") or []
        )
        self.calls.append(
            RecordedCall(
                "patch_pod", {"namespace": namespace, "name": name, "patch": copy.deepcopy(patch), "before": before}
            )
        )
        return self._apply_pod_patch(namespace, name, patch)

    def scale_deployment(self, namespace: str, name: str, *, expect: int, to: int) -> bool:
        """Recorded; simulated as the Deployment and ReplicaSet controllers would (``DryRunWorld._apply_scale``)."""
        self.calls.append(
            RecordedCall("scale_deployment", {"namespace": namespace, "name": name, "expect": expect, "to": to})
        )
        return self._apply_scale(namespace, name, expect=expect, to=to)

    def evict(
        self, namespace: str, name: str, *, uid: str = "", resource_version: str = "", dry_run: bool = False
    ) -> EvictionResult:
        call = RecordedCall("evict", {"namespace": namespace, "name": name, "admission": self.admission is not None})
        self.calls.append(call)
        result = self._evict(namespace, name, uid, resource_version)
        call.args["result"] = result
        return result

    def _evict(self, namespace: str, name: str, uid: str, resource_version: str = "") -> EvictionResult:
        if self.admission is not None:
            answer = self.admission.evict(namespace, name, uid=uid, resource_version=resource_version, dry_run=True)
            if answer.outcome not in (EvictionOutcome.EVICTED, EvictionOutcome.GONE):
                return answer
        return self._apply_eviction(namespace, name, uid, resource_version)

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
        return [json_record(call) for call in self.calls]

"""``FakeCluster``: the ``ClusterClient`` interface over the store, simulated time (``advance``, ``settle``, ``tick``:
one pass of every controller), the hooks tests use to change the world, and the invariants and views they check.
"""

from __future__ import annotations

import copy
import itertools
import random
from collections import deque
from collections.abc import Callable
from typing import Any

from compactor.actions.port.client import EvictionResult, Obj, ObjectRef
from compactor.errors import ClusterError
from tests.fakeapi.selectors import label_selector_matcher
from tests.fakecluster.clock import FakeClock
from tests.fakecluster.controllers import Controllers
from tests.fakecluster.faults import Failure
from tests.fakecluster.migmanager import FakeMigManager
from tests.fakecluster.objects import (
    TERMINAL,
    Call,
    Controller,
    T,
    _controller_ref_of,
    _iso,
    _phase,
    is_fenced,
    merge_patch,
)

CONFIGMAP_LIMIT = 1024 * 1024  # validation.MaxConfigMapSize: keys plus values


class FakeCluster(Controllers):
    """``ClusterClient`` over a simulated cluster. The stores (``nodes``, ``pods``, ``pdbs``) are live; the interface hands out copies."""

    def __init__(
        self,
        objects: list[dict[str, Any]],
        *,
        scheduler: str = "cooperative",
        ready_after: float = 5.0,
        schedule_after: float = 1.0,
        grace_seconds: float = 1.0,
        taint_lag: float = 0.5,
    ) -> None:
        self.time = 0.0
        self.scheduler = scheduler
        self.ready_after = ready_after
        self.schedule_after = schedule_after
        self.grace_seconds = grace_seconds
        self.taint_lag = taint_lag
        self.nodes: dict[str, Obj] = {}
        self.pods: dict[tuple[str, str], Obj] = {}
        self.pdbs: dict[tuple[str, str], Obj] = {}
        # ResourceSlices, ResourceClaims (as given, and those made for pods: fakecluster/dra.py), templates, classes
        self.dra: list[Obj] = []
        self._suffixes = 0
        self.controllers: dict[tuple[str, str, str], Controller] = {}
        self.state: dict[str, dict[str, str]] = {}
        self.config_maps: dict[
            str, Obj
        ] = {}  # ConfigMaps of the compactor's namespace besides its state (steering parameters)
        self.admissions: dict[tuple[str, str], Obj] = {}  # (kind, name) -> MutatingAdmissionPolicy / binding
        self.username: str | None = "system:admin"  # who the API server says this client is (who_am_i)
        self.deployments: dict[
            tuple[str, str], Obj
        ] = {}  # (namespace, name) -> Deployment (spec.replicas drives its ReplicaSet)
        self.deployment_of: dict[tuple[str, str], str] = {}  # (namespace, ReplicaSet) -> the Deployment that owns it
        self.autoscalers: list[Obj] = []  # HorizontalPodAutoscalers (listed, never acted on)
        self.jobs: dict[
            tuple[str, str], Obj
        ] = {}  # (namespace, name) -> Job: its backoffLimit, podFailurePolicy, status
        self.scale_downs: list[str] = []  # "ns/name" of every pod a ReplicaSet deleted to scale down
        self.pinned: list[tuple[str, str]] = []  # (pod, node) of every pod created pinned by the steering policy
        self.events: list[dict[str, Any]] = []
        self.calls: list[Call] = []  # every interface call, reads included
        self.history: list[Call] = []  # write calls only
        self.evicted: list[str] = []  # "ns/name" of every granted (non-dry-run) eviction
        self.violations: list[str] = []
        self.clock = FakeClock(self)
        self._lost: list[str] = []
        self._pending_since: dict[str, float] = {}  # uid -> when it became an unbound Pending pod
        self._bound_at: dict[str, float] = {}  # uid -> when bound, until the kubelet starts it
        self._deleting_at: dict[str, float] = {}  # uid -> when deletion was requested
        self._flipped_at: dict[
            str, float
        ] = {}  # node -> when spec.unschedulable last changed (the taint follows later)
        self._overrides: dict[tuple[str, str], int] = {}
        self._granted: dict[tuple[str, str], list[str]] = {}  # healthy pods evicted under a PDB since its last check
        self._failures: dict[str, deque[Failure]] = {}
        self._crash: tuple[int, str] | None = None
        self._writes = 0
        self._rng = random.Random(0)
        self._mig_manager: FakeMigManager | None = None
        self._uids = itertools.count(1)
        self._versions = itertools.count(1)
        for obj in objects:
            self._load(copy.deepcopy(obj))
        self._recompute_pdbs()

    @property
    def mig_manager(self) -> FakeMigManager | None:
        return self._mig_manager

    @mig_manager.setter
    def mig_manager(self, manager: FakeMigManager | None) -> None:
        if manager is not None:
            manager.watch(self)
        self._mig_manager = manager

    # ---- ClusterClient ---------------------------------------------------------------------------

    def list_nodes(self) -> list[Obj]:
        return self._call("list_nodes", {}, lambda: [copy.deepcopy(n) for _, n in sorted(self.nodes.items())])

    def get_node(self, name: str) -> Obj | None:
        return self._call("get_node", {"name": name}, lambda: copy.deepcopy(self.nodes.get(name)))

    def list_pods(
        self, *, node_name: str | None = None, namespace: str | None = None, label_selector: str | None = None
    ) -> list[Obj]:
        def run() -> list[Obj]:
            selects = label_selector_matcher(label_selector or "")
            return [
                copy.deepcopy(p)
                for (ns, _), p in sorted(self.pods.items())
                if (node_name is None or p.get("spec", {}).get("nodeName") == node_name)
                and namespace in (None, ns)
                and selects(p["metadata"].get("labels") or {})
            ]

        return self._call(
            "list_pods", {"node_name": node_name, "namespace": namespace, "label_selector": label_selector}, run
        )

    def list_pending_pods(self) -> list[Obj]:
        """On the wire: pods with the field selector ``spec.nodeName=,status.phase=Pending``."""
        return self._call(
            "list_pending_pods",
            {},
            lambda: [
                copy.deepcopy(p)
                for _, p in sorted(self.pods.items())
                if not p.get("spec", {}).get("nodeName")
                and (p.get("status") or {}).get("phase", "Pending") == "Pending"
            ],
        )

    def scan_nodes(self, keep: Callable[[Obj], T | None]) -> list[T]:
        """On the wire the same request as ``list_nodes()``: recorded, and failed by ``fail_next("list_nodes")``, as one."""
        return self._call(
            "list_nodes",
            {},
            lambda: [k for _, n in sorted(self.nodes.items()) if (k := keep(copy.deepcopy(n))) is not None],
        )

    def scan_pods(self, keep: Callable[[Obj], T | None]) -> list[T]:
        """On the wire the same request as ``list_pods()``: recorded, and failed by ``fail_next("list_pods")``, as one."""
        return self._call(
            "list_pods",
            {"node_name": None, "namespace": None, "label_selector": None},
            lambda: [k for _, p in sorted(self.pods.items()) if (k := keep(copy.deepcopy(p))) is not None],
        )

    def get_owner(self, namespace: str, kind: str, name: str) -> Obj | None:
        """The controller as the API serves it: its uid and a selector of its template's labels (what its pods carry)."""

        def run() -> Obj | None:
            if kind == "Deployment":
                return copy.deepcopy(self.deployments.get((namespace, name)))
            if kind == "Job" and (namespace, name) in self.jobs:
                return copy.deepcopy(self.jobs[(namespace, name)])
            ctl = self.controllers.get((kind, namespace, name))
            if ctl is None:
                return None
            ref = _controller_ref_of(ctl.template) or {}
            meta: Obj = {"name": name, "namespace": namespace, "uid": ref.get("uid")}
            owner = self.deployment_of.get((namespace, name))
            if kind == "ReplicaSet" and owner is not None:
                uid = self.deployments[(namespace, owner)]["metadata"].get("uid")
                meta["ownerReferences"] = [
                    {"apiVersion": "apps/v1", "kind": "Deployment", "name": owner, "uid": uid, "controller": True}
                ]
            return {
                "apiVersion": "batch/v1" if kind == "Job" else "apps/v1",
                "kind": kind,
                "metadata": meta,
                "spec": {
                    "replicas": ctl.replicas,
                    "selector": {"matchLabels": dict(ctl.template["metadata"].get("labels") or {})},
                },
            }

        return self._call("get_owner", {"namespace": namespace, "kind": kind, "name": name}, run)

    def list_autoscalers(self, namespace: str) -> list[Obj]:
        return self._call(
            "list_autoscalers",
            {"namespace": namespace},
            lambda: [
                copy.deepcopy(h) for h in self.autoscalers if h["metadata"].get("namespace", "default") == namespace
            ],
        )

    def scale_deployment(self, namespace: str, name: str, *, expect: int, to: int) -> bool:
        """The JSON patch's ``test`` then ``replace`` of ``spec.replicas``; the Deployment controller passes it on to the one
        ReplicaSet it owns (``_reconcile_controllers`` then adds a pod, or deletes the one ranked first)."""

        def run() -> bool:
            deployment = self.deployments.get((namespace, name))
            if deployment is None or int(deployment["spec"].get("replicas") or 0) != expect:
                return False
            deployment["spec"]["replicas"] = to
            for (ns, replica_set), owner in self.deployment_of.items():
                if (ns, owner) == (namespace, name) and ("ReplicaSet", ns, replica_set) in self.controllers:
                    self.controllers[("ReplicaSet", ns, replica_set)].replicas = to
            return True

        return self._call("scale_deployment", {"namespace": namespace, "name": name, "expect": expect, "to": to}, run)

    def get_admission(self, kind: str, name: str) -> Obj | None:
        return self._call(
            "get_admission", {"kind": kind, "name": name}, lambda: copy.deepcopy(self.admissions.get((kind, name)))
        )

    def who_am_i(self) -> str | None:
        return self._call("who_am_i", {}, lambda: self.username)

    def get_config_map(self, name: str) -> Obj | None:
        return self._call("get_config_map", {"name": name}, lambda: copy.deepcopy(self.config_maps.get(name)))

    def patch_config_map(self, name: str, patch: Obj) -> Obj:
        """Merge patch; ``metadata.resourceVersion`` in it is a precondition (409), as on the API server."""

        def run() -> Obj:
            current = self.config_maps.get(name)
            if current is None:
                raise ClusterError(f'configmaps "{name}" not found', status=404)
            expected = (patch.get("metadata") or {}).get("resourceVersion")
            if expected is not None and expected != current["metadata"].get("resourceVersion"):
                raise ClusterError(
                    f'Operation cannot be fulfilled on configmaps "{name}": the object has been modified', status=409
                )
            meta = {k: v for k, v in (patch.get("metadata") or {}).items() if k != "resourceVersion"}
            updated = merge_patch(current, {**patch, "metadata": meta})
            updated["metadata"]["resourceVersion"] = str(next(self._versions))
            self.config_maps[name] = updated
            return copy.deepcopy(updated)

        return self._call("patch_config_map", {"name": name, "patch": patch}, run)

    def patch_pod(self, namespace: str, name: str, patch: Obj) -> Obj:
        """Merge patch of ``metadata.annotations``, ``metadata.labels`` and of ``spec.tolerations``, which may only grow (pod
        update validation), with a resourceVersion precondition."""

        def run() -> Obj:
            pod = self.pods.get((namespace, name))
            if pod is None:
                raise ClusterError(f'pods "{name}" not found', status=404)
            expected = (patch.get("metadata") or {}).get("resourceVersion")
            if expected is not None and expected != pod["metadata"].get("resourceVersion"):
                raise ClusterError(
                    f'Operation cannot be fulfilled on pods "{name}": the object has been modified', status=409
                )
            if set(patch) - {"metadata", "spec"} or set(patch.get("spec") or {}) - {"tolerations"}:
                raise ClusterError(
                    f'Pod "{name}" is invalid: spec: Forbidden: pod updates may not change fields other than '
                    "spec.tolerations (only additions to existing tolerations)",
                    status=422,
                )
            for key in ("annotations", "labels"):  # a merge patch: a null value removes the key, as the API server does
                change = (patch.get("metadata") or {}).get(key)
                if change:
                    pod["metadata"][key] = merge_patch(pod["metadata"].get(key) or {}, change)
            if "spec" not in patch:
                self._touch_pod(pod)
                return copy.deepcopy(pod)
            old, new = pod["spec"].get("tolerations") or [], patch["spec"]["tolerations"] or []
            if any(t not in new for t in old):
                raise ClusterError(
                    f'Pod "{name}" is invalid: spec.tolerations: Forbidden: existing toleration can not be modified '
                    "except its tolerationSeconds",
                    status=422,
                )
            pod["spec"]["tolerations"] = copy.deepcopy(new)
            self._touch_pod(pod)
            return copy.deepcopy(pod)

        return self._call("patch_pod", {"namespace": namespace, "name": name, "patch": patch}, run)

    def get_pod(self, namespace: str, name: str) -> Obj | None:
        return self._call(
            "get_pod", {"namespace": namespace, "name": name}, lambda: copy.deepcopy(self.pods.get((namespace, name)))
        )

    def list_dra(self, kind: str) -> list[Obj]:
        """ResourceSlices, ResourceClaims (as given, and those the fake scheduler made and allocated for template claims:
        fakecluster/dra.py) or DeviceClasses."""
        return self._call("list_dra", {"kind": kind}, lambda: [copy.deepcopy(o) for o in self.dra if o["kind"] == kind])

    def get_resource_claim(self, namespace: str, name: str) -> Obj | None:
        def find() -> Obj | None:
            for o in self.dra:
                meta = o["metadata"]
                if o["kind"] == "ResourceClaim" and (meta.get("namespace", "default"), meta["name"]) == (
                    namespace,
                    name,
                ):
                    return copy.deepcopy(o)
            return None

        return self._call("get_resource_claim", {"namespace": namespace, "name": name}, find)

    def list_pdbs(self, *, namespace: str | None = None) -> list[Obj]:
        return self._call(
            "list_pdbs",
            {"namespace": namespace},
            lambda: [copy.deepcopy(p) for (ns, _), p in sorted(self.pdbs.items()) if namespace in (None, ns)],
        )

    def patch_node(self, name: str, patch: Obj) -> Obj:
        """JSON merge patch (RFC 7386) on the node: ``metadata.labels/annotations``, ``spec.unschedulable``, ``spec.taints``."""

        def run() -> Obj:
            if name not in self.nodes:
                raise ClusterError(f'nodes "{name}" not found', status=404)
            if not isinstance(patch, dict):
                raise ClusterError("a merge patch on a node must be an object", status=400)
            expected = (patch.get("metadata") or {}).get("resourceVersion")
            if expected is not None and expected != self.nodes[name]["metadata"].get("resourceVersion"):
                raise ClusterError(
                    f'Operation cannot be fulfilled on nodes "{name}": the object has been modified; '
                    "please apply your changes to the latest version and try again",
                    status=409,
                )
            was = bool(self.nodes[name].get("spec", {}).get("unschedulable"))
            self.nodes[name] = merge_patch(self.nodes[name], patch)
            self.touch_node(name)
            if bool(self.nodes[name].get("spec", {}).get("unschedulable")) != was:
                self._flipped_at[name] = self.time
            return copy.deepcopy(self.nodes[name])

        return self._call("patch_node", {"name": name, "patch": patch}, run)

    def evict(
        self, namespace: str, name: str, *, uid: str = "", resource_version: str = "", dry_run: bool = False
    ) -> EvictionResult:
        """POST a policy/v1 Eviction. Never a DELETE: PDBs must be asked."""
        return self._call(
            "evict",
            {
                "namespace": namespace,
                "name": name,
                "dry_run": dry_run,
                "uid": uid,
                "resource_version": resource_version,
            },
            lambda: self._evict(namespace, name, dry_run, uid, resource_version),
        )

    def create_event(self, involved: ObjectRef, *, reason: str, message: str, type_: str = "Normal") -> None:
        def run() -> None:
            self.events.append(
                {"involved": involved, "reason": reason, "message": message, "type": type_, "time": _iso(self.time)}
            )

        self._call("create_event", {"involved": involved, "reason": reason, "message": message, "type_": type_}, run)

    def read_state(self, name: str) -> dict[str, str] | None:
        """The data of the executor's state ConfigMap, or None when absent."""
        return self._call("read_state", {"name": name}, lambda: copy.deepcopy(self.state.get(name)))

    def write_state(self, name: str, data: dict[str, str] | None) -> None:
        """Create/replace the state ConfigMap's data; None deletes it. Like the API server, refuses more than 1 MiB of data."""

        def run() -> None:
            if data is not None and sum(len(k) + len(v.encode()) for k, v in data.items()) > CONFIGMAP_LIMIT:
                raise ClusterError(
                    f'ConfigMap "{name}" is invalid: []: Too long: must have at most {CONFIGMAP_LIMIT} bytes',
                    status=422,
                )
            if data is None:
                self.state.pop(name, None)
            else:
                self.state[name] = dict(data)

        self._call("write_state", {"name": name, "data": data}, run)

    # ---- time ------------------------------------------------------------------------------------

    def advance(self, seconds: float) -> None:
        """Move simulated time forward, stopping at every due event on the way."""
        target = self.time + seconds
        self._run_until(target)
        self.time = target
        self.tick()

    def settle(self, seconds: float = 60.0) -> float:
        """Advance from event to event until nothing more is due (at most ``seconds``); returns the time reached."""
        self._run_until(self.time + seconds)
        return self.time

    def tick(self) -> None:
        """One pass of every controller at the current time."""
        self._reap()
        if self.mig_manager is not None:
            self.mig_manager.step(self)
        self._follow_cordons()
        self._reconcile_controllers()
        self._schedule()
        self._run_kubelet()
        self._recompute_pdbs()

    def _next_due(self) -> float | None:
        due = [t + self._grace_of(uid) for uid, t in self._deleting_at.items()]
        due += [t + self.taint_lag for t in self._flipped_at.values()]
        due += [t + self.ready_after for t in self._bound_at.values()]
        delay = self._schedule_delay()
        if delay is not None:
            due += [t + delay for t in self._pending_since.values()]
        return min((d for d in due if d > self.time), default=None)

    def _run_until(self, deadline: float) -> None:
        self.tick()
        while (due := self._next_due()) is not None and due <= deadline:
            self.time = due
            self.tick()

    # ---- test hooks (failures and crashes: faults.py) --------------------------------------------

    def gpu_pods_bound(self, node: str) -> list[str]:
        """Unfinished GPU pods bound to ``node`` (terminating ones too: their containers still hold the GPUs)."""
        return [
            f"{ns}/{n}"
            for (ns, n), p in sorted(self.pods.items())
            if p.get("spec", {}).get("nodeName") == node and _phase(p) not in TERMINAL and self._requests(p).gpu_part()
        ]

    def add_pod(self, obj: Obj) -> None:
        """Create a pod now (bound if it names a node, as a DaemonSet would); a controller owner scales up by one."""
        self._admit(copy.deepcopy(obj))

    def set_pdb_allowed(self, namespace: str, name: str, value: int | None, *, sticky: bool = True) -> None:
        """Force ``status.disruptionsAllowed``; sticky values survive recomputes until set to None."""
        key = (namespace, name)
        if value is None:
            self._overrides.pop(key, None)
            return
        self.pdbs[key]["status"]["disruptionsAllowed"] = value
        if sticky:
            self._overrides[key] = value
        else:
            self._overrides.pop(key, None)

    # ---- invariants and views --------------------------------------------------------------------

    def assert_no_pdb_violation(self) -> None:
        """Fails when a granted eviction of a healthy pod left its PDB below desiredHealthy."""
        self._check_budgets()
        if self.violations:
            raise AssertionError("PDB violations:\n" + "\n".join(self.violations))

    def lost_pods(self) -> list[str]:
        """Controllers with fewer live pods than replicas, and evicted pods nobody recreates. Call ``settle()`` first."""
        lost = [ctl.ref for _, ctl in sorted(self.controllers.items()) if len(self._live(ctl)) < ctl.replicas]
        return lost + self._lost

    def cordoned_nodes(self) -> list[str]:
        """Nodes closed to new pods by a compactor's fence (its ``compactor.io/fence-<installation>`` taint) or a cordon."""
        return sorted(
            name for name, n in self.nodes.items() if (n.get("spec") or {}).get("unschedulable") or is_fenced(n)
        )

    def is_fenced(self, name: str) -> bool:
        """``name`` carries a compactor's fence taint."""
        return is_fenced(self.nodes[name])

    def operator_cordons(self) -> list[str]:
        """Nodes whose cordon bit (``spec.unschedulable``, ``kubectl cordon``) is set: never the compactor's doing."""
        return sorted(name for name, n in self.nodes.items() if (n.get("spec") or {}).get("unschedulable"))

    def node_gpu_pods(self, name: str) -> list[str]:
        """``ns/name`` of the non-terminal pods bound to ``name`` that request GPUs (terminating ones still hold them)."""
        return [
            f"{ns}/{pod_name}"
            for (ns, pod_name), p in sorted(self.pods.items())
            if p.get("spec", {}).get("nodeName") == name and _phase(p) not in TERMINAL and self._requests(p).gpu_part()
        ]

    def pod(self, namespace: str, name: str) -> Obj:
        """The live stored pod (tests only)."""
        return self.pods[(namespace, name)]

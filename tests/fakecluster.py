"""A fake cluster that enforces the rules the executor relies on, in simulated time.

``FakeCluster`` implements ``ClusterClient`` over an in-memory store of API-shaped
dicts (``tests/builders.py``) and plays the parts of the cluster that react to the
executor: the eviction subresource (PDB checks, 404/429/500), the disruption
controller (PDB status), ReplicaSet/StatefulSet/Job controllers (replacements, created under each controller's own user,
as kube-controller-manager creates them), a scheduler (cooperative best-fit, spreading like the default profile, or
adversarial) and the kubelet (binding -> Running/Ready).
Time only moves through ``FakeClock.sleep``/``advance``/``settle``; each step runs
``tick()``. Tests can inject failures and crashes and check invariants afterwards.
Nothing here uses real time or unseeded randomness.
"""

from __future__ import annotations

import copy
import itertools
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypeVar

from compactor.actions.annotations import FENCE_TAINT_PREFIX
from compactor.actions.client import EvictionOutcome, EvictionResult, Obj, ObjectRef
from compactor.actions.steering.pin import creator_of, pin_for, pinned
from compactor.errors import ClusterError
from compactor.model.load import DEFAULT_POOL_LABEL
from compactor.model.parse import parse_label_selector, parse_node, parse_pod
from compactor.model.resources import Resources, is_gpu_resource
from compactor.model.scheduling import label_selector_matches, why_ineligible
from compactor.model.types import Node
from tests.fakeapi.server import label_selector_matcher


def is_fenced(node: Obj) -> bool:
    """The node carries a compactor's ``compactor.io/fence-<installation>`` taint."""
    return any(
        str(t.get("key", "")).startswith(FENCE_TAINT_PREFIX) for t in (node.get("spec") or {}).get("taints") or []
    )


EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
STEERING_CONFIGMAP = "gpu-compactor-steering"  # executor.steering_name's default: policy, binding and parameters
SOURCE = "fakecluster"
SCHEDULER_MODES = ("cooperative", "spread", "ignore-cordon", "never", "slow")
WRITES = ("patch_node", "evict", "create_event", "write_state", "patch_config_map", "patch_pod", "scale_deployment")
METHODS = (
    "list_nodes",
    "get_node",
    "list_pods",
    "get_pod",
    "list_pdbs",
    "list_dra",
    "get_resource_claim",
    "read_state",
    "get_owner",
    "get_admission",
    "get_config_map",
    "list_autoscalers",
    *WRITES,
)
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
ADMISSION_KINDS = ("MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding")
CONTROLLER_KINDS = ("ReplicaSet", "StatefulSet", "Job")  # a Job recreates an evicted pod too (while under backoffLimit)
TERMINAL = ("Succeeded", "Failed")
JOB_BACKOFF_LIMIT = 6  # batch/v1 JobSpec.backoffLimit's default
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
CONFIGMAP_LIMIT = 1024 * 1024  # validation.MaxConfigMapSize: keys plus values
PDB_BLOCKED = "Cannot evict pod as it would violate the pod's disruption budget."
PDB_MULTIPLE = "Internal error occurred: This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand
_OUTCOME_STATUS = {
    EvictionOutcome.EVICTED: 201,
    EvictionOutcome.GONE: 404,
    EvictionOutcome.BLOCKED: 429,
    EvictionOutcome.CONFLICT: 409,
    EvictionOutcome.ERROR: 500,
    EvictionOutcome.FORBIDDEN: 403,
}

SchedulerMode = Literal["cooperative", "spread", "ignore-cordon", "never", "slow"]
Failure = EvictionOutcome | EvictionResult | int | BaseException
T = TypeVar("T")


MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_STATE_LABEL = "nvidia.com/mig.config.state"


@dataclass
class FakeMigManager:
    """NVIDIA's mig-manager as the executor meets it: it watches ``nvidia.com/mig.config`` and reports in
    ``nvidia.com/mig.config.state`` (``pending`` at once, then ``success`` or ``failed``); on success the device
    plugin re-advertises the node's GPU resources as ``layouts[config]`` says, ``allocatable_lag`` seconds later.
    It evicts nothing: a GPU pod still bound to the node when the change is noticed makes the re-cut fail, as
    reconfiguring a GPU in use does. ``outcome``: success | failed | stuck (stays pending for ever)."""

    layouts: dict[str, dict[str, int]]
    takes: float = 30.0
    outcome: str = "success"
    allocatable_lag: float = 0.0
    applied: dict[str, str] = field(default_factory=dict)  # node -> the layout its GPUs have now
    started: dict[str, float] = field(default_factory=dict)  # node -> when the change was noticed
    reconfigured: list[tuple[str, str]] = field(default_factory=list)  # (node, layout) of every finished re-cut

    def watch(self, cluster: FakeCluster) -> None:
        """Start watching: the layouts the nodes carry now are the ones their GPUs have."""
        for name, node in cluster.nodes.items():
            self.applied.setdefault(name, ((node.get("metadata") or {}).get("labels") or {}).get(MIG_CONFIG_LABEL, ""))

    def step(self, cluster: FakeCluster) -> None:
        for name, node in cluster.nodes.items():
            labels = node.setdefault("metadata", {}).setdefault("labels", {})
            wanted = labels.get(MIG_CONFIG_LABEL, "")
            applied = self.applied.setdefault(name, wanted)
            if wanted == applied:
                continue
            if name not in self.started:
                self.started[name] = cluster.time
                labels[MIG_STATE_LABEL] = "failed" if cluster.gpu_pods_bound(name) else "pending"
                cluster.touch_node(name)
            self._progress(cluster, name, node, labels, wanted)

    def _progress(self, cluster: FakeCluster, name: str, node: Obj, labels: dict[str, str], wanted: str) -> None:
        elapsed = cluster.time - self.started[name]
        if labels[MIG_STATE_LABEL] == "failed" or self.outcome == "stuck" or elapsed < self.takes:
            return
        if self.outcome == "failed":
            labels[MIG_STATE_LABEL] = "failed"
            cluster.touch_node(name)
            return
        if labels[MIG_STATE_LABEL] != "success":
            labels[MIG_STATE_LABEL] = "success"
            cluster.touch_node(name)
        if elapsed >= self.takes + self.allocatable_lag:
            status = node.setdefault("status", {})
            for key in ("allocatable", "capacity"):
                kept = {r: v for r, v in (status.get(key) or {}).items() if not is_gpu_resource(r)}
                status[key] = {**kept, **{r: str(v) for r, v in self.layouts[wanted].items()}}
            self.applied[name] = wanted
            del self.started[name]
            self.reconfigured.append((name, wanted))
            cluster.touch_node(name)


class Crash(BaseException):
    """The executor process dying mid-write; a BaseException so ``except Exception`` cannot swallow it."""

    def __init__(self, method: str, when: str) -> None:
        super().__init__(f"simulated crash {when} {method}")
        self.method = method
        self.when = when


@dataclass(frozen=True)
class Call:
    method: str
    args: dict[str, Any]
    time: float  # simulated seconds since EPOCH


@dataclass
class Controller:
    kind: str  # ReplicaSet | StatefulSet | Job
    namespace: str
    name: str
    replicas: int
    template: Obj
    names: list[str] = field(default_factory=list)  # the pod names it started with (StatefulSet identities)

    @property
    def ref(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def job_ignores_disruptions(spec: Obj) -> bool:
    """Whether a Job's ``podFailurePolicy`` has a rule that ignores pods failed by a disruption (``DisruptionTarget``)."""
    return any(
        rule.get("action") == "Ignore"
        and any(c.get("type") == "DisruptionTarget" for c in rule.get("onPodConditions") or [])
        for rule in (spec.get("podFailurePolicy") or {}).get("rules") or []
    )


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: null deletes a key, objects merge, anything else (lists too) replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _iso(seconds: float) -> str:
    return (EPOCH + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _key(obj: Obj) -> tuple[str, str]:
    meta = obj["metadata"]
    return meta.get("namespace") or "default", meta["name"]


def _phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def _terminating(pod: Obj) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def _ready(pod: Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _set_condition(pod: Obj, type_: str, status: bool) -> None:
    conditions = [c for c in pod.setdefault("status", {}).get("conditions") or [] if c.get("type") != type_]
    pod["status"]["conditions"] = [*conditions, {"type": type_, "status": "True" if status else "False"}]


def _controller_ref_of(pod: Obj) -> Obj | None:
    return next((ref for ref in pod["metadata"].get("ownerReferences") or [] if ref.get("controller")), None)


def _controller_ref(pod: Obj) -> tuple[str, str, str] | None:
    for ref in pod["metadata"].get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") in CONTROLLER_KINDS:
            return str(ref["kind"]), _key(pod)[0], str(ref["name"])
    return None


def _selects(selector: Obj | None, labels: dict[str, str]) -> bool:
    """A label selector (metav1.LabelSelector) against ``labels``; absent or empty selects everything."""
    selector = selector or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        present = key in labels
        if not {
            "In": present and labels.get(key) in values,
            "NotIn": not present or labels.get(key) not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }[operator]:
            return False
    return True


def _template(pod: Obj) -> Obj:
    template = copy.deepcopy(pod)
    template.pop("status", None)
    template.setdefault("spec", {}).pop("nodeName", None)
    for key in ("uid", "deletionTimestamp", "deletionGracePeriodSeconds", "creationTimestamp", "resourceVersion"):
        template["metadata"].pop(key, None)
    return template


def _scaled(value: int | str, total: int) -> int:
    """``intstr.GetScaledValueFromIntOrPercent(value, total, roundUp=true)``."""
    if isinstance(value, str) and value.endswith("%"):
        return -(-total * int(value[:-1]) // 100)
    return int(value)


def free_gpus(node: Node, used: Resources) -> float:
    """Free GPU devices on ``node`` in physical-GPU terms (the best-fit key)."""
    free = node.allocatable - used
    return sum(v * (node.gpu.equivalent(r) or 1.0) for r, v in free.items() if is_gpu_resource(r))


def _outcome_for(status: int) -> EvictionOutcome:
    by_status = {
        200: EvictionOutcome.EVICTED,
        201: EvictionOutcome.EVICTED,
        404: EvictionOutcome.GONE,
        409: EvictionOutcome.CONFLICT,
        429: EvictionOutcome.BLOCKED,
    }
    return by_status.get(status, EvictionOutcome.ERROR if status >= 500 else EvictionOutcome.FORBIDDEN)


class FakeCluster:
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
        self.dra: list[Obj] = []  # ResourceSlices and ResourceClaims, as given
        self.controllers: dict[tuple[str, str, str], Controller] = {}
        self.state: dict[str, dict[str, str]] = {}
        self.config_maps: dict[
            str, Obj
        ] = {}  # ConfigMaps of the compactor's namespace besides its state (steering parameters)
        self.admissions: dict[tuple[str, str], Obj] = {}  # (kind, name) -> MutatingAdmissionPolicy / binding
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

    @property
    def scheduler(self) -> str:
        return self._scheduler

    @scheduler.setter
    def scheduler(self, mode: str) -> None:
        if mode not in SCHEDULER_MODES:
            raise ValueError(f"scheduler must be one of {SCHEDULER_MODES}, not {mode!r}")
        self._scheduler = mode

    # ---- ClusterClient -------------------------------------------------------------------------------

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
        """ResourceSlices and ResourceClaims as given: this fake allocates no device (tests/e2e/test_dra.py has the real
        scheduler do it)."""
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

    # ---- time ----------------------------------------------------------------------------------------

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

    # ---- test hooks ----------------------------------------------------------------------------------

    def fail_next(self, method: str, failure: Failure, times: int = 1) -> None:
        """The next ``times`` calls of ``method`` fail and change nothing.

        ``failure``: an exception to raise; an HTTP status (``evict`` returns the matching outcome,
        other methods raise ``ClusterError(status=...)``); or, for ``evict``, an outcome or result to return.
        """
        if method not in METHODS:
            raise ValueError(f"{method!r} is not a ClusterClient method")
        if method != "evict" and isinstance(failure, EvictionOutcome | EvictionResult):
            raise TypeError(f"{method} cannot return an eviction result; give an HTTP status or an exception")
        self._failures.setdefault(method, deque()).extend([failure] * times)

    def crash_after(self, n_writes: int, *, when: Literal["before", "after"] = "before") -> None:
        """Raise ``Crash`` at the n-th write call from now (1 = the next), before or after it takes effect."""
        if n_writes < 1 or when not in ("before", "after"):
            raise ValueError("crash_after needs n_writes >= 1 and when 'before' or 'after'")
        self._crash = (self._writes + n_writes, when)

    def gpu_pods_bound(self, node: str) -> list[str]:
        """Unfinished GPU pods bound to ``node`` (terminating ones too: their containers still hold the GPUs)."""
        return [
            f"{ns}/{n}"
            for (ns, n), p in sorted(self.pods.items())
            if p.get("spec", {}).get("nodeName") == node and _phase(p) not in TERMINAL and self._requests(p).gpu_part()
        ]

    def _touch_pod(self, pod: Obj) -> None:
        """A new resourceVersion for the pod, as every write to it (bind, status, patch) gets."""
        pod["metadata"]["resourceVersion"] = str(next(self._versions))

    def touch_node(self, name: str) -> None:
        """A new resourceVersion for the node, as every write to it gets (tests call it after editing ``nodes`` directly)."""
        self.nodes[name].setdefault("metadata", {})["resourceVersion"] = str(next(self._versions))

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

    # ---- invariants and views ------------------------------------------------------------------------

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

    # ---- internals -----------------------------------------------------------------------------------

    def _call(self, method: str, args: dict[str, Any], action: Callable[[], T]) -> T:
        entry = Call(method, copy.deepcopy(args), self.time)
        self.calls.append(entry)
        crash = ""
        if method in WRITES:
            self.history.append(entry)
            self._writes += 1
            if self._crash is not None and self._crash[0] == self._writes:
                crash, self._crash = self._crash[1], None
                if crash == "before":
                    raise Crash(method, crash)
        queue = self._failures.get(method)
        try:
            return self._injected(method, queue.popleft()) if queue else action()
        finally:
            if crash == "after":
                raise Crash(method, crash)

    @staticmethod
    def _injected(method: str, failure: Failure) -> Any:
        if isinstance(failure, BaseException):
            raise failure
        if isinstance(failure, EvictionResult):
            return failure
        if isinstance(failure, EvictionOutcome):
            return EvictionResult(failure, _OUTCOME_STATUS[failure], "injected")
        if method == "evict":
            return EvictionResult(_outcome_for(failure), failure, "injected")
        raise ClusterError(f"injected failure (HTTP {failure})", status=failure)

    def _load(self, obj: Obj) -> None:
        kind = obj.get("kind")
        if kind == "List":
            for item in obj.get("items") or []:
                self._load(item)
        elif kind == "Node":
            self.nodes[obj["metadata"]["name"]] = obj
            self.touch_node(obj["metadata"]["name"])
        elif kind == "Pod":
            self._admit(obj)
        elif kind == "PodDisruptionBudget":
            obj["metadata"].setdefault("namespace", "default")
            obj.setdefault("status", {})
            self.pdbs[_key(obj)] = obj
        elif kind == "ConfigMap" and obj["metadata"]["name"] == STEERING_CONFIGMAP:
            obj["metadata"]["resourceVersion"] = str(next(self._versions))
            self.config_maps[obj["metadata"]["name"]] = obj
        elif kind == "ConfigMap":
            self.state[obj["metadata"]["name"]] = dict(obj.get("data") or {})
        elif kind in ADMISSION_KINDS:
            self.admissions[(kind, obj["metadata"]["name"])] = obj
        elif kind in ("ResourceSlice", "ResourceClaim"):
            self.dra.append(obj)
        elif kind == "Deployment":
            obj["metadata"].setdefault("namespace", "default")
            obj["metadata"]["uid"] = obj["metadata"].get("uid") or self._new_uid()
            self.deployments[(obj["metadata"]["namespace"], obj["metadata"]["name"])] = obj
        elif kind == "ReplicaSet":  # only whom it belongs to: its pods make its controller (``_admit``)
            owner = _controller_ref_of(obj)
            if owner is not None and owner.get("kind") == "Deployment":
                self.deployment_of[(obj["metadata"].get("namespace", "default"), obj["metadata"]["name"])] = str(
                    owner["name"]
                )
        elif kind == "HorizontalPodAutoscaler":
            obj["metadata"].setdefault("namespace", "default")
            self.autoscalers.append(obj)
        elif (
            kind == "Job"
        ):  # its pods make its controller (``_admit``); the Job says when it gives up (``_job_failed``)
            obj["metadata"].setdefault("namespace", "default")
            obj.setdefault("status", {})
            self.jobs[_key(obj)] = obj

    def _new_uid(self) -> str:
        return f"fake-uid-{next(self._uids)}"

    def _admit(self, pod: Obj, *, scale_up: bool = True) -> None:
        meta = pod["metadata"]
        meta["namespace"] = meta.get("namespace") or "default"
        meta["uid"] = meta.get("uid") or self._new_uid()
        if _key(pod) in self.pods:
            raise ValueError(f"pod {_key(pod)} already exists")
        self.pods[_key(pod)] = pod
        self._touch_pod(pod)
        ref = _controller_ref(pod)
        if ref is not None:
            ctl = self.controllers.get(ref)
            if ctl is None:
                ctl = self.controllers[ref] = Controller(*ref, replicas=0, template=_template(pod))
            if scale_up and not _terminating(pod):
                ctl.replicas += 1
                ctl.names.append(meta["name"])
        uid = meta["uid"]
        if _terminating(pod):
            self._deleting_at[uid] = self.time
        elif pod.get("spec", {}).get("nodeName"):
            if _phase(pod) != "Running":
                self._bound_at[uid] = self.time
        elif _phase(pod) == "Pending":
            self._pending_since[uid] = self.time

    def _forget(self, uid: str) -> None:
        for table in (self._pending_since, self._bound_at, self._deleting_at):
            table.pop(uid, None)

    @staticmethod
    def _requests(pod: Obj) -> Resources:
        return parse_pod(pod, source=SOURCE).requests

    def _live(self, ctl: Controller) -> list[Obj]:
        return [
            p
            for p in self.pods.values()
            if _controller_ref(p) == (ctl.kind, ctl.namespace, ctl.name) and not _terminating(p)
        ]

    def _selects(self, pdb: Obj, pod: Obj) -> bool:
        if _key(pdb)[0] != _key(pod)[0]:
            return False
        selector = parse_label_selector(
            (pdb.get("spec") or {}).get("selector"), source=SOURCE, obj=_key(pdb)[1], field="spec.selector"
        )
        return label_selector_matches(selector, pod["metadata"].get("labels") or {})

    # eviction subresource (pkg/registry/core/pod/storage/eviction.go)
    def _evict(
        self, namespace: str, name: str, dry_run: bool, uid: str = "", resource_version: str = ""
    ) -> EvictionResult:
        pod = self.pods.get((namespace, name))
        if pod is None:
            return EvictionResult(EvictionOutcome.GONE, 404, f'pods "{name}" not found')
        if uid and pod["metadata"].get("uid") != uid:  # deleteOptions.preconditions.uid
            return EvictionResult(
                EvictionOutcome.CONFLICT,
                409,
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: {pod['metadata'].get('uid')}",
            )
        if resource_version and resource_version != pod["metadata"].get("resourceVersion"):
            return EvictionResult(  # deleteOptions.preconditions.resourceVersion, as the API server words it
                EvictionOutcome.CONFLICT,
                409,
                f'Operation cannot be fulfilled on pods "{name}": the object has been modified; please apply your '
                "changes to the latest version and try again",
            )
        if _terminating(pod):
            return EvictionResult(EvictionOutcome.EVICTED, 201)
        budget: tuple[str, str] | None = None
        if _phase(pod) not in ("Pending", *TERMINAL):  # pending and finished pods are deleted without asking a budget
            keys = [key for key, pdb in sorted(self.pdbs.items()) if self._selects(pdb, pod)]
            if len(keys) > 1:
                return EvictionResult(EvictionOutcome.ERROR, 500, PDB_MULTIPLE)
            if keys and not self._unhealthy_may_go(self.pdbs[keys[0]], pod):
                budget = keys[0]
                if self.pdbs[budget]["status"].get("disruptionsAllowed", 0) <= 0:
                    return EvictionResult(EvictionOutcome.BLOCKED, 429, PDB_BLOCKED)
        if dry_run:
            return EvictionResult(EvictionOutcome.EVICTED, 201)
        if budget is not None:
            self.pdbs[budget]["status"]["disruptionsAllowed"] -= 1
            if _ready(pod):
                self._granted.setdefault(budget, []).append(f"{namespace}/{name}")
        if _controller_ref(pod) is None:
            self._lost.append(f"Pod {namespace}/{name}")
        # the API server marks an evicted pod before deleting it (PodDisruptionConditions, GA in 1.31)
        _set_condition(pod, "DisruptionTarget", True)
        pod["status"]["conditions"][-1]["reason"] = "EvictionByEvictionAPI"
        if (ref := _controller_ref(pod)) is not None and ref[0] == "Job":
            self._job_failed(ref, pod)
        grace = self._grace(pod)
        pod["metadata"]["deletionTimestamp"] = _iso(self.time + grace)
        pod["metadata"]["deletionGracePeriodSeconds"] = int(grace)
        self._touch_pod(pod)
        self._deleting_at[pod["metadata"]["uid"]] = self.time
        self.evicted.append(f"{namespace}/{name}")
        return EvictionResult(EvictionOutcome.EVICTED, 201)

    def _job_failed(self, ref: tuple[str, str, str], pod: Obj) -> None:
        """The Job controller counts an evicted pod as failed (pkg/controller/job): unless a ``podFailurePolicy`` rule
        ignores ``DisruptionTarget``, ``status.failed`` grows, and once it exceeds ``backoffLimit`` the Job fails
        (BackoffLimitExceeded): its other pods are deleted and none is recreated: the workload is lost."""
        _, namespace, name = ref
        job = self.jobs.setdefault(
            (namespace, name), {"metadata": {"name": name, "namespace": namespace}, "status": {}}
        )
        spec = job.get("spec") or {}
        if job_ignores_disruptions(spec):
            return
        job["status"]["failed"] = int(job["status"].get("failed") or 0) + 1
        if job["status"]["failed"] <= int(spec.get("backoffLimit", JOB_BACKOFF_LIMIT)):
            return
        job["status"]["conditions"] = [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]
        ctl = self.controllers[ref]
        ctl.replicas = 0
        self._lost.append(f"Job {namespace}/{name} (BackoffLimitExceeded; pod {pod['metadata']['name']} evicted)")

    @staticmethod
    def _unhealthy_may_go(pdb: Obj, pod: Obj) -> bool:
        """unhealthyPodEvictionPolicy: a running but not Ready pod may go without spending the budget."""
        if _ready(pod):
            return False
        if (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
            return True
        status = pdb["status"]
        return bool(status.get("currentHealthy", 0) >= status.get("desiredHealthy", 0) > 0)

    # controllers
    def _schedule_delay(self) -> float | None:
        return {"never": None, "slow": 10 * self.schedule_after}.get(self.scheduler, self.schedule_after)

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

    def _grace(self, pod: Obj) -> float:
        """The kubelet's stop time: the pod's ``terminationGracePeriodSeconds`` when it sets one, else ``grace_seconds``."""
        value = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
        return float(value) if value is not None else self.grace_seconds

    def _grace_of(self, uid: str) -> float:
        pod = next((p for p in self.pods.values() if p["metadata"]["uid"] == uid), None)
        return self._grace(pod) if pod is not None else self.grace_seconds

    def _reap(self) -> None:
        for key, pod in list(self.pods.items()):
            uid = pod["metadata"]["uid"]
            if uid in self._deleting_at and self.time >= self._deleting_at[uid] + self._grace(pod):
                del self.pods[key]
                self._forget(uid)

    def _follow_cordons(self) -> None:
        """The node lifecycle controller: ``node.kubernetes.io/unschedulable:NoSchedule`` follows a cordon, ``taint_lag`` later."""
        for name, since in list(self._flipped_at.items()):
            if self.time < since + self.taint_lag:
                continue
            node = self.nodes.get(name)
            del self._flipped_at[name]
            if node is None:
                continue
            spec = node.setdefault("spec", {})
            taints = [t for t in spec.get("taints") or [] if t.get("key") != UNSCHEDULABLE_TAINT]
            if spec.get("unschedulable"):
                taints.append({"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"})
            spec["taints"] = taints or None
            if not taints:
                del spec["taints"]
            self.touch_node(name)

    def _reconcile_controllers(self) -> None:
        for _, ctl in sorted(self.controllers.items()):
            if ctl.kind == "StatefulSet":
                missing = [n for n in ctl.names if (ctl.namespace, n) not in self.pods]
            else:
                live = self._live(ctl)
                for pod in sorted(live, key=self._deletion_rank)[: max(0, len(live) - ctl.replicas)]:
                    self._delete(pod)
                missing = [self._replica_name(ctl) for _ in range(ctl.replicas - len(live))]
            for name in missing:
                pod = copy.deepcopy(ctl.template)
                pod["metadata"].update(name=name, uid=self._new_uid(), creationTimestamp=_iso(self.time))
                pod["status"] = {"phase": "Pending", "conditions": []}
                _set_condition(pod, "PodScheduled", False)
                _set_condition(pod, "Ready", False)
                self._admit(self._admission(pod, creator=creator_of(pod)), scale_up=False)

    @staticmethod
    def _deletion_rank(pod: Obj) -> tuple[int, int, int, int, float]:
        """ReplicaSet scale-down order (controller.ActivePodsWithRanks, smallest first): unassigned, then Pending, not Ready,
        lower pod-deletion-cost, then newer (the fake's stand-in for "Ready for less time": its pods turn Ready in order)."""
        bound = bool(pod.get("spec", {}).get("nodeName"))
        phase = {"Pending": 0, "Unknown": 1, "Running": 2}.get(_phase(pod), 2)
        try:
            cost = int(((pod["metadata"].get("annotations") or {}).get(DELETION_COST)) or 0)
        except ValueError:
            cost = 0
        created = datetime.fromisoformat(
            str(pod["metadata"].get("creationTimestamp") or "2000-01-01T00:00:00Z").replace("Z", "+00:00")
        )
        return int(bound), phase, int(_ready(pod)), cost, -created.timestamp()

    def _delete(self, pod: Obj) -> None:
        """A controller's DELETE (no eviction, no budget asked): graceful, as the kubelet stops it."""
        grace = self._grace(pod)
        pod["metadata"]["deletionTimestamp"] = _iso(self.time + grace)
        pod["metadata"]["deletionGracePeriodSeconds"] = int(grace)
        self._touch_pod(pod)
        self._deleting_at[pod["metadata"]["uid"]] = self.time
        self.scale_downs.append("/".join(_key(pod)))

    def _admission(self, pod: Obj, *, creator: str) -> Obj:
        """The steering admission policy, when installed (policy, binding, parameters), as kube-apiserver applies it."""
        policy = self.admissions.get(("MutatingAdmissionPolicy", STEERING_CONFIGMAP))
        binding = self.admissions.get(("MutatingAdmissionPolicyBinding", STEERING_CONFIGMAP))
        parameters = self.config_maps.get(STEERING_CONFIGMAP)
        if policy is None or binding is None or parameters is None:
            return pod
        namespace = {"kubernetes.io/metadata.name": pod["metadata"]["namespace"]}  # every namespace's own label
        if not all(
            _selects((obj.get("spec") or {}).get(field, {}).get("namespaceSelector"), namespace)
            for obj, field in ((policy, "matchConstraints"), (binding, "matchResources"))
        ):
            return pod
        node = pin_for(pod, parameters.get("data") or {}, creator)
        if node is None:
            return pod
        self.pinned.append((f"{pod['metadata']['namespace']}/{pod['metadata']['name']}", node))
        return pinned(pod, node)

    def _replica_name(self, ctl: Controller) -> str:
        while True:
            name = f"{ctl.name}-{''.join(self._rng.choice(_SUFFIX_ALPHABET) for _ in range(5))}"
            if (ctl.namespace, name) not in self.pods:
                return name

    def _schedule(self) -> None:
        delay = self._schedule_delay()
        pending = sorted(
            (self._pending_since[p["metadata"]["uid"]], key)
            for key, p in self.pods.items()
            if p["metadata"]["uid"] in self._pending_since and not _terminating(p)
        )
        if delay is None or not pending:
            return
        nodes = [
            parse_node(raw, source=SOURCE, pool_label=DEFAULT_POOL_LABEL, warnings=[])
            for _, raw in sorted(self.nodes.items())
        ]
        used = {n.name: Resources() for n in nodes}
        for p in self.pods.values():
            bound = p.get("spec", {}).get("nodeName")
            if bound in used and _phase(p) not in TERMINAL:
                used[bound] = used[bound] + self._requests(p)
        adversarial = self.scheduler == "ignore-cordon"
        spread = self.scheduler == "spread"  # the default profile's LeastAllocated: the emptiest feasible node wins
        # ignore-cordon: as if every pod tolerated cordons and fences
        candidates = (
            [
                replace(
                    n,
                    taints=tuple(
                        t for t in n.taints if t.key != UNSCHEDULABLE_TAINT and not t.key.startswith(FENCE_TAINT_PREFIX)
                    ),
                )
                for n in nodes
            ]
            if adversarial
            else nodes
        )
        for since, key in pending:
            raw = self.pods[key]
            if self.time < since + delay or raw.get("spec", {}).get("schedulingGates"):
                continue
            pod = parse_pod(raw, source=SOURCE)
            fits = [
                n
                for n in candidates
                if why_ineligible(pod, n, ignore_unschedulable=adversarial) is None
                and pod.requests.fits_in(n.allocatable - used[n.name])
            ]
            if not fits:
                continue

            def rank(n: Node) -> tuple[bool, float, str]:
                free = free_gpus(n, used[n.name])
                closed = n.unschedulable or is_fenced(self.nodes[n.name])
                return adversarial and not closed, -free if spread else free, n.name

            best = min(fits, key=rank)
            raw["spec"]["nodeName"] = best.name
            _set_condition(raw, "PodScheduled", True)
            self._touch_pod(raw)
            used[best.name] = used[best.name] + pod.requests
            del self._pending_since[pod.uid]
            self._bound_at[pod.uid] = self.time

    def _run_kubelet(self) -> None:
        for pod in self.pods.values():
            uid = pod["metadata"]["uid"]
            if uid in self._bound_at and not _terminating(pod) and self.time >= self._bound_at[uid] + self.ready_after:
                pod["status"].update(phase="Running", startTime=_iso(self.time))
                _set_condition(pod, "PodScheduled", True)
                _set_condition(pod, "Ready", True)
                self._touch_pod(pod)
                del self._bound_at[uid]

    # disruption controller (pkg/controller/disruption)
    def _pdb_health(self, pdb: Obj) -> tuple[int, int, int]:
        """(expectedPods, currentHealthy, desiredHealthy)."""
        selected = [p for p in self.pods.values() if self._selects(pdb, p)]
        owners = {ref for p in selected if (ref := _controller_ref(p)) in self.controllers}
        expected = sum(self.controllers[o].replicas for o in owners) + sum(
            1 for p in selected if _controller_ref(p) is None
        )
        healthy = sum(1 for p in selected if _ready(p) and not _terminating(p))
        spec = pdb.get("spec") or {}
        if spec.get("minAvailable") is not None:
            desired = _scaled(spec["minAvailable"], expected)
        elif spec.get("maxUnavailable") is not None:
            desired = max(0, expected - _scaled(spec["maxUnavailable"], expected))
        else:
            desired = 0
        return expected, healthy, desired

    def _needs_a_scale_it_cannot_read(self, pdb: Obj) -> bool:
        """The disruption controller reads a scale for ``maxUnavailable`` or a percentage ``minAvailable``; a Job has
        none ("jobs.batch does not implement the scale subresource"): such a budget fails to sync and allows nothing."""
        spec = pdb.get("spec") or {}
        if spec.get("maxUnavailable") is None and not isinstance(spec.get("minAvailable"), str):
            return False
        return any(
            (ref := _controller_ref(p)) is not None and ref[0] == "Job"
            for p in self.pods.values()
            if self._selects(pdb, p)
        )

    def _recompute_pdbs(self) -> None:
        for key, pdb in sorted(self.pdbs.items()):
            if self._needs_a_scale_it_cannot_read(pdb):
                pdb["status"].update(expectedPods=0, currentHealthy=0, desiredHealthy=0, disruptionsAllowed=0)
                continue
            expected, healthy, desired = self._pdb_health(pdb)
            allowed = healthy - desired if expected > 0 and healthy > desired else 0
            pdb["status"].update(
                expectedPods=expected,
                currentHealthy=healthy,
                desiredHealthy=desired,
                disruptionsAllowed=self._overrides.get(key, allowed),
            )
        self._check_budgets()

    def _check_budgets(self) -> None:
        for key in sorted(self._granted):
            names = self._granted.pop(key)
            if key in self.pdbs:
                _, healthy, desired = self._pdb_health(self.pdbs[key])
                if healthy < desired:
                    self.violations.append(
                        f"PodDisruptionBudget {key[0]}/{key[1]} at t={self.time:g}s: currentHealthy {healthy} "
                        f"< desiredHealthy {desired} after evicting {', '.join(names)}"
                    )


class FakeClock:
    """``Clock`` in the cluster's simulated time: ``sleep`` moves the world forward."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster

    def now(self) -> datetime:
        return EPOCH + timedelta(seconds=self.cluster.time)

    def monotonic(self) -> float:
        return self.cluster.time

    def sleep(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("sleep length must be non-negative")
        self.cluster.advance(seconds)

    def checkpoint(self) -> None:
        return None

"""The simulated controllers: the eviction subresource (PDB checks, 404/409/429/500), ReplicaSet, StatefulSet and Job
controllers, the node lifecycle controller's cordon taint, the steering admission policy, and the disruption
controller (PDB status).
"""

from __future__ import annotations

import copy
from datetime import datetime

from compactor.actions.port.client import EvictionOutcome, EvictionResult, Obj
from compactor.actions.steering.pin import creator_of, pin_for, pinned
from tests.fakecluster.objects import (
    STEERING_CONFIGMAP,
    TERMINAL,
    UNSCHEDULABLE_TAINT,
    Controller,
    _controller_ref,
    _iso,
    _key,
    _phase,
    _ready,
    _selects,
    _set_condition,
    _terminating,
)
from tests.fakecluster.scheduler import SchedulerAndKubelet

DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
JOB_BACKOFF_LIMIT = 6  # batch/v1 JobSpec.backoffLimit's default
PDB_BLOCKED = "Cannot evict pod as it would violate the pod's disruption budget."
PDB_MULTIPLE = "Internal error occurred: This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand


def job_ignores_disruptions(spec: Obj) -> bool:
    """Whether a Job's ``podFailurePolicy`` has a rule that ignores pods failed by a disruption (``DisruptionTarget``)."""
    return any(
        rule.get("action") == "Ignore"
        and any(c.get("type") == "DisruptionTarget" for c in rule.get("onPodConditions") or [])
        for rule in (spec.get("podFailurePolicy") or {}).get("rules") or []
    )


def _scaled(value: int | str, total: int) -> int:
    """``intstr.GetScaledValueFromIntOrPercent(value, total, roundUp=true)``."""
    if isinstance(value, str) and value.endswith("%"):
        return -(-total * int(value[:-1]) // 100)
    return int(value)


class Controllers(SchedulerAndKubelet):
    """The eviction subresource and the controllers that react to it: ReplicaSet, StatefulSet and Job (replacements,
    created through the steering admission policy when it is installed; a ReplicaSet's scale-down order), the Job
    controller's backoffLimit, the node lifecycle controller's cordon taint, and the disruption controller (PDB status,
    and the violations a granted eviction caused)."""

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

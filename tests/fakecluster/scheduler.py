"""The scheduler and the kubelet of the fake cluster: binding Pending pods in the chosen mode, starting bound pods,
and removing deleted ones once their grace period is over.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from compactor.actions.port.annotations import FENCE_TAINT_PREFIX
from compactor.actions.port.client import Obj
from compactor.model.load import DEFAULT_POOL_LABEL
from compactor.model.parse import parse_node, parse_pod
from compactor.model.resources import Resources, is_gpu_resource
from compactor.model.scheduling import why_ineligible
from compactor.model.types import Node
from tests.fakecluster.dra import DeviceAllocator
from tests.fakecluster.faults import FaultInjection
from tests.fakecluster.objects import (
    SOURCE,
    TERMINAL,
    UNSCHEDULABLE_TAINT,
    _iso,
    _phase,
    _set_condition,
    _set_unschedulable,
    _terminating,
    is_fenced,
)

SCHEDULER_MODES = ("cooperative", "spread", "ignore-cordon", "never", "slow")

SchedulerMode = Literal["cooperative", "spread", "ignore-cordon", "never", "slow"]


def free_gpus(node: Node, used: Resources) -> float:
    """Free GPU devices on ``node`` in physical-GPU terms (the best-fit key)."""
    free = node.allocatable - used
    return sum(v * (node.gpu.equivalent(r) or 1.0) for r, v in free.items() if is_gpu_resource(r))


class SchedulerAndKubelet(FaultInjection, DeviceAllocator):
    """kube-scheduler (``scheduler``: cooperative best-fit, ``spread`` like the default profile, ``ignore-cordon``,
    ``never``, ``slow``) and the kubelet (a bound pod Running and Ready ``ready_after`` later; a deleted one gone after
    its grace period)."""

    @property
    def scheduler(self) -> str:
        return self._scheduler

    @scheduler.setter
    def scheduler(self, mode: str) -> None:
        if mode not in SCHEDULER_MODES:
            raise ValueError(f"scheduler must be one of {SCHEDULER_MODES}, not {mode!r}")
        self._scheduler = mode

    # controllers
    def _schedule_delay(self) -> float | None:
        return {"never": None, "slow": 10 * self.schedule_after}.get(self.scheduler, self.schedule_after)

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
                and self.devices_fit(raw, n.name)  # DynamicResources: its template claims' devices free there
            ]
            if not fits:
                _set_unschedulable(raw, _iso(self.time))
                continue

            def rank(n: Node) -> tuple[bool, float, str]:
                free = free_gpus(n, used[n.name])
                closed = n.unschedulable or is_fenced(self.nodes[n.name])
                return adversarial and not closed, -free if spread else free, n.name

            best = min(fits, key=rank)
            self.allocate(raw, best.name)
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
                self.release_claims_of(uid)

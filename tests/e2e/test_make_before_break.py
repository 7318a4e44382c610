"""End to end on a real control plane: make-before-break moves (issue [15] item 5).

Every workload of a fragmented fleet opts in (``steering.make_before_break_selector``). The real Deployment and
ReplicaSet controllers do the rest: the surge's extra replica is created by the ReplicaSet, pinned by the steering
policy and bound by kube-scheduler, and the scale-back's deletion is the ReplicaSet controller's own choice (its
``pod-deletion-cost`` ranking). A watch on the namespace's pods checks, at every pod event of the run, that no workload
has fewer Ready replicas than its spec; the run ends where the plan says (the fleet tests' checks), with no Eviction
sent and every Deployment's ``spec.replicas`` as it was.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.fleet_runs import STATES, apply, plan_and_carry_out
from tests.e2e.fragmentation import WORKLOAD_LABEL, Fleet
from tests.e2e.helpers import NEEDS_CLUSTER, CompactorRun, Kube, Obj, condition, raw
from tests.e2e.watchers import ObjectWatch, Observed

pytestmark = [NEEDS_CLUSTER, pytest.mark.e2e, pytest.mark.timeout(900)]


class ServingWatch:
    """Ready, not terminating replicas per workload (its ``app`` label), recomputed at every pod event; the least seen."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        self.kube, self.namespace = kube, namespace
        self.observed = Observed()
        self.serving: dict[str, tuple[str, bool]] = {}  # uid -> (app, serving)
        self.least: dict[str, int] = {}
        self.events = 0
        self._lock = threading.Lock()
        self._watch = ObjectWatch("pods", kube.core.list_namespaced_pod, (namespace,), self._on_pod, self.observed)

    def _on_pod(self, kind: str, pod: Obj) -> None:
        meta = pod.get("metadata") or {}
        app = (meta.get("labels") or {}).get("app", "")
        with self._lock:
            self.events += 1
            if kind == "DELETED":
                self.serving.pop(str(meta.get("uid")), None)
            else:
                self.serving[str(meta.get("uid"))] = (
                    app,
                    condition(pod, "Ready") and not meta.get("deletionTimestamp"),
                )
            if kind != "LISTED":  # the first list arrives pod by pod: counted once it is whole (``__enter__``)
                self._count()

    def _count(self) -> None:
        counts: dict[str, int] = {}
        for owner, up in self.serving.values():
            counts[owner] = counts.get(owner, 0) + up
        for owner, count in counts.items():
            self.least[owner] = min(count, self.least.get(owner, count))

    def __enter__(self) -> ServingWatch:
        self._watch.start()  # lists synchronously, then watches
        with self._lock:
            self._count()
        return self

    def __exit__(self, *exc: object) -> None:
        self._watch.stop()


def deployments(kube: Kube, namespace: str) -> dict[str, int]:
    listed = raw(kube.apps.list_namespaced_deployment, namespace)
    return {item["metadata"]["name"]: int(item["spec"].get("replicas") or 0) for item in listed.get("items") or []}


def test_make_before_break_moves_keep_every_replica_serving_land_as_planned_and_leave_the_spec(
    kube: Kube, gpu_fleet: Fleet, fleet_namespace: str, steering_policy: str, tmp_path: Path
) -> None:
    seen: dict[str, Any] = {}

    def surge_under_watch(config: Path, plan: Path) -> CompactorRun:
        seen["spec"] = deployments(kube, fleet_namespace)
        with ServingWatch(kube, fleet_namespace) as watch:
            ran = apply(config, plan)
        seen["ran"], seen["watch"], seen["after"] = ran, watch, deployments(kube, fleet_namespace)
        return ran

    # plan_and_carry_out checks that the run ends where the plan says: each new replica bound on its planned node, the
    # freed nodes whole-free, no PDB violated, nothing left fenced.
    # The state with a pending 8-GPU pod: every node keeps a pod through the scale-down, so the plan has moves to make
    # under either scheduler profile (seed 7 alone leaves the bin-packing profile one move or none).
    plan_and_carry_out(
        STATES[3],
        kube,
        gpu_fleet,
        fleet_namespace,
        tmp_path,
        surge_under_watch,
        steering="policy",
        overrides={"steering": {"make_before_break_selector": {WORKLOAD_LABEL: "true"}}},
    )
    watch: ServingWatch = seen["watch"]
    assert not watch.observed.errors and not watch.observed.gaps, watch.observed.errors + watch.observed.gaps
    spec: dict[str, int] = seen["spec"]
    pending = {name for name in spec if name.startswith("waiting-")}
    short = {
        app: (watch.least.get(app, 0), replicas)
        for app, replicas in spec.items()
        if app not in pending and watch.least.get(app, 0) < replicas
    }
    assert not short, f"workloads with fewer Ready replicas than their spec during the run (least seen, spec): {short}"
    assert seen["after"] == spec, "a Deployment's spec.replicas changed"
    report = seen["ran"].json()
    assert report["movesDone"] > 0 and (report.get("outcome") or {}).get("evictions") == 0, report  # no Eviction sent

"""What acts on the replayed day (``day_replay.Day``) besides the scheduler: the descheduler's HighNodeUtilization and
gpu-compactor, each as it behaves in a cluster.

* ``HighNodeUtilization``: every ``every`` seconds, the GPU pods of each GPU node under ``threshold`` of its GPUs are
  evicted, one per ReplicaSet per pass (its PDB allows one disruption), each only if it fits on another node
  (the descheduler's NodeFit), and the scheduler places the replacements as it places any pod.
* ``Compactor``: a ``run --once``: the cluster read as a snapshot (Kubernetes objects through the loader every command
  uses), ``app.planning.plan_of`` with the shipped settings (the ConfigMap of manifests/base) and the history's
  restraints (cooldowns, oscillation, budgets); planning is charged to the simulated clock (``PLANNING_CLOCKS``: by
  default the planner's time limit, deterministic): the day goes on meanwhile (arrivals, departures, the scheduler),
  and the evictions start only once that time has passed, on the cluster as it is then (a plan can go stale as it
  would live: a pod gone or moved is skipped, a target without room or a PDB allowing nothing stops the run); then the
  plan carried out as the executor does (``_Run``): the nodes it
  frees and those it drains for a pending pod fenced for the run; ``max_concurrent_evictions`` moves at a time, each
  replacement steered onto its planned node and serving ``startup`` seconds later before the next eviction; none
  started after ``max_run_seconds``; a move whose pod has gone is skipped, one whose target no longer has room or whose
  PDB allows no disruption stops the run (a rollback); the pending pods whose nodes were drained bound there; the
  fences lifted. A cycle while a run is still going is skipped, as the controller's next cycle waits for the last.
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from day_replay import Day, Pod

from compactor.actions.scope import kept_fenced
from compactor.app.figures import shapes_for
from compactor.app.pending import Blocked, PendingTrigger
from compactor.app.planning import offline_steerability, plan_of
from compactor.errors import CompactorError
from compactor.model.load import build_snapshot
from compactor.planner.history import History, MoveRecord, restraints_at
from compactor.planner.plan import CompactionPlan
from compactor.settings import Settings, load_settings

NAMESPACE = "replay"
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)  # the day's first second, for creation and condition times
SHIPPED_CONFIG = Path(__file__).resolve().parents[1] / "manifests" / "base" / "config.yaml"  # what is deployed
EVICTION_SECONDS = 5.0  # the Eviction API call and the old pod's exit, before the replacement's start-up
# What a cycle's planning costs on the simulated clock before its evictions start:
# "limit": the planner's time limit (``solver.time_limit_seconds``), deterministic: the same day whatever the machine
#   and its load (2 shared cores here), and what a live planner takes when it has moves to find (it searches until its
#   limit unless it proves its plan optimal sooner; 9.8 s on average at 10 s on the full trace);
# "measured": the wall seconds this planner took on this machine (snapshot build included);
# "none": planning takes no simulated time (the replay before issue 42).
PLANNING_CLOCKS = ("limit", "measured", "none")


def _iso(seconds: float) -> str:
    return (EPOCH + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------- the descheduler


class HighNodeUtilization:
    def __init__(self, threshold: float = 0.5) -> None:
        self.threshold = threshold

    def __call__(self, day: Day) -> None:
        used = day.scheduler.used[:, 2]
        taken: Counter[int] = Counter()
        for index, node in enumerate(day.nodes):
            if not node.gpus or used[index] == 0 or used[index] / node.gpus >= self.threshold:
                continue
            for pod_id in sorted(day.on_node[index]):
                pod = day.pods[pod_id]
                if not pod.gpus or taken[pod.group] or not day.disruption_allowed(pod):
                    continue  # the Eviction API would answer 429: the PDB allows no disruption now
                if not _fits_elsewhere(day, pod, index):
                    continue
                taken[pod.group] += 1
                day.evict(pod_id)
        day.schedule_queue()


def _fits_elsewhere(day: Day, pod: Pod, node: int) -> bool:
    models = pod.arrival.pod.models
    return any(
        i != node and day.scheduler.fits(i, pod.request) and (not models or n.model in models)
        for i, n in enumerate(day.nodes)
    )


# ---------------------------------------------------------------- gpu-compactor


class Compactor:
    """``run --once`` every tick; with a ``trigger`` (ticks every ``PENDING_CHECK_SECONDS``), the controller's cycles
    instead: one every ``every`` seconds, and one at once when its pending trigger says so (``compactor.app.pending``,
    the controller's own rule: a GPU pod waiting ``--pending-after``, once per pod, not within ``--pending-gap`` of the
    last cycle), after which the interval counts from there."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        trigger: PendingTrigger | None = None,
        every: float = 0.0,
        planning_clock: str = "limit",
    ) -> None:
        if trigger is not None and every <= 0:
            raise ValueError("the controller's cycles need an interval (every > 0)")
        if planning_clock not in PLANNING_CLOCKS:
            raise ValueError(f"planning clock {planning_clock!r}: one of {PLANNING_CLOCKS}")
        self.planning_clock = planning_clock
        self.settings = settings or load_settings(str(SHIPPED_CONFIG))
        self.trigger = trigger
        self.every = every
        self.next_regular = every
        self.last_run = -float("inf")
        self.node_objects: list[dict[str, Any]] | None = None
        self.history: list[MoveRecord] = []
        self.busy_until = -1.0

    def __call__(self, day: Day) -> None:
        if day.now < self.busy_until:  # the last run is still carrying its plan out: the next cycle waits
            # the controller's scheduler skips a run due while the last still goes on (a plain tick has no schedule)
            while self.trigger is not None and self.next_regular <= day.now:
                self.next_regular += self.every
            return
        if self.trigger is not None and not self._controller_due(day):
            return
        self.last_run, self.next_regular = day.now, day.now + self.every
        started = time.perf_counter()
        plan = self._plan(day)
        charge = self._planning_seconds(time.perf_counter() - started)
        day.figures.planning_charged_seconds += charge
        if plan is not None and (plan.moves or plan.placed_pending):
            self.busy_until = float("inf")  # planning, then carrying the plan out: the next cycle waits
            if charge > 0:
                day.at(day.now + charge, "call", lambda later: self._carry_out(later, plan))
            else:
                self._carry_out(day, plan)
        else:
            self.busy_until = day.now + charge

    def _planning_seconds(self, wall: float) -> float:
        if self.planning_clock == "limit":
            return float(self.settings.solver.time_limit_seconds)
        return wall if self.planning_clock == "measured" else 0.0

    def _controller_due(self, day: Day) -> bool:
        """The interval's cycle when it is due, else one the pending trigger starts (its own decision code)."""
        if day.now >= self.next_regular:
            return True
        assert self.trigger is not None
        blocked = [Blocked(str(p.id), day.now - p.arrived) for p in day.queue.values() if p.gpus and p.first_bound < 0]
        return bool(self.trigger.due(blocked, day.now - self.last_run))

    def _plan(self, day: Day) -> CompactionPlan | None:
        snapshot = build_snapshot(self._objects(day), source="replay")
        now = EPOCH + timedelta(seconds=day.now)
        started = time.perf_counter()
        try:
            plan = plan_of(
                snapshot,
                self.settings,
                shapes_for(snapshot, self.settings),
                source="replay",
                now=now,
                steering=offline_steerability(self.settings),
                restraints=restraints_at(
                    History(tuple(self.history)), self.settings.disruption, now, caps=self.settings.caps
                ),
            )
        except CompactorError:
            return None
        finally:
            day.figures.planner_seconds.append(time.perf_counter() - started)
            day.figures.cycles += 1
        return plan

    def _carry_out(self, day: Day, plan: CompactionPlan) -> None:
        index = {n.name: i for i, n in enumerate(day.nodes)}
        # fenced as the executor fences: the nodes the plan frees, and those it drains for a pending pod
        fenced = sorted({index[n] for n in [*plan.freed_nodes, *kept_fenced(plan)] if n in index})
        day.fence(fenced, True)
        self.busy_until = float("inf")
        _Run(self, plan, index, fenced, started=day.now).next_batch(day)

    # ----- the snapshot

    def _objects(self, day: Day) -> list[dict[str, Any]]:
        if self.node_objects is None:
            self.node_objects = [_node_object(n) for n in day.nodes]
        pods = [_pod_object(day, p) for p in day.pods.values()]
        return [*self.node_objects, *pods, *_pdbs(day)]


class _Run:
    """One plan being carried out as the executor does: batches of ``max_concurrent_evictions`` moves, each batch's
    replacements serving before the next; no eviction started after ``max_run_seconds`` (the run ends partial); a
    move the cluster no longer allows stops the run (a rollback: nothing more is placed); then the pending pods whose
    nodes were drained are bound there and the fences lifted."""

    def __init__(
        self, compactor: Compactor, plan: CompactionPlan, index: dict[str, int], fenced: list[int], *, started: float
    ) -> None:
        self.compactor, self.plan, self.index, self.fenced, self.started = compactor, plan, index, fenced, started
        self.caps = compactor.settings.caps
        self.done: set[str] = set()
        self.stopped = False
        self.position = 0

    def next_batch(self, day: Day) -> None:
        limit = self.caps.max_run_seconds
        if self.position >= len(self.plan.moves) or (limit is not None and day.now - self.started >= limit):
            self.finish(day)
            return
        batch = self.plan.moves[self.position : self.position + self.caps.max_concurrent_evictions]
        self.position += len(batch)
        for move in batch:
            if not self._move(day, move):
                self.stopped = True  # the plan no longer holds (room taken, a PDB): the run stops and rolls back
                self.finish(day)
                return
        day.at(day.now + day.startup + EVICTION_SECONDS, "call", self.next_batch)

    def _move(self, day: Day, move: Any) -> bool:
        pod = _pod_named(day, move.pod)
        source, target = self.index.get(move.from_node, -1), self.index[move.to_node]
        if pod is None or pod.node != source:
            return True  # gone, or elsewhere: the executor skips it
        if not day.scheduler.fits(target, pod.request) or not day.disruption_allowed(pod):
            day.figures.moves_refused += 1
            return False
        day.evict(pod.id)
        if not day.bind_to(pod, target):
            day.figures.moves_refused += 1
            day.schedule_queue()
            return False
        self.done.add(move.pod)
        workload = f"{NAMESPACE}/ReplicaSet/rs-{pod.group}"
        at = EPOCH + timedelta(seconds=day.now)
        self.compactor.history.append(MoveRecord(at, move.pod, workload, move.from_node, move.to_node, "moved"))
        return True

    def finish(self, day: Day) -> None:
        if not self.stopped:
            unfinished = {m.from_node for m in self.plan.moves if m.pod not in self.done}
            for placement in self.plan.placed_pending:
                pod = _pod_named(day, placement.pod)
                if pod is not None and placement.to_node in self.index and placement.to_node not in unfinished:
                    day.bind_to(pod, self.index[placement.to_node])
        day.fence(self.fenced, False)
        day.schedule_queue()
        self.compactor.busy_until = day.now


def _pod_named(day: Day, key: str) -> Pod | None:
    name = key.split("/", 1)[-1]
    if not name.startswith("p"):
        return None
    return day.pods.get(int(name[1:]))


def _node_object(node: Any) -> dict[str, Any]:
    resources = {
        "cpu": f"{node.cpu_milli}m",
        "memory": f"{node.memory_mib}Mi",
        "pods": "110",
        "nvidia.com/gpu": str(node.gpus),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "uid": f"node-{node.name}",
            "labels": {
                "kubernetes.io/hostname": node.name,
                "nvidia.com/gpu.product": node.model,
                "nvidia.com/gpu.count": str(node.gpus),
                "nvidia.com/gpu.present": "true",
            },
        },
        "spec": {},
        "status": {
            "allocatable": resources,
            "capacity": dict(resources),
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _pod_object(day: Day, pod: Pod) -> dict[str, Any]:
    shape = pod.arrival.pod.shape
    group = f"rs-{pod.group}"
    requests = {"cpu": f"{shape.cpu_milli}m", "memory": f"{shape.memory_mib}Mi", "nvidia.com/gpu": str(shape.num_gpu)}
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "resources": {"requests": requests, "limits": {"nvidia.com/gpu": requests["nvidia.com/gpu"]}},
            }
        ]
    }
    if pod.arrival.pod.models:
        spec["affinity"] = _models_affinity(pod.arrival.pod.models)
    if pod.node >= 0:
        spec["nodeName"] = day.nodes[pod.node].name
        ready = day.now >= pod.ready_at
        conditions = [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": _iso(pod.ready_at - day.startup)},
            {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": _iso(pod.ready_at)},
        ]
        status = {"phase": "Running", "conditions": conditions}
    else:
        status = {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod.name,
            "namespace": NAMESPACE,
            "uid": f"uid-{pod.id}",
            "labels": {"app": group},
            "creationTimestamp": _iso(min(pod.arrived, day.now) - (3600 if pod.arrival.initial else 0)),
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": group, "uid": group, "controller": True}
            ],
        },
        "spec": spec,
        "status": status,
    }


def _models_affinity(models: tuple[str, ...]) -> dict[str, Any]:
    expression = {"key": "nvidia.com/gpu.product", "operator": "In", "values": list(models)}
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [expression]}]
            }
        }
    }


def _pdbs(day: Day) -> list[dict[str, Any]]:
    """A PDB (maxUnavailable 1) per ReplicaSet of two pods or more, its status as the disruption controller writes it."""
    members: dict[int, list[Pod]] = {}
    for pod in day.pods.values():
        members.setdefault(pod.group, []).append(pod)
    budgets = []
    for group, pods in members.items():
        if len(pods) < 2:
            continue
        healthy = sum(1 for p in pods if p.node >= 0 and day.now >= p.ready_at)
        desired = len(pods) - 1
        budgets.append(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": f"rs-{group}", "namespace": NAMESPACE, "generation": 1},
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": f"rs-{group}"}}},
                "status": {
                    "observedGeneration": 1,
                    "expectedPods": len(pods),
                    "currentHealthy": healthy,
                    "desiredHealthy": desired,
                    "disruptionsAllowed": max(0, healthy - desired),
                },
            }
        )
    return budgets

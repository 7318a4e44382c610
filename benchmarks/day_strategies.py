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
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from day_replay import Day, Pod, physical_gpus

from compactor.actions.cluster.run_cut import kept_fenced
from compactor.actions.steps.evict import batches
from compactor.app.cycle import REPLANS_WHEN_STALE
from compactor.app.figures import shapes_for
from compactor.app.pending import Blocked, PendingTrigger
from compactor.app.planning import offline_steerability, plan_of
from compactor.errors import CompactorError
from compactor.metrics.fill_first import FILL_FIRST_LABEL, fill_first_tiers
from compactor.metrics.fragmentation import compute_figures
from compactor.model.load import DEFAULT_POOL_LABEL, build_snapshot
from compactor.model.parse import parse_node, parse_pod
from compactor.model.resources import Resources
from compactor.model.types import Node
from compactor.planner.plan import CompactionPlan, Move
from compactor.planner.rules.history import History, MoveRecord, restraints_at
from compactor.planner.search.retarget import NodeUse, Wanted, assign
from compactor.settings.origins import Settings, load_settings

NAMESPACE = "replay"
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)  # the day's first second, for creation and condition times
SHIPPED_CONFIG = Path(__file__).resolve().parents[1] / "manifests" / "base" / "config.yaml"  # what is deployed
# mig-manager's re-cut of a drained node: GPU clients stopped, the instances destroyed and made again, the device plugin
# and GFD restarted (1-3 minutes on an A100 node, no reboot); the node takes no pod meanwhile
RECUT_SECONDS = 180.0
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
        used = day.held_per_node()
        taken: Counter[int] = Counter()
        for index, node in enumerate(day.nodes):
            gpus = physical_gpus(node)
            if not gpus or used[index] == 0 or used[index] / gpus >= self.threshold:
                continue
            for pod_id in sorted(day.on_node[index]):
                pod = day.pods[pod_id]
                if not pod.uses_gpu or taken[pod.group] or not day.disruption_allowed(pod):
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
        self.history: list[MoveRecord] = []
        self.busy_until = -1.0
        self.last_end: float | None = None

    def __call__(self, day: Day) -> None:
        if day.now < self.busy_until:  # the last cycle is still planning or carrying its plan out: the next one waits
            # the controller's scheduler skips a run due while the last still goes on (a plain tick has no schedule)
            while self.trigger is not None and self.next_regular <= day.now:
                self.next_regular += self.every
            return
        if self.trigger is not None and not self._controller_due(day):
            return
        self.last_run, self.next_regular = day.now, day.now + self.every
        self.busy_until = float("inf")  # planning, then carrying the plan out: the next cycle waits for its end
        self._plan_then_run(day, replans=0)

    def _plan_then_run(self, day: Day, *, replans: int) -> None:
        """Plan on the cluster as it is now; the plan's run starts once its planning time has passed on the clock."""
        started = time.perf_counter()
        plan = self._plan(day)
        charge = self._planning_seconds(time.perf_counter() - started)
        day.figures.planning_charged_seconds += charge
        if plan is None or not (plan.moves or plan.placed_pending):
            then: Callable[[Day], None] = self._end_cycle
        else:
            then = lambda later: self._carry_out(later, plan, replans)  # noqa: E731
        if charge > 0:
            day.at(day.now + charge, "call", then)
        else:
            then(day)  # planning took no simulated time: at once

    def _end_cycle(self, day: Day) -> None:
        """The cycle's end: the pending trigger's gap counts from here (the controller's ``_cycle_ended``), and with
        prevention on, the fill-first labels follow the cluster as it is now (``app.cycle._fill_first``)."""
        self.busy_until = self.last_end = day.now
        if not (self.settings.steering.fill_first or day.scheduler.fill_first.any()):
            return
        tiers = {}
        if self.settings.steering.fill_first:  # else the labels left are removed
            tiers = fill_first_tiers(compute_figures(build_snapshot(self._objects(day), source="replay")).nodes)
        index = {n.name: i for i, n in enumerate(day.nodes)}
        day.scheduler.fill_first[:] = 0
        for name, tier in tiers.items():
            day.scheduler.fill_first[index[name]] = int(tier)

    def _planning_seconds(self, wall: float) -> float:
        if self.planning_clock == "limit":
            return float(self.settings.solver.time_limit_seconds)
        return wall if self.planning_clock == "measured" else 0.0

    def _controller_due(self, day: Day) -> bool:
        """The interval's cycle when it is due, else one the pending trigger starts (its own decision code)."""
        if day.now >= self.next_regular:
            return True
        assert self.trigger is not None
        blocked = [
            Blocked(str(p.id), day.now - p.arrived) for p in day.queue.values() if p.uses_gpu and p.first_bound < 0
        ]
        since = None if self.last_end is None else day.now - self.last_end
        return bool(self.trigger.due(blocked, since))

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

    def _carry_out(self, day: Day, plan: CompactionPlan, replans: int) -> None:
        """The executor's run: the plan checked on the cluster as it is once planned (before the fences and behind them:
        here one instant), made again up to ``REPLANS_WHEN_STALE`` times when it went stale meanwhile, then carried out."""
        index = {n.name: i for i, n in enumerate(day.nodes)}
        if _stale(day, plan, index):
            day.figures.stale_plans += 1
            if replans < REPLANS_WHEN_STALE:
                day.figures.replans += 1
                self._plan_then_run(day, replans=replans + 1)
            else:
                self._end_cycle(day)
            return
        # fenced as the executor fences: the nodes the plan frees, and those it drains for a pending pod
        fenced = sorted({index[n] for n in [*plan.freed_nodes, *kept_fenced(plan)] if n in index})
        day.fence(fenced, True)
        _Run(self, plan, index, fenced, started=day.now).next_batch(day)

    # ----- the snapshot

    def parsed_nodes(self, day: Day) -> list[Node]:
        return [
            parse_node(raw, source="replay", pool_label=DEFAULT_POOL_LABEL, warnings=[]) for raw in self._nodes(day)
        ]

    def _nodes(self, day: Day) -> list[dict[str, Any]]:
        tiers = day.scheduler.fill_first
        return [_node_object(n, int(tier), day, i) for i, (n, tier) in enumerate(zip(day.nodes, tiers, strict=True))]

    def _objects(self, day: Day) -> list[dict[str, Any]]:
        pods = [_pod_object(day, p) for p in day.pods.values()]
        return [*self._nodes(day), *pods, *_pdbs(day), *_mig_parted(day)]


class _Run:
    """One plan being carried out as the executor does (``actions/steps/evict.py``, ``actions/checks``): the moves in
    ``batches`` of ``max_concurrent_evictions`` (no two of one ReplicaSet, none onto another's source), each batch's
    replacements serving before the next; no batch started after ``max_run_seconds``. A move whose pod has gone or moved
    is skipped. One whose PDB allows nothing waits for the batch's replacements and asks again; refused then (the live
    executor waits up to ``replacement_timeout``: here the replacements it waits for are serving by then, so a PDB still
    at 0 stays at 0). One whose target lost its room is re-targeted under the plan's rules (``planner/retarget.assign``,
    the executor's own rule, on the cluster as it is); when no node may take it, or its PDB refused it, the moves off its
    source are given up (the node will not be emptied) and the run goes on. At the end the pending pods whose nodes
    were drained (every move off them made) are bound there, the fences lifted."""

    def __init__(
        self, compactor: Compactor, plan: CompactionPlan, index: dict[str, int], fenced: list[int], *, started: float
    ) -> None:
        self.compactor, self.plan, self.index, self.fenced, self.started = compactor, plan, index, fenced, started
        self.caps = compactor.settings.caps
        self.batches = batches(plan.moves, self.caps.max_concurrent_evictions)
        self.done: set[str] = set()
        self.given_up: set[str] = set()  # sources whose moves were given up
        self.deferred: list[Move] = []  # moves whose PDB allowed nothing: asked again after the batch

    def next_batch(self, day: Day) -> None:
        retry, self.deferred = self.deferred, []
        for move in retry:
            if self._live(day, move) and not self._move(day, move, again=True):
                self._give_up(day, move.from_node)
        limit = self.caps.max_run_seconds
        if not self.batches or (limit is not None and day.now - self.started >= limit):
            self.finish(day)
            return
        for move in self.batches.pop(0):
            if self._live(day, move) and not self._move(day, move, again=False):
                self._give_up(day, move.from_node)
        day.at(day.now + day.startup + EVICTION_SECONDS, "call", self.next_batch)

    def _live(self, day: Day, move: Move) -> bool:
        """Whether the move is still to be made: not given up, its pod still on its source (else skipped)."""
        pod = _pod_named(day, move.pod)
        return move.from_node not in self.given_up and pod is not None and pod.node == self.index.get(move.from_node)

    def _move(self, day: Day, move: Move, *, again: bool) -> bool:
        """Evict and steer one move; False when it is refused (its source's moves are then given up)."""
        pod = _pod_named(day, move.pod)
        assert pod is not None
        if not day.disruption_allowed(pod):
            if again:
                day.figures.moves_refused += 1
                return False
            self.deferred.append(move)
            return True
        target = self._target(day, move, pod)
        if target is None:
            day.figures.moves_refused += 1
            return False
        day.evict(pod.id)
        landed = day.bind_to(pod, target)
        workload = f"{NAMESPACE}/ReplicaSet/rs-{pod.group}"
        at = EPOCH + timedelta(seconds=day.now)
        outcome = "moved" if landed else "failed"
        self.compactor.history.append(
            MoveRecord(at, move.pod, workload, move.from_node, day.nodes[target].name, outcome)
        )
        if not landed:
            day.schedule_queue()  # the replacement waits as any pod: the scheduler places it
            return False
        self.done.add(move.pod)
        return True

    def _target(self, day: Day, move: Move, pod: Pod) -> int | None:
        """The planned target while the pod fits there, else another under the plan's rules, else None."""
        planned = self.index[move.to_node]
        if day.scheduler.fits(planned, pod.request):
            return planned
        other = _retarget(day, self, move)
        if other is None:
            return None
        day.figures.retargets += 1
        return self.index[other]

    def _give_up(self, day: Day, source: str) -> None:
        self.given_up.add(source)
        self.deferred = [m for m in self.deferred if m.from_node != source]

    def finish(self, day: Day) -> None:
        """The pending pods placed, the fences lifted; the re-cuts (``recut_all``) on the nodes the moves emptied, the
        run ending when mig-manager is done (``RECUT_SECONDS``), the pending pods they host then bound there."""
        unfinished = {m.from_node for m in self.plan.moves if m.pod not in self.done}
        recut = {
            r.node: r
            for r in self.plan.mig_repartition
            if r.node in self.index and r.node not in unfinished and not _gpu_pods_on(day, self.index[r.node])
        }
        for placement in self.plan.placed_pending:
            pod = _pod_named(day, placement.pod)
            if pod is not None and placement.to_node in self.index and placement.to_node not in unfinished:
                day.bind_to(pod, self.index[placement.to_node])
        day.fence(self.fenced, False)
        for name, r in recut.items():
            day.recut(self.index[name], r.to_config, r.allocatable, RECUT_SECONDS)
        day.schedule_queue()
        if not recut:
            self.compactor._end_cycle(day)
            return
        day.at(day.now + RECUT_SECONDS, "call", lambda later: self._after_recuts(later, set(recut)))

    def _after_recuts(self, day: Day, nodes: set[str]) -> None:
        """The re-cut nodes back (``Day.recut`` gave them their new layout just before): the pending pods the plan
        placed there bound to them, as the executor steers them (``place_all_pending``)."""
        for placement in self.plan.placed_pending:
            pod = _pod_named(day, placement.pod)
            if pod is not None and placement.to_node in nodes:
                day.bind_to(pod, self.index[placement.to_node])
        day.schedule_queue()
        self.compactor._end_cycle(day)


def _gpu_pods_on(day: Day, node: int) -> bool:
    return any(day.pods[p].uses_gpu for p in day.on_node[node])


def _stale(day: Day, plan: CompactionPlan, index: dict[str, int]) -> str:
    """Why the plan no longer holds before its first eviction (``checks/validate.plan_still_holds``), "" when it does:
    a node it frees runs a GPU pod it does not move (one bound there while it was made), or a pending pod it places on
    a node it drains no longer waits or will not fit there."""
    for name in plan.freed_nodes:
        planned = {m.pod for m in plan.moves if m.from_node == name}
        strangers = [p for p in day.on_node[index[name]] if day.pods[p].uses_gpu and _key(day.pods[p]) not in planned]
        if strangers:
            return f"node {name} now runs GPU pod(s) the plan does not move"
    recut = {r.node: r.allocatable for r in plan.mig_repartition}
    for name in kept_fenced(plan):
        node = index[name]
        leaving = {m.pod for m in plan.moves if m.from_node == name}
        # its pending pods take the layout the plan cuts it to
        offer = day.scheduler.offer_after(node, recut[name]) if name in recut else day.scheduler.allocatable[node]
        free = [a - u for a, u in zip(offer, day.scheduler.used[node], strict=True)]
        for p in day.on_node[node]:
            if _key(day.pods[p]) in leaving:
                free = [f + r for f, r in zip(free, day.scheduler.vector(day.pods[p].request), strict=True)]
        for placement in (p for p in plan.placed_pending if p.to_node == name):
            pod = _pod_named(day, placement.pod)
            if pod is None or pod.id not in day.queue:
                return f"pending pod {placement.pod} no longer waits"
            free = [f - r for f, r in zip(free, day.scheduler.vector(pod.request), strict=True)]
        if min(free) < 0:
            return f"node {name} will not have room for its pending pod(s)"
    return ""


def _key(pod: Pod) -> str:
    return f"{NAMESPACE}/{pod.name}"


def _retarget(day: Day, run: _Run, move: Move) -> str | None:
    """Another target for ``move`` by the executor's own rule (``planner/retarget.assign``), on the cluster as it is:
    the other moves off its source still to be made must fit too."""
    moving = _pod_named(day, move.pod)
    assert moving is not None
    wanted = [Wanted(parse_pod(_pod_object(day, moving), source="replay"), move.to_node, keep_planned=False)]
    for other in run.plan.moves:
        pod = _pod_named(day, other.pod)
        still = other.from_node == move.from_node and other.pod != move.pod and other.pod not in run.done
        if still and pod is not None and pod.node == run.index[move.from_node]:
            wanted.append(Wanted(parse_pod(_pod_object(day, pod), source="replay"), other.to_node))
    nodes = run.compactor.parsed_nodes(day)
    use: dict[str, NodeUse] = {}
    for node, name in enumerate(n.name for n in day.nodes):
        cpu, memory, gpus, *extended = (int(v) for v in day.scheduler.used[node])
        pods = int(day.scheduler.pods[node])
        held = {"cpu": cpu, "memory": memory * 2**20, "nvidia.com/gpu": gpus, "pods": pods}
        requests = Resources(held | dict(zip(day.extended, extended, strict=True)))
        use[name] = NodeUse(requests, gpus > 0 or any(extended), False)
    out_of_reach = {
        *run.plan.freed_nodes,
        *kept_fenced(run.plan),
        move.to_node,
        *(m.from_node for m in run.plan.moves if m.pod not in run.done and m.from_node not in run.given_up),
    }
    found = assign(wanted, nodes, use, pool="", out_of_reach=out_of_reach)
    return found[0] if found else None


def _pod_named(day: Day, key: str) -> Pod | None:
    name = key.split("/", 1)[-1]
    if not name.startswith("p"):
        return None
    return day.pods.get(int(name[1:]))


def _node_object(node: Any, tier: int = 0, day: Day | None = None, index: int = -1) -> dict[str, Any]:
    """A GPU node as the device plugin and GFD label it (a MIG-capable one with the mixed strategy: its instances as
    ``day``'s scheduler offers them now, its ``nvidia.com/mig.config`` as last cut; a time-sliced one: its replicas as
    ``nvidia.com/gpu.shared``), or a CPU-only node (no GPU resource, no GPU label)."""
    resources = {"cpu": f"{node.cpu_milli}m", "memory": f"{node.memory_mib}Mi", "pods": "110"}
    labels = {"kubernetes.io/hostname": node.name}
    gpus = physical_gpus(node)
    if gpus:
        offered = day.scheduler.allocatable[index] if day is not None else [0, 0, node.gpus]
        whole = int(offered[2])
        if whole:
            resources["nvidia.com/gpu"] = str(whole)
        labels |= {
            "nvidia.com/gpu.product": node.model,
            "nvidia.com/gpu.count": str(gpus),
            "nvidia.com/gpu.present": "true",
            **({FILL_FIRST_LABEL: str(tier)} if tier else {}),
        }
    layout = day.layouts[index] if day is not None else ""
    if layout:
        labels |= {
            "nvidia.com/mig.capable": "true",
            "nvidia.com/mig.strategy": "mixed",
            "nvidia.com/mig.config": layout,
        }
    if getattr(node, "replicas", 0):  # time-sliced, renamed: GFD's labels of the device plugin's sharing config
        labels |= {"nvidia.com/gpu.replicas": str(node.replicas), "nvidia.com/gpu.sharing-strategy": "time-slicing"}
    if gpus and day is not None:  # MIG instances, time-sliced replicas
        resources |= {name: str(int(n)) for name, n in zip(day.extended, offered[3:], strict=True) if n}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node.name, "uid": f"node-{node.name}", "labels": labels},
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
    requests = {"cpu": f"{shape.cpu_milli}m", "memory": f"{shape.memory_mib}Mi"}
    gpus = {"nvidia.com/gpu": str(shape.num_gpu)} if shape.num_gpu else {}  # a CPU-only pod asks none
    gpus |= {name: str(n) for name, n in zip(day.extended, pod.arrival.extended, strict=False) if n}
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "resources": {"requests": requests | gpus, "limits": gpus}}]
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


def _mig_parted(day: Day) -> list[dict[str, Any]]:
    """The GPU Operator's mig-parted ConfigMap, when the day's nodes are MIG-capable (re-cuts read its layouts)."""
    if not day.mig_config:
        return []
    metadata = {
        "name": "default-mig-parted-config",
        "namespace": "gpu-operator",
        "labels": {"app.kubernetes.io/component": "nvidia-mig-manager"},
    }
    return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"config.yaml": day.mig_config}}]


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

"""The simulation behind ``replay_day.py``: a GPU cluster over time, pods arriving and leaving as the Alibaba trace's do,
placed by an emulated kube-scheduler, and one strategy acting on it every few minutes.

Everything here is an event loop over simulated seconds (no wall clock but the planner's), seeded, so one set of
options gives one result. The rules are stated in ``replay_day.py``'s docstring, which docs/benchmarks.md repeats.

* ``Workload``: the pod stream (the pods held at the start, then arrivals) with each pod's life and ReplicaSet;
* ``Day``: the cluster (``kube_scheduler.KubeScheduler``, kube-scheduler v1.36 as upstream scores, as the scheduler;
  its queue of pending pods; fences) and the events; ``Day.evict``, ``Day.bind_to`` and ``Day.fence`` are what a
  strategy may do to it;
* ``Figures``: what is measured as the day goes (sampled every minute, and per pod).
"""

from __future__ import annotations

import csv
import dataclasses
import heapq
import itertools
import math
import random
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import trace_replay
from kube_scheduler import KubeScheduler
from trace_replay import TraceNode, TracePod
from trace_sharing import SHARED_SIZE, demand_of, replicas_asked

SAMPLE_SECONDS = 60.0
FLUSH_SECONDS = (
    300.0  # kube-scheduler retries every unschedulable pod at least this often (podMaxInUnschedulablePodsDuration)
)
# the MIG ones and the time-sliced replica: --world article
SIZES = ("1 GPU", "2-4 GPUs", "8 GPUs", "CPU-only", "MIG 1g", "MIG 2g", "MIG 3g", SHARED_SIZE)


def size_class(gpus: int) -> str:
    return SIZES[3] if gpus == 0 else SIZES[0] if gpus == 1 else SIZES[1] if gpus <= 4 else SIZES[2]


# ---------------------------------------------------------------- the workload


@dataclass(frozen=True, slots=True)
class Arrival:
    """One pod of the stream: what it asks and how long it lives."""

    pod: TracePod
    life: float  # seconds it runs once bound; for a pod of the common start, what is left of its life
    initial: bool = False  # of the common start (drawn as held when the day starts), not an arrival of the day
    extended: tuple[int, ...] = ()  # what it asks of the day's extended resources (``Day.extended``), in their order
    size: str = ""  # its class in the tables when not by GPU count (a MIG profile)
    group: int = -1  # its ReplicaSet when a Deployment made it (``--world article``); -1: grouped by shape (``_join``)


@dataclass(frozen=True, slots=True)
class Workload:
    """The day's pods: the common start ``initial`` (drawn once, whatever the scheduler: every strategy's scheduler
    places this same list in this order at time 0, and a pod of it that fits nowhere waits in the queue from time 0),
    then one of ``arrivals`` every ``interval`` seconds."""

    arrivals: Iterator[Arrival]
    initial: tuple[Arrival, ...]
    interval: float
    target_gpus: float  # what the common start's pods ask in all: at least this (the last pod crosses it)
    gpu_seconds_per_pod: float  # mean GPUs x life of an arrival: the interval's reason
    max_life: float  # the longest life: a pod of the stream is held at time 0 with probability life / max_life
    max_replicas: int  # a ReplicaSet takes new pods of its shape until it has 1..max_replicas (drawn) alive


def read_stream(
    trace_dir: Any, variant: str, max_life: float, *, cpu_only: bool = False
) -> list[tuple[TracePod, float]]:
    """Every GPU pod of the trace (``cpu_only``: and every CPU-only pod) in creation order, with its life (deletion -
    creation), capped at ``max_life``."""
    with (trace_dir / trace_replay.pod_file(variant)).open(newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if cpu_only or int(r["num_gpu"]) > 0]
    rows.sort(key=lambda r: int(r.get("creation_time") or 0))
    lives = [(int(r["deletion_time"]) - int(r["creation_time"])) if "deletion_time" in r else max_life for r in rows]
    return [
        (trace_replay.trace_pod(r), float(min(max(life, 1), max_life))) for r, life in zip(rows, lives, strict=True)
    ]


def arrivals_only(stream: Sequence[tuple[TracePod, float]], *, gpus: int, max_replicas: int) -> Workload:
    """FGD's workload: the pods arrive one a second and never leave, nothing held at the start."""
    forever = [(pod, math.inf) for pod, _ in stream]
    load = workload(forever, gpus=gpus, fill=0.0, max_replicas=max_replicas)
    return dataclasses.replace(load, interval=1.0, target_gpus=0.0, max_life=math.inf)


def arrivals_until(stream: Sequence[tuple[TracePod, float]], gpus: float) -> int:
    """How many arrivals of the stream (replayed) ask for ``gpus`` GPUs in all."""
    total, count = 0, 0
    while total < gpus:
        total += stream[count % len(stream)][0].shape.num_gpu
        count += 1
    return count


def workload(
    stream: Sequence[tuple[TracePod, float]], *, gpus: int, fill: float, max_replicas: int, seed: int = 1
) -> Workload:
    """The common start (``common_start``), the endless arrivals (the list replayed) and the interval that keeps the
    offered GPU demand at ``fill`` of ``gpus`` (Little's law: demand = rate x mean GPUs x life)."""
    mean_gpu_seconds = sum(demand_of(p) * life for p, life in stream) / len(stream)
    max_life = max(life for _, life in stream)

    def pods() -> Iterator[Arrival]:
        while True:
            for pod, life in stream:
                yield arrival_of(pod, life)

    return Workload(
        arrivals=pods(),
        initial=common_start(stream, fill * gpus, max_life, random.Random(f"{seed}:prefill")),
        interval=mean_gpu_seconds / (fill * gpus) if fill > 0 else 1.0,
        target_gpus=fill * gpus,
        gpu_seconds_per_pod=mean_gpu_seconds,
        max_life=max_life,
        max_replicas=max_replicas,
    )


def arrival_of(pod: TracePod, life: float) -> Arrival:
    """A pod of the stream as it arrives: a sharing pod mapped to time-sliced replicas (``trace_sharing``) asks them."""
    replicas = replicas_asked(pod)
    return Arrival(pod, life, extended=(replicas,), size=SHARED_SIZE) if replicas else Arrival(pod, life)


def common_start(
    stream: Sequence[tuple[TracePod, float]], target_gpus: float, max_life: float, rng: random.Random
) -> tuple[Arrival, ...]:
    """The pods alive when the day starts, drawn once and independent of any scheduler: the stream (replayed) in order,
    each held with probability life / longest life (the pods alive at a random moment are the long-lived ones more
    often) and keeping a uniform share of its life, until the GPUs drawn reach ``target_gpus``. So the day starts in
    its steady state rather than draining for hours; whether a scheduler can place them all is its own outcome."""
    drawn: list[Arrival] = []
    total = 0.0
    if target_gpus <= 0 or not stream:
        return ()
    for pod, life in itertools.cycle(stream):
        if total >= target_gpus:
            break
        if rng.random() * max_life > life:
            continue
        residual = life * (1.0 - rng.random())  # uniform in (0, life]: it arrived before the day
        drawn.append(dataclasses.replace(arrival_of(pod, residual), initial=True))
        total += demand_of(pod)
    return tuple(drawn)


# ---------------------------------------------------------------- the cluster


@dataclass(slots=True)
class Pod:
    """A pod alive in the simulation (bound, or waiting in the queue)."""

    id: int
    arrival: Arrival
    arrived: float
    leaves: float
    group: int = -1  # its ReplicaSet
    node: int = -1
    first_bound: float = -1.0
    ready_at: float = 0.0  # when it (or its latest replacement) serves: bound + start-up
    moves: int = 0
    replacement: bool = False  # an evicted pod's replacement, waiting (its wait is a disruption, not a queue time)
    gpu_eq: float = 0.0  # GPU-equivalents it holds: whole GPUs, plus a MIG instance's compute share (``Day.create``)

    @property
    def gpus(self) -> int:
        return self.arrival.pod.shape.num_gpu

    @property
    def uses_gpu(self) -> bool:
        return bool(self.gpus or any(self.arrival.extended))

    @property
    def size(self) -> str:
        return self.arrival.size or size_class(self.gpus)

    @property
    def request(self) -> tuple[int, ...]:
        shape = self.arrival.pod.shape
        return shape.cpu_milli, shape.memory_mib, shape.num_gpu, *self.arrival.extended

    @property
    def name(self) -> str:
        return f"p{self.id:06d}"


@dataclass
class Figures:
    """What the day measured: samples every minute, and per-pod outcomes."""

    times: list[float] = field(default_factory=list)
    allocation: list[float] = field(default_factory=list)  # GPUs held by bound pods / the cluster's GPUs
    whole_free: list[int] = field(default_factory=list)  # GPUs on nodes holding no GPU
    pending_gpus: list[int] = field(default_factory=list)  # GPUs asked by pods waiting in the queue
    # CPU-only pods bound to GPU nodes, and the share of the GPU nodes' CPU they take (``--with-cpu-only``)
    cpu_pods_on_gpu_nodes: list[int] = field(default_factory=list)
    gpu_node_cpu_to_cpu_pods: list[float] = field(default_factory=list)
    # queue times of the day's arrivals and of the common start's pods that had to wait (from time 0)
    waits: dict[str, list[float]] = field(default_factory=lambda: {s: [] for s in SIZES})
    still_waiting: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SIZES, 0))  # at the end (censored)
    # the 8-GPU pods still waiting at the end: their GPU models, how long they waited, the nodes that could hold them
    eight_waiting: list[dict[str, Any]] = field(default_factory=list)
    blocked_gpu_seconds: float = 0.0
    blocked_by_size: dict[str, float] = field(default_factory=dict)  # the same, per size class (GPU-eq. seconds)
    # of which no arrangement could serve, sampled each minute: see ``beyond_capacity``
    beyond_capacity_gpu_seconds: float = 0.0
    # of the MIG pods' blocked demand, what no layouts of the MIG-capable nodes could host: see ``mig_beyond_capacity``
    mig_beyond_capacity_gpu_seconds: float = 0.0
    allocated_gpu_seconds: float = 0.0  # GPUs held by bound pods, integrated over the day
    evictions: int = 0
    restart_gpu_seconds: float = 0.0  # GPUs x start-up of every replacement
    replacement_wait_seconds: float = 0.0  # evicted pods' replacements waiting in the queue
    planner_seconds: list[float] = field(default_factory=list)
    planning_charged_seconds: float = 0.0  # simulated seconds the cycles' planning took before their evictions
    cycles: int = 0
    moves_refused: int = 0  # a move the cluster no longer allowed when its turn came (its source's moves given up)
    retargets: int = 0  # moves whose planned target lost its room, made to another node under the plan's rules
    stale_plans: int = 0  # plans that no longer held when their run was to start (a pod bound meanwhile)
    replans: int = 0  # of which planned again at once (the cycle's REPLANS_WHEN_STALE)
    pdb_violations: int = 0  # evictions past a PodDisruptionBudget (maxUnavailable 1): must stay 0
    held_at_start: int = 0  # pods of the common start placed at time 0
    queued_at_start: int = 0  # pods of the common start that fit nowhere at time 0: they wait from time 0
    arrived: int = 0
    left: int = 0
    alive: int = 0  # at the end: held_at_start + queued_at_start + arrived - left
    lost: int = 0  # pods neither bound, waiting nor gone: must stay 0
    overcommitted_nodes: int = 0  # nodes whose pods ask more than they have (or more than 110 pods): must stay 0
    # GPU allocation each time the GPUs asked by the day's arrivals reach another percent of the cluster's GPUs
    # (FGD's x axis, "arrived workload"): percent -> allocation
    by_arrived: dict[int, float] = field(default_factory=dict)
    arrived_gpus: float = 0.0
    mig_idle: list[float] = field(default_factory=list)  # MIG instances offered and not held, sampled (article)
    recuts: int = 0  # MIG re-cuts carried out
    recut_offline_gpu_seconds: float = 0.0  # GPUs x the time a re-cut kept them from serving


class Day:
    """The cluster and its events. ``strategy(day)`` runs at each of its ticks; ``run(seconds)`` plays the day."""

    def __init__(
        self,
        nodes: Sequence[TraceNode],
        load: Workload,
        *,
        profile: str = "default",
        startup: float,
        seed: int = 1,
        extended: Mapping[str, float] | None = None,
        mig_config: str = "",
        mig_layouts: Mapping[str, Mapping[str, int]] | None = None,
    ) -> None:
        """``extended``: the extended resources the nodes offer past whole GPUs (MIG instances), each with the
        GPU-equivalents one is worth; ``mig_config``: the GPU Operator's mig-parted config.yaml (re-cuts read it);
        ``mig_layouts``: the instances a MIG-capable node offers under each of its layouts (``mig_beyond_capacity``)."""
        self.mig_layouts = dict(mig_layouts or {})
        self.nodes = list(nodes)
        self.extended = dict(extended or {})
        self.mig_config = mig_config
        self.scheduler = KubeScheduler(nodes, profile=profile, seed=seed, extended=tuple(self.extended))
        self.weights = np.array(list(self.extended.values()), dtype=float)
        # the scheduler's columns of MIG instances, which the MIG idle rate counts (a time-sliced replica is no MIG slice)
        self.mig_columns = [3 + i for i, name in enumerate(self.extended) if name.startswith("nvidia.com/mig-")]
        self.gpus = sum(physical_gpus(n) for n in nodes)
        self.layouts = [getattr(n, "layout", "") for n in nodes]  # each node's nvidia.com/mig.config, as re-cut
        self.load = load
        self.startup = startup
        self.now = 0.0
        self.pods: dict[int, Pod] = {}
        self.queue: dict[int, Pod] = {}  # waiting, in arrival order
        self.on_node: list[set[int]] = [set() for _ in nodes]
        self.groups: dict[int, set[int]] = {}  # ReplicaSet -> its pods alive
        self._sizes: dict[int, int] = {}  # ReplicaSet -> how many pods it grows to
        self._growing: dict[Any, int] = {}  # shape -> the ReplicaSet taking new pods of it
        self._group_ids = itertools.count()
        self._group_rng = random.Random(f"{seed}:replicas")
        self.figures = Figures()
        self._ids = itertools.count()
        self._seq = itertools.count()
        self._events: list[tuple[float, int, str, Any]] = []
        self._prefilling = False
        self.start: list[tuple[str, int]] = []  # the common start as placed: (trace pod, node index or -1: queued)

    # ----- events

    def at(self, when: float, kind: str, payload: Any = None) -> None:
        heapq.heappush(self._events, (when, next(self._seq), kind, payload))

    def run(self, seconds: float, ticks: Sequence[tuple[float, float, Callable[[Day], None]]] = ()) -> Figures:
        """Play ``seconds`` of the day; each tick is (first, every, action)."""
        self._prefill()
        self.at(self.load.interval, "arrive")
        self.at(0.0, "sample")
        self.at(FLUSH_SECONDS, "flush")
        for first, every, action in ticks:
            self.at(first, "tick", (every, action))
        self.advance(seconds)
        self._close()
        return self.figures

    def advance(self, until: float) -> None:
        """Handle the events due up to ``until`` (the clock then stands at ``until``)."""
        while self._events and self._events[0][0] <= until:
            when, _, kind, payload = heapq.heappop(self._events)
            self._account(when)
            self.now = when
            self._handle(kind, payload)
        self._account(until)
        self.now = until

    def _handle(self, kind: str, payload: Any) -> None:
        if kind == "arrive":
            self._arrive(next(self.load.arrivals))
            self.at(self.now + self.load.interval, "arrive")
        elif kind == "leave":
            self._leave(payload)
        elif kind == "sample":
            self._sample()
            self.at(self.now + SAMPLE_SECONDS, "sample")
        elif kind == "flush":
            self.schedule_queue()
            self.at(self.now + FLUSH_SECONDS, "flush")
        elif kind == "tick":
            every, action = payload
            action(self)
            self.at(self.now + every, "tick", payload)
        elif kind == "call":
            payload(self)

    def _account(self, until: float) -> None:
        """Blocked demand integrates the queue's GPUs over time, allocation the bound pods' GPUs."""
        span = max(0.0, until - self.now)
        if not span:
            return
        waiting = 0.0
        by_size = self.figures.blocked_by_size
        for pod in self.queue.values():
            waiting += pod.gpu_eq
            by_size[pod.size] = by_size.get(pod.size, 0.0) + pod.gpu_eq * span
        self.figures.blocked_gpu_seconds += waiting * span
        self.figures.allocated_gpu_seconds += self.bound_gpus() * span

    # ----- pods

    def _prefill(self) -> None:
        """The common start (``Workload.initial``, the same list for every strategy) placed by this day's scheduler in
        its order at time 0: a pod placed is running (serving, what is left of its life counting from now); one that
        fits nowhere waits in the queue from time 0, as an arrival would (its wait and blocked GPUs count), never
        dropped."""
        self._prefilling = True
        for arrival in self.load.initial:
            pod = self._pod(arrival, 0.0)
            self._join(pod)
            if self._schedule(pod):
                self.figures.held_at_start += 1
            else:
                self.queue[pod.id] = pod
                self.figures.queued_at_start += 1
            self.start.append((arrival.pod.name, pod.node))
        self._prefilling = False

    def _pod(self, arrival: Arrival, arrived: float) -> Pod:
        pod = Pod(next(self._ids), arrival, arrived, math.inf)  # its life starts when it is bound: see _bound
        pod.gpu_eq = pod.gpus + float(np.dot(self.weights, arrival.extended)) if arrival.extended else float(pod.gpus)
        return pod

    def create(self, arrival: Arrival) -> None:
        """A pod a Deployment's ReplicaSet creates (``--world article``): an arrival of the day."""
        self._arrive(arrival)

    def _arrive(self, arrival: Arrival) -> None:
        pod = self._pod(arrival, self.now)
        self._join(pod)
        self.figures.arrived += 1
        self.figures.arrived_gpus += pod.gpu_eq
        if not self._schedule(pod):
            self.queue[pod.id] = pod
        point = int(100 * self.figures.arrived_gpus // self.gpus)
        for percent in range(len(self.figures.by_arrived), point + 1):
            self.figures.by_arrived[percent] = self.bound_gpus() / self.gpus

    def _join(self, pod: Pod) -> None:
        """A new pod joins the ReplicaSet of its shape that is still growing (a Deployment scaling up), else starts one
        that will grow to 1..max_replicas pods: so a ReplicaSet's replicas are alive together, as a Deployment's are."""
        key = pod.arrival.pod.key
        group = pod.arrival.group if pod.arrival.group >= 0 else self._growing.get(key, -1)
        if pod.arrival.group < 0 and (group < 0 or len(self.groups.get(group, ())) >= self._sizes[group]):
            group = next(self._group_ids)
            self._sizes[group] = self._group_rng.randint(1, self.load.max_replicas)
            self._growing[key] = group
        pod.group = group
        self.pods[pod.id] = pod
        self.groups.setdefault(group, set()).add(pod.id)

    def _leave(self, pod_id: int) -> None:
        pod = self.pods.pop(pod_id, None)
        if pod is None:
            return
        self.groups[pod.group].discard(pod.id)
        self.figures.left += 1
        if pod.node >= 0:
            node = pod.node
            self._unbind(pod)
            self.schedule_queue(node)
        else:
            self.queue.pop(pod.id, None)

    def scale_down(self, group: int, count: int) -> None:
        """``count`` pods of ReplicaSet ``group`` deleted as the ReplicaSet controller picks them
        (``controller_utils.ActivePodsWithRanks``): not yet bound first, then not Ready, then those sharing their
        node with more of the ReplicaSet's pods, then the newest."""
        members = [self.pods[m] for m in self.groups.get(group, ())]
        per_node = Counter(p.node for p in members if p.node >= 0)

        def rank(pod: Pod) -> tuple[bool, bool, int, float]:
            return (pod.node >= 0, self.now >= pod.ready_at, -per_node[pod.node], -pod.arrived)

        for pod in sorted(members, key=rank)[:count]:
            self._leave(pod.id)

    def _schedule(self, pod: Pod) -> bool:
        """One scheduling attempt; the pod's ReplicaSet siblings on nodes are what the default spreading counts."""
        siblings = [self.pods[m].node for m in self.groups.get(pod.group, ()) if m != pod.id and self.pods[m].node >= 0]
        node = self.scheduler.place(pod.request, pod.arrival.pod.models, siblings)
        if node is None:
            return False
        self._bound(pod, node)
        return True

    def _bound(self, pod: Pod, node: int) -> None:
        pod.node = node
        pod.ready_at = self.now + self.startup
        self.on_node[node].add(pod.id)
        if pod.first_bound < 0:
            pod.first_bound = self.now
            if self._prefilling:
                pod.ready_at = 0.0  # of the common start, placed at time 0: running already
            else:
                self.figures.waits[pod.size].append(self.now - pod.arrived)
            pod.leaves = self.now + pod.arrival.life  # a pod waiting for a node waits; its work starts once bound
            if pod.leaves < math.inf:
                self.at(pod.leaves, "leave", pod.id)
        elif pod.replacement:
            self.figures.replacement_wait_seconds += self.now - pod.arrived
        pod.replacement = False

    def _unbind(self, pod: Pod) -> None:
        self.scheduler.release(pod.node, pod.request)
        self.on_node[pod.node].discard(pod.id)
        pod.node = -1

    def schedule_queue(self, node: int | None = None) -> None:
        """The queue retried in arrival order (kube-scheduler's active queue after an event); with ``node``, only pods
        that fit on that node now are tried (the others would fail as before; asked once per request until a placement
        takes room). A pod of the same request and GPU models as one that fitted nowhere earlier in the pass is not
        tried again: placing pods only takes room, so it would fail as well (and a failed attempt changes nothing: no tie
        drawn, the round-robin start back where it was). The request includes the extended resources: a 1g.5gb pod and
        a time-sliced one of the same cpu and memory are not the same request."""
        failed: set[Any] = set()
        fits_node: dict[tuple[int, ...], bool] = {}  # request -> fits on ``node``, until a placement takes room
        for pod in list(self.queue.values()):
            request = pod.request
            key = (request, pod.arrival.pod.models)
            if key in failed:
                continue
            if node is not None:
                fits = fits_node.get(request)
                if fits is None:
                    fits = fits_node[request] = self.scheduler.fits(node, request)
                if not fits:
                    continue
            if self._schedule(pod):
                del self.queue[pod.id]
                fits_node.clear()
            else:
                failed.add(key)

    # ----- what a strategy may do

    def disruption_allowed(self, pod: Pod) -> bool:
        """What the Eviction API asks the pod's PDB: a ReplicaSet of two or more has one (maxUnavailable 1), which allows
        an eviction only while every member is bound and Ready."""
        members = self.groups.get(pod.group, set())
        if len(members) < 2:
            return True
        return all(self.pods[m].node >= 0 and self.now >= self.pods[m].ready_at for m in members)

    def evict(self, pod_id: int) -> Pod | None:
        """Evict a bound pod: its ReplicaSet's replacement (the same request, the same remaining life) waits for a node."""
        pod = self.pods.get(pod_id)
        if pod is None or pod.node < 0:
            return None
        if not self.disruption_allowed(pod):
            self.figures.pdb_violations += 1
        self._unbind(pod)
        pod.moves += 1
        pod.replacement = True
        pod.arrived = self.now  # the replacement's own wait starts now
        self.figures.evictions += 1
        self.figures.restart_gpu_seconds += pod.gpu_eq * self.startup
        self.queue[pod.id] = pod
        return pod

    def bind_to(self, pod: Pod, node: int) -> bool:
        """Bind a waiting pod (a steered replacement, a placed pending pod) to ``node`` when it fits there now."""
        if pod.id not in self.queue or not self.scheduler.fits(node, pod.request):
            return False
        if pod.arrival.pod.models and self.nodes[node].model not in pod.arrival.pod.models:
            return False
        self.scheduler.bind(node, pod.request)
        del self.queue[pod.id]
        self._bound(pod, node)
        return True

    def recut(self, node: int, layout: str, offer: Mapping[str, int], seconds: float) -> None:
        """Node ``node`` re-cut to ``layout`` by mig-manager: it stays fenced ``seconds`` (GPU clients stopped, the GPUs
        reset, the device plugin restarted), then offers ``offer`` (resource -> instances; ``nvidia.com/gpu``: whole
        GPUs) and takes pods again."""
        self.scheduler.fenced[node] = True
        self.figures.recuts += 1
        self.figures.recut_offline_gpu_seconds += physical_gpus(self.nodes[node]) * seconds

        def done(day: Day) -> None:
            day.scheduler.reoffer(node, offer)
            day.layouts[node] = layout
            day.scheduler.fenced[node] = False
            day.schedule_queue(node)

        self.at(self.now + seconds, "call", done)

    def fence(self, nodes: Sequence[int], fenced: bool) -> None:
        for node in nodes:
            self.scheduler.fenced[node] = fenced

    # ----- figures

    def _sample(self) -> None:
        held = self.scheduler.used[:, 2:].any(axis=1)  # any GPU or MIG instance held
        self.figures.times.append(self.now)
        self.figures.allocation.append(self.bound_gpus() / self.gpus)
        self.figures.whole_free.append(int(sum(physical_gpus(n) for i, n in enumerate(self.nodes) if not held[i])))
        self.figures.pending_gpus.append(round(sum(p.gpu_eq for p in self.queue.values())))
        if self.mig_columns:
            offered = self.scheduler.allocatable[:, self.mig_columns].sum()
            used = self.scheduler.used[:, self.mig_columns].sum()
            self.figures.mig_idle.append(1 - used / offered if offered else 0.0)
        self._sample_cpu_pods()
        if self.queue:
            self.figures.beyond_capacity_gpu_seconds += beyond_capacity(self) * SAMPLE_SECONDS
            if self.mig_layouts:
                self.figures.mig_beyond_capacity_gpu_seconds += mig_beyond_capacity(self) * SAMPLE_SECONDS

    def _sample_cpu_pods(self) -> None:
        """Where CPU-only pods run: on a GPU node they take CPU an 8-GPU pod may need (the article's fourth cause)."""
        on_gpu = [p for p in self.pods.values() if not p.uses_gpu and p.node >= 0 and physical_gpus(self.nodes[p.node])]
        self.figures.cpu_pods_on_gpu_nodes.append(len(on_gpu))
        gpu_cpu = sum(n.cpu_milli for n in self.nodes if physical_gpus(n))
        self.figures.gpu_node_cpu_to_cpu_pods.append(sum(p.request[0] for p in on_gpu) / gpu_cpu if gpu_cpu else 0.0)

    def _close(self) -> None:
        for pod in self.queue.values():
            if pod.first_bound < 0:
                self.figures.still_waiting[pod.size] += 1
                self.figures.waits[pod.size].append(self.now - pod.arrived)
            if pod.size == SIZES[2]:
                self.figures.eight_waiting.append(self._why_waiting(pod))
        bound = sum(len(s) for s in self.on_node)
        self.figures.alive = len(self.pods)
        self.figures.lost = len(self.pods) - bound - len(self.queue)
        over = (self.scheduler.used > self.scheduler.allocatable).any(axis=1) | (
            self.scheduler.pods > trace_replay.MAX_PODS
        )
        self.figures.overcommitted_nodes = int(over.sum())

    def _why_waiting(self, pod: Pod) -> dict[str, Any]:
        """An 8-GPU pod waiting at the end: its models, its wait, and the nodes of those models that hold 8 GPUs."""
        models = pod.arrival.pod.models
        able = [n for n in self.nodes if n.gpus >= pod.gpus and (not models or n.model in models)]
        return {
            "models": list(models),
            "waitedHours": round((self.now - pod.arrived) / 3600, 2),
            "nodesThatCouldHoldIt": len(able),
            "replacement": pod.first_bound >= 0,
        }

    def bound_gpus(self) -> float:
        """GPU-equivalents held by bound pods: whole GPUs, and each MIG instance's compute share."""
        return float(self.held_per_node().sum())

    def held_per_node(self) -> np.ndarray:
        """Per node, the GPU-equivalents its pods hold (whole GPUs, MIG instances by their compute share)."""
        held: np.ndarray = self.scheduler.used[:, 2].astype(float)
        return held + self.scheduler.used[:, 3:] @ self.weights if self.extended else held


def physical_gpus(node: Any) -> int:
    """The GPUs of a node: its whole GPUs, or those its MIG instances are cut from."""
    return int(getattr(node, "physical_gpus", 0) or node.gpus)


def beyond_capacity(day: Day) -> int:
    """GPUs asked by the pods alive (bound or waiting) that no arrangement of them could serve: the excess of their
    demand over a maximum flow from pods to the nodes they may use, by GPU count alone (a pod of N GPUs only to nodes of
    at least N GPUs of a model it allows; cpu, memory and whole-node packing relaxed). So it is a lower bound: blocked
    demand beyond it may be fragmentation that moves could clear; up to it, no strategy could, only more GPUs."""
    from ortools.graph.python import max_flow  # the planner's own solver library; only this figure needs it here

    asked: dict[tuple[tuple[str, ...], int], int] = {}
    for pod in day.pods.values():  # whole-GPU pods only: leaving MIG pods out keeps it a lower bound
        key = (pod.arrival.pod.models, pod.gpus)
        asked[key] = asked.get(key, 0) + pod.gpus
    room: dict[tuple[str, int], int] = {}
    for node in day.nodes:
        room[node.model, node.gpus] = room.get((node.model, node.gpus), 0) + node.gpus
    flow = max_flow.SimpleMaxFlow()
    source, sink = 0, 1
    groups = {key: 2 + i for i, key in enumerate(asked)}
    pools = {key: 2 + len(groups) + i for i, key in enumerate(room)}
    for (models, gpus), group in groups.items():
        flow.add_arc_with_capacity(source, group, asked[models, gpus])
        for (model, size), pool in pools.items():
            if size >= gpus and (not models or model in models):
                flow.add_arc_with_capacity(group, pool, asked[models, gpus])
    for key, pool in pools.items():
        flow.add_arc_with_capacity(pool, sink, room[key])
    flow.solve(source, sink)
    return min(sum(asked.values()) - flow.optimal_flow(), sum(p.gpus for p in day.queue.values()))


def mig_beyond_capacity(day: Day) -> float:
    """GPU-equivalents asked by the MIG pods alive (bound or waiting) that no layouts of the MIG-capable nodes could
    host: their demand less the most a linear relaxation hosts, the nodes shared out among ``day.mig_layouts`` in
    fractions, each instance hosting one pod of its profile (cpu, memory, the re-cut's time and which node a pod is on
    relaxed). So it is a lower bound, like ``beyond_capacity``: the MIG pods' blocked demand up to it no re-cut and no
    move could serve at that minute, only more MIG GPUs (or a mix that fits the layouts better)."""
    from ortools.linear_solver import pywraplp  # the planner's own solver library; only this figure needs it here

    weights = {name: day.extended[name] for name in day.extended if name.startswith("nvidia.com/mig-")}
    names = list(day.extended)
    asked: Counter[str] = Counter()
    for pod in day.pods.values():
        asked.update({names[i]: n for i, n in enumerate(pod.arrival.extended) if n and names[i] in weights})
    if not asked:
        return 0.0
    solver = pywraplp.Solver.CreateSolver("GLOP")
    cut = {layout: solver.NumVar(0.0, solver.infinity(), layout) for layout in day.mig_layouts}
    solver.Add(solver.Sum(list(cut.values())) <= sum(1 for layout in day.layouts if layout))
    hosted = {}
    for name, count in asked.items():
        hosted[name] = solver.NumVar(0.0, float(count), name)
        solver.Add(hosted[name] <= solver.Sum([cut[c] * offer.get(name, 0) for c, offer in day.mig_layouts.items()]))
    solver.Maximize(solver.Sum([weights[name] * h for name, h in hosted.items()]))
    solver.Solve()
    demand = sum(weights[name] * count for name, count in asked.items())
    waiting = sum(p.gpu_eq for p in day.queue.values() if any(n for n in p.arrival.extended))
    return min(max(0.0, demand - solver.Objective().Value()), waiting)


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

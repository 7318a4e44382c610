"""A day of the Alibaba GPU trace replayed over time, against the strategies an operator would pick (issues [21], [42]).

    python benchmarks/replay_day.py --quick                                     # 100 nodes, one hour, every strategy
    python benchmarks/replay_day.py --nodes 400 --hours 12 --seeds 1,2,3 --time-limit 10   # docs/benchmarks.md's fair day
    python benchmarks/replay_day.py --nodes 400 --hours 12 --trace-variant gpuspec33 --strategy default

The workload (``day_replay.py``)
    * Nodes: the trace's 1,213 GPU nodes (``trace_replay.read_nodes``), or a sample stratified by GPU model
      (``--nodes N``, ``trace_replay.stratified_sample``, seeded). No MIG, no GPU sharing: a pod sharing a GPU holds a
      whole ``nvidia.com/gpu``, as ``trace_replay`` models it; CPU-only pods and nodes are left out unless
      ``--with-cpu-only`` (then as many CPU-only nodes per GPU node as the trace has, drawn apart from the same GPU
      sample; ``--world article`` plays the source article's cluster instead: ``article_day.py``). ``--trace-variant``: the pod
      list (``openb_pod_list_<variant>.csv``: ``default``; ``gpuspec33``, production-like, a third of the pods
      constrained to GPU models, as a required node affinity on ``nvidia.com/gpu.product``; ...).
    * The trace's own load is about 1% of its GPUs at any moment (its pod list is meant to be inflated, as FGD does),
      so the day keeps a realistic load instead. ONE common start for every strategy: the pods alive at time 0 are
      drawn once, independent of any scheduler (``day_replay.common_start``): the list in creation order (replayed),
      each held with probability life / longest life and keeping a uniform share of its life, until the GPUs drawn
      reach ``--fill`` (default 0.9) x the cluster's GPUs. Each strategy's scheduler then places that same list in the
      same order at time 0; a pod that fits nowhere WAITS in the queue from time 0 (its wait, and its GPUs in the
      blocked GPU-hours, count as an arrival's do), never dropped. Then pods arrive in creation order (the list
      replayed), one every mean(GPUs x life) / (fill x cluster GPUs) seconds: by Little's law the offered GPU demand
      stays at ``--fill``. A pod runs its trace life (deletion_time - creation_time), capped at ``--max-life-hours``
      (default 24), from when it is bound: a pod that waits for a node waits, its work starts once it runs. Real
      seconds, no time compression.
    * Consecutive arrivals of one shape form ReplicaSets of 1..``--max-replicas`` pods (seeded); a ReplicaSet of two
      or more has a PDB (maxUnavailable 1), which an eviction must respect.
    * Placement: kube-scheduler v1.36 as upstream scores (``kube_scheduler.py``, calibrated against the real scheduler
      by ``calibrate_scheduler.py``): the ``default`` profile (NodeResourcesFit LeastAllocated over cpu and memory only,
      BalancedAllocation, the system default PodTopologySpread over the pod's ReplicaSet) or the ``bin-packing``
      profile (realk8s's ``SCHED_SCORING=MostAllocated``: cpu 1, memory 1, nvidia.com/gpu 5; no BalancedAllocation, no
      default spreading); both with the adaptive ``percentageOfNodesToScore``, the round-robin start and random
      (seeded) ties. A pod that fits nowhere waits in a queue, retried in arrival order when a pod leaves a node it
      could use and every 5 minutes.
    * A moved pod's replacement serves ``--startup-seconds`` (default 120: a model load) after it is bound: its
      GPUs x start-up is the restart cost.

The strategies (``day_strategies.py``), each on the same workload, common start and seed, named as an operator says them
    * ``default``: the default scheduler profile alone;
    * ``bin-packing``: the bin-packing scheduler profile alone;
    * ``bin-packing + HighNodeUtilization``: the bin-packing profile and the descheduler's HighNodeUtilization every
      ``--every`` minutes (GPU threshold 50%; PDBs and NodeFit respected), as the descheduler's documentation pairs them;
    * ``default + controller`` / ``bin-packing + controller``: the scheduler profile and gpu-compactor's controller as
      deployed with the shipped settings (the ConfigMap of manifests/base: the default objective, ``max_moves`` 20,
      cooldowns 30/10 min, the circuit breaker, 10% of a pool drained at once, ``max_run_seconds`` 900;
      ``--time-limit`` overrides its 30 s): a cycle every ``--every`` minutes, and one at once when its pending trigger
      says so (``compactor.app.pending``, the controller's own code: a GPU pod waiting 60 s since it arrived, once per
      pod, not within 300 s of the last cycle; looked at every 15 s), the interval then counting from it. Each cycle's
      planning is charged to the simulated clock (``--planning-clock``, default ``limit``: the planner's time limit,
      deterministic; see ``day_strategies.PLANNING_CLOCKS``): its evictions start only once that time has passed, the
      day going on meanwhile. Its plan carried out as the executor does (the freed nodes and those drained for a
      pending pod fenced, ``max_concurrent_evictions`` at once, each replacement serving before the next eviction, no
      eviction started after ``max_run_seconds``, a move the cluster no longer allows stopping the run);
    * ``default + run --once`` (not in the default set): the same without the pending trigger, every ``--every`` minutes.

Figures per strategy and seed: GPU allocation over time (GPUs held by bound pods / the cluster's GPUs) and its mean; queue
time of the day's GPU pods by size (1, 2-4, 8 GPUs: p50, p95, max; pods still waiting at the end count with their wait
so far: "never started"), the common start's pods that waited included (from time 0); blocked demand (the queue's GPUs
integrated over the day, GPU-hours) and the part of it beyond capacity (sampled each minute: the demand of the pods
alive that no arrangement could serve, ``day_replay.beyond_capacity``, a lower bound); whole-free GPUs (on nodes
holding none) over time; evictions and the GPU-hours of
restart they cost, also as a share of the GPU-hours allocated; the planner's seconds per cycle. ``--seeds 1,2,3`` plays
each strategy on each seed (the node sample, the common start, the ReplicaSets and the scheduler's ties change with it);
the table shows per strategy the mean over the seeds and, in brackets, their min-max. Written to ``--out``:
``results.jsonl`` (a line per strategy and seed, appended), ``table.md``, and with matplotlib (the ``bench`` extra)
``allocation.png``, ``whole_free.png``, ``blocked.png`` (means over the seeds).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import article_day  # noqa: E402  (benchmarks/ is not a package)
import trace_replay  # noqa: E402
import trace_sharing  # noqa: E402
from day_replay import (  # noqa: E402
    SIZES,
    Day,
    Figures,
    arrivals_only,
    arrivals_until,
    percentile,
    physical_gpus,
    read_stream,
    workload,
)
from day_strategies import PLANNING_CLOCKS, SHIPPED_CONFIG, Compactor, HighNodeUtilization  # noqa: E402

from compactor.app.pending import PendingTrigger  # noqa: E402
from compactor.controller.loop import DEFAULT_PENDING_AFTER, DEFAULT_PENDING_GAP, PENDING_CHECK_SECONDS  # noqa: E402
from compactor.settings.origins import Settings, load_settings  # noqa: E402

DEFAULT, BIN_PACKING = "default", "bin-packing"
HNU = "bin-packing + HighNodeUtilization"
DEFAULT_CONTROLLER, BIN_PACKING_CONTROLLER = "default + controller", "bin-packing + controller"
DEFAULT_FILL_FIRST_CONTROLLER = "default + fill-first + controller"
DEFAULT_RUN_ONCE = "default + run --once"
# --world article: the controller with mig.repartition on (re-cuts), on each profile
DEFAULT_RECUTS, BIN_PACKING_RECUTS = "default + controller + re-cuts", "bin-packing + controller + re-cuts"
ARTICLE_STRATEGIES = (
    DEFAULT,
    BIN_PACKING,
    HNU,
    DEFAULT_CONTROLLER,
    BIN_PACKING_CONTROLLER,
    DEFAULT_RECUTS,
    BIN_PACKING_RECUTS,
)
STRATEGIES = (  # the table's rows
    DEFAULT,
    BIN_PACKING,
    HNU,
    DEFAULT_CONTROLLER,
    DEFAULT_FILL_FIRST_CONTROLLER,
    BIN_PACKING_CONTROLLER,
)
EXTRA_STRATEGIES = (DEFAULT_RUN_ONCE, DEFAULT_RECUTS, BIN_PACKING_RECUTS)
ALIASES = {  # short names for the command line, and issue 21's names
    "hnu": HNU,
    "bin-packing+hnu": HNU,
    "default+controller": DEFAULT_CONTROLLER,
    "default+fill-first+controller": DEFAULT_FILL_FIRST_CONTROLLER,
    "bin-packing+controller": BIN_PACKING_CONTROLLER,
    "default+run-once": DEFAULT_RUN_ONCE,
    "none": DEFAULT,
    "most-allocated": BIN_PACKING,
    "compactor-pending-trigger": DEFAULT_CONTROLLER,
    "compactor": DEFAULT_RUN_ONCE,
}
FGD_ARRIVED = 1.3  # FGD's experiments stop once 130% of the cluster's GPUs have been asked for
FGD_RESULTS = HERE.parent.parent / "shared" / "data" / "fgd-simulator-expected-results" / "analysis_allo_discrete.csv"
FGD_POINTS = (50, 70, 90, 100, 110, 120, 130)


@dataclass(frozen=True)
class Options:
    nodes: int | None = None  # None: every GPU node of the trace
    hours: float = 24.0
    fill: float = 0.9
    every_minutes: float = 10.0
    startup_seconds: float = 120.0
    max_life_hours: float = 24.0
    max_replicas: int = 8
    seed: int = 1
    variant: str = "default"
    time_limit: float | None = None  # the planner's, when not the shipped one
    planning_clock: str = "limit"  # day_strategies.PLANNING_CLOCKS
    max_concurrent_evictions: int | None = None  # the shipped caps.max_concurrent_evictions when None
    max_run_seconds: float | None = None  # the shipped caps.max_run_seconds when None
    pending_after: float = DEFAULT_PENDING_AFTER  # the controller's --pending-after
    pending_gap: float = DEFAULT_PENDING_GAP  # the controller's --pending-gap
    trace_dir: Path = trace_replay.DEFAULT_TRACE_DIR
    fgd: bool = False  # FGD's experiment instead of a day: arrivals only, until 130% of the GPUs are asked
    cpu_only: bool = False  # the trace's CPU-only pods and CPU-only nodes too (issue [24])
    world: str = "trace"  # "article": the source article's cluster (article_day.py) instead of the trace's
    recut_cost_moves: float | None = None  # the + re-cuts rows' mig.recut_cost_moves when not the shipped one
    rebalance_min_gain: float | None = None  # the + re-cuts rows' mig.rebalance_min_gain when not the shipped (off)
    time_sliced: float = 0.0  # --world article: the share of the nodes time-sliced (out of the whole-GPU ones)
    shared_replicas: bool = False  # the trace's sharing pods as time-sliced replicas on nodes sliced for them
    cross_pool_moves: bool = False  # the controller rows' movable.cross_pool_moves (shipped: off)


def strategy_named(name: str) -> str:
    """A strategy's table name from its name or alias."""
    name = ALIASES.get(name, name)
    if name not in STRATEGIES + EXTRA_STRATEGIES:
        raise ValueError(f"unknown strategy {name!r}")
    return name


def profile_of(strategy: str) -> str:
    """The scheduler profile a strategy runs: its name's first word."""
    return BIN_PACKING if strategy.startswith(BIN_PACKING) else DEFAULT


def settings_for(options: Options, *, fill_first: bool = False, recuts: bool = False) -> Settings:
    """The shipped settings (the ConfigMap of manifests/base), with ``--time-limit``, ``--max-concurrent-evictions``
    and ``--max-run-seconds`` when given, and prevention's ``steering.fill_first`` for the fill-first row."""
    settings = load_settings(str(SHIPPED_CONFIG))
    update: dict[str, Any] = {}
    if options.time_limit is not None:
        update["solver"] = settings.solver.amended(time_limit_seconds=options.time_limit)
    caps = {
        k: v
        for k, v in (
            ("max_concurrent_evictions", options.max_concurrent_evictions),
            ("max_run_seconds", options.max_run_seconds),
        )
        if v is not None
    }
    if caps:
        update["caps"] = settings.caps.model_copy(update=caps)
    if fill_first:
        update["steering"] = settings.steering.model_copy(update={"fill_first": True})
    if options.cross_pool_moves:
        update["movable"] = settings.movable.model_copy(update={"cross_pool_moves": True})
    if recuts:  # the GPU Operator's mig-parted ConfigMap of the day (day_strategies._mig_parted)
        mig: dict[str, Any] = {"repartition": True}
        if options.recut_cost_moves is not None:
            mig["recut_cost_moves"] = options.recut_cost_moves
        if options.rebalance_min_gain is not None:
            mig["rebalance_min_gain"] = options.rebalance_min_gain
        update["mig"] = settings.mig.model_copy(update=mig)
    return settings.model_copy(update=update) if update else settings


def day_for(strategy: str, options: Options) -> tuple[Day, float, dict[str, Any]]:
    """The day a strategy plays: its cluster (the seed's node sample), the workload and its common start (the same for
    every strategy of a seed), its scheduler profile; with the seconds to play and what the workload is."""
    if options.world == "article":
        return _article_day(strategy, options)
    all_nodes = trace_replay.read_nodes(options.trace_dir)
    count = options.nodes or len(all_nodes)
    nodes = trace_replay.stratified_sample(all_nodes, count, random.Random(f"{options.seed}:nodes"))
    gpus = sum(n.gpus for n in nodes)
    if options.cpu_only:  # as many CPU-only nodes per GPU node as the trace has (310 to 1,213), drawn apart
        cpu_nodes = trace_replay.read_cpu_nodes(options.trace_dir)
        share = round(len(nodes) * len(cpu_nodes) / len(all_nodes))
        nodes += sorted(random.Random(f"{options.seed}:cpu-nodes").sample(cpu_nodes, share), key=lambda n: n.name)
    stream = read_stream(options.trace_dir, options.variant, options.max_life_hours * 3600, cpu_only=options.cpu_only)
    extended: dict[str, float] = {}
    if options.shared_replicas:  # the nearest supported request (trace_sharing's docstring states the mapping)
        stream = trace_sharing.as_replicas(stream)
        nodes = trace_sharing.time_slice(nodes, stream)
        extended = {trace_sharing.GPU_SHARED: 1 / trace_sharing.SLICED_REPLICAS}
    if options.fgd:
        load = arrivals_only(stream, gpus=gpus, max_replicas=options.max_replicas)
        seconds = float(arrivals_until(stream, FGD_ARRIVED * gpus))
    else:
        load = workload(stream, gpus=gpus, fill=options.fill, max_replicas=options.max_replicas, seed=options.seed)
        seconds = options.hours * 3600
    day = Day(
        nodes,
        load,
        profile=profile_of(strategy),
        startup=options.startup_seconds,
        seed=options.seed,
        extended=extended,
    )
    about = {
        "nodes": len(nodes),
        "cpuOnlyNodes": sum(1 for n in nodes if not physical_gpus(n)),
        "timeSlicedNodes": sum(1 for n in nodes if getattr(n, "replicas", 0)),
        "gpus": gpus,
        "interval": load.interval,
        "gpuSecondsPerPod": load.gpu_seconds_per_pod,
        "commonStartPods": len(load.initial),
        "commonStartGpus": sum(trace_sharing.demand_of(a.pod) for a in load.initial),
    }
    return day, seconds, about


def _article_day(strategy: str, options: Options) -> tuple[Day, float, dict[str, Any]]:
    """The source article's cluster (``article_day.py``): its nodes, Deployments and common start, drawn from the seed
    alone (the same for every strategy)."""
    seconds = options.hours * 3600
    nodes = article_day.nodes_of(options.nodes or ARTICLE_NODES, options.seed, time_sliced=options.time_sliced)
    cat = article_day.catalogue(nodes, seconds, options.seed)
    load = article_day.workload(cat)
    day = Day(
        nodes,
        load,
        profile=profile_of(strategy),
        startup=options.startup_seconds,
        seed=options.seed,
        extended=article_day.GPU_FRACTION,
        mig_config=article_day.mig_parted_config(),
        mig_layouts=article_day.node_layouts(),
    )
    day.scaler = article_day.Scaler(cat)  # type: ignore[attr-defined]
    about = {
        "world": "article",
        "nodes": len(nodes),
        "nodesByKind": {k: sum(1 for n in nodes if n.name.startswith(k)) for k in ("mig", "gpu", "ts", "cpu")},
        "gpus": day.gpus,
        "deployments": len(cat.deployments),
        "newModels": len(cat.arrivals),
        "commonStartPods": len(load.initial),
        "commonStartGpus": sum(day._pod(a, 0.0).gpu_eq for a in load.initial),
    }
    return day, seconds, about


ARTICLE_NODES = 200


def play(strategy: str, options: Options) -> tuple[Figures, float, dict[str, Any]]:
    """One strategy's day: its figures, the wall seconds it took, and what the workload was."""
    strategy = strategy_named(strategy)
    day, seconds, about = day_for(strategy, options)
    started = time.perf_counter()
    ticks = _ticks(strategy, options)
    scaler = getattr(day, "scaler", None)
    if scaler is not None:  # the article's Deployments follow the traffic, in every strategy's day alike
        ticks = [(0.0, article_day.SCALE_SECONDS, scaler), *ticks]
    figures = day.run(seconds, ticks)
    wall = time.perf_counter() - started
    about["profile"] = day.scheduler.profile
    about["scoredNodes"] = day.scheduler.to_find
    about["randomTies"] = day.scheduler.ties
    return figures, wall, about


def _ticks(strategy: str, options: Options) -> list[tuple[float, float, Callable[[Day], None]]]:
    every = options.every_minutes * 60
    if strategy == HNU:
        return [(every, every, HighNodeUtilization())]
    if strategy == DEFAULT_RUN_ONCE:
        return [(every, every, Compactor(settings_for(options), planning_clock=options.planning_clock))]
    if strategy in (
        DEFAULT_CONTROLLER,
        DEFAULT_FILL_FIRST_CONTROLLER,
        BIN_PACKING_CONTROLLER,
        DEFAULT_RECUTS,
        BIN_PACKING_RECUTS,
    ):
        trigger = PendingTrigger(options.pending_after, options.pending_gap)
        recuts = strategy in (DEFAULT_RECUTS, BIN_PACKING_RECUTS)
        settings = settings_for(options, fill_first=strategy == DEFAULT_FILL_FIRST_CONTROLLER, recuts=recuts)
        action = Compactor(settings, trigger=trigger, every=every, planning_clock=options.planning_clock)
        return [(PENDING_CHECK_SECONDS, PENDING_CHECK_SECONDS, action)]
    return []


def summary(strategy: str, figures: Figures, wall: float, about: dict[str, Any], options: Options) -> dict[str, Any]:
    waits = {
        size: {
            "pods": len(figures.waits[size]),
            "stillWaiting": figures.still_waiting[size],
            "p50": percentile(figures.waits[size], 0.5),
            "p95": percentile(figures.waits[size], 0.95),
            "max": max(figures.waits[size], default=float("nan")),
        }
        for size in SIZES
    }
    planner = figures.planner_seconds
    allocated = figures.allocated_gpu_seconds / 3600
    restart = figures.restart_gpu_seconds / 3600
    return {
        "strategy": strategy_named(strategy),
        "seed": options.seed,
        "variant": options.variant,
        "options": {k: str(v) if isinstance(v, Path) else v for k, v in vars(options).items()},
        **about,
        "wallSeconds": round(wall, 1),
        "allocationMean": _mean(figures.allocation),
        "allocatedGpuHours": allocated,
        "wholeFreeGpusMean": _mean([float(v) for v in figures.whole_free]),
        "blockedGpuHours": figures.blocked_gpu_seconds / 3600,
        "blockedGpuHoursBySize": {k: v / 3600 for k, v in figures.blocked_by_size.items()},
        "beyondCapacityGpuHours": figures.beyond_capacity_gpu_seconds / 3600,
        "migBeyondCapacityGpuHours": figures.mig_beyond_capacity_gpu_seconds / 3600,
        "eightGpuWaitingAtEnd": figures.eight_waiting,
        "queueSeconds": waits,
        "evictions": figures.evictions,
        "restartGpuHours": restart,
        "restartShareOfAllocated": restart / allocated if allocated else 0.0,
        "replacementWaitSeconds": figures.replacement_wait_seconds,
        "plannerCycles": figures.cycles,
        "plannerSecondsMean": _mean(planner),
        "plannerSecondsMax": max(planner, default=float("nan")),
        "planningChargedSeconds": figures.planning_charged_seconds,
        "movesRefused": figures.moves_refused,
        "retargets": figures.retargets,
        "stalePlans": figures.stale_plans,
        "replans": figures.replans,
        "heldAtStart": figures.held_at_start,
        "queuedAtStart": figures.queued_at_start,
        "arrived": figures.arrived,
        "left": figures.left,
        "alive": figures.alive,
        "lost": figures.lost,
        "overcommittedNodes": figures.overcommitted_nodes,
        "pdbViolations": figures.pdb_violations,
        "byArrivedPercent": figures.by_arrived,
        "cpuPodsOnGpuNodesMean": _mean([float(v) for v in figures.cpu_pods_on_gpu_nodes]),
        "migIdleMean": _mean(figures.mig_idle),
        "recuts": figures.recuts,
        "recutOfflineGpuHours": figures.recut_offline_gpu_seconds / 3600,
        "gpuNodeCpuToCpuPodsMean": _mean(figures.gpu_node_cpu_to_cpu_pods),
        "series": {
            "minutes": [round(t / 60, 2) for t in figures.times],
            "allocation": [round(a, 4) for a in figures.allocation],
            "wholeFree": figures.whole_free,
            "pendingGpus": figures.pending_gpus,
            "migIdle": [round(v, 4) for v in figures.mig_idle],
        },
    }


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


# ---------------------------------------------------------------- the table


def by_strategy(rows: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Rows grouped by strategy, in the order the strategies first appear."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        grouped.setdefault(row["strategy"], []).append(row)
    return grouped


def mean_range(values: Sequence[float], fmt: str = "{:.1f}") -> str:
    """The mean, and with two seeds or more their min-max in brackets."""
    clean = [v for v in values if v == v]  # NaN: no pod of the size, no planner cycle
    if not clean:
        return "n/a"
    mean = fmt.format(sum(clean) / len(clean))
    if len(values) < 2:
        return mean
    return f"{mean} ({fmt.format(min(clean))}-{fmt.format(max(clean))})"


def table(rows: Sequence[dict[str, Any]]) -> str:
    """The markdown table docs/benchmarks.md shows: per strategy, the mean over the seeds (min-max in brackets)."""
    head = (
        "| strategy | seeds | GPU allocation (mean) | whole-free GPUs (mean) | blocked GPU-h | of which beyond capacity "
        "| 8-GPU wait p50 s "
        "| 8-GPU wait p95 s | 8-GPU never started | evictions | restart GPU-h / allocated GPU-h "
        "| planner s/cycle |\n"
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
    )
    lines = []
    for strategy, group in by_strategy(rows).items():
        eight = [r["queueSeconds"][SIZES[2]] for r in group]
        never = mean_range([w["stillWaiting"] for w in eight], "{:.0f}")
        of = _mean([w["pods"] for w in eight])
        planned = [r["plannerSecondsMean"] for r in group if r["plannerCycles"]]
        lines.append(
            f"| {strategy} | {len(group)} | {mean_range([100 * r['allocationMean'] for r in group])} % "
            f"| {mean_range([r['wholeFreeGpusMean'] for r in group], '{:.0f}')} "
            f"| {mean_range([r['blockedGpuHours'] for r in group], '{:.0f}')} "
            f"| {mean_range([r.get('beyondCapacityGpuHours', float('nan')) for r in group], '{:.0f}')} "
            f"| {mean_range([w['p50'] for w in eight], '{:.0f}')} | {mean_range([w['p95'] for w in eight], '{:.0f}')} "
            f"| {never} of {of:.0f} | {mean_range([r['evictions'] for r in group], '{:.0f}')} "
            f"| {mean_range([100 * r['restartShareOfAllocated'] for r in group], '{:.3f}')} % "
            f"| {mean_range(planned) if planned else 'n/a'} |"
        )
    return head + "\n".join(lines) + "\n"


def small_pods_table(rows: Sequence[dict[str, Any]]) -> str:
    """The waits of the smaller pods: mean over the seeds of p50 / p95, and of those never started."""
    sizes = [
        *SIZES[:2],
        *([trace_sharing.SHARED_SIZE] if any(_pods(r, trace_sharing.SHARED_SIZE) for r in rows) else []),
    ]
    head = (
        "| strategy | "
        + " | ".join(f"{size} wait p50 / p95 s | {size} never started" for size in sizes)
        + " |\n| --- |"
        + " ---: |" * (2 * len(sizes))
        + "\n"
    )
    lines = []
    for strategy, group in by_strategy(rows).items():
        cells = []
        for size in sizes:
            waits = [r["queueSeconds"][size] for r in group]
            p50, p95 = _mean([w["p50"] for w in waits]), _mean([w["p95"] for w in waits])
            cells.append(f"{p50:.0f} / {p95:.0f}")
            cells.append(f"{_mean([w['stillWaiting'] for w in waits]):.1f} of {_mean([w['pods'] for w in waits]):.0f}")
        lines.append(f"| {strategy} | " + " | ".join(cells) + " |")
    return head + "\n".join(lines) + "\n"


def cpu_only_table(rows: Sequence[dict[str, Any]]) -> str:
    """The CPU-only pods' waits (``--with-cpu-only``): mean over the seeds of p50 / p95, and of those never started;
    "" when no row has any."""
    cpu = SIZES[3]
    with_cpu = [r for r in rows if r["queueSeconds"].get(cpu, {}).get("pods")]
    if not with_cpu:
        return ""
    head = (
        "| strategy | CPU-only wait p50 / p95 s | CPU-only never started | CPU-only pods on GPU nodes (mean) | "
        "GPU nodes' CPU they take (mean) |\n| --- | ---: | ---: | ---: | ---: |\n"
    )
    lines = []
    for strategy, group in by_strategy(with_cpu).items():
        waits = [r["queueSeconds"][cpu] for r in group]
        p50, p95 = _mean([w["p50"] for w in waits]), _mean([w["p95"] for w in waits])
        never = f"{_mean([w['stillWaiting'] for w in waits]):.1f} of {_mean([w['pods'] for w in waits]):.0f}"
        on_gpu = _mean([r.get("cpuPodsOnGpuNodesMean", math.nan) for r in group])
        share = _mean([r.get("gpuNodeCpuToCpuPodsMean", math.nan) for r in group])
        lines.append(f"| {strategy} | {p50:.0f} / {p95:.0f} | {never} | {on_gpu:.1f} | {share:.1%} |")
    return head + "\n".join(lines) + "\n"


ARTICLE_SIZES = ("MIG 1g", "MIG 2g", "MIG 3g", "1 GPU", "8 GPUs")


def article_table(rows: Sequence[dict[str, Any]]) -> str:
    """The article's day per request size: blocked GPU-hours and pods never started, the MIG idle rate, re-cuts and
    what restarts and re-cuts cost (means over the seeds)."""
    shown = [*ARTICLE_SIZES, *(["shared GPU"] if any(_pods(r, "shared GPU") for r in rows) else [])]
    sizes = " | ".join(f"{s} blocked GPU-h / never started" for s in shown)
    head = (
        f"| strategy | GPU allocation | MIG idle | {sizes} | MIG pods' blocked GPU-h beyond capacity | "
        "CPU-only never started | evictions | re-cuts | restarts + re-cut downtime / allocated |\n| --- |"
        + " ---: |" * (len(shown) + 7)
        + "\n"
    )
    lines = []
    for strategy, group in by_strategy(rows).items():
        cells = [
            f"{_mean([r['allocationMean'] for r in group]):.1%}",
            f"{_mean([r['migIdleMean'] for r in group]):.1%}",
        ]
        for size in (*shown, "CPU-only"):
            never = _mean([r["queueSeconds"][size]["stillWaiting"] for r in group])
            pods = _mean([r["queueSeconds"][size]["pods"] for r in group])
            blocked = _mean([r["blockedGpuHoursBySize"].get(size, 0.0) for r in group])
            cells.append(
                f"{never:.1f} of {pods:.0f}" if size == "CPU-only" else f"{blocked:.1f} / {never:.1f} of {pods:.0f}"
            )
        cells.insert(-1, f"{_mean([r.get('migBeyondCapacityGpuHours', math.nan) for r in group]):.1f}")
        cost = _mean([(r["restartGpuHours"] + r["recutOfflineGpuHours"]) / r["allocatedGpuHours"] for r in group])
        cells += [
            f"{_mean([r['evictions'] for r in group]):.0f}",
            f"{_mean([r['recuts'] for r in group]):.0f}",
            f"{cost:.3%}",
        ]
        lines.append(f"| {strategy} | " + " | ".join(cells) + " |")
    return head + "\n".join(lines) + "\n"


def _pods(row: dict[str, Any], size: str) -> int:
    """The pods of a size a row met (0 for a row played before that size existed)."""
    return int(row["queueSeconds"].get(size, {}).get("pods", 0))


def fgd_table(rows: Sequence[dict[str, Any]]) -> str:
    """GPU allocation (%) at FGD's arrived-workload points: ours beside the FGD paper's six policies on the default
    trace (the mean of its 10 seeds, from its authors' expected results). Not the same semantics: FGD counts a shared
    GPU's fraction; here a sharing pod holds a whole GPU, so the cluster fills sooner."""
    head = "| policy | " + " | ".join(f"{p}%" for p in FGD_POINTS) + " |\n| --- |" + " ---: |" * len(FGD_POINTS) + "\n"
    lines = [
        f"| {r['strategy']} (here) | "
        + " | ".join(f"{100 * r['byArrivedPercent'].get(p, float('nan')):.1f}" for p in FGD_POINTS)
        + " |"
        for r in rows
    ]
    for policy, values in _fgd_published().items():
        lines.append(f"| {policy} (FGD) | " + " | ".join(f"{values[p]:.1f}" for p in FGD_POINTS) + " |")
    return "\n" + head + "\n".join(lines) + "\n"


def _fgd_published() -> dict[str, dict[int, float]]:
    if not FGD_RESULTS.exists():
        return {}
    import csv

    sums: dict[str, dict[int, list[float]]] = {}
    with FGD_RESULTS.open(newline="") as handle:
        for row in csv.DictReader(handle):
            if row["workload"] != "openb_pod_list_default":
                continue
            points = sums.setdefault(row["sc_policy"], {p: [] for p in FGD_POINTS})
            for p in FGD_POINTS:
                points[p].append(float(row[str(p)]))
    return {policy: {p: sum(v) / len(v) for p, v in points.items()} for policy, points in sums.items()}


def plot(rows: Sequence[dict[str, Any]], out: Path) -> list[Path]:
    """Each strategy's series, the mean over its seeds (every seed samples the same minutes)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    written = []
    plots = [
        ("allocation", "GPU allocation", "allocation.png"),
        ("wholeFree", "whole-free GPUs", "whole_free.png"),
        ("pendingGpus", "GPUs asked by waiting pods", "blocked.png"),
    ]
    if all(r["series"].get("migIdle") for r in rows):  # the article's day: MIG instances offered and not held
        plots.append(("migIdle", "MIG idle rate", "mig_idle.png"))
    for key, label, name in plots:
        fig, ax = plt.subplots(figsize=(9, 4))
        for strategy, group in by_strategy(rows).items():
            series = [r["series"][key] for r in group]
            length = min(len(s) for s in series)
            mean = [sum(s[i] for s in series) / len(series) for i in range(length)]
            hours = [m / 60 for m in group[0]["series"]["minutes"][:length]]
            ax.plot(hours, mean, label=strategy, linewidth=1)
        ax.set_xlabel("hours")
        ax.set_ylabel(label)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        written.append(out / name)
    return written


# ---------------------------------------------------------------- CLI


def _seeds(text: str) -> list[int]:
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--seeds: comma-separated integers, not {text!r}") from exc
    if not seeds:
        raise argparse.ArgumentTypeError("--seeds: at least one")
    return seeds


def _strategy(text: str) -> str:
    try:
        return strategy_named(text)
    except ValueError as exc:
        names = ", ".join(repr(s) for s in STRATEGIES + EXTRA_STRATEGIES)
        raise argparse.ArgumentTypeError(f"{exc}; one of {names} (or {', '.join(ALIASES)})") from exc


def parse(argv: list[str] | None) -> tuple[Options, list[int], list[str], Path]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="100 nodes, one hour, a 2 s planner: the smoke test")
    parser.add_argument(
        "--fgd",
        action="store_true",
        help="FGD's experiment: pods arrive one a second and never leave until 130%% of the GPUs are asked for; "
        "the GPU allocation at each arrived share, beside the FGD paper's published results (--every 5: every 300 arrivals)",
    )
    parser.add_argument("--nodes", default="all", help="a stratified sample of N GPU nodes, or all (1,213)")
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--fill", type=float, default=0.9, help="the offered GPU demand, as a share of the GPUs")
    parser.add_argument("--every", type=float, default=10.0, metavar="MINUTES", help="the strategies' period")
    parser.add_argument("--startup-seconds", type=float, default=120.0)
    parser.add_argument("--max-life-hours", type=float, default=24.0)
    parser.add_argument("--seed", type=int, default=None, help="one seed (default 1); --seeds for several")
    parser.add_argument("--seeds", type=_seeds, default=None, help="comma-separated: each strategy on each seed")
    parser.add_argument(
        "--trace-variant",
        default="default",
        metavar="NAME",
        help="the pod list openb_pod_list_NAME.csv: default, gpuspec33 (GPU-model constraints, production-like), ...",
    )
    parser.add_argument(
        "--with-cpu-only",
        action="store_true",
        help="the trace's CPU-only pods (13%% of its pods) and CPU-only nodes (310 per 1,213 GPU nodes, drawn apart) too",
    )
    parser.add_argument(
        "--world",
        choices=("trace", "article"),
        default="trace",
        help="trace: the Alibaba trace's cluster; article: the source article's (MIG, whole GPUs, CPU-only, scaling "
        "Deployments; article_day.py), --nodes default 200",
    )
    parser.add_argument(
        "--shared-replicas",
        action="store_true",
        help="the trace's GPU-sharing pods (43.6%% of its GPU pods) as the nearest supported request: time-sliced "
        "replicas (nvidia.com/gpu.shared) on nodes of their models sliced for them (trace_sharing.py states the mapping)",
    )
    parser.add_argument(
        "--time-sliced",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="--world article: this share of the nodes (out of the whole-GPU ones) time-sliced, each GPU advertised as "
        f"{article_day.SLICED_REPLICAS} nvidia.com/gpu.shared replicas, with Deployments of small models on one "
        "(default 0: none)",
    )
    parser.add_argument(
        "--rebalance-min-gain",
        type=float,
        default=None,
        metavar="GAIN",
        help="the + re-cuts rows' mig.rebalance_min_gain: also re-cut idle MIG nodes toward the request shapes "
        "(default: the shipped null, re-cuts for pending pods only)",
    )
    parser.add_argument(
        "--recut-cost-moves",
        type=float,
        default=None,
        metavar="MOVES",
        help="the + re-cuts rows' mig.recut_cost_moves (default: the shipped 5; 20 until ADR 0011)",
    )
    parser.add_argument(
        "--cross-pool-moves",
        action="store_true",
        help="the controller rows with movable.cross_pool_moves on: a pod whose own affinity allows other GPU models "
        "may be moved to them (shipped: off, a GPU pod stays in its pool)",
    )
    parser.add_argument("--time-limit", type=float, default=None, help="the planner's (default: the shipped 30 s)")
    parser.add_argument(
        "--planning-clock",
        choices=PLANNING_CLOCKS,
        default="limit",
        help="what a cycle's planning costs on the simulated clock before its evictions (default: the time limit)",
    )
    parser.add_argument(
        "--strategy",
        action="append",
        type=_strategy,
        metavar="NAME",
        help=f"one or more (default: {', '.join(STRATEGIES)}; also {', '.join(EXTRA_STRATEGIES)})",
    )
    parser.add_argument(
        "--max-concurrent-evictions", type=int, default=None, metavar="N", help="the controller's (default: shipped)"
    )
    parser.add_argument("--max-run-seconds", type=float, default=None, help="the controller's (default: shipped)")
    parser.add_argument("--pending-after", type=float, default=DEFAULT_PENDING_AFTER, help="the controller's flag")
    parser.add_argument("--pending-gap", type=float, default=DEFAULT_PENDING_GAP, help="the controller's flag")
    parser.add_argument("--trace-dir", type=Path, default=trace_replay.DEFAULT_TRACE_DIR)
    parser.add_argument("--out", type=Path, default=Path("/tmp/gpu-compactor-day"))
    parser.add_argument(
        "--table-from",
        type=Path,
        nargs="+",
        metavar="RESULTS",
        help="play nothing: the table (and plots) of these results.jsonl files together, e.g. seeds run apart",
    )
    args = parser.parse_args(argv)
    if args.table_from:
        rows = [json.loads(line) for path in args.table_from for line in path.read_text().splitlines() if line.strip()]
        raise SystemExit(report(rows, args.out))
    if args.seed is not None and args.seeds is not None:
        parser.error("--seed or --seeds, not both")
    if args.quick:
        args.nodes, args.hours, args.time_limit = "100", 1.0, args.time_limit or 2.0
    if args.world == "article" and args.nodes == "all":
        args.nodes = str(ARTICLE_NODES)
    nodes = None if args.nodes == "all" else int(args.nodes)
    seeds = args.seeds or [args.seed if args.seed is not None else 1]
    options = Options(
        nodes=nodes,
        hours=args.hours,
        fill=args.fill,
        every_minutes=args.every,
        startup_seconds=args.startup_seconds,
        max_life_hours=args.max_life_hours,
        seed=seeds[0],
        variant=args.trace_variant,
        time_limit=args.time_limit,
        planning_clock=args.planning_clock,
        max_concurrent_evictions=args.max_concurrent_evictions,
        max_run_seconds=args.max_run_seconds,
        pending_after=args.pending_after,
        pending_gap=args.pending_gap,
        trace_dir=args.trace_dir,
        fgd=args.fgd,
        cpu_only=args.with_cpu_only,
        world=args.world,
        recut_cost_moves=args.recut_cost_moves,
        rebalance_min_gain=args.rebalance_min_gain,
        time_sliced=args.time_sliced,
        shared_replicas=args.shared_replicas,
        cross_pool_moves=args.cross_pool_moves,
    )
    rows = ARTICLE_STRATEGIES if args.world == "article" else STRATEGIES
    return options, seeds, args.strategy or list(rows), args.out


def main(argv: list[str] | None = None) -> None:
    options, seeds, strategies, out = parse(argv)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with (out / "results.jsonl").open("a") as results:
        for seed in seeds:
            seeded = replace(options, seed=seed)
            for strategy in strategies:
                figures, wall, about = play(strategy, seeded)
                row = summary(strategy, figures, wall, about, seeded)
                rows.append(row)
                results.write(json.dumps(row) + "\n")
                results.flush()
                print(
                    f"seed {seed} {strategy}: allocation {row['allocationMean']:.1%}, blocked "
                    f"{row['blockedGpuHours']:.1f} GPU-h ({row['beyondCapacityGpuHours']:.1f} beyond capacity), "
                    f"8-GPU never started {row['queueSeconds'][SIZES[2]]['stillWaiting']}"
                    f" of {row['queueSeconds'][SIZES[2]]['pods']}, {row['evictions']} evictions, {row['wallSeconds']} s",
                    flush=True,
                )
    report(rows, out, fgd=options.fgd)


def report(rows: Sequence[dict[str, Any]], out: Path, *, fgd: bool = False) -> None:
    """``table.md`` (and the plots) of ``rows``, written to ``out`` and printed."""
    out.mkdir(parents=True, exist_ok=True)
    if any(r.get("world") == "article" for r in rows):
        text = f"article's day, seeds {','.join(map(str, sorted({r.get('seed', 1) for r in rows})))}: mean\n\n"
        text += table(rows) + "\n" + article_table(rows)
        (out / "table.md").write_text(text)
        print(text)
        for path in plot(rows, out):
            print(f"wrote {path}")
        return
    variants = sorted({r.get("variant", "default") for r in rows})
    seeds = sorted({r.get("seed", 1) for r in rows})
    text = (
        f"{', '.join(variants)} trace, seeds {','.join(map(str, seeds))}: mean (min-max)\n\n"
        + table(rows)
        + "\n"
        + small_pods_table(rows)
        + ("\n" + cpu_only_table(rows) if cpu_only_table(rows) else "")
        + (fgd_table(rows) if fgd else "")
    )
    (out / "table.md").write_text(text)
    print(text)
    for path in plot(rows, out):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()

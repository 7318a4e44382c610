"""A day of the Alibaba GPU trace replayed over time, against the strategies an operator would pick (issue [21]).

    python benchmarks/replay_day.py --quick                                  # 100 nodes, one hour, every strategy
    python benchmarks/replay_day.py --nodes all --hours 24 --strategy none   # one row of docs/benchmarks.md's table
    python benchmarks/replay_day.py --nodes all --hours 24                   # the whole table (hours: see the docs)

The workload (``day_replay.py``)
    * Nodes: the trace's 1,213 GPU nodes (``trace_replay.read_nodes``), or a sample stratified by GPU model
      (``--nodes N``, ``trace_replay.stratified_sample``). No MIG, no GPU sharing: a pod sharing a GPU holds a whole
      ``nvidia.com/gpu``, as ``trace_replay`` models it; CPU-only pods are left out.
    * The trace's own load is about 1% of its GPUs at any moment (its pod list is meant to be inflated, as FGD does),
      so the day keeps a realistic load instead: at time 0 pods of the list, in creation order, are placed by the
      scheduler until ``--fill`` (default 0.9) of the GPUs are held (FGD's inflation rule; a pod that fits nowhere is
      skipped); each keeps a uniformly drawn share of its life. Then pods arrive in creation order (the list replayed
      when exhausted), one every mean(GPUs x life) / (fill x cluster GPUs) seconds: by Little's law the offered GPU
      demand stays at ``--fill``. A pod runs its trace life (deletion_time - creation_time), capped at
      ``--max-life-hours`` (default 24), from when it is bound: a pod that waits for a node waits, its work starts
      once it runs. Real seconds, no time compression.
    * Consecutive arrivals of one shape form ReplicaSets of 1..``--max-replicas`` pods (seeded); a ReplicaSet of two
      or more has a PDB (maxUnavailable 1), which an eviction must respect.
    * Placement: kube-scheduler's default profile (NodeResourcesFit LeastAllocated + BalancedAllocation), or its
      bin-packing profile (MostAllocated, cpu 1 memory 1 GPU 5, no BalancedAllocation), over fit and the gpu_spec
      affinity (``trace_replay.DefaultScheduler``). A pod that fits nowhere waits in a queue, retried in arrival order
      when a pod leaves a node it could use and every 5 minutes.
    * A moved pod's replacement serves ``--startup-seconds`` (default 120: a model load) after it is bound: its
      GPUs x start-up is the restart cost.

The strategies (``day_strategies.py``), each on the same workload and seed
    * ``none``: the default scheduler alone;
    * ``most-allocated``: the bin-packing scheduler profile alone;
    * ``hnu``: the bin-packing profile and the descheduler's HighNodeUtilization every ``--every`` minutes (GPU
      threshold 50%; PDBs and NodeFit respected), as the descheduler's documentation pairs them;
    * ``compactor``: the default scheduler and ``gpu-compactor run --once`` every ``--every`` minutes with the shipped
      settings (the ConfigMap of manifests/base: the default objective, ``max_moves`` 20, cooldowns 30/10 min, the
      circuit breaker, 10% of a pool drained at once, ``max_run_seconds`` 900; ``--time-limit`` overrides its 30 s),
      its plan carried out as the executor does (the freed nodes and those drained for a pending pod fenced,
      ``max_concurrent_evictions`` at once, each replacement serving before the next eviction, no eviction started
      after ``max_run_seconds``, a move the cluster no longer allows stopping the run);
    * ``compactor-pending-trigger``: the controller as deployed: the same every ``--every`` minutes, and a cycle at once
      when its pending trigger says so (``compactor.app.pending``, the controller's own code: a GPU pod waiting 60 s
      since it arrived, once per pod, not within 300 s of the last cycle; looked at every 15 s), the interval then
      counting from it.

Figures per strategy: GPU allocation over time (GPUs held by bound pods / the cluster's GPUs) and its mean; queue time of
the day's GPU pods by size (1, 2-4, 8 GPUs: p50, p95, max; pods still waiting at the end count with their wait so far);
blocked demand (the queue's GPUs integrated over the day, GPU-hours); whole-free GPUs (on nodes holding none) over time;
evictions and the GPU-hours of restart they cost; the planner's seconds per cycle. Written to ``--out``:
``results.jsonl`` (a line per strategy), ``table.md``, and with matplotlib (the ``bench`` extra) ``allocation.png``,
``whole_free.png``, ``blocked.png``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import trace_replay  # noqa: E402  (benchmarks/ is not a package)
from day_replay import SIZES, Day, Figures, arrivals_only, arrivals_until, percentile, read_stream, workload  # noqa: E402
from day_strategies import SHIPPED_CONFIG, Compactor, HighNodeUtilization  # noqa: E402

from compactor.app.pending import PendingTrigger  # noqa: E402
from compactor.controller.loop import DEFAULT_PENDING_AFTER, DEFAULT_PENDING_GAP, PENDING_CHECK_SECONDS  # noqa: E402
from compactor.settings import Settings, load_settings  # noqa: E402

STRATEGIES = ("none", "most-allocated", "hnu", "compactor", "compactor-pending-trigger")
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
    trace_dir: Path = trace_replay.DEFAULT_TRACE_DIR
    fgd: bool = False  # FGD's experiment instead of a day: arrivals only, until 130% of the GPUs are asked


def settings_for(options: Options) -> Settings:
    """The shipped settings (the ConfigMap of manifests/base), with ``--time-limit`` when given."""
    settings = load_settings(str(SHIPPED_CONFIG))
    if options.time_limit is None:
        return settings
    solver = settings.solver.amended(time_limit_seconds=options.time_limit)
    return settings.model_copy(update={"solver": solver})


def play(strategy: str, options: Options) -> tuple[Figures, float, dict[str, Any]]:
    """One strategy's day: its figures, the wall seconds it took, and what the workload was."""
    all_nodes = trace_replay.read_nodes(options.trace_dir)
    count = options.nodes or len(all_nodes)
    nodes = trace_replay.stratified_sample(all_nodes, count, random.Random(f"{options.seed}:nodes"))
    gpus = sum(n.gpus for n in nodes)
    stream = read_stream(options.trace_dir, options.variant, options.max_life_hours * 3600)
    if options.fgd:
        load = arrivals_only(stream, gpus=gpus, max_replicas=options.max_replicas)
        seconds = float(arrivals_until(stream, FGD_ARRIVED * gpus))
    else:
        load = workload(stream, gpus=gpus, fill=options.fill, max_replicas=options.max_replicas)
        seconds = options.hours * 3600
    most_allocated = strategy in ("most-allocated", "hnu")
    day = Day(nodes, load, most_allocated=most_allocated, startup=options.startup_seconds, seed=options.seed)
    started = time.perf_counter()
    figures = day.run(seconds, _ticks(strategy, options))
    wall = time.perf_counter() - started
    about = {"nodes": len(nodes), "gpus": gpus, "interval": load.interval, "gpuSecondsPerPod": load.gpu_seconds_per_pod}
    return figures, wall, about


def _ticks(strategy: str, options: Options) -> list[tuple[float, float, Callable[[Day], None]]]:
    every = options.every_minutes * 60
    if strategy == "hnu":
        return [(every, every, HighNodeUtilization())]
    if strategy == "compactor":
        return [(every, every, Compactor(settings_for(options)))]
    if strategy == "compactor-pending-trigger":
        trigger = PendingTrigger(DEFAULT_PENDING_AFTER, DEFAULT_PENDING_GAP)
        action = Compactor(settings_for(options), trigger=trigger, every=every)
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
    return {
        "strategy": strategy,
        "options": {k: str(v) if isinstance(v, Path) else v for k, v in vars(options).items()},
        **about,
        "wallSeconds": round(wall, 1),
        "allocationMean": _mean(figures.allocation),
        "wholeFreeGpusMean": _mean([float(v) for v in figures.whole_free]),
        "blockedGpuHours": figures.blocked_gpu_seconds / 3600,
        "queueSeconds": waits,
        "evictions": figures.evictions,
        "restartGpuHours": figures.restart_gpu_seconds / 3600,
        "replacementWaitSeconds": figures.replacement_wait_seconds,
        "plannerCycles": figures.cycles,
        "plannerSecondsMean": _mean(planner),
        "plannerSecondsMax": max(planner, default=float("nan")),
        "movesRefused": figures.moves_refused,
        "heldAtStart": figures.held_at_start,
        "arrived": figures.arrived,
        "left": figures.left,
        "alive": figures.alive,
        "lost": figures.lost,
        "overcommittedNodes": figures.overcommitted_nodes,
        "pdbViolations": figures.pdb_violations,
        "byArrivedPercent": figures.by_arrived,
        "series": {
            "minutes": [round(t / 60, 2) for t in figures.times],
            "allocation": [round(a, 4) for a in figures.allocation],
            "wholeFree": figures.whole_free,
            "pendingGpus": figures.pending_gpus,
        },
    }


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def table(rows: Sequence[dict[str, Any]]) -> str:
    """The markdown table docs/benchmarks.md shows."""
    head = (
        "| strategy | GPU allocation (mean) | whole-free GPUs (mean) | blocked GPU-h | queue p50 / p95 / max s: 1 GPU "
        "| 2-4 GPUs | 8 GPUs | evictions | restart GPU-h | planner s/cycle (mean / max) |\n"
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
    )
    lines = []
    for r in rows:
        waits = [_waits(r["queueSeconds"][size]) for size in SIZES]
        planner = f"{r['plannerSecondsMean']:.1f} / {r['plannerSecondsMax']:.1f}" if r["plannerCycles"] else "n/a"
        lines.append(
            f"| {r['strategy']} | {r['allocationMean']:.1%} | {r['wholeFreeGpusMean']:.1f} | {r['blockedGpuHours']:.1f} "
            f"| {' | '.join(waits)} | {r['evictions']} | {r['restartGpuHours']:.2f} | {planner} |"
        )
    return head + "\n".join(lines) + "\n"


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


def _waits(w: dict[str, Any]) -> str:
    if not w["pods"]:
        return "none arrived"
    still = f" ({w['stillWaiting']} still waiting)" if w["stillWaiting"] else ""
    return f"{w['p50']:.0f} / {w['p95']:.0f} / {w['max']:.0f}{still}"


def plot(rows: Sequence[dict[str, Any]], out: Path) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    written = []
    for key, label, name in (
        ("allocation", "GPU allocation", "allocation.png"),
        ("wholeFree", "whole-free GPUs", "whole_free.png"),
        ("pendingGpus", "GPUs asked by waiting pods", "blocked.png"),
    ):
        fig, ax = plt.subplots(figsize=(9, 4))
        for r in rows:
            ax.plot([m / 60 for m in r["series"]["minutes"]], r["series"][key], label=r["strategy"], linewidth=1)
        ax.set_xlabel("hours")
        ax.set_ylabel(label)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        written.append(out / name)
    return written


def parse(argv: list[str] | None) -> tuple[Options, list[str], Path]:
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
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--time-limit", type=float, default=None, help="the planner's (default: the shipped 30 s)")
    parser.add_argument("--strategy", action="append", choices=STRATEGIES, help="one or more (default: every one)")
    parser.add_argument("--trace-dir", type=Path, default=trace_replay.DEFAULT_TRACE_DIR)
    parser.add_argument("--out", type=Path, default=Path("/tmp/gpu-compactor-day"))
    args = parser.parse_args(argv)
    if args.quick:
        args.nodes, args.hours, args.time_limit = "100", 1.0, args.time_limit or 2.0
    nodes = None if args.nodes == "all" else int(args.nodes)
    options = Options(
        nodes=nodes,
        hours=args.hours,
        fill=args.fill,
        every_minutes=args.every,
        startup_seconds=args.startup_seconds,
        max_life_hours=args.max_life_hours,
        seed=args.seed,
        time_limit=args.time_limit,
        trace_dir=args.trace_dir,
        fgd=args.fgd,
    )
    return options, args.strategy or list(STRATEGIES), args.out


def main(argv: list[str] | None = None) -> None:
    options, strategies, out = parse(argv)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with (out / "results.jsonl").open("a") as results:
        for strategy in strategies:
            figures, wall, about = play(strategy, options)
            row = summary(strategy, figures, wall, about, options)
            rows.append(row)
            results.write(json.dumps(row) + "\n")
            results.flush()
            print(
                f"{strategy}: allocation {row['allocationMean']:.1%}, blocked {row['blockedGpuHours']:.1f} GPU-h, "
                f"{row['evictions']} evictions, {row['wallSeconds']} s",
                flush=True,
            )
    text = table(rows) + (fgd_table(rows) if options.fgd else "")
    (out / "table.md").write_text(text)
    print(text)
    for path in plot(rows, out):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()

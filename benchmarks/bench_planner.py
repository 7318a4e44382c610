"""Planner benchmark: CP-SAT plan vs. greedy drain, descheduler HighNodeUtilization and the chain placement baseline.

    python benchmarks/bench_planner.py                 # 400 x 8 GPUs / 3,000 pods and 1,000 x 8 / 8,000 pods
    python benchmarks/bench_planner.py --sizes 400:3000 --time-limit 10
    python benchmarks/bench_planner.py --contract      # issue 13: 5,000 nodes / 50,000 pods at limits 10 and 30 s

Each size is generated (benchmarks/generate_cluster.py, seed 0), then planned in a
fresh subprocess so peak RSS is the planner's own. Prints, per size: net freed GPUs,
moves, solver gap and wall time for the planner, and the same figures for the
baselines (compactor/planner/search/baselines.py). A script that prints figures, not a test.

``--contract`` (sizes default 5000:50000, ``--limits`` 10,30, with and without ``--max-moves`` 20 and
``objective: max-free``): per run, the wall seconds of ``build_plan`` against the limit + 10%, loading
apart, peak RSS against 1 GiB, and the max-free point's freed GPUs against greedy drain's (capped:
against the greedy warm start within the cap, and the plan's moves within the cap, more than none
when greedy had some).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))


def measure(snapshot: str, time_limit: float, workers: int) -> dict[str, object]:
    """Runs in the child process: load, plan, baselines; returns the figures."""
    from datetime import UTC, datetime

    from compactor.app.plan_document import build_plan
    from compactor.model.load import load_files
    from compactor.planner.request import PlanRequest
    from compactor.planner.search.baselines import chain_placement, greedy_drain, high_node_utilization
    from compactor.settings.bundles import PlannerSettings

    snap = load_files([snapshot])
    settings = PlannerSettings.of(time_limit_seconds=time_limit, workers=workers)
    started = time.monotonic()
    plan = build_plan(PlanRequest.of(snap, settings, source=snapshot, now=datetime.now(UTC)))
    plan_seconds = time.monotonic() - started
    top = plan.frontier[-1]
    rows: list[dict[str, object]] = [
        {
            "name": "gpu-compactor max-free (CP-SAT)",
            "freedGpus": top.freed_gpus,
            "moves": top.moves,
            "freedNodes": top.freed_nodes,
            "filledNodes": 0,
            "seconds": round(plan.solver.wall_seconds, 2),
            "gap": plan.solver.gap,
            "status": plan.solver.status,
            "pendingPlaced": len(plan.placed_pending),
        },
        {
            "name": f"gpu-compactor {plan.objective} (default)",
            "freedGpus": plan.freed_gpus,
            "moves": len(plan.moves),
            "freedNodes": len(plan.freed_nodes),
            "filledNodes": len(plan.filled_nodes),
            "seconds": round(plan_seconds, 2),
            "gap": None,
            "status": plan.solver.status,
            "pendingPlaced": len(plan.placed_pending),
        },
    ]
    curve = {
        "points": len(plan.frontier),
        "optimal": sum(p.status == "OPTIMAL" for p in plan.frontier),
        "seconds": plan.solver.frontier_seconds,
        "solveSeconds": plan.solver.wall_seconds,
        "planSeconds": round(plan_seconds, 2),
        "table": [[p.freed_nodes, p.freed_gpus, p.moves, p.status, p.bound] for p in plan.frontier],
    }
    for name, run in (
        ("greedy drain", lambda: greedy_drain(snap, settings)),
        ("HighNodeUtilization/LeastAllocated", lambda: high_node_utilization(snap, settings, scoring="LeastAllocated")),
        ("HighNodeUtilization/MostAllocated", lambda: high_node_utilization(snap, settings, scoring="MostAllocated")),
        ("chain placement (pending pods only)", lambda: chain_placement(snap, settings)),
    ):
        started = time.monotonic()
        result = run()
        rows.append(
            {
                "name": name,
                "freedGpus": result.freed_gpus,
                "moves": result.moves,
                "freedNodes": len(result.freed_nodes),
                "filledNodes": len(result.filled_nodes),
                "seconds": round(time.monotonic() - started, 2),
                "gap": None,
                "pendingPlaced": result.pending_placed,
            }
        )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"nodes": len(snap.nodes), "pods": len(snap.pods), "rows": rows, "peakRssMiB": round(rss), "curve": curve}


def run_size(nodes: int, pods: int, time_limit: float, workers: int, fill: float = 0.75) -> dict[str, object]:
    from generate_cluster import generate, write

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"cluster-{nodes}.json"
        write(generate(nodes, pods, seed=0, fill=fill), path)
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                str(path),
                "--time-limit",
                str(time_limit),
                "--workers",
                str(workers),
            ],
            check=True,
            capture_output=True,
            text=True,
        )
    result: dict[str, object] = json.loads(out.stdout)
    return result


def print_size(result: dict[str, object], time_limit: float) -> None:
    rows = result["rows"]
    assert isinstance(rows, list)
    print(
        f"\n{result['nodes']} nodes / {result['pods']} pods (time limit {time_limit:g}s, peak RSS {result['peakRssMiB']} MiB)"
    )
    print(f"  {'planner':<38} {'freed GPUs':>10} {'nodes':>6} {'moves':>6} {'GPUs/move':>9} {'gap':>6} {'time s':>7}")
    for row in rows:
        gap = "-" if row["gap"] is None else f"{row['gap']:.1%}"
        per_move = row["freedGpus"] / row["moves"] if row["moves"] else 0.0
        print(
            f"  {row['name']:<38} {row['freedGpus']:>10} {row['freedNodes']:>6} {row['moves']:>6} {per_move:>9.2f} {gap:>6} {row['seconds']:>7}"
        )
    ours, greedy = rows[0], rows[2]
    curve = result["curve"]
    assert isinstance(curve, dict)
    print(
        f"  curve: {curve['points']} points ({curve['optimal']} proven optimal) in {curve['seconds']} s after a {curve['solveSeconds']} s "
        f"max-free solve; whole plan {curve['planSeconds']} s"
    )
    table = curve["table"]
    picks = table if len(table) <= 12 else [*table[:6], *table[-3:]]
    print(
        "    freed nodes / GPUs / moves / status (bound): "
        + "; ".join(f"{n}/{g}/{m} {s}" + ("" if s == "OPTIMAL" else f" ({b:g})") for n, g, m, s, b in picks)
        + (" ..." if len(table) > 12 else "")
    )
    verdict = "yes" if ours["freedGpus"] >= greedy["freedGpus"] else "NO"
    fewer = "yes" if ours["moves"] <= greedy["moves"] else "no"
    print(f"  frees at least as many GPUs as greedy drain: {verdict}; with no more moves: {fewer}")


def measure_contract(snapshot: str, time_limit: float, workers: int, max_moves: int | None) -> dict[str, object]:
    """Runs in the child process: load, then build_plan alone (the time limit's contract), then the greedy figures."""
    from datetime import UTC, datetime

    from compactor.app.plan_document import build_plan
    from compactor.model.load import load_files
    from compactor.planner.objective import empty_nodes
    from compactor.planner.problem import build_problem
    from compactor.planner.request import PlanRequest
    from compactor.planner.search.baselines import greedy_drain
    from compactor.planner.search.greedy import greedy
    from compactor.planner.solution import concretise, gpu_nodes_changed
    from compactor.settings.bundles import PlannerSettings

    started = time.monotonic()
    snap = load_files([snapshot])
    load_seconds = time.monotonic() - started
    capped = {"max_moves": max_moves, "objective": "max-free"} if max_moves is not None else {}
    settings = PlannerSettings.of(time_limit_seconds=time_limit, workers=workers, **capped)
    started = time.monotonic()
    plan = build_plan(PlanRequest.of(snap, settings, source=snapshot, now=datetime.now(UTC)))
    wall = time.monotonic() - started
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # before the baselines below add theirs
    top = plan.frontier[-1] if plan.frontier else None
    if max_moves is None:
        drain = greedy_drain(snap, settings)
        greedy_freed, greedy_moves = drain.freed_gpus, drain.moves
    else:  # the planner's fallback: the greedy warm start within the cap
        problem = build_problem(snap, settings, max_targets=len(snap.nodes))
        warm = greedy(problem)
        moves, placements = concretise(problem, warm, empty_nodes(problem, warm))
        freed, filled = gpu_nodes_changed(problem, moves, placements)
        greedy_freed = sum(problem.nodes[i].gpus for i in freed) - sum(problem.nodes[i].gpus for i in filled)
        greedy_moves = len(moves)
    return {
        "nodes": len(snap.nodes),
        "pods": len(snap.pods),
        "limit": time_limit,
        "maxMoves": max_moves,
        "loadSeconds": round(load_seconds, 2),
        "wallSeconds": round(wall, 2),
        "planSeconds": plan.solver.plan_seconds,
        "peakRssMiB": round(rss),
        "status": plan.solver.status,
        "freedGpus": plan.freed_gpus,
        "moves": len(plan.moves),
        "topFreedGpus": top.freed_gpus if top else 0,
        "topMoves": top.moves if top else 0,
        "greedyFreedGpus": greedy_freed,
        "greedyMoves": greedy_moves,
        "note": plan.solver.note,
    }


def run_contract(sizes: str, limits: str, workers: int, fill: float, max_moves: int) -> None:
    from generate_cluster import generate, write

    for size in sizes.split(","):
        nodes, pods = (int(x) for x in size.split(":"))
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"cluster-{nodes}.json"
            write(generate(nodes, pods, seed=0, fill=fill), path)
            print(
                f"\n{nodes} nodes / {pods} pods (generated, seed 0, fill {fill:g}): build_plan in a fresh process per run"
            )
            for limit in (float(x) for x in limits.split(",")):
                for cap in (None, max_moves):
                    out = subprocess.run(
                        [
                            sys.executable,
                            __file__,
                            "--contract-child",
                            str(path),
                            "--time-limit",
                            str(limit),
                            "--workers",
                            str(workers),
                            *(["--max-moves", str(cap)] if cap is not None else []),
                        ],
                        check=True,
                        capture_output=True,
                        text=True,
                    )
                    print_contract(json.loads(out.stdout))


def print_contract(r: dict[str, object]) -> None:
    limit, wall, rss = float(str(r["limit"])), float(str(r["wallSeconds"])), float(str(r["peakRssMiB"]))
    freed, greedy, moves = int(str(r["topFreedGpus"])), int(str(r["greedyFreedGpus"])), int(str(r["moves"]))
    cap = r["maxMoves"]
    within = "yes" if wall <= 1.1 * limit else "NO"
    label = f"limit {limit:g} s" + (f", max_moves {cap}" if cap is not None else "")
    print(
        f"  {label:<26} plan {wall:6.2f} s (+{r['loadSeconds']} s load) <= {1.1 * limit:g} s: {within}; "
        f"peak RSS {rss:.0f} MiB <= 1024: {'yes' if rss <= 1024 else 'NO'}; {r['status']}"
    )
    what = "greedy drain" if cap is None else "greedy within the cap"
    print(
        f"  {'':<26} max-free point frees {freed} GPUs in {r['topMoves']} moves vs {what} {greedy} in {r['greedyMoves']}: "
        f"{'yes' if freed >= greedy else 'NO'}"
        + (
            ""
            if cap is None
            else f"; plan {moves} moves <= {cap}: {'yes' if moves <= int(str(cap)) else 'NO'}, > 0 when greedy had some: "
            f"{'yes' if moves > 0 or not int(str(r['greedyMoves'])) else 'NO'}"
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="400:3000,1000:8000", help="comma-separated NODES:PODS")
    parser.add_argument(
        "--time-limit", type=float, default=None, help="solver time limit (default 10 s for <= 400 nodes, else 25 s)"
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--fill", type=float, default=0.75, help="share of each GPU pool's capacity the generated workload asks for"
    )
    parser.add_argument("--contract", action="store_true", help="the time limit's contract at 5,000 nodes (see above)")
    parser.add_argument("--limits", default="10,30", help="--contract: comma-separated time limits")
    parser.add_argument("--max-moves", type=int, default=20, help="--contract: the cap of the capped runs")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--contract-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.time_limit or 10.0, args.workers)))
        return
    if args.contract_child:
        print(
            json.dumps(
                measure_contract(
                    args.contract_child,
                    args.time_limit,
                    args.workers,
                    args.max_moves if "--max-moves" in sys.argv else None,
                )
            )
        )
        return
    if args.contract:
        run_contract(
            args.sizes if "--sizes" in sys.argv else "5000:50000", args.limits, args.workers, args.fill, args.max_moves
        )
        return
    for size in args.sizes.split(","):
        nodes, pods = (int(x) for x in size.split(":"))
        # 25 s of solving leaves room for load and figures in 30 s
        limit = args.time_limit or (10.0 if nodes <= 400 else 25.0)
        print_size(run_size(nodes, pods, limit, args.workers, args.fill), limit)


if __name__ == "__main__":
    main()

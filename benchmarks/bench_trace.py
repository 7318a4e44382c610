"""Planner benchmark on clusters replayed from the Alibaba GPU trace (benchmarks/trace_replay.py).

    python benchmarks/bench_trace.py                      # the full matrix (54 snapshots; hours)
    python benchmarks/bench_trace.py --quick              # one 100-node snapshot, a minute or two
    python benchmarks/bench_trace.py --sizes 400 --fills 0.8 --variants default --seeds 1 --with-long

Matrix (each a flag): ``--sizes all,400`` (all = the trace's 1,213 GPU nodes, else a stratified sample),
``--fills 0.6,0.8,0.95``, ``--variants default,multigpu50,gpuspec33``, ``--seeds 1,2,3``. Each snapshot is
replayed (``trace_replay.replay``) and written to a temporary file, then every method runs on it in a fresh
subprocess, so the peak RSS is that method's own (import, load and method):

* ``planner``: ``build_plan`` at default settings with ``objective: max-free`` and every move costing one
  (``move_cost.capacity_share: 0``: the goals count moves) (``--time-limit`` overrides 10 s);
* ``planner-no-pending``: the same with ``place_pending: false``;
* ``planner-long``: the same as ``planner`` with ``--long-limit`` (60 s), only with ``--with-long``;
* ``planner-cap``: the same as ``planner`` with ``max_moves`` 20 (``CAP``), and ``greedy-drain-cap``: greedy drain's
  steps that fit 20 moves (as the planner's capped warm start takes them);
* ``planner-default``, ``planner-default-again`` and ``planner-default-seeded`` (``--stability``): ``build_plan`` at
  the default settings (``balanced``, moves priced as shipped), twice, and with ``solver.deterministic`` (CP-SAT's
  deterministic time, seed 1), for issue 17's stability goals;
* ``greedy-drain`` (and ``greedy-drain-no-pending``), ``hnu-least``, ``hnu-most``, ``chain-placement``: the baselines of
  compactor/planner/search/baselines.py (greedy drain, descheduler HighNodeUtilization re-scheduling with LeastAllocated or
  MostAllocated, issue 17's chain heuristic: pending pods only, by evictions and one-hop chains, first fit).

``--files A.json B.json`` runs the same methods on snapshot files (e.g. ``generate_cluster.py``'s) instead of the
replay matrix.

Recorded per method: net freed GPUs, freed nodes, moves, pending pods placed, wall seconds of the method and of
loading the snapshot, peak RSS, and for planner runs the solver's status, gap and bound (``plan.solver``: the
bound is on net freed GPUs, the max-free level's) and the trade-off curve (its last point shown). Output in
``--out`` (default /tmp/gpu-compactor-bench): ``results.jsonl`` (one line per snapshot and method, written as
it goes), ``results.md`` (tables), and with matplotlib (``pip install -e '.[bench]'``) ``freed_vs_moves.png``
and ``planner_time_vs_nodes.png``.

Goals checked per snapshot (the harness reports, it does not fail; issue 13's, see docs/benchmarks.md):

* both without pending placement (``planner-no-pending``, ``greedy-drain-no-pending``): the planner's net freed GPUs
  >= greedy drain's, and its curve's point freeing at least greedy drain's GPUs takes no more moves;
* planner (with pending placement) >= greedy drain in (pending pods placed, net freed GPUs), compared in that order;
* the default-limit plan frees at least the ``--long-limit`` run's GPUs with <= 1.2x its moves (``--with-long``);
* ``solver.planSeconds`` <= 1.1x the limit and peak RSS <= 1 GiB for every planner run;
* at 1,213 nodes: freed >= greedy drain's, moves <= 0.9x its or a proven move gap (``solver.moveCostGap``) <= 5%;
* 400 nodes at 60% fill: gap to the whole-cluster bound <= 0.5%;
* ``--max-moves 20``: >= greedy drain's steps within 20 moves and >= the uncapped curve's best point within 20 moves;
* every plan the planner runs produced passes the independent checker, ``tests/plancheck.py`` (run after the figures,
  outside the planner's time and memory);
* issue 17: pending pods placed >= the chain baseline's; (pending placed, usable freed GPUs) >= greedy drain's;
  with ``--stability``, the default settings run again and seeded place the same pending pods and come within 2% of
  the usable GPUs of the default run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import trace_replay  # noqa: E402  (benchmarks/ is not a package)
from generate_cluster import write  # noqa: E402

PLANNERS = (
    "planner",
    "planner-no-pending",
    "planner-long",
    "planner-cap",
    "planner-default",
    "planner-default-again",
    "planner-default-seeded",
)
BASELINES = ("greedy-drain", "greedy-drain-no-pending", "greedy-drain-cap", "hnu-least", "hnu-most", "chain-placement")
STABLE_SHARE = 0.02  # issue 17: another run, or a seeded one, within 2% of the plan's usable GPUs (same pending placed)
CAP = 20  # --max-moves of planner-cap and greedy-drain-cap (the shipped manifests cap a cycle at 20 moves)
TIME_SLACK = 1.1  # solver.time_limit_seconds bounds the plan (loading apart): at most 10% over
RSS_LIMIT_MIB = 1024
MOVES_SHARE, MOVES_GAP = 0.9, 0.05  # 1,213 nodes: <= 0.9x greedy drain's moves, or a proven move gap <= 5%
GAP_AT_60 = 0.005  # 400 nodes at 60% fill: gap to the whole-cluster bound
LONG_MOVES = 1.2  # the default-limit plan: at least the long run's GPUs with <= 1.2x its moves
MARKERS = ("o", "s", "D", "^", "v", "x", "+")
QUICK = {"sizes": "100", "fills": "0.8", "variants": "default", "seeds": "1"}
Record = dict[str, Any]


# ---------------------------------------------------------------- the child: one method on one snapshot


def measure(method: str, snapshot: str, time_limit: float | None, long_limit: float) -> Record:
    """Runs in the child process: load the snapshot, run ``method``, return its figures."""
    from compactor.model.load import load_files

    started = time.monotonic()
    snap = load_files([snapshot])
    record: Record = {"loadSeconds": round(time.monotonic() - started, 3), "podsInSnapshot": len(snap.pods)}
    started = time.monotonic()
    plan = None
    if method in PLANNERS:
        settings = _planner_settings(method, time_limit, long_limit)
        plan = _plan(snap, snapshot, settings)
        record |= _planner_record(plan, settings)
    else:
        record |= _run_baseline(snap, method)
    record["seconds"] = round(time.monotonic() - started, 3)
    record["peakRssMiB"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    if plan is not None:  # after the figures: the check is not the planner's time or memory
        record["planErrors"] = _plan_errors(snap, plan, settings)
    return record


def _plan_errors(snap: Any, plan: Any, settings: Any) -> list[str]:
    """What the independent plan checker (tests/plancheck.py) finds wrong with the plan: [] for a valid plan."""
    from tests.plancheck import check_plan

    return check_plan(snap, plan, settings)[:5]


def _planner_settings(method: str, time_limit: float | None, long_limit: float) -> Any:
    from compactor.settings.bundles import PlannerSettings

    update: dict[str, Any] = {}
    if not method.startswith("planner-default"):
        # Issue 13's goals compare move counts with greedy drain's: every move costs one, so the planner minimises
        # moves too. The planner-default runs are what a user runs: balanced, moves priced as shipped.
        update = {"objective": "max-free", "move_cost": {"capacity_share": 0.0, "per_startup_minute": 0}}
    if method == "planner-no-pending":
        update["place_pending"] = False
    if method == "planner-cap":
        update["max_moves"] = CAP
    if method == "planner-default-seeded":
        update["deterministic"] = True
    if method == "planner-long":
        update["time_limit_seconds"] = long_limit
    elif time_limit is not None:
        update["time_limit_seconds"] = time_limit
    return PlannerSettings.of(**update)


def _plan(snap: Any, source: str, settings: Any) -> Any:
    from compactor.app.plan_document import build_plan
    from compactor.planner.request import PlanRequest

    return build_plan(PlanRequest.of(snap, settings, source=source, now=datetime.now(UTC)))


def _planner_record(plan: Any, settings: Any) -> Record:
    curve = [[p.freed_nodes, p.freed_gpus, p.moves, p.status, p.bound, p.usable_gpus] for p in plan.frontier]
    return {
        "netFreedGpus": plan.freed_gpus,
        "usableFreedGpus": plan.usable_freed_gpus,
        "freedNodes": len(plan.freed_nodes),
        "moves": len(plan.moves),
        "pendingPlaced": len(plan.placed_pending),
        "status": plan.solver.status,
        "gap": plan.solver.gap,
        "bound": plan.solver.bound,
        "timeLimit": settings.time_limit_seconds,
        "frontierLast": curve[-1] if curve else None,
        "frontier": curve,
        "planSeconds": plan.solver.plan_seconds,
        "moveCost": plan.solver.move_cost,
        "moveCostBound": plan.solver.move_cost_bound,
        "moveCostGap": plan.solver.move_cost_gap,
    }


def _run_baseline(snap: Any, method: str) -> Record:
    from compactor.planner.search.baselines import chain_placement, greedy_drain, high_node_utilization
    from compactor.settings.bundles import PlannerSettings

    settings = PlannerSettings.of(place_pending=method != "greedy-drain-no-pending")
    if method == "greedy-drain-cap":
        return _greedy_within_cap(snap)
    if method == "chain-placement":
        result = chain_placement(snap, settings)
    elif method.startswith("greedy-drain"):
        result = greedy_drain(snap, settings)
    else:
        result = high_node_utilization(
            snap, settings, scoring="LeastAllocated" if method == "hnu-least" else "MostAllocated"
        )
    return {
        "netFreedGpus": result.freed_gpus,
        "usableFreedGpus": result.usable_gpus,
        "freedNodes": len(result.freed_nodes),
        "moves": result.moves,
        "pendingPlaced": result.pending_placed,
        "status": None,
        "gap": None,
        "bound": None,
    }


def _greedy_within_cap(snap: Any) -> Record:
    """Greedy drain's steps that fit ``CAP`` moves (a step passing it is skipped and the next tried: at least what its
    first CAP moves make), as the planner's capped warm start takes them."""
    from compactor.planner.search.baselines import warm_start
    from compactor.settings.bundles import PlannerSettings

    # priced as planner-cap is (every move one): greedy's choices break ties on price
    result = warm_start(
        snap, PlannerSettings.of(max_moves=CAP, move_cost={"capacity_share": 0.0, "per_startup_minute": 0})
    )
    return {
        "netFreedGpus": result.freed_gpus,
        "usableFreedGpus": result.usable_gpus,
        "freedNodes": len(result.freed_nodes),
        "moves": result.moves,
        "pendingPlaced": result.pending_placed,
        "status": None,
        "gap": None,
        "bound": None,
    }


# ---------------------------------------------------------------- the parent: snapshots, subprocesses


@dataclass(frozen=True, slots=True)
class Case:
    size: int | None  # None = every GPU node
    variant: str
    fill: float
    seed: int

    @property
    def name(self) -> str:
        return f"{self.variant}/{'all' if self.size is None else self.size}/fill{self.fill:g}/seed{self.seed}"


def cases(
    sizes: Sequence[int | None], fills: Sequence[float], variants: Sequence[str], seeds: Sequence[int]
) -> list[Case]:
    return [
        Case(size, variant, fill, seed) for size in sizes for variant in variants for fill in fills for seed in seeds
    ]


def run_method(method: str, snapshot: Path, args: argparse.Namespace) -> Record:
    """One method in a fresh interpreter; a failure becomes a record with ``error``."""
    command = [
        sys.executable,
        __file__,
        "--child",
        method,
        "--snapshot",
        str(snapshot),
        "--long-limit",
        str(args.long_limit),
    ]
    if args.time_limit is not None:
        command += ["--time-limit", str(args.time_limit)]
    limit = args.long_limit if method == "planner-long" else args.time_limit or 10.0
    try:
        out = subprocess.run(command, check=True, capture_output=True, text=True, timeout=6 * limit + 600)
    except subprocess.CalledProcessError as exc:
        return {"error": (exc.stderr or "").strip().splitlines()[-1:] or [f"exit {exc.returncode}"]}
    except subprocess.TimeoutExpired:
        return {"error": [f"timed out after {6 * limit + 600:g} s"]}
    record: Record = json.loads(out.stdout.strip().splitlines()[-1])  # the child prints one JSON line, last
    return record


def methods(with_long: bool, stability: bool = False) -> list[str]:
    return [
        "planner",
        "planner-no-pending",
        "planner-cap",
        *(["planner-long"] if with_long else []),
        *(["planner-default", "planner-default-again", "planner-default-seeded"] if stability else []),
        *BASELINES,
    ]


def run_case(case: Case, args: argparse.Namespace, workdir: Path, results: Any) -> list[Record]:
    options = trace_replay.ReplayOptions(
        variant=case.variant, nodes=case.size, fill=case.fill, seed=case.seed, trace_dir=args.trace_dir
    )
    cluster, stats = trace_replay.replay(options)
    path = workdir / f"{case.variant}-{case.size or 'all'}-{case.fill:g}-{case.seed}.json"
    write(cluster, path)
    del cluster
    print(f"\n{case.name}: {stats.line()}", flush=True)
    base = {
        "case": case.name,
        "variant": case.variant,
        "size": case.size or "all",
        "fill": case.fill,
        "seed": case.seed,
        "nodes": stats.nodes,
        "gpus": stats.gpus,
        "replay": _stats_dict(stats),
    }
    records = run_methods(case.name, base, path, args, results)
    if not args.keep_snapshots:
        path.unlink()
    return records


def run_file(path: Path, args: argparse.Namespace, results: Any) -> list[Record]:
    """The methods on a snapshot file as it is (a generated cluster, a captured one): named by the file."""
    print(f"\n{path}", flush=True)
    items = json.loads(path.read_text(encoding="utf-8")).get("items", [])
    nodes = [i for i in items if i.get("kind") == "Node"]
    gpus = sum(int(n.get("status", {}).get("allocatable", {}).get("nvidia.com/gpu", 0)) for n in nodes)
    base = {"case": path.name, "variant": "file", "size": "file", "fill": None, "seed": None, "nodes": len(nodes)}
    base["gpus"] = gpus
    return run_methods(path.name, base, path, args, results)


def run_methods(name: str, base: Record, path: Path, args: argparse.Namespace, results: Any) -> list[Record]:
    records = []
    earlier = _earlier_baselines(args.baselines_from, name)
    for method in methods(args.with_long, args.stability):
        reused = earlier.get(method)
        record = reused if reused is not None else base | {"method": method} | run_method(method, path, args)
        records.append(record)
        results.write(json.dumps(record) + "\n")
        results.flush()
        print("  " + row_text(record), flush=True)
    for goal, verdict in goals(records):
        print(f"  goal: {goal}: {verdict}", flush=True)
    return records


def _earlier_baselines(path: Path | None, case: str) -> dict[str, Record]:
    """The baselines' records of ``case`` from an earlier results.jsonl (they are deterministic: greedy drain and the
    descheduler emulation give the same moves on the same snapshot), so a re-run of the planners need not repeat them."""
    if path is None:
        return {}
    with path.open() as handle:
        found = [json.loads(line) for line in handle]
    return {r["method"]: r for r in found if r["case"] == case and r["method"] in BASELINES and "error" not in r}


def _stats_dict(stats: trace_replay.ReplayStats) -> dict[str, Any]:
    return asdict(stats)


# ---------------------------------------------------------------- goals


def _by_method(records: Iterable[Record]) -> dict[str, Record]:
    return {r["method"]: r for r in records if "error" not in r}


def goals(records: Sequence[Record]) -> list[tuple[str, str]]:
    """(goal, verdict) for one snapshot's records."""
    found = _by_method(records)
    return [
        _greedy_goal(found),
        _lexicographic_goal(found),
        _long_goal(found),
        _time_goal(found),
        _moves_goal(found),
        _gap_goal(found),
        _cap_goal(found),
        _valid_goal(found),
        _chain_goal(found),
        _usable_goal(found),
        _stable_goal(found, "planner-default-again", "default settings, run again"),
        _stable_goal(found, "planner-default-seeded", "default settings, seeded (deterministic)"),
    ]


def _chain_goal(found: dict[str, Record]) -> tuple[str, str]:
    """Issue 17: the planner places at least the chain baseline's pending pods."""
    goal = "pending placed >= the chain baseline's"
    plan, chain = found.get("planner"), found.get("chain-placement")
    if plan is None or chain is None:
        return goal, "n/a"
    verdict = "yes" if plan["pendingPlaced"] >= chain["pendingPlaced"] else "NO"
    return goal, f"{verdict} ({plan['pendingPlaced']} vs {chain['pendingPlaced']})"


def _usable_goal(found: dict[str, Record]) -> tuple[str, str]:
    """Issue 17: the planner's usable freed GPUs are at least greedy drain's, pending pods placed first (as the planner's
    objective orders them: a pod placed uses capacity a plan that places none may free)."""
    goal = "(pending placed, usable GPUs) >= greedy drain's"
    plan, drain = found.get("planner"), found.get("greedy-drain")
    if plan is None or drain is None or plan.get("usableFreedGpus") is None or drain.get("usableFreedGpus") is None:
        return goal, "n/a"
    mine = (plan["pendingPlaced"], plan["usableFreedGpus"])
    theirs = (drain["pendingPlaced"], drain["usableFreedGpus"])
    return goal, f"{'yes' if mine >= theirs else 'NO'} ({mine} vs {theirs})"


def _stable_goal(found: dict[str, Record], method: str, what: str) -> tuple[str, str]:
    """Issue 17: ``method`` places the default plan's pending pods and comes within 2% of its usable GPUs."""
    goal = f"{what}: same pending placed, usable GPUs within {STABLE_SHARE:.0%}"
    plan, other = found.get("planner-default"), found.get(method)
    if plan is None or other is None or plan.get("usableFreedGpus") is None:
        return goal, "n/a"
    usable, theirs = plan["usableFreedGpus"], other.get("usableFreedGpus") or 0
    close = abs(usable - theirs) <= STABLE_SHARE * max(abs(usable), 1)
    verdict = "yes" if close and plan["pendingPlaced"] == other["pendingPlaced"] else "NO"
    return goal, (
        f"{verdict} (pending {plan['pendingPlaced']} vs {other['pendingPlaced']}, usable {usable} vs {theirs}, "
        f"{other.get('planSeconds')} s)"
    )


def _valid_goal(found: dict[str, Record]) -> tuple[str, str]:
    """Every plan the benchmark produced passes the independent checker."""
    goal = "every plan passes tests/plancheck.py"
    runs = [found[m] for m in PLANNERS if m in found]
    if not runs:
        return goal, "n/a (every planner run failed)"
    bad = [f"{r['method']}: {r['planErrors'][0]}" for r in runs if r.get("planErrors")]
    return goal, f"NO ({'; '.join(bad)})" if bad else f"yes ({len(runs)} plans)"


def _greedy_goal(found: dict[str, Record]) -> tuple[str, str]:
    """Both without pending placement: the planner's max-free point frees at least as much, and its curve's point freeing
    at least greedy drain's GPUs takes no more moves."""
    goal = "planner frees >= greedy drain, and as much with <= its moves (both without pending placement)"
    ours, greedy = found.get("planner-no-pending"), found.get("greedy-drain-no-pending")
    if ours is None or greedy is None:
        return goal, "n/a (a run failed)"
    freed = "yes" if ours["netFreedGpus"] >= greedy["netFreedGpus"] else "NO"
    matching = long_moves_for(greedy["netFreedGpus"], ours)
    fewer = "yes" if matching is not None and matching <= greedy["moves"] else "NO"
    return goal, (
        f"freed {freed} ({ours['netFreedGpus']} vs {greedy['netFreedGpus']}), "
        f"moves {fewer} ({matching} vs {greedy['moves']} for >= {greedy['netFreedGpus']} GPUs)"
    )


def _lexicographic_goal(found: dict[str, Record]) -> tuple[str, str]:
    goal = "planner >= greedy drain in (pending placed, net freed GPUs)"
    ours, greedy = found.get("planner"), found.get("greedy-drain")
    if ours is None or greedy is None:
        return goal, "n/a (a run failed)"
    pair, theirs = (ours["pendingPlaced"], ours["netFreedGpus"]), (greedy["pendingPlaced"], greedy["netFreedGpus"])
    return goal, f"{'yes' if pair >= theirs else 'NO'} ({pair[0]}, {pair[1]}) vs ({theirs[0]}, {theirs[1]})"


def long_moves_for(freed: int, long_run: Record) -> int | None:
    """Fewest moves on a planner run's curve among points freeing at least ``freed`` GPUs (None: no such point)."""
    moves = [point[2] for point in long_run.get("frontier") or () if point[1] >= freed]
    if long_run["netFreedGpus"] >= freed:
        moves.append(long_run["moves"])
    return min(moves) if moves else None


def _long_goal(found: dict[str, Record]) -> tuple[str, str]:
    goal = f"the default-limit plan frees >= the 60 s plan's GPUs with <= {LONG_MOVES:g}x its moves"
    ours, long_run = found.get("planner"), found.get("planner-long")
    if ours is None or long_run is None:
        return goal, "n/a (no --with-long run)" if long_run is None else "n/a (a run failed)"
    goal = goal.replace("60 s", f"{long_run['timeLimit']:g} s")
    mine, theirs = (ours["pendingPlaced"], ours["netFreedGpus"]), (long_run["pendingPlaced"], long_run["netFreedGpus"])
    verdict = "yes" if mine > theirs or (mine == theirs and ours["moves"] <= LONG_MOVES * long_run["moves"]) else "NO"
    return (
        goal,
        f"{verdict} ({ours['netFreedGpus']} GPUs / {ours['moves']} moves vs {long_run['netFreedGpus']} / {long_run['moves']})",
    )


def _time_goal(found: dict[str, Record]) -> tuple[str, str]:
    goal = f"plan seconds <= {TIME_SLACK:g} x limit (loading apart), peak RSS <= {RSS_LIMIT_MIB} MiB"
    # a seeded run's limit is CP-SAT's deterministic time, not seconds (docs/planner.md, "Determinism")
    runs = [found[m] for m in PLANNERS if m in found and m != "planner-default-seeded"]
    if not runs:
        return goal, "n/a (every planner run failed)"
    late = [
        r
        for r in runs
        if r.get("planSeconds", r["seconds"]) > TIME_SLACK * r["timeLimit"] or r["peakRssMiB"] > RSS_LIMIT_MIB
    ]
    worst = max(runs, key=lambda r: r.get("planSeconds", r["seconds"]) / r["timeLimit"])
    return goal, (
        f"{'NO' if late else 'yes'} (slowest {worst['method']}: {worst.get('planSeconds', worst['seconds']):.1f} s at "
        f"{worst['timeLimit']:g} s; peak {max(r['peakRssMiB'] for r in runs)} MiB)"
    )


def _moves_goal(found: dict[str, Record]) -> tuple[str, str]:
    """At 1,213 nodes: greedy drain's GPUs with measurably fewer moves, or proof that its moves are near the fewest."""
    goal = f"1,213 nodes: freed >= greedy drain, moves <= {MOVES_SHARE:g}x its or a proven move gap <= {MOVES_GAP:.0%}"
    ours, greedy = found.get("planner"), found.get("greedy-drain")
    if ours is None or greedy is None:
        return goal, "n/a (a run failed)"
    if ours["nodes"] < 1213:
        return goal, "n/a (not 1,213 nodes)"
    freed = (ours["pendingPlaced"], ours["netFreedGpus"]) >= (greedy["pendingPlaced"], greedy["netFreedGpus"])
    gap = ours.get("moveCostGap")
    fewer = ours["moves"] <= MOVES_SHARE * greedy["moves"] or (gap is not None and gap <= MOVES_GAP)
    return goal, (
        f"{'yes' if freed and fewer else 'NO'} ({ours['netFreedGpus']} GPUs / {ours['moves']} moves vs greedy "
        f"{greedy['netFreedGpus']} / {greedy['moves']}; move gap {_gap(gap)}, bound {_num(ours.get('moveCostBound'))})"
    )


def _gap_goal(found: dict[str, Record]) -> tuple[str, str]:
    goal = f"400 nodes at 60% fill: gap to the whole-cluster bound <= {GAP_AT_60:.1%}"
    ours = found.get("planner")
    if ours is None:
        return goal, "n/a (the run failed)"
    if ours["nodes"] != 400 or ours["fill"] != 0.6:
        return goal, "n/a (not 400 nodes at 60%)"
    gap = ours["gap"]
    return (
        goal,
        f"{'yes' if gap is not None and gap <= GAP_AT_60 else 'NO'} (gap {_gap(gap)}, bound {_num(ours['bound'])})",
    )


def _cap_goal(found: dict[str, Record]) -> tuple[str, str]:
    """--max-moves CAP: at least greedy drain's steps that fit the cap (more than its first CAP moves), and at least the
    uncapped curve's best point within CAP moves, in (pending placed, freed GPUs)."""
    goal = f"--max-moves {CAP}: >= greedy drain within {CAP} moves and >= the uncapped curve's best point within {CAP}"
    ours, greedy, uncapped = found.get("planner-cap"), found.get("greedy-drain-cap"), found.get("planner")
    if ours is None or greedy is None or uncapped is None:
        return goal, "n/a (a run failed)"
    # Freed GPUs count as usable ones where both runs measured them (issue 17: freed GPUs no shape in use can take are
    # no gain, and the planner does not carry out a point that only frees such GPUs).
    key = (
        "usableFreedGpus"
        if ours.get("usableFreedGpus") is not None and greedy.get("usableFreedGpus") is not None
        else "netFreedGpus"
    )
    mine = (ours["pendingPlaced"], ours[key])
    points = [
        point[5] if key == "usableFreedGpus" and len(point) > 5 and point[5] is not None else point[1]
        for point in uncapped.get("frontier") or ()
        if point[2] <= CAP
    ]
    curve = (uncapped["pendingPlaced"], max(points)) if points else (0, 0)
    theirs = (greedy["pendingPlaced"], greedy[key])
    verdict = "yes" if ours["moves"] <= CAP and mine >= theirs and mine >= curve else "NO"
    return (
        goal,
        f"{verdict} ({mine[1]} {'usable ' if key == 'usableFreedGpus' else ''}GPUs / {ours['moves']} moves, {mine[0]} "
        f"pending; greedy {theirs[1]}, curve {curve[1]})",
    )


# ---------------------------------------------------------------- output


def row_text(record: Record) -> str:
    if "error" in record:
        return f"{record['method']:<20} ERROR {' '.join(record['error'])}"
    solver = (
        ""
        if record["status"] is None
        else f"  {record['status']} gap {_gap(record['gap'])} bound {_num(record['bound'])}"
    )
    return (
        f"{record['method']:<20} freed {record['netFreedGpus']:>5} GPUs ({_num(record.get('usableFreedGpus'))} usable)  "
        f"moves {record['moves']:>5}  pending {record['pendingPlaced']}"
        f"  {record['seconds']:>7.2f} s (+{record['loadSeconds']:.2f} s load)  {record['peakRssMiB']} MiB{solver}"
    )


def _gap(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _last(record: Record) -> str:
    last = record.get("frontierLast")
    return "-" if not last else f"{last[1]} GPUs / {last[2]} moves {last[3]}"


TABLE_HEAD = (
    "| snapshot | method | net freed GPUs | usable | moves | pending placed | seconds | load s | peak RSS MiB | status "
    "| gap | bound | curve's last point |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|"
)


def table_row(record: Record) -> str:
    if "error" in record:
        return f"| {record['case']} | {record['method']} | error: {' '.join(record['error'])} ||||||||||"
    cells = [
        record["case"],
        record["method"],
        record["netFreedGpus"],
        _num(record.get("usableFreedGpus")),
        record["moves"],
        record["pendingPlaced"],
        f"{record['seconds']:.2f}",
        f"{record['loadSeconds']:.2f}",
        record["peakRssMiB"],
        record["status"] or "-",
        _gap(record["gap"]),
        _num(record["bound"]),
        _last(record),
    ]
    return "| " + " | ".join(str(c) for c in cells) + " |"


def markdown(records: Sequence[Record], header: str) -> str:
    lines = [header, "", TABLE_HEAD, *(table_row(r) for r in records), "", "Goals:", ""]
    lines += ["| snapshot | goal | verdict |", "|---|---|---|"]
    for case in dict.fromkeys(r["case"] for r in records):
        lines += [
            f"| {case} | {goal} | {verdict} |" for goal, verdict in goals([r for r in records if r["case"] == case])
        ]
    return "\n".join(lines) + "\n"


def machine() -> str:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores, {memory:.0f} GiB, {platform.processor() or platform.machine()}, Python {platform.python_version()}"


def plots(records: Sequence[Record], out: Path) -> list[Path]:
    """freed vs moves per method, planner time vs nodes; nothing without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed (pip install -e '.[bench]'): no plots", file=sys.stderr)
        return []
    ok = [r for r in records if "error" not in r]
    figure, axes = plt.subplots(figsize=(7, 5))
    for method, marker in zip(dict.fromkeys(r["method"] for r in ok), MARKERS, strict=False):
        mine = [r for r in ok if r["method"] == method]
        axes.scatter(
            [r["moves"] for r in mine], [r["netFreedGpus"] for r in mine], label=method, marker=marker, alpha=0.6
        )
    axes.set(xlabel="moves (evictions)", ylabel="net freed GPUs", title="Freed GPUs vs moves, per method")
    axes.legend()
    paths = [_save(figure, out / "freed_vs_moves.png")]
    figure, axes = plt.subplots(figsize=(7, 5))
    for method in ("planner", "planner-no-pending"):
        mine = [r for r in ok if r["method"] == method]
        axes.scatter(
            [r["nodes"] for r in mine], [r.get("planSeconds") or r["seconds"] for r in mine], label=method, alpha=0.7
        )
    limits = sorted({r["timeLimit"] for r in ok if r["method"] == "planner"})
    for limit in limits:
        axes.axhline(TIME_SLACK * limit, color="red", linestyle="--", label=f"goal: {TIME_SLACK:g} x {limit:g} s")
    axes.set(xlabel="nodes", ylabel="plan seconds (loading apart)", title="Planner time vs cluster size")
    axes.legend()
    paths.append(_save(figure, out / "planner_time_vs_nodes.png"))
    return paths


def _save(figure: Any, path: Path) -> Path:
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    return path


# ---------------------------------------------------------------- CLI


def _sizes(text: str) -> list[int | None]:
    return [None if s == "all" else int(s) for s in text.split(",")]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--sizes", default="all,400", help="comma-separated node counts, 'all' = 1,213 (default all,400)"
    )
    parser.add_argument("--fills", default="0.6,0.8,0.95")
    parser.add_argument("--variants", default="default,multigpu50,gpuspec33")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="one 100-node default snapshot at fill 0.8, seed 1 (overrides the four above)",
    )
    parser.add_argument(
        "--time-limit", type=float, default=None, help="planner time limit (default: the settings' default, 10 s)"
    )
    parser.add_argument("--with-long", action="store_true", help="also run the planner with --long-limit")
    parser.add_argument("--long-limit", type=float, default=60.0)
    parser.add_argument("--trace-dir", type=Path, default=trace_replay.DEFAULT_TRACE_DIR)
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("/tmp/gpu-compactor-bench"),
        help="results folder (default /tmp/gpu-compactor-bench)",
    )
    parser.add_argument(
        "--baselines-from",
        type=Path,
        default=None,
        help="take the baselines' records of each snapshot from this earlier results.jsonl (deterministic) instead of running them",
    )
    parser.add_argument("--keep-snapshots", action="store_true", help="keep the replayed snapshots in OUT/snapshots")
    parser.add_argument(
        "--stability",
        action="store_true",
        help="also run the planner at default settings twice and seeded (solver.deterministic): issue 17's stability",
    )
    parser.add_argument(
        "--files",
        type=Path,
        nargs="+",
        default=None,
        help="run the methods on these snapshot files (e.g. generate_cluster.py's) instead of the replay matrix",
    )
    parser.add_argument("--child", choices=(*PLANNERS, *BASELINES), help=argparse.SUPPRESS)
    parser.add_argument("--snapshot", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        for name, value in QUICK.items():
            setattr(args, name, value)
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child, args.snapshot, args.time_limit, args.long_limit)))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    matrix = cases(
        _sizes(args.sizes),
        [float(f) for f in args.fills.split(",")],
        args.variants.split(","),
        [int(s) for s in args.seeds.split(",")],
    )
    command = "python benchmarks/bench_trace.py " + " ".join(sys.argv[1:] if argv is None else argv)
    header = f"Run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {machine()}: `{command.strip()}`"
    print(
        f"{header}\n{len(args.files or matrix)} snapshot(s) x {len(methods(args.with_long, args.stability))} methods; "
        f"results in {args.out}",
        flush=True,
    )
    records: list[Record] = []
    with (args.out / "results.jsonl").open("w", encoding="utf-8") as results, tempfile.TemporaryDirectory() as tmp:
        workdir = args.out / "snapshots" if args.keep_snapshots else Path(tmp)
        workdir.mkdir(exist_ok=True)
        for path in args.files or []:
            records += run_file(path, args, results)
        for case in matrix if args.files is None else []:
            records += run_case(case, args, workdir, results)
    (args.out / "results.md").write_text(markdown(records, header), encoding="utf-8")
    written = [args.out / "results.jsonl", args.out / "results.md", *plots(records, args.out)]
    print("\nwritten: " + ", ".join(str(p) for p in written))


if __name__ == "__main__":
    main()

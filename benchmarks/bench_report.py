"""Time the snapshot loader and the fragmentation figures on a large cluster; report peak memory.

    python benchmarks/bench_report.py                      # generate 5,000 nodes / 50,000 pods
    python benchmarks/bench_report.py --snapshot FILE      # or measure an existing snapshot
    python benchmarks/bench_report.py --profile 25         # plus the 25 costliest functions

The snapshot is written to a temporary JSON file; the measurement runs in a fresh
interpreter (this script with ``--child``), so its peak RSS (``ru_maxrss``) covers
only importing ``compactor``, ``load_files([...])`` and ``compute_figures(snapshot)``,
not the generator. Wall and CPU seconds are both reported: on a shared machine the
CPU seconds are the steadier figure. Targets: load + figures under 3 s wall, peak
RSS under 1 GiB, judged on the median of ``--runs`` fresh runs (default 3; each
run's total is printed too, so the spread is visible). ``--check`` exits 1 when a
target is missed; ``--no-gc`` runs the measurement with the cyclic garbage
collector disabled, to show its share.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TARGET_SECONDS = 3.0
TARGET_RSS_MIB = 1024.0


def _child(path: str, profile: int, no_gc: bool) -> dict[str, Any]:
    """Runs in the fresh interpreter: import, load, compute figures, measure."""
    import gc
    import resource

    if no_gc:
        gc.disable()

    sys.path.insert(0, str(ROOT))
    result: dict[str, Any] = {}
    clock = _Clock()
    from compactor.model.load import load_files

    result["import_s"], _ = clock.lap()
    profiler = _profiler(profile)
    snapshot = load_files([path])
    result["load_s"], result["load_cpu_s"] = clock.lap()
    result["rss_after_load_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result |= {
        "nodes": len(snapshot.nodes),
        "pods": len(snapshot.pods),
        "pdbs": len(snapshot.pdbs),
        "warnings": list(snapshot.warnings),
    }
    try:
        from compactor.metrics.fragmentation import compute_figures
    except ImportError as exc:
        result["figures_error"] = f"compactor.metrics.fragmentation.compute_figures unavailable: {exc}"
    else:
        clock.lap()
        figures = compute_figures(snapshot)
        result["figures_s"], result["figures_cpu_s"] = clock.lap()
        cluster = figures.cluster
        result["fragmentation_rate"] = cluster.fragmentation_rate
        result["free_gpus"] = cluster.free_gpus
        result["whole_free_nodes"] = cluster.whole_free_nodes
    if profiler is not None:
        profiler.disable()
        result["profile"] = _profile_text(profiler, profile)
    result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    return result


class _Clock:
    def __init__(self) -> None:
        self.wall = time.perf_counter()
        self.cpu = time.process_time()

    def lap(self) -> tuple[float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        lap = (wall - self.wall, cpu - self.cpu)
        self.wall, self.cpu = wall, cpu
        return lap


def _profiler(profile: int) -> Any:
    if not profile:
        return None
    import cProfile

    profiler = cProfile.Profile()
    profiler.enable()
    return profiler


def _profile_text(profiler: Any, top: int) -> str:
    import io
    import pstats

    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def measure(path: str, *, profile: int = 0, no_gc: bool = False) -> dict[str, Any]:
    """Run the measurement in a fresh interpreter and return its figures."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    command = [sys.executable, str(Path(__file__).resolve()), "--child", path, "--profile", str(profile)] + (
        ["--no-gc"] if no_gc else []
    )
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"measurement failed (exit {done.returncode}):\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _snapshot_file(args: argparse.Namespace) -> tuple[str, bool, float]:
    """(path, is_temporary, seconds spent generating and writing)."""
    if args.snapshot:
        return args.snapshot, False, 0.0
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from generate_cluster import generate, write

    started = time.perf_counter()
    cluster = generate(args.nodes, args.pods, seed=args.seed)
    handle, path = tempfile.mkstemp(prefix="gpu-compactor-bench-", suffix=".json")
    os.close(handle)
    write(cluster, path)
    return path, not args.keep, time.perf_counter() - started


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _total(result: dict[str, Any]) -> float:
    return float(result["load_s"] + (result.get("figures_s") or 0.0))


def report(result: dict[str, Any], size_mb: float) -> tuple[str, bool]:
    """The table, and whether both targets are met."""
    figures_s = result.get("figures_s")
    total = result["load_s"] + (figures_s or 0.0)
    total_cpu = result["load_cpu_s"] + (result.get("figures_cpu_s") or 0.0)
    rss = result["peak_rss_mib"]
    time_ok = figures_s is not None and total < TARGET_SECONDS
    rss_ok = rss < TARGET_RSS_MIB
    rows = [
        ("nodes", _fmt(result["nodes"])),
        ("pods", _fmt(result["pods"])),
        ("PDBs", _fmt(result["pdbs"])),
        ("file MB", _fmt(size_mb, 1)),
        ("import s", _fmt(result["import_s"])),
        ("load s (cpu s)", f"{_fmt(result['load_s'])} ({_fmt(result['load_cpu_s'])})"),
        (
            "figures s (cpu s)",
            f"{_fmt(figures_s)} ({_fmt(result.get('figures_cpu_s'))})" if figures_s is not None else "n/a",
        ),
        ("total s (cpu s)", f"{_fmt(total)} ({_fmt(total_cpu)})"),
        ("RSS after load MiB", _fmt(result["rss_after_load_mib"], 0)),
        ("peak RSS MiB", _fmt(rss, 0)),
        (f"total < {TARGET_SECONDS:g} s", "yes" if time_ok else ("n/a (no figures)" if figures_s is None else "NO")),
        (f"RSS < {TARGET_RSS_MIB / 1024:g} GiB", "yes" if rss_ok else "NO"),
    ]
    if "fragmentation_rate" in result:
        rows.insert(4, ("fragmentation rate", _fmt(result["fragmentation_rate"], 3)))
    width = max(len(name) for name, _ in rows)
    lines = [f"{name:<{width}}  {value}" for name, value in rows]
    if result.get("figures_error"):
        lines.append(f"note: {result['figures_error']}")
    if result["warnings"]:
        lines.append(f"loader warnings: {len(result['warnings'])}, first: {result['warnings'][0]}")
    return "\n".join(lines), time_ok and rss_ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark load_files and compute_figures on a large cluster.")
    parser.add_argument("--snapshot", help="measure this snapshot instead of generating one")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=50000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep the generated snapshot file (its path is printed)")
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="also cProfile the child and print the N costliest functions",
    )
    parser.add_argument(
        "--runs", type=int, default=3, help="fresh measured runs; the table shows the median one (default 3)"
    )
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--no-gc", action="store_true", help="diagnostic: disable the cyclic GC in the measured run")
    parser.add_argument("--json", action="store_true", help="print the raw measurement as JSON")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.child, args.profile, args.no_gc)))
        return 0

    path, temporary, generated_s = _snapshot_file(args)
    try:
        size_mb = Path(path).stat().st_size / 1e6
        results = sorted(
            (measure(path, profile=args.profile, no_gc=args.no_gc) for _ in range(max(1, args.runs))), key=_total
        )
    finally:
        if temporary:
            Path(path).unlink(missing_ok=True)
    if generated_s:
        print(f"generated and wrote {path} in {generated_s:.1f} s" + ("" if temporary else " (kept)"))
    result = results[len(results) // 2]
    table, ok = report(result, size_mb)
    if len(results) > 1:
        table += (
            f"\ntotal s of {len(results)} runs: "
            + ", ".join(f"{_total(r):.2f}" for r in results)
            + " (the table shows the median run)"
        )
    if args.no_gc:
        table += "\n(cyclic GC disabled in the measured run: a diagnostic, not the shipped behaviour)"
    print(json.dumps({k: v for k, v in result.items() if k != "profile"}, indent=2) if args.json else table)
    if result.get("profile"):
        print(result["profile"])
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())

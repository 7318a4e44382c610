"""What the balanced policy does under each price of a move: the figures behind ``aims.move_cost``'s defaults.

    python benchmarks/bench_price.py                     # the example cluster and four 400-node trace replays (~5 min)
    python benchmarks/bench_price.py --shares 0,0.5 --prices 0.5,1 --fills 0.8
    python benchmarks/bench_price.py --snapshots /tmp/e2estates/*.json --fills ""   # snapshots read from clusters

For each snapshot and each (``move_cost.capacity_share``, ``balanced_moves_per_gpu``) it plans with the balanced
objective and prints what the chosen plan frees, how many pods it moves, and the GPU capacity it restarts (the
GPU-equivalents of the replicas it moves: serving capacity out of rotation while they start again). docs/planner.md
("What a move costs") records a run and the default it chose.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import trace_replay  # noqa: E402  (benchmarks/ is not a package)
from generate_cluster import write  # noqa: E402

from compactor.app.plan_document import build_plan  # noqa: E402
from compactor.app.sources import example_path  # noqa: E402
from compactor.model.load import load_files  # noqa: E402
from compactor.model.types import Snapshot  # noqa: E402
from compactor.planner.request import PlanRequest  # noqa: E402
from compactor.planner.rules.price import gpu_equivalents, resource_equivalents  # noqa: E402
from compactor.settings.bundles import PlannerSettings  # noqa: E402


def snapshots(
    fills: list[float], variants: list[str], size: int, workdir: Path, files: list[str]
) -> list[tuple[str, Snapshot]]:
    found = [("example", load_files([example_path()]))] + [(Path(f).stem, load_files([f])) for f in files]
    for variant in variants:
        for fill in fills:
            cluster, _ = trace_replay.replay(trace_replay.ReplayOptions(variant=variant, nodes=size, fill=fill, seed=1))
            path = workdir / f"{variant}-{fill:g}.json"
            write(cluster, path)
            found.append((f"{variant}/{size}/fill{fill:g}", load_files([str(path)])))
    return found


def row(name: str, snap: Snapshot, share: float, price: float, time_limit: float) -> str:
    settings = PlannerSettings.of(
        objective="balanced",
        balanced_moves_per_gpu=price,
        time_limit_seconds=time_limit,
        move_cost={"capacity_share": share},
    )
    plan = build_plan(PlanRequest.of(snap, settings, source=name, now=datetime.now(UTC)))
    pods = {p.key: p for p in snap.pods}
    equivalents = resource_equivalents(snap)
    restarted = sum(gpu_equivalents(pods[m.pod], equivalents) for m in plan.moves)
    per_gpu = f"{restarted / plan.freed_gpus:.2f}" if plan.freed_gpus > 0 else "-"
    return (
        f"| {name} | {share:g} | {price:g} | {plan.freed_gpus} | {len(plan.placed_pending)} | {len(plan.moves)} | "
        f"{restarted:.2f} | {per_gpu} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shares", default="0,0.25,0.5,0.75")
    parser.add_argument("--prices", default="0.5")
    parser.add_argument("--fills", default="0.6,0.8")
    parser.add_argument("--variants", default="default,multigpu50")
    parser.add_argument("--size", type=int, default=400)
    parser.add_argument("--time-limit", type=float, default=10.0)
    parser.add_argument(
        "--snapshots", nargs="*", default=[], help="snapshot files (kubectl get nodes,pods,pdb -A -o json) too"
    )
    args = parser.parse_args()
    shares = [float(s) for s in args.shares.split(",")]
    prices = [float(p) for p in args.prices.split(",")]
    print(
        "| snapshot | capacity_share | balanced price | freed GPUs | pending placed | moves | GPU-eq restarted | restarted per GPU freed |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as workdir:
        fills = [float(f) for f in args.fills.split(",") if f]
        for name, snap in snapshots(fills, args.variants.split(","), args.size, Path(workdir), args.snapshots):
            for price in prices:
                for share in shares:
                    print(row(name, snap, share, price, args.time_limit), flush=True)


if __name__ == "__main__":
    main()

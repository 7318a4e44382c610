"""``report`` and ``plan`` on partitionable DRA GPUs (dynamic MIG) scattered by first fit and departures.

    python benchmarks/bench_dra_partitions.py                        # 500 nodes of 8 A100-80GB, 400 pending (~a minute)
    python benchmarks/bench_dra_partitions.py --nodes 100 --pending 50

Each node has 8 GPUs published as NVIDIA's driver models dynamic MIG (``tests/dra_builders.partition_slices``: a counter
set of 8 memory slices per GPU, a device per placement of every profile and the whole GPU). Each GPU is filled first
fit with ``1g.10gb`` and ``2g.20gb`` claims, as kube-scheduler allocates, then ``--leave`` of them (30%) leave: what stays
is scattered. ``--pending`` pods wait for a ``3g.40gb`` or ``4g.40gb`` device. The file is read by a fresh ``compactor
report`` and ``compactor plan`` each (``--time-limit`` seconds), timed with the child's peak RSS; printed: time, memory,
the blocked demand before and after the plan, the pending pods placed, the moves and the nodes freed. Prints figures;
checks nothing.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_dra import measure
from tests.builders import node
from tests.dra_builders import A100_80_PLACEMENTS, device_class, dra_pod, mig_claim, partition_slices

SIZES = {profile: (size, starts) for profile, size, starts in A100_80_PLACEMENTS}


def first_fit(taken: set[int], profile: str) -> int | None:
    size, starts = SIZES[profile]
    return next((s for s in starts if not taken & set(range(s, s + size))), None)


def cluster(nodes: int, gpus: int, pending: int, seed: int, leave: float) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    items: list[dict[str, Any]] = [device_class(), device_class("mig.nvidia.com")]
    for n in range(nodes):
        name = f"p-{n:04d}"
        items += [node(name), *partition_slices(name, gpus=gpus)]
        for gpu in range(gpus):
            taken: set[int] = set()
            for i in range(8):
                profile = rng.choice(["1g.10gb", "1g.10gb", "2g.20gb"])
                start = first_fit(taken, profile)
                if start is None:
                    break
                size = SIZES[profile][0]
                taken |= set(range(start, start + size))
                if rng.random() < leave:
                    continue  # left: its slices are free again
                pod = f"{name}-{gpu}-{i}"
                device = f"gpu-{gpu}-mig-{profile.replace('.', '-')}-{start}"
                items += [
                    dra_pod(pod, on=name, claim=f"{pod}-c", owner="ReplicaSet/small"),
                    mig_claim(f"{pod}-c", profile=profile, on=name, device=device, for_pods=[pod]),
                ]
    for k in range(pending):
        profile = rng.choice(["3g.40gb", "4g.40gb"])
        items += [
            dra_pod(f"wait-{k}", claim=f"wait-{k}-c", owner=f"ReplicaSet/wait-{k}"),
            mig_claim(f"wait-{k}-c", profile=profile),
        ]
    return items


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--pending", type=int, default=400)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--time-limit", type=float, default=30.0)
    parser.add_argument("--leave", type=float, default=0.3, help="share of the first-fit claims that leave")
    args = parser.parse_args()
    items = cluster(args.nodes, args.gpus, args.pending, args.seed, args.leave)
    kinds: dict[str, int] = {}
    for obj in items:
        kinds[obj["kind"]] = kinds.get(obj["kind"], 0) + 1
    devices = sum(len(o["spec"].get("devices") or ()) for o in items if o["kind"] == "ResourceSlice")
    print(
        f"cluster: {kinds['Node']} nodes, {args.nodes * args.gpus} GPUs, {devices} partitionable devices, "
        f"{kinds['Pod']} pods ({args.pending} pending), {kinds['ResourceClaim']} claims"
    )
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "cluster.json"
        path.write_text(json.dumps({"kind": "List", "items": items}), encoding="utf-8")
        compactor = [sys.executable, "-m", "compactor.cli"]
        seconds, peak, out = measure([*compactor, "report", "--output", "json", "--snapshot", str(path)])
        figures = json.loads(out)["figures"]
        print(f"report: {seconds:.1f} s, {peak:.0f} MiB")
        command = ["plan", "--output", "json", "--time-limit", str(args.time_limit), "--snapshot", str(path)]
        seconds, peak, out = measure([*compactor, *command])
        plan = json.loads(out)
        print(f"plan:   {seconds:.1f} s, {peak:.0f} MiB (planSeconds {plan['solver'].get('planSeconds')})")
        before, after = plan["before"], plan["after"]
        print(
            f"blocked pending pods: {len(figures['blockedPending'])} before "
            f"({figures['blockedDemandGpuEquivalents']:.1f} GPU-equivalents), {len(after['blockedPending'])} after "
            f"({after['blockedDemandGpuEquivalents']:.1f}); placed {len(plan.get('placedPending') or [])} with "
            f"{len(plan.get('moves') or [])} moves; freed nodes {len(plan.get('freedNodes') or [])}; whole-free GPUs "
            f"{before['cluster']['wholeFreePhysicalGpus']} -> {after['cluster']['wholeFreePhysicalGpus']}"
        )
        if plan.get("heldBack"):
            print(f"held back: {plan['heldBack']}")
        for note in plan.get("warnings") or []:
            print(f"note: {note}")


if __name__ == "__main__":
    main()

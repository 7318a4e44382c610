"""``report`` and ``plan`` on a cluster whose GPUs are allocated through DRA, against its device-plugin twin.

    python benchmarks/bench_dra.py                       # 1,000 GPU nodes, ~8,000 devices, ~10,000 claims (a minute)
    python benchmarks/bench_dra.py --nodes 200 --pods 2000 --pending 10

``generate_cluster.py`` makes the device-plugin cluster; this script turns it into its DRA twin: each GPU node loses
its ``nvidia.com/gpu`` allocatable and gains a ResourceSlice of as many whole GPUs (NVIDIA's ``gpu.nvidia.com``
attributes), each GPU pod loses its ``nvidia.com/gpu`` request and gains a template claim, made and (when bound)
allocated to free devices of its node, as kube-scheduler would. MIG nodes stay device-plugin nodes (static MIG on DRA is
counted the same way, but the generator's MIG layouts are not translated here). Both files are then read by a fresh
``compactor report`` and ``compactor plan`` each (``--time-limit`` seconds of planning), timed, with the peak RSS of
the process (``ru_maxrss`` of the child), and the report's headline figures compared. Prints figures; checks nothing.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DRIVER = "gpu.nvidia.com"
GPU = "nvidia.com/gpu"


def to_dra(cluster: dict[str, Any]) -> dict[str, Any]:
    """The DRA twin of a generated cluster (see the module docstring)."""
    items, extra = [], []
    free: dict[str, list[str]] = {}
    for obj in cluster["items"]:
        obj = copy.deepcopy(obj)
        if obj["kind"] == "Node":
            gpus = int(obj["status"]["allocatable"].pop(GPU, 0) or 0)
            obj["status"]["capacity"].pop(GPU, None)
            if gpus:
                name = obj["metadata"]["name"]
                product = obj["metadata"].get("labels", {}).get("nvidia.com/gpu.product", "")
                free[name] = [f"gpu-{i}" for i in range(gpus)]
                extra.append(_slice(name, gpus, product))
        items.append(obj)
    for obj in items:
        if obj["kind"] != "Pod":
            continue
        gpus = sum(
            int(((c.get("resources") or {}).get("requests") or {}).get(GPU, 0)) for c in obj["spec"]["containers"]
        )
        gpus = gpus or sum(
            int(((c.get("resources") or {}).get("limits") or {}).get(GPU, 0)) for c in obj["spec"]["containers"]
        )
        if not gpus:
            continue
        for container in obj["spec"]["containers"]:
            for section in ("requests", "limits"):
                (container.get("resources") or {}).get(section, {}).pop(GPU, None)
        meta, node = obj["metadata"], obj["spec"].get("nodeName")
        claim_name = f"{meta['name']}-gpus"
        obj["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "gpus"}]
        obj.setdefault("status", {})["resourceClaimStatuses"] = [{"name": "gpus", "resourceClaimName": claim_name}]
        taken = [free[node].pop() for _ in range(gpus)] if node and len(free.get(node, [])) >= gpus else []
        extra.append(_claim(meta.get("namespace", "default"), claim_name, meta["name"], gpus, node, taken))
    return {**cluster, "items": items + extra}


def _slice(node: str, gpus: int, product: str) -> dict[str, Any]:
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {
                "type": {"string": "gpu"},
                "uuid": {"string": f"GPU-{node}-{i}"},
                "productName": {"string": product},
            },
        }
        for i in range(gpus)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def _claim(namespace: str, name: str, pod: str, gpus: int, node: str | None, devices: list[str]) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if devices:
        status = {
            "allocation": {
                "devices": {
                    "results": [{"request": "gpus", "driver": DRIVER, "pool": node, "device": d} for d in devices]
                }
            },
            "reservedFor": [{"resource": "pods", "name": pod, "uid": f"uid-{pod}"}],
        }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": DRIVER, "count": gpus}}]}},
        "status": status,
    }


def measure(command: list[str]) -> tuple[float, float, str]:
    """Seconds, peak RSS (MiB) of that child alone (``wait4``), its standard output."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = subprocess.Popen(command, stdout=out, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        if child.returncode != 0:
            sys.exit(f"{' '.join(command)} failed ({child.returncode}):\n{err.read().decode()[-2000:]}")
        return seconds, usage.ru_maxrss / 1024, out.read().decode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1100, help="nodes (generate_cluster.py; about 10%% CPU-only)")
    parser.add_argument("--pods", type=int, default=12000)
    parser.add_argument("--pending", type=int, default=4000, help="pending GPU pods: their claims wait, unallocated")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--time-limit", type=float, default=10.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        plugin, dra = Path(folder) / "plugin.json", Path(folder) / "dra.json"
        subprocess.run(
            [sys.executable, str(HERE / "generate_cluster.py"), "--nodes", str(args.nodes), "--pods", str(args.pods),
             "--seed", str(args.seed), "--pending", str(args.pending), "--mig-share", "0", "--out", str(plugin)],
            check=True, capture_output=True,
        )  # fmt: skip
        twin = to_dra(json.loads(plugin.read_text(encoding="utf-8")))
        dra.write_text(json.dumps(twin), encoding="utf-8")
        kinds: dict[str, int] = {}
        for obj in twin["items"]:
            kinds[obj["kind"]] = kinds.get(obj["kind"], 0) + 1
        devices = sum(len(o["spec"]["devices"]) for o in twin["items"] if o["kind"] == "ResourceSlice")
        print(f"cluster: {kinds.get('Node', 0)} nodes, {kinds.get('Pod', 0)} pods; DRA twin: {kinds.get('ResourceSlice', 0)} "
              f"slices, {devices} devices, {kinds.get('ResourceClaim', 0)} claims")  # fmt: skip
        compactor = [sys.executable, "-m", "compactor.cli"]
        rows = []
        for what, args_ in (
            ("report", ["report", "--output", "json"]),
            ("plan", ["plan", "--output", "json", "--time-limit", str(args.time_limit)]),
        ):
            results = {}
            for kind, path in (("device plugin", plugin), ("DRA", dra)):
                seconds, peak, out = measure([*compactor, *args_, "--snapshot", str(path)])
                results[kind] = (seconds, peak, json.loads(out))
            rows.append((what, results))
        print(f"{'':8} {'device plugin':>22} {'DRA':>22} {'time x':>8} {'memory x':>9}")
        for what, results in rows:
            (ps, pm, _), (ds, dm, _) = results["device plugin"], results["DRA"]
            print(f"{what:8} {ps:8.1f} s {pm:8.0f} MiB {ds:8.1f} s {dm:8.0f} MiB {ds / ps:8.2f} {dm / pm:9.2f}")
        report_plugin, report_dra = rows[0][1]["device plugin"][2], rows[0][1]["DRA"][2]
        for key in (
            "physicalGpus",
            "allocatedGpuEquivalents",
            "wholeFreePhysicalGpus",
            "strandedShare",
            "fragmentationRate",
        ):
            print(f"report {key}: device plugin {_find(report_plugin, key)}, DRA {_find(report_dra, key)}")
        blocked = "blockedDemandGpuEquivalents"
        print(f"report {blocked}: device plugin {_find(report_plugin, blocked)}, DRA {_find(report_dra, blocked)}")


def _find(doc: Any, key: str) -> Any:
    """The first value under ``key`` anywhere in a JSON document."""
    if isinstance(doc, dict):
        if key in doc:
            return doc[key]
        for value in doc.values():
            if (found := _find(value, key)) is not None:
                return found
    if isinstance(doc, list):
        for value in doc:
            if (found := _find(value, key)) is not None:
                return found
    return None


if __name__ == "__main__":
    main()

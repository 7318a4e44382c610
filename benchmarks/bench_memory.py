"""Peak memory of one ``compactor run --once`` (read, plan, execute) on a large cluster of realistic pods.

    python benchmarks/bench_memory.py                                  # 5,000 nodes / 50,000 pods, steering policy (~4 min)
    python benchmarks/bench_memory.py --steering policy,off,holds      # a fresh cluster and run per mode (off ~6, holds ~35 min)
    python benchmarks/bench_memory.py --nodes 500 --pods 5000 --moves 4  # small, about a minute
    python benchmarks/bench_memory.py --plain                          # pods as generated, nothing to strip: the floor

Two processes per steering mode:

* the cluster: ``generate_cluster.py``'s cluster (nodes, pods, PDBs) in ``tests/fakeapi``'s
  ``FakeApiServer`` with its disruption controller, one ReplicaSet per pod owner, a Lease
  endpoint, the steering admission policy (``--steering policy``) and the stand-in scheduler of
  ``bench_api_requests.py`` (binds each replacement, Running and Ready). Every pod and node the
  server *sends* is dressed as a real API server sends it (``tests/fakeapi/realistic.py``:
  managedFields, the last-applied manifest, twenty environment variables, probes, mounts,
  container statuses, a node's cached images; about 17 KB of JSON per pod and 14 KB per node),
  while its store stays lean so that the server itself fits in a few hundred MB;
* the measured one, a fresh interpreter: ``compactor run --once --kubeconfig ... --config ...``
  exactly as a user runs it (Lease, recovery, reading the snapshot, planning with
  ``solver.time_limit_seconds`` and ``place_pending: false``, executing at most ``--moves``
  evictions). Its peak RSS (``ru_maxrss``) is read at the end of each phase: recovery, the
  snapshot read (``snapshot_from_cluster``), the plan (``build_plan``) and the execution.

Printed per mode: seconds, peak RSS and current RSS after each phase, the run's status and moves,
and the requests the server answered that list every pod or every node (the first page of each
list without a selector), per move. A benchmark, not a test: it prints figures and checks nothing.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

JSON = dict[str, Any]
NAMESPACE = "gpu-compactor"


# --------------------------------------------------------------------------- the cluster process


def serve(args: argparse.Namespace) -> int:
    """Build the cluster, serve it, print ``READY <url> <sizes>``; on a line on stdin print the request counts and stop."""
    from benchmarks.bench_api_requests import Scheduler, replica_sets
    from benchmarks.generate_cluster import generate
    from tests.builders import steering_policy
    from tests.fakeapi import DisruptionController, FakeApiServer, RecordedRequest, Reply, status_body
    from tests.fakeapi.realistic import dress_node, dress_pod

    class DressedApi(FakeApiServer):
        """Replies carry realistic pods and nodes; the store and the recorded replies stay lean."""

        def _builtin(self, request: RecordedRequest) -> Reply:
            reply = super()._builtin(request)  # every body is a copy of the store, never the stored object
            body = reply.body
            if isinstance(body, dict) and not args.plain:
                kind = body.get("kind")
                if kind == "PodList":
                    for item in body.get("items") or []:
                        dress_pod(item)
                elif kind == "NodeList":
                    for item in body.get("items") or []:
                        dress_node(item)
                elif kind == "Pod":
                    dress_pod(body)
                elif kind == "Node":
                    dress_node(body)
            return reply

        def _sent(self, request: RecordedRequest, reply: Reply) -> None:
            return None  # keeping every reply would keep every 50,000-pod listing

    fast_json_and_copies()
    leases: dict[tuple[str, str], JSON] = {}
    versions = itertools.count(1)

    def lease_get(_api: FakeApiServer, _request: RecordedRequest, match: re.Match[str]) -> Reply:
        lease = leases.get((match["ns"], match["name"]))
        return (
            Reply(200, copy.deepcopy(lease))
            if lease
            else Reply(404, status_body(404, f'leases "{match["name"]}" not found'))
        )

    def lease_write(_api: FakeApiServer, request: RecordedRequest, match: re.Match[str]) -> Reply:
        body = request.json()
        key = (match["ns"], match.groupdict().get("name") or body["metadata"]["name"])
        current = leases.get(key)
        if request.method == "POST" and current is not None:
            return Reply(409, status_body(409, "already exists", reason="AlreadyExists"))
        if request.method == "PUT" and (
            current is None or body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]
        ):
            return Reply(409, status_body(409, "the object has been modified"))
        body["metadata"].update(namespace=key[0], resourceVersion=str(next(versions)))
        leases[key] = body
        return Reply(201 if request.method == "POST" else 200, copy.deepcopy(body))

    items = list(generate(args.nodes, args.pods, seed=args.seed)["items"])
    pods = [i for i in items if i["kind"] == "Pod"]
    api = DressedApi(disruption_controller=DisruptionController())
    api.start()
    leases_path = r"/apis/coordination\.k8s\.io/v1/namespaces/(?P<ns>[^/]+)/leases"
    api.route("GET", leases_path + r"/(?P<name>[^/]+)", lease_get)
    api.route("PUT", leases_path + r"/(?P<name>[^/]+)", lease_write)
    api.route("POST", leases_path, lease_write)
    api.add(*items, *replica_sets(pods), *(steering_policy() if args.steering == "policy" else []))
    del items, pods
    scheduler = Scheduler(api)
    api.on_evict = scheduler.on_evict
    scheduler.thread.start()
    sample_pods = api.objects("Pod")[:: max(1, args.pods // 200)]
    sample_nodes = api.objects("Node")[:: max(1, args.nodes // 50)]
    stored = sum(len(json.dumps(p)) for p in sample_pods) / len(sample_pods)
    sizes = {
        "pod": sum(len(json.dumps(dress_pod(p))) for p in sample_pods) / len(sample_pods),
        "podLean": stored,
        "node": sum(len(json.dumps(dress_node(n))) for n in sample_nodes) / len(sample_nodes),
    }
    api.write_kubeconfig(args.kubeconfig)
    api.clear_requests()
    print("READY", api.url, json.dumps(sizes), flush=True)
    sys.stdin.readline()
    scheduler.stop.set()
    print("REQUESTS", json.dumps(request_counts(api.requests)), flush=True)
    api.stop()
    return 0


def fast_json_and_copies() -> None:
    """The fake API server's ``json.dumps`` and ``copy.deepcopy`` through msgspec (its store and replies hold JSON values
    only): with the stdlib's, copying and encoding 50,000 realistic pods per listing makes the server, not the
    compactor, what the benchmark waits for."""
    import msgspec

    from tests.fakeapi import eviction, listing, messages, patches, server, store, transport, writes

    class Msgspec:
        JSONDecodeError = json.JSONDecodeError
        loads = staticmethod(json.loads)

        @staticmethod
        def dumps(obj: Any, **options: Any) -> str:
            return json.dumps(obj, **options) if options else msgspec.json.encode(obj).decode()

        @staticmethod
        def deepcopy(obj: Any) -> Any:
            return msgspec.json.decode(msgspec.json.encode(obj))

    for module in (messages, listing, transport):  # the fake API server's modules that import json
        module.json = Msgspec  # type: ignore[attr-defined]
    for module in (store, listing, writes, eviction, patches, server):  # and those that import copy
        module.copy = Msgspec  # type: ignore[attr-defined]


def request_counts(requests: list[Any]) -> JSON:
    """Lists of every pod / every node (first pages of unselected lists), pages of them, and the narrower reads."""
    counts: dict[str, int] = {}
    for r in requests:
        if r.method != "GET":
            continue
        selected = r.param("labelSelector") or r.param("fieldSelector")
        if r.path in ("/api/v1/pods", "/api/v1/nodes"):
            what = r.path.rsplit("/", 1)[-1]
            key = (
                f"{what} by selector"
                if selected
                else (f"all {what}" if not r.param("continue") else f"all {what}, later pages")
            )
        elif re.fullmatch(r"/api/v1/namespaces/[^/]+/pods", r.path):
            key = "pods of a namespace" + (" by selector" if selected else "")
        elif re.fullmatch(r"/api/v1/(namespaces/[^/]+/pods|nodes)/[^/]+", r.path):
            key = f"one {r.path.split('/')[-2][:-1]}"
        else:
            continue
        counts[key] = counts.get(key, 0) + 1
    return counts


# --------------------------------------------------------------------------- the measured process


def rss_mib() -> tuple[float, float]:
    """(peak, current) resident set size of this process in MiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    current = 0.0
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                current = int(line.split()[1]) / 1024
    return peak, current


def measure(args: argparse.Namespace) -> int:
    """``compactor run --once`` in this process, the end of each phase marked; prints ``RESULT <json>`` last."""
    started = time.monotonic()
    marks: list[JSON] = []

    def mark(phase: str) -> None:
        peak, current = rss_mib()
        marks.append(
            {
                "phase": phase,
                "seconds": round(time.monotonic() - started, 1),
                "peakMiB": round(peak),
                "rssMiB": round(current),
            }
        )

    import compactor.actions.executor as executor_module
    import compactor.app.carry_out as carry_out_module
    import compactor.app.planning as planning_module
    import compactor.kube.snapshot as snapshot_module
    from compactor.cli import main as compactor_main

    mark("imports")
    report: JSON = {}

    def marked(module: Any, name: str, phase: str) -> None:
        original = getattr(module, name)

        def wrapper(*a: Any, **k: Any) -> Any:
            result = original(*a, **k)
            mark(phase)
            return result

        setattr(module, name, wrapper)

    marked(carry_out_module, "recover", "recovery")  # where the use cases look them up
    marked(snapshot_module, "snapshot_from_cluster", "read snapshot")
    marked(planning_module, "build_plan", "plan")
    execute = executor_module.Executor.execute

    def execute_marked(self: Any, *a: Any, **k: Any) -> Any:
        result = execute(self, *a, **k)
        mark("execute")
        report.update(
            status=result.status,
            moves=result.moves_done,
            of=result.moves_total,
            steering=result.steering,
            reason=result.reason,
        )
        return result

    executor_module.Executor.execute = execute_marked  # type: ignore[method-assign]
    code = compactor_main(["run", "--once", "--kubeconfig", args.kubeconfig, "--config", args.config])
    mark("exit")
    print(
        "RESULT",
        json.dumps(
            {
                "code": code,
                "marks": marks,
                "report": report,
                "compactor": str(Path(compactor_main.__code__.co_filename).parent),
            }
        ),
        flush=True,
    )
    return 0


# --------------------------------------------------------------------------- the driver


def config_text(args: argparse.Namespace, steering: str) -> str:
    return (
        f"solver:\n  time_limit_seconds: {args.time_limit}\naims:\n  place_pending: false\n"
        f"caps:\n  max_evictions_per_cycle: {args.moves}\n  max_holds_per_move: 100000\n"
        f'steering:\n  mechanism: "{steering}"\n  bind_poll_seconds: 0.2\n  steer_timeout_seconds: 120\n'
        f"executor:\n  poll_seconds: 0.2\n  backoff_seconds: 0.2\n  replacement_timeout_seconds: 120\n"
        f"  state_namespace: {NAMESPACE}\n"
    )


def one_mode(args: argparse.Namespace, steering: str, workdir: Path) -> JSON:
    kubeconfig, config = workdir / f"kubeconfig-{steering}", workdir / f"config-{steering}.yaml"
    config.write_text(config_text(args, steering), encoding="utf-8")
    script = str(Path(__file__).resolve())
    built = time.monotonic()
    server = subprocess.Popen(
        [
            sys.executable,
            script,
            "--serve",
            "--nodes",
            str(args.nodes),
            "--pods",
            str(args.pods),
            "--seed",
            str(args.seed),
            "--steering",
            steering,
            "--kubeconfig",
            str(kubeconfig),
            *(["--plain"] if args.plain else []),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None and server.stdin is not None
        line = server.stdout.readline().split(maxsplit=2)
        if not line or line[0] != "READY":
            raise SystemExit(f"the cluster process did not start ({line})")
        sizes = json.loads(line[2])
        sent = (
            "as generated, not dressed"
            if args.plain
            else (
                f"{sizes['pod'] / 1024:.1f} KB per pod as sent ({sizes['podLean'] / 1024:.1f} KB "
                f"stored), per node {sizes['node'] / 1024:.1f} KB"
            )
        )
        print(
            f"[{steering}] cluster served in {time.monotonic() - built:.0f} s: {args.nodes} nodes, {args.pods} pods; JSON {sent}",
            flush=True,
        )
        run = subprocess.run(
            [sys.executable, script, "--measure", "--kubeconfig", str(kubeconfig), "--config", str(config)],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        server.stdin.write("stop\n")
        server.stdin.flush()
        counts: JSON = {}
        for out in server.stdout:
            if out.startswith("REQUESTS "):
                counts = json.loads(out.split(maxsplit=1)[1])
                break
    finally:
        if server.poll() is None:
            server.terminate()
        server.wait(timeout=60)
    results = [json.loads(out.split(maxsplit=1)[1]) for out in run.stdout.splitlines() if out.startswith("RESULT ")]
    if not results:
        sys.stderr.write(run.stdout[-3000:] + run.stderr[-3000:])
        raise SystemExit(f"[{steering}] the measured run printed no result (exit {run.returncode})")
    result: JSON = results[-1]
    result["requests"] = counts
    result["stdout"] = [out for out in run.stdout.splitlines() if not out.startswith("RESULT ")]
    if result["code"] != 0:
        sys.stderr.write(run.stderr[-2000:])
    return result


def show(steering: str, result: JSON) -> None:
    report = result["report"]
    moves = max(1, int(report.get("moves") or 0))
    print(
        f"[{steering}] compactor run --once: exit {result['code']}, {report.get('status')} "
        f"({report.get('moves')}/{report.get('of')} moves, steering {report.get('steering')}){': ' + report['reason'] if report.get('reason') else ''}"
    )
    print(f"[{steering}]   {'after':<14} {'seconds':>8} {'peak RSS':>10} {'RSS':>8}")
    for mark in result["marks"]:
        print(
            f"[{steering}]   {mark['phase']:<14} {mark['seconds']:>8.1f} {mark['peakMiB']:>6} MiB {mark['rssMiB']:>4} MiB"
        )
    peak = max(m["peakMiB"] for m in result["marks"])
    print(f"[{steering}]   peak RSS of the whole run: {peak} MiB ({'under' if peak < 512 else 'OVER'} 512 MiB)")
    counts = result["requests"]
    listed = ", ".join(f"{k}: {v} ({v / moves:.1f} per move)" for k, v in sorted(counts.items()))
    print(f"[{steering}]   reads answered: {listed}")
    print(f"[{steering}]   (one 'all pods' is the snapshot read; the code measured: {result['compactor']})", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=50000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--moves", type=int, default=10, help="caps.max_evictions_per_cycle")
    parser.add_argument("--time-limit", type=float, default=10.0, help="solver.time_limit_seconds")
    parser.add_argument(
        "--steering", default="policy", help="comma-separated: policy, holds, off (one cluster and one run each)"
    )
    parser.add_argument(
        "--plain",
        action="store_true",
        help="send the pods and nodes as generated (about 1 KB each), not dressed: "
        "the floor that no stripping can go below",
    )
    parser.add_argument("--json", action="store_true", help="also print each mode's raw measurement")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve(args)
    if args.measure:
        return measure(args)
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        for steering in [s.strip() for s in args.steering.split(",") if s.strip()]:
            result = one_mode(args, steering, Path(tmp))
            show(steering, result)
            if args.json:
                print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Hostile input (issue [12], finding 10): a clear one-line error, exit code 2, no traceback, bounded time and memory.

Each test runs the command as a user would (a subprocess) on a file built to hurt: a YAML alias bomb ("billion
laughs", a few hundred bytes that expand to hundreds of millions of entries), quantities no scheduler can count,
documents nested 200,000 deep. The child's CPU and wall time and its peak memory are measured (``os.wait4``), so a fix
that still expands the bomb before refusing it fails here too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.builders import as_list, node, pod

# The alias bomb took 50-76 s and 430-460 MB before. The CLI alone starts in about 1 s of CPU and peaks near 120 MB; on a
# loaded machine its imports alone have taken 8 s of wall time, hence a wall bound with room and a tight CPU bound.
CPU_SECONDS = 10.0
WALL_SECONDS = 30.0
PEAK_MB = 300
DEPTH = 200_000


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str
    seconds: float  # wall
    cpu_seconds: float  # user + system
    peak_mb: float


# The child says its own peak: ru_maxrss of a forked child counts the parent's pages at the fork (Linux keeps the old
# high-water mark across exec), so after a few hundred in-process tests it read 369 MB for a command that used 80.
# VmHWM of /proc/self/status is the peak of the process image exec made, which is the command's own.
PEAK_SAID = """
import atexit, os, runpy, sys

def said():
    with open("/proc/self/status") as status:
        kilobytes = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    with open(os.environ["HOSTILE_PEAK_FILE"], "w") as out:
        out.write(str(kilobytes))

atexit.register(said)
sys.argv[0] = "compactor"
runpy.run_module("compactor.cli", run_name="__main__", alter_sys=True)
"""


def compactor(*args: str, tmp_path: Path) -> Run:
    """The CLI in a child process, with its own wall time and peak resident memory."""
    peak = tmp_path / "peak-kb"
    environ = {k: v for k, v in os.environ.items() if not k.startswith("COMPACTOR_")} | {"HOSTILE_PEAK_FILE": str(peak)}
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    started = time.monotonic()
    with out.open("w") as stdout, err.open("w") as stderr:
        child = subprocess.Popen([sys.executable, "-c", PEAK_SAID, *args], stdout=stdout, stderr=stderr, env=environ)
        try:
            _, status, usage = os.wait4(child.pid, 0)
        finally:
            child.returncode = 0  # reaped above: keep Popen from waiting on a pid that is gone
    seconds = time.monotonic() - started
    # killed before it could say (a signal): the rusage peak, an upper bound
    peak_mb = int(peak.read_text()) / 1024 if peak.exists() else usage.ru_maxrss / 1024
    return Run(
        os.waitstatus_to_exitcode(status),
        out.read_text(),
        err.read_text(),
        seconds,
        usage.ru_utime + usage.ru_stime,
        peak_mb,
    )


def refused(run: Run, *parts: str) -> str:
    """Exit 2, one line on stderr naming every part, no traceback, within the time and memory bounds."""
    assert run.returncode == 2, (run.stdout[-2000:], run.stderr[-2000:])
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr[-2000:]
    for part in parts:
        assert part in lines[0], lines[0]
    assert run.cpu_seconds < CPU_SECONDS, f"took {run.cpu_seconds:.1f} s of CPU"
    assert run.seconds < WALL_SECONDS, f"took {run.seconds:.1f} s"
    assert run.peak_mb < PEAK_MB, f"peaked at {run.peak_mb:.0f} MB"
    return lines[0]


def alias_bomb(leaf: str, top_key: str) -> str:
    """Nine levels of nine aliases: 9^9 (387 million) leaves for whoever walks the result."""
    lines = [f"a: &a [{', '.join([leaf] * 9)}]"]
    for level in range(1, 9):
        name, previous = chr(ord("a") + level), chr(ord("a") + level - 1)
        lines.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]")
    lines.append(f"{top_key}: [{', '.join(['*i'] * 9)}]")
    return "\n".join(lines) + "\n"


def write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def write_cluster(path: Path, *objects: dict[str, Any]) -> str:
    return write(path, json.dumps(as_list(*objects)))


# ------------------------------------------------------------------ YAML alias bombs


def test_an_alias_bomb_as_config_is_refused_at_once(tmp_path: Path) -> None:
    bomb = alias_bomb('"nvidia.com/gpu=1"', "reference_shapes")
    assert len(bomb) < 600
    config = write(tmp_path / "bomb.yaml", bomb)
    line = refused(compactor("plan", "--example", "--config", config, tmp_path=tmp_path), config)
    assert line == f"compactor: error: {config}: YAML anchors and aliases (&name, *name) are not accepted (line 1)"


def test_an_alias_bomb_as_snapshot_is_refused_at_once(tmp_path: Path) -> None:
    bomb = "apiVersion: v1\nkind: List\n" + alias_bomb("{kind: Event}", "items")
    snapshot = write(tmp_path / "bomb.yaml", bomb)
    line = refused(compactor("plan", "--snapshot", snapshot, tmp_path=tmp_path), snapshot)
    assert line == f"compactor: error: {snapshot}: YAML anchors and aliases (&name, *name) are not accepted (line 3)"


def test_an_alias_in_a_mig_parted_config_map_is_refused_naming_the_config_map(tmp_path: Path) -> None:
    config = (
        "version: v1\nmig-configs:\n  all-disabled: &off\n    - devices: all\n      mig-enabled: false\n  copy: *off\n"
    )
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "default-mig-parted-config", "namespace": "gpu-operator"},
        "data": {"config.yaml": config},
    }
    snapshot = write_cluster(tmp_path / "cluster.json", node("n1", gpus=8), config_map)
    refused(
        compactor("plan", "--snapshot", snapshot, "--explain-mig", tmp_path=tmp_path),
        "ConfigMap gpu-operator/default-mig-parted-config",
        "config.yaml",
        "YAML anchors and aliases",
        "(line 3)",
    )


# ------------------------------------------------------------------ quantities no scheduler can count


def test_a_pod_asking_for_1e18_cores_is_refused_naming_the_pod_and_field(tmp_path: Path) -> None:
    snapshot = write_cluster(
        tmp_path / "cluster.json", node("n1", gpus=8), pod("greedy", on="n1", gpus=1, cpu="1e18", namespace="team")
    )
    line = refused(compactor("plan", "--snapshot", snapshot, tmp_path=tmp_path))
    assert line == (
        f"compactor: error: {snapshot}: Pod team/greedy: spec.containers[0].resources.requests.cpu: quantity '1e18' "
        "is too large: kube-scheduler counts cpu in millicores as a 64-bit integer, at most 9223372036854775807m"
    )


def test_a_gpu_limit_of_1e100000_is_refused_naming_the_pod_and_field(tmp_path: Path) -> None:
    greedy = pod("greedy", gpus=1)
    greedy["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1e100000"
    snapshot = write_cluster(tmp_path / "cluster.json", node("n1", gpus=8), greedy)
    refused(
        compactor("plan", "--snapshot", snapshot, tmp_path=tmp_path),
        f"{snapshot}: Pod default/greedy: spec.containers[0].resources.limits.nvidia.com/gpu: quantity '1e100000' is too large",
    )


def test_node_allocatable_beyond_int64_is_refused_naming_the_node(tmp_path: Path) -> None:
    snapshot = write_cluster(tmp_path / "cluster.json", node("n1", gpus=8, memory="1e19"))
    refused(
        compactor("report", "--snapshot", snapshot, tmp_path=tmp_path),
        f"{snapshot}: Node n1: status.allocatable.memory: quantity '1e19' is too large",
        "in bytes",
    )


def test_huge_amounts_kubernetes_admits_are_planned_exactly_without_overflowing_the_solver(tmp_path: Path) -> None:
    """cpu 2e15 cores per pod (2e18 millicores) on nodes of 9e15: four pods fit a node; before, the capacity rows passed
    half of int64 and CP-SAT returned MODEL_INVALID, leaving the two drainable nodes undrained."""
    nodes = [node(name, gpus=8, cpu="9e15") for name in ("n1", "n2", "n3")]
    pods = [
        pod("a1", on="n1", gpus=1, cpu="2e15"),
        pod("a2", on="n1", gpus=1, cpu="2e15"),
        pod("b", on="n2", gpus=1, cpu="2e15"),
        pod("c", on="n3", gpus=1, cpu="2e15"),
    ]
    snapshot = write_cluster(tmp_path / "cluster.json", *nodes, *pods)
    run = compactor("plan", "--snapshot", snapshot, "--output", "json", tmp_path=tmp_path)
    assert run.returncode == 0, run.stderr
    plan = json.loads(run.stdout)
    assert sorted((m["pod"], m["to"]) for m in plan["moves"]) == [("default/b", "n1"), ("default/c", "n1")]
    assert plan["freedGpus"] == 16
    assert {level["status"] for level in plan["solver"]["levels"]} == {"OPTIMAL"}


def test_memory_capped_like_parse_quantity_fits_exactly_three_of_four_exbibyte_pods(tmp_path: Path) -> None:
    """8Ei of memory is stored by the API server as 2^63-1 bytes: three pods of 2Ei fit, a fourth (2^63) does not."""
    nodes = [node(name, gpus=8, memory="8Ei") for name in ("n1", "n2", "n3")]
    pods = [
        pod("a1", on="n1", gpus=1, memory="2Ei"),
        pod("a2", on="n1", gpus=1, memory="2Ei"),
        pod("b", on="n2", gpus=1, memory="2Ei"),
        pod("c", on="n3", gpus=1, memory="2Ei"),
    ]
    snapshot = write_cluster(tmp_path / "cluster.json", *nodes, *pods)
    run = compactor("plan", "--snapshot", snapshot, "--output", "json", tmp_path=tmp_path)
    assert run.returncode == 0, run.stderr
    plan = json.loads(run.stdout)
    # one node freed, never two: that would put four 2Ei pods on one node (equally good plans differ in which node)
    assert len(plan["moves"]) == 1 and plan["freedGpus"] == 8
    assert {level["status"] for level in plan["solver"]["levels"]} == {"OPTIMAL"}


def test_gpu_counts_beyond_the_solvers_integers_are_refused_naming_a_node(tmp_path: Path) -> None:
    # admitted by Kubernetes (below 2^63), but three such nodes' sum passes the solver's half of int64
    gpus = 4 * 10**18
    nodes = [node(name, gpus=gpus) for name in ("n1", "n2", "n3")]
    pods = [pod("a", on="n1", gpus=1), pod("b", on="n2", gpus=1), pod("c", on="n3", gpus=1)]
    snapshot = write_cluster(tmp_path / "cluster.json", *nodes, *pods)
    refused(
        compactor("plan", "--snapshot", snapshot, tmp_path=tmp_path),
        f"{snapshot}: Node n",
        f"GPU count ({gpus} GPUs on this node) too large for the planner's 64-bit integer model",
    )


# ------------------------------------------------------------------ documents nested 200,000 deep


def test_a_200000_deep_json_snapshot_is_refused(tmp_path: Path) -> None:
    snapshot = write(tmp_path / "deep.json", '{"a":' * DEPTH + "1" + "}" * DEPTH)
    assert (
        refused(compactor("plan", "--snapshot", snapshot, tmp_path=tmp_path))
        == f"compactor: error: {snapshot}: JSON nested too deeply to read"
    )


def test_a_200000_deep_yaml_snapshot_is_refused(tmp_path: Path) -> None:
    snapshot = write(tmp_path / "deep.yaml", "kind: List\nitems: " + "[" * DEPTH + "]" * DEPTH + "\n")
    refused(
        compactor("plan", "--snapshot", snapshot, tmp_path=tmp_path),
        f"{snapshot}: malformed YAML at line 2",
        "nesting depth",
    )


def test_a_deep_yaml_snapshot_within_the_parsers_limit_is_refused_too(tmp_path: Path) -> None:
    """libyaml stops at 1,000 levels; below that, the composer's recursion is what ends, and is refused as such."""
    snapshot = write(tmp_path / "deep.yaml", "kind: List\nitems: " + "[" * 900 + "]" * 900 + "\n")
    refused(compactor("plan", "--snapshot", snapshot, tmp_path=tmp_path), f"{snapshot}: YAML nested too deeply to read")


def test_a_200000_deep_config_is_refused(tmp_path: Path) -> None:
    config = write(tmp_path / "deep.yaml", "planner: " + "[" * DEPTH + "]" * DEPTH + "\n")
    refused(
        compactor("plan", "--example", "--config", config, tmp_path=tmp_path),
        f"{config}: malformed YAML",
        "nesting depth",
    )


def test_a_200000_deep_plan_file_given_to_apply_is_refused(tmp_path: Path) -> None:
    snapshot = write_cluster(tmp_path / "cluster.json", node("n1", gpus=8))
    plan = write(tmp_path / "plan.json", '{"metadata":' * DEPTH + "1" + "}" * DEPTH)
    line = refused(compactor("apply", "--plan", plan, "--snapshot", snapshot, "--dry-run", tmp_path=tmp_path))
    assert line == f"compactor: error: {plan}: JSON nested too deeply to read"


def test_a_plan_file_with_a_5000_digit_number_given_to_apply_is_refused(tmp_path: Path) -> None:
    snapshot = write_cluster(tmp_path / "cluster.json", node("n1", gpus=8))
    plan = write(tmp_path / "plan.json", '{"freedGpus": ' + "9" * 5000 + "}")
    refused(
        compactor("apply", "--plan", plan, "--snapshot", snapshot, "--dry-run", tmp_path=tmp_path),
        f"{plan}: unreadable JSON",
    )

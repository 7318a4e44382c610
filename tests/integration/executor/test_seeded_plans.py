"""``plan --seed N`` promises the same plan again, in any process: Python salts the hash of strings per process
(PYTHONHASHSEED), so nothing that shapes the model may follow the order of a set of strings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


def _cluster(path: Path) -> Path:
    subprocess.run(
        [
            sys.executable,
            str(BENCHMARKS / "generate_cluster.py"),
            "--nodes",
            "200",
            "--pods",
            "1600",
            "--seed",
            "3",
            "--out",
            str(path),
        ],
        check=True,
        timeout=120,
    )
    return path


def _moves(snapshot: Path, hash_seed: str) -> list[tuple[str, str, str]]:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "compactor.cli",
            "plan",
            "--snapshot",
            str(snapshot),
            "--seed",
            "1",
            "--time-limit",
            "3",
            "-o",
            "json",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    plan = json.loads(done.stdout)
    return [(m["pod"], m["from"], m["to"]) for m in plan["moves"]]


def test_a_seeded_plan_is_the_same_in_every_process(tmp_path: Path) -> None:
    snapshot = _cluster(tmp_path / "cluster.json")
    first = _moves(snapshot, "1")
    assert first, "the cluster should need moves, or the comparison says nothing"
    assert _moves(snapshot, "2") == first

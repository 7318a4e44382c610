"""Spreading (``compactor/metrics/spreading.py``): GPU pods held on more nodes than their GPUs need while demand waits,
the case where ``report --advise`` names the scheduler's profile as the first remedy (issue 42)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compactor.cli import main
from compactor.metrics.fragmentation import compute_figures
from compactor.metrics.spreading import spreading
from tests.builders import cluster, node, pod


def _fleet(*, spread: bool, pending: bool) -> list[dict[str, object]]:
    """Four 8-GPU nodes holding 8 one-GPU pods: two per node (spread), or all on one node (packed)."""
    objects: list[dict[str, object]] = [node(f"g{i}", gpus=8) for i in range(4)]
    for i in range(8):
        objects.append(pod(f"p{i}", on=f"g{i % 4}" if spread else "g0", gpus=1, owner=f"ReplicaSet/p{i}"))
    if pending:
        objects.append(pod("big", gpus=8, owner="Job/big"))
    return objects


def test_pods_spread_over_four_nodes_where_one_would_do_while_an_8_gpu_pod_waits_is_the_schedulers_case() -> None:
    found = spreading(compute_figures(cluster(*_fleet(spread=True, pending=True))))
    assert found is not None and found.blocked_pending == 1
    (pool,) = found.pools
    assert (pool.gpu_nodes, pool.nodes_in_use, pool.nodes_needed, pool.whole_free_nodes) == (4, 4, 1, 0)
    assert found.extra_nodes == 3


def test_packed_pods_or_spread_pods_with_nothing_waiting_and_whole_nodes_left_say_nothing() -> None:
    assert spreading(compute_figures(cluster(*_fleet(spread=False, pending=True)))) is None
    quiet = [*_fleet(spread=True, pending=False), node("spare", gpus=8)]  # a whole-free node, nothing waits
    assert spreading(compute_figures(cluster(*quiet))) is None


def test_mig_nodes_are_left_to_the_re_cut() -> None:
    objects = [
        *[node(f"m{i}", mig={"1g.5gb": 7}, product="NVIDIA-A100-SXM4-40GB") for i in range(4)],
        *[pod(f"s{i}", on=f"m{i}", mig="1g.5gb", owner=f"ReplicaSet/s{i}") for i in range(4)],
        pod("big", mig="3g.20gb", owner="Job/big"),
    ]
    assert spreading(compute_figures(cluster(*objects))) is None


def test_report_advise_names_the_schedulers_profile_first_with_its_measured_effect(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = tmp_path / "spread.json"
    snapshot.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": _fleet(spread=True, pending=True)}))
    assert main(["report", "--snapshot", str(snapshot), "--advise", "--output", "markdown"]) == 0
    out = capsys.readouterr().out
    sections = [line for line in out.splitlines() if line.startswith("## ")]
    advice = sections[sections.index("## The scheduler spreads GPU pods") :]
    assert advice[0] == "## The scheduler spreads GPU pods", sections
    assert "GPU pods hold 4 nodes of pool" in out and "where 1 would hold them" in out
    first, second, third = (out.index(w) for w in ("bin-packing profile", "steering.fill_first", "Then compaction"))
    assert first < second < third and "8,752 to 68 GPU-hours" in out

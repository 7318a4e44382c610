"""benchmarks/generate_cluster.py at the README's largest size (issue 45, item 4): 10,000 nodes, 100,000 pods, every
pod's name unique in its namespace, as the API server would insist (the loader refuses a duplicate)."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

from generate_cluster import generate  # benchmarks/ is not a package


@pytest.mark.parametrize("seed", [3])
def test_a_10000_node_cluster_names_every_pod_once(seed: int) -> None:
    cluster = generate(10_000, 100_000, seed=seed)
    names = Counter(
        (item["metadata"].get("namespace", "default"), item["metadata"]["name"])
        for item in cluster["items"]
        if item["kind"] == "Pod"
    )
    assert sum(names.values()) == 100_000
    assert [name for name, count in names.items() if count > 1] == []

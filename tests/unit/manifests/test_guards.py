"""Settings that would silently change the meaning of figures and plans are refused or warned about (issue 14, item 3):
a pool label no GPU node carries (every GPU model one pool: plans across products), a shape naming a resource no node
offers (a typo measuring nothing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compactor.cli import main
from compactor.model.guards import pool_label_unused, unoffered_resources
from compactor.settings.shape_syntax import parse_shape
from tests.builders import as_list, cluster, node, pod


def test_a_chosen_pool_label_no_gpu_node_carries_is_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--example", "--pool-label", "does/not-exist"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    error = captured.err.strip()
    assert "\n" not in error and "Traceback" not in error
    assert "metrics.pool_label 'does/not-exist' is on none of the 7 GPU nodes" in error
    assert "nvidia.com/gpu.count" in error  # names labels the nodes do carry


def test_the_default_pool_label_missing_everywhere_is_a_warning_on_the_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without GPU Feature Discovery no node carries nvidia.com/gpu.product: one pool is then the truth, said aloud."""
    unlabelled = as_list(node("g0", gpus=8), node("g1", gpus=8), pod("a", on="g0", gpus=1), pod("b", on="g1", gpus=1))
    for item in unlabelled["items"]:
        if item["kind"] == "Node":
            item["metadata"]["labels"] = {
                k: v for k, v in item["metadata"]["labels"].items() if k != "nvidia.com/gpu.product"
            }
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(unlabelled))
    assert main(["plan", "--snapshot", str(path), "--output", "json"]) == 0
    warnings = json.loads(capsys.readouterr().out)["warnings"]
    assert any("metrics.pool_label 'nvidia.com/gpu.product' is on none of the 2 GPU nodes" in w for w in warnings)


def test_a_pool_label_some_gpu_node_carries_is_accepted() -> None:
    snapshot = cluster(node("g0", gpus=8, labels={"pool": "a"}), node("g1", gpus=8), node("cpu0"))
    assert pool_label_unused(snapshot, "pool") is None
    assert pool_label_unused(cluster(node("cpu0")), "pool") is None  # no GPU node: nothing to merge


@pytest.mark.parametrize("command", [["report"], ["plan"]])
def test_a_shape_naming_a_resource_no_node_offers_is_refused(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*command, "--example", "--shape", "nvidia.com/gpuu=1"]) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error
    assert "metrics.reference_shapes 'nvidia.com/gpuu=1': no node offers nvidia.com/gpuu" in error
    assert "nvidia.com/gpu," in error  # what the nodes do offer


def test_shapes_of_offered_resources_pass_and_cpu_memory_need_no_offer() -> None:
    snapshot = cluster(node("g0", gpus=8), node("m0", mig={"1g.5gb": 7}))
    assert (
        unoffered_resources(
            snapshot, [parse_shape("nvidia.com/gpu=2,cpu=8,memory=32Gi"), parse_shape("nvidia.com/mig-1g.5gb=1")]
        )
        == []
    )
    assert unoffered_resources(snapshot, [parse_shape("nvidia.com/mig-3g.40gb=1")]) == ["nvidia.com/mig-3g.40gb"]


@pytest.mark.parametrize("target, why", [("missing/plan.json", "does not exist"), (".", "is a directory")])
def test_a_plan_file_that_cannot_be_written_is_refused_before_planning(
    tmp_path: Path, target: str, why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Once a plan took minutes to solve, a typo in --write used to end in a traceback and the plan lost."""
    path = tmp_path / target
    assert main(["plan", "--example", "--write", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # refused before planning
    assert why in captured.err and "Traceback" not in captured.err and len(captured.err.strip().splitlines()) == 1


def test_a_plan_file_in_an_existing_folder_is_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "plan.json"
    assert main(["plan", "--example", "--write", str(path)]) == 0
    assert json.loads(path.read_text())["moves"] and capsys.readouterr().out

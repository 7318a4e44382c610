"""Plan reports people read: text groups moves under their reason, markdown carries the same facts."""

from __future__ import annotations

from datetime import UTC, datetime

from compactor.planner.compose import build_plan
from compactor.planner.explain import render_plan
from compactor.settings import PlannerSettings
from tests.builders import cluster, node, pod

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def two_pods_on_a_half_empty_node() -> str:
    snapshot = cluster(
        node("gpu-1", gpus=8), node("gpu-2", gpus=8),
        pod("a-0", on="gpu-1", gpus=4, owner=None), pod("b-0", on="gpu-2", gpus=1), pod("b-1", on="gpu-2", gpus=1),
    )
    return render_plan(build_plan(snapshot, PlannerSettings(min_replicas=1, time_limit_seconds=5), source="test", now=NOW), "text")


def test_moves_off_one_node_share_one_why_line_and_name_their_target() -> None:
    text = two_pods_on_a_half_empty_node()
    assert text.count("why: frees gpu-2 (8 GPUs, physical)") == 1
    assert "default/b-0  gpu-2 -> gpu-1  (already runs GPU pods, 4 GPU-equivalents free before this move)" in text
    assert "default/b-1  gpu-2 -> gpu-1" in text


def test_markdown_lists_every_move_with_its_full_reason() -> None:
    snapshot = cluster(node("gpu-1", gpus=8), node("gpu-2", gpus=8), pod("a-0", on="gpu-1", gpus=4, owner=None), pod("b-0", on="gpu-2", gpus=1))
    markdown = render_plan(build_plan(snapshot, PlannerSettings(min_replicas=1, time_limit_seconds=5), source="test", now=NOW), "markdown")
    assert ("| 1 | `default/b-0` | gpu-2 | gpu-1 | frees gpu-2 (8 GPUs, physical); gpu-1 already runs GPU pods, "
            "4 GPU-equivalents free before this move |") in markdown
    assert "- 1 move(s); frees 1 node(s): net 8 whole-free GPU(s) (physical)" in markdown

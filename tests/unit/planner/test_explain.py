"""Plan reports people read: text groups moves under their reason, markdown carries the same facts."""

from __future__ import annotations

from datetime import UTC, datetime

from compactor.app.plan_document import build_plan
from compactor.planner.plan import CompactionPlan
from compactor.planner.request import PlanRequest
from compactor.render.plan import render_plan
from compactor.settings.bundles import PlannerSettings
from tests.builders import cluster, node, pod

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def two_pods_on_a_half_empty_node() -> str:
    snapshot = cluster(
        node("gpu-1", gpus=8),
        node("gpu-2", gpus=8),
        pod("a-0", on="gpu-1", gpus=4, owner=None),
        pod("b-0", on="gpu-2", gpus=1),
        pod("b-1", on="gpu-2", gpus=1),
    )
    return render_plan(
        build_plan(
            PlanRequest.of(snapshot, PlannerSettings.of(min_replicas=1, time_limit_seconds=5), source="test", now=NOW)
        ),
        "text",
    )


def test_moves_off_one_node_share_one_why_line_and_name_their_target() -> None:
    text = two_pods_on_a_half_empty_node()
    assert text.count("why: frees gpu-2 (8 GPUs, physical)") == 1
    assert (
        "default/b-0  gpu-2 -> gpu-1  (1 move; already runs GPU pods, 4 GPU-equivalents free before this move)" in text
    )
    assert "default/b-1  gpu-2 -> gpu-1" in text


def test_markdown_lists_every_move_with_its_full_reason() -> None:
    snapshot = cluster(
        node("gpu-1", gpus=8),
        node("gpu-2", gpus=8),
        pod("a-0", on="gpu-1", gpus=4, owner=None),
        pod("b-0", on="gpu-2", gpus=1),
    )
    markdown = render_plan(
        build_plan(
            PlanRequest.of(snapshot, PlannerSettings.of(min_replicas=1, time_limit_seconds=5), source="test", now=NOW)
        ),
        "markdown",
    )
    assert (
        "| 1 | `default/b-0` | gpu-2 | gpu-1 | 1 | frees gpu-2 (8 GPUs, physical); gpu-1 already runs GPU pods, "
        "4 GPU-equivalents free before this move |"
    ) in markdown
    assert "- 1 move(s); frees 1 node(s): net 8 whole-free GPU(s) (physical)" in markdown


def _two_pod_plan() -> CompactionPlan:
    snapshot = cluster(
        node("gpu-1", gpus=8),
        node("gpu-2", gpus=8),
        pod("a-0", on="gpu-1", gpus=4, owner=None),
        pod("b-0", on="gpu-2", gpus=1),
        pod("b-1", on="gpu-2", gpus=1),
    )
    return build_plan(
        PlanRequest.of(snapshot, PlannerSettings.of(min_replicas=1, time_limit_seconds=5), source="test", now=NOW)
    )


def test_the_header_gives_the_printed_plans_own_proof_apart_from_the_searchs_gap() -> None:
    text = render_plan(_two_pod_plan(), "text")
    assert "this plan: OPTIMAL (no plan freeing 1 node(s) costs less than its 2 moves)" in text
    assert "the search for the most GPUs: OPTIMAL" in text


def test_an_unproven_point_says_so_with_its_bound_and_gap() -> None:
    plan = _two_pod_plan()
    points = [p.model_copy(update={"status": "FEASIBLE", "bound": 1.0}) if p.chosen else p for p in plan.frontier]
    text = render_plan(plan.model_copy(update={"frontier": points}), "text")
    assert (
        "this plan: FEASIBLE, not proven (time limit): no plan freeing 1 node(s) costs less than 1 moves, it costs 2 "
        "(gap 50.0%)"
    ) in text


def test_the_before_after_table_leads_with_the_headline_figures() -> None:
    text = render_plan(_two_pod_plan(), "text")
    table = text.split("  figure ")[1].splitlines()
    # what a good plan cannot make worse first; the share of free capacity after the absolute figures (issue 17)
    assert [row.strip().split("  ")[0] for row in table[1:6]] == [
        "blocked pending GPU pods",
        "blocked demand (GPU-equivalents)",
        "stranded GPU capacity (GPU-equivalents)",
        "whole-free GPUs (physical)",
        "stranded share of free GPU capacity",
    ]
    whole_free = next(row for row in table if row.strip().startswith("whole-free GPUs (physical)"))
    assert whole_free.split()[-2:] == ["0", "8"]


def test_a_pending_pod_left_pending_names_the_resource_that_is_short_and_the_closest_node() -> None:
    # big needs 8 GPUs and 48 CPUs. gpu-1 has the CPUs but one GPU is taken; gpu-2 has the GPUs but a CPU-only pod holds
    # 40 of its 64 CPUs. Moves are capped at 0, so the plan leaves it pending: the reason must say CPU and GPU are short.
    snapshot = cluster(
        node("gpu-1", gpus=8, cpu="64"),
        node("gpu-2", gpus=8, cpu="64"),
        pod("a", on="gpu-1", gpus=1, cpu="2"),
        pod("web", on="gpu-2", cpu="40"),
        pod("big", gpus=8, cpu="48"),
    )
    plan = build_plan(
        PlanRequest.of(
            snapshot, PlannerSettings.of(min_replicas=1, time_limit_seconds=5, max_moves=0), source="test", now=NOW
        )
    )
    (note,) = plan.pending_not_placed
    assert note.pod == "default/big"
    assert note.reason.startswith("room could be made on gpu-1, gpu-2 by moving pods, but moves are capped at 0")
    assert "of 2 eligible node(s) cpu on 1, nvidia.com/gpu on 1 lack room" in note.reason
    assert "(closest: gpu-1, pool " in note.reason and ": 7 nvidia.com/gpu free, needs 8)" in note.reason


def test_build_plan_names_each_stage_with_the_best_plan_so_far() -> None:
    seen: list[tuple[str, str]] = []
    snapshot = cluster(
        node("gpu-1", gpus=8),
        node("gpu-2", gpus=8),
        pod("a-0", on="gpu-1", gpus=4, owner=None),
        pod("b-0", on="gpu-2", gpus=1),
        pod("b-1", on="gpu-2", gpus=1),
    )
    build_plan(
        PlanRequest.of(
            snapshot,
            PlannerSettings.of(min_replicas=1, time_limit_seconds=5),
            source="test",
            now=NOW,
            stage=lambda name, best: seen.append((name, best)),
        )
    )
    assert [name for name, _ in seen] == [
        "building the problem",
        "searching",
        "bounding moves and drawing the trade-off curve",
        "writing the plan",
    ]
    assert seen[-1][1] == "8 GPUs freed, 2 moves"

"""Freed means usable (issue 17): a freed node's GPUs count as usable only for what a request shape in use can take there
with the CPU, memory and pod slots left, and the headline never claims a hollow win."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from compactor.app.plan_document import build_plan
from compactor.app.sources import example_path
from compactor.metrics.change import ratio_notes
from compactor.metrics.fragmentation import ReferenceShape, reference_shapes
from compactor.model.load import load_files
from compactor.planner.problem import build_problem
from compactor.planner.request import PlanRequest
from compactor.planner.usable import usable_gpus, usage_shapes
from compactor.render.plan import render_plan
from compactor.settings.bundles import PlannerSettings
from tests.builders import cluster, node, pod
from tests.plancheck import assert_valid

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def settings(**overrides: Any) -> PlannerSettings:
    return PlannerSettings.of(**{"time_limit_seconds": 5, "min_replicas": 1, **overrides})


def test_a_node_whose_cpus_are_held_is_usable_only_for_the_shapes_that_fit_beside_them() -> None:
    snapshot = cluster(
        node("g1", gpus=8, cpu="64"),
        pod("web", on="g1", cpu="52"),  # 12 CPUs left
        *[pod(f"m{i}", on="g1", gpus=1, cpu="5", owner="ReplicaSet/m") for i in range(2)],
        pod("train", gpus=8, cpu="64", owner="Job/train"),
    )
    problem = build_problem(snapshot, settings())
    state = problem.nodes[0]
    empty_of_gpu_pods = {"cpu": 52_000, "memory": 1 << 30, "pods": 1}
    assert usable_gpus(state, empty_of_gpu_pods, ()) == 8  # no shapes: every GPU counts
    pending_only = usage_shapes(problem, [])
    assert usable_gpus(state, empty_of_gpu_pods, pending_only) == 0  # 64 CPUs asked, 12 left
    both = usage_shapes(problem, [snapshot.pods[1].requests])  # + the 1-GPU / 5-CPU shape: two copies fit in 12 CPUs
    assert pending_only[0] == both[0]  # the pending pods' shapes come first
    assert usable_gpus(state, empty_of_gpu_pods, both) == 2


def freeable_but_crowded() -> list[dict[str, Any]]:
    """``busy`` can take both of ``crowded``'s 1-GPU / 12-CPU pods; a CPU pod holds 40 of ``crowded``'s 64 CPUs, so
    once they leave it has 8 GPUs and 24 CPUs free."""
    return [
        node("busy", gpus=8, cpu="64"),
        pod("anchor", on="busy", gpus=4, cpu="4", owner=None),
        node("crowded", gpus=8, cpu="64"),
        pod("web", on="crowded", cpu="40", owner=None),
        *[pod(f"m{i}", on="crowded", gpus=1, cpu="12", owner="ReplicaSet/m") for i in range(2)],
    ]


def in_use(*shapes: dict[str, int]) -> tuple[ReferenceShape, ...]:
    """The reference shapes (``metrics.shapes``), as GPUs and CPUs."""
    configured = [{"nvidia.com/gpu": gpus, "cpu": cpus * 1000} for shape in shapes for gpus, cpus in shape.items()]
    return reference_shapes(cluster(), configured)


def test_a_plan_whose_freed_gpus_no_shape_can_use_carries_out_the_empty_plan_and_says_why() -> None:
    """The only shape in use asks 8 GPUs and 32 CPUs: freeing ``crowded`` leaves it 24, so none of its GPUs is usable."""
    snapshot = cluster(*freeable_but_crowded())
    config = settings(objective="max-free")
    max_free = build_plan(PlanRequest.of(snapshot, config, source="test", now=NOW, shapes=in_use({8: 32})))
    assert_valid(snapshot, max_free, config)
    assert (max_free.frontier[-1].freed_gpus, max_free.frontier[-1].usable_gpus) == (8, 0)
    assert max_free.moves == [] and "frees 8 GPU(s) no request shape in use can take" in max_free.solver.note
    balanced = build_plan(PlanRequest.of(snapshot, settings(), source="test", now=NOW, shapes=in_use({8: 32})))
    assert balanced.moves == [] and balanced.usable_freed_gpus == 0
    # with a shape that fits beside the CPU pod, the same node is worth freeing
    usable = build_plan(PlanRequest.of(snapshot, config, source="test", now=NOW, shapes=in_use({1: 12})))
    assert usable.freed_nodes == ["crowded"] and (usable.freed_gpus, usable.usable_freed_gpus) == (8, 2)


def test_a_shape_the_reference_cut_leaves_out_still_makes_a_freed_node_usable() -> None:
    """Issue 45, item 2: the plan counted usable only what the top ``metrics.max_shapes`` shapes take, so it called a
    freed node's GPUs unusable while pods asked a shape that fits there. ``crowded`` keeps 24 CPUs beside its 8 GPUs:
    the most frequent shape (8 GPUs, 32 CPUs, three pods) fits none; the 1-GPU / 12-CPU shape of its own two pods, cut
    from the reference shapes, takes 2."""
    snapshot = cluster(
        *freeable_but_crowded(),
        node("big", gpus=8, cpu="128"),
        node("big-2", gpus=8, cpu="128"),
        *[pod(f"train-{i}", on=n, gpus=8, cpu="32", owner="ReplicaSet/t") for i, n in enumerate(["big", "big-2"])],
        pod("train-2", gpus=8, cpu="32", owner="ReplicaSet/t"),
    )
    top = reference_shapes(snapshot, max_shapes=1)
    assert [s.label for s in top] == ["nvidia.com/gpu=8 cpu=32 memory=1Gi"]
    plan = build_plan(PlanRequest.of(snapshot, settings(objective="max-free"), source="test", now=NOW, shapes=top))
    assert "crowded" in plan.freed_nodes and plan.usable_freed_gpus is not None and plan.usable_freed_gpus >= 2
    assert "crowded" not in (plan.unusable or "")


def test_freed_gpus_short_of_cpu_are_named_in_one_line() -> None:
    snapshot = cluster(*freeable_but_crowded())
    plan = build_plan(
        PlanRequest.of(
            snapshot, settings(objective="max-free"), source="test", now=NOW, shapes=in_use({8: 32}, {1: 20})
        )
    )
    assert plan.freed_nodes == ["crowded"] and (plan.freed_gpus, plan.usable_freed_gpus) == (8, 1)
    assert plan.unusable == (
        "7 of the 8 freed GPUs fit no request shape in use: crowded (24 cpu free); the first shape asks cpu=32, "
        "nvidia.com/gpu=8"
    )
    assert f"usable: {plan.unusable}" in render_plan(plan, "text")


def test_a_share_that_rises_only_because_pending_pods_used_free_capacity_says_why() -> None:
    snapshot = load_files([str(example_path())])
    plan = build_plan(PlanRequest.of(snapshot, settings(), source="example", now=NOW))
    before, after = plan.before["cluster"], plan.after["cluster"]
    assert after["strandedShare"] > before["strandedShare"]  # 18.7% -> 23.0% on the example
    assert after["strandedGpuEquivalents"] <= before["strandedGpuEquivalents"]
    assert plan.figure_notes["strandedShare"].startswith("up only because the free GPU capacity it is a share of fell")
    text = render_plan(plan, "text")
    assert "23.0% *" in text and "* stranded share of free GPU capacity: up only because" in text


def test_a_share_that_rises_because_more_is_stranded_gets_no_excuse() -> None:
    before = {"strandedShare": 0.2, "strandedGpuEquivalents": 2.0, "freeGpuEquivalents": 10.0}
    after = {"strandedShare": 0.3, "strandedGpuEquivalents": 3.0, "freeGpuEquivalents": 10.0}
    assert ratio_notes(before, after) == {}
    fell = {"strandedShare": 0.25, "strandedGpuEquivalents": 2.0, "freeGpuEquivalents": 8.0}
    assert "2 pending pod(s) placed use 2.00 of it" in ratio_notes(before, fell, placed=2)["strandedShare"]

"""Planner properties on random small mixed clusters: GPU nodes crowded by CPU-only pods, nodes without GPUs, pending pods
that ask GPUs and CPUs (issue 17).

1. Every plan passes the independent checker (``tests/plancheck``), the balanced, max-free and pending-only ones alike.
2. The plan never places fewer pending pods than the chain baseline (``baselines.chain_placement``: make room on the
   node needing the fewest evictions, chain displaced GPU pods through CPU pods moved off their targets).
3. Usable freed GPUs never exceed freed ones, in the plan and at every point of its curve.
4. No plan costs anything for no gain: with moves, it places a pending pod or frees usable GPUs.

``PLANNER_PROPERTY_EXAMPLES=1000`` for the hunt the issue asks; the default keeps the suite short.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, note
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from compactor.app.plan_document import build_plan
from compactor.planner.request import PlanRequest
from compactor.planner.search.baselines import chain_placement
from compactor.settings.bundles import PlannerSettings
from tests.builders import cluster, node, pdb, pod
from tests.plancheck import check_plan

NOW = datetime(2026, 1, 1, tzinfo=UTC)
PROPERTY = hsettings(
    max_examples=int(os.environ.get("PLANNER_PROPERTY_EXAMPLES", "30")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@st.composite
def crowded_clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    """2-5 GPU nodes (4 or 8 GPUs, 32 or 64 CPUs) running 1-2 GPU pods and CPU-only pods that take most of their CPUs,
    0-2 nodes without GPUs, 1-2 pending pods asking a node's worth of GPUs and CPUs; workloads with 1-3 replicas, some
    under a PDB, some bare (unmovable)."""
    objects: list[dict[str, Any]] = []
    workloads = 0
    for i in range(draw(st.integers(2, 5))):
        gpus, cpus = draw(st.sampled_from([4, 8])), draw(st.sampled_from([32, 64]))
        objects.append(node(f"g{i}", gpus=gpus, cpu=str(cpus)))
        left_gpus, left_cpus = gpus, cpus
        for _ in range(draw(st.integers(0, 2))):
            want, cpu = draw(st.integers(1, 2)), draw(st.integers(1, 8))
            if want > left_gpus or cpu > left_cpus:
                break
            workloads += 1
            objects.append(
                pod(f"gpu-{i}-{workloads}", on=f"g{i}", gpus=want, cpu=str(cpu), owner=_owner(draw, workloads))
            )
            left_gpus, left_cpus = left_gpus - want, left_cpus - cpu
        for _ in range(draw(st.integers(0, 4))):
            cpu = draw(st.sampled_from([2, 4, 8, 16]))
            if cpu > left_cpus:
                break
            workloads += 1
            objects.append(pod(f"cpu-{i}-{workloads}", on=f"g{i}", cpu=str(cpu), owner=_owner(draw, workloads)))
            left_cpus -= cpu
    for i in range(draw(st.integers(0, 2))):
        objects.append(node(f"c{i}", cpu=str(draw(st.sampled_from([16, 32, 64])))))
    for k in range(draw(st.integers(1, 2))):
        gpus, cpu = draw(st.sampled_from([4, 8])), draw(st.sampled_from([8, 16, 24]))
        objects.append(pod(f"want-{k}", gpus=gpus, cpu=str(cpu), owner="Job/want"))
    if draw(st.booleans()):
        objects.append(pdb("guard", match={"guarded": "yes"}, allowed=draw(st.integers(0, 1))))
    return objects


def _owner(draw: st.DrawFn, workload: int) -> str | None:
    """Mostly a ReplicaSet of its own; now and then none (a bare pod stays where it is)."""
    return None if draw(st.integers(0, 9)) == 0 else f"ReplicaSet/w{workload}"


@PROPERTY
@given(objects=crowded_clusters(), objective=st.sampled_from(["balanced", "max-free", "pending-only"]))
def test_plans_of_crowded_clusters_are_valid_place_what_chains_place_and_free_only_what_they_say(
    objects: list[dict[str, Any]], objective: str
) -> None:
    snapshot = cluster(*objects)
    config = PlannerSettings.of(min_replicas=1, time_limit_seconds=5, workers=2, objective=objective)
    plan = build_plan(PlanRequest.of(snapshot, config, source="property", now=NOW))
    note(plan.to_json())
    assert check_plan(snapshot, plan, config) == []
    baseline = chain_placement(snapshot, config)
    assert len(plan.placed_pending) >= baseline.pending_placed, (len(plan.placed_pending), baseline)
    assert plan.usable_freed_gpus is not None and plan.usable_freed_gpus <= max(0, plan.freed_gpus)
    for point in plan.frontier:
        assert point.usable_gpus is None or point.usable_gpus <= max(0, point.freed_gpus)
    if plan.moves:
        assert plan.placed_pending or plan.usable_freed_gpus > 0, "moves for no gain"

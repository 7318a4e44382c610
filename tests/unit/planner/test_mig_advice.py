"""MIG layout advice: which named mig-parted layout serves the pending and running MIG demand of a pool."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from compactor.model.migparted import parse_mig_parted
from compactor.planner.mig_advice import advise
from tests.builders import A100_80, as_list, cluster, node, pod
from tests.scenarios.mig import LAYOUTS, config_map, objects, sliced


def test_pending_3g_pods_on_a_pool_cut_into_1g_slices_call_for_a_3g_layout() -> None:
    snapshot = cluster(*objects())
    (pool,) = advise(snapshot, parse_mig_parted(LAYOUTS, source="gpu-operator/default-mig-parted-config"))
    assert (pool.model, pool.nodes, pool.whole_free, pool.layouts_now) == ("A100-80GB", 2, ["b"], {"all-1g.10gb": 2})
    assert pool.pending == {"nvidia.com/mig-3g.40gb": 3} and pool.running == {"nvidia.com/mig-1g.10gb": 4}
    ranked = [(o.config, o.hosts_pending, o.nodes_for_pending) for o in pool.options]
    assert ranked == [("all-3g.40gb", 3, 1), ("all-balanced", 2, 2), ("all-1g.10gb", 0, None)]
    assert (
        pool.summary()
        == "re-cut to all-3g.40gb (most nodes are all-1g.10gb now): 1 re-cut node(s) host all 3; 1 node(s) whole-free to re-cut today"
    )


def test_without_pending_pods_the_layout_closest_to_the_running_mix_ranks_first() -> None:
    snapshot = cluster(*[o for o in objects() if not o["metadata"]["name"].startswith("wait")])
    (pool,) = advise(snapshot, parse_mig_parted(LAYOUTS, source="x/y"))
    assert pool.options[0].config == "all-1g.10gb" and pool.options[0].matches_running == 1.0
    assert pool.summary().startswith("no MIG pod is pending; all-1g.10gb matches")


def test_plan_explain_mig_prints_the_advice_and_names_a_missing_config(tmp_path: Path) -> None:
    snapshot = tmp_path / "cluster.json"
    snapshot.write_text(json.dumps(as_list(*objects())), encoding="utf-8")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "compactor.cli",
            "plan",
            "--snapshot",
            str(snapshot),
            "--explain-mig",
            "--time-limit",
            "5",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "MIG layouts for pool NVIDIA-A100-SXM4-80GB (A100-80GB, 2 nodes; advice, nothing is re-cut):" in run.stdout
    assert "re-cut to all-3g.40gb" in run.stdout
    assert (
        "default/wait-0: no node offers nvidia.com/mig-3g.40gb (a MIG re-cut could: compactor plan --explain-mig)"
        in run.stdout
    )
    snapshot.write_text(json.dumps(as_list(*objects()[:-1])), encoding="utf-8")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "compactor.cli",
            "plan",
            "--snapshot",
            str(snapshot),
            "--explain-mig",
            "--time-limit",
            "5",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    # No MIG config: the plan stands (advice is an extra), and says in one line why there is no advice (issue 14); the
    # other line says no --config named the settings (issue 45).
    warnings = [line for line in run.stderr.strip().splitlines() if "no --config" not in line]
    assert run.returncode == 0 and len(warnings) == 1, run.stderr
    assert "MIG advice unavailable: no mig-parted ConfigMap" in run.stderr and "Traceback" not in run.stderr
    assert "Compaction plan" in run.stdout and "MIG advice unavailable" in run.stdout


# ---------------------------------------------------------------- the planner re-cuts (mig.repartition)


def recut_plan(*extra: dict[str, Any], objects_: list[dict[str, Any]] | None = None, **settings: Any) -> Any:
    from datetime import UTC, datetime

    from compactor.app.plan_document import build_plan
    from compactor.planner.request import PlanRequest
    from compactor.settings.bundles import PlannerSettings
    from tests.plancheck import assert_valid

    snapshot = cluster(*(objects_ if objects_ is not None else objects()), *extra)
    config = PlannerSettings.of(**{"time_limit_seconds": 5, "workers": 2, "repartition": True, **settings})
    plan = build_plan(
        PlanRequest.of(
            snapshot,
            config,
            source="test",
            now=datetime(2026, 1, 1, tzinfo=UTC),
            mig_parted=parse_mig_parted(LAYOUTS, source="gpu-operator/default-mig-parted-config"),
        )
    )
    assert_valid(snapshot, plan, config)
    return snapshot, plan


def test_a_whole_free_node_is_re_cut_for_the_pending_3g_pods() -> None:
    _, plan = recut_plan()
    assert [(r.node, r.from_config, r.to_config) for r in plan.mig_repartition] == [("b", "all-1g.10gb", "all-3g.40gb")]
    assert plan.mig_repartition[0].allocatable == {"nvidia.com/mig-3g.40gb": 4} and plan.mig_repartition[0].cost == 5.0
    assert sorted(p.pod for p in plan.placed_pending) == ["default/wait-0", "default/wait-1", "default/wait-2"]
    assert {p.to_node for p in plan.placed_pending} == {"b"} and plan.moves == []
    assert plan.pending_not_placed == []
    # The after figures see b cut into four 3g.40gb slices (half a GPU each), three of them taken: 0.5 GPU free there.
    (after_b,) = [n for n in plan.after["nodes"] if n["name"] == "b"]
    assert after_b["freeGpuEquivalents"] == 0.5


def test_a_node_is_freed_to_be_re_cut_when_that_is_the_only_way() -> None:
    # b runs one 1g.10gb pod that can join a: moving it frees b, which is then cut for the 3g.40gb pods.
    _, plan = recut_plan(pod("small-b", on="b", mig="1g.10gb"))
    assert [(m.pod, m.from_node, m.to_node) for m in plan.moves] == [("default/small-b", "b", "a")]
    assert [(r.node, r.to_config) for r in plan.mig_repartition] == [("b", "all-3g.40gb")]
    assert {p.to_node for p in plan.placed_pending} == {"b"}


def test_freeing_a_node_to_re_cut_it_is_a_step_of_its_own_beyond_the_balanced_price() -> None:
    # b runs two 1g.10gb pods: 2 moves for its 2 GPUs is dearer than balanced pays for freed GPUs alone, but the
    # pending 3g.40gb pods can run nowhere else: the plan takes the curve's next point and re-cuts b.
    _, plan = recut_plan(pod("small-b", on="b", mig="1g.10gb"), pod("small-b2", on="b", mig="1g.10gb"))
    assert sorted(m.pod for m in plan.moves) == ["default/small-b", "default/small-b2"]
    assert [(r.node, r.to_config) for r in plan.mig_repartition] == [("b", "all-3g.40gb")]
    assert [(p.chosen, p.recuts) for p in plan.frontier] == [(False, 0), (False, 0), (True, 1)]
    # 2 moves of a 1g.10gb slice (0.5 + 0.5 x 1/8 = 0.56 each: 1.12 moves for 2 GPUs, above 0.5 a GPU) + a re-cut at 5
    assert (plan.frontier[2].moves, plan.frontier[2].cost) == (2, 6.12)
    _, plan = recut_plan(
        pod("small-b", on="b", mig="1g.10gb"), pod("small-b2", on="b", mig="1g.10gb"), repartition=False
    )
    assert plan.moves == [] and plan.mig_repartition == []  # without re-cuts, balanced leaves b as it is


def test_a_re_cut_not_worth_its_cost_under_max_moves_is_not_made() -> None:
    # A re-cut costs recut_cost_moves (5 as shipped) against max_moves: priced at 20 under a cap of 10 moves, the pods
    # stay pending.
    _, plan = recut_plan(max_moves=10, recut_cost_moves=20.0)
    assert plan.mig_repartition == [] and plan.placed_pending == []
    _, plan = recut_plan(max_moves=10)
    assert [(r.node, r.to_config) for r in plan.mig_repartition] == [("b", "all-3g.40gb")]


def test_a_node_that_keeps_a_gpu_pod_is_never_re_cut() -> None:
    pinned = [pod("pin-a", on="a", mig="1g.10gb", owner=None), pod("pin-b", on="b", mig="1g.10gb", owner=None)]
    _, plan = recut_plan(*pinned)
    assert plan.mig_repartition == [] and plan.placed_pending == []
    assert {p.pod for p in plan.pending_not_placed} == {"default/wait-0", "default/wait-1", "default/wait-2"}


def test_without_mig_repartition_nothing_is_re_cut() -> None:
    _, plan = recut_plan(repartition=False)
    assert plan.mig_repartition == [] and plan.placed_pending == []


def test_an_idle_node_cut_in_sizes_nobody_asks_for_is_re_cut_to_fit_the_workload() -> None:
    """With mig_rebalance_min_gain, an idle node cut all-3g.40gb while the workload runs 1g.10gb pods is re-cut
    all-1g.10gb: its free GPUs' expected fragmentation against the workload's shapes drops from 100% to 0%."""
    idle = node(
        "idle",
        mig={"3g.40gb": 2},
        physical_gpus=1,
        product=A100_80,
        labels={"nvidia.com/mig.config": "all-3g.40gb", "nvidia.com/mig.capable": "true"},
    )
    world = [sliced("a"), idle, *[pod(f"small-{i}", on="a", mig="1g.10gb", owner=None) for i in range(4)], config_map()]
    _, plan = recut_plan(objects_=world, rebalance_min_gain=0.25)
    assert [(r.node, r.from_config, r.to_config) for r in plan.mig_repartition] == [
        ("idle", "all-3g.40gb", "all-1g.10gb")
    ]
    assert "from 100% to 0%" in plan.mig_repartition[0].reason and plan.placed_pending == []
    _, plan = recut_plan(objects_=world)  # off by default
    assert plan.mig_repartition == []


def test_a_node_whose_mig_devices_a_dra_driver_publishes_is_never_re_cut() -> None:
    """mig-manager's relabel is for device-plugin nodes: NVIDIA's DRA driver destroys partitions it did not create. The
    pending 3g pods here ask through DRA claims, so only the DRA node could host them once cut."""
    from tests.dra_builders import device_class, dra_pod, gpu_slice, mig_claim

    dra_b = [
        node("b", labels={"nvidia.com/mig.config": "all-1g.10gb", "nvidia.com/mig.capable": "true"}),
        gpu_slice("b", gpus=2, product=A100_80, mig={0: ["1g.10gb"] * 7, 1: ["1g.10gb"] * 7}),
    ]
    waiting = [
        obj
        for i in range(2)
        for obj in (
            dra_pod(f"wait-{i}", claim=f"wait-{i}-c", owner="Job/w"),
            mig_claim(f"wait-{i}-c", profile="3g.40gb"),
        )
    ]
    snapshot, plan = recut_plan(
        objects_=[*dra_b, device_class(), device_class("mig.nvidia.com"), *waiting, config_map()]
    )
    assert snapshot.node_by_name()["b"].gpu.physical_gpus == 2  # the DRA node is seen, cut into 1g devices
    assert plan.mig_repartition == []


def test_a_whole_free_node_is_re_cut_rather_than_the_cap_spent_on_moves_that_place_fewer_pods() -> None:
    """A pending 8-GPU pod takes one move (w1 off w onto v) and a re-cut of b priced at the whole cap (20 of 20, the
    price shipped until ADR 0011): the chosen point's move left no room for the re-cut, and the three pending 3g pods b
    would host waited behind a plan placing one pod. Now the re-cut alone is taken, and the 8-GPU pod waits for the
    next run; at the shipped 5 both fit."""
    whole = [
        node("w", gpus=8),
        node("v", gpus=8),
        pod("w1", on="w", gpus=1, owner="ReplicaSet/w1"),
        pod("v1", on="v", gpus=1, owner="ReplicaSet/v1"),
        pod("big", gpus=8, owner="Job/big"),
    ]
    _, plan = recut_plan(*whole, max_moves=20, objective="max-free", min_replicas=1, recut_cost_moves=20.0)
    assert [(r.node, r.to_config) for r in plan.mig_repartition] == [("b", "all-3g.40gb")]
    assert plan.moves == [] and sorted(p.pod for p in plan.placed_pending) == [
        "default/wait-0",
        "default/wait-1",
        "default/wait-2",
    ]
    assert plan.frontier[0].moves == 0 and any(row.recuts == 1 and row.chosen for row in plan.frontier)
    _, more = recut_plan(
        *whole, max_moves=40, objective="max-free", min_replicas=1, recut_cost_moves=20.0
    )  # room for both: the move and the re-cut
    _, shipped = recut_plan(*whole, max_moves=20, objective="max-free", min_replicas=1)  # at 5, both fit under 20
    assert len(shipped.moves) == 1 and [r.node for r in shipped.mig_repartition] == ["b"]
    assert len(more.moves) == 1 and [r.node for r in more.mig_repartition] == ["b"] and len(more.placed_pending) == 4


def _budgeted_recut_plan(objects_: list[dict[str, Any]], budgets: Any, **settings: Any) -> Any:
    from datetime import UTC, datetime

    from compactor.app.plan_document import build_plan
    from compactor.planner.request import PlanRequest
    from compactor.settings.bundles import PlannerSettings

    config = PlannerSettings.of(**{"time_limit_seconds": 5, "workers": 2, "repartition": True, **settings})
    return build_plan(
        PlanRequest.of(
            cluster(*objects_),
            config,
            source="test",
            now=datetime(2026, 1, 1, tzinfo=UTC),
            budgets=budgets,
            mig_parted=parse_mig_parted(LAYOUTS, source="gpu-operator/default-mig-parted-config"),
        )
    )


def test_whole_free_nodes_re_cut_count_against_their_pools_drain_budget() -> None:
    """Three whole-free nodes of one pool cut 1g, twelve pending 3g pods (four a re-cut node hosts): a node being re-cut
    is out of service like a drained one, so caps.max_draining_per_pool 2 lets one run re-cut two of them, and only the
    pods those two host are placed."""
    from compactor.settings.caps import CapsSettings

    world = [
        *[sliced(n) for n in ("a", "b", "c")],
        *[pod(f"wait-{i}", mig="3g.40gb", owner="Job/w") for i in range(12)],
        config_map(),
    ]
    whole = _budgeted_recut_plan(world, CapsSettings())
    assert sorted(r.node for r in whole.mig_repartition) == ["a", "b", "c"] and len(whole.placed_pending) == 12
    plan = _budgeted_recut_plan(world, CapsSettings(max_draining_per_pool=2))
    kept = {r.node for r in plan.mig_repartition}
    assert len(kept) == 2 and len(plan.placed_pending) == 8 and {p.to_node for p in plan.placed_pending} == kept
    assert plan.held_back.startswith("caps.max_draining_per_pool (2 of pool ")


def test_a_re_cut_whose_drain_one_run_cannot_finish_is_left_with_its_moves() -> None:
    """b must lose two 1g pods to be re-cut; a run capped at one eviction takes neither move, so it must not take the
    re-cut either (mig-manager would find GPU pods on b and the node would be left fenced for an operator)."""
    from compactor.planner.rules.budgets import EvictionCap

    _, plan = recut_plan(pod("small-b", on="b", mig="1g.10gb"), pod("small-b2", on="b", mig="1g.10gb"))
    assert [r.node for r in plan.mig_repartition] == ["b"] and len(plan.moves) == 2
    one_run = EvictionCap(1).one_run(plan)
    assert one_run is not None and one_run.moves == [] and one_run.mig_repartition == []
    assert one_run.placed_pending == []

"""Partitionable DRA devices (dynamic MIG, shared counters): what a node offers, what is blocked, what the plan moves.

Each node here has one A100-80GB published as NVIDIA's driver models dynamic MIG (``dra_builders.partition_slices``):
a counter set of 8 memory slices and a device for every placement of every profile, plus the whole GPU.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from compactor.app.plan_document import build_plan
from compactor.cli import main
from compactor.errors import ConfigError
from compactor.metrics.fragmentation import compute_figures
from compactor.model.types import Snapshot
from compactor.planner.plan import CompactionPlan
from compactor.planner.request import PlanRequest
from compactor.planner.rules.movability import Unmovable
from compactor.settings.bundles import PlannerSettings
from compactor.settings.origins import load_settings
from tests.builders import A100_80, cluster, node, pdb, pod
from tests.dra_builders import device_class, dra_pod, mig_claim, partition_node, partition_slices, twin_figures

NOW = datetime(2026, 1, 1, tzinfo=UTC)
RULES = PlannerSettings.of(min_replicas=1, time_limit_seconds=5, deterministic=True)


def slot(n: int, profile: str = "1g.10gb") -> str:
    return f"gpu-0-mig-{profile.replace('.', '-')}-{n}"


def holding(name: str, on: str, device: str, *, profile: str = "1g.10gb") -> list[dict[str, Any]]:
    """A ReplicaSet's pod on ``on`` whose template claim holds ``device``."""
    return [
        dra_pod(name, on=on, claim=f"{name}-mig", owner=f"ReplicaSet/{name}", labels={"app": name}),
        mig_claim(f"{name}-mig", profile=profile, on=on, device=device, for_pods=[name]),
    ]


def waiting(name: str, profile: str = "3g.40gb") -> list[dict[str, Any]]:
    return [dra_pod(name, claim=f"{name}-mig", owner=f"ReplicaSet/{name}"), mig_claim(f"{name}-mig", profile=profile)]


def classes() -> list[dict[str, Any]]:
    return [device_class(), device_class("mig.nvidia.com")]


def scattered(*extra: dict[str, Any]) -> Snapshot:
    """Two GPUs, each with 1g pods at slots 0 and 4: 6 slots free on each, no 3g placement free; a 3g waits."""
    return cluster(
        *partition_node("p-1"),
        *partition_node("p-2"),
        *classes(),
        *holding("a", "p-1", slot(0)),
        *holding("b", "p-1", slot(4)),
        *holding("c", "p-2", slot(0)),
        *holding("d", "p-2", slot(4)),
        *waiting("big"),
        *extra,
    )


def plan_of(snapshot: Snapshot, settings: PlannerSettings = RULES) -> CompactionPlan:
    return build_plan(PlanRequest.of(snapshot, settings, source="test", now=NOW))


def test_a_node_offers_its_held_devices_and_its_free_counters_cut_largest_first() -> None:
    snapshot = scattered()
    p1 = snapshot.node_by_name()["p-1"]
    # held: two 1g; free slots 1-3 and 5-7: a 2g at 2, then 1g at 1, 5 and 6 (slot 7 alone fits no device published)
    assert {r: v for r, v in p1.allocatable.items() if r.startswith("nvidia.com/")} == {
        "nvidia.com/mig-1g.10gb": 5,
        "nvidia.com/mig-2g.20gb": 1,
    }
    assert p1.gpu.physical_gpus == 1 and p1.pool == A100_80
    assert p1.partitions is not None and dict(p1.partitions.held) == {slot(0): "default/a", slot(4): "default/b"}
    pods = {p.name: p for p in snapshot.pods}
    assert pods["a"].partitioned and pods["a"].requests.get("nvidia.com/mig-1g.10gb") == 1
    assert pods["big"].requests.get("nvidia.com/mig-3g.40gb") == 1 and not pods["big"].partitioned


def test_a_whole_free_partitionable_gpu_is_one_whole_free_gpu() -> None:
    snapshot = cluster(*partition_node("p-1", gpus=2), *classes(), *holding("a", "p-1", slot(0)))
    p1 = snapshot.node_by_name()["p-1"]
    assert p1.allocatable.get("nvidia.com/gpu") == 1 and p1.gpu.physical_gpus == 2
    assert compute_figures(snapshot).cluster.whole_free_nodes == 0


def test_the_figures_are_those_of_a_device_plugin_node_cut_the_same_way() -> None:
    dra = cluster(
        *partition_node("p-1"), *classes(), *holding("a", "p-1", slot(0)), *holding("b", "p-1", slot(4)), node("cpu-1")
    )
    twin = cluster(
        node("p-1", mig={"1g.10gb": 5, "2g.20gb": 1}, physical_gpus=1, product=A100_80),
        pod("a", on="p-1", mig="1g.10gb", owner="ReplicaSet/a"),
        pod("b", on="p-1", mig="1g.10gb", owner="ReplicaSet/b"),
        node("cpu-1"),
    )
    assert twin_figures(dra) == twin_figures(twin)


def test_a_3g_blocked_by_scattered_1g_is_blocked_not_unplaceable() -> None:
    figures = compute_figures(scattered())
    (blocked,) = figures.blocked_pending
    assert blocked.pod == "default/big" and "scattered" in blocked.reason and blocked.gpu_equivalents == 0.5
    assert figures.unplaceable_pending == ()


def test_a_pending_pod_first_fit_can_place_is_not_blocked() -> None:
    snapshot = cluster(*partition_node("p-1"), *classes(), *holding("a", "p-1", slot(0)), *waiting("big"))
    assert compute_figures(snapshot).blocked_pending == ()  # 3g at slot 4 is free


def test_more_than_the_partitionable_gpus_have_free_is_unplaceable() -> None:
    snapshot = cluster(*partition_node("p-1"), *classes(), *holding("a", "p-1", slot(0)), *waiting("big", "7g.80gb"))
    figures = compute_figures(snapshot)
    assert [b.pod for b in figures.unplaceable_pending] == ["default/big"] and figures.blocked_pending == ()


def test_the_plan_moves_one_1g_away_and_names_the_devices_first_fit_gives() -> None:
    plan = plan_of(scattered())
    (move,) = plan.moves
    (placement,) = plan.placed_pending
    # ties broken by node name and the allocator's device order: the 1g at slot 0 of p-1 goes to p-2's first free slot
    assert (move.pod, move.from_node, move.to_node, move.devices) == ("default/a", "p-1", "p-2", [slot(1)])
    assert (placement.pod, placement.to_node, placement.devices) == ("default/big", "p-1", [slot(0, "3g.40gb")])
    assert plan.after["blockedDemandGpuEquivalents"] == 0
    after = next(n for n in plan.after["nodes"] if n["name"] == "p-1")
    assert after["free"].get("nvidia.com/mig-3g.40gb", 0) == 0 and after["allocated"]["nvidia.com/mig-3g.40gb"] == 1


def test_a_blocking_pod_that_may_not_move_leaves_the_pending_pod_waiting() -> None:
    snapshot = cluster(
        *partition_node("p-1"),
        *partition_node("p-2"),
        *classes(),
        *holding("a", "p-1", slot(0)),
        *holding("b", "p-1", slot(4)),
        *holding("c", "p-2", slot(0)),
        *holding("d", "p-2", slot(4)),
        *waiting("big"),
        *(pdb(f"{x}-pdb", match={"app": x}, allowed=0) for x in "abcd"),
    )
    plan = plan_of(snapshot)
    assert plan.moves == [] and plan.placed_pending == []


def test_no_move_when_the_moves_are_capped() -> None:
    plan = plan_of(scattered(), RULES.amended(max_moves=0))
    assert plan.moves == [] and plan.placed_pending == []


def test_a_blocking_pod_needs_a_home_on_another_node() -> None:
    """One GPU only: the 1g in the way could only go back to the GPU it leaves, where its replacement could take the
    room back, so nothing moves."""
    snapshot = cluster(
        *partition_node("p-1"),
        *classes(),
        *holding("a", "p-1", slot(0)),
        *holding("b", "p-1", slot(4)),
        *waiting("big"),
    )
    plan = plan_of(snapshot)
    assert plan.moves == [] and plan.placed_pending == []


def test_the_pod_holding_a_partitionable_device_says_why_the_model_keeps_it() -> None:
    plan = plan_of(scattered(*(pdb(f"{x}-pdb", match={"app": x}, allowed=0) for x in "abcd")))
    reasons = plan.explanations["unmovablePods"]
    assert reasons.get(Unmovable.PDB_BLOCKS.value) == 4, reasons
    free = plan_of(cluster(*partition_node("p-1"), *classes(), *holding("a", "p-1", slot(0))))
    assert free.explanations["unmovablePods"] == {Unmovable.PARTITIONED.value: 1}


def test_an_incomplete_pool_counts_nothing_and_says_so() -> None:
    counters, devices = partition_slices("p-1")
    snapshot = cluster(node("p-1"), devices, *classes())
    assert snapshot.node_by_name()["p-1"].gpu.physical_gpus == 0
    assert any("1 of 2 ResourceSlice(s)" in w for w in snapshot.warnings), snapshot.warnings
    del counters


def test_a_device_consuming_counters_no_slice_shares_is_not_counted() -> None:
    counters, devices = partition_slices("p-1")
    counters["spec"]["sharedCounters"] = []
    snapshot = cluster(node("p-1"), counters, devices, *classes())
    assert snapshot.node_by_name()["p-1"].gpu.physical_gpus == 0
    assert any("which no slice of the pool shares" in w for w in snapshot.warnings), snapshot.warnings


def other_driver(tmp_path: Path) -> tuple[str, str]:
    """A snapshot of one node whose 4 GPUs another driver publishes (attribute ``kind: accelerator``), and a config
    describing that driver."""
    devices = [
        {"name": f"acc-{i}", "attributes": {"kind": {"string": "accelerator"}, "serial": {"string": f"S{i}"}}}
        for i in range(4)
    ]
    resource_slice = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "n-1-acc"},
        "spec": {"driver": "acc.example.com", "nodeName": "n-1", "pool": {"name": "n-1"}, "devices": devices},
    }
    snapshot = tmp_path / "cluster.json"
    snapshot.write_text(json.dumps({"kind": "List", "items": [node("n-1"), resource_slice]}), encoding="utf-8")
    config = tmp_path / "compactor.yaml"
    config.write_text(
        "dra:\n  drivers:\n    - driver: acc.example.com\n      type_attribute: kind\n"
        "      gpu_types: [accelerator]\n      uuid_attribute: serial\n",
        encoding="utf-8",
    )
    return str(snapshot), str(config)


def test_another_driver_described_in_the_config_is_counted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot, config = other_driver(tmp_path)
    assert main(["report", "--snapshot", snapshot, "--output", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["figures"]["cluster"]["physicalGpus"] == 0  # NVIDIA's only: not counted
    assert main(["report", "--snapshot", snapshot, "--config", config, "--output", "json"]) == 0
    cluster_figures = json.loads(capsys.readouterr().out)["figures"]["cluster"]
    assert cluster_figures["physicalGpus"] == 4 and cluster_figures["wholeFreeNodes"] == 1


def test_a_driver_described_twice_is_refused_naming_it(tmp_path: Path) -> None:
    config = tmp_path / "compactor.yaml"
    config.write_text("dra:\n  drivers:\n    - driver: a.example.com\n    - driver: a.example.com\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"dra\.drivers.*a\.example\.com is described more than once"):
        load_settings(str(config))


def two_half_used() -> Snapshot:
    """Two GPUs with one 1g pod each: either could be freed by moving its pod next to the other's."""
    return cluster(
        *partition_node("p-1"),
        *partition_node("p-2"),
        *classes(),
        *holding("a", "p-1", slot(0)),
        *holding("c", "p-2", slot(0)),
    )


def test_max_free_drains_a_partitionable_node_into_a_gpu_in_use() -> None:
    plan = plan_of(two_half_used(), RULES.amended(objective="max-free"))
    (move,) = plan.moves
    assert (move.pod, move.from_node, move.to_node, move.devices) == ("default/a", "p-1", "p-2", [slot(1)])
    assert plan.freed_nodes == ["p-1"] and plan.freed_gpus == 1
    assert plan.after["cluster"]["wholeFreePhysicalGpus"] == 1


def test_balanced_does_not_drain_when_the_moves_cost_more_than_the_gpus_are_worth() -> None:
    plan = plan_of(two_half_used())  # a 1g move costs 0.56, above balanced_moves_per_gpu (0.5) for the 1 GPU freed
    assert plan.moves == []
    cheap = plan_of(two_half_used(), RULES.amended(balanced_moves_per_gpu=1.0))
    assert [m.pod for m in cheap.moves] == ["default/a"]


def test_pending_only_never_drains() -> None:
    assert plan_of(two_half_used(), RULES.amended(objective="pending-only")).moves == []


def test_a_pod_is_never_drained_onto_a_whole_free_gpu() -> None:
    snapshot = cluster(*partition_node("p-1"), *partition_node("p-2"), *classes(), *holding("a", "p-1", slot(0)))
    assert plan_of(snapshot, RULES.amended(objective="max-free")).moves == []

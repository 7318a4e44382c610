"""Fragmentation figures on small hand-computed clusters.

Covers: reference shapes (grouping, coverage cut, cap, ties, configured shapes),
per-node figures (whole GPUs, MIG mixed, time-slicing, CPU-only, overcommit, pod
slots), the headline and FGD rates and how they differ, aggregates and pools,
headroom, pending pods (blocked, unplaceable, taints), the JSON form, and the
worked example of docs/metrics.md.
"""

from __future__ import annotations

import json

import pytest

from compactor.metrics.figure_types import Figures, NodeFigures
from compactor.metrics.figures_json import figures_to_dict
from compactor.metrics.fragmentation import compute_figures
from compactor.model.fragments import copies_that_fit
from compactor.model.resources import Resources
from compactor.model.scheduling import Ineligible
from compactor.model.shapes import CONFIG, WORKLOAD, reference_shapes, requests_label
from compactor.model.types import Snapshot
from compactor.render.report import render_report
from tests.builders import A100_40, A100_80, cluster, node, pod

GiB = 1 << 30
GPU = "nvidia.com/gpu"
MIG_3G = "nvidia.com/mig-3g.20gb"
MIG_1G = "nvidia.com/mig-1g.5gb"


def shape(**amounts: int) -> dict[str, int]:
    """``shape(gpu=2, cpu=4000)``: keyword names for the usual resources."""
    names = {"gpu": GPU, "mig3g": MIG_3G, "mig1g": MIG_1G, "cpu": "cpu", "memory": "memory"}
    return {names[k]: v for k, v in amounts.items()}


def node_named(figures: Figures, name: str) -> NodeFigures:
    return next(n for n in figures.nodes if n.name == name)


# ---------------------------------------------------------------------------
# The worked example of docs/metrics.md


def docs_example_cluster() -> Snapshot:
    return cluster(
        node("gpu-a", gpus=4, product=A100_80),
        node("mig-b", mig={"3g.20gb": 2}, product=A100_40),
        pod("train-0", on="gpu-a", gpus=1, cpu="8", memory="64Gi"),
        pod("train-1", gpus=2, cpu="8", memory="64Gi"),
        pod("infer-0", on="mig-b", mig="3g.20gb", cpu="4", memory="16Gi"),
    )


def test_the_docs_worked_example_gives_the_documented_numbers() -> None:
    snapshot = docs_example_cluster()
    figures = compute_figures(snapshot)
    doc = figures_to_dict(figures)

    assert [s["label"] for s in doc["shapes"]] == [
        "nvidia.com/gpu=1 cpu=8 memory=64Gi",
        "nvidia.com/gpu=2 cpu=8 memory=64Gi",
        "nvidia.com/mig-3g.20gb=1 cpu=4 memory=16Gi",
    ]
    assert [s["weight"] for s in doc["shapes"]] == [0.3333, 0.3333, 0.3333]
    gpu_a, mig_b = doc["nodes"]
    assert (gpu_a["freeGpuEquivalents"], gpu_a["fragmentedGpuEquivalents"], gpu_a["fgdFragmentedGpuEquivalents"]) == (
        3.0,
        1.3333,
        1.0,
    )
    assert (mig_b["freeGpuEquivalents"], mig_b["fragmentedGpuEquivalents"], mig_b["fgdFragmentedGpuEquivalents"]) == (
        0.5,
        0.3333,
        0.3333,
    )
    assert gpu_a["free"] == {"cpu": 56000, "ephemeral-storage": 100 * GiB, "memory": 448 * GiB, GPU: 3, "pods": 109}
    c = doc["cluster"]
    assert (
        c["freeGpuEquivalents"],
        c["allocatableGpuEquivalents"],
        c["allocatedGpuEquivalents"],
        c["gpuUtilisation"],
    ) == (3.5, 5.0, 1.5, 0.3)
    assert (c["fragmentedGpuEquivalents"], c["fragmentationRate"]) == (1.6667, 0.4762)
    assert (c["fgdFragmentedGpuEquivalents"], c["fgdFragmentationRate"]) == (1.3333, 0.381)
    assert (c["wholeFreeNodes"], c["busyFreeGpuEquivalents"]) == (0, 3.5)
    assert (c["strandedGpuEquivalents"], c["strandedShare"], doc["blockedDemandGpuEquivalents"]) == (0.0, 0.0, 0.0)
    assert (c["migIdle"], c["migTotal"], c["migIdleRate"]) == ({"3g.20gb": 1}, {"3g.20gb": 2}, 0.5)
    assert [(h["copies"], h["nodes"]) for h in doc["headroom"]] == [(3, 1), (1, 1), (1, 1)]
    assert (doc["pendingGpuPods"], doc["blockedPending"], doc["unplaceablePending"]) == (1, [], [])
    pools = {p["name"]: p for p in doc["pools"]}
    assert pools["NVIDIA-A100-SXM4-40GB"]["fragmentationRate"] == 0.6667
    assert (
        pools["NVIDIA-A100-SXM4-80GB"]["fragmentationRate"],
        pools["NVIDIA-A100-SXM4-80GB"]["fgdFragmentationRate"],
    ) == (0.4444, 0.3333)


# ---------------------------------------------------------------------------
# Reference shapes


def test_workload_shapes_group_identical_requests_and_weigh_them_by_frequency() -> None:
    snapshot = cluster(
        node("a", gpus=8),
        *(pod(f"big-{i}", on="a", gpus=2, cpu="4") for i in range(3)),
        pod("small-0", on="a", gpus=1),
        pod("small-1", gpus=1),  # pending pods are demand too
    )
    shapes = reference_shapes(snapshot)
    assert [(s.label, s.pods, s.source) for s in shapes] == [
        ("nvidia.com/gpu=2 cpu=4 memory=1Gi", 3, WORKLOAD),
        ("nvidia.com/gpu=1 cpu=1 memory=1Gi", 2, WORKLOAD),
    ]
    assert [s.weight for s in shapes] == pytest.approx([0.6, 0.4])
    assert "pods" not in shapes[0].requests


def test_workload_shapes_stop_once_they_cover_the_coverage_share_of_gpu_pods() -> None:
    snapshot = cluster(
        node("a", gpus=8, mig={"1g.5gb": 7}),
        *(pod(f"one-{i}", on="a", gpus=1) for i in range(6)),
        *(pod(f"mig-{i}", on="a", mig="1g.5gb") for i in range(3)),
        pod("two", on="a", gpus=2),
    )
    kept = reference_shapes(snapshot, coverage=0.9)
    assert [s.pods for s in kept] == [6, 3]  # 9 of 10 pods reach 90%: the rare shape is cut
    assert [s.weight for s in kept] == pytest.approx([6 / 9, 3 / 9])
    assert len(reference_shapes(snapshot, coverage=0.95)) == 3
    assert len(reference_shapes(snapshot, coverage=0.5)) == 1


def test_workload_shapes_are_capped_at_max_shapes_and_renormalised() -> None:
    snapshot = cluster(node("a", gpus=8), *(pod(f"p{i}", on="a", gpus=1, cpu=str(i + 1)) for i in range(4)))
    shapes = reference_shapes(snapshot, max_shapes=2)
    assert len(shapes) == 2
    assert sum(s.weight for s in shapes) == pytest.approx(1.0)


def test_equally_frequent_shapes_are_ordered_by_label_whatever_the_pod_order() -> None:
    pods = [pod("x", on="a", gpus=2), pod("y", on="a", gpus=1), pod("z", on="a", mig="1g.5gb")]
    first = reference_shapes(cluster(node("a", gpus=4, mig={"1g.5gb": 1}), *pods))
    second = reference_shapes(cluster(node("a", gpus=4, mig={"1g.5gb": 1}), *reversed(pods)))
    assert [s.label for s in first] == [s.label for s in second] == sorted(s.label for s in first)


def test_workload_shapes_leave_out_cpu_only_finished_and_gated_pods() -> None:
    gated = pod("gated", gpus=4)
    gated["spec"]["schedulingGates"] = [{"name": "wait"}]
    snapshot = cluster(
        node("a", gpus=8),
        pod("web", on="a"),
        pod("done", on="a", gpus=2, phase="Succeeded"),
        gated,
        pod("train", on="a", gpus=1),
    )
    assert [s.label for s in reference_shapes(snapshot)] == ["nvidia.com/gpu=1 cpu=1 memory=1Gi"]


def test_configured_shapes_get_equal_weight_and_a_repeated_shape_counts_twice() -> None:
    snapshot = cluster(node("a", gpus=8), pod("p", on="a", gpus=1))
    shapes = reference_shapes(
        snapshot, configured=[shape(gpu=4), shape(mig3g=1), shape(gpu=4, cpu=0), {GPU: 1, "pods": 1}]
    )
    assert [(s.label, s.weight, s.source) for s in shapes] == [
        ("nvidia.com/gpu=4", 0.5, CONFIG),
        ("nvidia.com/mig-3g.20gb=1", 0.25, CONFIG),
        ("nvidia.com/gpu=1", 0.25, CONFIG),
    ]


def test_shape_labels_list_gpu_resources_first_then_cpu_memory_and_the_rest() -> None:
    label = requests_label({"memory": 16 * GiB, "cpu": 4500, "example.com/fpga": 1, GPU: 2, "pods": 1})
    assert label == "nvidia.com/gpu=2 cpu=4500m memory=16Gi example.com/fpga=1"


def test_a_cluster_without_gpu_pods_has_no_shapes_and_undefined_rates() -> None:
    figures = compute_figures(cluster(node("a", gpus=4), node("c"), pod("web", on="c")))
    assert figures.shapes == ()
    assert figures.cluster.free_gpus == 4
    assert figures.cluster.fragmentation_rate is None
    assert figures.cluster.fgd_fragmentation_rate is None
    assert any("undefined" in w for w in figures.warnings)


# ---------------------------------------------------------------------------
# Headline against FGD


def test_three_free_gpus_against_a_two_gpu_shape_leave_one_fragmented_gpu_but_no_fgd_fragment() -> None:
    snapshot = cluster(node("a", gpus=4), pod("p", on="a", gpus=1))
    figures = compute_figures(snapshot, reference_shapes(snapshot, configured=[shape(gpu=2)]))
    a = node_named(figures, "a")
    assert (a.free_gpus, a.fragmented_gpus, a.fgd_fragmented_gpus) == (3, 1, 0)
    assert figures.cluster.fragmentation_rate == pytest.approx(1 / 3)
    assert figures.cluster.fgd_fragmentation_rate == 0


def test_copies_limited_by_cpu_leave_free_gpus_fragmented_in_the_headline_only() -> None:
    snapshot = cluster(node("a", gpus=4, cpu="10"), pod("p", on="a", cpu="2"))
    figures = compute_figures(snapshot, reference_shapes(snapshot, configured=[shape(gpu=1, cpu=8000)]))
    a = node_named(figures, "a")
    assert (a.free_gpus, a.fragmented_gpus, a.fgd_fragmented_gpus) == (4, 3, 0)
    assert figures.headroom[0].copies == 1


def test_a_shape_that_does_not_fit_at_all_makes_every_free_gpu_a_fragment_in_both() -> None:
    snapshot = cluster(node("a", gpus=4, cpu="4"), pod("p", on="a", gpus=1))
    figures = compute_figures(snapshot, reference_shapes(snapshot, configured=[shape(gpu=1, cpu=8000)]))
    a = node_named(figures, "a")
    assert (a.fragmented_gpus, a.fgd_fragmented_gpus) == (3, 3)


def test_a_configured_cpu_only_shape_counts_all_free_gpu_in_fgd_and_nothing_in_the_headline() -> None:
    snapshot = cluster(node("a", gpus=2), pod("p", on="a", gpus=1))
    figures = compute_figures(snapshot, reference_shapes(snapshot, configured=[shape(gpu=1), shape(cpu=1000)]))
    a = node_named(figures, "a")
    assert a.fragmented_gpus == 0  # the GPU shape fills the free GPU; the CPU shape does not count
    assert a.fgd_fragmented_gpus == pytest.approx(0.5)  # half the weight sees the free GPU as fragment
    assert any("requests no GPU" in w for w in figures.warnings)


def test_copies_that_fit_take_the_scarcest_resource_and_the_pod_slots() -> None:
    items = ((GPU, 2), ("cpu", 4000))
    assert copies_that_fit(items, {GPU: 7, "cpu": 64000}) == 3
    assert copies_that_fit(items, {GPU: 7, "cpu": 5000}) == 1
    assert copies_that_fit(items, {GPU: 1, "cpu": 64000}) == 0
    assert copies_that_fit(items, {"cpu": 64000}) == 0
    assert copies_that_fit(items, {GPU: 8, "cpu": 64000}, pod_slots=2) == 2


def test_a_node_without_free_pod_slots_takes_no_copy() -> None:
    snapshot = cluster(node("a", gpus=4, pods=1), pod("p", on="a", gpus=1))
    figures = compute_figures(snapshot)
    a = node_named(figures, "a")
    assert (a.free_gpus, a.fragmented_gpus, a.fgd_fragmented_gpus) == (3, 3, 3)
    assert figures.headroom[0].copies == 0


# ---------------------------------------------------------------------------
# MIG, time-slicing, CPU-only, overcommit


def test_a_mixed_mig_node_counts_idle_instances_per_profile_in_gpu_equivalents() -> None:
    snapshot = cluster(
        node("m", mig={"1g.5gb": 4, "3g.20gb": 1}, product=A100_40),
        pod("small", on="m", mig="1g.5gb"),
    )
    figures = compute_figures(snapshot, reference_shapes(snapshot, configured=[shape(mig1g=1)]))
    m = node_named(figures, "m")
    assert m.gpus == 1
    assert m.mig_idle == {"1g.5gb": 3, "3g.20gb": 1}
    assert m.mig_total == {"1g.5gb": 4, "3g.20gb": 1}
    assert m.free_gpus == pytest.approx(3 / 8 + 4 / 8)
    # Three more 1g.5gb fit (3/8 usable); the idle 3g.20gb (4/8) serves no 1g.5gb request.
    assert m.fragmented_gpus == pytest.approx(0.5)
    assert m.fgd_fragmented_gpus == pytest.approx(0.5)
    assert figures.cluster.mig_idle_rate == pytest.approx(0.875)


def test_a_whole_gpu_shape_cannot_use_idle_mig_instances_and_a_mig_shape_cannot_use_a_whole_gpu() -> None:
    snapshot = cluster(node("mixed", gpus=1, mig={"3g.20gb": 2}, product=A100_40))
    whole, mig = (
        node_named(compute_figures(snapshot, reference_shapes(snapshot, configured=[s])), "mixed")
        for s in (shape(gpu=1), shape(mig3g=1))
    )
    assert whole.free_gpus == mig.free_gpus == 2
    assert (whole.fragmented_gpus, whole.fgd_fragmented_gpus) == (1, 1)  # the two 3g.20gb halves
    assert (mig.fragmented_gpus, mig.fgd_fragmented_gpus) == (1, 1)  # the whole GPU
    assert whole.whole_free and whole.busy_free_gpus == 0


def test_time_sliced_replicas_count_as_a_fraction_of_a_gpu() -> None:
    snapshot = cluster(node("ts", gpus=2, replicas=4), *(pod(f"p{i}", on="ts", gpus=1) for i in range(3)))
    figures = compute_figures(snapshot, reference_shapes(snapshot, configured=[shape(gpu=2)]))
    ts = node_named(figures, "ts")
    assert ts.gpus == 2
    assert ts.allocatable_gpus == 2
    assert ts.allocated_gpus == pytest.approx(0.75)
    assert ts.free_gpus == pytest.approx(1.25)  # 5 free replicas of 1/4
    assert ts.fragmented_gpus == pytest.approx(0.25)  # two 2-replica copies, one replica left over
    assert ts.fgd_fragmented_gpus == 0  # every free replica is a usable device
    assert figures.headroom[0].copies == 2


def test_cpu_only_nodes_have_no_gpu_figures_and_do_not_dilute_the_rates() -> None:
    snapshot = cluster(node("c", cpu="32"), node("g", gpus=2), pod("web", on="c", cpu="8"), pod("t", on="g", gpus=1))
    figures = compute_figures(snapshot, reference_shapes(snapshot, configured=[shape(gpu=2)]))
    c = node_named(figures, "c")
    assert (c.gpus, c.free_gpus, c.fragmented_gpus, c.whole_free, c.runs_gpu_pods) == (0, 0, 0, False, False)
    assert c.free["cpu"] == 24000
    assert (figures.cluster.node_count, figures.cluster.gpu_node_count) == (2, 1)
    assert figures.cluster.fragmentation_rate == 1.0
    cpu_pool = next(p for p in figures.pools if p.name == "cpu-only")
    assert (cpu_pool.fragmentation_rate, cpu_pool.gpu_utilisation) == (None, None)


def test_an_overcommitted_node_shows_negative_free_and_counts_no_free_gpu() -> None:
    snapshot = cluster(node("a", gpus=2), node("b", gpus=2), *(pod(f"p{i}", on="a", gpus=1) for i in range(3)))
    figures = compute_figures(snapshot)
    a = node_named(figures, "a")
    assert a.free[GPU] == -1
    assert a.overcommitted == (GPU,)
    assert (a.allocated_gpus, a.free_gpus, a.busy_free_gpus, a.stranded_gpus) == (3, 0, 0, 0)
    assert figures.cluster.free[GPU] == 1  # honest sum: -1 on a, 2 on b
    assert figures.cluster.free_gpus == 2  # b's two GPUs; a's deficit does not cancel them
    assert figures.cluster.overcommitted_nodes == 1
    assert figures.cluster.gpu_utilisation == pytest.approx(0.5)
    assert any("a (nvidia.com/gpu 3 > 2)" in w for w in figures.warnings)


def test_whole_free_and_busy_node_free_gpus_add_up_to_the_free_gpus() -> None:
    snapshot = cluster(node("idle", gpus=8), node("busy", gpus=8), pod("p", on="busy", gpus=3), pod("w", on="idle"))
    c = compute_figures(snapshot).cluster
    assert (c.whole_free_nodes, c.whole_free_gpus, c.busy_free_gpus, c.free_gpus) == (1, 8, 5, 13)


def test_cordoned_and_not_ready_nodes_count_in_fragmentation_but_not_in_headroom() -> None:
    snapshot = cluster(
        node("ok", gpus=2),
        node("cordoned", gpus=2, unschedulable=True),
        node("down", gpus=2, ready=False),
        pod("p", on="ok", gpus=1),
    )
    figures = compute_figures(snapshot)
    assert figures.cluster.free_gpus == 5
    assert figures.cluster.unavailable_free_gpus == 4
    assert (figures.headroom[0].copies, figures.headroom[0].nodes) == (1, 1)
    assert not node_named(figures, "cordoned").schedulable
    assert not node_named(figures, "down").ready


def test_pool_figures_add_up_to_the_cluster() -> None:
    figures = compute_figures(docs_example_cluster())
    assert sum(p.node_count for p in figures.pools) == figures.cluster.node_count
    assert sum(p.free_gpus for p in figures.pools) == pytest.approx(figures.cluster.free_gpus)
    assert [p.name for p in figures.pools] == sorted(p.name for p in figures.pools)


# ---------------------------------------------------------------------------
# Pending pods


def test_a_pending_pod_that_fits_the_total_but_no_single_node_is_blocked() -> None:
    snapshot = cluster(
        node("a", gpus=4),
        node("b", gpus=4),
        pod("a0", on="a", gpus=2),
        pod("b0", on="b", gpus=2),
        pod("wide", gpus=4, priority=10),
    )
    figures = compute_figures(snapshot)
    assert figures.pending_gpu_pods == 1
    (blocked,) = figures.blocked_pending
    assert (blocked.pod, blocked.priority, blocked.requests) == (
        "default/wide",
        10,
        "nvidia.com/gpu=4 cpu=1 memory=1Gi",
    )
    assert "at most 2 nvidia.com/gpu free on one node, needs 4" in blocked.reason
    assert figures.unplaceable_pending == ()


def test_a_pending_pod_whose_only_node_with_room_is_tainted_is_blocked_by_the_taint() -> None:
    taint = {"key": "dedicated", "value": "training", "effect": "NoSchedule"}
    nodes = (node("tainted", gpus=4, taints=[taint]), node("plain", gpus=2))
    figures = compute_figures(cluster(*nodes, pod("job", gpus=3)))
    (blocked,) = figures.blocked_pending
    assert Ineligible.TAINT.value in blocked.reason
    tolerated = pod("job", gpus=3, tolerations=[{"key": "dedicated", "operator": "Exists"}])
    assert compute_figures(cluster(*nodes, tolerated)).blocked_pending == ()


def test_a_pod_whose_node_lacks_cpu_rather_than_gpus_is_blocked_with_that_resource_named() -> None:
    snapshot = cluster(
        node("a", gpus=4, cpu="8"),
        node("b", gpus=0, cpu="64"),
        pod("a0", on="a", cpu="6"),
        pod("job", gpus=2, cpu="16"),
    )
    (blocked,) = compute_figures(snapshot).blocked_pending
    assert "lack cpu" in blocked.reason


def test_a_pending_pod_larger_than_the_free_capacity_is_unplaceable_not_blocked() -> None:
    snapshot = cluster(node("a", gpus=4), node("b", gpus=4, unschedulable=True), pod("huge", gpus=6))
    figures = compute_figures(snapshot)
    assert figures.blocked_pending == ()
    (unplaceable,) = figures.unplaceable_pending
    assert "needs 6 nvidia.com/gpu" in unplaceable.reason and "4 free in total" in unplaceable.reason


def test_pending_pods_that_fit_a_node_cpu_only_pods_and_gated_pods_are_not_listed() -> None:
    gated = pod("gated", gpus=8)
    gated["spec"]["schedulingGates"] = [{"name": "wait"}]
    snapshot = cluster(node("a", gpus=4), pod("fits", gpus=2), pod("web", cpu="100"), gated)
    figures = compute_figures(snapshot)
    assert figures.pending_gpu_pods == 1
    assert figures.blocked_pending == figures.unplaceable_pending == ()


def test_blocked_pods_are_listed_by_priority_then_name() -> None:
    snapshot = cluster(
        node("a", gpus=2),
        node("b", gpus=2),
        pod("low-b", gpus=3, priority=0),
        pod("high", gpus=3, priority=100),
        pod("low-a", gpus=4, priority=0),
    )
    assert [b.pod for b in compute_figures(snapshot).blocked_pending] == [
        "default/high",
        "default/low-a",
        "default/low-b",
    ]


# ---------------------------------------------------------------------------
# JSON form


def test_figures_to_dict_is_json_with_camel_case_keys_integer_amounts_and_rounded_floats() -> None:
    doc = figures_to_dict(compute_figures(docs_example_cluster()))
    assert json.loads(json.dumps(doc)) == doc
    assert set(doc) == {
        "cluster",
        "pools",
        "nodes",
        "shapes",
        "headroom",
        "blockedPending",
        "unplaceablePending",
        "pendingGpuPods",
        "warnings",
        "blockedDemandGpuEquivalents",
        "shapesInUse",
    }
    assert {
        "fragmentationRate",
        "fgdFragmentationRate",
        "migIdleRate",
        "wholeFreeGpuEquivalents",
        "busyFreeGpuEquivalents",
        "strandedGpuEquivalents",
        "strandedShare",
        "wholeFreePhysicalGpus",
    } <= set(doc["cluster"])
    assert isinstance(doc["cluster"]["allocatable"]["memory"], int)
    assert doc["shapes"][0]["requests"] == {"cpu": 8000, "memory": 64 * GiB, GPU: 1}


def test_resources_given_to_reference_shapes_may_be_resources_objects() -> None:
    snapshot = cluster(node("a", gpus=2))
    (s,) = reference_shapes(snapshot, configured=[Resources({GPU: 1})])
    assert s.requests == {GPU: 1}


def test_an_empty_snapshot_gives_zero_figures_and_no_rates() -> None:
    figures = compute_figures(cluster())
    assert (figures.cluster.node_count, figures.cluster.free_gpus, figures.pools, figures.nodes) == (0, 0, (), ())
    assert (figures.cluster.fragmentation_rate, figures.cluster.gpu_utilisation, figures.cluster.mig_idle_rate) == (
        None,
        None,
        None,
    )


# ---------------------------------------------------------------------------
# Headline figures: stranded capacity, blocked demand (docs/metrics.md, "Headline figures")


def test_stranded_capacity_is_what_no_request_shape_in_use_can_take() -> None:
    # The only shape in use asks 2 GPUs and 4 CPUs. odd: 1 GPU left (no shape asks 1); cpu-bound: 2 GPUs left but no CPU;
    # roomy: 6 GPUs, three 2-GPU copies fit; idle: whole-free.
    snapshot = cluster(
        node("odd", gpus=3),
        node("cpu-bound", gpus=8, cpu="12"),
        node("roomy", gpus=8),
        node("idle", gpus=8),
        pod("a", on="odd", gpus=2, cpu="4"),
        *(pod(f"b{i}", on="cpu-bound", gpus=2, cpu="4") for i in range(3)),
        pod("c", on="roomy", gpus=2, cpu="4"),
    )
    figures = compute_figures(snapshot)
    assert [node_named(figures, n).stranded_gpus for n in ("odd", "cpu-bound", "roomy", "idle")] == [1, 2, 0, 0]
    c = figures.cluster
    assert (c.stranded_gpus, c.free_gpus) == (3, 17)
    assert c.stranded_share == pytest.approx(3 / 17)
    assert (c.whole_free_physical_gpus, c.busy_free_gpus) == (8, 9)


def test_idle_mig_slices_of_a_profile_no_pod_asks_for_are_stranded_and_each_profile_counts_on_its_own() -> None:
    # 1g.5gb is in use (one pod), 3g.20gb is not: the idle 3g.20gb (4/8 of a GPU) is stranded, the 3 idle 1g.5gb are not.
    snapshot = cluster(node("m", mig={"1g.5gb": 4, "3g.20gb": 1}, product=A100_40), pod("s", on="m", mig="1g.5gb"))
    m = node_named(compute_figures(snapshot), "m")
    assert m.free_gpus == pytest.approx(3 / 8 + 4 / 8)
    assert m.stranded_gpus == pytest.approx(4 / 8)
    assert m.stranded_units == {"nvidia.com/mig-3g.20gb": 1}


def test_a_shape_one_pod_asks_is_in_use_though_the_reference_cut_leaves_it_out() -> None:
    """Issue 45, item 2: only the top ``metrics.max_shapes`` shapes counted as "in use", so the idle 1g.5gb slices of a
    MIG node were "stranded" and the node "limited" by "no shape asks nvidia.com/mig-1g.5gb" while a pod asked it. With
    the reference cut to one shape (the 1-GPU pods, the most frequent) the slices are still in use; the report says it
    shows 1 of the 2 shapes the pods ask."""
    snapshot = cluster(
        node("g", gpus=8),
        node("m", mig={"1g.5gb": 7}, product=A100_40),
        *(pod(f"one-{i}", on="g", gpus=1) for i in range(3)),
        pod("slice", on="m", mig="1g.5gb"),
    )
    shapes = reference_shapes(snapshot, max_shapes=1)
    assert [s.label for s in shapes] == ["nvidia.com/gpu=1 cpu=1 memory=1Gi"]
    figures = compute_figures(snapshot, shapes)
    m = node_named(figures, "m")
    assert (m.stranded_gpus, m.stranded_units) == (0, {})
    assert m.limited_by == "75% of GPU requests need nvidia.com/gpu: none free"  # not "no shape asks" its slices
    assert figures.shapes_in_use == 2
    text = render_report(figures, snapshot, "text", width=1000)
    assert "The 1 most frequent of the 2 GPU request shapes the pods ask" in text
    assert "no shape asks" not in text
    # configured shapes are the operator's word for what is in use: the slices no configured shape asks are stranded
    configured = compute_figures(snapshot, reference_shapes(snapshot, configured=[{"nvidia.com/gpu": 1}]))
    assert node_named(configured, "m").stranded_units == {"nvidia.com/mig-1g.5gb": 6}


def test_pods_each_asking_a_request_of_their_own_cannot_make_judging_every_node_cost_nodes_times_pods() -> None:
    """A tenant can give each pod a request of its own (here 300 distinct CPU requests): the shapes judged are the most
    frequent ``MAX_JUDGED_SHAPES``, and the report says it judged that many, not all."""
    from compactor.model.shapes import MAX_JUDGED_SHAPES

    snapshot = cluster(
        node("g", gpus=8, cpu="512"),
        pod("common-a", on="g", gpus=1, cpu="1"),
        pod("common-b", on="g", gpus=1, cpu="1"),
        *(pod(f"own-{i}", gpus=1, cpu=f"{1000 + i}m") for i in range(300)),
    )
    figures = compute_figures(snapshot)
    assert figures.shapes_in_use == MAX_JUDGED_SHAPES
    text = render_report(figures, snapshot, "text", width=1000)
    assert "GPU request shapes the pods ask" in text and f"judged against the {MAX_JUDGED_SHAPES} most frequent" in text


def test_without_a_gpu_shape_nothing_is_called_stranded_and_the_share_is_undefined() -> None:
    figures = compute_figures(cluster(node("g", gpus=8), node("c"), pod("web", on="c", cpu="2")))
    assert figures.cluster.stranded_gpus == 0
    assert figures.cluster.stranded_share is None


def test_blocked_demand_sums_the_gpu_capacity_blocked_pending_pods_ask_for() -> None:
    # 4 + 4 GPUs free on two nodes: the 8-GPU pod and the 6-GPU pod are blocked (14 GPUs asked), the 2-GPU one fits and
    # the 16-GPU one is larger than all the free capacity (unplaceable, not blocked).
    snapshot = cluster(
        node("a", gpus=8),
        node("b", gpus=8),
        pod("x", on="a", gpus=4),
        pod("y", on="b", gpus=4),
        pod("big", gpus=8),
        pod("mid", gpus=6),
        pod("small", gpus=2),
        pod("huge", gpus=16),
    )
    figures = compute_figures(snapshot)
    assert sorted(b.pod.split("/")[1] for b in figures.blocked_pending) == ["big", "mid"]
    assert figures.blocked_demand_gpus == 14
    assert figures_to_dict(figures)["blockedDemandGpuEquivalents"] == 14


def test_each_fragmented_node_names_what_limits_it() -> None:
    # The only shape asks 2 GPUs and 4 CPUs. cpu-bound has 2 GPUs but no CPU left; odd has 1 GPU left; mig has an idle
    # 3g.20gb no pod asks for; roomy has nothing fragmented.
    snapshot = cluster(
        node("odd", gpus=3),
        node("cpu-bound", gpus=8, cpu="12"),
        node("roomy", gpus=8),
        node("mig", mig={"3g.20gb": 2}, product=A100_40),
        pod("a", on="odd", gpus=2, cpu="4"),
        *(pod(f"b{i}", on="cpu-bound", gpus=2, cpu="4") for i in range(3)),
        pod("c", on="roomy", gpus=2, cpu="4"),
    )
    figures = compute_figures(snapshot, reference_shapes(snapshot, configured=[shape(gpu=2, cpu=4000)]))
    limits = {n.name: n.limited_by for n in figures.nodes}
    assert limits == {
        "odd": "1 nvidia.com/gpu left, the shape asks 2",
        "cpu-bound": "cpu",
        "roomy": "",
        "mig": "no shape asks nvidia.com/mig-3g.20gb",
    }
    assert "Limited by" in render_report(figures, snapshot, "text")


def test_a_node_whose_free_gpus_no_popular_request_can_use_says_which_requests_find_none() -> None:
    snapshot = cluster(
        node("plain", gpus=8),
        node("m", mig={"1g.5gb": 7}, product=A100_40),
        pod("p", on="plain", gpus=1),
        *(pod(f"s{i}", on="m", mig="1g.5gb") for i in range(3)),
    )
    limits = {n.name: n.limited_by for n in compute_figures(snapshot).nodes}
    assert limits["plain"] == "75% of GPU requests need nvidia.com/mig-1g.5gb: none free"

"""A node's GPU picture: physical GPUs, MIG, time-slicing, pools, and the MIG catalog.

Covers: whole GPUs from GFD labels (``nvidia.com/gpu.count``/``gpu.product``) and
from allocatable alone; MIG mixed strategy (A100-40GB ``all-balanced`` and
``all-1g.5gb``), the ``1g.10gb`` ambiguity resolved by the product label, the single
strategy (product ``...-MIG-1g.5gb``), time-slicing of whole GPUs and of MIG devices,
unknown MIG profiles kept as extended resources with a warning, CPU-only nodes,
pools, product-name matching, and the catalog geometry against
``../shared/data/nvidia-mig/mig-geometry.json`` (or the same values written here when
that file is not beside the checkout).
"""

from __future__ import annotations

from typing import Any

import pytest

from compactor.model.catalog import (
    A100_40GB,
    MODELS,
    model_for_product,
    profile_from_resource,
    resolve_profiles,
    resource_for_profile,
)
from compactor.model.gpu import derive_gpu_info
from compactor.model.types import Node
from tests.builders import A100_40, A100_80, H100_80, cluster, node
from tests.mig_geometry import WRITTEN_GEOMETRY, reference_geometry

ALL_BALANCED_A100_40 = {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}


def one_node(raw: dict[str, Any], pool_label: str = "nvidia.com/gpu.product") -> tuple[Node, tuple[str, ...]]:
    snap = cluster(raw, pool_label=pool_label)
    (loaded,) = snap.nodes
    return loaded, snap.warnings


def per_gpu(profiles: dict[str, int], gpus: int) -> dict[str, int]:
    return {name: count * gpus for name, count in profiles.items()}


def bare_node(name: str, allocatable: dict[str, str], labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A Node without any GPU Feature Discovery labels unless given."""
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110", **allocatable}},
    }


# --- whole GPUs ------------------------------------------------------------------------------------------------


def test_whole_gpus_come_from_the_gfd_count_and_product_labels() -> None:
    gpu_node, warnings = one_node(node("gpu-1", gpus=8, product=H100_80))
    assert gpu_node.gpu.physical_gpus == 8
    assert gpu_node.gpu.product == H100_80
    assert gpu_node.gpu.mig_strategy == "none"
    assert gpu_node.gpu.equivalent("nvidia.com/gpu") == 1.0
    assert gpu_node.is_gpu_node
    assert warnings == ()


def test_without_gfd_labels_allocatable_gives_the_gpu_count() -> None:
    gpu_node, _ = one_node(bare_node("plain", {"nvidia.com/gpu": "4"}))
    assert gpu_node.gpu.physical_gpus == 4
    assert gpu_node.gpu.product == ""
    assert gpu_node.pool == "gpu-unlabelled"


def test_the_gfd_count_wins_while_the_device_plugin_reports_fewer_gpus() -> None:
    gpu_node, _ = one_node(node("restarting", gpus=2, physical_gpus=8))
    assert gpu_node.gpu.physical_gpus == 8


def test_a_gfd_count_alone_still_makes_a_gpu_node() -> None:
    gpu_node, _ = one_node(bare_node("no-plugin", {}, {"nvidia.com/gpu.count": "4", "nvidia.com/gpu.product": A100_80}))
    assert gpu_node.gpu.physical_gpus == 4
    assert gpu_node.pool == A100_80


def test_a_cpu_only_node_has_no_gpus_and_goes_to_the_cpu_pool() -> None:
    cpu_node, _ = one_node(node("cpu-1"))
    assert cpu_node.gpu.physical_gpus == 0
    assert not cpu_node.is_gpu_node
    assert cpu_node.gpu.gpu_equivalent == ()
    assert cpu_node.pool == "cpu-only"


# --- MIG, mixed strategy ---------------------------------------------------------------------------------------


def test_all_balanced_a100_40gb_mixed_counts_eight_physical_gpus() -> None:
    gpu_node, warnings = one_node(node("mig-1", mig=per_gpu(ALL_BALANCED_A100_40, 8)))
    assert gpu_node.gpu.physical_gpus == 8
    assert gpu_node.gpu.mig_strategy == "mixed"
    assert dict(gpu_node.gpu.gpu_equivalent) == {
        "nvidia.com/mig-1g.5gb": 1 / 8,
        "nvidia.com/mig-2g.10gb": 2 / 8,
        "nvidia.com/mig-3g.20gb": 4 / 8,
    }
    assert gpu_node.allocatable["nvidia.com/mig-1g.5gb"] == 16
    assert warnings == ()


def test_all_1g_5gb_counts_eight_gpus_although_it_leaves_a_memory_slice_free_on_each() -> None:
    # 7 instances per GPU use memory slices 0-6 only: the memory axis alone would say 56/8 = 7 GPUs.
    gpu_node, _ = one_node(node("mig-small", mig={"1g.5gb": 56}))
    assert gpu_node.gpu.physical_gpus == 8


def test_all_1g_10gb_on_a100_40gb_counts_four_instances_per_gpu() -> None:
    gpu_node, _ = one_node(node("mig-double", mig={"1g.10gb": 32}, product=A100_40))
    assert gpu_node.gpu.physical_gpus == 8
    assert gpu_node.gpu.equivalent("nvidia.com/mig-1g.10gb") == 2 / 8


def test_mig_and_whole_gpus_on_one_node_add_up() -> None:
    gpu_node, _ = one_node(node("mixed-modes", gpus=2, mig=per_gpu(ALL_BALANCED_A100_40, 6)))
    assert gpu_node.gpu.physical_gpus == 8
    assert gpu_node.gpu.equivalent("nvidia.com/gpu") == 1.0


@pytest.mark.parametrize(
    ("product", "expected"),
    [
        pytest.param(A100_40, 2 / 8, id="a100-40gb-two-memory-slices"),
        pytest.param(A100_80, 1 / 8, id="a100-80gb-one-memory-slice"),
        pytest.param(H100_80, 1 / 8, id="h100-80gb-one-memory-slice"),
    ],
)
def test_the_1g_10gb_profile_is_sized_by_the_product_label(product: str, expected: float) -> None:
    gpu_node, _ = one_node(node("mig", mig={"1g.10gb": 4}, product=product))
    assert gpu_node.gpu.equivalent("nvidia.com/mig-1g.10gb") == expected


def test_without_a_product_label_the_other_profiles_decide_what_1g_10gb_means() -> None:
    with_small, _ = one_node(bare_node("a", {"nvidia.com/mig-1g.5gb": "2", "nvidia.com/mig-1g.10gb": "2"}))
    alone, _ = one_node(bare_node("b", {"nvidia.com/mig-1g.10gb": "7"}))
    assert with_small.gpu.equivalent("nvidia.com/mig-1g.10gb") == 2 / 8  # 1g.5gb exists only on A100-40GB
    assert alone.gpu.equivalent("nvidia.com/mig-1g.10gb") == 1 / 8  # the 80GB parts' smallest profile


def test_media_extension_profiles_map_from_their_device_plugin_names() -> None:
    gpu_node, _ = one_node(node("me", mig={"1g.10gb+me": 1, "1g.10gb": 6}, product=A100_80))
    assert "nvidia.com/mig-1g.10gb.me" in gpu_node.allocatable
    assert gpu_node.gpu.equivalent("nvidia.com/mig-1g.10gb.me") == 1 / 8
    assert profile_from_resource("nvidia.com/mig-1g.10gb.me") == "1g.10gb+me"
    assert resource_for_profile("1g.10gb+me") == "nvidia.com/mig-1g.10gb.me"


def test_an_unknown_mig_profile_is_kept_as_an_extended_resource_with_a_warning() -> None:
    gpu_node, warnings = one_node(node("odd", mig={"3g.20gb": 2, "5g.99gb": 1}))
    assert gpu_node.allocatable["nvidia.com/mig-5g.99gb"] == 1
    assert gpu_node.gpu.equivalent("nvidia.com/mig-5g.99gb") == 0.0
    assert gpu_node.gpu.equivalent("nvidia.com/mig-3g.20gb") == 0.5
    assert gpu_node.gpu.physical_gpus == 1
    assert len(warnings) == 1
    assert warnings[0].startswith("test: Node odd: unknown MIG profile 'nvidia.com/mig-5g.99gb'")


def test_an_unknown_mig_profile_does_not_hide_the_known_ones_when_the_product_is_unlabelled() -> None:
    gpu_node, warnings = one_node(bare_node("odd", {"nvidia.com/mig-1g.5gb": "14", "nvidia.com/mig-5g.99gb": "1"}))
    assert gpu_node.gpu.equivalent("nvidia.com/mig-1g.5gb") == 1 / 8
    assert gpu_node.gpu.physical_gpus == 2
    assert len(warnings) == 1 and "nvidia.com/mig-5g.99gb" in warnings[0]


# --- MIG, single strategy --------------------------------------------------------------------------------------


def test_single_strategy_counts_mig_devices_advertised_as_nvidia_com_gpu() -> None:
    labels = {
        "nvidia.com/mig.strategy": "single",
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
        "nvidia.com/gpu.count": "56",  # GFD counts MIG devices under the single strategy
    }
    gpu_node, warnings = one_node(bare_node("single", {"nvidia.com/gpu": "56"}, labels))
    assert gpu_node.gpu.physical_gpus == 8
    assert gpu_node.gpu.mig_strategy == "single"
    assert gpu_node.gpu.equivalent("nvidia.com/gpu") == 1 / 8
    assert warnings == ()


def test_single_strategy_with_time_slicing_divides_by_the_replicas() -> None:
    labels = {
        "nvidia.com/mig.strategy": "single",
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-3g.20gb-SHARED",
        "nvidia.com/gpu.replicas": "2",
    }
    gpu_node, _ = one_node(bare_node("single-shared", {"nvidia.com/gpu": "32"}, labels))
    assert gpu_node.gpu.physical_gpus == 8
    assert gpu_node.gpu.equivalent("nvidia.com/gpu") == 0.5 / 2


def test_an_unknown_single_strategy_product_counts_whole_gpus_with_a_warning() -> None:
    labels = {"nvidia.com/mig.strategy": "single", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-INVALID"}
    gpu_node, warnings = one_node(bare_node("invalid", {"nvidia.com/gpu": "3"}, labels))
    assert gpu_node.gpu.physical_gpus == 3
    assert any("unknown single-strategy MIG product" in w for w in warnings)


# --- time-slicing ----------------------------------------------------------------------------------------------


def test_time_sliced_gpus_count_replicas_as_fractions_of_a_physical_gpu() -> None:
    gpu_node, _ = one_node(node("shared", gpus=8, replicas=4))
    assert gpu_node.allocatable["nvidia.com/gpu"] == 32
    assert gpu_node.gpu.physical_gpus == 8
    assert gpu_node.gpu.replicas == 4
    assert gpu_node.gpu.sharing_strategy == "time-slicing"
    assert gpu_node.gpu.equivalent("nvidia.com/gpu") == 0.25


def test_time_slicing_without_a_count_label_still_divides_allocatable_by_the_replicas() -> None:
    labels = {"nvidia.com/gpu.replicas": "4"}
    gpu_node, _ = one_node(bare_node("shared", {"nvidia.com/gpu": "32"}, labels))
    assert gpu_node.gpu.physical_gpus == 8


def test_renamed_shared_gpus_count_like_time_sliced_ones() -> None:
    labels = {"nvidia.com/gpu.replicas": "10", "nvidia.com/gpu.sharing-strategy": "time-slicing"}
    gpu_node, _ = one_node(bare_node("renamed", {"nvidia.com/gpu.shared": "80"}, labels))
    assert gpu_node.gpu.physical_gpus == 8
    assert gpu_node.gpu.equivalent("nvidia.com/gpu.shared") == 0.1


def test_time_sliced_mig_devices_divide_by_their_own_replicas_label() -> None:
    labels = {"nvidia.com/mig-1g.5gb.replicas": "4"}
    raw = node("mig-shared", mig={"1g.5gb": 7 * 4 * 2}, labels=labels)
    gpu_node, _ = one_node(raw)
    assert gpu_node.gpu.physical_gpus == 2
    assert gpu_node.gpu.equivalent("nvidia.com/mig-1g.5gb") == 1 / 8 / 4


# --- pools -----------------------------------------------------------------------------------------------------


def test_pools_default_to_the_gpu_product_label() -> None:
    snap = cluster(
        node("a", gpus=8, product=A100_80),
        node("b", gpus=8, product=H100_80),
        node("c"),
        bare_node("d", {"nvidia.com/gpu": "2"}),
    )
    assert {n.name: n.pool for n in snap.nodes} == {"a": A100_80, "b": H100_80, "c": "cpu-only", "d": "gpu-unlabelled"}


def test_a_custom_pool_label_groups_gpu_nodes_and_leaves_cpu_nodes_alone() -> None:
    snap = cluster(
        node("a", gpus=8, labels={"team": "research"}),
        node("b", gpus=8),
        node("c", labels={"team": "research"}),
        pool_label="team",
    )
    assert {n.name: n.pool for n in snap.nodes} == {"a": "research", "b": "gpu-unlabelled", "c": "cpu-only"}


# --- product names ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("product", "model"),
    [
        pytest.param("NVIDIA-A100-SXM4-40GB", "A100-40GB", id="a100-sxm4-40gb"),
        pytest.param("NVIDIA-A100-PCIE-40GB", "A100-40GB", id="a100-pcie-40gb"),
        pytest.param("NVIDIA-A100-80GB-PCIe", "A100-80GB", id="a100-80gb-pcie"),
        pytest.param("NVIDIA-A100-SXM4-80GB", "A100-80GB", id="a100-sxm4-80gb"),
        pytest.param("NVIDIA-A30", "A30-24GB", id="a30"),
        pytest.param("NVIDIA-H100-80GB-HBM3", "H100-80GB", id="h100-80gb"),
        pytest.param("NVIDIA-H100-NVL", "H100-94GB", id="h100-nvl"),
        pytest.param("NVIDIA-H200", "H200-141GB", id="h200"),
        pytest.param("NVIDIA-H200-NVL", "H200-141GB", id="h200-nvl"),
        pytest.param("NVIDIA-H20-3e", "H200-141GB", id="h20-3e-uses-h200-names"),
        pytest.param("NVIDIA-GH200-480GB", "H100-96GB", id="gh200-is-an-h100-96gb-not-an-h200"),
        pytest.param("NVIDIA-RTX-A3000", None, id="rtx-a3000-is-not-an-a30"),
        pytest.param("NVIDIA-A10", None, id="a10-has-no-mig"),
        pytest.param("Tesla-T4", None, id="t4"),
        pytest.param("", None, id="unlabelled"),
    ],
)
def test_gfd_product_names_map_to_catalog_models(product: str, model: str | None) -> None:
    found = model_for_product(product)
    assert (found.name if found else None) == model


def test_a_gh200_node_resolves_its_96gb_profiles() -> None:
    gpu_node, warnings = one_node(
        node("gh", mig={"1g.12gb": 2, "2g.24gb": 1, "3g.48gb": 1}, product="NVIDIA-GH200-480GB")
    )
    assert warnings == ()
    assert gpu_node.gpu.physical_gpus == 1
    assert gpu_node.gpu.equivalent("nvidia.com/mig-3g.48gb") == 0.5


def test_resolving_profiles_returns_only_the_profiles_the_model_knows() -> None:
    model, found = resolve_profiles(A100_40, ["1g.5gb", "1g.20gb"])
    assert model is A100_40GB
    assert set(found) == {"1g.5gb"}


# --- catalog geometry ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model_name", list(WRITTEN_GEOMETRY))
def test_the_mig_catalog_matches_the_reference_geometry(model_name: str) -> None:
    memory_slots, compute_slices, profiles = reference_geometry()[model_name]
    (model,) = [m for m in MODELS if m.name == model_name]
    assert (model.memory_slots, model.compute_slices) == (memory_slots, compute_slices)
    assert {p.name for p in model.profiles} == set(profiles)
    for profile in model.profiles:
        compute, memory, max_instances, starts, gib, verified = profiles[profile.name]
        assert (profile.compute_slices, profile.memory_slices, profile.max_instances, profile.starts) == (
            compute,
            memory,
            max_instances,
            starts,
        ), profile.name
        if gib is not None:
            assert profile.memory_gib == gib, profile.name
        assert profile.verified == verified, profile.name


def test_the_written_geometry_agrees_with_the_shared_fixture_when_present() -> None:
    # Without ../shared this compares the written values with themselves, which holds; nothing is skipped.
    assert reference_geometry() == WRITTEN_GEOMETRY


def test_every_catalog_placement_fits_inside_the_gpu() -> None:
    for model in MODELS:
        for profile in model.profiles:
            assert all(start + profile.memory_slices <= model.memory_slots for start in profile.starts), (
                model.name,
                profile.name,
            )
            assert profile.compute_slices <= profile.memory_slices, (model.name, profile.name)


def test_derive_gpu_info_reports_no_gpus_for_an_empty_node() -> None:
    info, warnings = derive_gpu_info({}, {"cpu": 4000})
    assert info.physical_gpus == 0
    assert warnings == []

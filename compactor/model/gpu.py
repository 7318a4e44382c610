"""Derive a node's GPU picture (physical GPUs, MIG, time-slicing) from allocatable and GFD labels."""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache

from compactor.model.catalog import GpuModel, MigProfile, profile_from_resource, resolve_profiles
from compactor.model.resources import GPU, GPU_SHARED, is_mig_resource
from compactor.model.types import GpuInfo

PRODUCT_LABEL = "nvidia.com/gpu.product"
COUNT_LABEL = "nvidia.com/gpu.count"
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_CAPABLE_LABEL = "nvidia.com/mig.capable"
MIG_CONFIG_STATE_LABEL = "nvidia.com/mig.config.state"
REPLICAS_LABEL = "nvidia.com/gpu.replicas"
SHARING_LABEL = "nvidia.com/gpu.sharing-strategy"


def _int_label(labels: Mapping[str, str], key: str) -> int | None:
    try:
        value = int(labels[key])
    except (KeyError, ValueError):
        return None
    return value if value >= 0 else None


def _single_strategy_profile(product: str) -> str:
    """``A100-SXM4-40GB-MIG-1g.5gb`` (possibly ``-SHARED``) -> ``1g.5gb``."""
    marker = "-MIG-"
    if marker not in product:
        return ""
    return product.split(marker, 1)[1].removesuffix("-SHARED")


def _gpus_for_instances(model: GpuModel, instances: list[tuple[MigProfile, float]]) -> float:
    """Fewest physical GPUs that can hold these MIG instances (a lower bound).

    Each of three limits must hold on every GPU: memory slices, compute slices and
    the per-profile instance limit. ``all-1g.5gb`` (7 per GPU) fills only 7 of the 8
    memory slices, so the memory axis alone would count 8 such GPUs as 7.
    """
    memory = sum(count * p.memory_slices for p, count in instances) / model.memory_slots
    compute = sum(count * p.compute_slices for p, count in instances) / model.compute_slices
    per_profile = max((count / p.max_instances for p, count in instances), default=0.0)
    return max(memory, compute, per_profile)


_NVIDIA_PREFIX = "nvidia.com/"


def derive_gpu_info(labels: Mapping[str, str], allocatable: Mapping[str, int]) -> tuple[GpuInfo, list[str]]:
    """The node's GPU picture, and warnings (unknown MIG profiles, inconsistent labels).

    Nodes of one pool share it: only ``nvidia.com/`` labels and allocatable count,
    so the picture is computed once per distinct combination.
    """
    gpu_labels = tuple(sorted(item for item in labels.items() if item[0].startswith(_NVIDIA_PREFIX)))
    info, warnings = _shared_gpu_info(gpu_labels, tuple(sorted(allocatable.items())))
    return info, list(warnings)


@lru_cache(maxsize=10_000)
def _shared_gpu_info(
    labels: tuple[tuple[str, str], ...], allocatable: tuple[tuple[str, int], ...]
) -> tuple[GpuInfo, tuple[str, ...]]:
    info, warnings = _derive_gpu_info(dict(labels), dict(allocatable))
    return info, tuple(warnings)


def _derive_gpu_info(labels: Mapping[str, str], allocatable: Mapping[str, int]) -> tuple[GpuInfo, list[str]]:
    warnings: list[str] = []
    product = labels.get(PRODUCT_LABEL, "")
    strategy = labels.get(MIG_STRATEGY_LABEL, "none")
    replicas = max(1, _int_label(labels, REPLICAS_LABEL) or 1)
    equivalents: dict[str, float] = {}
    physical_whole = 0.0

    mig_physical = 0.0
    mig_resources = [name for name in allocatable if is_mig_resource(name)]
    if mig_resources:
        strategy = "mixed" if strategy == "none" else strategy
        model, found = resolve_profiles(product, [profile_from_resource(r) for r in mig_resources])
        instances: list[tuple[MigProfile, float]] = []
        for resource in mig_resources:
            mig_profile = found.get(profile_from_resource(resource))
            if mig_profile is None or model is None:
                where = product or "unlabelled"
                warnings.append(
                    f"unknown MIG profile {resource!r} (product {where}); kept as a generic extended resource"
                )
                continue
            # A time-sliced MIG device is advertised <replicas> times (GFD label nvidia.com/mig-<profile>.replicas).
            mig_replicas = max(1, _int_label(labels, f"{resource}.replicas") or 1)
            equivalents[resource] = model.fraction(mig_profile) / mig_replicas
            instances.append((mig_profile, allocatable.get(resource, 0) / mig_replicas))
        if model is not None and instances:
            mig_physical = _gpus_for_instances(model, instances)

    whole = allocatable.get(GPU, 0)
    shared = allocatable.get(GPU_SHARED, 0)
    single_profile = _single_strategy_profile(product) if strategy == "single" else ""
    if whole and single_profile:
        model, found = resolve_profiles(product.split("-MIG-")[0], [single_profile])
        profile: MigProfile | None = found.get(single_profile)
        if model is not None and profile is not None:
            equivalents[GPU] = model.fraction(profile) / replicas
            physical_whole = whole / replicas / profile.max_instances
        else:
            warnings.append(f"unknown single-strategy MIG product {product!r}; nvidia.com/gpu counted as whole GPUs")
            equivalents[GPU] = 1.0 / replicas
            physical_whole = whole / replicas
    elif whole:
        equivalents[GPU] = 1.0 / replicas
        physical_whole = whole / replicas
    if shared:
        equivalents[GPU_SHARED] = 1.0 / replicas
        physical_whole += shared / replicas

    physical = allocatable_physical = math.ceil(physical_whole + mig_physical - 1e-9)
    labelled = _int_label(labels, COUNT_LABEL)
    if labelled is not None and strategy != "single" and labelled > physical:
        # GFD counts physical GPUs; allocatable may be lower while the device plugin restarts.
        physical = labelled
    warnings += _implausible(physical, labelled, allocatable_physical, strategy, replicas)

    info = GpuInfo(
        product=product,
        physical_gpus=physical if (equivalents or labelled) else 0,
        allocatable_gpus=allocatable_physical if equivalents else 0,
        mig_strategy=strategy,
        mig_config=labels.get(MIG_CONFIG_LABEL, ""),
        mig_config_state=labels.get(MIG_CONFIG_STATE_LABEL, ""),
        replicas=replicas,
        sharing_strategy=labels.get(SHARING_LABEL, "none"),
        gpu_equivalent=tuple(sorted(equivalents.items())),
    )
    return info, warnings


MAX_PLAUSIBLE_GPUS = 16  # the most GPUs one server carries today (DGX-2, HGX-2: 16); more is a typo or a wrong label


def _implausible(physical: int, labelled: int | None, allocatable: int, strategy: str, replicas: int) -> list[str]:
    """Warnings for GPU data a real node does not show (issue 45: they passed without a word): more GPUs than any server
    holds, or more GPUs allocatable than GFD counts on the node (fewer is normal: MIG, a restarting device plugin)."""
    said = []
    if physical > MAX_PLAUSIBLE_GPUS:
        said.append(
            f"{physical} physical GPUs on one node (no server holds more than {MAX_PLAUSIBLE_GPUS}): check its "
            "allocatable nvidia.com/gpu and the nvidia.com/gpu.replicas label of time-slicing"
        )
    if labelled is not None and strategy != "single" and allocatable > labelled:
        said.append(
            f"{allocatable} GPUs allocatable (nvidia.com/gpu / {replicas} replica(s)) but GFD's nvidia.com/gpu.count "
            f"says {labelled}: one of them is wrong; counted as {allocatable}"
        )
    return said

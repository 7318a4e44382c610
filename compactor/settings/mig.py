"""MIG (the ``mig`` group): where the mig-parted layouts are read from, whether the plan may re-cut MIG-capable nodes to
another layout and at what price, and how long a re-cut may take."""

from __future__ import annotations

from pydantic import Field, field_validator

from compactor.settings.base import Group


class MigSettings(Group):
    config_map: str = Field(
        "",
        description="namespace/name of the mig-parted ConfigMap (key config.yaml); empty: the GPU "
        "Operator's custom-mig-parted-config, else each node's <node>-mig-config, else "
        "default-mig-parted-config, found by selector",
    )
    selector: str = Field(
        "app.kubernetes.io/component=nvidia-mig-manager",
        description="label selector of the GPU Operator's mig-parted ConfigMaps, when config_map is empty",
    )
    operator_namespace: str = Field(
        "gpu-operator",
        min_length=1,
        max_length=63,
        description="the GPU Operator's namespace: the only one mig-parted ConfigMaps are read from "
        "(a tenant's ConfigMap carrying the same label elsewhere is never trusted)",
    )

    repartition: bool = Field(
        False,
        description="re-cut whole-free MIG-capable nodes to a named mig-parted layout that hosts "
        "pending MIG pods (mig.config_map); off: advice only (plan --explain-mig)",
    )
    rebalance_min_gain: float | None = Field(
        None,
        gt=0,
        le=1,
        description="also re-cut idle MIG-capable nodes (no pending pod "
        "to host) when another layout lowers their expected fragmentation rate by at least this "
        "much (0-1); null: never",
    )
    recut_cost_moves: float = Field(
        5.0,
        ge=0,
        description="what one re-cut counts against caps.max_moves (it evicts nothing: the drain's moves count "
        "already, and its node counts against caps.max_draining_per_pool); ADR 0011",
    )
    reconfigure_timeout_seconds: float = Field(
        900.0,
        gt=0,
        description="longest mig-manager may take to re-cut a node (state success and the new slices in allocatable)",
    )

    @field_validator("config_map")
    @classmethod
    def _namespaced(cls, value: str) -> str:
        if value and (value.count("/") != 1 or not all(value.split("/"))):
            raise ValueError(f"expected namespace/name, got {value!r}")
        return value

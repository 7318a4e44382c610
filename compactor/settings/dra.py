"""Which GPUs a DRA driver publishes and what its device attributes mean (the ``dra`` group; docs/dra.md)."""

from __future__ import annotations

from pydantic import Field, field_validator

from compactor.model.dra import DriverMapping
from compactor.settings.base import Group


class DraDriverSettings(Group):
    """What one DRA driver's device attributes mean (docs/dra.md, "The mapping"); NVIDIA's gpu.nvidia.com by default."""

    driver: str = Field(min_length=1, description="the driver's name (ResourceSlice spec.driver)")
    type_attribute: str = Field("type", min_length=1, description="the attribute saying what a device is")
    gpu_types: list[str] = Field(["gpu"], description="its values for a whole GPU")
    mig_types: list[str] = Field(["mig"], description="its values for a MIG device (static or partitionable)")
    uuid_attribute: str = Field("uuid", description="the attribute naming the physical GPU of a whole-GPU device")
    parent_attribute: str = Field("parentUUID", description="the attribute naming a MIG device's physical GPU")
    profile_attribute: str = Field("profile", description="the attribute naming a MIG device's profile (1g.10gb)")
    product_attribute: str = Field("productName", description="the attribute naming the GPU model (the node's pool)")
    gpu_classes: list[str] = Field(
        default_factory=list, description="DeviceClasses of whole GPUs: a pending claim of `count` asks that many GPUs"
    )
    mig_classes: list[str] = Field(
        default_factory=list,
        description="DeviceClasses of MIG devices: a pending claim asks the profile its CEL selector names "
        '(device.attributes["<driver>"].<profile_attribute> == "3g.40gb")',
    )

    def mapping(self) -> DriverMapping:
        return DriverMapping(
            driver=self.driver,
            type_attribute=self.type_attribute,
            gpu_types=tuple(self.gpu_types),
            mig_types=tuple(self.mig_types),
            uuid_attribute=self.uuid_attribute,
            parent_attribute=self.parent_attribute,
            profile_attribute=self.profile_attribute,
            product_attribute=self.product_attribute,
            gpu_classes=tuple(self.gpu_classes),
            mig_classes=tuple(self.mig_classes),
        )


class DraSettings(Group):
    drivers: list[DraDriverSettings] = Field(
        default_factory=lambda: [
            DraDriverSettings(driver="gpu.nvidia.com", gpu_classes=["gpu.nvidia.com"], mig_classes=["mig.nvidia.com"])
        ],
        description="the DRA drivers whose devices are GPUs, each with what its attributes mean; devices of any "
        "other driver are not counted, and pods holding them stay in place",
    )

    @field_validator("drivers")
    @classmethod
    def _one_per_driver(cls, value: list[DraDriverSettings]) -> list[DraDriverSettings]:
        names = [d.driver for d in value]
        if twice := sorted({n for n in names if names.count(n) > 1}):
            raise ValueError(f"driver {twice[0]} is described more than once")
        return value

    def mappings(self) -> tuple[DriverMapping, ...]:
        return tuple(d.mapping() for d in self.drivers)

"""GPUs allocated through Dynamic Resource Allocation (``resource.k8s.io/v1``), seen as the device plugin's resources.

On a DRA node the GPUs are not in ``status.allocatable``: the inventory is in ResourceSlices and each pod's GPUs are in
the ``status.allocation`` of its ResourceClaims. This module turns both into the resources the rest of the model already
counts, so that a DRA node and a device-plugin node with the same GPUs and the same pods give the same figures:

* **Inventory.** Devices of *complete* pools only: a pool is the slices of one driver and pool name at its highest
  ``spec.pool.generation``, complete when their number is ``spec.pool.resourceSliceCount`` (a pool being republished is
  reported, never guessed). Each device is mapped by its driver's ``DriverMapping`` (attributes: type, parent GPU,
  MIG profile, product; NVIDIA's ``gpu.nvidia.com`` by default): a whole GPU adds one ``nvidia.com/gpu``, a static MIG
  device one ``nvidia.com/mig-<profile>``, to its node's allocatable. The node's pool is the devices' product when it
  has no label of its own, and it carries the model-only label ``dra.compactor.io/<driver>: "true"``.
* **Allocation.** A pod's claims (its template claims as made for it, named claims, and the claim kube-scheduler made
  for its extended-resource requests) add the devices allocated to them to its requests; ``adminAccess`` results
  consume nothing; a device allocated to a claim several pods share counts once, on the first of them by name; an
  extended-resource claim adds nothing (its pod's spec requests already say ``nvidia.com/gpu: N``). A pod whose claim
  is not allocated yet (pending) asks for what its requests say: ``count`` devices of a class the mapping knows.
* **Where a moved pod may go.** A pod with a template claim can only get a new claim from the same driver: it carries
  ``dra.compactor.io/<driver>: "true"`` as a model-only node selector, so the planner places it on that driver's nodes
  only. A pod asking ``nvidia.com/gpu`` in its containers may go to DRA nodes only when a DeviceClass serves that name
  (``extendedResourceName``), as kube-scheduler lets it; otherwise it carries ``dra.compactor.io/device-plugin:
  "true"``, which only device-plugin GPU nodes have (in clusters with DRA nodes only: elsewhere nothing changes).

* **Partitionable devices** (shared counters, dynamic MIG): a device that ``consumesCounters`` is mapped as above and
  its counter set is its physical GPU; its node keeps them all in ``Node.partitions`` (``model.partitions``) and
  offers, in its allocatable, those held as they are and its free counters cut into the largest devices that fit. A
  pod holding one is marked ``partitioned``: only the planner's partition step moves it.

Other drivers' devices are mapped only when ``dra.drivers`` describes them; otherwise their pods stay in place with the
reason "uses dynamic resource allocation ...", and their nodes count no GPU from them.

Here: the model-only labels and a driver's ``DriverMapping``, and each device read as the device plugin's resource
(``map_device``). ResourceClaims are read in ``claims``, the pools of ResourceSlices in ``inventory``, and the
model's nodes and pods get their devices and claims in ``apply``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from compactor.model.partitions import PartitionDevice
from compactor.model.quantity import to_scheduler_units
from compactor.model.resources import GPU, MIG_PREFIX

DRA_LABEL_PREFIX = "dra.compactor.io/"  # model-only: a DRA node's driver, a template-claim pod's need of it
DEVICE_PLUGIN_LABEL = DRA_LABEL_PREFIX + "device-plugin"  # model-only: a GPU node whose GPUs are in its allocatable
DRA_KINDS = frozenset({"DeviceClass", "ResourceSlice", "ResourceClaim"})


@dataclass(frozen=True)
class DriverMapping:
    """What a driver's device attributes mean. Attributes are looked up bare and qualified by the driver's domain."""

    driver: str
    type_attribute: str = "type"
    gpu_types: tuple[str, ...] = ("gpu",)
    mig_types: tuple[str, ...] = ("mig",)
    uuid_attribute: str = "uuid"
    parent_attribute: str = "parentUUID"
    profile_attribute: str = "profile"
    product_attribute: str = "productName"
    # DeviceClasses of whole GPUs: a pending pod's claim for ``count`` of them asks for that many nvidia.com/gpu
    gpu_classes: tuple[str, ...] = ("gpu.nvidia.com",)
    # DeviceClasses of MIG devices: a pending claim of one asks nvidia.com/mig-<profile> when its CEL selector names the
    # profile (``device.attributes["<driver>"].profile == "3g.40gb"``)
    mig_classes: tuple[str, ...] = ("mig.nvidia.com",)


NVIDIA = DriverMapping(driver="gpu.nvidia.com")


@dataclass(frozen=True)
class Device:
    """One mapped device: ``resource`` is the device plugin's name for it (``nvidia.com/gpu``, ``nvidia.com/mig-1g.10gb``)."""

    driver: str
    pool: str
    name: str
    node: str
    resource: str
    gpu: (
        str  # the physical GPU it is, or is carved from (uuid, or the device's name; a partitionable one's counter set)
    )
    product: str
    partition: PartitionDevice | None = None  # a partitionable device: the counters it consumes


def _attribute(attributes: Mapping[str, Any], name: str, driver: str) -> str:
    for key in (name, f"{driver}/{name}"):
        value = attributes.get(key)
        if isinstance(value, dict):
            for kind in ("string", "version", "int", "bool"):
                if kind in value:
                    return str(value[kind])
    return ""


def map_device(raw: Any, *, driver: str, pool: str, node: str, mapping: DriverMapping) -> Device | None:
    """One device of a slice as the device plugin's resource (None: a kind the mapping does not know); a partitionable
    one's GPU is the counter set it consumes."""
    if not isinstance(raw, dict):
        return None
    device = _static_device(raw, driver=driver, pool=pool, node=node, mapping=mapping)
    consumes = counter_amounts(raw.get("consumesCounters"))
    if device is None or not consumes:
        return device
    sets = sorted({counter_set for (counter_set, _), _ in consumes})
    partition = PartitionDevice(device.name, device.resource, sets[0], consumes)
    return replace(device, gpu=sets[0], partition=partition)


def counter_amounts(raw: Any) -> tuple[tuple[tuple[str, str], int], ...]:
    """``consumesCounters`` (or a slice's ``sharedCounters``, keyed ``name``) as ((set, counter), amount) pairs."""
    pairs: list[tuple[tuple[str, str], int]] = []
    for entry in raw if isinstance(raw, list) else ():
        if not isinstance(entry, dict):
            continue
        counter_set = str(entry.get("counterSet") or entry.get("name") or "")
        for counter, value in sorted((entry.get("counters") or {}).items()):
            amount = value.get("value") if isinstance(value, dict) else None
            try:
                pairs.append(((counter_set, str(counter)), to_scheduler_units("", amount or 0)))
            except ValueError:  # the API server validates quantities; a hand-made snapshot may not
                pairs.append(((counter_set, str(counter)), 0))
    return tuple(pairs)


def _static_device(raw: dict[str, Any], *, driver: str, pool: str, node: str, mapping: DriverMapping) -> Device | None:
    attributes = raw.get("attributes") or {}
    kind = _attribute(attributes, mapping.type_attribute, driver)
    name = str(raw.get("name") or "")
    product = _attribute(attributes, mapping.product_attribute, driver)
    if kind in mapping.gpu_types:
        return Device(
            driver, pool, name, node, GPU, _attribute(attributes, mapping.uuid_attribute, driver) or name, product
        )
    if kind in mapping.mig_types:
        profile = _attribute(attributes, mapping.profile_attribute, driver)
        parent = _attribute(attributes, mapping.parent_attribute, driver)
        if profile:
            return Device(driver, pool, name, node, MIG_PREFIX + profile, parent or name, product)
    return None

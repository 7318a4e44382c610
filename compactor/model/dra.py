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

Partitionable devices (shared counters, dynamic MIG) and other drivers' devices are not mapped: their pods stay in
place with the reason "uses dynamic resource allocation ...", and their nodes count no GPU from them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec

from compactor.model import schema
from compactor.model.gpu import COUNT_LABEL, PRODUCT_LABEL, derive_gpu_info
from compactor.model.parse import RawObject, node_pool, sections
from compactor.model.resources import GPU, MIG_PREFIX, Resources
from compactor.model.types import Node, Pod

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


NVIDIA = DriverMapping(driver="gpu.nvidia.com")


@dataclass(frozen=True)
class Device:
    """One mapped device: ``resource`` is the device plugin's name for it (``nvidia.com/gpu``, ``nvidia.com/mig-1g.10gb``)."""

    driver: str
    pool: str
    name: str
    node: str
    resource: str
    gpu: str  # the physical GPU it is, or is carved from (uuid, or the device's name)
    product: str


@dataclass(frozen=True)
class ClaimResult:
    driver: str
    pool: str
    device: str
    admin: bool


@dataclass(frozen=True)
class ResourceClaim:
    namespace: str
    name: str
    requests: tuple[tuple[str, str, int, str], ...]  # (request, deviceClassName, count, allocationMode)
    results: tuple[ClaimResult, ...]
    admin: bool  # a request asks for adminAccess

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class Inventory:
    devices: dict[tuple[str, str, str], Device] = field(default_factory=dict)  # (driver, pool, device) -> device
    by_node: dict[str, list[Device]] = field(default_factory=lambda: defaultdict(list))
    claims: dict[str, ResourceClaim] = field(default_factory=dict)  # namespace/name -> claim
    extended_classes: dict[str, str] = field(default_factory=dict)  # DeviceClass -> extendedResourceName


def _attribute(attributes: Mapping[str, Any], name: str, driver: str) -> str:
    for key in (name, f"{driver}/{name}"):
        value = attributes.get(key)
        if isinstance(value, dict):
            for kind in ("string", "version", "int", "bool"):
                if kind in value:
                    return str(value[kind])
    return ""


def _device(raw: Any, *, driver: str, pool: str, node: str, mapping: DriverMapping) -> Device | None:
    if not isinstance(raw, dict) or raw.get("consumesCounters"):
        return None  # partitionable devices are not mapped
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


def _claim(raw: RawObject, *, source: str) -> ResourceClaim:
    _, meta, spec, status = sections(raw, source=source)
    devices = spec.devices if isinstance(spec.devices, dict) else {}
    requests, admin = [], False
    for request in devices.get("requests") or ():
        exactly = request.get("exactly") or {}
        admin = admin or bool(exactly.get("adminAccess"))
        requests.append(
            (
                str(request.get("name") or ""),
                str(exactly.get("deviceClassName") or ""),
                int(exactly.get("count") or 1),
                str(exactly.get("allocationMode") or "ExactCount"),
            )
        )
    allocated = ((status.allocation or {}).get("devices") or {}).get("results") or ()
    results = tuple(
        ClaimResult(
            str(r.get("driver") or ""),
            str(r.get("pool") or ""),
            str(r.get("device") or ""),
            bool(r.get("adminAccess")),
        )
        for r in allocated
        if isinstance(r, dict)
    )
    return ResourceClaim(meta.namespace or "default", str(meta.name), tuple(requests), results, admin)


def read_inventory(
    objects: Iterable[tuple[str, RawObject]],
    nodes: Iterable[str],
    mappings: Sequence[DriverMapping],
    warnings: list[str],
) -> Inventory:
    """The mapped devices of complete pools, the claims and the DeviceClasses' extended resources of ``objects``."""
    by_driver = {m.driver: m for m in mappings}
    inventory = Inventory()
    pools: dict[tuple[str, str], list[tuple[int, int, str, Any]]] = defaultdict(list)
    for origin, raw in objects:
        kind = raw.kind if isinstance(raw, schema.KubeObject) else raw.get("kind")
        if kind == "DeviceClass":
            _, meta, spec, _ = sections(raw, source=origin)
            if spec.extended_resource_name:
                inventory.extended_classes[str(meta.name)] = spec.extended_resource_name
        elif kind == "ResourceClaim":
            claim = _claim(raw, source=origin)
            inventory.claims[claim.key] = claim
        elif kind == "ResourceSlice":
            _, _, spec, _ = sections(raw, source=origin)
            about = spec.pool if isinstance(spec.pool, dict) else {}
            key = (spec.driver or "", str(about.get("name") or ""))
            pools[key].append(
                (
                    int(about.get("generation") or 0),
                    int(about.get("resourceSliceCount") or 1),
                    spec.node_name or "",
                    spec.devices,
                )
            )
    known = set(nodes)
    for (driver, pool_name), slices in sorted(pools.items()):
        generation = max(s[0] for s in slices)
        current = [s for s in slices if s[0] == generation]
        expected = current[0][1]
        if len(current) != expected:
            warnings.append(
                f"DRA pool {pool_name} of driver {driver}: {len(current)} of {expected} ResourceSlice(s) at generation "
                f"{generation}: incomplete (being republished?), its devices are not counted"
            )
            continue
        mapping = by_driver.get(driver)
        for _, _, node, devices in current:
            if not node or node not in known:
                continue
            for raw in devices if isinstance(devices, list) else ():
                device = _device(raw, driver=driver, pool=pool_name, node=node, mapping=mapping) if mapping else None
                if device is None:
                    continue  # another driver's, a partitionable one, a kind the mapping does not know
                inventory.devices[(driver, pool_name, device.name)] = device
                inventory.by_node[node].append(device)
    return inventory


def apply(
    nodes: dict[str, Node],
    pods: list[Pod],
    inventory: Inventory,
    mappings: Sequence[DriverMapping],
    *,
    pool_label: str,
    warnings: list[str],
) -> list[Pod]:
    """``nodes`` updated in place with their DRA GPUs; the pods (in their order) with their claims' devices in their
    requests."""
    for name, devices in inventory.by_node.items():
        nodes[name] = _with_devices(nodes[name], devices, pool_label=pool_label, warnings=warnings)
    counted: set[tuple[str, str, str]] = set()
    for pod in pods:  # an extended-resource claim's devices are in its pod's spec requests already
        claim = inventory.claims.get(f"{pod.namespace}/{pod.extended_claim}") if pod.extended_claim else None
        counted |= {(r.driver, r.pool, r.device) for r in claim.results} if claim else set()
    classes = {c: m for m in mappings for c in m.gpu_classes}
    changed = {
        pod.key: _with_claims(pod, inventory, counted, classes)
        for pod in sorted(
            (p for p in pods if p.resource_claims), key=lambda p: p.key
        )  # a shared device: the first by name
    }
    served = set(inventory.extended_classes.values())  # device-plugin resources DRA nodes serve too (DeviceClasses)
    if inventory.by_node:
        for name, node in list(nodes.items()):
            if node.is_gpu_node and name not in inventory.by_node:
                nodes[name] = replace(node, labels={**node.labels, DEVICE_PLUGIN_LABEL: "true"})
    return [
        changed.get(pod.key, pod) if pod.resource_claims else _plugin_only(pod, served) if inventory.by_node else pod
        for pod in pods
    ]


def _plugin_only(pod: Pod, served: set[str]) -> Pod:
    """A pod asking device-plugin GPU resources that no DeviceClass lets DRA nodes serve (``extendedResourceName``):
    kube-scheduler puts it on device-plugin nodes only, and so does the model (a model-only node selector)."""
    asked = {r for r, v in pod.requests.gpu_part().items() if v > 0}
    if not asked or asked <= served or pod.extended_claim:
        return pod
    selector = tuple(sorted({**dict(pod.node_selector), DEVICE_PLUGIN_LABEL: "true"}.items()))
    return msgspec.structs.replace(pod, node_selector=selector)


def _with_devices(node: Node, devices: Sequence[Device], *, pool_label: str, warnings: list[str]) -> Node:
    added = Resources(_count(d.resource for d in devices))
    allocatable, capacity = node.allocatable + added, node.capacity + added
    product = next((d.product for d in devices if d.product), "")
    derived = {PRODUCT_LABEL: product, COUNT_LABEL: str(len({d.gpu for d in devices})), **node.labels}
    info, problems = derive_gpu_info(derived, allocatable)
    warnings.extend(f"node {node.name}: {p}" for p in problems)
    return replace(
        node,
        allocatable=allocatable,
        capacity=capacity,
        gpu=info,
        labels={**node.labels, **{DRA_LABEL_PREFIX + d: "true" for d in sorted({d.driver for d in devices})}},
        pool=node_pool(derived, info.physical_gpus > 0, pool_label),
    )


def _count(names: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for name in names:
        counts[name] += 1
    return dict(counts)


def _with_claims(
    pod: Pod, inventory: Inventory, counted: set[tuple[str, str, str]], classes: Mapping[str, DriverMapping]
) -> Pod:
    """The pod with the mapped devices its claims hold in its requests (so its node's usage is right whether or not it
    may move), or, while they are not allocated, the GPUs they ask for; ``dra_gpus`` when all of it is understood."""
    taken: list[str] = []
    understood, template = True, False
    drivers: set[str] = set()
    for _, claim_name, shared in pod.resource_claims:
        template = template or not shared
        claim = inventory.claims.get(f"{pod.namespace}/{claim_name}") if claim_name else None
        if claim is None:
            understood = False  # not made yet, or not in the snapshot
            continue
        understood = understood and not claim.admin
        if claim.results:
            for result in claim.results:
                key = (result.driver, result.pool, result.device)
                device = inventory.devices.get(key)
                if result.admin:
                    continue
                if device is None:
                    understood = False  # another driver's device, a partitionable one, or an incomplete pool's
                    continue
                drivers.add(device.driver)
                if key not in counted:
                    counted.add(key)
                    taken.append(device.resource)
        elif pod.node_name:
            understood = False  # bound without an allocation: not something the model can explain
        else:
            for _, device_class, count, mode in claim.requests:
                mapping = classes.get(device_class)
                if mapping is None or mode != "ExactCount":
                    understood = False  # all devices, or a class not mapped (a MIG profile chosen by a CEL selector)
                    continue
                taken += [GPU] * count
                drivers.add(mapping.driver)
    selector = dict(pod.node_selector)
    if template and understood:
        selector |= {DRA_LABEL_PREFIX + d: "true" for d in drivers}
    return msgspec.structs.replace(
        pod,
        requests=pod.requests + Resources(_count(taken)),
        node_selector=tuple(sorted(selector.items())),
        dra_gpus=understood,
    )

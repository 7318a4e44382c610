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
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec

from compactor.model import schema
from compactor.model.gpu import COUNT_LABEL, PRODUCT_LABEL, derive_gpu_info
from compactor.model.parse import RawObject, node_pool, sections
from compactor.model.partitions import PartitionDevice, Partitions
from compactor.model.quantity import to_scheduler_units
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
    requests: tuple[tuple[str, str, int, str, str], ...]  # (request, deviceClassName, count, allocationMode, profile)
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
    partitions: dict[str, Partitions] = field(default_factory=dict)  # node -> its partitionable devices


def _attribute(attributes: Mapping[str, Any], name: str, driver: str) -> str:
    for key in (name, f"{driver}/{name}"):
        value = attributes.get(key)
        if isinstance(value, dict):
            for kind in ("string", "version", "int", "bool"):
                if kind in value:
                    return str(value[kind])
    return ""


def _device(raw: Any, *, driver: str, pool: str, node: str, mapping: DriverMapping) -> Device | None:
    if not isinstance(raw, dict):
        return None
    device = _static_device(raw, driver=driver, pool=pool, node=node, mapping=mapping)
    consumes = _consumption(raw.get("consumesCounters"))
    if device is None or not consumes:
        return device
    sets = sorted({counter_set for (counter_set, _), _ in consumes})
    partition = PartitionDevice(device.name, device.resource, sets[0], consumes)
    return replace(device, gpu=sets[0], partition=partition)


def _consumption(raw: Any) -> tuple[tuple[tuple[str, str], int], ...]:
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
                _selected_profile(exactly.get("selectors")),
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


_PROFILE_SELECTOR = re.compile(r"""^device\.attributes\[["']([^"']+)["']\]\.profile\s*==\s*["']([^"']+)["']$""")


def _selected_profile(selectors: Any) -> str:
    """The MIG profile a request's CEL selectors ask for, when one of them is exactly a profile equality."""
    for selector in selectors if isinstance(selectors, list) else ():
        expression = str(((selector or {}).get("cel") or {}).get("expression") or "").strip()
        if found := _PROFILE_SELECTOR.match(expression):
            return found.group(2)
    return ""


def read_inventory(
    objects: Iterable[tuple[str, RawObject]],
    nodes: Iterable[str],
    mappings: Sequence[DriverMapping],
    warnings: list[str],
) -> Inventory:
    """The mapped devices of complete pools, the claims and the DeviceClasses' extended resources of ``objects``."""
    by_driver = {m.driver: m for m in mappings}
    inventory = Inventory()
    pools: dict[tuple[str, str], list[_Slice]] = defaultdict(list)
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
            _, meta, spec, _ = sections(raw, source=origin)
            about = spec.pool if isinstance(spec.pool, dict) else {}
            key = (spec.driver or "", str(about.get("name") or ""))
            pools[key].append(
                _Slice(
                    str(meta.name),
                    int(about.get("generation") or 0),
                    int(about.get("resourceSliceCount") or 1),
                    spec.node_name or "",
                    spec.devices if isinstance(spec.devices, list) else [],
                    _consumption(spec.shared_counters),
                )
            )
    known = set(nodes)
    for (driver, pool_name), slices in sorted(pools.items()):
        generation = max(s.generation for s in slices)
        current = sorted((s for s in slices if s.generation == generation), key=lambda s: s.name)
        expected = current[0].count
        if len(current) != expected:
            warnings.append(
                f"DRA pool {pool_name} of driver {driver}: {len(current)} of {expected} ResourceSlice(s) at generation "
                f"{generation}: incomplete (being republished?), its devices are not counted"
            )
            continue
        mapping = by_driver.get(driver)
        if mapping is not None:
            _read_pool(inventory, current, driver, pool_name, known, mapping, warnings)
    return inventory


@dataclass(frozen=True)
class _Slice:
    name: str
    generation: int
    count: int  # spec.pool.resourceSliceCount
    node: str
    devices: list[Any]
    counters: tuple[tuple[tuple[str, str], int], ...]  # spec.sharedCounters


def _read_pool(
    inventory: Inventory,
    slices: Sequence[_Slice],
    driver: str,
    pool: str,
    known: set[str],
    mapping: DriverMapping,
    warnings: list[str],
) -> None:
    """The mapped devices of one complete pool, in the allocator's order (slices by name, devices in slice order)."""
    counters = dict(c for s in slices for c in s.counters)
    partitioned: dict[str, list[PartitionDevice]] = defaultdict(list)
    products: dict[str, str] = {}
    for piece in slices:
        if not piece.node or piece.node not in known:
            continue
        for raw in piece.devices:
            device = _device(raw, driver=driver, pool=pool, node=piece.node, mapping=mapping)
            if device is None:
                continue  # another driver's, a kind the mapping does not know
            if device.partition is not None:
                missing = [c for c, _ in device.partition.consumes if c not in counters]
                if missing:
                    warnings.append(
                        f"DRA pool {pool} of driver {driver}: device {device.name} consumes counter "
                        f"{missing[0][0]}/{missing[0][1]}, which no slice of the pool shares: not counted"
                    )
                    continue
                partitioned[piece.node].append(device.partition)
                products.setdefault(piece.node, device.product)
            inventory.devices[(driver, pool, device.name)] = device
            if device.partition is None:
                inventory.by_node[piece.node].append(device)
    for node, devices in partitioned.items():
        if node in inventory.partitions:
            warnings.append(f"node {node}: partitionable devices of more than one DRA pool: only the first is counted")
            continue
        used = {c for d in devices for c, _ in d.consumes}
        capacity = tuple(sorted((c, a) for c, a in counters.items() if c[0] in {s for s, _ in used}))
        inventory.partitions[node] = Partitions(driver, pool, capacity, tuple(devices), product=products.get(node, ""))


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
    held = _held_partitions(pods, inventory)
    for name in sorted({*inventory.by_node, *inventory.partitions}):
        partitions = inventory.partitions.get(name)
        if partitions is not None:
            partitions = partitions.with_held(held.get(name, ()))
        nodes[name] = _with_devices(
            nodes[name], inventory.by_node.get(name, ()), partitions, pool_label=pool_label, warnings=warnings
        )
    counted: set[tuple[str, str, str]] = set()
    for pod in pods:  # an extended-resource claim's devices are in its pod's spec requests already
        claim = inventory.claims.get(f"{pod.namespace}/{pod.extended_claim}") if pod.extended_claim else None
        counted |= {(r.driver, r.pool, r.device) for r in claim.results} if claim else set()
    classes = {c: (m, GPU) for m in mappings for c in m.gpu_classes}
    classes |= {c: (m, MIG_PREFIX) for m in mappings for c in m.mig_classes}
    changed = {
        pod.key: _with_claims(pod, inventory, counted, classes)
        for pod in sorted(
            (p for p in pods if p.resource_claims), key=lambda p: p.key
        )  # a shared device: the first by name
    }
    served = set(inventory.extended_classes.values())  # device-plugin resources DRA nodes serve too (DeviceClasses)
    dra_nodes = {*inventory.by_node, *inventory.partitions}
    if dra_nodes:
        for name, node in list(nodes.items()):
            if node.is_gpu_node and name not in dra_nodes:
                nodes[name] = replace(node, labels={**node.labels, DEVICE_PLUGIN_LABEL: "true"})
    return [
        changed.get(pod.key, pod) if pod.resource_claims else _plugin_only(pod, served) if dra_nodes else pod
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


def _held_partitions(pods: Sequence[Pod], inventory: Inventory) -> dict[str, list[tuple[str, str]]]:
    """node -> (partitionable device, pod key) for every device a claim holds ("" when no pod read uses the claim)."""
    owner = {f"{p.namespace}/{name}": p.key for p in pods for _, name, _ in p.resource_claims if name}
    owner |= {f"{p.namespace}/{p.extended_claim}": p.key for p in pods if p.extended_claim}
    held: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for key, claim in sorted(inventory.claims.items()):
        for result in claim.results:
            device = inventory.devices.get((result.driver, result.pool, result.device))
            if device is not None and device.partition is not None and not result.admin:
                held[device.node].append((device.name, owner.get(key, "")))
    return held


def _with_devices(
    node: Node, devices: Sequence[Device], partitions: Partitions | None, *, pool_label: str, warnings: list[str]
) -> Node:
    """The node with its static devices and, cut as ``Partitions.decompose`` cuts them, its partitionable ones (those
    allocated as they are, the free counters as the largest devices that fit) in its allocatable."""
    resources = [d.resource for d in devices]
    gpus = {d.gpu for d in devices}
    drivers = {d.driver for d in devices}
    if partitions is not None:
        resources += [r for r, n in _cut(partitions).items() for _ in range(n)]
        gpus |= set(partitions.gpus)
        drivers.add(partitions.driver)
    added = Resources(_count(resources))
    allocatable, capacity = node.allocatable + added, node.capacity + added
    product = next((d.product for d in devices if d.product), "") or (partitions.product if partitions else "")
    derived = {PRODUCT_LABEL: product, COUNT_LABEL: str(len(gpus)), **node.labels}
    info, problems = derive_gpu_info(derived, allocatable)
    warnings.extend(f"node {node.name}: {p}" for p in problems)
    if (
        partitions is not None
    ):  # what one unit of each device it can cut is worth, cut now or not (pending pods ask them)
        every, _ = derive_gpu_info(derived, Resources(dict.fromkeys({d.resource for d in partitions.devices}, 1)))
        info = replace(
            info, gpu_equivalent=tuple(sorted({**dict(every.gpu_equivalent), **dict(info.gpu_equivalent)}.items()))
        )
    return replace(
        node,
        allocatable=allocatable,
        capacity=capacity,
        gpu=info,
        labels={**node.labels, **{DRA_LABEL_PREFIX + d: "true" for d in sorted(drivers)}},
        pool=node_pool(derived, info.physical_gpus > 0, pool_label),
        partitions=partitions,
    )


def _cut(partitions: Partitions) -> Resources:
    """What partitionable devices add to their node's allocatable: those held as they are, the free counters cut."""
    held = [d for name, _ in partitions.held if (d := partitions.device(name)) is not None]
    return Resources(_count(d.resource for d in held + partitions.decompose(partitions.free())))


def with_partitions_held(node: Node, held: Iterable[tuple[str, str]]) -> Node:
    """The node once its partitionable devices are held as ``held`` ((device, pod key) pairs) says, its allocatable
    cut again (the plan's figures after it)."""
    if node.partitions is None:
        return node
    changed = node.partitions.with_held(held)
    before, after = _cut(node.partitions), _cut(changed)
    allocatable = node.allocatable - before + after
    labels = {PRODUCT_LABEL: node.gpu.product, COUNT_LABEL: str(node.gpu.physical_gpus), **node.labels}
    info, _ = derive_gpu_info(labels, allocatable)
    return replace(
        node,
        allocatable=allocatable,
        capacity=node.capacity - before + after,
        gpu=replace(info, gpu_equivalent=node.gpu.gpu_equivalent),
        partitions=changed,
    )


def _count(names: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for name in names:
        counts[name] += 1
    return dict(counts)


def _with_claims(
    pod: Pod,
    inventory: Inventory,
    counted: set[tuple[str, str, str]],
    classes: Mapping[str, tuple[DriverMapping, str]],
) -> Pod:
    """The pod with the mapped devices its claims hold in its requests (so its node's usage is right whether or not it
    may move), or, while they are not allocated, the GPUs they ask for; ``dra_gpus`` when all of it is understood."""
    taken: list[str] = []
    understood, template, partitioned = True, False, False
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
                partitioned = partitioned or device.partition is not None
                if key not in counted:
                    counted.add(key)
                    taken.append(device.resource)
        elif pod.node_name:
            understood = False  # bound without an allocation: not something the model can explain
        else:
            for _, device_class, count, mode, profile in claim.requests:
                mapping, kind = classes.get(device_class, (None, ""))
                if mapping is None or mode != "ExactCount" or (kind == MIG_PREFIX and not profile):
                    understood = False  # all devices, a class not mapped, a MIG device of no profile said plainly
                    continue
                taken += [GPU if kind == GPU else MIG_PREFIX + profile] * count
                drivers.add(mapping.driver)
    selector = dict(pod.node_selector)
    if template and understood:
        selector |= {DRA_LABEL_PREFIX + d: "true" for d in drivers}
    return msgspec.structs.replace(
        pod,
        requests=pod.requests + Resources(_count(taken)),
        node_selector=tuple(sorted(selector.items())),
        dra_gpus=understood,
        partitioned=partitioned,
    )

"""The DRA inventory: the mapped devices of complete ResourceSlice pools, the claims and the DeviceClasses read.

Apart from the devices (``dra/__init__.py``) and the claims (``claims``) because a pool is only counted whole: its slices are
gathered, checked against ``spec.pool.resourceSliceCount`` at the highest generation, and only then mapped, with the
counters its partitionable devices consume checked against those its slices share.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from compactor.errors import InputError
from compactor.model import schema
from compactor.model.dra import Device, DriverMapping, counter_amounts, map_device
from compactor.model.dra.claims import ResourceClaim, read_claim
from compactor.model.parse import RawObject, sections
from compactor.model.partitions import PartitionDevice, Partitions


@dataclass
class Inventory:
    devices: dict[tuple[str, str, str], Device] = field(default_factory=dict)  # (driver, pool, device) -> device
    by_node: dict[str, list[Device]] = field(default_factory=lambda: defaultdict(list))
    claims: dict[str, ResourceClaim] = field(default_factory=dict)  # namespace/name -> claim
    extended_classes: dict[str, str] = field(default_factory=dict)  # DeviceClass -> extendedResourceName
    partitions: dict[str, Partitions] = field(default_factory=dict)  # node -> its partitionable devices


def read_inventory(
    objects: Iterable[tuple[str, RawObject]],
    nodes: Iterable[str],
    mappings: Sequence[DriverMapping],
    warnings: list[str],
    *,
    skip_undecodable: bool = False,
) -> Inventory:
    """The mapped devices of complete pools, the claims and the DeviceClasses' extended resources of ``objects``.

    An object that cannot be decoded is an ``InputError`` naming it and its field (a file: the user fixes it); with
    ``skip_undecodable`` (a live cluster: nobody can fix it from here, and one tenant's object must not stop every run)
    it is left out with a warning naming it, as cluster-autoscaler skips an object it cannot handle."""
    by_driver = {m.driver: m for m in mappings}
    inventory = Inventory()
    pools: dict[tuple[str, str], list[_Slice]] = defaultdict(list)
    for origin, raw in objects:
        try:
            _read_one(inventory, pools, origin, raw)
        except InputError as exc:
            if not skip_undecodable:
                raise
            warnings.append(f"{exc}: left out (not counted)")
    _read_pools(inventory, pools, set(nodes), by_driver, warnings)
    return inventory


def _read_one(inventory: Inventory, pools: dict[tuple[str, str], list[_Slice]], origin: str, raw: RawObject) -> None:
    """One DeviceClass, ResourceClaim or ResourceSlice into the inventory (slices gathered by pool, read later)."""
    kind = raw.kind if isinstance(raw, schema.KubeObject) else raw.get("kind")
    if kind == "DeviceClass":
        _, meta, spec, _ = sections(raw, source=origin)
        if spec.extended_resource_name:
            inventory.extended_classes[str(meta.name)] = spec.extended_resource_name
    elif kind == "ResourceClaim":
        claim = read_claim(raw, source=origin)
        inventory.claims[claim.key] = claim
    elif kind == "ResourceSlice":
        _, meta, spec, _ = sections(raw, source=origin)
        about = spec.pool if isinstance(spec.pool, dict) else {}
        key = (spec.driver or "", str(about.get("name") or ""))
        name = f"resourceslice {meta.name}"
        piece = _Slice(  # decoded whole before its pool is named: a slice left out leaves no empty pool behind
            str(meta.name),
            _whole(about.get("generation"), 0, origin, name, "spec.pool.generation"),
            _whole(about.get("resourceSliceCount"), 1, origin, name, "spec.pool.resourceSliceCount"),
            spec.node_name or "",
            spec.devices if isinstance(spec.devices, list) else [],
            counter_amounts(spec.shared_counters),
        )
        pools[key].append(piece)


def _read_pools(
    inventory: Inventory,
    pools: dict[tuple[str, str], list[_Slice]],
    known: set[str],
    by_driver: dict[str, DriverMapping],
    warnings: list[str],
) -> None:
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


def _whole(value: Any, default: int, source: str, obj: str, field: str) -> int:
    """A whole number of a slice's pool (``default`` when absent); anything else an ``InputError`` naming it."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"must be a whole number, got {value!r}", source=source, obj=obj, field=field)
    return value


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
            device = map_device(raw, driver=driver, pool=pool, node=piece.node, mapping=mapping)
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

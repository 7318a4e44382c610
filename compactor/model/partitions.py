"""Partitionable devices (DRA shared counters, NVIDIA's dynamic MIG): which devices a node's free counters still allow.

A DRA driver publishes each partitionable GPU as a *counter set* (``spec.sharedCounters``: e.g. ``memory-slice-0..7``)
and every partition it can cut (each MIG profile at each placement, and the whole GPU) as a device that *consumes*
counters of that set (``consumesCounters``). kube-scheduler allocates a device only while the counters it consumes are
free, trying devices in order (first fit): five ``1g`` requests take slots 0-4 of one GPU.

``Partitions`` holds one node's counter sets, its partitionable devices in the allocator's order and which of them are
allocated (to which pod). It answers what the rest of the model needs:

* ``first_fit(resource, free)``: the device kube-scheduler would allocate for one device of that resource now;
* ``decompose(free)``: the free counters as devices, largest first (the whole GPU when its counters are all free, else
  the largest profile that still fits, then the next): what the node offers, for the figures and the resource model;
* ``whole_free_sets(free)``: the counter sets (GPUs) none of whose counters is consumed.

Pure: no API, no solver.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

Counter = tuple[str, str]  # (counter set, counter)


@dataclass(frozen=True, slots=True)
class PartitionDevice:
    name: str
    resource: str  # the device plugin's name for it: nvidia.com/gpu, nvidia.com/mig-3g.40gb
    gpu: str  # the counter set (physical GPU) it is cut from
    consumes: tuple[tuple[Counter, int], ...]

    def fits(self, free: Mapping[Counter, int]) -> bool:
        return all(free.get(counter, 0) >= amount for counter, amount in self.consumes)


@dataclass(frozen=True, slots=True)
class Partitions:
    """One node's partitionable devices of one driver and pool."""

    driver: str
    pool: str
    capacity: tuple[tuple[Counter, int], ...]  # every counter of every set the node's devices consume
    devices: tuple[PartitionDevice, ...]  # in the allocator's order: slices by name, devices in slice order
    held: tuple[tuple[str, str], ...] = field(default=())  # (device, pod key or "" for a claim of no pod read)
    product: str = ""  # the GPU model its devices say (productName)

    @property
    def gpus(self) -> tuple[str, ...]:
        return tuple(sorted({counter_set for (counter_set, _), _ in self.capacity}))

    def device(self, name: str) -> PartitionDevice | None:
        return next((d for d in self.devices if d.name == name), None)

    def free(self, held: Iterable[str] | None = None) -> dict[Counter, int]:
        """Counters left once the devices ``held`` (default: those allocated now) consume theirs."""
        free = dict(self.capacity)
        names = set(held) if held is not None else {name for name, _ in self.held}
        for device in self.devices:
            if device.name in names:
                for counter, amount in device.consumes:
                    free[counter] = free.get(counter, 0) - amount
        return free

    def first_fit(self, resource: str, free: Mapping[Counter, int]) -> PartitionDevice | None:
        return next((d for d in self.devices if d.resource == resource and d.fits(free)), None)

    def allocate(self, asks: Mapping[str, int], free: Mapping[Counter, int]) -> list[PartitionDevice] | None:
        """The devices first fit gives ``asks`` (resource -> count) one after another, or None when one finds none."""
        left = dict(free)
        given: list[PartitionDevice] = []
        for resource, count in sorted(asks.items()):
            for _ in range(count):
                device = self.first_fit(resource, left)
                if device is None:
                    return None
                given.append(device)
                left = take(left, device)
        return given

    def decompose(self, free: Mapping[Counter, int]) -> list[PartitionDevice]:
        """The free counters cut into devices, the largest that fits first (ties: the allocator's order)."""
        left = dict(free)
        cut: list[PartitionDevice] = []
        for device in sorted(self.devices, key=lambda d: tuple(-share for share in self.size(d))):
            if device.fits(left):
                cut.append(device)
                left = take(left, device)
        return cut

    def size(self, device: PartitionDevice) -> tuple[float, float]:
        """(largest, summed) share of its counter set's counters the device consumes."""
        capacity = dict(self.capacity)
        shares = [amount / capacity[c] for c, amount in device.consumes if capacity.get(c)]
        return (max(shares, default=0.0), sum(shares))

    def free_share(self) -> float:
        """The free counters in GPUs: each counter set one GPU, free as the mean share of its counters left (6 of 8
        memory slices: 0.75)."""
        free = self.free()
        shares: dict[str, list[float]] = {}
        for counter, amount in self.capacity:
            shares.setdefault(counter[0], []).append(free.get(counter, 0) / amount if amount else 0.0)
        return math.fsum(math.fsum(s) / len(s) for s in shares.values())

    def whole_free_sets(self, free: Mapping[Counter, int]) -> list[str]:
        busy = {counter[0] for counter, amount in self.capacity if free.get(counter, 0) < amount}
        return [gpu for gpu in self.gpus if gpu not in busy]

    def with_held(self, held: Iterable[tuple[str, str]]) -> Partitions:
        return replace(self, held=tuple(sorted(held)))


def take(free: Mapping[Counter, int], device: PartitionDevice) -> dict[Counter, int]:
    left = dict(free)
    for counter, amount in device.consumes:
        left[counter] = left.get(counter, 0) - amount
    return left


def give_back(free: Mapping[Counter, int], device: PartitionDevice) -> dict[Counter, int]:
    left = dict(free)
    for counter, amount in device.consumes:
        left[counter] = left.get(counter, 0) + amount
    return left

"""The model's nodes and pods once DRA is applied: nodes with their devices, pods with their claims' devices.

Apart from reading the objects (``inventory``, ``claims``) because this is where DRA meets the rest of the model:
a DRA node gets the allocatable, GPU info and pool a device-plugin node with the same GPUs would have (its
partitionable devices cut as ``Partitions.decompose`` cuts them), a pod its claims' devices in its requests, and both
the model-only labels and node selectors that keep a moved pod on nodes that can serve it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

import msgspec

from compactor.model.dra import DEVICE_PLUGIN_LABEL, DRA_LABEL_PREFIX, Device, DriverMapping
from compactor.model.dra.inventory import Inventory
from compactor.model.gpu import COUNT_LABEL, PRODUCT_LABEL, derive_gpu_info
from compactor.model.parse import node_pool
from compactor.model.partitions import Partitions
from compactor.model.resources import GPU, MIG_PREFIX, Resources
from compactor.model.types import Node, Pod


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
    taken: dict[str, int] = defaultdict(int)  # resource -> devices: sized by the resources, never by a claim's count
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
                    taken[device.resource] += 1
        elif pod.node_name:
            understood = False  # bound without an allocation: not something the model can explain
        else:
            for _, device_class, count, mode, profile in claim.requests:
                mapping, kind = classes.get(device_class, (None, ""))
                if mapping is None or mode != "ExactCount" or (kind == MIG_PREFIX and not profile):
                    understood = False  # all devices, a class not mapped, a MIG device of no profile said plainly
                    continue
                taken[GPU if kind == GPU else MIG_PREFIX + profile] += count
                drivers.add(mapping.driver)
    selector = dict(pod.node_selector)
    if template and understood:
        selector |= {DRA_LABEL_PREFIX + d: "true" for d in drivers}
    return msgspec.structs.replace(
        pod,
        requests=pod.requests + Resources(taken),
        node_selector=tuple(sorted(selector.items())),
        dra_gpus=understood,
        partitioned=partitioned,
    )

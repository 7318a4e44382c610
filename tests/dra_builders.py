"""Dynamic Resource Allocation objects for tests, as the API server serves them (``resource.k8s.io/v1``) and as NVIDIA's DRA
driver (``gpu.nvidia.com``) publishes its devices: whole GPUs ``gpu-<i>`` (type ``gpu``), MIG devices
``gpu-<i>-mig-<profile>-<n>`` (type ``mig``, ``parentUUID``, ``profile``).

``dra_node`` is a node whose GPUs are in a ResourceSlice, not in its allocatable; ``dra_pod`` a pod whose GPUs come from
claims: a template claim (the one the resourceclaim controller made for it) or a named claim several pods may share;
``gpu_claim`` the claim, allocated to devices of the node's pool or waiting (pending pods).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from compactor.metrics.fragmentation import compute_figures
from compactor.model.types import Snapshot
from tests.builders import A100_40, A100_80, node, pod

DRIVER = "gpu.nvidia.com"


def twin_figures(snapshot: Snapshot) -> dict[str, Any]:
    """The figures a DRA cluster and its device-plugin twin must share: the cluster's and each pool's, blocked demand."""
    figures = compute_figures(snapshot)
    return {
        "cluster": dataclasses.asdict(figures.cluster),
        "pools": [dataclasses.asdict(p) for p in figures.pools],
        "blocked": figures.blocked_demand_gpus,
        "pending": figures.pending_gpu_pods,
    }


def dra_node(name: str, *, gpus: int = 8, product: str = A100_40, **kwargs: Any) -> list[dict[str, Any]]:
    """The node (no GPU in its allocatable, no GPU label) and the ResourceSlice of its ``gpus`` whole GPUs."""
    return [node(name, **kwargs), gpu_slice(name, gpus=gpus, product=product)]


def gpu_slice(
    on: str,
    *,
    gpus: int = 8,
    product: str = A100_40,
    mig: dict[int, list[str]] | None = None,
    pool: str | None = None,
    generation: int = 1,
    slices: int = 1,
    name: str | None = None,
) -> dict[str, Any]:
    """One ResourceSlice of pool ``pool`` (default: the node's name): whole GPUs ``gpu-0..``, except those ``mig`` carves
    (GPU index -> profiles), whose MIG devices it lists instead."""
    devices: list[dict[str, Any]] = []
    for index in range(gpus):
        uuid = f"GPU-{on}-{index}"
        if mig and index in mig:
            for n, profile in enumerate(mig[index]):
                devices.append(
                    _device(
                        f"gpu-{index}-mig-{profile}-{n}",
                        "mig",
                        f"MIG-{on}-{index}-{n}",
                        product,
                        parent=uuid,
                        profile=profile,
                    )
                )
        else:
            devices.append(_device(f"gpu-{index}", "gpu", uuid, product))
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name or f"{on}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": on,
            "pool": {"name": pool or on, "generation": generation, "resourceSliceCount": slices},
            "devices": devices,
        },
    }


def _device(name: str, kind: str, uuid: str, product: str, **extra: str) -> dict[str, Any]:
    attributes = {"type": kind, "uuid": uuid, "productName": product, **extra}
    if "parent" in attributes:
        attributes["parentUUID"] = attributes.pop("parent")
    return {"name": name, "attributes": {k: {"string": v} for k, v in attributes.items()}}


def device_class(name: str = DRIVER, *, extended: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]}
    if extended:
        spec["extendedResourceName"] = extended
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def gpu_claim(
    name: str,
    *,
    namespace: str = "default",
    devices: list[tuple[str, str]] = (),  # type: ignore[assignment]
    for_pods: list[str] = (),  # type: ignore[assignment]
    count: int | None = None,
    device_class_name: str = DRIVER,
    admin: bool = False,
) -> dict[str, Any]:
    """A ResourceClaim for ``count`` devices (default: as many as ``devices``), allocated to ``devices`` ((pool, device)
    pairs) and reserved for ``for_pods``; not allocated when ``devices`` is empty."""
    exactly: dict[str, Any] = {
        "deviceClassName": device_class_name,
        "allocationMode": "ExactCount",
        "count": count if count is not None else max(1, len(devices)),
    }
    if admin:
        exactly["adminAccess"] = True
    status: dict[str, Any] = {}
    if devices:
        status["allocation"] = {
            "devices": {
                "results": [
                    {
                        "request": "gpus",
                        "driver": DRIVER,
                        "pool": pool,
                        "device": device,
                        **({"adminAccess": True} if admin else {}),
                    }
                    for pool, device in devices
                ]
            }
        }
    if for_pods:
        status["reservedFor"] = [{"resource": "pods", "name": p, "uid": f"uid-{p}"} for p in for_pods]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}},
        "status": status,
    }


def dra_pod(name: str, *, claim: str | None = None, shared: str | None = None, **kwargs: Any) -> dict[str, Any]:
    """A pod asking no GPU in its containers, with a template claim made for it under the name ``claim`` (or not made
    yet: ``claim=""``) and/or the named claim ``shared``."""
    made = pod(name, **kwargs)
    entries, statuses = [], []
    if claim is not None:
        entries.append({"name": "gpus", "resourceClaimTemplateName": "gpus"})
        if claim:
            statuses.append({"name": "gpus", "resourceClaimName": claim})
    if shared is not None:
        entries.append({"name": "shared", "resourceClaimName": shared})
    made["spec"]["resourceClaims"] = entries
    made["spec"]["containers"][0]["resources"]["claims"] = [{"name": e["name"]} for e in entries]
    if statuses:
        made["status"]["resourceClaimStatuses"] = statuses
    return made


# Dynamic MIG on an A100-80GB as NVIDIA's driver models it: one counter set per GPU (its 8 memory slices), and every
# placement of every profile (and the whole GPU) a device consuming the slices it covers. (profile, size, starts)
A100_80_PLACEMENTS = (
    ("1g.10gb", 1, (0, 1, 2, 3, 4, 5, 6)),
    ("2g.20gb", 2, (0, 2, 4)),
    ("3g.40gb", 4, (0, 4)),
    ("4g.40gb", 4, (0,)),
    ("7g.80gb", 8, (0,)),
)


def partition_slices(on: str, *, gpus: int = 1, product: str = A100_80) -> list[dict[str, Any]]:
    """The two ResourceSlices of a node's partitionable GPUs (pool ``on``): the counters (``gpu-<i>-counters``, slots
    ``memory-slice-0..7``) and the devices: ``gpu-<i>`` (the whole GPU, all 8 slots) and ``gpu-<i>-mig-<profile>-<start>``
    (dots as dashes: device names are DNS labels)
    for each placement, in that order."""
    counters, devices = [], []
    for index in range(gpus):
        uuid, counter_set = f"GPU-{on}-{index}", f"gpu-{index}-counters"
        counters.append({"name": counter_set, "counters": {f"memory-slice-{s}": {"value": "1"} for s in range(8)}})
        whole = _device(f"gpu-{index}", "gpu", uuid, product)
        devices.append({**whole, "consumesCounters": [_slots(counter_set, 0, 8)]})
        for profile, size, starts in A100_80_PLACEMENTS:
            for start in starts:
                mig = _device(
                    f"gpu-{index}-mig-{profile.replace('.', '-')}-{start}",
                    "mig",
                    f"{uuid}-{start}",
                    product,
                    parent=uuid,
                    profile=profile,
                )
                devices.append({**mig, "consumesCounters": [_slots(counter_set, start, size)]})
    pool = {"name": on, "generation": 1, "resourceSliceCount": 2}
    return [
        _slice(f"{on}-counters", {"nodeName": on, "pool": pool, "sharedCounters": counters}),
        _slice(f"{on}-devices", {"nodeName": on, "pool": pool, "devices": devices}),
    ]


def _slots(counter_set: str, start: int, size: int) -> dict[str, Any]:
    return {
        "counterSet": counter_set,
        "counters": {f"memory-slice-{s}": {"value": "1"} for s in range(start, start + size)},
    }


def _slice(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {"driver": DRIVER, **spec},
    }


def partition_node(name: str, *, gpus: int = 1, **kwargs: Any) -> list[dict[str, Any]]:
    return [node(name, **kwargs), *partition_slices(name, gpus=gpus)]


def mig_claim(
    name: str, *, profile: str = "1g.10gb", on: str | None = None, device: str = "", **kwargs: Any
) -> dict[str, Any]:
    """A claim for one MIG device of ``profile`` (class ``mig.nvidia.com``, the profile in a CEL selector), allocated to
    ``device`` of node ``on``'s pool when given."""
    claim = gpu_claim(
        name, devices=[(on, device)] if on and device else [], count=1, device_class_name="mig.nvidia.com", **kwargs
    )
    claim["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
        {"cel": {"expression": f'device.attributes["{DRIVER}"].profile == "{profile}"'}}
    ]
    return claim

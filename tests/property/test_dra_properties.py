"""DRA mapping properties on random clusters (issue [19]): whatever the devices and claims, a cluster whose GPUs are
allocated through Dynamic Resource Allocation has the figures of its device-plugin twin.

Each example draws 1-5 GPU nodes (4 or 8 GPUs, some carved into static MIG devices), pods allocated first fit to free
devices (whole GPUs or one MIG device), some pods sharing one named claim, some claims with admin access on top, some
pools republished (an extra slice of a newer generation that is not complete yet), and pending pods whose claims wait.
The twin is built from the same draw: the devices in allocatable (the MIG ones as the mixed strategy names them), each
pod's devices as its requests (a shared device on the first consumer by name, admin access nothing).

``DRA_PROPERTY_EXAMPLES`` sets the number of examples (default 50).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, note
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from compactor.app.plan_document import build_plan
from compactor.metrics.fragmentation import compute_figures
from compactor.planner.request import PlanRequest
from compactor.settings.bundles import PlannerSettings
from tests.builders import A100_40, cluster, node, pod
from tests.dra_builders import (
    A100_80_PLACEMENTS,
    device_class,
    dra_pod,
    gpu_claim,
    gpu_slice,
    mig_claim,
    partition_slices,
    twin_figures,
)

PROPERTY = hsettings(
    max_examples=int(os.environ.get("DRA_PROPERTY_EXAMPLES", "50")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
NOW = datetime(2026, 1, 1, tzinfo=UTC)
MIG_LAYOUTS = [["1g.5gb"] * 7, ["3g.20gb", "4g.20gb"], ["2g.10gb"] * 3]


@st.composite
def dra_and_twin(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    dra: list[dict[str, Any]] = []
    twin: list[dict[str, Any]] = []
    for n in range(draw(st.integers(1, 5))):
        name, gpus = f"gpu-{n}", draw(st.sampled_from([4, 8]))
        carved = {i: draw(st.sampled_from(MIG_LAYOUTS)) for i in range(gpus) if draw(st.integers(0, 3)) == 0}
        dra += [node(name), gpu_slice(name, gpus=gpus, mig=carved)]
        if draw(st.booleans()):  # a pool being republished: a newer generation, one of two slices so far
            dra.append(gpu_slice(name, gpus=gpus, generation=2, slices=2, pool=f"{name}-next", name=f"{name}-next"))
        mig_counts: dict[str, int] = {}
        for layout in carved.values():
            for profile in layout:
                mig_counts[profile] = mig_counts.get(profile, 0) + 1
        twin.append(node(name, gpus=gpus - len(carved), mig=mig_counts or None, physical_gpus=gpus))
        free = [f"gpu-{i}" for i in range(gpus) if i not in carved]
        free_mig = [(f"gpu-{i}-mig-{p}-{k}", p) for i, layout in carved.items() for k, p in enumerate(layout)]
        for p in range(draw(st.integers(0, 4))):
            pod_name = f"{name}-p{p}"
            if free_mig and draw(st.booleans()):
                device, profile = free_mig.pop(0)
                dra += [
                    dra_pod(pod_name, on=name, claim=f"{pod_name}-c"),
                    gpu_claim(f"{pod_name}-c", devices=[(name, device)], for_pods=[pod_name]),
                ]
                twin.append(pod(pod_name, on=name, mig=profile))
                continue
            count = draw(st.integers(1, 3))
            if len(free) < count:
                continue
            taken, free = free[:count], free[count:]
            dra += [
                dra_pod(pod_name, on=name, claim=f"{pod_name}-c"),
                gpu_claim(f"{pod_name}-c", devices=[(name, d) for d in taken], for_pods=[pod_name]),
            ]
            twin.append(pod(pod_name, on=name, gpus=count))
        if free and draw(st.booleans()):  # two pods sharing one named claim of one GPU: counted once, on the first
            device = free.pop(0)
            shared = f"{name}-shared"
            dra += [dra_pod(f"{name}-s{i}", on=name, shared=shared) for i in (0, 1)]
            dra.append(gpu_claim(shared, devices=[(name, device)], for_pods=[f"{name}-s0", f"{name}-s1"]))
            twin += [pod(f"{name}-s0", on=name, gpus=1), pod(f"{name}-s1", on=name)]
        if draw(st.booleans()):  # a monitor with admin access to every whole GPU: consumes nothing
            devices = [(name, f"gpu-{i}") for i in range(gpus) if i not in carved]
            if devices:
                dra += [
                    dra_pod(f"{name}-monitor", on=name, claim=f"{name}-monitor-c"),
                    gpu_claim(f"{name}-monitor-c", devices=devices, for_pods=[f"{name}-monitor"], admin=True),
                ]
                twin.append(pod(f"{name}-monitor", on=name))
    for p in range(draw(st.integers(0, 2))):  # pending: claims not allocated yet
        count = draw(st.sampled_from([1, 2, 4, 8]))
        dra += [dra_pod(f"pending-{p}", claim=f"pending-{p}-c"), gpu_claim(f"pending-{p}-c", count=count)]
        twin.append(pod(f"pending-{p}", gpus=count))
    return dra, twin


@PROPERTY
@given(dra_and_twin())
def test_a_dra_cluster_has_its_device_plugin_twins_figures(
    drawn: tuple[list[dict[str, Any]], list[dict[str, Any]]],
) -> None:
    dra_objects, twin_objects = drawn
    dra, twin = cluster(*dra_objects), cluster(*twin_objects)
    note(f"dra nodes {[(n.name, n.allocatable.gpu_part()) for n in dra.nodes]}")
    assert twin_figures(dra) == twin_figures(twin)
    for ours, theirs in zip(sorted(dra.pods, key=lambda p: p.key), sorted(twin.pods, key=lambda p: p.key), strict=True):
        assert ours.requests.gpu_part() == theirs.requests.gpu_part(), ours.key
    assert {n.pool for n in dra.nodes} == {A100_40}


# Partitionable devices (dynamic MIG): the plan's devices are the ones kube-scheduler's first fit gives.
PLACEMENTS = {profile: (size, starts) for profile, size, starts in A100_80_PLACEMENTS}


def _first_fit(slots: set[int], profile: str) -> int | None:
    """The start kube-scheduler allocates for ``profile`` on a GPU whose memory slices ``slots`` are taken: the first
    placement, in the published order, whose slices are all free (an emulation of its own, by slot sets)."""
    size, starts = PLACEMENTS[profile]
    return next((s for s in starts if not slots & set(range(s, s + size))), None)


@st.composite
def scattered_partitions(draw: st.DrawFn) -> tuple[list[dict[str, Any]], str]:
    """1-4 nodes of one partitionable A100-80GB, each with 1g/2g pods allocated first fit after random others left (so
    the survivors are scattered), and 1-2 pending pods of a larger profile; the objective (max-free drains nodes)."""
    objects: list[dict[str, Any]] = [device_class(), device_class("mig.nvidia.com")]
    for n in range(draw(st.integers(1, 4))):
        name = f"p-{n}"
        objects += [node(name), *partition_slices(name)]
        slots: set[int] = set()
        for i in range(draw(st.integers(0, 5))):
            profile = draw(st.sampled_from(["1g.10gb", "1g.10gb", "2g.20gb"]))
            start = _first_fit(slots, profile)
            if start is None:
                continue
            size = PLACEMENTS[profile][0]
            slots |= set(range(start, start + size))
            if draw(st.booleans()):  # this one stays; the others left and freed their slices
                pod_name = f"{name}-{i}"
                device = f"gpu-0-mig-{profile.replace('.', '-')}-{start}"
                objects += [
                    dra_pod(pod_name, on=name, claim=f"{pod_name}-c", owner=f"ReplicaSet/{pod_name}"),
                    mig_claim(f"{pod_name}-c", profile=profile, on=name, device=device, for_pods=[pod_name]),
                ]
            else:
                slots -= set(range(start, start + size))
    for k in range(draw(st.integers(1, 2))):
        profile = draw(st.sampled_from(["3g.40gb", "4g.40gb", "2g.20gb"]))
        objects += [
            dra_pod(f"wait-{k}", claim=f"wait-{k}-c", owner=f"ReplicaSet/wait-{k}"),
            mig_claim(f"wait-{k}-c", profile=profile),
        ]
    return objects, draw(st.sampled_from(["balanced", "max-free"]))  # max-free drains nodes too


@PROPERTY
@given(scattered_partitions())
def test_partition_plans_name_the_devices_first_fit_gives_and_never_overlap(
    drawn: tuple[list[dict[str, Any]], str],
) -> None:
    objects, objective = drawn
    snapshot = cluster(*objects)
    settings = PlannerSettings.of(min_replicas=1, time_limit_seconds=5, objective=objective)
    plan = build_plan(PlanRequest.of(snapshot, settings, source="p", now=NOW))
    note(str(plan.model_dump(by_alias=True, include={"moves", "placed_pending"})))
    occupied = {
        n.name: {s for name, _ in n.partitions.held for s in _slots_of(name)}
        for n in snapshot.nodes
        if n.partitions is not None
    }
    sources = {m.from_node for m in plan.moves}
    # kube-scheduler binds at once the pending pods that fit now (on nodes no move leaves); then the run makes its moves
    # in plan order, and places the pods they made room for
    for placement in [p for p in plan.placed_pending if p.to_node not in sources]:
        _allocate(occupied, placement.to_node, placement.devices, placement)
    for move in plan.moves:
        leaving = {
            s
            for name, pod in snapshot.node_by_name()[move.from_node].partitions.held
            if pod == move.pod
            for s in _slots_of(name)
        }
        occupied[move.from_node] -= leaving
        _allocate(occupied, move.to_node, move.devices, move)
    for placement in [p for p in plan.placed_pending if p.to_node in sources]:
        _allocate(occupied, placement.to_node, placement.devices, placement)
    # after the plan, the pods it places are bound, and what it moved did not block what was placeable before
    after = plan.after["blockedPending"] + plan.after["unplaceablePending"]
    assert not {p.pod for p in plan.placed_pending} & {b["pod"] for b in after}
    placeable_before = {p.key for p in snapshot.pending_pods()} - {
        b.pod for b in (*compute_figures(snapshot).blocked_pending, *compute_figures(snapshot).unplaceable_pending)
    }
    if len(placeable_before) == len(snapshot.pending_pods()) == 1:
        assert [p.pod for p in plan.placed_pending] == sorted(placeable_before)


def _allocate(occupied: dict[str, set[int]], node: str, devices: list[str], what: object) -> None:
    """The one device planned is the one first fit gives on ``node`` now; it is taken."""
    (device,) = devices
    profile = _profile_of(device)
    start = _first_fit(occupied[node], profile)
    assert start is not None and _slots_of(device) == set(range(start, start + PLACEMENTS[profile][0])), what
    occupied[node] |= _slots_of(device)


def _profile_of(device: str) -> str:
    _, _, _, g, memory, _ = device.split("-")  # gpu-0-mig-3g-40gb-4
    return f"{g}.{memory}"


def _slots_of(device: str) -> set[int]:
    profile, start = _profile_of(device), int(device.rsplit("-", 1)[1])
    return set(range(start, start + PLACEMENTS[profile][0]))

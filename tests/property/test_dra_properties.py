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
from typing import Any

from hypothesis import HealthCheck, given, note
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from tests.builders import A100_40, cluster, node, pod
from tests.dra_builders import dra_pod, gpu_claim, gpu_slice, twin_figures

PROPERTY = hsettings(
    max_examples=int(os.environ.get("DRA_PROPERTY_EXAMPLES", "50")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
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

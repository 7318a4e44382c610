"""GPUs allocated through Dynamic Resource Allocation, read from ResourceSlices and ResourceClaims (issue [19]).

Each cluster here has a device-plugin twin: the same GPUs in ``status.allocatable`` and the same pods asking
``nvidia.com/gpu``. The figures must be the same, pool by pool; the planner must move a DRA pod as it moves its twin and
keep in place what it cannot reason about, saying why.
"""

from __future__ import annotations

from typing import Any

import pytest

from compactor.app.plan_document import build_plan
from compactor.errors import InputError
from compactor.metrics.fragmentation import compute_figures
from compactor.model.dra import DRA_LABEL_PREFIX
from compactor.model.load import build_snapshot
from compactor.model.types import Snapshot
from compactor.planner.request import PlanRequest
from compactor.planner.rules.movability import Unmovable
from compactor.settings.bundles import PlannerSettings
from tests.builders import A100_40, cluster, node, pdb, pod
from tests.dra_builders import DRIVER, device_class, dra_node, dra_pod, gpu_claim, gpu_slice, twin_figures

NOW = __import__("datetime").datetime(2026, 1, 1, tzinfo=__import__("datetime").UTC)


def devices(on: str, *indexes: int) -> list[tuple[str, str]]:
    return [(on, f"gpu-{i}") for i in indexes]


def twin_device_plugin() -> Snapshot:
    return cluster(
        node("gpu-1", gpus=8),
        node("gpu-2", gpus=8),
        node("cpu-1"),
        pod("a", on="gpu-1", gpus=2, owner="ReplicaSet/a"),
        pod("b", on="gpu-2", gpus=4, owner="ReplicaSet/b"),
        pod("c", on="gpu-2", gpus=1, owner="ReplicaSet/c"),
        pod("big", gpus=8, owner="ReplicaSet/big"),
        pod("web", on="cpu-1", owner="ReplicaSet/web"),
    )


def twin_dra() -> Snapshot:
    return cluster(
        *dra_node("gpu-1"),
        *dra_node("gpu-2"),
        node("cpu-1"),
        device_class(),
        dra_pod("a", on="gpu-1", claim="a-gpus", owner="ReplicaSet/a"),
        gpu_claim("a-gpus", devices=devices("gpu-1", 0, 1), for_pods=["a"]),
        dra_pod("b", on="gpu-2", claim="b-gpus", owner="ReplicaSet/b"),
        gpu_claim("b-gpus", devices=devices("gpu-2", 0, 1, 2, 3), for_pods=["b"]),
        dra_pod("c", on="gpu-2", claim="c-gpus", owner="ReplicaSet/c"),
        gpu_claim("c-gpus", devices=devices("gpu-2", 4), for_pods=["c"]),
        dra_pod("big", claim="big-gpus", owner="ReplicaSet/big"),
        gpu_claim("big-gpus", count=8),
        pod("web", on="cpu-1", owner="ReplicaSet/web"),
    )


def test_a_dra_cluster_has_the_figures_of_its_device_plugin_twin() -> None:
    dra, twin = twin_dra(), twin_device_plugin()
    assert twin_figures(dra) == twin_figures(twin)
    gpu_1 = dra.node_by_name()["gpu-1"]
    assert (gpu_1.pool, gpu_1.gpu.physical_gpus, gpu_1.allocatable["nvidia.com/gpu"]) == (A100_40, 8, 8)
    assert gpu_1.labels[DRA_LABEL_PREFIX + DRIVER] == "true"
    assert not [w for w in dra.warnings if "more requested than allocatable" in w]


def test_a_mixed_cluster_counts_both_kinds_of_node() -> None:
    mixed = cluster(
        *dra_node("gpu-1"),
        node("gpu-2", gpus=8),
        dra_pod("a", on="gpu-1", claim="a-gpus"),
        gpu_claim("a-gpus", devices=devices("gpu-1", 0, 1, 2), for_pods=["a"]),
        pod("b", on="gpu-2", gpus=3),
    )
    figures = compute_figures(mixed)
    assert figures.cluster.whole_free_gpus == 0 and [p.name for p in figures.pools] == [A100_40]
    (pool,) = figures.pools
    assert pool.gpus == 16 and pool.allocated_gpus == pytest.approx(6)


def test_an_incomplete_pool_is_reported_and_not_counted() -> None:
    snapshot = cluster(
        node("gpu-1"),
        gpu_slice("gpu-1", gpus=4, slices=2, name="half-1"),  # 1 of 2 slices at generation 1
        gpu_slice("gpu-1", gpus=8, generation=0, name="stale"),  # an older generation is never counted
    )
    assert snapshot.node_by_name()["gpu-1"].gpu.physical_gpus == 0
    assert any(
        "DRA pool gpu-1 of driver gpu.nvidia.com: 1 of 2 ResourceSlice(s) at generation 1" in w
        for w in snapshot.warnings
    )


def test_admin_access_consumes_nothing_and_a_shared_device_counts_once() -> None:
    snapshot = cluster(
        *dra_node("gpu-1"),
        dra_pod("monitor", on="gpu-1", claim="monitor-gpus"),
        gpu_claim("monitor-gpus", devices=devices("gpu-1", 0, 1, 2, 3, 4, 5, 6, 7), for_pods=["monitor"], admin=True),
        dra_pod("x", on="gpu-1", shared="team-gpu"),
        dra_pod("y", on="gpu-1", shared="team-gpu"),
        gpu_claim("team-gpu", devices=devices("gpu-1", 0), for_pods=["x", "y"]),
    )
    pods = {p.name: p for p in snapshot.pods}
    assert pods["monitor"].requests.get("nvidia.com/gpu") == 0
    assert (pods["x"].requests.get("nvidia.com/gpu"), pods["y"].requests.get("nvidia.com/gpu")) == (1, 0)
    assert compute_figures(snapshot).cluster.allocated_gpus == pytest.approx(1)


def plan_of(snapshot: Snapshot) -> Any:
    return build_plan(PlanRequest.of(snapshot, PlannerSettings.of(min_replicas=1), source="test", now=NOW))


def test_a_template_claim_pod_moves_like_its_twin_and_only_onto_a_node_of_its_driver() -> None:
    snapshot = cluster(
        *dra_node("gpu-1"),
        *dra_node("gpu-2"),
        node("plugin-1", gpus=8),  # a device-plugin node with room: a template claim cannot be served there
        pod("pin", on="plugin-1", gpus=6, owner=None),
        pod("anchor", on="gpu-1", cpu="1", owner=None),
        dra_pod("anchor-gpu", on="gpu-1", claim="anchor-gpus", owner=None),
        gpu_claim("anchor-gpus", devices=devices("gpu-1", 0, 1, 2, 3, 4, 5), for_pods=["anchor-gpu"]),
        dra_pod("m", on="gpu-2", claim="m-gpus", owner="ReplicaSet/m"),
        gpu_claim("m-gpus", devices=devices("gpu-2", 0, 1), for_pods=["m"]),
    )
    plan = plan_of(snapshot)
    assert [(m.pod, m.from_node, m.to_node) for m in plan.moves] == [("default/m", "gpu-2", "gpu-1")]
    assert plan.freed_nodes == ["gpu-2"]


def test_pods_the_planner_cannot_reason_about_stay_and_say_why() -> None:
    snapshot = cluster(
        *dra_node("gpu-1"),
        *dra_node("gpu-2"),
        dra_pod("x", on="gpu-2", shared="team-gpu", owner="ReplicaSet/x"),
        gpu_claim("team-gpu", devices=devices("gpu-2", 0), for_pods=["x"]),
        dra_pod("y", on="gpu-2", claim="", owner="ReplicaSet/y"),  # its claim not made (or not in the snapshot)
    )
    reasons = plan_of(snapshot).explanations["unmovablePods"]
    assert Unmovable.SHARED_CLAIM.value in reasons and Unmovable.RESOURCE_CLAIMS.value in reasons


def test_a_pending_template_claim_pod_is_blocked_demand_and_gets_placed_by_moves() -> None:
    snapshot = cluster(
        *dra_node("gpu-1"),
        *dra_node("gpu-2"),
        dra_pod("a", on="gpu-1", claim="a-gpus", owner="ReplicaSet/a"),
        gpu_claim("a-gpus", devices=devices("gpu-1", 0, 1), for_pods=["a"]),
        dra_pod("b", on="gpu-2", claim="b-gpus", owner="ReplicaSet/b"),
        gpu_claim("b-gpus", devices=devices("gpu-2", 0, 1), for_pods=["b"]),
        dra_pod("big", claim="big-gpus", owner="ReplicaSet/big"),
        gpu_claim("big-gpus", count=8),
        pdb("a", match={"app": "a"}, max_unavailable=1),
        pdb("b", match={"app": "b"}, max_unavailable=1),
    )
    assert compute_figures(snapshot).blocked_demand_gpus == pytest.approx(8)
    plan = plan_of(snapshot)
    assert [p.pod for p in plan.placed_pending] == ["default/big"] and len(plan.moves) == 1


def test_static_mig_devices_count_as_the_device_plugins_mig_resources_grouped_by_their_gpu() -> None:
    """GPU 0 carved into seven 1g.5gb devices, GPU 1 into a 3g.20gb and a 4g.20gb, GPUs 2-7 whole: as the mixed
    strategy's device plugin advertises them, one pod on a 1g.5gb device each side."""
    carved = {0: ["1g.5gb"] * 7, 1: ["3g.20gb", "4g.20gb"]}
    dra = cluster(
        node("gpu-1"),
        gpu_slice("gpu-1", gpus=8, mig=carved),
        dra_pod("small", on="gpu-1", claim="small-mig"),
        gpu_claim("small-mig", devices=[("gpu-1", "gpu-0-mig-1g.5gb-0")], for_pods=["small"]),
    )
    twin = cluster(
        node("gpu-1", gpus=6, mig={"1g.5gb": 7, "3g.20gb": 1, "4g.20gb": 1}, physical_gpus=8),
        pod("small", on="gpu-1", mig="1g.5gb"),
    )
    (gpu_1,) = dra.nodes
    assert gpu_1.allocatable.gpu_part() == twin.nodes[0].allocatable.gpu_part()
    assert gpu_1.gpu.physical_gpus == 8 and dra.pods[0].requests.gpu_part() == twin.pods[0].requests.gpu_part()
    assert twin_figures(dra) == twin_figures(twin)


@pytest.mark.parametrize("extended", [False, True])
def test_a_device_plugin_pod_goes_to_dra_nodes_only_when_a_device_class_serves_its_resource(extended: bool) -> None:
    snapshot = cluster(
        *dra_node("dra-1"),
        node("plugin-1", gpus=8),
        node("plugin-2", gpus=8),
        pod("pin", on="plugin-1", gpus=7, owner=None),
        pod("m", on="plugin-2", gpus=2, owner="ReplicaSet/m"),
        dra_pod("resident", on="dra-1", claim="resident-gpus", owner=None),  # dra-1 is busy already: room for m
        gpu_claim("resident-gpus", devices=devices("dra-1", 0, 1), for_pods=["resident"]),
        *([device_class(extended="nvidia.com/gpu")] if extended else [device_class()]),
    )
    plan = plan_of(snapshot)
    # plugin-1 has 1 GPU free: m (2 GPUs) can only leave plugin-2 for the DRA node, and only if a class serves it there
    assert [(m.pod, m.to_node) for m in plan.moves] == ([("default/m", "dra-1")] if extended else [])


def test_at_its_eviction_a_template_claim_pod_read_alone_is_not_refused_for_its_claims() -> None:
    """The executor re-reads a planned pod alone, without its ResourceClaims: what they hold was the snapshot's to say;
    a named claim, which the pod's own spec shows, still keeps it."""
    from compactor.model.parse import parse_pod
    from compactor.planner.rules.movability import why_not_evictable

    template = parse_pod(dra_pod("m", on="gpu-2", claim="m-gpus", owner="ReplicaSet/m"), source="live")
    shared = parse_pod(dra_pod("x", on="gpu-2", shared="team-gpu", owner="ReplicaSet/x"), source="live")
    rules = PlannerSettings.of(min_replicas=1)
    assert why_not_evictable(template, None, (), rules, ready_replicas=1) is None
    assert why_not_evictable(shared, None, (), rules, ready_replicas=1) == Unmovable.SHARED_CLAIM


def test_a_claim_asking_a_quadrillion_devices_is_unplaceable_demand_not_an_outage() -> None:
    """Issue 43: a tenant's ResourceClaim of ``count: 10**15`` made every report and plan build a list that long
    (MemoryError). Its count is now a number added to the pod's requests: the pod is larger than any node, said as
    such, and the rest of the cluster is measured and planned as before."""
    snapshot = cluster(
        *dra_node("gpu-1"),
        *dra_node("gpu-2"),
        dra_pod("a", on="gpu-1", claim="a-gpus", owner="ReplicaSet/a"),
        gpu_claim("a-gpus", devices=devices("gpu-1", 0, 1), for_pods=["a"]),
        dra_pod("b", on="gpu-2", claim="b-gpus", owner="ReplicaSet/b"),
        gpu_claim("b-gpus", devices=devices("gpu-2", 0, 1), for_pods=["b"]),
        dra_pod("hostile", claim="huge", owner="ReplicaSet/hostile"),
        gpu_claim("huge", count=10**15),
        pdb("a", match={"app": "a"}, max_unavailable=1),
        pdb("b", match={"app": "b"}, max_unavailable=1),
    )
    figures = compute_figures(snapshot)
    assert [p.pod for p in figures.unplaceable_pending] == ["default/hostile"]
    assert figures.blocked_demand_gpus == 0
    plan = plan_of(snapshot)
    assert plan.placed_pending == [] and plan.freed_nodes in (["gpu-1"], ["gpu-2"])


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("count", "many", "spec.devices.requests[0].exactly.count: must be a whole number above 0, got 'many'"),
        ("count", 0, "spec.devices.requests[0].exactly.count: must be a whole number above 0, got 0"),
        ("requests", ["x"], "spec.devices.requests[0]: must be an object, got str"),
    ],
)
def test_a_claim_field_of_the_wrong_type_is_one_line_naming_the_claim_and_the_field(
    field: str, value: Any, said: str
) -> None:
    claim = gpu_claim("odd", count=1)
    if field == "requests":
        claim["spec"]["devices"]["requests"] = value
    else:
        claim["spec"]["devices"]["requests"][0]["exactly"][field] = value
    with pytest.raises(InputError) as raised:
        cluster(*dra_node("gpu-1"), dra_pod("p", claim="odd", owner="ReplicaSet/p"), claim)
    assert f"resourceclaim default/odd: {said}" in str(raised.value)


def test_a_slice_whose_pool_generation_is_not_a_number_is_one_line_naming_it() -> None:
    piece = gpu_slice("gpu-1")
    piece["spec"]["pool"]["generation"] = "abc"
    with pytest.raises(InputError) as raised:
        cluster(node("gpu-1"), piece)
    assert "spec.pool.generation: must be a whole number, got 'abc'" in str(raised.value)


def test_read_live_an_object_that_cannot_be_decoded_is_left_out_with_a_warning_naming_it() -> None:
    """Issue 43: from a file, an error the user fixes; from a cluster, one tenant's object must not stop every run: it
    is left out, named in a warning, and the rest of the cluster is read (cluster-autoscaler skips what it cannot
    handle)."""
    odd = gpu_claim("odd", count=1)
    odd["spec"]["devices"]["requests"][0]["exactly"]["count"] = "many"
    piece = gpu_slice("gpu-2")
    piece["spec"]["pool"]["generation"] = "abc"
    objects = [*dra_node("gpu-1"), node("gpu-2"), piece, dra_pod("p", claim="odd", owner="ReplicaSet/p"), odd]
    snapshot = build_snapshot(objects, source="cluster prod", live=True)
    said = [w for w in snapshot.warnings if "left out" in w]
    assert len(said) == 2, snapshot.warnings
    assert any("resourceclaim default/odd" in w and "exactly.count" in w for w in said), said
    assert any("spec.pool.generation" in w for w in said), said
    assert sum(n.gpu.physical_gpus for n in snapshot.nodes) == 8, "gpu-1's slice is still read"
    with pytest.raises(InputError):
        build_snapshot(objects, source="cluster.json")

"""GPU nodes crowded by pods without GPUs (issue 17): room is made for every resource a pending pod asks.

A GPU node's free GPUs are no room for an 8-GPU / 48-CPU pod while CPU pods hold its CPUs; a GPU pod displaced to make
that room finds free GPUs elsewhere only beside CPU pods too. The planner moves pods without GPUs like any other, to
nodes without GPUs first, and chains a displaced GPU pod through them (``compactor/planner/search/chains.py``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from compactor.app.plan_document import build_plan
from compactor.model.types import Snapshot
from compactor.planner.objective import Assignment
from compactor.planner.plan import CompactionPlan
from compactor.planner.problem import build_problem
from compactor.planner.request import PlanRequest
from compactor.planner.search.baselines import chain_placement, greedy_drain
from compactor.planner.search.chains import evictions
from compactor.planner.search.loads import Loads
from compactor.settings.bundles import PlannerSettings
from tests.builders import cluster, node, pod
from tests.plancheck import assert_valid

NOW = datetime(2026, 1, 1, tzinfo=UTC)
SETTINGS = PlannerSettings.of(time_limit_seconds=5, min_replicas=1)


def plan_for(snapshot: Snapshot, **overrides: Any) -> CompactionPlan:
    config = SETTINGS.amended(**overrides)
    plan = build_plan(PlanRequest.of(snapshot, config, source="test", now=NOW))
    assert_valid(snapshot, plan, config)
    return plan


def crowded(*, room_on_target: str = "8") -> Snapshot:
    """``g1``'s 7 free GPUs sit beside two 24-CPU pods and one small GPU pod; the pending pod asks all 8 GPUs and 48 of
    its 64 CPUs. ``g2`` has 4 free GPUs for the displaced GPU pod, with ``room_on_target`` CPUs beside them (a CPU pod
    holds the rest); ``c1`` has no GPU and room for CPU pods."""
    used_on_g2 = str(64 - 4 * 12 - int(room_on_target))
    return cluster(
        node("g1", gpus=8, cpu="64"),
        node("g2", gpus=8, cpu="64"),
        node("c1", cpu="64"),
        pod("small", on="g1", gpus=1, cpu="6", owner="ReplicaSet/small"),
        pod("web-a", on="g1", cpu="24", owner="ReplicaSet/web"),
        pod("web-b", on="g1", cpu="24", owner="ReplicaSet/web"),
        *[pod(f"busy-{i}", on="g2", gpus=1, cpu="12", owner="ReplicaSet/busy") for i in range(4)],
        pod("cache", on="g2", cpu=used_on_g2, owner="ReplicaSet/cache"),
        pod("train", gpus=8, cpu="48", owner="Job/train"),
    )


def test_cpu_pods_leave_a_gpu_node_so_a_pending_gpu_pod_fits_there() -> None:
    plan = plan_for(crowded())
    assert [(p.pod, p.to_node) for p in plan.placed_pending] == [("default/train", "g1")]
    moved = {m.pod.split("/")[1]: (m.from_node, m.to_node) for m in plan.moves}
    assert moved["small"] == ("g1", "g2")  # 6 CPUs: fits beside the 8 free on g2
    # 48 CPUs are needed: both web pods leave, for the node without GPUs
    assert moved["web-a"] == ("g1", "c1") and moved["web-b"] == ("g1", "c1")
    assert len(plan.moves) == 3


def test_a_displaced_gpu_pod_goes_where_cpu_pods_first_make_room_for_it() -> None:
    """g2 has the free GPUs but 2 free CPUs: the cache pod moves to c1 first (a chain), then the GPU pod to g2."""
    plan = plan_for(crowded(room_on_target="2"))
    assert [(p.pod, p.to_node) for p in plan.placed_pending] == [("default/train", "g1")]
    order = [(m.pod.split("/")[1], m.from_node, m.to_node) for m in plan.moves]
    assert ("cache", "g2", "c1") in order and ("small", "g1", "g2") in order
    assert order.index(("cache", "g2", "c1")) < order.index(("small", "g1", "g2"))  # room before the arrival


def test_the_chain_baseline_places_what_greedy_drain_cannot() -> None:
    snapshot = crowded(room_on_target="2")
    assert chain_placement(snapshot, SETTINGS).pending_placed == 1
    # cluster-autoscaler's scale-down moves GPU pods only where they fit as they are, and no pod without GPUs
    assert greedy_drain(snapshot, SETTINGS).pending_placed == 0


def test_pods_without_gpus_never_arrive_on_a_node_that_loses_pods() -> None:
    """Such pods land where nothing leaves (nodes without GPUs, full GPU nodes): swaps between two nodes that both
    give and take cannot run one eviction at a time."""
    plan = plan_for(crowded(room_on_target="2"))
    sources = {m.from_node for m in plan.moves}
    assert all(m.to_node not in sources for m in plan.moves if not m.gpu)


def test_evictions_take_the_fewest_pods_that_cover_what_is_missing() -> None:
    snapshot = cluster(
        node("g1", gpus=8, cpu="64"),
        pod("gpu", on="g1", gpus=2, cpu="2", owner="ReplicaSet/gpu"),
        *[pod(f"tiny-{i}", on="g1", cpu="4", owner="ReplicaSet/tiny") for i in range(6)],
        pod("big", on="g1", cpu="30", owner="ReplicaSet/big"),
        pod("want", gpus=8, cpu="40", owner="Job/want"),
    )
    problem = build_problem(snapshot, SETTINGS, max_targets=1)
    loads = Loads(problem, Assignment.unchanged(problem))
    pending = next(t for t in problem.types if t.pending)
    leaving = evictions(problem, loads, 0, pending.items)
    assert leaving is not None
    names = sorted(problem.types[t].representative.name.split("-")[0] for t in leaving)
    # 8 GPUs need the GPU pod gone (2 CPUs); 40 CPUs with 8 free need 32: its 2 and the 30-CPU pod, not eight tiny ones
    assert names == ["big", "gpu"]
    assert evictions(problem, loads, 0, pending.items, gpu_pods=False) is None  # the GPU pod must leave


def crowded_fleet(gpu_nodes: int = 12, cpu_nodes: int = 3, pending: int = 2) -> Snapshot:
    """Every GPU node: three 1-GPU pods (8 CPUs each), 40 of its 64 CPUs held by CPU pods, 5 GPUs free; nodes without
    GPUs with room; pending pods asking 8 GPUs and 32 CPUs, which fit no node as it is."""
    objects: list[dict[str, Any]] = []
    for i in range(gpu_nodes):
        objects.append(node(f"g{i:02}", gpus=8, cpu="64"))
        objects += [pod(f"m{i:02}-{k}", on=f"g{i:02}", gpus=1, cpu="8", owner=f"ReplicaSet/m{k}") for k in range(3)]
        objects += [pod(f"w{i:02}-{k}", on=f"g{i:02}", cpu="10", owner="ReplicaSet/web") for k in range(4)]
    objects += [node(f"c{i}", cpu="96") for i in range(cpu_nodes)]
    objects += [pod(f"train-{k}", gpus=8, cpu="32", owner="Job/train") for k in range(pending)]
    return cluster(*objects)


def test_the_warm_start_makes_room_with_pods_without_gpus() -> None:
    from compactor.planner.search.greedy import greedy

    problem = build_problem(crowded_fleet(), SETTINGS, max_targets=100)
    start = greedy(problem, drain=False)
    assert sum(sum(per_node.values()) for per_node in start.placed.values()) == 2


def test_a_narrowed_model_places_what_the_chain_baseline_places() -> None:
    """Few candidate pods and targets per type (as at thousands of nodes): the search still places both pending pods,
    each on a node whose GPU pods and CPU pods made room."""
    snapshot = crowded_fleet()
    plan = plan_for(snapshot, max_candidate_pods=24, max_targets_per_type=3, objective="pending-only")
    assert len(plan.placed_pending) == chain_placement(snapshot, SETTINGS).pending_placed == 2
    targets = {p.to_node for p in plan.placed_pending}
    assert {m.from_node for m in plan.moves if not m.gpu} & targets  # CPU pods left the nodes that took them


def test_a_node_drained_for_a_pending_pod_is_drained_before_any_node_is_freed() -> None:
    """Issue 42: the pending pod first. g1 and g2 are both emptied (one move and two); the 8-GPU pod waiting gets one,
    the other is freed. The plan's order, which a run cut short by a cap or a window follows, drains the pending pod's
    node first, whichever it is: freed nodes with the fewest moves used to come first."""
    snapshot = cluster(
        node("g1", gpus=8),
        node("g2", gpus=8),
        node("g3", gpus=8),
        node("g4", gpus=8),
        pod("a", on="g1", gpus=1, owner="ReplicaSet/a"),
        pod("b", on="g2", gpus=1, owner="ReplicaSet/b"),
        pod("c", on="g2", gpus=1, owner="ReplicaSet/c"),
        pod("pin-3", on="g3", gpus=6, owner=None),
        pod("pin-4", on="g4", gpus=5, owner=None),
        pod("big", gpus=8, owner="Job/big"),
    )
    plan = plan_for(snapshot, objective="max-free")
    ((pending, drained),) = [(p.pod, p.to_node) for p in plan.placed_pending]
    (freed,) = plan.freed_nodes
    assert pending == "default/big" and {drained, freed} == {"g1", "g2"}
    sources = [m.from_node for m in plan.moves]
    assert sources == sorted(sources, key=lambda n: n != drained) and sources[0] == drained, sources

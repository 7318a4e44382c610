"""The re-target rule (``compactor/planner/search/retarget.py``), on parsed nodes: another node for a move whose target lost its
room, under the plan's rules, and only when the rest of its source's moves still fit (issue 42)."""

from __future__ import annotations

from compactor.model.resources import Resources
from compactor.model.types import Node, Pod
from compactor.planner.search.retarget import NodeUse, Wanted, assign
from tests.builders import cluster, node, pod


def _world() -> tuple[list[Node], dict[str, Pod]]:
    snapshot = cluster(
        node("busy-4", gpus=8),
        node("busy-2", gpus=8),
        node("whole", gpus=8),
        node("cpu", cpu="64"),
        node("tainted", gpus=8, taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]),
        pod("a", on="whole", gpus=2, owner="ReplicaSet/a"),
        pod("b", on="whole", gpus=2, owner="ReplicaSet/b"),
        pod("web", on="whole", cpu="4", owner="ReplicaSet/web"),
    )
    return list(snapshot.nodes), {p.name: p for p in snapshot.pods}


USE = {
    "busy-4": NodeUse(Resources({"nvidia.com/gpu": 4, "cpu": 4000}), True, False),
    "busy-2": NodeUse(Resources({"nvidia.com/gpu": 6, "cpu": 4000}), True, False),
    "tainted": NodeUse(Resources({"nvidia.com/gpu": 1}), True, False),
}


def test_the_best_fit_busy_node_takes_the_move_and_the_next_fits_after_it() -> None:
    nodes, pods = _world()
    lost = Wanted(pods["a"], "elsewhere", keep_planned=False)
    assert assign([lost], nodes, USE, pool="", out_of_reach={"elsewhere"}) == ["busy-2"]  # 2 free: the tightest fit
    both = [lost, Wanted(pods["b"], "busy-2")]  # b's planned target is taken by a's repair: it moves on to busy-4
    assert assign(both, nodes, USE, pool="", out_of_reach={"elsewhere"}) == ["busy-2", "busy-4"]


def test_whole_free_nodes_untolerated_taints_and_nodes_out_of_reach_are_never_chosen() -> None:
    nodes, pods = _world()
    lost = Wanted(pods["a"], "elsewhere", keep_planned=False)
    assert assign([lost], nodes, USE, pool="", out_of_reach={"busy-2", "busy-4"}) is None  # whole and tainted left


def test_one_pod_that_fits_nowhere_gives_the_whole_source_up() -> None:
    nodes, pods = _world()
    full = {**USE, "busy-4": NodeUse(Resources({"nvidia.com/gpu": 8}), True, False)}
    wanted = [Wanted(pods["a"], "elsewhere", keep_planned=False), Wanted(pods["b"], "busy-2")]
    assert assign(wanted, nodes, full, pool="", out_of_reach=set()) is None


def test_a_cpu_only_pod_goes_to_a_node_without_gpus() -> None:
    nodes, pods = _world()
    assert assign([Wanted(pods["web"], "x", keep_planned=False)], nodes, USE, pool="", out_of_reach=set()) == ["cpu"]


def test_a_node_holding_a_required_anti_affinity_is_left_out() -> None:
    nodes, pods = _world()
    guarded = {**USE, "busy-2": NodeUse(USE["busy-2"].requests, True, True)}
    lost = Wanted(pods["a"], "elsewhere", keep_planned=False)
    assert assign([lost], nodes, guarded, pool="", out_of_reach=set()) == ["busy-4"]

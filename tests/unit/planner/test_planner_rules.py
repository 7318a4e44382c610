"""Where a pod may go, the lexicographic objective, the move limits and shape mode, each where it binds.

Every plan produced here must also pass the independent checker (``tests/plancheck``).
Where several plans are optimal the tests assert objective values (freed GPUs,
number of moves, what is placed), not one exact assignment.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from compactor.app.plan_document import build_plan
from compactor.model.types import Snapshot
from compactor.planner.plan import CompactionPlan, Metadata, Move, Placement, SolverReport
from compactor.planner.request import PlanRequest
from compactor.settings.bundles import PlannerSettings
from compactor.settings.shape_syntax import parse_shape
from tests.builders import cluster, node, pod
from tests.plancheck import assert_valid, capacity_of, check_plan, loads_before, total_headroom

NOW = datetime(2026, 1, 1, tzinfo=UTC)
# These tests pin the lexicographic optimum (pending, then freed GPUs, then moves): the max-free point of the curve.
FAST = {
    "time_limit_seconds": 5,
    "workers": 2,
    "objective": "max-free",
    "min_replicas": 1,
}  # the replica guard is tested in test_movability


def settings(**overrides: Any) -> PlannerSettings:
    return PlannerSettings.of(**{**FAST, **overrides})


def plan_for(*objects: dict[str, Any], config: PlannerSettings | None = None) -> tuple[Snapshot, CompactionPlan]:
    snapshot = cluster(*objects)
    cfg = config or settings()
    plan = build_plan(PlanRequest.of(snapshot, cfg, source="test", now=NOW))
    assert_valid(snapshot, plan, cfg)
    assert plan.solver.status == "OPTIMAL"
    return snapshot, plan


def moved(plan: CompactionPlan) -> list[tuple[str, str, str]]:
    return [(m.pod.split("/", 1)[1], m.from_node, m.to_node) for m in plan.moves]


# ======================================================================== where a pod may go
#
# ``src`` runs candidate ``c`` (2 GPUs); ``t`` is the only place it could go (an
# unmovable anchor leaves 2 GPUs free there). When ``t`` is eligible and has room,
# ``c`` moves and ``src`` is freed; when a rule binds, the plan is empty.


def target_case(
    t: dict[str, Any] | None = None,
    c: dict[str, Any] | None = None,
    anchor: dict[str, Any] | None = None,
    **node_kwargs: Any,
) -> CompactionPlan:
    objects = [
        node("t", gpus=8, **(t or {})),
        node("src", gpus=8, **node_kwargs),
        pod("anchor", on="t", gpus=6, owner=None, **(anchor or {})),
        pod("c", **{"on": "src", "gpus": 2, **(c or {})}),
    ]
    return plan_for(*objects)[1]


def assert_goes(plan: CompactionPlan) -> None:
    assert moved(plan) == [("c", "src", "t")]
    assert plan.freed_nodes == ["src"] and plan.freed_gpus == 8


def assert_blocked(plan: CompactionPlan) -> None:
    assert plan.moves == [] and plan.freed_nodes == [] and plan.freed_gpus == 0


def test_eligible_target_receives() -> None:
    assert_goes(target_case())


def test_not_ready_target_is_not_used() -> None:
    assert_blocked(target_case({"ready": False}))


def test_cordoned_target_is_not_used() -> None:
    assert_blocked(target_case({"unschedulable": True}))


def test_excluded_target_is_not_used() -> None:
    assert_blocked(target_case({"labels": {"compactor.io/exclude": "true"}}))


@pytest.mark.parametrize("effect", ["NoSchedule", "NoExecute"])
def test_untolerated_hard_taint_blocks(effect: str) -> None:
    taint = {"key": "dedicated", "value": "infer", "effect": effect}
    assert_blocked(target_case({"taints": [taint]}))
    # A toleration for another value or another effect does not help.
    wrong = [{"key": "dedicated", "operator": "Equal", "value": "train", "effect": effect}]
    assert_blocked(target_case({"taints": [taint]}, {"tolerations": wrong}))


@pytest.mark.parametrize(
    "toleration",
    [
        {"key": "dedicated", "operator": "Equal", "value": "infer", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Exists"},
        {"operator": "Exists"},
    ],
    ids=["equal", "key-exists", "everything"],
)
def test_tolerated_taint_allows(toleration: dict[str, str]) -> None:
    taint = {"key": "dedicated", "value": "infer", "effect": "NoSchedule"}
    assert_goes(target_case({"taints": [taint]}, {"tolerations": [toleration]}))


def test_prefer_no_schedule_taint_does_not_block() -> None:
    assert_goes(target_case({"taints": [{"key": "soft", "value": "", "effect": "PreferNoSchedule"}]}))


def test_node_selector_binds() -> None:
    assert_blocked(target_case({"labels": {"zone": "a"}}, {"node_selector": {"zone": "b"}}))
    assert_goes(target_case({"labels": {"zone": "b"}}, {"node_selector": {"zone": "b"}}))


def _required(*expressions: dict[str, Any], fields: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    term: dict[str, Any] = {}
    if expressions:
        term["matchExpressions"] = list(expressions)
    if fields:
        term["matchFields"] = fields
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def test_required_node_affinity_binds() -> None:
    affinity = _required({"key": "gpu-class", "operator": "In", "values": ["big"]})
    assert_blocked(target_case({"labels": {"gpu-class": "small"}}, {"affinity": affinity}))
    assert_goes(target_case({"labels": {"gpu-class": "big"}}, {"affinity": affinity}))


def test_required_node_affinity_match_fields_binds() -> None:
    only_src = _required(fields=[{"key": "metadata.name", "operator": "In", "values": ["src"]}])
    assert_blocked(target_case(c={"affinity": only_src}))
    not_src = _required(fields=[{"key": "metadata.name", "operator": "NotIn", "values": ["src"]}])
    assert_goes(target_case(c={"affinity": not_src}))


def test_preferred_node_affinity_does_not_bind() -> None:
    preferred = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["elsewhere"]}]},
                }
            ]
        }
    }
    assert_goes(target_case(c={"affinity": preferred}))


def test_ineligible_current_node_of_a_sibling_is_no_target() -> None:
    """Regression: pods of one type on a cordoned/NotReady/tainted node must not attract their siblings there."""
    _, plan = plan_for(
        node("x", gpus=8, taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]),
        node("y", gpus=8),
        pod("p1", on="x", gpus=2),
        pod("p2", on="y", gpus=2),
    )
    assert moved(plan) == [("p1", "x", "y")]
    assert plan.freed_nodes == ["x"]
    for bad in ({"unschedulable": True}, {"ready": False}):
        # Freeing a cordoned or NotReady node gains nothing (see test_freed_counts_only_ready_schedulable_allocatable_gpus),
        # and its pods' siblings must not go there either: nothing moves.
        _, plan = plan_for(
            node("x", gpus=8, **bad), node("y", gpus=8), pod("p1", on="x", gpus=2), pod("p2", on="y", gpus=2)
        )
        assert moved(plan) == []


# ---------------------------------------------------------------- capacity, per resource


@pytest.mark.parametrize(
    ("t", "anchor", "c_blocked", "c_fits"),
    [
        ({"cpu": "8"}, {"cpu": "7"}, {"cpu": "2"}, {"cpu": "1"}),
        ({"memory": "16Gi"}, {"memory": "12Gi"}, {"memory": "5Gi"}, {"memory": "4Gi"}),
        ({"pods": 2}, {}, {}, {}),  # the anchor takes one slot; blocked variant uses pods=1 below
        (
            {"extra": {"example.com/fpga": "3"}},
            {"extra_requests": {"example.com/fpga": "2"}},
            {"extra_requests": {"example.com/fpga": "2"}},
            {"extra_requests": {"example.com/fpga": "1"}},
        ),
        (
            {},
            {"extra_requests": {"ephemeral-storage": "60Gi"}},
            {"extra_requests": {"ephemeral-storage": "50Gi"}},
            {"extra_requests": {"ephemeral-storage": "40Gi"}},
        ),
    ],
    ids=["cpu", "memory", "pods", "extended-resource", "ephemeral-storage"],
)
def test_capacity_per_resource_binds(
    t: dict[str, Any], anchor: dict[str, Any], c_blocked: dict[str, Any], c_fits: dict[str, Any]
) -> None:
    if "pods" in t:
        assert_blocked(target_case({"pods": 1}))
        assert_goes(target_case({"pods": 2}))
        return
    assert_blocked(target_case(t, c_blocked, anchor))
    assert_goes(target_case(t, c_fits, anchor))


def test_extended_resource_the_target_lacks_blocks() -> None:
    assert_blocked(target_case(c={"extra_requests": {"example.com/fpga": "1"}}, extra={"example.com/fpga": "1"}))


def test_gpu_capacity_binds() -> None:
    assert_blocked(target_case(c={"gpus": 3}))


def test_mig_capacity_binds() -> None:
    def case(free_slices: int) -> CompactionPlan:
        return plan_for(
            node("t", mig={"1g.5gb": 7}, physical_gpus=1),
            node("src", mig={"1g.5gb": 7}, physical_gpus=1),
            *[pod(f"a{i}", on="t", mig="1g.5gb", owner=None) for i in range(7 - free_slices)],
            pod("c", on="src", mig="1g.5gb"),
        )[1]

    assert_blocked(case(0))
    plan = case(1)
    assert moved(plan) == [("c", "src", "t")] and plan.freed_gpus == 1


def test_mig_pod_never_goes_to_other_profile_or_whole_gpus() -> None:
    _, plan = plan_for(
        node("whole", gpus=8),
        node("other", mig={"2g.10gb": 3}, physical_gpus=1),
        node("src", mig={"1g.5gb": 7}, physical_gpus=1),
        pod("c", on="src", mig="1g.5gb"),
    )
    assert_blocked(plan)


def test_overcommitted_target_is_not_made_worse() -> None:
    # ``t`` already runs 10 CPUs on 8 allocatable; c fits in GPUs and memory but adds a CPU.
    assert_blocked(target_case({"cpu": "8"}, anchor={"cpu": "10"}))
    # Over in CPU only, c requesting no more CPU than... any CPU is worse: still blocked with 100m.
    assert_blocked(target_case({"cpu": "8"}, c={"cpu": "100m"}, anchor={"cpu": "10"}))


def test_overcommitted_node_may_be_left_and_swapped_even() -> None:
    # ``o`` is 2 CPUs over; its movable GPU pod leaves to free it, which is allowed (the node only gets better).
    _, plan = plan_for(
        node("t", gpus=8),
        node("o", gpus=8, cpu="8"),
        pod("anchor", on="t", gpus=6, owner=None),
        pod("cpu-hog", on="o", cpu="9", owner=None),
        pod("g", on="o", gpus=2, cpu="1"),
    )
    assert moved(plan) == [("g", "o", "t")] and plan.freed_nodes == ["o"]


# ======================================================================== the objective


def test_pending_pod_placed_by_moving_others() -> None:
    """What must move for this Pending pod to run: one of the two half-full nodes is drained into the other."""
    _, plan = plan_for(
        node("a", gpus=8),
        node("b", gpus=8),
        pod("p", on="a", gpus=4),
        pod("q", on="b", gpus=4),
        pod("big", gpus=8, owner="Job/big"),
    )
    assert [p.pod for p in plan.placed_pending] == ["default/big"]
    assert len(plan.moves) == 1
    (move,) = plan.moves
    assert plan.placed_pending[0].to_node == move.from_node
    assert plan.freed_gpus == 0 and plan.freed_nodes == [] and plan.filled_nodes == []
    assert plan.solver.levels[0]["name"] == "pending" and plan.solver.levels[0]["objective"] == 1


def test_pending_pod_placed_while_another_node_is_freed() -> None:
    _, plan = plan_for(
        *[node(f"g{i}", gpus=8) for i in range(4)],
        *[pod(f"a{i}", on=f"g{i % 4}", gpus=2) for i in range(6)],
        pod("big", gpus=8, owner="Job/big"),
    )
    assert [p.pod for p in plan.placed_pending] == ["default/big"]
    assert plan.freed_gpus == 8 and len(plan.freed_nodes) == 1
    assert len(plan.moves) == 2


def test_pending_pod_that_fits_nowhere_is_not_placed_and_nothing_moves() -> None:
    _, plan = plan_for(
        node("a", gpus=8),
        node("b", gpus=8),
        pod("p", on="a", gpus=6, owner=None),
        pod("q", on="b", gpus=6, owner=None),
        pod("big", gpus=4, owner="Job/big"),
    )
    assert plan.placed_pending == [] and plan.moves == []


def test_higher_priority_pending_pod_wins_when_only_one_fits() -> None:
    _, plan = plan_for(
        node("a", gpus=8),
        node("b", gpus=8),
        pod("p", on="a", gpus=4),
        pod("q", on="b", gpus=4),
        pod("low", gpus=8, owner="Job/low", priority=10),
        pod("high", gpus=8, owner="Job/high", priority=1000),
        pod("mid", gpus=8, owner="Job/mid", priority=100),
    )
    assert [p.pod for p in plan.placed_pending] == ["default/high"]
    assert len(plan.moves) == 1


def test_never_fill_an_empty_node_to_free_another() -> None:
    _, plan = plan_for(node("empty", gpus=8), node("a", gpus=8), pod("p", on="a", gpus=2))
    assert plan.moves == [] and plan.freed_gpus == 0 and plan.filled_nodes == []


def test_never_trade_a_free_big_node_for_a_small_one() -> None:
    _, plan = plan_for(node("empty", gpus=8), node("a", gpus=4), pod("p", on="a", gpus=2))
    assert plan.moves == [] and plan.freed_gpus == 0


def test_free_node_stays_free_when_a_full_target_exists() -> None:
    _, plan = plan_for(
        node("empty", gpus=8),
        node("a", gpus=8),
        node("b", gpus=8),
        pod("p", on="a", gpus=2),
        pod("anchor", on="b", gpus=4, owner=None),
    )
    assert moved(plan) == [("p", "a", "b")]
    assert plan.freed_gpus == 8 and plan.filled_nodes == []


def test_bigger_net_gain_wins_over_fewer_moves() -> None:
    # Freeing the 8-GPU node takes 2 moves; freeing the 4-GPU node takes 1. The 8 GPUs win.
    _, plan = plan_for(
        node("big", gpus=8),
        node("small", gpus=4),
        node("t", gpus=8),
        pod("b1", on="big", gpus=1),
        pod("b2", on="big", gpus=1),
        pod("s1", on="small", gpus=1),
        pod("anchor", on="t", gpus=6, owner=None),
    )
    assert plan.freed_nodes == ["big"] and plan.freed_gpus == 8 and len(plan.moves) == 2


def test_fewest_moves_among_equal_freed() -> None:
    _, plan = plan_for(
        node("a", gpus=8),
        node("b", gpus=8),
        pod("a1", on="a", gpus=2),
        pod("b1", on="b", gpus=2),
        pod("b2", on="b", gpus=2),
        pod("b3", on="b", gpus=2),
    )
    assert plan.freed_gpus == 8 and len(plan.moves) == 1
    assert plan.freed_nodes == ["a"]
    assert plan.solver.levels[-1]["name"] == "moveCost"


def test_move_cost_annotation_steers_which_pod_moves() -> None:
    def case(expensive: str) -> CompactionPlan:
        costly = {"compactor.io/move-cost": "5"}
        return plan_for(
            node("x", gpus=8),
            node("y", gpus=8),
            pod("px", on="x", gpus=2, annotations=costly if expensive == "px" else None),
            pod("py", on="y", gpus=2, annotations=costly if expensive == "py" else None),
        )[1]

    assert moved(case("px")) == [("py", "y", "x")]
    assert moved(case("py")) == [("px", "x", "y")]


def test_move_cost_one_expensive_pod_outweighs_two_cheap() -> None:
    # Freeing a: 1 move of a pod costing 1 + 3 = 4 moves; freeing b: 2 plain moves. b goes.
    _, plan = plan_for(
        node("a", gpus=8),
        node("b", gpus=8),
        pod("pa", on="a", gpus=2, annotations={"compactor.io/move-cost": "3"}),
        pod("b1", on="b", gpus=2),
        pod("b2", on="b", gpus=2),
    )
    assert plan.freed_nodes == ["b"] and len(plan.moves) == 2


@pytest.mark.parametrize("value", ["inf", "1e30", "nan", "-2", "lots"])
def test_absurd_move_cost_annotation_does_not_break_the_planner(value: str) -> None:
    """Regression: "inf" raised OverflowError, "1e30" overflowed the solver's int64 coefficients."""
    _, plan = plan_for(
        node("x", gpus=8),
        node("y", gpus=8),
        pod("px", on="x", gpus=2, annotations={"compactor.io/move-cost": value}),
        pod("py", on="y", gpus=2),
    )
    assert plan.freed_gpus == 8 and len(plan.moves) == 1
    if value in ("inf", "1e30"):
        assert moved(plan) == [("py", "y", "x")]


def test_no_churn_when_nothing_can_be_freed() -> None:
    _, plan = plan_for(
        node("a", gpus=8),
        node("b", gpus=8),
        node("c", gpus=4),
        pod("a1", on="a", gpus=7),
        pod("b1", on="b", gpus=6),
        pod("b2", on="b", gpus=1),
        pod("c1", on="c", gpus=3),
    )
    assert plan.moves == [] and plan.placed_pending == [] and plan.freed_gpus == 0
    assert plan.solver.note


def test_no_churn_on_an_already_compact_cluster() -> None:
    _, plan = plan_for(
        node("a", gpus=8),
        node("b", gpus=8),
        node("cpu", cpu="32"),
        *[pod(f"a{i}", on="a", gpus=2) for i in range(4)],
        pod("web", on="cpu", cpu="2"),
    )
    assert plan.moves == [] and plan.freed_gpus == 0


def test_cpu_pods_on_a_gpu_node_do_not_keep_it_from_being_freed() -> None:
    _, plan = plan_for(
        node("a", gpus=8),
        node("b", gpus=8),
        pod("g", on="a", gpus=2),
        pod("side", on="a", cpu="2"),
        pod("anchor", on="b", gpus=4, owner=None),
    )
    assert moved(plan) == [("g", "a", "b")] and plan.freed_nodes == ["a"]


def test_movable_pod_on_an_unfreeable_node_makes_room() -> None:
    """Regression: with no pending pod, movable pods on nodes that cannot be freed were frozen in place,
    so a node that could only be freed by first moving them out of the way was never freed."""
    _, plan = plan_for(
        *[node(f"n{i}", gpus=8) for i in range(1, 5)],
        pod("u1", on="n1", gpus=4, owner=None),
        pod("m1", on="n1", gpus=2),
        pod("m2", on="n1", gpus=2),
        pod("b", on="n2", gpus=4, owner="ReplicaSet/b"),
        pod("u3", on="n3", gpus=6, owner=None),
        pod("u4", on="n4", gpus=6, owner=None),
    )
    assert plan.freed_nodes == ["n2"] and plan.freed_gpus == 8 and len(plan.moves) == 3


# ======================================================================== limits


def _two_freeable(**config: Any) -> CompactionPlan:
    return plan_for(
        node("t", gpus=8),
        node("a", gpus=8),
        node("b", gpus=8),
        pod("anchor", on="t", gpus=4, owner=None),
        pod("pa", on="a", gpus=2, namespace="ns-a"),
        pod("pb", on="b", gpus=2, namespace="ns-b"),
        config=settings(**config),
    )[1]


def test_unlimited_frees_both() -> None:
    plan = _two_freeable()
    assert plan.freed_gpus == 16 and len(plan.moves) == 2


@pytest.mark.parametrize(("limit", "freed"), [(0, 0), (1, 8), (2, 16)])
def test_max_moves_caps_the_plan(limit: int, freed: int) -> None:
    plan = _two_freeable(max_moves=limit)
    assert len(plan.moves) <= limit and plan.freed_gpus == freed


def _one_node_two_pods(namespaces: tuple[str, str] = ("default", "default"), **config: Any) -> CompactionPlan:
    return plan_for(
        node("t", gpus=8),
        node("a", gpus=8),
        pod("anchor", on="t", gpus=4, owner=None),
        pod("p1", on="a", gpus=2, namespace=namespaces[0]),
        pod("p2", on="a", gpus=2, namespace=namespaces[1]),
        config=settings(**config),
    )[1]


def test_max_moves_per_node() -> None:
    assert _one_node_two_pods().freed_gpus == 8
    assert _one_node_two_pods(max_moves_per_node=1).moves == []
    assert _one_node_two_pods(max_moves_per_node=2).freed_gpus == 8
    # Per source node: two nodes with one move each are fine under a limit of 1.
    assert _two_freeable(max_moves_per_node=1).freed_gpus == 16


def test_max_moves_per_namespace() -> None:
    assert _one_node_two_pods(max_moves_per_namespace=1).moves == []
    plan = _one_node_two_pods(("ns-1", "ns-2"), max_moves_per_namespace=1)
    assert plan.freed_gpus == 8 and len(plan.moves) == 2
    assert _two_freeable(max_moves_per_namespace=1).freed_gpus == 16


def test_min_gain_per_move_rejects_low_gain_plans() -> None:
    def case(min_gain: float) -> CompactionPlan:
        return plan_for(
            node("t", gpus=8),
            node("a", gpus=8),
            pod("anchor", on="t", gpus=4, owner=None),
            *[pod(f"p{i}", on="a", gpus=1) for i in range(4)],
            config=settings(min_gain_per_move=min_gain),
        )[1]

    # Freeing ``a`` frees 8 GPUs with 4 moves (2 GPUs per move).
    assert case(0).freed_gpus == 8 and len(case(0).moves) == 4
    assert case(2).freed_gpus == 8
    assert case(2.5).moves == []


def test_min_gain_keeps_the_best_paying_part_of_a_plan() -> None:
    # Freeing a takes 1 move (8 GPUs), freeing b 4 more (8 GPUs): both = 16/5 = 3.2 per move, a alone = 8.
    plan = plan_for(
        node("t", gpus=16),
        node("a", gpus=8),
        node("b", gpus=8),
        pod("anchor", on="t", gpus=8, owner=None),
        pod("a1", on="a", gpus=2),
        *[pod(f"b{i}", on="b", gpus=1) for i in range(4)],
        config=settings(min_gain_per_move=3.5),
    )[1]
    assert plan.freed_nodes == ["a"] and len(plan.moves) == 1


@pytest.mark.parametrize(
    "limit",
    [{"max_moves": 0}, {"max_moves_per_node": 0}, {"max_moves_per_namespace": 0}, {"min_gain_per_move": 1}],
    ids=["maxMoves", "perNode", "perNamespace", "minGainPerMove"],
)
def test_limits_bind_pending_placements_too(limit: dict[str, Any]) -> None:
    """Regression: when the greedy warm start placed every pending pod by moving others, it fixed the
    pending level (and stayed the incumbent) even where the limits forbid those moves."""
    _, plan = plan_for(
        node("a", gpus=8),
        node("b", gpus=8),
        pod("p", on="a", gpus=4),
        pod("q", on="b", gpus=4),
        pod("big", gpus=8, owner="Job/big"),
        config=settings(**limit),
    )
    assert plan.placed_pending == []
    if "min_gain_per_move" in limit:
        # One move frees a node (8 GPUs per move); placing big would gain nothing.
        assert plan.freed_gpus == 8 and len(plan.moves) == 1
    else:
        assert plan.moves == []


def test_max_moves_lets_the_pending_pod_in_when_it_allows_the_move() -> None:
    _, plan = plan_for(
        node("a", gpus=8),
        node("b", gpus=8),
        pod("p", on="a", gpus=4),
        pod("q", on="b", gpus=4),
        pod("big", gpus=8, owner="Job/big"),
        config=settings(max_moves=1, max_moves_per_node=1, max_moves_per_namespace=1),
    )
    assert [p.pod for p in plan.placed_pending] == ["default/big"] and len(plan.moves) == 1


# ======================================================================== shape mode


def test_shape_mode_increases_headroom_without_freeing_a_node() -> None:
    """Regression: the one move that makes room for a 4-GPU shape was pruned as churn (its source is not freed)."""
    objects = [
        node("a", gpus=8),
        node("b", gpus=8),
        pod("a1", on="a", gpus=1),
        pod("a2", on="a", gpus=1),
        pod("a3", on="a", gpus=1),
        pod("a4", on="a", gpus=2, owner="ReplicaSet/x"),
        pod("b1", on="b", gpus=2, owner=None),
    ]
    cfg = settings(goal="shapes", target_shapes=["nvidia.com/gpu=4"])
    snapshot, plan = plan_for(*objects, config=cfg)
    before = loads_before(snapshot)
    nodes = snapshot.node_by_name()
    caps = {n: capacity_of(nodes[n], before[n]) for n in nodes}
    after = {n: dict(v) for n, v in before.items()}
    for m in plan.moves:
        req = next(p for p in snapshot.pods if p.key == m.pod).requests
        for r, v in req.items():
            after[m.from_node][r] -= v
            after[m.to_node][r] = after[m.to_node].get(r, 0) + v
    shape = [parse_shape("nvidia.com/gpu=4")]
    assert total_headroom(snapshot, before, caps, shape) == 1
    assert total_headroom(snapshot, after, caps, shape) == 2
    assert len(plan.moves) == 1 and plan.freed_nodes == []
    assert plan.solver.levels[-2]["name"] == "headroom"
    # In free-nodes mode the same cluster frees ``a`` outright instead.
    _, free_plan = plan_for(*objects)
    assert free_plan.freed_nodes == ["a"] and free_plan.freed_gpus == 8


def test_shape_mode_no_churn_when_headroom_cannot_grow() -> None:
    _, plan = plan_for(
        node("a", gpus=8),
        node("b", gpus=8),
        pod("a1", on="a", gpus=4),
        pod("b1", on="b", gpus=4),
        config=settings(goal="shapes", target_shapes=["nvidia.com/gpu=4"]),
    )
    assert plan.moves == []


# ======================================================================== the checker itself catches violations


def _fake_plan(
    moves: list[dict[str, str]],
    placed: list[dict[str, str]] | None = None,
    freed: list[str] | None = None,
    filled: list[str] | None = None,
    freed_gpus: int = 0,
) -> CompactionPlan:
    return CompactionPlan(
        metadata=Metadata(id="x", createdAt="2026-01-01T00:00:00Z", source="test"),
        moves=[Move(pod=m["pod"], **{"from": m["from"], "to": m["to"]}, gpu=m.get("gpu", "1") == "1") for m in moves],
        placedPending=[Placement(pod=p["pod"], to=p["to"]) for p in placed or []],
        freedNodes=freed or [],
        filledNodes=filled or [],
        freedGpus=freed_gpus,
        solver=SolverReport(status="OPTIMAL", wallSeconds=0.0),
    )


def test_checker_catches_each_kind_of_violation() -> None:
    snapshot = cluster(
        node("a", gpus=8),
        node("b", gpus=8),
        node("cordoned", gpus=8, unschedulable=True),
        node("e", gpus=8),
        pod("p", on="a", gpus=2),
        pod("bare", on="a", gpus=2, owner=None),
        pod("big", on="b", gpus=8),
        pod("wait", gpus=2, owner="Job/w"),
    )
    cfg = settings(max_moves=1)

    def errors(plan: CompactionPlan) -> str:
        return "\n".join(check_plan(snapshot, plan, cfg))

    assert "no such pod" in errors(_fake_plan([{"pod": "default/ghost", "from": "a", "to": "e"}]))
    assert "bound to a" in errors(_fake_plan([{"pod": "default/p", "from": "b", "to": "e"}]))
    assert "may not move (3" in errors(_fake_plan([{"pod": "default/bare", "from": "a", "to": "e"}]))
    assert "cordoned" in errors(_fake_plan([{"pod": "default/p", "from": "a", "to": "cordoned"}]))
    assert "over capacity" in errors(_fake_plan([{"pod": "default/p", "from": "a", "to": "b"}]))
    assert "freedNodes" in errors(_fake_plan([{"pod": "default/p", "from": "a", "to": "e"}], freed=["a"], filled=["e"]))
    assert "filledNodes" in errors(_fake_plan([{"pod": "default/p", "from": "a", "to": "e"}]))
    assert "freedGpus 0 != recomputed -8" in errors(
        _fake_plan([{"pod": "default/p", "from": "a", "to": "e"}], filled=["e"])
    )
    trade = errors(
        _fake_plan([{"pod": "default/big", "from": "b", "to": "e"}], freed=["b"], filled=["e"], freed_gpus=0)
    )
    assert "net freed GPUs is 0" in trade and "freedGpus" not in trade
    assert "serves nothing" in errors(
        _fake_plan([{"pod": "default/p", "from": "a", "to": "e"}], filled=["e"], freed_gpus=-8)
    )
    two = [{"pod": "default/p", "from": "a", "to": "e"}, {"pod": "default/p", "from": "a", "to": "e"}]
    assert "more than once" in errors(_fake_plan(two))
    assert "maxMoves" in errors(_fake_plan(two))
    assert "not pending" in errors(_fake_plan([], placed=[{"pod": "default/p", "to": "e"}]))
    assert errors(_fake_plan([], placed=[{"pod": "default/wait", "to": "e"}], filled=["e"], freed_gpus=-8)) == ""


def test_moves_that_only_fit_all_at_once_are_not_ordered_one_at_a_time() -> None:
    """A swap between two full nodes fits as a whole but never one eviction at a time: order_moves says so."""
    from compactor.planner.problem import build_problem
    from compactor.planner.solution import ConcreteMove, order_moves

    snapshot = cluster(
        node("x", gpus=8),
        node("y", gpus=8),
        pod("p", on="x", gpus=4, cpu="2"),
        pod("q", on="x", gpus=4, owner=None),
        pod("r", on="y", gpus=4, cpu="3"),
        pod("s", on="y", gpus=4, owner=None),
    )
    problem = build_problem(snapshot, settings())
    by_pod = {pods[0].name: (t, n) for t in problem.types for n, pods in t.initial.items()}
    (tp, x), (tr, y) = by_pod["p"], by_pod["r"]
    swap = [ConcreteMove(tp.initial[x][0], tp, x, y), ConcreteMove(tr.initial[y][0], tr, y, x)]
    ordered, stuck = order_moves(problem, swap, set())
    assert ordered == [] and stuck == swap
    ordered, stuck = order_moves(problem, swap[:1], set())
    assert ordered == [] and stuck == swap[:1]  # y stays full without r leaving

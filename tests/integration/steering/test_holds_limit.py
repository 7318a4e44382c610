"""``caps.max_holds_per_move``, the wall a run steering by holds meets on a large cluster (issue [18]).

A 400-node cluster without the steering policy never got past its first move (it would hold 84 nodes, more than 25),
yet every run fenced and released its sources and wrote their Events first, the plan said nothing, and the report's
reason read "... to steer without holds reached; the rest waits for the next run". Now a run that cannot start its first
move changes nothing and says why; one that stops later says which move and how many nodes in a legible line; and the
plan predicts either, from the same count, before anyone runs it.
"""

from __future__ import annotations

from compactor.actions.steering.holds import first_wall
from compactor.app.planning import with_holds_wall
from compactor.planner.plan import SteeringNote
from compactor.render.plan import render_plan
from compactor.settings.caps import CapsSettings
from compactor.settings.origins import load_settings
from tests.builders import cluster, node, pod
from tests.builders import pdb as budget
from tests.fakecluster import FakeCluster
from tests.scenarios.executor import SETTINGS, Obj, agents, assert_clean, events, hand_plan, rs, run

HOLDS = SETTINGS.amended(mechanism="holds", max_holds_per_move=2)
BIG, SMALL = (
    ("default/big", "gpu-3", "gpu-1", "ReplicaSet/big"),
    ("default/small", "gpu-3", "gpu-2", "ReplicaSet/small"),
)


def big_then_small() -> list[Obj]:
    """gpu-3 runs a 4-GPU pod and a 1-GPU pod. Only gpu-1 has room for the big one (no hold needed); after it, the small
    one, bound for gpu-2, could land on gpu-4, gpu-5 or gpu-6 too: three holds."""
    return [
        *(node(f"gpu-{i}", gpus=8) for i in range(1, 7)),
        pod("pin-1", on="gpu-1", gpus=4, owner=None),
        *(pod(f"pin-{i}", on=f"gpu-{i}", gpus=7, owner=None) for i in (2, 4, 5, 6)),
        rs("big", "gpu-3", "big", gpus=4),
        rs("small", "gpu-3", "small", gpus=1),
        *agents(*(f"gpu-{i}" for i in range(1, 7))),
        budget("big", match={"app": "big"}, max_unavailable=1),
        budget("small", match={"app": "small"}, max_unavailable=1),
    ]


def test_a_run_that_cannot_start_its_first_move_changes_nothing_and_says_why() -> None:
    c = FakeCluster(big_then_small())
    plan = hand_plan([SMALL, BIG], freed=["gpu-3"], c=c)  # the small one first: it would hold gpu-1, -4, -5, -6
    report = run(c, plan, HOLDS)
    assert report.status == "failed" and report.moves_done == 0
    assert report.reason == (
        "before its first move, max_holds_per_move (2) reached: moving default/small to gpu-2 would hold 4 node(s); "
        "install the steering policy (manifests/steering) to steer without holds; nothing done: no node fenced, "
        "no pod evicted"
    )
    assert c.history == [] and events(c) == []  # no state, no fence, no Event: the next run finds the cluster as it was
    assert_clean(c)


def test_a_run_stopped_by_the_holds_limit_later_keeps_what_it_did_and_says_which_move_in_one_legible_line() -> None:
    c = FakeCluster(big_then_small())
    report = run(c, hand_plan([BIG, SMALL], freed=["gpu-3"], c=c), HOLDS)
    assert report.status == "partial" and report.moves_done == 1
    assert report.reason.startswith(
        "max_holds_per_move (2) reached: moving default/small to gpu-2 would hold 3 node(s); install the steering "
        "policy (manifests/steering) to steer without holds; the rest waits for the next run"
    )
    c.settle()
    assert {
        p["metadata"]["labels"]["app"]: p["spec"]["nodeName"]
        for p in c.pods.values()
        if p["metadata"].get("labels", {}).get("app") in ("big", "small")
    } == {
        "big": "gpu-1",
        "small": "gpu-3",
    }
    assert_clean(c)  # gpu-3, not freed after all, is no longer fenced


def test_the_plan_predicts_where_the_run_stops_from_the_same_count() -> None:
    objects = big_then_small()
    snapshot = cluster(*objects)
    c = FakeCluster(objects)
    for order, index, holds in (([SMALL, BIG], 0, 4), ([BIG, SMALL], 1, 3)):
        plan = hand_plan(order, freed=["gpu-3"], c=c)
        wall = first_wall(
            snapshot.nodes, snapshot.pods, plan.moves, fencing=["gpu-3"], caps=CapsSettings(max_holds_per_move=2)
        )
        assert wall is not None and (wall.index, wall.pod, wall.target, wall.holds) == (
            index,
            order[index][0],
            order[index][2],
            holds,
        )
    assert (
        first_wall(
            snapshot.nodes, snapshot.pods, plan.moves, fencing=["gpu-3"], caps=CapsSettings(max_holds_per_move=3)
        )
        is None
    )


def test_the_plan_says_it_where_a_run_would_steer_by_holds_and_not_under_the_policy() -> None:
    objects = big_then_small()
    snapshot, c = cluster(*objects), FakeCluster(objects)
    settings = load_settings(None).model_copy(update=HOLDS.groups())
    plan = hand_plan([SMALL, BIG], freed=["gpu-3"], c=c)
    walled = with_holds_wall(plan, snapshot, settings)
    offline = walled.steering.stops  # a plan of a snapshot: the run decides
    assert f"  WARNING: {offline}" in render_plan(walled, "text").splitlines()
    assert f"**Warning:** {offline}" in render_plan(walled, "markdown")
    assert offline.startswith(
        "if the steering policy is not installed, a run steering by holds stops before its first move:"
    )
    live_holds = plan.model_copy(update={"steering": SteeringNote(mechanism="holds", why="auto: not installed")})
    assert with_holds_wall(live_holds, snapshot, settings).steering.stops.startswith("a run steering by holds stops")
    live_policy = plan.model_copy(update={"steering": SteeringNote(mechanism="policy", why="installed")})
    assert with_holds_wall(live_policy, snapshot, settings).steering.stops == ""

"""The day replay's emulation of gpu-compactor's executor (benchmarks/day_strategies.py), checked against what the live
executor does (issue 42): a plan gone stale while it was made is made again, twice at most; a move whose target lost
its room goes to another node under the plan's rules; a move whose PDB allows nothing is asked again after the batch,
then refused with its source's other moves; the pending trigger's gap counts from a cycle's end; with prevention on,
the fill-first labels follow each cycle and the emulated kube-scheduler prefers them."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))

from day_replay import Arrival, Day, Workload  # noqa: E402  (benchmarks/ is not a package)
from day_strategies import Compactor  # noqa: E402
from generate_cluster import Shape  # noqa: E402
from kube_scheduler import KubeScheduler  # noqa: E402
from trace_replay import TraceNode, TracePod  # noqa: E402

from compactor.app.cycle import REPLANS_WHEN_STALE  # noqa: E402
from compactor.app.pending import PendingTrigger  # noqa: E402
from compactor.planner.plan import Move  # noqa: E402


def _node(name: str, gpus: int = 4) -> TraceNode:
    return TraceNode(name, 64_000, 262_144, gpus, "G2")


def _arrival(name: str, gpus: int = 1, life: float = 1e6, initial: bool = True) -> Arrival:
    return Arrival(TracePod(name, Shape(4_000, 16_384, gpus, 1000, "LS"), ()), life, initial=initial)


def _quiet_day(nodes: list[TraceNode], initial: tuple[Arrival, ...]) -> Day:
    """A day whose arrivals never come (one every 1e9 s): only the pods of the start, and those a test adds."""

    def never() -> Any:
        while True:
            yield _arrival("later", initial=False)

    day = Day(nodes, Workload(never(), initial, 1e9, 0.0, 60.0, 3600.0, 1), startup=0.0, seed=1)
    day.run(100.0)
    return day


def _named(day: Day, trace_name: str) -> Any:
    return next(p for p in day.pods.values() if p.arrival.pod.name == trace_name)


def _bind_on(day: Day, node: int, trace_name: str, gpus: int = 1) -> Any:
    """A new pod bound by the scheduler on ``node`` (every other node fenced meanwhile): an arrival landing there."""
    others = [i for i in range(len(day.nodes)) if i != node]
    day.fence(others, True)
    day._arrive(_arrival(trace_name, gpus, initial=False))
    day.fence(others, False)
    pod = _named(day, trace_name)
    assert pod.node == node
    return pod


def _move(day: Day, pod: Any, to: int) -> Move:
    return Move.model_validate(
        {"pod": f"replay/{pod.name}", "from": day.nodes[pod.node].name, "to": day.nodes[to].name, "owner": pod.name}
    )


def _plan(*moves: Move, freed: list[str]) -> Any:
    return SimpleNamespace(moves=list(moves), placed_pending=[], freed_nodes=freed, mig_repartition=[])


def _planned(compactor: Compactor, plans: list[Any]) -> list[int]:
    """The compactor's planner replaced by ``plans`` in turn (the last one again once they run out); how many times it
    was asked, in the list returned."""
    asked = [0]

    def plan(_day: Day) -> Any:
        asked[0] += 1
        return plans[min(asked[0], len(plans)) - 1]

    compactor._plan = plan  # type: ignore[method-assign]
    return asked


def _compactor(**caps: Any) -> Compactor:
    compactor = Compactor(planning_clock="limit")
    settings = compactor.settings
    update: dict[str, Any] = {"solver": settings.solver.amended(time_limit_seconds=5.0)}
    if caps:
        update["caps"] = settings.caps.model_copy(update=caps)
    compactor.settings = settings.model_copy(update=update)
    return compactor


def test_a_plan_gone_stale_while_it_was_made_is_made_again_and_nothing_is_evicted_for_it() -> None:
    """Node a holds one pod the plan moves to b, freeing a; while the plan is made an arrival lands on a. When the run
    would start the plan no longer holds: it is made again (the second plan moves nothing: the cycle ends there)."""
    day = _quiet_day([_node("a"), _node("b")], (_arrival("p"),))
    p = _named(day, "p")
    source, target = p.node, 1 - p.node
    compactor = _compactor()
    asked = _planned(compactor, [_plan(_move(day, p, target), freed=[day.nodes[source].name]), None])
    compactor(day)
    _bind_on(day, source, "arrived-meanwhile")
    day.advance(day.now + 60)
    assert asked == [2] and day.figures.stale_plans == 1 and day.figures.replans == 1
    assert day.figures.evictions == 0 and p.node == source
    assert compactor.busy_until == compactor.last_end == 110.0, "the cycle ended after two plannings of 5 s"


def test_a_plan_that_stays_stale_is_made_again_at_most_twice() -> None:
    day = _quiet_day([_node("a"), _node("b")], (_arrival("p"),))
    p = _named(day, "p")
    source, target = p.node, 1 - p.node
    compactor = _compactor()
    asked = _planned(compactor, [_plan(_move(day, p, target), freed=[day.nodes[source].name])])
    _bind_on(day, source, "stays")
    compactor(day)
    day.advance(day.now + 60)
    assert asked == [1 + REPLANS_WHEN_STALE] and day.figures.stale_plans == 1 + REPLANS_WHEN_STALE
    assert day.figures.replans == REPLANS_WHEN_STALE and day.figures.evictions == 0


def test_a_move_whose_target_lost_its_room_goes_to_another_node_under_the_plans_rules() -> None:
    """Three 4-GPU nodes, one 1-GPU pod on each (the default profile spreads them). The plan moves a's pod to b; by the
    time the run starts arrivals have filled b. The executor's re-target (``planner/retarget.assign``) takes c, which
    runs a GPU pod and has room; a is freed as planned."""
    day = _quiet_day([_node("a"), _node("b"), _node("c")], (_arrival("p"), _arrival("q"), _arrival("r")))
    assert sorted(len(day.on_node[i]) for i in range(3)) == [1, 1, 1]
    p = _named(day, "p")
    source = p.node
    target, other = (i for i in range(3) if i != source)
    compactor = _compactor()
    _planned(compactor, [_plan(_move(day, p, target), freed=[day.nodes[source].name]), None])
    compactor(day)
    for n in range(3):
        _bind_on(day, target, f"filler-{n}")
    day.advance(day.now + 60)
    assert p.node == other and day.figures.retargets == 1 and day.figures.moves_refused == 0
    assert day.figures.evictions == 1 and not day.on_node[source]


def test_a_move_without_another_target_is_refused_and_its_sources_other_moves_given_up() -> None:
    """As above but c is whole-free (a GPU pod's re-target never takes a node the plan keeps whole) and holds no pod:
    nowhere to go, so the move is refused, and so is the second move off a; the run evicts nothing."""
    day = _quiet_day([_node("a"), _node("b"), _node("c")], (_arrival("p"), _arrival("p2")))
    p, p2 = _named(day, "p"), _named(day, "p2")
    if p2.node != p.node:
        day.evict(p2.id)
        assert day.bind_to(p2, p.node)
    source = p.node
    target = next(i for i in range(3) if i != source and not day.on_node[i])
    compactor = _compactor()
    moves = (_move(day, p, target), _move(day, p2, target))
    _planned(compactor, [_plan(*moves, freed=[day.nodes[source].name]), None])
    evicted_before = day.figures.evictions
    compactor(day)
    for n in range(4):
        _bind_on(day, target, f"filler-{n}")
    day.advance(day.now + 60)
    assert day.figures.moves_refused == 1 and day.figures.retargets == 0
    assert day.figures.evictions == evicted_before and p.node == p2.node == source


def test_a_move_whose_pdb_allows_nothing_is_asked_again_after_the_batch_then_refused() -> None:
    day = _quiet_day([_node("a"), _node("b")], (_arrival("p"), _arrival("p2")))
    p, p2 = _named(day, "p"), _named(day, "p2")
    if p2.node != p.node:
        day.evict(p2.id)
        assert day.bind_to(p2, p.node)
    source, target = p.node, 1 - p.node
    answers = {"p": [False, False], "p2": [True]}  # p's PDB allows nothing twice; p2's would allow its eviction
    day.disruption_allowed = lambda pod: answers[pod.arrival.pod.name].pop(0)  # type: ignore[method-assign]
    compactor = _compactor(max_concurrent_evictions=1)  # one at a time: p2 waits for p, so is given up with it
    _planned(compactor, [_plan(_move(day, p, target), _move(day, p2, target), freed=[day.nodes[source].name]), None])
    evicted_before = day.figures.evictions
    compactor(day)
    day.advance(day.now + 60)
    assert day.figures.moves_refused == 1 and day.figures.evictions == evicted_before
    assert answers == {"p": [], "p2": [True]}, "p asked twice; p2, off the same source, given up unasked"


def test_a_pdb_that_allows_the_eviction_once_the_batch_is_serving_lets_the_move_go_on() -> None:
    day = _quiet_day([_node("a"), _node("b")], (_arrival("p"),))
    p = _named(day, "p")
    source, target = p.node, 1 - p.node
    answers = [False, True, True]  # the executor asks twice; the eviction itself asks once more (the Eviction API)
    day.disruption_allowed = lambda pod: answers.pop(0)  # type: ignore[method-assign]
    compactor = _compactor()
    _planned(compactor, [_plan(_move(day, p, target), freed=[day.nodes[source].name]), None])
    compactor(day)
    day.advance(day.now + 60)
    assert p.node == target and day.figures.moves_refused == 0 and day.figures.pdb_violations == 0 and not answers


def test_the_pending_triggers_gap_counts_from_the_end_of_the_last_cycle() -> None:
    """A cycle that began at 0 and ended at 400: a pod waiting since 300 is due at 360 by its own wait, but the gap
    (300 s) counts from 400, so not before 700."""
    compactor = Compactor(trigger=PendingTrigger(60, 300), every=3600)
    compactor.last_run, compactor.next_regular, compactor.last_end = 0.0, 3600.0, 400.0
    waiting = SimpleNamespace(id=1, arrived=300.0, first_bound=-1.0, gpus=8, uses_gpu=True)
    for now, due in ((450.0, False), (699.0, False), (700.0, True)):
        day = SimpleNamespace(now=now, queue={1: waiting})
        assert compactor._controller_due(day) is due, now  # type: ignore[arg-type]


def test_with_prevention_on_each_cycles_end_labels_the_nodes_to_fill_first() -> None:
    """Three 8-GPU nodes holding 6, 1 and 0 GPUs: tiers 3 and 1 (by thirds of the node's GPUs), none for the whole-free
    node; then a new 1-GPU pod lands on the tier-3 node, which the default profile's LeastAllocated alone never picks."""
    initial = tuple(_arrival(f"six-{i}", 1) for i in range(7))
    day = _quiet_day([_node("a", 8), _node("b", 8), _node("c", 8)], ())
    for i, (node, name) in enumerate([*([(0, a.pod.name) for a in initial[:6]]), (1, initial[6].pod.name)]):
        _bind_on(day, node, f"{name}-{i}")
    compactor = _compactor()
    compactor.settings = compactor.settings.model_copy(
        update={"steering": compactor.settings.steering.model_copy(update={"fill_first": True})}
    )
    compactor._end_cycle(day)
    assert list(day.scheduler.fill_first) == [3, 1, 0]
    day._arrive(_arrival("new", initial=False))
    assert _named(day, "new").node == 0
    compactor.settings = compactor.settings.model_copy(
        update={"steering": compactor.settings.steering.model_copy(update={"fill_first": False})}
    )
    compactor._end_cycle(day)
    assert list(day.scheduler.fill_first) == [0, 0, 0], "prevention off: the cycle removes the labels it set"


def test_node_affinitys_score_is_the_preferred_weights_normalized_and_only_for_gpu_pods() -> None:
    """``nodeaffinity``: the matching terms' weights (100 / 67 / 33 for tiers 3 / 2 / 1), ``DefaultNormalizeScore`` to
    0..100 over the nodes scored, plugin weight 2; a pod asking no GPU carries no term (the policy matches GPU pods)."""
    scheduler = KubeScheduler([_node(n, 8) for n in "abcd"], profile="default")
    scheduler.fill_first[:] = [0, 1, 2, 0]
    nodes = np.arange(4)
    gpu = scheduler.components((1000, 1024, 1), nodes)
    assert list(gpu["NodeAffinity"]) == [0, 2 * (100 * 33 // 67), 200, 0]
    assert "NodeAffinity" not in scheduler.components((1000, 1024, 0), nodes)
    scheduler.fill_first[:] = 0
    assert "NodeAffinity" not in scheduler.components((1000, 1024, 1), nodes)

"""Steering by holds: for the moment between an eviction and the replacement's binding, fence every other node that
could take it, so the planned node is the only feasible one whatever the scheduler's scores.

The fallback when the admission policy is not installed (or ``steering.mechanism: holds``). It needs
only ``patch nodes``, but it costs: every node with room is held for every move, which on a large
cluster with much free room is most of it (measured: 386 of 400 nodes per move), and reading
which nodes could take the pod means listing every node and pod per move (page by page, keeping of
each only what the choice needs: ``choose_holds``). A move that would hold
more than ``caps.max_holds_per_move`` nodes stops the run there (``StopHere``: what is done
stays, the rest waits for the next run), with the reason in the report. Holds are recorded in the
state before they are made; recovery releases any it finds.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import partial

from compactor.actions.cluster.live_pods import is_bound
from compactor.actions.cluster.patching import patch_fresh
from compactor.actions.port import annotations as ann
from compactor.actions.port.client import Obj
from compactor.actions.port.objects import PodView
from compactor.actions.run.context import Abort, AbortReason, NoRoom, Run, StopHere
from compactor.actions.run.fences import unfence
from compactor.actions.run.steerer import Mechanism
from compactor.actions.steering.room import SOURCE, Hold, could_take, hold_over, usage, use_of
from compactor.model.load import DEFAULT_POOL_LABEL
from compactor.model.parse import parse_node, parse_pod
from compactor.model.resources import Resources
from compactor.model.types import Node, Pod
from compactor.planner.plan import Move, Placement
from compactor.planner.rules.movability import Steerability
from compactor.settings.caps import CapsSettings

log = logging.getLogger("compactor.steering")


class HoldSteerer:
    mechanism = Mechanism.HOLDS
    exact = True
    parallel = False  # one hold at a time: a second move's holds would fence the first one's target
    release_on_stop = True

    def __init__(self, why: str, steerability: Steerability) -> None:
        self.why = why
        self.steerability = steerability
        self._chosen: Holds | None = None

    def prepare(self, run: Run, move: Move, pod: Obj) -> None:
        self._chosen = choose_holds(run, pod, target=move.to_node, why=move.pod)

    def engage(self, run: Run, move: Move) -> None:
        if self._chosen is not None:
            make_holds(run, self._chosen)
            self._chosen = None

    def observe(self, run: Run, move: Move, fresh: list[Obj]) -> None:
        if any(is_bound(p) for p in fresh):
            release_holds(run)
        check_hold_age(run, f"the replacement of {move.pod}")

    def after_move(self, run: Run, move: Move, fresh: list[Obj]) -> None:
        release_holds(run)

    def before_placement(self, run: Run, placement: Placement, pod: Obj) -> None:
        try:
            with run.write_ahead():  # the holds are in the state before they are made
                chosen = choose_holds(run, pod, target=placement.to_node, why=placement.pod)
        except (Abort, StopHere) as exc:  # every move is done by now: say why the pending pod may not land, and go on
            run.note(str(exc))
            return
        make_holds(run, chosen)

    def after_placement(self, run: Run) -> None:
        release_holds(run)

    def release(self, run: Run) -> None:
        release_holds(run)

    def step_aside(self, run: Run) -> None:
        release_holds(run)  # a PDB's 429 may last minutes: every other node with room stays open meanwhile

    def step_in(self, run: Run, move: Move, pod: Obj) -> None:
        with run.write_ahead():  # the holds are in the state before they are made
            self.prepare(run, move, pod)
        self.engage(run, move)

    def preflight(self, run: Run, move: Move, *, fencing: Collection[str]) -> None:
        """The first move's holds counted before anything is fenced: over ``max_holds_per_move``, the run stops before
        its first change (a 400-node cluster used to fence and release its sources, and write their Events, every run).
        A pod gone or elsewhere holds nothing: the run skips it and sees to the next."""
        pod = run.client.get_pod(*move.pod.split("/", 1))
        if pod is None or PodView(pod).node_name != move.from_node:
            return
        plan, _ = _hold_plan(run, pod, target=move.to_node, ignoring=frozenset(fencing))
        _within_limit(run, plan, move.pod, move.to_node)


@dataclass(frozen=True)
class Holds:
    """The nodes one steered pod needs held, as read just now."""

    why: str
    target: str
    nodes: dict[str, Obj]  # name -> the node as read (the patch's precondition)


def choose_holds(run: Run, pod: Obj, *, target: str, why: str) -> Holds:
    """Every other schedulable node that could take ``pod`` now, recorded in ``run.state.held`` (to be saved before they are
    made); ``NoRoom`` when ``target`` has no room, ``StopHere`` when they are more than ``max_holds_per_move``.

    Every node and pod of the cluster is read, but not held: of a node only what ``plan_hold`` asks of it (parsed, and the
    node as read when it could be held: the patch starts from it), of a pod only its node and requests (``use_of``)."""
    plan, nodes = _hold_plan(run, pod, target=target)
    if not plan.room.fits:
        lacking = ", ".join(f"{r} {v}" for r, v in sorted(plan.room.short.items())) or "the node is gone"
        raise NoRoom(why, target, lacking)
    _within_limit(run, plan, why, target)
    read = {node.name: raw for node, raw in nodes if raw is not None}
    if plan.rivals:
        run.state.held = sorted({*run.state.held, *plan.rivals})
    return Holds(why, target, {name: read[name] for name in plan.rivals if name in read})


def _hold_plan(
    run: Run, pod: Obj, *, target: str, ignoring: frozenset[str] = frozenset()
) -> tuple[Hold, list[tuple[Node, Obj | None]]]:
    """The holds steering ``pod`` onto ``target`` takes, from every node and pod read now (``ignoring``: nodes about to be
    fenced, never held), and the nodes as ``_candidate`` kept them."""
    mover = parse_pod(pod, source=SOURCE)
    nodes = [
        n for n in run.client.scan_nodes(partial(_candidate, mover=mover, target=target)) if n[0].name not in ignoring
    ]
    used = usage(run.client.scan_pods(partial(use_of, leaving=mover)))
    return hold_over((node for node, _ in nodes), used, mover, target=target, dra=run.log.dra_nodes), nodes


def at_most(caps: CapsSettings) -> str:
    """``caps.max_holds_per_move`` in words (read in this module alone: the run's stop, the plan's wall, these words)."""
    return f"at most {caps.max_holds_per_move} node(s) per move"


def _within_limit(run: Run, plan: Hold, why: str, target: str) -> None:
    limit = run.settings.caps.max_holds_per_move
    if len(plan.rivals) > limit:
        raise StopHere(f"max_holds_per_move ({limit})", holds_detail(why, target, len(plan.rivals)))


def holds_detail(pod: str, target: str, holds: int) -> str:
    """What reaching ``max_holds_per_move`` means, for the run's reason and the plan's warning."""
    return (
        f"moving {pod} to {target} would hold {holds} node(s); install the steering policy (manifests/steering) to "
        "steer without holds"
    )


@dataclass(frozen=True)
class HoldsWall:
    """The first move of a plan a run steering by holds would not start: ``index`` (from 0) of ``moves``."""

    index: int
    moves: int
    pod: str
    target: str
    holds: int
    limit: int

    def says(self) -> str:
        where = "before its first move" if self.index == 0 else f"after {self.index} of its {self.moves} moves"
        return (
            f"a run steering by holds stops {where}: moving {self.pod} to {self.target} would hold {self.holds} "
            f"node(s), more than caps.max_holds_per_move ({self.limit}); install the steering policy "
            "(manifests/steering) to steer without holds"
        )


def first_wall(
    nodes: Sequence[Node], pods: Sequence[Pod], moves: Sequence[Move], *, fencing: Collection[str], caps: CapsSettings
) -> HoldsWall | None:
    """The first of ``moves`` a run steering by holds would stop at, as the snapshot shows the cluster (``nodes``,
    ``pods``): the moves before it carried out as planned, the nodes in ``fencing`` fenced (never held), each move's
    holds counted as ``choose_holds`` counts them. None when every move stays within ``max_holds_per_move``."""
    limit = caps.max_holds_per_move
    open_nodes = [n for n in nodes if n.name not in fencing]
    used = usage((p.node_name, p.requests) for p in pods if p.is_bound and not p.deletion_timestamp)
    by_key = {p.key: p for p in pods}
    for index, move in enumerate(moves):
        pod = by_key.get(move.pod)
        if pod is None:
            continue
        without = {**used, move.from_node: used.get(move.from_node, Resources()) - pod.requests}
        holds = len(hold_over(open_nodes, without, pod, target=move.to_node).rivals)
        if holds > limit:
            return HoldsWall(index, len(moves), move.pod, move.to_node, holds, limit)
        used = {**without, move.to_node: without.get(move.to_node, Resources()) + pod.requests}
    return None


def _candidate(raw: Obj, *, mover: Pod, target: str) -> tuple[Node, Obj | None] | None:
    """What ``choose_holds`` keeps of a node: the target, parsed; a node that could take the mover (room aside), parsed and as
    read; of any other node nothing."""
    node = parse_node(raw, source=SOURCE, pool_label=DEFAULT_POOL_LABEL, warnings=[])
    if could_take(mover, node, target=target):
        return node, raw
    return (node, None) if node.name == target else None


def make_holds(run: Run, holds: Holds) -> None:
    """Fence, for a moment, the chosen nodes (only ``holds.target`` stays feasible for the pod)."""
    if not holds.nodes:
        return
    run.log.held_since = run.clock.monotonic()
    identity, at = run.settings.executor.identity, run.stamp()

    def hold(node: Obj) -> Obj | None:
        if ann.has_fence(node, identity):
            return None  # fenced by this run already: not a hold
        return ann.fence_patch(node, identity, run.plan_id, at, held_for=holds.why)

    for name, node in holds.nodes.items():
        if patch_fresh(run.client, name, hold, node=node) is None:
            run.state.held.remove(name)  # fenced by us already (or gone): not a hold to release
        else:
            run.log.holds += 1
    log.info(
        run.said("holding nodes", "would hold nodes (dry run)"),
        extra={"pod": holds.why, "target": holds.target, "held": len(holds.nodes)},
    )


def release_holds(run: Run) -> None:
    if not run.state.held:
        return
    for name in run.state.held:
        unfence(run, name, partial(ann.is_held, identity=run.settings.executor.identity))
    run.log.held_seconds += len(run.state.held) * max(0.0, run.clock.monotonic() - run.log.held_since)
    with run.write_ahead() as state:
        state.held = []


def check_hold_age(run: Run, what: str) -> None:
    held_for = run.clock.monotonic() - run.log.held_since
    if run.state.held and held_for >= run.settings.steering.steer_timeout_seconds:
        raise Abort(
            AbortReason.STEERING_FAILED,
            f"{what} was not bound within steer_timeout_seconds ({run.settings.steering.steer_timeout_seconds:g}s) "
            f"while {len(run.state.held)} node(s) were held; stopped and rolled back",
        )

"""A plan request -> the plan's decisions, in named stages: scope (what the snapshot and the history allow), problem,
search (``search.py``: solve, bound, curve, the point chosen under the run budgets), decide (concrete moves, the re-cut
and partition steps), document (``document.document``, built once), then the run budgets' cut (``budget_cut.py``).

``compose`` returns the ``CompactionPlan`` as the planner decides it: moves, placements, re-cuts, the curve, the solver
report, the run budgets' cut, why pods stay. The document's measurements (the fragmentation figures before and after,
why pending pods stay pending, the whole call's time) are ``compactor.app.plan_document``'s, which makes the request
(``request.PlanRequest.of``) and calls this.

Imports: the planner's modules, ``compactor.model`` (the reference shapes among them: ``model/shapes.py``) and
``compactor.settings``; never ``compactor.metrics``, ``actions``, ``kube``, ``prometheus_client``, ``apscheduler``, nor
``ortools`` (CP-SAT is ``cpsat.py``'s).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from compactor.model.migparted import Layouts
from compactor.model.shapes import ReferenceShape, judged_shapes
from compactor.model.types import Snapshot
from compactor.planner.budget_cut import cut_to_budgets
from compactor.planner.document import Outcome, Searched, document
from compactor.planner.objective import Assignment, empty_nodes
from compactor.planner.partitions import plan_partitions
from compactor.planner.plan import CompactionPlan
from compactor.planner.problem import Problem, build_problem
from compactor.planner.recut import Recut, plan_rebalance, plan_recuts, waiting_mig_pods
from compactor.planner.request import PlanRequest
from compactor.planner.rules.history import Restraints
from compactor.planner.rules.move_limits import MoveLimits
from compactor.planner.search.frontier import Point, plan_of
from compactor.planner.search_stage import best_so_far, search
from compactor.planner.solution import (
    ConcreteMove,
    ConcretePlacement,
    concretise,
    gpu_nodes_changed,
)
from compactor.planner.usable import usage_shapes
from compactor.settings.bundles import PlannerSettings
from compactor.settings.caps import CapsSettings


@dataclass(frozen=True)
class Composed:
    """A plan as the planner decides it, and what the plan document measures it with (``compactor.app.plan_document``)."""

    plan: CompactionPlan  # without the figures before and after, pendingNotPlaced and solver.planSeconds
    snapshot: Snapshot  # the snapshot planned: the compactor's own pins lifted (``pins.without_own_pins``)
    shapes: tuple[ReferenceShape, ...]  # the reference shapes the plan was made with (the re-cut step's)
    problem: Problem  # the whole problem, before any narrowing
    # pending pods (namespace/name) the plan places, re-cuts' included, before the run budgets' cut
    placed: frozenset[str]


def compose(request: PlanRequest) -> Composed:
    """Plan a compaction of ``request.snapshot``, stage by stage. Pure apart from the solver's wall clock.

    ``request.clock`` bounds the whole call (``settings.time_limit_seconds``, started by the caller, whose figures of the
    snapshot before the plan count against it): every phase after building the problem and the greedy warm start (the
    model, each solve, the curve, the re-cut and partition steps) keeps to what is left of it and gives up with the best
    plan so far, never less than the warm start; the last ``1 - search.CURVE_END`` of it is left for finishing
    (concretising, the re-cut step, the figures after the plan). ``PlanRequest`` says what each of its other fields
    asks."""
    settings, warnings, held = _scope(request)
    original, built = _problem(request, settings, held)
    searched = search(request, original, built)
    problem = searched.result.problem if searched.result is not None else original
    outcome = _decide(request, problem, searched)
    if searched.result is not None and not outcome.moves and not outcome.placements:
        searched = replace(searched, note=_empty_note(settings, searched.note))
    plan = document(
        problem,
        outcome,
        searched,
        identity=(request.source, request.now.isoformat().replace("+00:00", "Z"), request.plan_id),
        warnings=warnings,
        restraints=held,
        load_seconds=request.load_seconds,
    )
    if request.budgets is not None or request.max_evictions is not None:
        plan = cut_to_budgets(plan, request.snapshot, request.budgets or CapsSettings(), request.max_evictions)
    return Composed(plan, request.snapshot, request.shapes, original, frozenset(p.pod.key for p in outcome.placements))


def _scope(request: PlanRequest) -> tuple[PlannerSettings, list[str], Restraints | None]:
    """The settings as this snapshot and the history allow them, and the warnings that say why."""
    snapshot, settings = request.snapshot, request.settings
    warnings = list(snapshot.warnings)
    if (
        snapshot.extra.get("orphan_pods")
        and settings.aims.goal == "free-nodes"
        and settings.aims.objective != "pending-only"
    ):
        # Pods and nodes were not read together: a node may run pods this snapshot does not show, so none is freed.
        settings = settings.amended(objective="pending-only")
        warnings.append(
            "freeing no node: the snapshot is not one consistent read (pods bound to nodes it does not contain), so "
            "nodes may run pods it does not show; only pending pods are placed. Read nodes and pods together: "
            "kubectl get nodes,pods,pdb,pv,pvc -A -o json"
        )
    settings, held = _restrained(settings, request.restraints, warnings)
    return settings, warnings, held


def _problem(request: PlanRequest, settings: PlannerSettings, held: Restraints | None) -> tuple[Problem, float]:
    """The problem (the warm start searches wide; the CP-SAT model keeps max_targets_per_type per type, see
    ``solver._narrow``) and the seconds building it took."""
    request.say("building the problem", "")
    building = time.monotonic()
    snapshot = request.snapshot
    problem = build_problem(
        snapshot, settings, max_targets=len(snapshot.nodes), steering=request.steering, now=request.now, restraints=held
    )
    problem = replace(
        problem,
        usage_shapes=usage_shapes(problem, [s.requests for s in judged_shapes(problem.snapshot.pods, request.shapes)]),
    )
    return problem, time.monotonic() - building


def _decide(request: PlanRequest, problem: Problem, searched: Searched) -> Outcome:
    """The chosen point made concrete, with the re-cut step's and the partition step's moves and placements."""
    settings = problem.settings
    assignment = (
        plan_of(searched.chosen)
        if searched.chosen is not None
        else (searched.result.assignment if searched.result is not None else Assignment())
    )
    moves: list[ConcreteMove] = []
    placements: list[ConcretePlacement] = []
    if problem.types:
        request.say("writing the plan", best_so_far(problem, assignment))
        moves, placements = concretise(problem, assignment, empty_nodes(problem, assignment))
    recuts: list[Recut] = []
    cut, chosen = list(searched.cut), searched.chosen
    if settings.mig.repartition and request.mig_parted is not None and searched.chosen is not None:
        chosen, moves, placements, recuts = _recut_step(problem, request, searched, (moves, placements), cut)
        if settings.mig.rebalance_min_gain is not None:
            idle = plan_rebalance(
                problem, request.mig_parted, moves, placements, recuts, request.shapes, settings.mig.rebalance_min_gain
            )
            recuts += _affordable(idle, len(moves) + round(settings.mig.recut_cost_moves * len(recuts)), settings)
    placements = [*placements, *(p for r in recuts for p in r.placements)]
    partitioned = plan_partitions(problem, moves, placements, max_moves=problem.limits.total, deadline=request.clock)
    moves = [*moves, *partitioned.moves]
    placements = [*(p for p in placements if p.pod.key not in partitioned.dropped), *partitioned.placements]
    freed, filled = gpu_nodes_changed(problem, moves, placements)
    return Outcome(
        moves, placements, recuts, partitioned.devices, freed, filled, chosen, tuple(cut), tuple(partitioned.notes)
    )


def _empty_note(settings: PlannerSettings, note: str) -> str:
    empty = (
        "moves capped at 0 (--max-moves / caps.max_moves)"
        if MoveLimits.of(settings).none_allowed
        else "this search found no move that frees usable GPU capacity or places a pending pod"
    )
    return f"{empty}; {note}" if note else empty


RECUT_STEP_POINTS = 20  # further points of the curve tried for a node to re-cut


def _recut_step(
    problem: Problem,
    request: PlanRequest,
    searched: Searched,
    concrete: tuple[list[ConcreteMove], list[ConcretePlacement]],
    cut: list[str],
) -> tuple[Point, list[ConcreteMove], list[ConcretePlacement], list[Recut]]:
    """Re-cuts at the chosen point; when pending MIG pods wait and the point frees no node to cut for them, the
    re-cut is a step of its own: the first further point of the curve that frees such a node is taken instead.
    Each re-cut counts ``recut_cost_moves`` against ``max_moves``: a step that would pass the cap is not taken. When
    none fits beside the chosen point's moves, re-cuts of nodes already whole-free, with no move at all, are taken
    instead if they place more pending pods than the chosen point does (``_recuts_alone``). Further points are tried
    while the request's time limit lasts. ``concrete``: the chosen point's moves and placements."""
    moves, placements = concrete
    settings, parted, chosen = problem.settings, request.mig_parted, searched.chosen
    assert parted is not None and chosen is not None  # _decide takes the step only with layouts and a chosen point
    recuts = _affordable(plan_recuts(problem, parted, moves, placements), len(moves), settings)
    if recuts or not waiting_mig_pods(problem, placements):
        return chosen, moves, placements, recuts
    further = [p for p in searched.points if p.freed_gpus > chosen.freed_gpus]
    for tried, point in enumerate(further[:RECUT_STEP_POINTS]):
        if request.clock.expired():
            cut.append(f"re-cut step: {tried} further point(s) of the curve tried before the time limit")
            break
        assignment = plan_of(point)
        step_moves, step_placements = concretise(problem, assignment, empty_nodes(problem, assignment))
        found = _affordable(plan_recuts(problem, parted, step_moves, step_placements), len(step_moves), settings)
        if found:
            return point, step_moves, step_placements, found
    alone = _recuts_alone(problem, parted, settings, placed=len(placements))
    if not alone:
        return chosen, moves, placements, []
    unmoved = Point(0, 0, 0, 0, "OPTIMAL", 0, Assignment.unchanged(problem))
    searched.points.insert(0, unmoved)  # the no-move point joins the curve's rows, the re-cut step's row after it
    return unmoved, [], [], alone


def _recuts_alone(problem: Problem, parted: Layouts, settings: PlannerSettings, *, placed: int) -> list[Recut]:
    """The re-cuts of nodes already whole-free, with no move, when they place more pending pods than ``placed`` (a
    re-cut costs ``recut_cost_moves`` of ``max_moves``: when the chosen point's moves leave no room for one, as at a price
    of 20 of 20, a point making room for one pod would keep a whole-free node from hosting 24); else none."""
    alone = _affordable(plan_recuts(problem, parted, [], []), 0, settings)
    return alone if sum(len(r.placements) for r in alone) > placed else []


def _affordable(recuts: list[Recut], moves: int, settings: PlannerSettings) -> list[Recut]:
    """The re-cuts, in order, that fit ``max_moves`` beside ``moves`` moves (each costs ``recut_cost_moves``)."""
    room = MoveLimits.of(settings).room(moves)
    if room is None:
        return recuts
    kept = []
    for recut in recuts:
        if room < settings.mig.recut_cost_moves:
            break
        room -= settings.mig.recut_cost_moves
        kept.append(recut)
    return kept


def _restrained(
    settings: PlannerSettings, restraints: Restraints | None, warnings: list[str]
) -> tuple[PlannerSettings, Restraints | None]:
    """The settings under the hourly/daily move caps (``restraints.moves_left``), and the warnings that say what history holds back."""
    if restraints is None or not restraints.any:
        return settings, None
    if restraints.paused:
        warnings.append(f"{restraints.paused}: a run now changes nothing (the plan shows what it would do)")
    if MoveLimits.of(settings).lowered(restraints.moves_left):
        settings = settings.amended(max_moves=restraints.moves_left)
        warnings.append(f"at most {restraints.moves_left} move(s) now: {restraints.budget}")
    if restraints.workloads or restraints.nodes:
        warnings.append(
            f"in their cooldown: {len(restraints.workloads)} workload(s), {len(restraints.nodes)} node(s) "
            "(explanations.cooldowns says why per pod)"
        )
    return settings, restraints

"""A plan request -> the plan's decisions, in named stages: scope (what the snapshot and the history allow), problem,
search (solve, bound, curve, the point chosen under the run budgets), decide (concrete moves, the re-cut and partition
steps), document (``document.document``, built once), then the run budgets' cut.

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
from compactor.model.shapes import ReferenceShape
from compactor.model.types import Snapshot
from compactor.planner.budgets import RunBudgets, refusal, take_nodes
from compactor.planner.deadline import Deadline
from compactor.planner.document import Outcome, Searched, document, move_docs
from compactor.planner.frontier import Point, choose, drain_costs, frontier, plan_of
from compactor.planner.history import Restraints
from compactor.planner.move_bound import fewest_moves_cost
from compactor.planner.objective import Assignment, empty_nodes, pending_weight
from compactor.planner.partitions import plan_partitions
from compactor.planner.plan import (
    CompactionPlan,
    FrontierPoint,
    Placement,
)
from compactor.planner.problem import Problem, build_problem
from compactor.planner.recut import Recut, plan_rebalance, plan_recuts, waiting_mig_pods
from compactor.planner.request import PlanRequest
from compactor.planner.solution import (
    ConcreteMove,
    ConcretePlacement,
    concretise,
    gpu_nodes_changed,
)
from compactor.planner.solver import SolveResult, solve
from compactor.planner.usable import usage_shapes
from compactor.settings import DisruptionSettings, PlannerSettings


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
    plan so far, never less than the warm start; the last ``1 - CURVE_END`` of it is left for finishing (concretising,
    the re-cut step, the figures after the plan). ``PlanRequest`` says what each of its other fields asks."""
    settings, warnings, held = _scope(request)
    original, built = _problem(request, settings, held)
    searched = _search(request, original, built)
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
        plan = _within_budgets(plan, request.snapshot, request.budgets or DisruptionSettings(), request.max_evictions)
    return Composed(plan, request.snapshot, request.shapes, original, frozenset(p.pod.key for p in outcome.placements))


def _scope(request: PlanRequest) -> tuple[PlannerSettings, list[str], Restraints | None]:
    """The settings as this snapshot and the history allow them, and the warnings that say why."""
    snapshot, settings = request.snapshot, request.settings
    warnings = list(snapshot.warnings)
    if snapshot.extra.get("orphan_pods") and settings.mode == "free-nodes" and settings.objective != "pending-only":
        # Pods and nodes were not read together: a node may run pods this snapshot does not show, so none is freed.
        settings = settings.model_copy(update={"objective": "pending-only"})
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
    problem = replace(problem, usage_shapes=usage_shapes(problem, [s.requests for s in request.shapes]))
    return problem, time.monotonic() - building


def _search(request: PlanRequest, problem: Problem, built: float) -> Searched:
    """The max-free solve, the moves bound and the trade-off curve, the point chosen under the run budgets."""
    settings, clock = problem.settings, request.clock
    if not problem.types:
        chosen = Point(0, 0, 0, 0, "OPTIMAL", 0, Assignment()) if settings.mode == "free-nodes" else None
        note = "nothing to plan: no pod may move and no GPU pod is pending"
        return Searched(None, [chosen] if chosen else [], chosen, note)
    share = settings.time_limit_seconds * SOLVE_SHARE - clock.elapsed()
    curve_end = _curve_end(settings, built)
    request.say("searching", "")
    # A model still building when the solves' share runs out may go on into the curve's time: the curve starts from it.
    result = solve(
        problem,
        deadline=clock.until(max(0.1, share) if settings.deterministic else share),
        build=clock.until(curve_end - clock.elapsed())
        if settings.mode == "free-nodes" and not settings.deterministic
        else None,
    )
    if settings.mode != "free-nodes":
        return Searched(result, [], None)
    request.say("bounding moves and drawing the trade-off curve", _best(result.problem, result.assignment))
    cut: list[str] = []
    moves_bound = _moves_bound(problem, result, clock.until(curve_end - clock.elapsed()), cut)
    started = time.monotonic()
    points, chosen = _curve(result.problem, result, settings, clock.until(curve_end - clock.elapsed()), cut)
    chosen, note = _hollow(points, chosen, settings.objective)
    held_by = ""
    if request.budgets is not None or request.max_evictions is not None:
        chosen, held_by = _within_run_budgets(
            result.problem,
            request.snapshot,
            points,
            chosen,
            request.budgets or DisruptionSettings(),
            request.max_evictions,
            settings.objective,
        )
    if result.restricted:
        _whole_cluster_bounds(points, problem)
    return Searched(result, points, chosen, note, held_by, moves_bound, time.monotonic() - started, tuple(cut))


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
        request.say("writing the plan", _best(problem, assignment))
        moves, placements = concretise(problem, assignment, empty_nodes(problem, assignment))
    recuts: list[Recut] = []
    cut, chosen = list(searched.cut), searched.chosen
    if settings.mig_repartition and request.mig_parted is not None and searched.chosen is not None:
        chosen, moves, placements, recuts = _recut_step(
            problem,
            request.mig_parted,
            searched.points,
            searched.chosen,
            moves,
            placements,
            settings,
            request.clock,
            cut,
        )
        if settings.mig_rebalance_min_gain is not None:
            idle = plan_rebalance(
                problem, request.mig_parted, moves, placements, recuts, request.shapes, settings.mig_rebalance_min_gain
            )
            recuts += _affordable(idle, len(moves) + round(settings.recut_cost_moves * len(recuts)), settings)
    placements = [*placements, *(p for r in recuts for p in r.placements)]
    partitioned = plan_partitions(problem, moves, placements, max_moves=settings.max_moves, deadline=request.clock)
    moves = [*moves, *partitioned.moves]
    placements = [*(p for p in placements if p.pod.key not in partitioned.dropped), *partitioned.placements]
    freed, filled = gpu_nodes_changed(problem, moves, placements)
    return Outcome(
        moves, placements, recuts, partitioned.devices, freed, filled, chosen, tuple(cut), tuple(partitioned.notes)
    )


def _empty_note(settings: PlannerSettings, note: str) -> str:
    empty = (
        "moves capped at 0 (--max-moves / planner.max_moves)"
        if settings.max_moves == 0
        else "this search found no move that frees usable GPU capacity or places a pending pod"
    )
    return f"{empty}; {note}" if note else empty


BUDGET_POINTS = 30  # points of the curve tried, from the chosen one down, for one a run can carry out whole


def _within_run_budgets(
    problem: Problem,
    snapshot: Snapshot,
    points: list[Point],
    chosen: Point,
    cfg: DisruptionSettings,
    cap: int | None,
    objective: str,
) -> tuple[Point, str]:
    """The chosen point when one run can carry it out whole under the run budgets, else the freest cheaper point of the
    curve that it can, and the ``heldBack`` that says which budget held the chosen one back ("" when none did, or when
    no point fits whole: then ``_within_budgets`` cuts the chosen one)."""
    cheaper = sorted((p for p in points if p.cost < chosen.cost), key=lambda p: (-p.usable_gpus, p.cost))
    held = ""
    for point in [chosen, *cheaper][:BUDGET_POINTS]:
        assignment = plan_of(point)
        moves, placements = concretise(problem, assignment, empty_nodes(problem, assignment))
        docs = move_docs(problem, moves, set(), placements)
        placed = [Placement(pod=p.pod.key, to_node=problem.nodes[p.target].node.name) for p in placements]
        why = refusal(docs, placed, RunBudgets.of(snapshot, cfg, [m.pod for m in docs]).admit(cap))
        if not why:
            if point is chosen:
                return chosen, ""
            return point, (
                f"{held} reached by the {objective} point ({chosen.moves} moves, {chosen.usable_gpus} usable GPUs): "
                f"this plan is the best point one run can carry out whole ({len(moves)} move(s)); the rest waits for a "
                "later run"
            )
        held = held or why
    return chosen, ""


def _within_budgets(
    plan: CompactionPlan, snapshot: Snapshot, cfg: DisruptionSettings, cap: int | None
) -> CompactionPlan:
    """The plan cut to the whole source nodes the run budgets let one run take (``budgets.py``), saying which one cut it;
    the cut plan is a row of the curve of its own, marked as the one carried out."""
    budgets = RunBudgets.of(snapshot, cfg, [m.pod for m in plan.moves])
    gpus = {n.name: n.countable_gpus for n in snapshot.nodes}
    cut, which = take_nodes(plan, budgets.admit(cap), gpus)
    if not which:
        return plan
    row = FrontierPoint(
        freed_nodes=len(cut.freed_nodes),
        freed_gpus=cut.freed_gpus,
        usable_gpus=None,
        moves=len(cut.moves),
        cost=round(sum(m.cost for m in cut.moves), 2),
        status="FEASIBLE",
        bound=0.0,
        chosen=True,
        budget_cut=True,
    )
    frontier = [p.model_copy(update={"chosen": False}) for p in plan.frontier]
    at = next((i + 1 for i, p in enumerate(plan.frontier) if p.chosen), len(frontier))
    return cut.model_copy(
        update={
            "held_back": f"{which} reached: {len(plan.moves) - len(cut.moves)} of {len(plan.moves)} moves "
            f"wait for a later run",
            "frontier": [*frontier[:at], row, *frontier[at:]],
            "usable_freed_gpus": None,
            "unusable": "",
        }
    )


def _best(problem: Problem, assignment: Assignment) -> str:
    freed = sum(problem.nodes[i].gpus for i in empty_nodes(problem, assignment)) - problem.empty_before_gpus
    return f"{freed} GPUs freed, {assignment.moves(problem)} moves"


SOLVE_SHARE = 0.5  # of the time limit for the max-free solve; the curve gets at most what is left until CURVE_END
CURVE_END = 0.85  # the rest of the limit: concretising, the after figures, the re-cut step
# on the wall clock, finishing takes up to about this share of the time building the problem took
FINISH_PER_BUILD = 0.6


def _curve_end(settings: PlannerSettings, built: float) -> float:
    """When the curve must end, on the plan's clock: at CURVE_END of the limit, or earlier when the cluster is so large
    that finishing (concretising, the re-cut step, the after figures: all of it scales with the snapshot, as building the
    problem did) needs more than the rest (wall clock only: the deterministic clock does not count that work)."""
    limit = settings.time_limit_seconds
    if settings.deterministic:
        return limit * CURVE_END
    return limit - max(limit * (1 - CURVE_END), FINISH_PER_BUILD * built)


def _moves_bound(whole: Problem, result: SolveResult, deadline: Deadline, cut: list[str]) -> int | None:
    """The least move cost of any plan of the whole cluster placing the max-free plan's pending pods and freeing its GPUs
    (``move_bound.fewest_moves_cost``): how far its moves may be from the fewest. Taken from the curve's time."""
    if deadline.remaining() < MOVE_BOUND_MIN_SECONDS:
        cut.append("no lower bound on the max-free plan's moves")
        return None
    problem, assignment = result.problem, result.assignment
    freed = sum(problem.nodes[n].gpus for n in result.empty_nodes) - problem.empty_before_gpus
    return fewest_moves_cost(
        whole, freed_gpus=freed, pending_weight=pending_weight(problem, assignment), deadline=deadline
    )


# less than this left of the curve's time: no move bound (at 5,000 nodes building it takes ~0.1 s)
MOVE_BOUND_MIN_SECONDS = 0.2
# on small clusters the max-free solve takes milliseconds; the curve then still gets time to prove its points
MIN_CURVE_SECONDS = 1.0


def _curve(
    problem: Problem, result: SolveResult, settings: PlannerSettings, deadline: Deadline, cut: list[str]
) -> tuple[list[Point], Point]:
    """The trade-off curve (within as long again as the max-free solve took, at most what remains of the time limit) and
    the point to run."""
    points = frontier(problem, result, deadline=deadline.until(max(MIN_CURVE_SECONDS, result.spent)), cut=cut)
    if not points:  # no point kept the limits (e.g. minGainPerMove): the max-free plan, which does, or nothing
        return [], Point(
            0, 0, 0, 0, result.status, 0, result.assignment if result.assignment else Assignment.unchanged(problem)
        )
    return points, choose(points, settings.objective, settings.balanced_moves_per_gpu, settings.move_cost.base)


def _hollow(points: list[Point], chosen: Point, objective: str) -> tuple[Point, str]:
    """The chosen point, or the curve's first (pending pods placed, nothing freed on purpose) when the chosen one costs
    more for no usable GPU more: freed GPUs no request shape in use can take are no gain. And the note that says so."""
    if not points or chosen.cost <= points[0].cost or chosen.usable_gpus > points[0].usable_gpus:
        return chosen, ""
    return points[0], (
        f"the {objective} point frees {chosen.freed_gpus} GPU(s) no request shape in use can take: the first point of "
        "the curve is carried out instead"
    )


def _whole_cluster_bounds(points: list[Point], whole: Problem) -> None:
    """A narrowed model's cost bounds hold only among the pods and targets it kept. For the whole cluster, a plan
    freeing k nodes that ran GPU pods moves at least every GPU pod off them: the k cheapest such nodes' pods."""
    cheapest = sorted(drain_costs(whole).values())
    for point in points:
        point.bound = min(point.cost, sum(cheapest[: point.freed_nodes]))
        point.status = "OPTIMAL" if point.bound >= point.cost else "FEASIBLE"


RECUT_STEP_POINTS = 20  # further points of the curve tried for a node to re-cut


def _recut_step(  # noqa: PLR0913
    problem: Problem,
    parted: Layouts,
    points: list[Point],
    chosen: Point,
    moves: list[ConcreteMove],
    placements: list[ConcretePlacement],
    settings: PlannerSettings,
    clock: Deadline,
    cut: list[str],
) -> tuple[Point, list[ConcreteMove], list[ConcretePlacement], list[Recut]]:
    """Re-cuts at the chosen point; when pending MIG pods wait and the point frees no node to cut for them, the
    re-cut is a step of its own: the first further point of the curve that frees such a node is taken instead.
    Each re-cut counts ``recut_cost_moves`` against ``max_moves``: a step that would pass the cap is not taken.
    Further points are tried while the time limit (``clock``) lasts."""
    recuts = _affordable(plan_recuts(problem, parted, moves, placements), len(moves), settings)
    if recuts or not waiting_mig_pods(problem, placements):
        return chosen, moves, placements, recuts
    for tried, point in enumerate([p for p in points if p.freed_gpus > chosen.freed_gpus][:RECUT_STEP_POINTS]):
        if clock.expired():
            cut.append(f"re-cut step: {tried} further point(s) of the curve tried before the time limit")
            break
        assignment = plan_of(point)
        step_moves, step_placements = concretise(problem, assignment, empty_nodes(problem, assignment))
        found = _affordable(plan_recuts(problem, parted, step_moves, step_placements), len(step_moves), settings)
        if found:
            return point, step_moves, step_placements, found
    return chosen, moves, placements, recuts


def _affordable(recuts: list[Recut], moves: int, settings: PlannerSettings) -> list[Recut]:
    """The re-cuts, in order, that fit ``max_moves`` beside ``moves`` moves (each costs ``recut_cost_moves``)."""
    if settings.max_moves is None:
        return recuts
    room: float = settings.max_moves - moves
    kept = []
    for recut in recuts:
        if room < settings.recut_cost_moves:
            break
        room -= settings.recut_cost_moves
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
    if restraints.moves_left is not None and (settings.max_moves is None or restraints.moves_left < settings.max_moves):
        settings = settings.model_copy(update={"max_moves": restraints.moves_left})
        warnings.append(f"at most {restraints.moves_left} move(s) now: {restraints.budget}")
    if restraints.workloads or restraints.nodes:
        warnings.append(
            f"in their cooldown: {len(restraints.workloads)} workload(s), {len(restraints.nodes)} node(s) "
            "(explanations.cooldowns says why per pod)"
        )
    return settings, restraints

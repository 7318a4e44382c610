"""The search stage of ``compose.compose``: the max-free solve, the bound on its moves, the trade-off curve, and the
point chosen under the policy and the run budgets, each within its share of the plan's time limit.

Separate from ``compose.py`` because it is where the time limit is shared out (``SOLVE_SHARE``, ``CURVE_END``): the
stages before it only build the problem, the ones after only make the chosen point concrete and document it.

Imports: the solver, the curve (``frontier``), the moves bound, the budgets' point choice (``budget_cut``), the
document's ``Searched``, the objective, the problem, the request, the deadline, ``compactor.settings``; never
``ortools`` (CP-SAT is ``cpsat.py``'s).
"""

from __future__ import annotations

import time

from compactor.planner import cpsat
from compactor.planner.budget_cut import point_within_budgets
from compactor.planner.cpsat.deadline import Deadline
from compactor.planner.document import Searched
from compactor.planner.objective import Assignment, empty_nodes, pending_weight
from compactor.planner.problem import Problem
from compactor.planner.request import PlanRequest
from compactor.planner.search.curve_choice import choose
from compactor.planner.search.frontier import Point, drain_costs, frontier
from compactor.planner.search.move_bound import fewest_moves_cost
from compactor.planner.search.solver import SolveResult, solve
from compactor.settings.bundles import PlannerSettings
from compactor.settings.caps import CapsSettings

SOLVE_SHARE = 0.5  # of the time limit for the max-free solve; the curve gets at most what is left until CURVE_END
CURVE_END = 0.85  # the rest of the limit: concretising, the after figures, the re-cut step
# on the wall clock, finishing takes up to about this share of the time building the problem took (5,000 nodes / 50,000
# pods, one other core busy: 0.7-1.05x of a 2-3 s build), with a margin for the load's jitter
FINISH_PER_BUILD = 1.2


def _curve_end(settings: PlannerSettings, built: float) -> float:
    """When the curve must end, on the plan's clock: at CURVE_END of the limit, or earlier when the cluster is so large
    that finishing (concretising, the re-cut step, the after figures: all of it scales with the snapshot, as building the
    problem did) needs more than the rest (wall clock only: the deterministic clock does not count that work)."""
    limit = settings.solver.time_limit_seconds
    if settings.solver.deterministic:
        return limit * CURVE_END
    return limit - max(limit * (1 - CURVE_END), FINISH_PER_BUILD * built)


def search(request: PlanRequest, problem: Problem, built: float) -> Searched:
    """The max-free solve, the moves bound and the trade-off curve, the point chosen under the run budgets."""
    settings, clock = problem.settings, request.clock
    if not problem.types:
        chosen = Point(0, 0, 0, 0, "OPTIMAL", 0, Assignment()) if settings.aims.goal == "free-nodes" else None
        note = "nothing to plan: no pod may move and no GPU pod is pending"
        return Searched(None, [chosen] if chosen else [], chosen, note)
    before = clock.elapsed()
    share = settings.solver.time_limit_seconds * SOLVE_SHARE - before
    curve_end = _curve_end(settings, built)
    request.say("searching", "")
    # A model still building when the solves' share runs out may go on into the curve's time: the curve starts from it.
    result = solve(
        problem,
        deadline=clock.until(max(0.1, share) if settings.solver.deterministic else share),
        build=clock.until(curve_end - clock.elapsed())
        if settings.aims.goal == "free-nodes" and not settings.solver.deterministic
        else None,
    )
    if settings.aims.goal != "free-nodes":
        return Searched(result, [], None)
    request.say("bounding moves and drawing the trade-off curve", best_so_far(result.problem, result.assignment))
    cut: list[str] = []
    moves_bound = _moves_bound(problem, result, clock.until(curve_end - clock.elapsed()), cut)
    started = time.monotonic()
    points, chosen = _curve(result.problem, result, settings, clock.until(curve_end - clock.elapsed()), cut)
    chosen, note = _hollow(points, chosen, settings.aims.objective)
    held_by = ""
    if request.budgets is not None or request.max_evictions is not None:
        chosen, held_by = point_within_budgets(
            result.problem,
            request.snapshot,
            points,
            chosen,
            request.budgets or CapsSettings(),
            request.max_evictions,
            settings.aims.objective,
            # trying points is finishing work: it may take the limit's rest but what finishing the plan needs
            clock.until(settings.solver.time_limit_seconds - FINISH_PER_BUILD * built - clock.elapsed()),
        )
    if result.restricted:
        _whole_cluster_bounds(points, problem)
    enough = enough_time_limit(before + result.greedy_seconds, built) if result.unbuilt else None
    if clock.wall_capped:
        cut.append(
            f"{clock.wall_capped} solve(s) on the deterministic clock stopped at their wall-clock safety cap "
            f"({cpsat.WALL_CAP:g}x their limit): on a faster or idler machine this plan may differ"
        )
    return Searched(result, points, chosen, note, held_by, moves_bound, time.monotonic() - started, tuple(cut), enough)


# Building the CP-SAT model takes about as long as building the problem did, or less at scale: the model keeps at most
# solver.max_candidate_pods pods and max_targets_per_type targets each (measured, one other core busy: 0.65x at 5,000
# nodes / 50,000 pods, 1.1-1.3x at 2,000 nodes / 20,000 pods)
MODEL_PER_BUILD = 1.0
MIN_LEVEL_SECONDS = 1.0  # a level's solve worth having
ROUND_LIMITS = (5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600, 900, 1800, 3600)


def enough_time_limit(before_model: float, built: float) -> int | None:
    """The round time limit whose max-free share (SOLVE_SHARE) holds what this run spent before it could start the
    model (``before_model``: the figures, the problem, the greedy warm start), the model's building (MODEL_PER_BUILD of
    ``built``, the problem's) and a solve of its levels; None beyond an hour."""
    needed = (before_model + MODEL_PER_BUILD * built + MIN_LEVEL_SECONDS) / SOLVE_SHARE
    return next((limit for limit in ROUND_LIMITS if limit >= needed), None)


def best_so_far(problem: Problem, assignment: Assignment) -> str:
    """What the progress line (``PlanRequest.say``) says of a plan: the GPUs it frees and its moves."""
    freed = sum(problem.nodes[i].gpus for i in empty_nodes(problem, assignment)) - problem.empty_before_gpus
    return f"{freed} GPUs freed, {assignment.moves(problem)} moves"


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
    return points, choose(
        points, settings.aims.objective, settings.aims.balanced_moves_per_gpu, settings.aims.move_cost.base
    )


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

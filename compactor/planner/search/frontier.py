"""The disruption trade-off curve: for k = 0, 1, 2, ... more nodes freed, the cheapest plan that does it.

Every point places as many pending pods as the plan can (that level is fixed first),
then frees at least k GPU nodes that ran GPU pods, at the lowest move cost (ties: the
most GPUs freed). Each point is a valid plan with its own status:

* upper bounds come from valid assignments: greedy best-fit draining, cheapest nodes
  first, from the k = 0 point; and the max-free plan, which serves every k below its own;
* lower bounds: a plan freeing k nodes moves every GPU pod off them, so it costs at least
  the k cheapest nodes' GPU pods; and at least the k = 0 point's proven bound;
* where they differ, CP-SAT minimises the point's cost from the best assignment known,
  on one model whose "freed at least k" bound is fixed point by point (``cpsat.fix``), within
  a time no longer than the max-free solve took.

The policy (``aims.objective``) then picks the point to execute.

Imports: CP-SAT through ``cpsat`` (never ``ortools`` itself), the model's variables and constraints, the level
solver's built model, the search's result, the objective, greedy, the problem, the deadline.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from compactor.planner import cpsat
from compactor.planner.cpsat import constraints as c
from compactor.planner.cpsat.deadline import Deadline, OutOfTime
from compactor.planner.cpsat.int64 import checked
from compactor.planner.cpsat.levels import BuiltModel, extract
from compactor.planner.cpsat.variables import make_variables
from compactor.planner.objective import Assignment, empty_nodes, within_limits
from compactor.planner.problem import Problem
from compactor.planner.search.greedy import Drainer, greedy, prune
from compactor.planner.search.solver import SolveResult
from compactor.planner.solution import concretise, executable, gpu_nodes_changed, usable_freed
from compactor.planner.usable import usable_gpus

MIN_SOLVE_SECONDS = 0.5


@dataclass
class Point:
    freed_nodes: int
    freed_gpus: int
    moves: int
    cost: int
    status: str  # OPTIMAL: no plan freeing this many nodes costs less; FEASIBLE: ``bound`` is the best proven
    bound: int
    assignment: Assignment | None  # None: a greedy step, replayed on demand (``plan_of``)
    step: int = -1
    steps: _Steps | None = None
    usable: int | None = None  # net freed GPUs a shape in use can take (``usable.py``); None: all of them

    @property
    def usable_gpus(self) -> int:
        return self.freed_gpus if self.usable is None else self.usable


def plan_of(point: Point) -> Assignment:
    """The point's assignment (a greedy step's is replayed from the k = 0 point: deterministic)."""
    if point.assignment is None:
        assert point.steps is not None
        point.assignment = point.steps.assignment(point.step)
    return point.assignment


class _Steps:
    """Greedy draining from the k = 0 point, cheapest nodes first, with each step's figures kept incrementally:
    copying or concretising hundreds of assignments would cost more than the solver."""

    def __init__(self, problem: Problem, zero: Point, order: Sequence[int]) -> None:
        self.problem, self.zero, self.order = problem, zero, order
        self.drained: list[int] = []  # nodes in the order they were drained
        self.cut = False  # the deadline passed before every node was tried

    def points(self, deadline: Deadline) -> list[Point]:
        """The steps' points, until ``deadline``."""
        problem, zero = self.problem, self.zero
        drainer = Drainer(problem, plan_of(zero))
        counts = drainer.assignment.counts
        moves, cost, freed, gpus, usable = zero.moves, zero.cost, zero.freed_nodes, zero.freed_gpus, zero.usable_gpus
        shapes = problem.usage_shapes
        found: list[Point] = []
        for node in self.order:
            if deadline.expired():
                self.cut = True
                break
            moved = drainer.drain(node)
            if moved is None:
                continue
            # Each (type, node) pair contributes max(0, initial - final) moves; only the pairs the drain touched change.
            changes: Counter[tuple[int, int]] = Counter()
            for mover, source, target in moved:
                changes[mover.index, target] += 1
                changes[mover.index, source] -= 1
            for (t, n), arrived in changes.items():
                ptype = problem.types[t]
                initial, final = len(ptype.initial.get(n, ())), counts.get(t, {}).get(n, 0)
                delta = max(0, initial - final) - max(0, initial - (final - arrived))
                moves, cost = moves + delta, cost + delta * ptype.cost
            freed, gpus = freed + 1, gpus + problem.nodes[node].gpus
            # nothing arrives on a drained node later (drains avoid them): what is usable there now stays so
            usable += usable_gpus(problem.nodes[node], drainer.loads.load[node], shapes)
            self.drained.append(node)
            if drainer.loads.within_limits():
                found.append(Point(freed, gpus, moves, cost, "FEASIBLE", 0, None, len(self.drained), self, usable))
        return found

    def assignment(self, step: int) -> Assignment:
        """The assignment after ``step`` drains (replayed: deterministic)."""
        drainer = Drainer(self.problem, plan_of(self.zero))
        for node in self.drained[:step]:
            drainer.drain(node)
        return drainer.assignment


class _CostModel:
    """One CP-SAT model: pending placements fixed at their best, "freed nodes >= k" adjustable, minimise cost, then GPUs."""

    def __init__(self, problem: Problem, pending: int, deadline: Deadline, base: BuiltModel | None = None) -> None:
        """From ``base`` (the max-free solve's model of ``problem`` as built) when there is one, else built here: then
        ``OutOfTime`` when the deadline passes while building (thousands of nodes: seconds)."""
        self.problem = problem
        if base is not None and base.problem is problem:
            self.v = base.v.rebind(base.model)
        else:
            self.v = make_variables(problem, deadline)
            for build in c.ALL_CONSTRAINTS:
                build(problem, self.v)
            self.v.deadline = None
        model = self.v.model
        if self.v.placed:
            model.add(c.pending_placed(problem, self.v) >= pending)
        ran = [var for n, var in self.v.empty.items() if problem.nodes[n].ran_gpu_pods]
        self.k = model.new_int_var(0, len(ran), "k")
        model.add(cpsat.total(ran) >= self.k) if ran else model.add(self.k == 0)
        self.weight = sum(s.gpus for s in problem.nodes) + 1  # freed GPUs only break ties between equal costs
        terms = [(var, cost * self.weight) for var, cost in c.move_cost_terms(problem, self.v)]
        terms += [(var, -gpus) for var, gpus in c.freed_gpu_terms(problem, self.v)]
        checked(terms, c.move_costs_too_large(problem), bound=self.v.upper)
        model.minimize(cpsat.weighted_sum([var for var, _ in terms], [k for _, k in terms]))
        self.deadline = deadline

    def solve(self, k: int, hint: Assignment, seconds: float) -> tuple[str, Assignment | None, int]:
        """(status, as CP-SAT names it; the assignment, None without a solution; proven lower bound on the cost)."""
        cpsat.fix(self.k, k)
        self.v.hint(self.problem, hint, empty_nodes(self.problem, hint))
        solved = cpsat.solve(self.v.model, self.deadline, max(0.05, seconds))
        raw = solved.bound
        bound = max(0, math.ceil(raw / self.weight - 1e-9)) if not solved.infeasible and math.isfinite(raw) else 0
        return solved.status, extract(self.problem, self.v, solved) if solved.found else None, bound


def drain_costs(problem: Problem) -> dict[int, int]:
    """Freeable GPU node that ran GPU pods -> the cost of moving all its GPU pods away."""
    costs = {s.index: 0 for s in problem.nodes if s.gpus and s.can_empty and s.ran_gpu_pods}
    for ptype in problem.types:
        if ptype.uses_gpu and not ptype.pending:
            for node, pods in ptype.initial.items():
                if node in costs:
                    costs[node] += ptype.cost * len(pods)
    return costs


def summarise(problem: Problem, assignment: Assignment, status: str = "FEASIBLE", bound: int = 0) -> Point:
    """The point of the plan this assignment makes (freed nodes, net freed GPUs and usable ones, moves, cost): churn
    pruned, and without the moves no one-at-a-time order reaches (``concretise``, as the plan is built from the chosen
    point)."""
    moves, placements = concretise(problem, assignment, empty_nodes(problem, assignment))
    freed, filled = gpu_nodes_changed(problem, moves, placements)
    gpus = sum(problem.nodes[i].gpus for i in freed) - sum(problem.nodes[i].gpus for i in filled)
    cost = sum(m.ptype.cost for m in moves)
    usable = usable_freed(problem, moves, placements)
    return Point(len(freed), gpus, len(moves), cost, status, bound, assignment, usable=usable)


def frontier(problem: Problem, top: SolveResult, *, deadline: Deadline, cut: list[str] | None = None) -> list[Point]:
    """The curve from the pending-only point up to the max-free plan ``top``, dominated points dropped.

    Before ``deadline``: what it leaves no time for is left out and said in ``cut`` (the pending-only point's solve, the
    greedy steps past some node, the cost model); with no time at all the curve is the max-free plan alone."""
    cut = [] if cut is None else cut
    pending = round(next((lv.objective for lv in top.levels if lv.name == "pending"), 0.0))
    # Made on first use: at thousands of nodes making it takes seconds, and often no point needs a solve.
    model = _LazyModel(problem, pending, deadline, top)
    # the greedy steps take about as long as greedy
    steps_need = top.greedy_seconds if not deadline.deterministic else 0.0

    # the pending-only point's own greedy placement, pruning and figures take about as long as greedy did (at 5,000
    # nodes: seconds, unguarded once started): begun only when that much is left (issue 45: the curve ran 1.4 s over)
    room = deadline.remaining() >= steps_need if not deadline.deterministic else not deadline.expired()
    zero = _zero_point(problem, model, top, deadline, cut, steps_need + model.need) if room else None
    if zero is None:
        cut.append("no trade-off curve: the time limit left no time for it (the max-free plan alone)")
    costs = drain_costs(problem)
    best = _known_points(problem, top, zero, costs, deadline, cut)
    # no curve, no point to solve: the max-free plan's bound from the cheapest nodes' drains alone
    lower = _solved_points(
        problem, best, model if zero is not None else None, zero.bound if zero else 0, costs, deadline, cut
    )
    for point in best:
        point.bound = min(point.cost, max(lower.get(n, 0) for n in range(point.freed_nodes + 1)))
        point.status = "OPTIMAL" if point.bound >= point.cost else "FEASIBLE"
        if point.assignment is top.assignment and top.status == "OPTIMAL":
            point.status, point.bound = "OPTIMAL", point.cost  # the fewest-cost plan freeing the most GPUs, proven
    return _undominated(best)


def _known_points(
    problem: Problem,
    top: SolveResult,
    zero: Point | None,
    costs: dict[int, int],
    deadline: Deadline,
    cut: list[str],
) -> list[Point]:
    """The points known without a solve: the max-free plan, greedy's, the pending-only point and the greedy steps from
    it (each draining the next cheapest node)."""
    best: list[Point] = []
    _offer(best, problem, top.assignment)  # first: on a tie with a greedy step, the solver's plan stays
    warm = top.greedy_assignment
    # out of time, the max-free plan alone (offering a point costs its figures: at 5,000 nodes a third of a second)
    timely = deadline.deterministic or not deadline.expired()
    if timely and warm is not None and warm is not top.assignment and _placed(warm) == _placed(top.assignment):
        # at scale the search may free more for more moves: greedy drain's point stays on the curve
        _offer(best, problem, warm)
    if zero is None:
        return best
    _offer(best, problem, plan_of(zero))
    steps = _Steps(
        problem, zero, sorted(costs, key=lambda n: (costs[n], -problem.nodes[n].gpus, problem.nodes[n].node.name))
    )
    for point in steps.points(deadline):
        if not any(p.cost == point.cost and p.freed_gpus == point.freed_gpus for p in best):
            best.append(point)
    if steps.cut:
        cut.append(f"greedy steps of the trade-off curve stopped by the time limit after {len(steps.drained)} node(s)")
    return best


def _solved_points(
    problem: Problem,
    best: list[Point],
    model: _LazyModel | None,
    zero_bound: int,
    costs: dict[int, int],
    deadline: Deadline,
    cut: list[str],
) -> dict[int, int]:
    """For k = 1 .. the most nodes a point frees: a lower bound on the cost of freeing k nodes, and the cost model's
    cheapest plan freeing k added to ``best`` where the bound leaves room for a cheaper one than known (``model`` None:
    there is no curve, so the bounds alone)."""
    cheapest = sorted(costs.values())
    additive = _pending_and_draining_add_up(problem)
    top_nodes = max(p.freed_nodes for p in best)
    lower: dict[int, int] = {0: zero_bound}
    unsolved = 0
    for k in range(1, top_nodes + 1):
        lower[k] = lower[0] + sum(cheapest[:k]) if additive else max(lower[0], sum(cheapest[:k]))
        known = _cheapest_freeing(best, k)
        remaining = deadline.remaining()
        if known.cost <= lower[k] or model is None:
            continue
        if remaining <= 0.05 + model.need:
            unsolved += remaining > 0.05  # time enough for a solve, not to make the model first
            continue
        # The first points matter most (balanced stops early): each solve gets at least MIN_SOLVE_SECONDS, in order of k;
        # on the wall clock never past the deadline (nor past it by the time making the model takes).
        seconds = max(MIN_SOLVE_SECONDS, remaining / (top_nodes - k + 1))
        if not deadline.deterministic:
            seconds = min(seconds, remaining - model.need)
        try:
            status, found, proven = model().solve(k, plan_of(known), seconds)
        except OutOfTime:
            cut.append("the trade-off curve's cost model: not built within the time limit (its points are unproven)")
            break
        if (
            deadline.remaining() <= 0
        ):  # building the model took the time left: the solve found nothing worth waiting for
            break
        if found is not None:
            _offer(best, problem, found)
        lower[k] = max(lower[k], _cheapest_freeing(best, k).cost if status == "OPTIMAL" else proven)
    if unsolved and model is not None and model.made is None:
        cut.append(
            f"{unsolved} point(s) of the trade-off curve not solved: no time to make its cost model (greedy steps, unproven)"
        )
    return lower


def _pending_and_draining_add_up(problem: Problem) -> bool:
    """Whether any plan's cost splits into placing the pending pods (>= the k = 0 point's bound) plus emptying the freed
    nodes (>= their GPU pods' cost). Moves off a freed node serve only it; the other moves place the pending pods on their
    own unless one lands on a freed node, which only a pod without GPUs can do: with none movable, the bounds add up."""
    return all(t.uses_gpu for t in problem.types if not t.pending)


class _LazyModel:
    """The curve's cost model, made on first use. ``need``: the wall-clock seconds making it is expected to take (zero once
    made, and on CP-SAT's deterministic clock, which only solves spend): rebinding the max-free solve's model, or building
    one as long as that one took; none when the max-free solve had no time to build one (nor will this)."""

    def __init__(self, problem: Problem, pending: int, deadline: Deadline, top: SolveResult) -> None:
        self.problem, self.pending, self.deadline, self.top = problem, pending, deadline, top
        self.made: _CostModel | None = None
        base = top.base
        if deadline.deterministic:
            self.need = 0.0
        elif base is not None and base.problem is problem:
            self.need = base.seconds / 4
        elif top.unbuilt:
            self.need = math.inf
        else:
            self.need = top.model_seconds  # the components' models (or another problem's): about as long again

    def __call__(self) -> _CostModel:
        if self.made is None:
            self.made = _CostModel(self.problem, self.pending, self.deadline, self.top.base)
            self.need = 0.0
        return self.made


def _zero_point(
    problem: Problem,
    model: Callable[[], _CostModel],
    top: SolveResult,
    deadline: Deadline,
    cut: list[str],
    reserve: float = 0.0,
) -> Point:
    """Pending pods placed, nothing else freed on purpose: the cheapest plan that places them (unproven when the deadline,
    less ``reserve`` seconds for what follows, leaves no time to make and solve the cost model)."""
    if not any(t.pending for t in problem.types) or not _placed(top.assignment):
        # nothing pending to place, or the search placed none: the first point is no move at all
        return summarise(problem, Assignment.unchanged(problem), "OPTIMAL")
    hint = top.assignment
    # Makes room only for the pending pods; usually near the cheapest. And the max-free plan with its drains taken back.
    for placing in (greedy(problem, drain=False), prune(problem, top.assignment, keep_freed=False)):
        if (
            _placed(placing) == _placed(top.assignment)
            and within_limits(problem, placing)
            and placing.cost(problem) <= hint.cost(problem)
        ):
            hint = placing
    seconds = max(0.1, deadline.remaining() / 3)
    if reserve:
        seconds = min(seconds, deadline.remaining() - reserve)
    status, found, bound = "UNKNOWN", None, 0
    try:
        if deadline.deterministic or (deadline.remaining() - reserve > 0 and seconds > 0):
            status, found, bound = model().solve(0, hint, seconds)
        else:
            cut.append("the pending-only point: no time left to solve it (greedy placement, unproven)")
    except OutOfTime:
        cut.append(
            "the pending-only point: its cost model was not built within the time limit (greedy placement, unproven)"
        )
    if found is not None:
        runnable = executable(problem, found, empty_nodes(problem, found))
        found, status = runnable, status if _placed(runnable) == _placed(found) else "FEASIBLE"
    if found is None or _placed(found) < _placed(hint) or found.cost(problem) > hint.cost(problem):
        found, status = hint, "FEASIBLE"
    point = summarise(problem, found, status)
    point.bound = point.cost if status == "OPTIMAL" else min(bound, point.cost)
    return point


def _placed(assignment: Assignment) -> int:
    return sum(sum(per_node.values()) for per_node in assignment.placed.values())


def _offer(best: list[Point], problem: Problem, assignment: Assignment) -> None:
    point = summarise(problem, assignment)
    if not any(p.cost == point.cost and p.freed_gpus == point.freed_gpus for p in best):  # the first of equals stays
        best.append(point)


def _cheapest_freeing(best: list[Point], k: int) -> Point:
    """The cheapest known point that frees at least ``k`` nodes (the max-free plan always qualifies)."""
    return min((p for p in best if p.freed_nodes >= k), key=lambda p: (p.cost, -p.freed_gpus))


def _undominated(best: list[Point]) -> list[Point]:
    """The Pareto front by freed GPUs: a point is dropped when another frees as many GPUs or more for no more cost."""
    kept: list[Point] = []
    for point in sorted(best, key=lambda p: (-p.freed_gpus, p.cost)):
        if not kept or point.cost < kept[-1].cost:
            kept.append(point)
    return kept[::-1]

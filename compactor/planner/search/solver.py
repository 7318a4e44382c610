"""Solve a ``Problem``: the search around the level solver (``levels.py``).

Small problems: one model, level by level (pending pods placed, then whole-free GPUs or shape headroom, then move
cost), split into independent components (node pools that share no pod) when the limits allow. At scale: a model
narrowed around the greedy warm start, then a large-neighbourhood search (``lns.py``) of the whole problem from its
plan, with whole-cluster bounds (``bound.py``, ``move_bound.py``) since the narrowed model's proofs hold only where
it looked. Finally every plan is made runnable one eviction at a time (``solution.executable``).

Imports: the level solver, the search, the bounds, the objective, the problem, the deadline; never ``ortools``
(CP-SAT is ``cpsat.py``'s).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

from compactor.planner.cpsat.deadline import Deadline, deadline_for
from compactor.planner.cpsat.levels import BuiltModel, LevelResult, solve_levels
from compactor.planner.objective import (
    FREE_NODES,
    Assignment,
    empty_nodes,
    headroom,
    pending_weight,
    rank,
    within_limits,
)
from compactor.planner.problem import Problem, linked_nodes, movable_pods, restrict
from compactor.planner.search.bound import whole_free_bound
from compactor.planner.search.greedy import greedy, prune
from compactor.planner.search.lns import improve as lns
from compactor.planner.search.move_bound import most_freed_within
from compactor.planner.solution import executable


@dataclass
class SolveResult:
    problem: Problem
    assignment: Assignment
    empty_nodes: set[int]
    status: str
    levels: list[LevelResult] = field(default_factory=list)
    wall_seconds: float = 0.0
    variables: int = 0
    greedy_assignment: Assignment | None = None
    # empty: the model was the whole problem; else what it was narrowed to (its proofs hold only there)
    restricted: str = ""
    # freedGpus level: an upper bound valid for the whole problem (bound.whole_free_bound)
    whole_bound: int | None = None
    spent: float = 0.0  # on the deadline's clock (seconds, or CP-SAT deterministic time)
    unsolved: list[str] = field(default_factory=list)  # levels the time limit left unsolved (their incumbent stands)
    unbuilt: bool = False  # the time limit ran out before a CP-SAT model was built: the warm start is the result
    # wall-clock seconds of the greedy warm start (the curve's greedy steps take about as long)
    greedy_seconds: float = 0.0
    model_seconds: float = 0.0  # wall-clock seconds building the levels model(s) took
    base: BuiltModel | None = None  # the levels model of ``problem`` as built (one component, free-nodes mode)
    searched: int = 0  # neighbourhoods the large-neighbourhood search solved (``lns``; narrowed problems only)
    improvements: int = 0  # of which improved the plan


@dataclass(frozen=True)
class _Narrowed:
    problem: Problem
    start: Assignment
    mapping: dict[int, int]  # whole problem's type -> narrowed type
    sources: set[int] | None  # nodes whose movable pods stay variables; None: all (not narrowed)

    def lift(self, whole: Problem, assignment: Assignment) -> Assignment:
        """An assignment of the narrowed problem as one of the whole problem (pods outside the sources stay)."""
        if self.sources is None:
            return assignment
        back = {new: old for old, new in self.mapping.items()}
        counts = {
            t.index: {n: len(p) for n, p in t.initial.items() if n not in self.sources}
            for t in whole.types
            if not t.pending
        }
        for new, per_node in assignment.counts.items():
            acc = counts.setdefault(back[new], {})
            for node, count in per_node.items():
                acc[node] = acc.get(node, 0) + count
        placed = {back[new]: dict(per_node) for new, per_node in assignment.placed.items()}
        return Assignment({t: {n: k for n, k in per.items() if k} for t, per in counts.items()}, placed)


def _narrow(
    problem: Problem, start: Assignment, max_pods: int, max_targets: int, also: Assignment | None = None
) -> _Narrowed:
    """At scale, keep as variables only the pods the warm start moved, those on nodes it placed
    pending pods on, and those on the least GPU-loaded freeable nodes, up to ``max_pods`` movable pods.
    ``also``: another plan the narrowed problem must be able to express (its moves' pods stay variables too)."""
    if movable_pods(problem) <= max_pods and all(len(t.ranked_targets) <= max_targets for t in problem.types):
        return _Narrowed(problem, start, {t.index: t.index for t in problem.types}, None)
    plans = [start] if also is None else [start, also]
    sources: set[int] = set()
    for plan in plans:
        for ptype in problem.types:
            final = plan.counts.get(ptype.index, {})
            sources.update(n for n, pods in ptype.initial.items() if final.get(n, 0) < len(pods))
        for per_node in plan.placed.values():
            sources.update(per_node)
    movable_on: dict[int, int] = {}
    for ptype in problem.types:
        for node, pods in ptype.initial.items():
            movable_on[node] = movable_on.get(node, 0) + len(pods)
    spent = sum(movable_on.get(n, 0) for n in sources)
    if movable_pods(problem) <= max_pods:
        sources = {n for t in problem.types for n in t.initial}
    by_load = sorted(
        (s for s in problem.nodes if s.can_empty and s.index not in sources and s.index in movable_on),
        key=lambda s: (s.gpus - s.free_gpus_before, s.node.name),
    )
    for state in by_load:
        if spent + movable_on[state.index] > max_pods:
            break
        sources.add(state.index)
        spent += movable_on[state.index]
    used: dict[int, set[int]] = {}  # type -> nodes a plan moves pods of it to
    for plan in plans:
        for t, per_node in plan.counts.items():
            initial = problem.types[t].initial
            used.setdefault(t, set()).update(n for n, k in per_node.items() if k > len(initial.get(n, ())))
    narrowed, mapping = restrict(problem, sources, used, max_targets)
    return _Narrowed(narrowed, _translate(problem, start, mapping, sources), mapping, sources)


def _translate(problem: Problem, start: Assignment, mapping: dict[int, int], sources: set[int]) -> Assignment:
    counts: dict[int, dict[int, int]] = {}
    placed: dict[int, dict[int, int]] = {}
    for ptype in problem.types:
        new = mapping.get(ptype.index)
        if new is None:
            continue
        if ptype.pending:
            placed[new] = dict(start.placed.get(ptype.index, {}))
            continue
        final = dict(start.counts.get(ptype.index, {}))
        for node, pods in ptype.initial.items():
            if node not in sources:
                final[node] = final.get(node, 0) - len(pods)
        counts[new] = {n: k for n, k in final.items() if k}
    return Assignment(counts, placed)


def _components(problem: Problem) -> list[list[int]]:
    """Groups of types that share no node (e.g. MIG pools and whole-GPU pools), largest first."""
    group = linked_nodes(problem, problem.types)
    groups: dict[int, list[int]] = {}
    for ptype in problem.types:
        nodes = (*ptype.targets, *ptype.initial)
        groups.setdefault(group[nodes[0]] if nodes else -1 - ptype.index, []).append(ptype.index)
    return sorted(groups.values(), key=lambda g: -sum(len(problem.types[t].targets) for t in g))


def _decomposable(problem: Problem) -> bool:
    """Limits and shape headroom tie every node together; without them components are independent."""
    return not problem.target_shapes and not problem.limits.ties_nodes


def _part(problem: Problem, type_ids: list[int]) -> tuple[Problem, dict[int, int]]:
    """The subproblem over some types; only their nodes may count as freed."""
    nodes = {n for t in type_ids for n in (*problem.types[t].targets, *problem.types[t].initial)}
    mapping = {old: new for new, old in enumerate(type_ids)}
    types = [replace(problem.types[old], index=new) for old, new in mapping.items()]
    states = [s if s.index in nodes else replace(s, can_empty=False) for s in problem.nodes]
    return replace(problem, nodes=states, types=types), mapping


def _merge_levels(parts: list[list[LevelResult]], offset: dict[str, float]) -> list[LevelResult]:
    merged: dict[str, LevelResult] = {}
    for results in parts:
        for lv in results:
            acc = merged.get(lv.name)
            if acc is None:
                merged[lv.name] = LevelResult(
                    lv.name,
                    lv.status,
                    lv.objective + offset.get(lv.name, 0.0),
                    lv.bound + offset.get(lv.name, 0.0),
                    lv.seconds,
                )
                continue
            status = acc.status if acc.status == lv.status == "OPTIMAL" or acc.status != "OPTIMAL" else lv.status
            merged[lv.name] = LevelResult(
                lv.name, status, acc.objective + lv.objective, acc.bound + lv.bound, acc.seconds + lv.seconds
            )
    return list(merged.values())


def solve(
    problem: Problem,
    *,
    time_limit: float | None = None,
    deadline: Deadline | None = None,
    build: Deadline | None = None,
) -> SolveResult:
    """Solve, narrowing very large instances around the greedy warm start and solving independent
    components (node pools that share no pod) one by one; the result names the problem it solved.

    Narrowed, the model's proofs hold only among the pods and targets it kept: the result says so
    (``restricted``) and carries a bound valid for the whole problem. While time remains and that bound
    is not reached, the restriction widens (4x the targets, 2x the pods) around the best plan so far.
    The result is never worse than the greedy warm start, lexicographically (pending placed, freed, cost),
    moves that serve nothing are pruned from it, and every move can run one eviction at a time."""
    started = time.monotonic()
    deadline = deadline or deadline_for(problem.settings, time_limit)
    spent_before = deadline.now()
    best = _search(problem, deadline, build)
    if not problem.target_shapes:
        best = _runnable(problem, best, deadline)
    best.wall_seconds = time.monotonic() - started
    best.spent = deadline.now() - spent_before
    return best


# The ordered model is about twice the size and much harder for CP-SAT: worth solving only with time left (a small
# cluster proves its first model in milliseconds); otherwise the first plan, less what cannot run, is the answer.
REORDER_MIN_SECONDS = 0.5
REORDER_SHARE = 0.25
SEQUENTIAL_NOTE = "plans that run one eviction at a time (the best end state needs pods to swap full nodes)"


def _runnable(problem: Problem, result: SolveResult, deadline: Deadline) -> SolveResult:
    """The result, or a better one, with only moves the executor can carry out one eviction at a time.

    The model states where pods end, not in what order they get there: its optimum may swap pods between two
    full nodes, which no order of single evictions reaches. Then the plan loses those moves (and what they
    freed), and, with time left, the model is solved again asking for an order (``constraints.one_eviction_at_a_time``);
    the better of the two runs, reported FEASIBLE against the first model's bound (valid whatever the order)."""
    kept = executable(result.problem, result.assignment, result.empty_nodes)
    if rank(result.problem, kept) >= rank(result.problem, result.assignment):
        return result
    bound = _freed_bound(result)
    warm = result.greedy_assignment
    if warm is not None and within_limits(result.problem, warm):
        # The warm start, made move by move, runs as it is (almost always): the fallback that never places fewer.
        warm = executable(result.problem, warm, empty_nodes(result.problem, warm))
        kept = max(kept, warm, key=lambda plan: rank(result.problem, plan))
    result.assignment, result.empty_nodes = kept, empty_nodes(result.problem, kept)
    result.status = "FEASIBLE"  # its proofs were for the plan it can no longer run
    best = result
    if deadline.remaining() >= max(REORDER_MIN_SECONDS, REORDER_SHARE * deadline.seconds):
        strict = _search(replace(problem, ordered_moves=True), deadline)
        strict.assignment = executable(strict.problem, strict.assignment, strict.empty_nodes)
        strict.empty_nodes = empty_nodes(strict.problem, strict.assignment)
        best = strict if rank(strict.problem, strict.assignment) >= rank(result.problem, kept) else result
    best.restricted = "; ".join(filter(None, [best.restricted, SEQUENTIAL_NOTE]))
    best.whole_bound = bound
    return best


def _freed_bound(result: SolveResult) -> int | None:
    """The freedGpus level's bound, valid for the whole problem (before any order of the moves is asked for)."""
    if result.restricted:
        return result.whole_bound
    level = next((lv for lv in result.levels if lv.name == "freedGpus"), None)
    return None if level is None or not math.isfinite(level.bound) else math.floor(level.bound + 1e-9)


def _search(problem: Problem, deadline: Deadline, build: Deadline | None = None) -> SolveResult:
    """The search of ``solve`` (see there), without the executability check: one model of the whole problem, or at scale
    a narrowed model around the greedy warm start and then, for the rest of the time, a large-neighbourhood search
    (``lns``) of the whole problem starting from its plan."""
    started = time.monotonic()
    whole, warm = problem, greedy(problem)
    greedy_seconds = time.monotonic() - started
    pods, targets = problem.settings.solver.max_candidate_pods, problem.settings.solver.max_targets_per_type
    # Out of time already (e.g. building the problem took the limit): the warm start, on the whole problem.
    timely = not deadline.expired()
    narrowed = _narrow(whole, warm, pods, targets) if timely else _Narrowed(whole, warm, {}, None)
    searches = narrowed.sources is not None and not whole.target_shapes
    first = deadline.until(deadline.remaining() * FIRST_MODEL_SHARE) if searches else deadline
    # The first model may finish building in the curve's time (``build``); never the unnarrowed one's.
    best = _solve_once(narrowed.problem, narrowed.start, first, build if timely else None)
    best.assignment = _at_least_the_warm_start(best)
    best.empty_nodes = empty_nodes(best.problem, best.assignment)
    if narrowed.sources is not None:
        best.restricted = _restriction(whole, best.problem, targets)
    if searches:
        best = _improved(whole, best, narrowed.lift(whole, best.assignment), warm, deadline)
        if not (build or deadline).expired():
            best.whole_bound = _whole_bound(whole, best, deadline)
    best.greedy_seconds = greedy_seconds
    return best


# of a narrowed search's time, for the first model; the large-neighbourhood search gets the rest
FIRST_MODEL_SHARE = 0.4


def _improved(
    whole: Problem, result: SolveResult, lifted: Assignment, warm: Assignment, deadline: Deadline
) -> SolveResult:
    """``result`` improved by a large-neighbourhood search of the whole problem from its plan (``lifted``) while ``deadline``
    lasts: the better plan as the result of a model narrowed around it and the greedy warm start ``warm`` (what the curve
    and the report read: the curve keeps the warm start as a point, which may free fewer GPUs for fewer moves)."""
    stats = lns.Stats()
    found = lns.improve(whole, lifted, deadline, seed=whole.settings.solver.seed, stats=stats)
    result.searched = stats.iterations
    result.improvements = stats.accepted
    if rank(whole, found) <= rank(whole, lifted):
        return result
    around = _narrow(
        whole, found, whole.settings.solver.max_candidate_pods, whole.settings.solver.max_targets_per_type, also=warm
    )
    if around.sources is None:  # everything is a variable: the whole problem is the narrowed one
        around = _Narrowed(whole, found, {t.index: t.index for t in whole.types}, None)
    start = warm if around.sources is None else _translate(whole, warm, around.mapping, around.sources)
    better = replace(
        result,
        problem=around.problem,
        assignment=around.start,
        status="FEASIBLE",
        base=None,
        greedy_assignment=start if within_limits(around.problem, start) else None,
        empty_nodes=empty_nodes(around.problem, around.start),
        restricted=_restriction(whole, around.problem, whole.settings.solver.max_targets_per_type),
    )
    better.levels = _relevelled(around.problem, around.start, result.levels)
    return better


def _relevelled(problem: Problem, assignment: Assignment, levels: list[LevelResult]) -> list[LevelResult]:
    """The levels' values for a plan the levels did not find (the search's): unproven, with no bound of their own."""
    values = {term.name: term.value(problem, assignment) for term in FREE_NODES}
    return [
        LevelResult(lv.name, "FEASIBLE", float(values.get(lv.name, lv.objective)), float("nan"), lv.seconds)
        for lv in levels
    ]


def _whole_bound(whole: Problem, best: SolveResult, deadline: Deadline) -> int:
    """An upper bound on the GPUs any plan of the whole problem leaves whole-free (``empty_nodes``); under ``max_moves``
    the most any plan within that many moves frees (``move_bound.most_freed_within``), which is far lower."""
    cap = whole.limits.total
    capped = None
    if cap is not None:  # first: under a cap it is the bound that matters (each solve gets a moment even out of time)
        weight = pending_weight(best.problem, best.assignment)
        capped = most_freed_within(whole, max_moves=cap, pending_weight=weight, deadline=deadline)
    bound = whole_free_bound(whole, all_pending_placed=_all_pending_placed(whole, best), deadline=deadline)
    return bound if capped is None else min(bound, capped + whole.empty_before_gpus)


def _restriction(whole: Problem, narrowed: Problem, targets: int) -> str:
    """What a narrowed model kept, in the user's terms: the limits that bit."""
    kept = []
    if any(len(t.ranked_targets) > targets for t in whole.types):
        kept.append(f"the best {targets} target nodes per pod type (of up to {_widest(whole)})")
    if movable_pods(narrowed) < movable_pods(whole):
        kept.append(f"{movable_pods(narrowed)} of {movable_pods(whole)} movable pods")
    return " and ".join(kept) or "a narrowed model"


def _widest(problem: Problem) -> int:
    return max((len(t.ranked_targets) for t in problem.types), default=0)


def _all_pending_placed(problem: Problem, result: SolveResult) -> bool:
    placed = sum(sum(per_node.values()) for per_node in result.assignment.placed.values())
    return placed == sum(t.count for t in problem.types if t.pending)


def _at_least_the_warm_start(result: SolveResult) -> Assignment:
    """The solver's plan without churn, or the warm start when that is better (a level may stop at its time limit
    holding an incumbent worse than the plan it was hinted with)."""
    problem, start = result.problem, result.greedy_assignment
    if problem.target_shapes:  # shape headroom counts free room everywhere: undoing a move could cost some
        # but a plan that places nothing and gains no headroom (the warm start when no level had time) is worth nothing.
        unchanged = Assignment.unchanged(problem)
        if not any(result.assignment.placed.values()) and headroom(problem, result.assignment) <= headroom(
            problem, unchanged
        ):
            return unchanged
        return result.assignment
    found = prune(problem, result.assignment)
    if start is not None and within_limits(problem, start) and rank(problem, start) > rank(problem, found):
        return prune(problem, start)
    return found


def _solve_once(problem: Problem, start: Assignment, deadline: Deadline, build: Deadline | None = None) -> SolveResult:
    """One solve of one (possibly narrowed) problem: levels, by components when they are independent."""
    started = time.monotonic()
    if not within_limits(problem, start):
        # The greedy warm start ignores maxMoves/minGainPerMove; it must not become the incumbent
        # (returned as is when every level fails) nor fix the pending level to a value the limits forbid.
        start = Assignment.unchanged(problem)
    timely = not (build or deadline).expired()  # else no model is built: not worth splitting it
    groups = _components(problem) if timely and _decomposable(problem) else [[t.index for t in problem.types]]
    if len(groups) <= 1:
        levels, size = solve_levels(problem, start, deadline, build)
        return SolveResult(
            problem=problem,
            assignment=levels.best,
            empty_nodes=empty_nodes(problem, levels.best),
            status=levels.status,
            levels=levels.results,
            wall_seconds=time.monotonic() - started,
            variables=size,
            greedy_assignment=start,
            unsolved=levels.unsolved,
            unbuilt=levels.v is None,
            base=levels.base,
            model_seconds=levels.seconds,
        )
    weights = [sum(len(problem.types[t].targets) for t in group) for group in groups]
    assignment = Assignment()
    all_levels: list[list[LevelResult]] = []
    status, variables, touched, unsolved, unbuilt, model_seconds = "OPTIMAL", 0, set(), [], False, 0.0
    for i, group in enumerate(groups):
        part, mapping = _part(problem, group)
        touched |= {n for t in group for n in (*problem.types[t].targets, *problem.types[t].initial)}
        share = weights[i] / max(1, sum(weights[i:]))
        back = {new: old for old, new in mapping.items()}
        part_start = Assignment(
            {mapping[t]: per for t, per in start.counts.items() if t in mapping},
            {mapping[t]: per for t, per in start.placed.items() if t in mapping},
        )
        # A part with no target gets no share, but a moment to prove it (``LevelSolve.run``).
        levels, size = solve_levels(
            part, part_start, deadline.until(max(0.05, deadline.remaining()) * share or 0.05), build
        )
        assignment.counts.update({back[t]: per for t, per in levels.best.counts.items()})
        assignment.placed.update({back[t]: per for t, per in levels.best.placed.items()})
        all_levels.append(levels.results)
        status = status if levels.status == "OPTIMAL" else "FEASIBLE"
        variables += size
        unsolved += [name for name in levels.unsolved if name not in unsolved]
        unbuilt = unbuilt or levels.v is None
        model_seconds += levels.seconds
    untouched_free = sum(
        s.gpus for s in problem.nodes if s.gpus and s.can_empty and not s.ran_gpu_pods and s.index not in touched
    )
    return SolveResult(
        problem=problem,
        assignment=assignment,
        empty_nodes=empty_nodes(problem, assignment),
        status=status,
        levels=_merge_levels(all_levels, {"freedGpus": float(untouched_free)}),
        wall_seconds=time.monotonic() - started,
        variables=variables,
        greedy_assignment=start,
        unsolved=unsolved,
        unbuilt=unbuilt,
        model_seconds=model_seconds,
    )

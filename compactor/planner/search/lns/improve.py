"""Large-neighbourhood search: improve a plan of a big cluster one small CP-SAT model at a time.

At thousands of nodes the whole model is too large to prove (``solver._narrow`` keeps a part of it, chosen once). Here
the incumbent is improved repeatedly: each iteration frees a few dozen nodes ``S`` (a *neighbourhood*,
``lns_neighbourhoods.py``), fixes every other pod where the incumbent put it, solves that sub-problem
(``lns_sub_problem.py``) level by level (``levels.solve_levels``), hinted with the incumbent (``lns_incumbent.py``), and
keeps the result when the whole plan ranks better (``objective.rank``) and stays within the move limits. Shape mode
(``target_shapes``) is not searched: its objective is not ``rank``'s.

This module is the loop: which neighbourhood next, when to stop, and the guard (``valid``) every accepted plan passes.

Imports: the level solver (CP-SAT only through it), the objective, greedy's pruning, the problem, the deadline, the
incumbent, the neighbourhoods and the sub-problem; never ``ortools``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from compactor.planner.cpsat.deadline import Deadline
from compactor.planner.cpsat.levels import solve_levels
from compactor.planner.objective import Assignment, rank, within_limits
from compactor.planner.problem import Problem
from compactor.planner.search.greedy import prune
from compactor.planner.search.lns.incumbent import Incumbent
from compactor.planner.search.lns.neighbourhoods import Neighbourhoods
from compactor.planner.search.lns.sub_problem import sub_problem

SUB_SECONDS = 0.5  # at most this per sub-solve: many small solves beat a few long ones
MIN_SECONDS = 0.05  # less than this left: not worth building a model
MAX_STALL = 300  # iterations in a row without improvement: the neighbourhoods are exhausted (a deterministic clock
#                  spends nothing outside CP-SAT, so tiny models might otherwise loop for long)


@dataclass
class Stats:
    """What a search did (for benchmarks and reports)."""

    iterations: int = 0
    accepted: int = 0
    by_kind: dict[str, list[int]] = field(default_factory=dict)  # neighbourhood kind -> [tried, accepted]


def improve(
    problem: Problem, start: Assignment, deadline: Deadline, *, seed: int = 1, stats: Stats | None = None
) -> Assignment:
    """A plan of ``problem`` at least as good as ``start`` (``objective.rank``), found before ``deadline``.

    ``start`` must be valid; when it breaks a move limit, or in shape mode, it is returned unchanged."""
    stats = stats if stats is not None else Stats()
    if problem.target_shapes or not within_limits(problem, start) or deadline.remaining() < MIN_SECONDS:
        return start
    rng = random.Random(seed)
    current = Incumbent(problem, start)
    kinds = Neighbourhoods(problem, rng)
    seen: set[frozenset[int]] = set()
    stall = 0
    while deadline.remaining() >= MIN_SECONDS and not deadline.expired() and stall < MAX_STALL:
        kind, sources = kinds.next(current)
        stall += 1
        if not sources or frozenset(sources) in seen:
            continue
        seen.add(frozenset(sources))
        stats.iterations += 1
        tried = stats.by_kind.setdefault(kind, [0, 0])
        tried[0] += 1
        better = _iterate(problem, current, sources, deadline.until(min(SUB_SECONDS, deadline.remaining())))
        if better is not None:
            current = better
            seen.clear()  # the incumbent changed: every neighbourhood is worth another look
            stall = 0
            stats.accepted += 1
            tried[1] += 1
    return current.assignment


def _iterate(problem: Problem, current: Incumbent, sources: set[int], deadline: Deadline) -> Incumbent | None:
    """Solve the neighbourhood ``sources``; the better incumbent, or None."""
    sub = sub_problem(problem, current, sources)
    if sub is None:
        return None
    if not within_limits(sub.problem, sub.hint):
        return None  # the lowered caps bind the incumbent's own part (per node or namespace): nothing to gain here
    # The levels directly, on one model: ``_solve_once`` would split it into components, each copying every node.
    levels, _ = solve_levels(sub.problem, sub.hint, deadline)
    lifted = sub.lift(levels.best)
    if rank(problem, lifted) <= current.rank:
        return None
    lifted = prune(problem, lifted)  # returns pods the sub-model moved for nothing (only lowers the cost)
    if not within_limits(problem, lifted) or not valid(problem, lifted):
        return None
    return Incumbent(problem, lifted)


def valid(problem: Problem, assignment: Assignment) -> bool:
    """Does ``assignment`` keep every rule of the model (not the move limits: ``within_limits``)? Conservation, targets,
    stay-only nodes and capacity per node and resource, computed from scratch (a guard: a bug here costs a plan)."""
    load = [dict(s.fixed) for s in problem.nodes]
    for ptype in problem.types:
        per_node = (assignment.placed if ptype.pending else assignment.counts).get(ptype.index, {})
        if any(k < 0 for k in per_node.values()):
            return False
        if ptype.pending and sum(per_node.values()) > ptype.count:
            return False
        if not ptype.pending and sum(per_node.values()) != ptype.count:
            return False
        targets = set(ptype.targets)
        for node, k in per_node.items():
            if k and (node not in targets or (node in ptype.stay_only and k > len(ptype.initial.get(node, ())))):
                return False
            for r, v in ptype.items:
                load[node][r] = load[node].get(r, 0) + v * k
    return all(
        load[s.index].get(r, 0) <= s.capacity.get(r, 0)
        for s in problem.nodes
        for r in load[s.index]
        if load[s.index][r] > 0
    )

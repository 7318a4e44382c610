"""The solver report of a plan: the max-free search's status, objective, bound and gap as the user may read them (for the
whole cluster), its levels, and the note that says what the time limit left undone.

Imports: the search's result, its levels, the curve's points, the problem, the plan model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from compactor.planner.cpsat.levels import LevelResult
from compactor.planner.plan import SolverReport
from compactor.planner.problem import Problem
from compactor.planner.search.frontier import Point
from compactor.planner.search.solver import SolveResult


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def solver_report(
    problem: Problem,
    result: SolveResult | None,
    note: str = "",
    *,
    top: Point | None = None,
    cut: Sequence[str] = (),
    moves_bound: int | None = None,
) -> SolverReport:
    """Status, objective (net freed GPUs of the max-free plan), bound and gap as the user may read them: for the whole
    cluster. A narrowed model's own proofs hold only among what it kept, so then the status is at most FEASIBLE, the
    bound is the whole-cluster one (``bound.whole_free_bound``) and the note says what was searched. What the time
    limit left undone (``cut``, and the levels ``result`` did not solve) is said in the note too. ``moves_bound``: a
    whole-cluster lower bound on the move cost of plans freeing as much (``move_bound.fewest_moves_cost``)."""
    if result is None:
        return SolverReport(status="OPTIMAL", wall_seconds=0.0, objective=0.0, bound=0.0, gap=0.0, note=note)
    main = next((lv for lv in result.levels if lv.name in ("freedGpus", "headroom")), None)
    objective, bound = _objective_and_bound(problem, result, main)
    gap = None
    if objective is not None and bound is not None:
        gap = 0.0 if bound <= objective else (bound - objective) / max(abs(bound), 1.0)
    cost = result.assignment.cost(result.problem) if main is not None and main.name == "freedGpus" else None
    status = result.status
    if result.restricted:
        cost_proven = cost is not None and moves_bound is not None and moves_bound >= cost
        status = "OPTIMAL" if _whole_cluster_proof(objective, bound, cost_proven, top) else "FEASIBLE"
    note = "; ".join(filter(None, [note, *_time_limit_notes(result, cut, proven=status == "OPTIMAL")]))
    if result.restricted:
        searched = _searched(result)
        note = f"{note}; {searched}" if note else searched
    base = problem.settings.aims.move_cost.base
    return SolverReport(
        status=status,
        wall_seconds=round(result.wall_seconds, 3),
        objective=objective,
        bound=bound,
        gap=gap,
        variables=result.variables,
        levels=[_level_row(lv) for lv in result.levels],
        note=note,
        move_cost=None if cost is None else round(cost / base, 2),
        move_cost_bound=None if cost is None or moves_bound is None else round(min(cost, moves_bound) / base, 2),
        move_cost_gap=None
        if cost is None or moves_bound is None
        else round(max(0, cost - moves_bound) / max(cost, base), 4),
    )


def _objective_and_bound(
    problem: Problem, result: SolveResult, main: LevelResult | None
) -> tuple[float | None, float | None]:
    """The main level's objective and bound as the user reads them: net freed GPUs of the whole cluster (a narrowed
    model's own bound holds only among what it kept: then the whole-cluster one), or the headroom level's."""
    if main is not None and main.name == "freedGpus":
        offset = problem.empty_before_gpus
        objective = float(sum(problem.nodes[n].gpus for n in result.empty_nodes) - offset)
        whole = main.bound if not result.restricted and math.isfinite(main.bound) else result.whole_bound
        return objective, None if whole is None else max(objective, float(whole) - offset)
    if main is not None and math.isfinite(main.objective):
        return main.objective, main.bound if math.isfinite(main.bound) else None
    return None, None


def _whole_cluster_proof(objective: float | None, bound: float | None, cost_proven: bool, top: Point | None) -> bool:
    """A narrowed search is proven for the whole cluster only when the freed GPUs reach its bound and the move cost its
    lower bound (or the curve's top point, proven optimal, frees as much)."""
    if objective is None or bound is None or objective < bound:
        return False
    return cost_proven or (top is not None and top.status == "OPTIMAL" and top.freed_gpus == objective)


def _searched(result: SolveResult) -> str:
    """What a narrowed search covered, for the note."""
    proven = "OPTIMAL" if result.status == "OPTIMAL" else "FEASIBLE"
    searched = f"searched {result.restricted}: {proven} there"
    if result.searched:
        searched += (
            f"; then {result.searched} neighbourhood(s) of the whole cluster (large-neighbourhood search), "
            f"{result.improvements} improving the plan"
        )
    return searched


def _level_row(level: LevelResult) -> dict[str, Any]:
    return {
        "name": level.name,
        "status": level.status,
        "objective": _finite(level.objective),
        "bound": _finite(level.bound),
        "seconds": round(level.seconds, 3),
    }


def _time_limit_notes(result: SolveResult, cut: Sequence[str], *, proven: bool) -> list[str]:
    """What the time limit left undone, for the solver report's note; ``proven``: the plan is proven all the same (its
    freed GPUs reach the whole-cluster bound and its move cost the fewest-moves bound), which the note then says."""
    notes = [f"time limit: {what}" for what in cut]
    if result.unbuilt:
        return [UNBUILT, *notes]
    if result.unsolved:
        why = PROVEN_ANYWAY if proven else "(the incumbent stands, unproven)"
        return [f"time limit: level(s) {', '.join(result.unsolved)} not solved {why}", *notes]
    return notes


UNBUILT = (
    "time limit: no CP-SAT model could be built in the time left (building the problem and the greedy warm start took "
    "it): the max-free plan is the greedy warm start, within the move limits, unproven"
)
PROVEN_ANYWAY = "by CP-SAT, the plan proven all the same by the whole-cluster bounds (freed GPUs and move cost)"

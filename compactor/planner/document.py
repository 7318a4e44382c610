"""The plan document's parts, as the planner decides them: moves with their reasons, the curve's rows, why pods stay, the
solver report; and ``document``, which puts them together once.

Imports: the planner's modules, ``compactor.model``, ``compactor.settings``.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compactor.model.types import Node
from compactor.planner.frontier import Point
from compactor.planner.history import Restraints, workload_key
from compactor.planner.levels import LevelResult
from compactor.planner.movability import Unmovable
from compactor.planner.plan import (
    CompactionPlan,
    FrontierPoint,
    Metadata,
    MigRepartition,
    Move,
    Placement,
    SolverReport,
)
from compactor.planner.price import describe
from compactor.planner.problem import Problem
from compactor.planner.recut import Recut
from compactor.planner.solution import ConcreteMove, ConcretePlacement, loads_after, usable_freed
from compactor.planner.solver import SolveResult
from compactor.planner.usable import why_unusable
from compactor.settings import PlannerSettings


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
    notes = []
    if result.unbuilt:
        notes.append(
            "time limit: no CP-SAT model could be built in the time left (building the problem and the greedy warm "
            "start took it): the max-free plan is the greedy warm start, within the move limits, unproven"
        )
    elif result.unsolved and proven:
        notes.append(
            f"time limit: level(s) {', '.join(result.unsolved)} not solved by CP-SAT, the plan proven all the same by the "
            "whole-cluster bounds (freed GPUs and move cost)"
        )
    elif result.unsolved:
        notes.append(f"time limit: level(s) {', '.join(result.unsolved)} not solved (the incumbent stands, unproven)")
    return notes + [f"time limit: {what}" for what in cut]


def _move_reason(
    problem: Problem, move: ConcreteMove, freed: set[int], pending_targets: dict[int, str], target_free: float
) -> str:
    source = problem.nodes[move.source]
    target = problem.nodes[move.target]
    if move.source in freed:
        why = f"frees {source.node.name} ({source.gpus} GPUs, physical)"
        if move.source in pending_targets:
            why += f" for pending {pending_targets[move.source]}"
    elif move.source in pending_targets:
        why = f"makes room on {source.node.name} for pending {pending_targets[move.source]}"
    else:
        why = f"makes room on {source.node.name}"
    where = "already runs GPU pods" if target.ran_gpu_pods else "has room"
    return f"{why}; {target.node.name} {where}, {round(target_free, 2):g} GPU-equivalents free before this move"


def _gpu_equivalents(move: ConcreteMove, node: Node) -> float:
    return sum(move.pod.requests.get(resource, 0) * eq for resource, eq in node.gpu.gpu_equivalent)


def _free_before_each(problem: Problem, moves: Sequence[ConcreteMove]) -> list[float]:
    """The target's free GPU capacity as each move finds it, earlier moves of the plan (in execution order) done."""
    free = {i: problem.nodes[i].free_gpus_before for m in moves for i in (m.source, m.target)}
    seen = []
    for m in moves:
        seen.append(max(0.0, free[m.target]))
        free[m.target] -= _gpu_equivalents(m, problem.nodes[m.target].node)
        free[m.source] += _gpu_equivalents(m, problem.nodes[m.source].node)
    return seen


def _owner(move: ConcreteMove) -> str:
    ctrl = move.pod.controller
    return f"{ctrl.kind}/{ctrl.name}" if ctrl else ""


def move_docs(
    problem: Problem,
    moves: Sequence[ConcreteMove],
    freed: set[int],
    placements: Sequence[ConcretePlacement],
    devices: Mapping[str, tuple[str, ...]] | None = None,
) -> list[Move]:
    pending_targets = {p.target: p.pod.key for p in placements}
    return [
        Move(
            pod=m.pod.key,
            from_node=problem.nodes[m.source].node.name,
            to_node=problem.nodes[m.target].node.name,
            reason=_move_reason(problem, m, freed, pending_targets, free),
            uid=m.pod.uid,
            owner=_owner(m),
            requests={k: v for k, v in m.pod.requests.items() if k != "pods"},
            gpu=m.ptype.uses_gpu,
            cost=round(m.ptype.cost / problem.settings.aims.move_cost.base, 2),
            devices=list((devices or {}).get(m.pod.key, ())),
        )
        for m, free in zip(moves, _free_before_each(problem, moves), strict=True)
    ]


def frontier_rows(
    points: list[Point],
    chosen: Point | None,
    recuts: list[Recut],
    settings: PlannerSettings,
    moves: list[ConcreteMove],
    freed_nodes: int,
    net_gpus: int,
    usable: int,
) -> list[FrontierPoint]:
    """The curve as the plan shows it; re-cuts are a step of their own, right after the point they build on (the plan's
    ``freed_nodes`` nodes and ``net_gpus`` GPUs)."""
    base = settings.aims.move_cost.base
    rows = [_frontier_point(p, p is chosen and not recuts, base) for p in points]
    if recuts and chosen is not None:
        cost = sum(m.ptype.cost for m in moves) / base + settings.mig.recut_cost_moves * len(recuts)
        step = FrontierPoint(
            freed_nodes=freed_nodes,
            freed_gpus=net_gpus,
            usable_gpus=usable,
            moves=len(moves),
            cost=round(cost, 2),
            status="FEASIBLE",
            bound=round(chosen.bound / base, 2),
            chosen=True,
            recuts=len(recuts),
        )
        rows.insert(points.index(chosen) + 1, step)
    return rows


def _frontier_point(point: Point, chosen: bool, base: int) -> FrontierPoint:
    return FrontierPoint(
        freed_nodes=point.freed_nodes,
        freed_gpus=point.freed_gpus,
        usable_gpus=point.usable_gpus,
        moves=point.moves,
        cost=round(point.cost / base, 2),
        status=point.status,
        bound=round(point.bound / base, 2),
        chosen=chosen,
    )


UNMOVABLE_SAMPLE = 50  # pods named per reason in explanations.unmovablePodsSample (a 50,000-pod plan stays small)


def explanations(problem: Problem, restraints: Restraints | None = None) -> dict[str, object]:
    """Why pods did not move, counted by reason, and the first pods (by name) of each reason (the reports show these);
    with restraints, each cooling pod's own words ("its workload ... moved 12 min ago; cooldown 30 min")."""
    pods: dict[str, list[str]] = {}
    for key, reason in problem.unmovable.items():
        if reason is not None:
            pods.setdefault(reason.value, []).append(key)
    ranked = sorted(pods.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    found: dict[str, object] = {
        "unmovablePods": {reason: len(keys) for reason, keys in ranked},
        "unmovablePodsSample": {reason: sorted(keys)[:UNMOVABLE_SAMPLE] for reason, keys in ranked},
    }
    if restraints is not None and restraints.any:
        found["cooldowns"] = _cooldowns(problem, restraints)
    return found


def _cooldowns(problem: Problem, restraints: Restraints) -> dict[str, str]:
    by_key = {p.key: p for p in problem.snapshot.pods}
    notes: dict[str, str] = {}
    for key in sorted(k for k, r in problem.unmovable.items() if r in (Unmovable.COOLDOWN, Unmovable.NODE_COOLDOWN)):
        pod = by_key[key]
        node_note = restraints.nodes.get(pod.node_name)
        notes[key] = (
            f"its node {pod.node_name} was {node_note}"
            if node_note
            else restraints.workloads[workload_key(pod.namespace, pod.owners)]
        )
        if len(notes) >= UNMOVABLE_SAMPLE:
            break
    return notes


@dataclass(frozen=True)
class Outcome:
    """What the planner decided, concretely: the moves and placements (the partition step's included), the re-cuts, the
    devices first fit gives partitionable pods, and the GPU nodes freed and filled."""

    moves: list[ConcreteMove]
    placements: list[ConcretePlacement]
    recuts: list[Recut]
    devices: Mapping[str, tuple[str, ...]]
    freed: list[int]
    filled: list[int]
    chosen: Point | None  # the curve's point carried out (the re-cut step may take one further than the search chose)
    cut: tuple[str, ...] = ()  # what the time limit left undone, the search's included
    notes: tuple[str, ...] = ()  # warnings of the steps after the search (the partition step's)

    def net_gpus(self, problem: Problem) -> int:
        return sum(problem.nodes[i].gpus for i in self.freed) - sum(problem.nodes[i].gpus for i in self.filled)


@dataclass(frozen=True)
class Searched:
    """How the search went: the solve, the curve and the point chosen, and what the time limit or a budget held back."""

    result: SolveResult | None
    points: list[Point]
    chosen: Point | None
    note: str = ""
    held_by: str = ""  # the run budget that held the chosen point back, when a cheaper one was taken instead
    moves_bound: int | None = None
    curve_seconds: float = 0.0
    cut: tuple[str, ...] = ()  # what the time limit left undone in the search
    enough_time_limit: int | None = None  # no model built in the limit: the limit that would have left room for one


def document(
    problem: Problem,
    outcome: Outcome,
    searched: Searched,
    *,
    identity: tuple[str, str, str | None],
    warnings: list[str],
    restraints: Restraints | None,
    load_seconds: float | None,
) -> CompactionPlan:
    """The plan as the planner decides it, built once from its parts. ``identity``: (source, creation time, id or None
    for a new one)."""
    settings = problem.settings
    source, created, plan_id = identity
    usable = usable_freed(problem, outcome.moves, outcome.placements)
    net_gpus = outcome.net_gpus(problem)
    report = solver_report(
        problem,
        searched.result,
        searched.note,
        top=searched.points[-1] if searched.points else None,
        cut=outcome.cut,
        moves_bound=searched.moves_bound,
    )
    return CompactionPlan(
        metadata=Metadata(id=plan_id or f"plan-{uuid.uuid4().hex[:12]}", created_at=created, source=source),
        moves=move_docs(problem, outcome.moves, set(outcome.freed), outcome.placements, outcome.devices),
        placed_pending=[
            Placement(
                pod=p.pod.key,
                to_node=problem.nodes[p.target].node.name,
                devices=list(outcome.devices.get(p.pod.key, ())),
            )
            for p in outcome.placements
        ],
        freed_nodes=[problem.nodes[i].node.name for i in outcome.freed],
        filled_nodes=[problem.nodes[i].node.name for i in outcome.filled],
        freed_gpus=net_gpus,
        usable_freed_gpus=usable,
        unusable=why_unusable(problem, loads_after(problem, outcome.moves, outcome.placements), outcome.freed),
        mig_repartition=[
            MigRepartition(
                node=problem.nodes[r.node].node.name,
                from_config=r.from_config,
                to_config=r.to_config,
                reason=r.reason(problem),
                allocatable=r.allocatable,
                cost=settings.mig.recut_cost_moves,
            )
            for r in outcome.recuts
        ],
        objective=settings.aims.objective if settings.aims.goal == "free-nodes" else "shapes",
        balanced_moves_per_gpu=settings.aims.balanced_moves_per_gpu
        if settings.aims.objective == "balanced" and settings.aims.goal == "free-nodes"
        else None,
        move_price=describe(settings.aims.move_cost),
        frontier=frontier_rows(
            searched.points,
            outcome.chosen,
            outcome.recuts,
            settings,
            outcome.moves,
            len(outcome.freed),
            net_gpus,
            usable,
        ),
        warnings=[*warnings, *outcome.notes],
        solver=report.model_copy(
            update={
                "frontier_seconds": round(searched.curve_seconds, 3),
                "enough_time_limit": searched.enough_time_limit,
                "load_seconds": None if load_seconds is None else round(load_seconds, 3),
            }
        ),
        held_back=searched.held_by,
        explanations=explanations(problem, restraints),
    )

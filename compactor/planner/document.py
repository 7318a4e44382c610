"""The plan document's parts, as the planner decides them: moves with their reasons, the curve's rows, why pods stay, the
solver report; and ``document``, which puts them together once.

Imports: the planner's modules, ``compactor.model``, ``compactor.settings``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from compactor.model.types import Node
from compactor.planner.plan import (
    CompactionPlan,
    FrontierPoint,
    Metadata,
    MigRepartition,
    Move,
    Placement,
)
from compactor.planner.problem import Problem
from compactor.planner.recut import Recut
from compactor.planner.rules.history import Restraints, workload_key
from compactor.planner.rules.movability import Unmovable
from compactor.planner.rules.price import describe
from compactor.planner.search.frontier import Point
from compactor.planner.search.solver import SolveResult
from compactor.planner.solution import ConcreteMove, ConcretePlacement, loads_after, usable_freed
from compactor.planner.solver_report import solver_report
from compactor.planner.usable import why_unusable
from compactor.settings.bundles import PlannerSettings


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

"""Snapshot + settings -> the plan's decisions: build the problem, solve it, draw the curve, choose, make the moves concrete.

``compose`` returns the ``CompactionPlan`` as the planner decides it: moves, placements, re-cuts, the curve, the solver
report, the run budgets' cut, why pods stay. The document's measurements (the fragmentation figures before and after,
why pending pods stay pending, the whole call's time) are ``compactor.app.plan_document``'s, which calls this.

Imports: the planner's modules, ``compactor.model`` (the reference shapes among them: ``model/shapes.py``) and
``compactor.settings``; never ``compactor.metrics``, ``actions``, ``kube``, ``prometheus_client``, ``apscheduler``, nor
``ortools`` (CP-SAT is ``cpsat.py``'s).
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from compactor.model.migparted import Layouts
from compactor.model.shapes import ReferenceShape, reference_shapes
from compactor.model.types import Node, Snapshot
from compactor.planner.budgets import RunBudgets, refusal, take_nodes
from compactor.planner.deadline import Deadline, deadline_for
from compactor.planner.frontier import Point, choose, drain_costs, frontier, plan_of
from compactor.planner.history import Restraints, workload_key
from compactor.planner.movability import Steerability, Unmovable
from compactor.planner.move_bound import fewest_moves_cost
from compactor.planner.objective import Assignment, empty_nodes, pending_weight
from compactor.planner.partitions import plan_partitions
from compactor.planner.pins import without_own_pins
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
from compactor.planner.problem import Problem, build_problem
from compactor.planner.recut import Recut, plan_rebalance, plan_recuts, waiting_mig_pods
from compactor.planner.solution import (
    ConcreteMove,
    ConcretePlacement,
    concretise,
    gpu_nodes_changed,
    loads_after,
    usable_freed,
)
from compactor.planner.solver import SolveResult, solve
from compactor.planner.usable import usage_shapes, why_unusable
from compactor.settings import DisruptionSettings, PlannerSettings


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
    note = "; ".join(filter(None, [note, *_time_limit_notes(result, cut)]))
    main = next((lv for lv in result.levels if lv.name in ("freedGpus", "headroom")), None)
    objective = bound = gap = None
    status = result.status
    if main is not None and main.name == "freedGpus":
        offset = problem.empty_before_gpus
        objective = float(sum(problem.nodes[n].gpus for n in result.empty_nodes) - offset)
        whole = main.bound if not result.restricted and math.isfinite(main.bound) else result.whole_bound
        bound = None if whole is None else max(objective, float(whole) - offset)
    elif main is not None and math.isfinite(main.objective):
        objective, bound = main.objective, main.bound if math.isfinite(main.bound) else None
    if objective is not None and bound is not None:
        gap = 0.0 if bound <= objective else (bound - objective) / max(abs(bound), 1.0)
    cost = result.assignment.cost(result.problem) if main is not None and main.name == "freedGpus" else None
    cost_proven = cost is not None and moves_bound is not None and moves_bound >= cost
    if result.restricted:
        # Proven for the whole cluster only when the freed GPUs reach its bound and the move cost its lower bound.
        whole_proof = (
            objective is not None
            and bound is not None
            and objective >= bound
            and (cost_proven or (top is not None and top.status == "OPTIMAL" and top.freed_gpus == objective))
        )
        status = "OPTIMAL" if whole_proof else "FEASIBLE"
        proven = "OPTIMAL" if result.status == "OPTIMAL" else "FEASIBLE"
        searched = f"searched {result.restricted}: {proven} there"
        if result.searched:
            searched += (
                f"; then {result.searched} neighbourhood(s) of the whole cluster (large-neighbourhood search), "
                f"{result.improvements} improving the plan"
            )
        note = f"{note}; {searched}" if note else searched
    levels = [
        {
            "name": lv.name,
            "status": lv.status,
            "objective": _finite(lv.objective),
            "bound": _finite(lv.bound),
            "seconds": round(lv.seconds, 3),
        }
        for lv in result.levels
    ]
    base = problem.settings.move_cost.base
    return SolverReport(
        status=status,
        wall_seconds=round(result.wall_seconds, 3),
        objective=objective,
        bound=bound,
        gap=gap,
        variables=result.variables,
        levels=levels,
        note=note,
        move_cost=None if cost is None else round(cost / base, 2),
        move_cost_bound=None if cost is None or moves_bound is None else round(min(cost, moves_bound) / base, 2),
        move_cost_gap=None
        if cost is None or moves_bound is None
        else round(max(0, cost - moves_bound) / max(cost, base), 4),
    )


def _time_limit_notes(result: SolveResult, cut: Sequence[str]) -> list[str]:
    """What the time limit left undone, for the solver report's note."""
    notes = []
    if result.unbuilt:
        notes.append(
            "time limit: no CP-SAT model could be built in the time left (building the problem and the greedy warm "
            "start took it): the max-free plan is the greedy warm start, within the move limits, unproven"
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


def _moves(
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
            cost=round(m.ptype.cost / problem.settings.move_cost.base, 2),
            devices=list((devices or {}).get(m.pod.key, ())),
        )
        for m, free in zip(moves, _free_before_each(problem, moves), strict=True)
    ]


@dataclass(frozen=True)
class Composed:
    """A plan as the planner decides it, and what the plan document measures it with (``compactor.app.plan_document``)."""

    plan: CompactionPlan  # without the figures before and after, pendingNotPlaced and solver.planSeconds
    snapshot: Snapshot  # the snapshot planned: the compactor's own pins lifted (``pins.without_own_pins``)
    shapes: tuple[ReferenceShape, ...]  # the reference shapes the plan was made with (the re-cut step's)
    problem: Problem  # the whole problem, before any narrowing
    # pending pods (namespace/name) the plan places, re-cuts' included, before the run budgets' cut
    placed: frozenset[str]


def compose(  # noqa: PLR0913
    snapshot: Snapshot,
    settings: PlannerSettings,
    *,
    source: str,
    now: datetime,
    shapes: Sequence[ReferenceShape] | None = None,
    plan_id: str | None = None,
    mig_parted: Layouts | None = None,
    steering: Steerability | None = None,
    load_seconds: float | None = None,
    stage: Callable[[str, str], None] | None = None,
    restraints: Restraints | None = None,
    budgets: DisruptionSettings | None = None,
    max_evictions: int | None = None,
    meanwhile: Callable[[Snapshot, tuple[ReferenceShape, ...]], None] | None = None,
) -> Composed:
    """Plan a compaction of ``snapshot``. Pure apart from the solver's wall clock.

    ``shapes``: the reference shapes (default: ``model.shapes.reference_shapes`` of the snapshot), which the
    re-cut step rebalances idle MIG nodes for.

    ``meanwhile(snapshot, shapes)``: the caller's work that does not depend on the plan (the document's figures before
    it), given the snapshot planned and the shapes, done once the max-free solve is in: on the trade-off curve's time
    rather than on the time left to finish.

    ``budgets``: the run budgets (``disruption.max_draining_per_pool``, ``max_moves_per_workload``) and ``max_evictions``
    (``executor.max_evictions_per_cycle``): the plan is the best point of the curve one run can carry out whole; when
    none can, the chosen point cut to the whole source nodes one run may take (``budgets.py``), a row of the curve of
    its own. ``heldBack`` says which budget held the rest back for later runs.

    ``restraints``: what earlier runs forbid now (``history.restraints_at``): workloads and nodes in their cooldown stay
    as they are, the hourly/daily move caps (``disruption.max_moves_per_hour``/``_per_day``) cap the moves, and an open
    circuit breaker is said first.

    ``stage(name, best)``: told as each stage starts, with the best plan so far in words ("" before there is one), so a
    caller can show progress on long solves.

    ``steering``: what the run's steering can keep where the plan puts a replacement (``movability.Steerability``): with
    fences (``holds``, ``off``) pods tolerating them stay; with the steering policy, pods it does not pin (not a ReplicaSet's
    or StatefulSet's, or outside its binding's namespaces). None: nothing asked of the steering.

    With ``settings.mig_repartition`` and a ``mig_parted`` config, whole-free MIG-capable nodes may be re-cut for
    pending MIG pods (``recut.py``).

    ``settings.time_limit_seconds`` bounds the whole call and the document's figures (``solver.planSeconds``): every phase
    after building the problem and the greedy warm start (the model, each solve, the curve, the re-cut step) keeps to
    what is left of it and gives up with the best plan so far, never less than the warm start; the last
    ``1 - CURVE_END`` of it is left for finishing (concretising, the re-cut step, the figures after the plan).
    ``load_seconds``: how long the caller took to load the snapshot, reported apart (``solver.loadSeconds``)."""
    snapshot = without_own_pins(snapshot)  # pods a run moved may move again: their pin was ours, not their owner's
    # One clock for the whole call: on the wall clock, building the problem and the warm start count against the limit
    # (planner.deterministic: CP-SAT's deterministic time, which only the solves spend).
    clock = deadline_for(settings)
    shapes = tuple(shapes) if shapes is not None else reference_shapes(snapshot)
    warnings = list(snapshot.warnings)
    if snapshot.extra.get("orphan_pods") and settings.mode == "free-nodes" and settings.objective != "pending-only":
        # Pods and nodes were not read together: a node may run pods this snapshot does not show, so none is freed.
        settings = settings.model_copy(update={"objective": "pending-only"})
        warnings.append(
            "freeing no node: the snapshot is not one consistent read (pods bound to nodes it does not contain), so "
            "nodes may run pods it does not show; only pending pods are placed. Read nodes and pods together: "
            "kubectl get nodes,pods,pdb,pv,pvc -A -o json"
        )
    settings, held = _restrained(settings, restraints, warnings)
    say = stage or (lambda name, best: None)
    say("building the problem", "")
    # The warm start searches wide; the CP-SAT model keeps max_targets_per_type per type (see solver._narrow).
    building = time.monotonic()
    problem = build_problem(
        snapshot, settings, max_targets=len(snapshot.nodes), steering=steering, now=now, restraints=held
    )
    original = problem = replace(problem, usage_shapes=usage_shapes(problem, [s.requests for s in shapes]))
    built = time.monotonic() - building
    result: SolveResult | None = None
    note = ""
    held_by = ""  # the run budget that held the chosen point back, when a cheaper one was taken instead
    cut: list[str] = []  # what the time limit left undone, for the report
    moves_bound: int | None = None
    curve_seconds = 0.0
    points: list[Point] = []
    chosen: Point | None = None
    if not problem.types:
        if meanwhile is not None:
            meanwhile(snapshot, shapes)
        note = "nothing to plan: no pod may move and no GPU pod is pending"
        moves: list[ConcreteMove] = []
        placements: list[ConcretePlacement] = []
        if settings.mode == "free-nodes":
            chosen = Point(0, 0, 0, 0, "OPTIMAL", 0, Assignment())
            points = [chosen]
    else:
        share = settings.time_limit_seconds * SOLVE_SHARE - clock.elapsed()
        curve_end = _curve_end(settings, built)
        say("searching", "")
        # A model still building when the solves' share runs out may go on into the curve's time: the curve starts from it.
        result = solve(
            problem,
            deadline=clock.until(max(0.1, share) if settings.deterministic else share),
            build=clock.until(curve_end - clock.elapsed())
            if settings.mode == "free-nodes" and not settings.deterministic
            else None,
        )
        # What does not depend on the plan (the document's figures before it) takes from the curve's time, not from finishing's.
        if meanwhile is not None:
            meanwhile(snapshot, shapes)
        problem = result.problem
        assignment = result.assignment
        say("bounding moves and drawing the trade-off curve", _best(problem, assignment))
        if settings.mode == "free-nodes":
            moves_bound = _moves_bound(original, result, clock.until(curve_end - clock.elapsed()), cut)
            started = time.monotonic()
            points, chosen = _curve(problem, result, settings, clock.until(curve_end - clock.elapsed()), cut)
            chosen, note = _hollow(points, chosen, settings.objective)
            if budgets is not None or max_evictions is not None:
                chosen, held_by = _within_run_budgets(
                    problem,
                    snapshot,
                    points,
                    chosen,
                    budgets or DisruptionSettings(),
                    max_evictions,
                    settings.objective,
                )
            if result.restricted:
                _whole_cluster_bounds(points, original)
            curve_seconds = time.monotonic() - started
            assignment = plan_of(chosen)
        say("writing the plan", _best(problem, assignment))
        moves, placements = concretise(problem, assignment, empty_nodes(problem, assignment))
    recuts: list[Recut] = []
    if settings.mig_repartition and mig_parted is not None and chosen is not None:
        chosen, moves, placements, recuts = _recut_step(
            problem, mig_parted, points, chosen, moves, placements, settings, clock, cut
        )
        if settings.mig_rebalance_min_gain is not None:
            idle = plan_rebalance(
                problem, mig_parted, moves, placements, recuts, shapes, settings.mig_rebalance_min_gain
            )
            recuts += _affordable(idle, len(moves) + round(settings.recut_cost_moves * len(recuts)), settings)
    placements = [*placements, *(p for r in recuts for p in r.placements)]
    partitioned = plan_partitions(problem, moves, placements, max_moves=settings.max_moves, deadline=clock)
    moves = [*moves, *partitioned.moves]
    placements = [*(p for p in placements if p.pod.key not in partitioned.dropped), *partitioned.placements]
    warnings += partitioned.notes
    freed, filled = gpu_nodes_changed(problem, moves, placements)
    net_gpus = sum(problem.nodes[i].gpus for i in freed) - sum(problem.nodes[i].gpus for i in filled)
    if result is not None and not moves and not placements:
        empty = (
            "moves capped at 0 (--max-moves / planner.max_moves)"
            if settings.max_moves == 0
            else "this search found no move that frees usable GPU capacity or places a pending pod"
        )
        note = f"{empty}; {note}" if note else empty
    plan = CompactionPlan(
        metadata=Metadata(
            id=plan_id or f"plan-{uuid.uuid4().hex[:12]}",
            created_at=now.isoformat().replace("+00:00", "Z"),
            source=source,
        ),
        moves=_moves(problem, moves, set(freed), placements, partitioned.devices),
        placed_pending=[
            Placement(
                pod=p.pod.key,
                to_node=problem.nodes[p.target].node.name,
                devices=list(partitioned.devices.get(p.pod.key, ())),
            )
            for p in placements
        ],
        freed_nodes=[problem.nodes[i].node.name for i in freed],
        filled_nodes=[problem.nodes[i].node.name for i in filled],
        freed_gpus=net_gpus,
        usable_freed_gpus=usable_freed(problem, moves, placements),
        unusable=why_unusable(problem, loads_after(problem, moves, placements), freed),
        mig_repartition=[
            MigRepartition(
                node=problem.nodes[r.node].node.name,
                from_config=r.from_config,
                to_config=r.to_config,
                reason=r.reason(problem),
                allocatable=r.allocatable,
                cost=settings.recut_cost_moves,
            )
            for r in recuts
        ],
        objective=settings.objective if settings.mode == "free-nodes" else "shapes",
        balanced_moves_per_gpu=settings.balanced_moves_per_gpu
        if settings.objective == "balanced" and settings.mode == "free-nodes"
        else None,
        move_price=describe(settings.move_cost),
        frontier=_frontier(
            points, chosen, recuts, settings, moves, len(freed), net_gpus, usable_freed(problem, moves, placements)
        ),
        warnings=warnings,
        solver=solver_report(
            problem, result, note, top=points[-1] if points else None, cut=cut, moves_bound=moves_bound
        ).model_copy(
            update={
                "frontier_seconds": round(curve_seconds, 3),
                "load_seconds": None if load_seconds is None else round(load_seconds, 3),
            }
        ),
    )
    if held_by:
        plan = plan.model_copy(update={"held_back": held_by})
    if budgets is not None or max_evictions is not None:
        plan = _within_budgets(plan, snapshot, budgets or DisruptionSettings(), max_evictions)
    plan = plan.model_copy(update={"explanations": _explanations(problem, held)})
    return Composed(plan, snapshot, shapes, original, frozenset(p.pod.key for p in placements))


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
        docs = _moves(problem, moves, set(), placements)
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


def _frontier(
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
    base = settings.move_cost.base
    rows = [_frontier_point(p, p is chosen and not recuts, base) for p in points]
    if recuts and chosen is not None:
        cost = sum(m.ptype.cost for m in moves) / base + settings.recut_cost_moves * len(recuts)
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


def _explanations(problem: Problem, restraints: Restraints | None = None) -> dict[str, object]:
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

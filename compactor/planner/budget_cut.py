"""The run budgets (``budgets.py``) applied to a chosen plan: the point of the curve one run can carry out whole, else
the plan cut by whole source nodes to what one run may take, saying which budget held it back.

Separate from ``budgets.py``, which counts the budgets over the plan model alone (the executor's scope reads it too):
these concretise points of the curve and document their moves, so they import the curve's and the document's modules.

Imports: budgets, the curve's points (``frontier``), the document's moves, the objective, the plan model, the problem,
``solution``, ``compactor.model``, ``compactor.settings``.
"""

from __future__ import annotations

import time

from compactor.model.types import Snapshot
from compactor.planner.cpsat.deadline import Deadline
from compactor.planner.document import move_docs
from compactor.planner.objective import empty_nodes
from compactor.planner.plan import CompactionPlan, FrontierPoint, Placement
from compactor.planner.problem import Problem
from compactor.planner.rules.budgets import EvictionCap, RunBudgets, refusal, take_nodes
from compactor.planner.search.frontier import Point, plan_of
from compactor.planner.solution import concretise
from compactor.settings.caps import CapsSettings

BUDGET_POINTS = 30  # points of the curve tried, from the chosen one down, for one a run can carry out whole


def point_within_budgets(
    problem: Problem,
    snapshot: Snapshot,
    points: list[Point],
    chosen: Point,
    cfg: CapsSettings,
    cap: int | None,
    objective: str,
    deadline: Deadline,
) -> tuple[Point, str]:
    """The chosen point when one run can carry it out whole under the run budgets, else the freest cheaper point of the
    curve that it can, and the ``heldBack`` that says which budget held the chosen one back ("" when none did, or when
    no point fits whole before ``deadline``: then ``cut_to_budgets`` cuts the chosen one).

    Each point tried is concretised (at 5,000 nodes half a second): points with more moves than ``cap`` evictions are
    refused unseen, and no point is tried when less time remains than the last one took."""
    cheaper = sorted((p for p in points if p.cost < chosen.cost), key=lambda p: (-p.usable_gpus, p.cost))
    evictions = EvictionCap(cap) if cap is not None else None
    held = evictions.held if evictions is not None and evictions.holds_back(chosen.moves) else ""
    within = [p for p in [chosen, *cheaper] if evictions is None or not evictions.holds_back(p.moves)]
    took = 0.0
    for point in within[:BUDGET_POINTS]:
        if deadline.remaining() <= took and not deadline.deterministic:
            break
        started = time.monotonic()
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
        took = time.monotonic() - started
    return chosen, ""


def cut_to_budgets(plan: CompactionPlan, snapshot: Snapshot, cfg: CapsSettings, cap: int | None) -> CompactionPlan:
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

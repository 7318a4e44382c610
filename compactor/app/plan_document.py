"""The plan document: the planner's plan (``planner.compose``) with the measurements a reader of the plan needs.

``build_plan`` is what every entry point calls for a ``CompactionPlan``: the planner decides the moves, placements,
re-cuts and the curve; this adds the cluster's fragmentation figures before and after the plan (the same object as
``compactor report --output json``'s ``figures``), why each pending GPU pod the plan leaves stays pending (naming what
its nodes lack once the plan is carried out), and how long the whole call took (``solver.planSeconds``).

Imports: ``compactor.planner`` (its compose step, the plan model, the pending pods' reasons) and
``compactor.metrics.fragmentation``.
"""

from __future__ import annotations

import time
from typing import Any

from compactor.metrics.change import ratio_notes
from compactor.metrics.figures_json import figures_to_dict
from compactor.metrics.fragmentation import (
    compute_figures,
    cpu_pods_on_gpu_nodes,
    held_by_node,
)
from compactor.planner.compose import Composed, compose
from compactor.planner.pending import left_pending
from compactor.planner.plan import CompactionPlan, Measures, apply_plan
from compactor.planner.request import PlanRequest


def build_plan(request: PlanRequest) -> CompactionPlan:
    """The plan document of the compaction ``request`` asks (``PlanRequest.of`` builds it, its clock started):
    ``planner.compose.compose`` with the figures before and after it, the pending pods it leaves and why, and
    ``solver.planSeconds``. Pure apart from the solver's wall clock; ``settings.time_limit_seconds`` bounds the whole
    call, figures included: the request's clock started before the figures of the snapshot are taken."""
    before = figures_to_dict(compute_figures(request.snapshot, request.shapes))
    return _documented(compose(request), before, request.started)


def _documented(composed: Composed, before: dict[str, Any], began: float) -> CompactionPlan:
    """The composed plan with the figures after it, the pending pods it leaves and why, and its planning time."""
    planned = apply_plan(composed.snapshot, composed.plan)
    after = compute_figures(planned, composed.shapes)
    free_after = {n.name: n.free.as_dict() for n in after.nodes}
    left = left_pending(composed.problem, composed.placed, free_after, held_by_node(cpu_pods_on_gpu_nodes(planned)))
    after_figures = figures_to_dict(after)
    notes = ratio_notes(before.get("cluster", {}), after_figures.get("cluster", {}), len(composed.plan.placed_pending))
    return composed.plan.measured(Measures(before, after_figures, left, notes, time.monotonic() - began))

"""Which pending GPU pods a plan may place, and why not: the pending pods' counterpart of ``movability.py``.

Separate from the bound pods' rules because the question differs: nothing is evicted, so only what the model cannot
predict for a new placement counts (a scheduler it does not mimic, the configured scope, a preemption under way, a
constraint it does not model, volumes whose placement is unknown), and the answer is a sentence for
``Problem.not_placeable`` rather than an ``Unmovable`` reason.

Imports: ``compactor.model``, ``compactor.settings``, movability (the unmodelled constraints, shared with bound pods).
"""

from __future__ import annotations

from compactor.model.types import Pod
from compactor.model.volumes import VolumeIndex
from compactor.planner.rules.movability import unmodelled_reason
from compactor.settings.bundles import PlannerSettings


def why_not_placeable(pod: Pod, settings: PlannerSettings, volumes: VolumeIndex) -> str | None:
    """Why the plan will not place this pending GPU pod: a constraint the model does not check, or config scope."""
    if pod.scheduler_name not in settings.movable.scheduler_names:
        return f"scheduled by {pod.scheduler_name!r}, not a scheduler the planner predicts (movable.scheduler_names)"
    if (
        settings.movable.namespaces and pod.namespace not in settings.movable.namespaces
    ) or pod.namespace in settings.movable.exclude_namespaces:
        return f"namespace {pod.namespace} is outside the planner's scope (movable.namespaces / exclude_namespaces)"
    if pod.nominated_node:
        return f"kube-scheduler is preempting for it (nominated to {pod.nominated_node})"
    unmodelled = unmodelled_reason(pod)
    if unmodelled is not None:
        return unmodelled.value
    if pod.claims or pod.ephemeral_volumes:
        unknown = volumes.placement(pod).unknown
        if unknown:
            return unknown
    return None

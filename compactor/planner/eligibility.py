"""Where a pod may go: the node-side rules (readiness, cordon, exclusion, taints, selectors, affinity).

Capacity is not checked here; the CP-SAT model enforces it for the whole plan.
"""

from __future__ import annotations

from compactor.model.scheduling import Ineligible, why_ineligible
from compactor.model.types import Node, Pod
from compactor.planner.movability import EXCLUDE_LABEL

EXCLUDED = "node is labelled compactor.io/exclude=true"


def why_not_target(pod: Pod, node: Node) -> Ineligible | str | None:
    """The first rule that keeps ``pod`` off ``node``, or None when ``node`` may receive it."""
    if node.labels.get(EXCLUDE_LABEL) == "true":
        return EXCLUDED
    return why_ineligible(pod, node)


def is_target(pod: Pod, node: Node) -> bool:
    return why_not_target(pod, node) is None

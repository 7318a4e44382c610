"""Refusing a move: recorded with its reason, never evicted, and so is every move that depended on it.

Two steps refuse moves: ``evict``, when the re-check says a pod may no longer go (``checks/recheck.py``), and
``cordon``, when an operator lifted a fence of a resumed run. Steps do not import each other, so the rule lives here.
"""

from __future__ import annotations

import logging

from compactor.actions.run.context import Run
from compactor.planner.plan import Move

log = logging.getLogger("compactor.executor")


def refuse(run: Run, move: Move, why: str) -> None:
    """``move`` and every not yet done move that depended on it are refused: recorded with their reasons, never evicted."""
    stuck = {move.from_node}
    refused = {move.pod: why}
    changed = True
    while (
        changed
    ):  # a refused move keeps its pod on its source: moves off that node, or onto it, lose their point or room
        changed = False
        for other in run.plan.moves:
            if other.pod in refused or other.pod in run.state.done or other.pod in run.state.inflight:
                continue
            if other.from_node in stuck or other.to_node in stuck:
                refused[other.pod] = f"depends on the move of {move.pod}, refused: {why}"
                stuck.add(other.from_node)
                changed = True
    with run.write_ahead() as state:
        for pod, reason in refused.items():
            log.warning(
                run.said("move refused at its eviction", "move would be refused (dry run)"),
                extra={"pod": pod, "reason": reason},
            )
            run.note(f"not moved {pod}: {reason}")
            state.refused[pod] = reason
            state.done.append(pod)

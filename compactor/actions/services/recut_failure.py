"""A re-cut that did not finish: the node left fenced and marked for an operator, with a Warning Event, never retried.

Two steps leave a node so: ``recut``, when mig-manager fails or times out, and ``rollback``, when it finds a node
relabelled and mig-manager not done (``midway``). Steps do not import each other, so the rule lives here.
"""

from __future__ import annotations

import logging

from compactor.actions.cluster import events
from compactor.actions.cluster import migmanager as mig
from compactor.actions.cluster.patching import patch_fresh
from compactor.actions.port import annotations as ann
from compactor.actions.run.context import Run
from compactor.planner.plan import MigRepartition

log = logging.getLogger("compactor.executor")


def leave_for_operator(run: Run, change: MigRepartition, why: str, result: str) -> str:
    """The node of ``change`` marked failed for ``why`` and kept out of the run's releases; returns ``result``."""
    message = (
        f"re-cut of {change.node} to {change.to_config} failed: {why}; left fenced for an operator "
        f"({mig.restore_hint(change.node, change.from_config)})"
    )
    log.warning(
        run.said("mig re-cut failed", "mig re-cut would fail (dry run)"),
        extra={"node": change.node, "to": change.to_config, "reason": why},
    )
    if change.node in run.state.cordoned and patch_fresh(
        run.client,
        change.node,
        lambda n: mig.failed_patch(why) if ann.is_ours(n, run.settings.executor.identity) else None,
    ):
        with run.write_ahead() as state:
            state.cordoned.remove(change.node)  # deliberately kept: recovery and finish leave it
    run.event(events.recut_failed(change.node, message))
    run.note(message)
    return result


def midway(run: Run, name: str, reason: str) -> bool:
    """A node relabelled for a re-cut that mig-manager has not finished is not released by a rollback (pods landing
    while the device plugin restarts): it stays fenced and marked for an operator, as after a failed re-cut."""
    change = next((r for r in run.plan.mig_repartition if r.node == name), None)
    node = run.client.get_node(name) if change is not None else None
    if change is None or node is None or mig.labels(node).get(mig.CONFIG_LABEL) != change.to_config:
        return False
    if mig.progress(node, change.to_config, change.allocatable) == "done":
        return False
    leave_for_operator(run, change, f"the run rolled back while mig-manager was at it ({reason})", "failed")
    return True

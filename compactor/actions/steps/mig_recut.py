"""Re-cut: drive NVIDIA's mig-manager on each drained node of the plan's ``migRepartition`` (docs/mig.md).

Drained -> relabelled ``nvidia.com/mig.config`` -> mig-manager reports ``success`` with the new
slices in allocatable; or ``failed``/timeout: the node stays fenced and marked for an operator,
with a Warning Event, never retried in a loop (``actions/services/recut_failure.py``). The plan's nodes are relabelled
together and waited for together, each against its own ``mig.reconfigure_timeout_seconds``: mig-manager runs on every
node (a DaemonSet), so the re-cuts of one run proceed side by side.
"""

from __future__ import annotations

from compactor.actions.checks.drained import await_drained, gpu_pods_holding
from compactor.actions.cluster import events
from compactor.actions.cluster import migmanager as mig
from compactor.actions.cluster.patching import patch_fresh
from compactor.actions.port import annotations as ann
from compactor.actions.port.client import Obj
from compactor.actions.run.context import Abort, AbortReason, Run
from compactor.actions.services.recut_failure import leave_for_operator
from compactor.planner.plan import MigRepartition


def recut_all(run: Run, unfinished: set[str]) -> set[str]:
    """Re-cut each drained node of the plan's migRepartition, all at once (mig-manager works on each node by itself,
    so a run of N re-cuts takes one reconfiguration, not N); returns the nodes whose re-cut did not succeed."""
    failed = {change.node for change in run.plan.mig_repartition if change.node in unfinished}
    changes = [change for change in run.plan.mig_repartition if change.node not in unfinished]
    if changes:
        await_drained(run, [change.node for change in changes])
    deadlines: dict[str, tuple[MigRepartition, float]] = {}
    for change in changes:
        refused = _relabel(run, change)
        if refused:
            run.log.recuts[change.node] = refused
            failed.add(change.node)
        else:
            deadlines[change.node] = (change, run.clock.monotonic() + run.settings.mig.reconfigure_timeout_seconds)
    while deadlines:
        for name, (change, deadline) in list(deadlines.items()):
            result = _progress(run, change, deadline)
            if result:
                run.log.recuts[name] = result
                del deadlines[name]
                if result != "success":
                    failed.add(name)
        if deadlines:
            states = ", ".join(sorted(deadlines))
            run.report(f"re-cutting {states}", waiting=f"mig-manager on {len(deadlines)} node(s)")
            run.clock.sleep(run.settings.executor.poll_seconds)
    return failed


def _relabel(run: Run, change: MigRepartition) -> str:
    """``nvidia.com/mig.config`` set to the new layout on a drained node we fence; "" once set (or found set by the run
    a crash interrupted), else why the re-cut is not made ("failed", the node left for an operator)."""
    name = change.node
    holding = [f"{p['metadata'].get('namespace')}/{p['metadata'].get('name')}" for p in gpu_pods_holding(run, name)]
    if holding:
        return leave_for_operator(run, change, f"GPU pod(s) {', '.join(holding[:3])} still on it", "failed")
    node = run.read(lambda: run.client.get_node(name))
    if node is None:
        raise Abort(AbortReason.NODE_GONE, f"node {name} disappeared before its re-cut")
    if mig.labels(node).get(mig.CONFIG_LABEL) == change.to_config:  # a resumed run finds it relabelled already
        return ""
    previous = mig.labels(node).get(mig.CONFIG_LABEL, "") or change.from_config

    def relabel(current: Obj) -> Obj | None:
        if not ann.is_ours(current, run.settings.executor.identity):
            return None
        return mig.relabel_patch(change.to_config, change.allocatable, previous=previous)

    if patch_fresh(run.client, name, relabel, node=node) is None:
        return leave_for_operator(run, change, "the node is no longer fenced by gpu-compactor", "failed")
    run.event(events.recut_started(name, change.from_config, change.to_config, run.plan_id))
    return ""


def _progress(run: Run, change: MigRepartition, deadline: float) -> str:
    """Where mig-manager is on ``change``'s node: "" while at it, "success", or the failure ("failed", "timeout") with
    the node left for an operator."""
    node = run.read(lambda: run.client.get_node(change.node)) or {}
    state = mig.progress(node, change.to_config, change.allocatable)
    if state == "done":
        return "success"
    if state == "failed":
        return leave_for_operator(
            run, change, f"mig-manager reports {mig.labels(node).get(mig.STATE_LABEL, 'a changed label')}", "failed"
        )
    if run.clock.monotonic() >= deadline:
        return leave_for_operator(
            run,
            change,
            f"not done within {run.settings.mig.reconfigure_timeout_seconds:g}s "
            f"(state {mig.labels(node).get(mig.STATE_LABEL, '-')})",
            "timeout",
        )
    return ""

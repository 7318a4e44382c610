"""Fence: every node the plan frees (and each node drained for a pending pod) closed to new pods before the first eviction.

The fence is this installation's own ``NoSchedule`` taint (``annotations.fence_key``), never the cordon bit: an operator's
``kubectl cordon`` (or drain) of the same node is theirs, before, during and after the run. The taint and the marks go in
one merge patch (``annotations.fence_patch``), and the node is recorded in the state before the patch, so recovery finds
it either way. Giving a node back is ``actions/run/fences.py``.
"""

from __future__ import annotations

import logging
from functools import partial

from compactor.actions.cluster import events
from compactor.actions.cluster.patching import patch_fresh
from compactor.actions.port import annotations as ann
from compactor.actions.port.client import Obj
from compactor.actions.run.context import Abort, AbortReason, Run
from compactor.actions.services.planned_pod import current_pod
from compactor.actions.services.refusals import refuse

log = logging.getLogger("compactor.executor")


def fence_all(run: Run, *, fenced_before: bool = False) -> None:
    """Every node of the plan fenced. ``fenced_before``: a resumed run that had placed all its fences before it stopped, so
    a node of its state found without its fence had it lifted by someone else (an operator): it stays open, and the run's
    remaining moves off it are refused (``_lifted``)."""
    names = [*run.plan.freed_nodes, *run.fences]
    reads: dict[str, Obj] = {}
    for name in names:
        node, _ = run.node_and_pods(name)
        if node is None:
            raise Abort(AbortReason.NODE_GONE, f"node {name} disappeared while fencing")
        reads[name] = node
    if [n for n in names if n not in run.state.cordoned]:
        with run.write_ahead() as state:  # once for every node about to be fenced: recovery may find each either way
            state.cordoned.extend(n for n in names if n not in state.cordoned)
    identity = run.settings.executor.identity
    for name in names:
        if ann.has_fence(reads[name], identity):
            continue  # ours already (a resumed run)
        if fenced_before and name in run.state.cordoned:
            _lifted(run, name)
            continue
        fence = partial(ann.fence_patch, identity=identity, plan_id=run.plan_id, at=run.stamp())
        if patch_fresh(run.client, name, fence, node=reads[name]) is None:
            raise Abort(AbortReason.NODE_GONE, f"node {name} disappeared while fencing")
        run.event(events.cordoned(name, run.plan_id, ann.fence_key(identity)))


def _lifted(run: Run, name: str) -> None:
    why = f"the fence on {name} was lifted by someone else while the run was stopped; it stays lifted"
    log.warning("fence lifted by someone else: not fenced again", extra={"node": name, "plan": run.plan_id})
    with run.write_ahead() as state:  # each refusal saves too, with the node forgotten already
        state.cordoned.remove(name)
        for move in run.plan.moves:
            if move.from_node != name or move.pod in state.done:
                continue
            if move.pod in state.inflight:
                if current_pod(run, move) is None:
                    continue  # evicted before the stop: its replacement is seen through
                del state.inflight[move.pod]  # recorded, never sent (or refused): not sent now
            refuse(run, move, why)
        run.note(why)

"""Rollback: an aborted run undoes its own fences (only nodes it fenced or held, and only while they carry its marks),
lets go of its steering, says why in a Warning Event and the log, and deletes the state.

The moves already done stay done: their replacements run where they landed, and the next run
plans afresh from live state. A node mid re-cut is not released (``recut_failure.midway``).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

from compactor.actions.cluster import events
from compactor.actions.cluster.run_state import STATE_CONFIGMAP, Phase
from compactor.actions.run.context import Run
from compactor.actions.run.fences import unfence
from compactor.actions.services.recut_failure import midway
from compactor.actions.services.surge import undo

log = logging.getLogger("compactor.executor")


def roll_back(run: Run, reason: str) -> None:
    log.error(
        run.said("aborting plan", "aborting plan (dry run: the rollback's calls are recorded, not made)"),
        extra={"plan": run.plan_id, "reason": reason},
    )
    try:  # so that a crash from here on makes recovery finish the rollback, not resume the plan
        with run.write_ahead() as state:
            state.phase, state.reason = Phase.ROLLING_BACK, reason
    except Exception as exc:  # best effort: the rollback itself matters more
        log.error("could not record the rollback", extra={"error": str(exc)})
    _undo_surges(run)
    try:
        run.steerer.release(run)
    except Exception as exc:  # recovery removes steering the state still records
        log.error("could not release steering", extra={"error": str(exc)})
    left = []
    for name in dict.fromkeys([*run.state.cordoned, *run.state.held]):
        try:
            if midway(run, name, reason):
                continue
            if unfence(run, name):  # retried through a brownout up to release_deadline_seconds
                run.event(events.uncordoned(name, run.plan_id, "rolled back"))
        except Exception as exc:  # keep going with the others; this one stays in the state for recovery
            log.error("rollback failed for node", extra={"node": name, "error": str(exc)})
            left.append(name)
    # one Warning per run, on the first node the plan frees (or, freeing none, the first node it moves a pod from)
    subject = next(iter(run.plan.freed_nodes), None) or next((m.from_node for m in run.plan.moves), None)
    if subject:
        _best_effort(lambda: run.event(events.aborted(subject, run.plan_id, reason)), "could not record the abort")
    if left:  # the state is what makes the next recovery finish this rollback: it goes only once every fence is off
        log.error("fences still on after the rollback; the state stays for the next recovery", extra={"nodes": left})
        return
    _best_effort(lambda: run.client.write_state(STATE_CONFIGMAP, None), "could not clear executor state")


def _undo_surges(run: Run) -> None:
    """Make-before-break moves not finished: each Deployment back at its replicas, each old pod's mark off (``surge.undo``)."""
    for pod, flight in list(run.state.inflight.items()):
        if flight.surge is not None and pod not in run.state.done:
            _best_effort(functools.partial(undo, run, pod, flight.surge), f"could not undo the surge of {pod}")


def _best_effort(call: Callable[[], None], what: str) -> None:
    try:
        call()
    except Exception as exc:  # never leave the rollback half done for want of an Event or a state write
        log.error(what, extra={"error": str(exc)})

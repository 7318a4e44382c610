"""Rollback: an aborted run undoes its own fences (only nodes it cordoned or held, and only while they carry its marks),
lets go of its steering, says why in a Warning Event and the log, and deletes the state.

The moves already done stay done: their replacements run where they landed, and the next run
plans afresh from live state. A node mid re-cut is not released (``recut.midway``).
"""

from __future__ import annotations

import logging

from compactor.actions import events
from compactor.actions.run import Run
from compactor.actions.state import STATE_CONFIGMAP, Phase
from compactor.actions.steps.cordon import uncordon
from compactor.actions.steps.recut import midway

log = logging.getLogger("compactor.executor")


def roll_back(run: Run, reason: str) -> None:
    log.error(run.said("aborting plan", "aborting plan (dry run: the rollback's calls are recorded, not made)"),
              extra={"plan": run.plan_id, "reason": reason})
    run.state.phase, run.state.reason = Phase.ROLLING_BACK, reason
    try:
        run.save()  # so that a crash from here on makes recovery finish the rollback, not resume the plan
    except Exception as exc:  # best effort; the rollback itself matters more
        log.error("could not record the rollback", extra={"error": str(exc)})
    try:
        run.steerer.release(run)
    except Exception as exc:  # recovery removes steering the state still records
        log.error("could not release steering", extra={"error": str(exc)})
    for name in dict.fromkeys([*run.state.cordoned, *run.state.held]):
        try:
            if midway(run, name, reason):
                continue
            if uncordon(run, name):
                run.event(events.uncordoned(name, run.plan_id, "rolled back"))
        except Exception as exc:  # keep going: recovery retries whatever is left marked
            log.error("rollback failed for node", extra={"node": name, "error": str(exc)})
    # one Warning per run, on the first node the plan frees (or, freeing none, the first node it moves a pod from)
    subject = next(iter(run.plan.freed_nodes), None) or next((m.from_node for m in run.plan.moves), None)
    if subject:
        run.event(events.aborted(subject, run.plan_id, reason))
    try:
        run.client.write_state(STATE_CONFIGMAP, None)
    except Exception as exc:  # never leave the rollback half done for want of a state write
        log.error("could not clear executor state", extra={"error": str(exc)})

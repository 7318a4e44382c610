"""Finish: every move is done, the MIG nodes re-cut and the pending pods placed (``recut``, ``steer``); wait for the
drained nodes to empty, release what this run fenced (``after_drain``: uncordon, keepCordoned or taint), delete the
state. With ``taint``, ``reservations`` then lifts each reservation when it is used or at its TTL; ``actions/executor.py``
strings these steps together."""

from __future__ import annotations

import logging
from functools import partial

from compactor.actions.checks.drained import await_drained
from compactor.actions.cluster import events
from compactor.actions.cluster.live_pods import pod_key
from compactor.actions.cluster.patching import patch_fresh
from compactor.actions.cluster.retry import Backoff, until_deadline
from compactor.actions.cluster.run_state import STATE_CONFIGMAP, Phase
from compactor.actions.port import annotations as ann
from compactor.actions.run.context import Run
from compactor.actions.run.fences import unfence
from compactor.errors import ClusterError

log = logging.getLogger("compactor.executor")


def finish(run: Run, unfinished: set[str]) -> tuple[list[str], list[str]]:
    """The nodes freed (empty of GPU pods and released as ``after_drain`` says), and those of them now reserved
    (``after_drain: taint``). ``unfinished``: sources with a move not done (``Run.unfinished_sources``), not waited for."""
    staying = await_drained(run, [n for n in run.plan.freed_nodes if n not in unfinished])
    freed, reserved = [], []
    for name in run.plan.freed_nodes:
        if name in unfinished:  # the run stopped at a budget before this node's moves: released as it was
            _after_drain(run, name, freed=False)
            continue
        leftovers = [pod_key(p) for p in staying.get(name, [])]
        if leftovers:
            log.warning(
                run.said("node not freed", "node would not be freed (dry run)"),
                extra={"node": name, "pods": leftovers[:5]},
            )
        else:
            freed.append(name)
        if _after_drain(run, name, freed=not leftovers):
            reserved.append(name)
    run.state.phase = Phase.DONE
    _forget(run)
    return freed, reserved


def _forget(run: Run) -> None:
    """The state goes once the plan is done, retried through a brownout; a delete that still fails does not turn a completed
    run into a rollback: the next recovery finds a plan whose every move is done and deletes the state then."""
    try:
        until_deadline(
            lambda: run.client.write_state(STATE_CONFIGMAP, None),
            Backoff.of(run.settings.executor),
            run.clock,
            seconds=run.settings.executor.release_deadline_seconds,
            what="deleting the executor state",
        )
    except ClusterError as exc:
        log.error("could not delete the executor state; the next recovery will", extra={"error": str(exc)})
        run.note(f"executor state not deleted ({exc}); the next run's recovery deletes it")


def _after_drain(run: Run, name: str, *, freed: bool) -> bool:
    """True when ``name`` is now reserved (``after_drain: taint``): the run waits for its use, or its TTL, to lift it."""
    if name not in run.state.cordoned:
        return False  # a node gone, or already released by this run before a restart (or never actually fenced), is left alone
    mode = run.settings.executor.after_drain if freed else "uncordon"
    if mode == "uncordon":
        if unfence(run, name):
            run.event(events.uncordoned(name, run.plan_id, "fence lifted after the plan"))
    elif mode == "keepCordoned":
        if patch_fresh(
            run.client,
            name,
            lambda n: ann.keep_cordoned_patch() if ann.has_fence(n, run.settings.executor.identity) else None,
        ):
            run.event(events.kept_cordoned(name, run.plan_id))
    else:
        return _reserve_freed(run, name)
    return False


def _reserve_freed(run: Run, name: str) -> bool:
    """``after_drain: taint``: our fence swapped for a NoSchedule taint that only pods tolerating it (value ``any``, or the
    pending pod the plan placed here when that pod was not bound in time) may pass. True when the node is reserved."""
    placed = next((p.pod for p in run.plan.placed_pending if p.to_node == name), "")
    until = run.stamp(offset=run.settings.executor.taint_ttl_seconds)
    build = partial(
        ann.reservation_patch,
        identity=run.settings.executor.identity,
        key=run.settings.executor.taint_key,
        pod=placed,
        until=until,
        after_drain=True,
    )
    if patch_fresh(run.client, name, build) is None:
        return False
    run.event(events.reserved(name, placed, until, run.plan_id))
    return True

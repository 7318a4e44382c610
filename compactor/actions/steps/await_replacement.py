"""Await the replacement: the owner is whole again when a new pod of it (a uid not among its pods before the eviction) is
bound and Ready.

Each look lists the owner's pods by its own label selector (``owners.py``): one narrow read per
poll, whatever the size of the cluster. While waiting, the run stops (``Abort``, then rollback)
when the replacement lands on a node the plan frees, when the steering mechanism says it failed
(``Steerer.observe``: bound elsewhere, arrived unpinned, pinned but unable to bind), or when it is
not Ready within ``replacement_timeout_seconds`` plus the evicted pod's grace period (a
StatefulSet recreates a pod only once the old one is gone). Once the last move off a fenced node is
Ready, a node the plan frees is checked for a GPU pod the plan does not move (one that tolerates the fence would defeat
the plan), and a node it drains for a pending pod for that pod's room (the pods the plan leaves there stay). A
replacement whose GPUs come through dynamic resource allocation has its claims read once it is Ready: the devices it got
are in the run's report (``draDevices``) and log.
"""

from __future__ import annotations

import logging

from compactor.actions.checks.validate import no_strangers_on, pending_room_on
from compactor.actions.cluster.live_pods import is_bound, is_ready, is_terminating, pod_key
from compactor.actions.cluster.owners import owner_pods
from compactor.actions.port.client import Obj
from compactor.actions.port.objects import PodView
from compactor.actions.run.context import Abort, AbortReason, Run
from compactor.actions.services.devices import note_devices
from compactor.actions.steering.pin import steered_to
from compactor.planner.plan import Move

log = logging.getLogger("compactor.executor")


def await_replacement(run: Run, move: Move) -> None:
    flight = run.state.inflight[move.pod]
    if not flight.owner:
        run.steerer.release(run)
        return  # bare pods are never in a plan; nothing would replace one
    namespace = move.pod.split("/", 1)[0]
    siblings = set(flight.siblings)
    deadline = run.clock.monotonic() + run.settings.executor.replacement_timeout_seconds + flight.grace
    while True:
        pods = run.read(
            lambda: owner_pods(run.client, namespace, flight.owner, flight.selector), "listing the owner's pods"
        )
        fresh = [p for p in pods if str(p["metadata"].get("uid")) not in siblings and not is_terminating(p)]
        run.steerer.observe(run, move, fresh)  # first: the mechanism knows best why a landing went wrong
        pinned = [p for p in fresh if steered_to(p)]
        for pod in (
            pinned or fresh
        ):  # pinned by the policy: the replacement; unpinned pods besides them are the owner's own business
            _check_landing(run, move, pod)
        if any(is_bound(p) and is_ready(p) for p in fresh):
            for ready in (p for p in fresh if is_bound(p) and is_ready(p)):
                note_devices(run, move.pod, ready, move.devices)
            if _last_from(run, move):
                _check_source(run, move.from_node)
            run.steerer.after_move(run, move, fresh)
            return
        if run.clock.monotonic() >= deadline:
            state = "not Ready" if any(is_bound(p) for p in fresh) else "Pending"
            raise Abort(
                AbortReason.REPLACEMENT_TIMEOUT,
                f"replacement for {move.pod} still {state} after {run.settings.executor.replacement_timeout_seconds:g}s",
            )
        run.report(f"moved {move.pod}", waiting=f"replacement of {move.pod} ({len(fresh)} new, none Ready yet)")
        run.clock.sleep(
            run.settings.steering.bind_poll_seconds if run.state.held else run.settings.executor.poll_seconds
        )


def _check_landing(run: Run, move: Move, pod: Obj) -> None:
    """Where a replacement was bound decides whether the plan still holds; a wrong landing stops the run."""
    node = PodView(pod).node_name
    if not node:
        return
    if node in run.freed:
        raise Abort(
            AbortReason.STEERING_FAILED,
            f"replacement {pod_key(pod)} for {move.pod} landed on {node}, a node this plan frees; stopped and rolled back",
        )
    if run.steerer.exact and node != move.to_node:
        raise Abort(
            AbortReason.STEERING_FAILED,
            f"replacement {pod_key(pod)} for {move.pod} was bound to {node}, not the planned {move.to_node}; "
            f"stopped after {len(run.state.done)}/{len(run.plan.moves)} moves and rolled back (re-plan from live state next run)",
        )


def _check_source(run: Run, node: str) -> None:
    """A node the plan frees must hold no GPU pod it does not move (one tolerating the fence defeats the plan: ``Abort``);
    one it drains for a pending pod keeps the pods it does not move, and needs only room for that pod (a note when the
    room is gone: the moves made stand, the pending pod is not placed)."""
    if node in run.freed:
        run.read(lambda: no_strangers_on(run, [node]), "reading the source node's pods")
    elif node in run.fences and (short := run.read(lambda: pending_room_on(run, node), "reading the drained node")):
        log.warning("a node drained for a pending pod lost its room", extra={"node": node, "reason": short})
        run.note(short)


def _last_from(run: Run, move: Move) -> bool:
    """Whether ``move`` is the last of its source node still to finish: the node should now hold no GPU pod of anyone."""
    return not any(
        m.from_node == move.from_node and m.pod != move.pod and m.pod not in run.state.done for m in run.plan.moves
    )

"""Steer pending pods: a pod the plan places on a node drained for it gets that node, and no one else does meanwhile.

Once every move is done, the node drained for a pending pod (a fence until now) is *reserved*
for it: one patch lifts the fence and adds a ``NoSchedule`` taint ``<taint_key>=<pod>`` (the
marks stay, so recovery still accounts for the node), then the matching toleration is added to the
pending pod (the API admits additions to a pod's tolerations). Only that pod can bind there; no
other node is held (with holds, the other nodes that could take it are held as for a
replacement). Once it is bound, or after ``steer_timeout_seconds``, the taint and the marks go.
With steering off the fence simply opens.
"""

from __future__ import annotations

import logging
from collections import Counter
from functools import partial

from compactor.actions.cluster import events
from compactor.actions.cluster.live_pods import is_bound, is_terminating
from compactor.actions.cluster.patching import patch_fresh
from compactor.actions.port import annotations as ann
from compactor.actions.port.client import Obj
from compactor.actions.port.objects import PodView
from compactor.actions.run.context import Run
from compactor.actions.run.fences import release
from compactor.actions.services.devices import note_devices
from compactor.errors import ClusterError
from compactor.planner.plan import Placement

log = logging.getLogger("compactor.executor")
OPENED = "opened for the pending pod"
TOLERATION_RETRIES = 5


def place_all_pending(run: Run, unfinished: set[str], failed: set[str]) -> None:
    """Each pending pod the plan places, unless its node was not drained (``unfinished``) or not re-cut (``failed``);
    then every node the run kept fenced past its moves (``Run.fences``) opens."""
    skipped = unfinished | failed
    still = Counter(p.to_node for p in run.plan.placed_pending if p.to_node not in skipped)
    for placement in run.plan.placed_pending:
        if placement.to_node in unfinished:
            run.note(f"pending pod {placement.pod} not placed: {placement.to_node} was not drained in this run")
        elif placement.to_node in failed:
            run.note(f"pending pod {placement.pod} not placed: the re-cut of {placement.to_node} failed")
        else:
            still[placement.to_node] -= 1
            place_pending(run, placement, last=not still[placement.to_node])
    for name in run.fences:  # a pending pod that was not placed leaves its fence behind
        release(run, name, OPENED)


def place_pending(run: Run, placement: Placement, *, last: bool = True) -> None:
    """``placement``'s pod steered onto its node and waited for; the node opens after the last pending pod the plan
    places there (``last``), not before: opened after the first, it would take whichever pending pod the scheduler
    picks, and the next one planned there would find no room."""
    namespace, name = placement.pod.split("/", 1)
    pod = run.client.get_pod(namespace, name)
    if pod is None or is_terminating(pod):
        run.note(f"pending pod {placement.pod} is gone")  # its node is released as the others (finish)
        return
    if not is_bound(pod):
        run.steerer.before_placement(run, placement, pod)
        if not (run.steerer.exact and reserve(run, placement, pod)):
            release(run, placement.to_node, OPENED)
    deadline = run.clock.monotonic() + run.settings.steering.steer_timeout_seconds
    while not (node := PodView(pod).node_name) and run.clock.monotonic() < deadline:
        run.report(f"placing pending {placement.pod}", waiting=f"bind on {placement.to_node}")
        run.clock.sleep(run.settings.steering.bind_poll_seconds)
        pod = run.read(lambda: run.client.get_pod(namespace, name), "reading the pending pod") or {}
    run.steerer.after_placement(run)
    if last:
        release(run, placement.to_node, OPENED)  # the reservation too: the pod is bound, or its wait is over
    if not node:
        run.note(f"pending pod {placement.pod} not bound within {run.settings.steering.steer_timeout_seconds:g}s")
    elif node != placement.to_node:
        run.note(f"pending pod {placement.pod} was bound to {node}, not the planned {placement.to_node}")
    if node and placement.devices:
        note_devices(run, placement.pod, pod, placement.devices)


def reserve(run: Run, placement: Placement, pod: Obj) -> bool:
    """The fenced node opened for ``pod`` alone (taint + toleration); False when the node is not ours to reserve."""
    node = placement.to_node
    if node not in run.state.cordoned:
        return False
    taint = {"key": run.settings.executor.taint_key, "value": ann.taint_value(placement.pod), "effect": "NoSchedule"}
    until = run.stamp(offset=run.settings.steering.steer_timeout_seconds)
    with run.write_ahead() as state:
        state.reserved[node] = placement.pod
    build = partial(
        ann.reservation_patch,
        identity=run.settings.executor.identity,
        key=run.settings.executor.taint_key,
        pod=placement.pod,
        until=until,
    )
    if patch_fresh(run.client, node, build) is None:
        run.note(f"{node} is no longer fenced by gpu-compactor; not reserved for {placement.pod}")
        return False
    run.event(events.reserved(node, placement.pod, until, run.plan_id))
    tolerate(run, pod, {**taint, "operator": "Equal"})
    return True


def tolerate(run: Run, pod: Obj, toleration: Obj) -> None:
    """Add ``toleration`` to the pending pod (the list whole, against its resourceVersion; a conflict re-reads it)."""
    namespace, name = PodView(pod).namespace, PodView(pod).name
    current: Obj | None = pod
    for _ in range(TOLERATION_RETRIES):
        if current is None or is_bound(current):
            return
        tolerations = PodView(current).tolerations
        if toleration in tolerations:
            return
        version = PodView(current).resource_version
        patch: Obj = {"spec": {"tolerations": [*tolerations, toleration]}}
        if version:
            patch["metadata"] = {"resourceVersion": version}
        try:
            run.client.patch_pod(namespace, name, patch)
            return
        except ClusterError as exc:
            if exc.status != 409:
                raise
        current = run.client.get_pod(namespace, name)
    run.note(
        f"pending pod {namespace}/{name} changed under every toleration patch; it may not bind on its reserved node"
    )

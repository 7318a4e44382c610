"""``after_drain: taint``: the same run that reserved freed nodes lifts each reservation once a pod it was kept for is
bound there, or when its ``taint_ttl_seconds`` are over.

The run's state is already gone by then (every move is done): a reservation is accounted for by its node's marks
alone (``reserved-until``), so a run stopped while it waits leaves nothing that recovery cannot lift at the same TTL.
"""

from __future__ import annotations

import logging
from functools import partial

from compactor.actions.checks.drained import gpu_pods_holding
from compactor.actions.cluster import events
from compactor.actions.cluster.live_pods import is_terminating
from compactor.actions.cluster.patching import patch_fresh
from compactor.actions.port import annotations as ann
from compactor.actions.port.client import Obj
from compactor.actions.port.objects import PodView
from compactor.actions.run.context import Run

log = logging.getLogger("compactor.executor")


def await_reservations(run: Run, nodes: list[str]) -> None:
    """Wait (polling every ``poll_seconds``) until each reserved node in ``nodes`` is used or its TTL is over; lift each then."""
    deadline = run.clock.monotonic() + run.settings.executor.taint_ttl_seconds
    waiting = list(nodes)
    while waiting:
        expired = run.clock.monotonic() >= deadline
        for name in list(waiting):
            user = _user(run, name)
            if user or expired:
                _lift(
                    run,
                    name,
                    f"{user} is bound there" if user else f"its {run.settings.executor.taint_ttl_seconds}s are over",
                )
                waiting.remove(name)
        if waiting:
            run.report(
                "reserving freed nodes",
                waiting=f"a pod tolerating {run.settings.executor.taint_key} on {', '.join(waiting)}",
            )
            run.clock.sleep(run.settings.executor.poll_seconds)


def _user(run: Run, name: str) -> str:
    """A GPU pod bound to the reserved node since it was drained: the one it was kept for has arrived."""
    bound = [
        p
        for p in run.read(partial(gpu_pods_holding, run, name), "reading a reserved node's pods")
        if not is_terminating(p)
    ]
    if not bound:
        return ""
    return PodView(bound[0]).key


def _lift(run: Run, name: str, why: str) -> None:
    identity, key = run.settings.executor.identity, run.settings.executor.taint_key

    def build(node: Obj) -> Obj | None:
        if not ann.is_ours(node, identity) or ann.node_annotations(node).get(ann.AFTER_DRAIN) != "taint":
            return None  # lifted or re-marked by someone else meanwhile: not ours to touch any more
        return ann.release_patch(node, identity, key)

    if patch_fresh(run.client, name, build) is not None:
        log.info(
            run.said("reservation lifted", "reservation would be lifted (dry run)"), extra={"node": name, "why": why}
        )
        run.event(events.reservation_lifted(name, run.plan_id, why))

"""A node given back: its fence lifted (``unfence``), or released for good by the run that fenced it (``release``).

Both the steps (``actions/steps/``) and the ``holds`` steering (``actions/steering/holds.py``) give nodes back, so this
lives beside them rather than in either. The fence is this installation's own ``NoSchedule`` taint
(``annotations.fence_key``), never the cordon bit: an operator's ``kubectl cordon`` of the same node stays theirs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from compactor.actions.cluster import events
from compactor.actions.cluster.patching import patch_fresh
from compactor.actions.cluster.retry import Backoff, until_deadline
from compactor.actions.port import annotations as ann
from compactor.actions.port.client import Obj
from compactor.actions.run.context import Run

log = logging.getLogger("compactor.executor")


def unfence(run: Run, name: str, mine: Callable[[Obj], bool] | None = None, *, node: Obj | None = None) -> bool:
    """Our fence and marks off ``name`` (``mine``: only if, as read fresh, it says so); True when patched."""
    identity, key = run.settings.executor.identity, run.settings.executor.taint_key

    def build(current: Obj) -> Obj | None:
        if mine is not None and not mine(current):
            return None
        return ann.release_patch(current, identity, key)

    released = until_deadline(
        lambda: patch_fresh(run.client, name, build, node=node),
        Backoff.of(run.settings.executor),
        run.clock,
        seconds=run.settings.executor.release_deadline_seconds,
        what=f"release of node {name}",
    )
    return released is not None


def release(run: Run, name: str, why: str) -> None:
    """Give back a node this run fenced: fence and marks off, forgotten by the state, an Event."""
    if name not in run.state.cordoned:
        return
    if unfence(run, name):
        run.event(events.uncordoned(name, run.plan_id, why))
    with run.write_ahead() as state:
        state.cordoned.remove(name)
        state.reserved.pop(name, None)

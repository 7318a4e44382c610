"""Cordon: fence every node the plan frees (and each node drained for a pending pod) before the first eviction.

Marks go in the same merge patch as the cordon (``annotations.cordon_patch``), and the node is
recorded in the state before the patch, so recovery finds it either way. A node someone else
cordoned is never ours: not recorded, never uncordoned by us.
"""

from __future__ import annotations

from collections.abc import Callable

from compactor.actions import annotations as ann
from compactor.actions import events
from compactor.actions.client import Obj
from compactor.actions.patching import patch_fresh
from compactor.actions.run import Abort, Run


def fence_all(run: Run) -> None:
    for name in [*run.plan.freed_nodes, *run.fences]:
        node = run.client.get_node(name)
        if node is None:
            raise Abort(f"node {name} disappeared while cordoning")
        cordoned = run.state.cordoned
        if name in cordoned:  # resumed: the state says we cordoned it (or were about to)
            if ann.is_unschedulable(node) and ann.is_ours(node):
                continue
            if ann.is_unschedulable(node):  # only the write-ahead was ours; someone else cordoned it since
                cordoned.remove(name)
                run.save()
                continue
            # the write-ahead landed but the patch did not (crash in between): cordon it now
        elif ann.is_unschedulable(node):
            continue  # cordoned by someone else before us: never ours to uncordon
        else:
            cordoned.append(name)
            run.save()  # write-ahead: recovery may find the node either way
        if patch_fresh(run.client, name, _cordon_unless_taken(run), node=node) is None:
            cordoned.remove(name)  # someone else cordoned it meanwhile: theirs, never ours to uncordon
            run.save()
            continue
        run.event(events.cordoned(name, run.plan_id))


def _cordon_unless_taken(run: Run) -> Callable[[Obj], Obj | None]:
    cordon = ann.cordon_patch(run.plan_id, run.stamp())
    return lambda node: None if ann.is_unschedulable(node) and not ann.is_ours(node) else cordon


def uncordon(run: Run, name: str, mine: Callable[[Obj], bool] = ann.is_ours, *, node: Obj | None = None) -> bool:
    """Uncordon and unmark ``name`` if, as read fresh, it still carries our marks (``mine``); True when patched."""
    key = run.settings.taint_key
    return patch_fresh(run.client, name, lambda n: ann.uncordon_patch(n, key) if mine(n) else None, node=node) is not None


def release(run: Run, name: str, why: str) -> None:
    """Give back a node this run fenced: uncordoned and unmarked (if still ours), forgotten by the state, an Event."""
    if name not in run.state.cordoned:
        return
    if uncordon(run, name):
        run.event(events.uncordoned(name, run.plan_id, why))
    run.state.cordoned.remove(name)
    run.state.reserved.pop(name, None)
    run.save()

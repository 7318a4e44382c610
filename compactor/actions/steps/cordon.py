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
    names = [*run.plan.freed_nodes, *run.fences]
    reads: dict[str, Obj] = {}
    for name in names:
        node, _ = run.node_and_pods(name)
        if node is None:
            raise Abort(f"node {name} disappeared while cordoning")
        reads[name] = node
    if _record_fences(run, reads):
        run.save()  # write-ahead, once for every node about to be cordoned: recovery may find each either way
    for name in names:
        node = reads[name]
        if name not in run.state.cordoned or (ann.is_unschedulable(node) and ann.is_ours(node)):
            continue  # someone else's cordon (never ours to uncordon), or ours already (a resumed run)
        if patch_fresh(run.client, name, _cordon_unless_taken(run), node=node) is None:
            run.state.cordoned.remove(name)  # someone else cordoned it meanwhile: theirs, never ours to uncordon
            run.save()
            continue
        run.event(events.cordoned(name, run.plan_id))


def _record_fences(run: Run, reads: dict[str, Obj]) -> bool:
    """The nodes this run will cordon, in the state; True when that changed it."""
    mine, changed = run.state.cordoned, False
    for name, node in reads.items():
        if name in mine and ann.is_unschedulable(node) and not ann.is_ours(node):
            mine.remove(name)  # resumed: only our write-ahead was ours; someone else cordoned it since
            changed = True
        elif name not in mine and not ann.is_unschedulable(node):
            mine.append(name)
            changed = True
    return changed


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

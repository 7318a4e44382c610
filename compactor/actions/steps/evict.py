"""Evict: each planned pod through the ``policy/v1`` Eviction API, under its PodDisruptionBudgets, one owner at a time.

Moves run in batches of at most ``max_concurrent_evictions`` when the steering mechanism allows it
(the policy pins per owner; holds steer one pod at a time): never two moves of one owner, nor two
under one PodDisruptionBudget, nor one moving onto another's source, in flight together. For each
move, in order: the pod read fresh (gone or elsewhere: skipped), its PDBs asked until they allow a
disruption (the moves in flight finish first; still 0 after ``replacement_timeout_seconds``: the move is
refused, with what hung on it, and the others go on), the owner's pods listed (their uids tell the
replacement apart), the steering prepared (a target that lost its room to an arrival: another one under the
plan's rules, ``checks/retarget.py``, or the move refused), the state written (the write-ahead), steering
engaged, the eviction sent (201 done, 404 gone, 429/409/5xx retried with backoff, anything else aborts),
and an Event.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from compactor.actions.checks.recheck import Checked, recheck
from compactor.actions.checks.retarget import another_target
from compactor.actions.cluster import events
from compactor.actions.cluster.live_pods import controller_uid, grace_seconds, pdbs_selecting
from compactor.actions.cluster.owners import owner_pods, owner_selector
from compactor.actions.cluster.retry import Backoff
from compactor.actions.cluster.run_state import InFlight, Surge
from compactor.actions.port.client import EvictionOutcome, Obj
from compactor.actions.port.objects import ObjectView, PodView
from compactor.actions.run.context import Abort, AbortReason, NoRoom, Run, StopHere
from compactor.actions.services import surge
from compactor.actions.services.planned_pod import current_pod
from compactor.actions.services.refusals import refuse
from compactor.planner.plan import Move

log = logging.getLogger("compactor.executor")
MULTIPLE_PDBS = "more than one PodDisruptionBudget"  # the Eviction API's 500 for such a pod (eviction.go)
# The step after an eviction (``steps/await_replacement.py``), handed in by the executor: steps do not import each other.
AwaitReplacement = Callable[[Run, Move], None]


def evict_all(run: Run, await_replacement: AwaitReplacement) -> None:
    pending = [m for m in run.plan.moves if m.pod not in run.state.done]  # (refused moves are done too: never evicted)
    width = run.settings.caps.max_concurrent_evictions if run.steerer.parallel else 1
    budget = run.settings.caps.max_run_seconds
    for batch in batches(pending, width):
        if budget is not None and run.clock.monotonic() - run.log.started >= budget:
            log.info("run time budget reached", extra={"maxRunSeconds": budget})
            run.log.capped = f"max_run_seconds ({budget:g})"
            return
        if stop := run.services.may_go_on():  # checked before each eviction, not only when the run started
            log.info("stopping before the next move", extra={"reason": stop})
            run.log.capped = stop
            return
        try:
            _evict_batch(run, batch, await_replacement)
        except StopHere as exc:
            log.info("stopping before the next move", extra={"reason": str(exc)})
            run.log.capped, run.log.cap_detail = exc.limit, exc.detail
            return


def batches(moves: Sequence[Move], width: int) -> list[list[Move]]:
    """Consecutive groups of at most ``width`` moves that may be in flight together: no two of one owner, none onto another's
    source (its room appears only once that pod is gone)."""
    groups: list[list[Move]] = []
    current: list[Move] = []
    for move in moves:
        owners = {m.owner or m.pod for m in current}
        sources, targets = {m.from_node for m in current}, {m.to_node for m in current}
        clash = (move.owner or move.pod) in owners or move.to_node in sources or move.from_node in targets
        if current and (len(current) >= width or clash):
            groups.append(current)
            current = []
        current.append(move)
    if current:
        groups.append(current)
    return groups


def _evict_batch(run: Run, batch: Sequence[Move], await_replacement: AwaitReplacement) -> None:
    waits: list[Move] = []
    busy: set[str] = set()  # PDBs with an eviction of this batch still being replaced: one at a time per PDB
    try:
        for move in batch:
            if move.pod in run.state.done:
                continue  # refused with a move of this batch it depended on
            run.report(f"evicting {move.pod} from {move.from_node}")
            pod, pdbs = _read(run, move)
            if pod is not None and (busy & {_key(p) for p in pdbs} or (waits and _blocking(pdbs))):
                # the PDB is shared with an earlier move of the batch, or allows nothing now: the moves under way
                # finish first (their replacements come up meanwhile), then this one asks again
                _await_all(run, waits, await_replacement)
                waits, busy = [], set()
                pod, pdbs = _read(run, move)
            if pod is not None and (no_budget := _wait_for_budget(run, move, pod, pdbs)):
                refuse(run, move, no_budget)  # and what hung on it; the other moves go on
                run.log.skipped.append(move.pod)
                continue
            if pod is not None and _blocking(pdbs):  # it waited: what is checked next is read after the wait
                pod, pdbs = _read(run, move)
            flight = run.state.inflight.get(move.pod)
            if (
                flight is not None and flight.surge is not None
            ):  # surged before a restart: see it through, never surge twice
                if pod is not None:
                    surge.scale_up(run, move, flight.surge)
                waits.append(move)
                continue
            if pod is None:
                if move.pod in run.state.inflight:  # evicted before a restart: its replacement is still to be confirmed
                    waits.append(move)
                    continue
                run.log.skipped.append(move.pod)
                mark_done(run, move)
                continue
            checked = recheck(run, move, pod, pdbs)
            if checked.refusal:
                refuse(run, move, checked.refusal)
                run.log.skipped.append(move.pod)
                continue
            started = _start_move(run, move, pod, checked)
            if started is None:  # its target lost its room and no other node may take it: refused, the run goes on
                run.log.skipped.append(move.pod)
                continue
            waits.append(started)
            busy |= {_key(p) for p in pdbs}
    except StopHere:
        # the moves already under way are seen through before the run stops here
        _await_all(run, waits, await_replacement)
        raise
    _await_all(run, waits, await_replacement)


def _read(run: Run, move: Move) -> tuple[Obj | None, list[Obj]]:
    """The planned pod as it is now (None: gone or elsewhere) and the PDBs selecting it."""
    pod = current_pod(run, move)
    return pod, (_pdbs(run, pod) if pod is not None else [])


def _start_move(run: Run, move: Move, pod: Obj, checked: Checked) -> Move | None:
    """Steering in place, the eviction sent; the owner's pods as the re-check listed them, if it did (no wait since). The
    move as started (re-targeted when its target lost its room), or None when it was refused instead."""
    owner = controller_uid(pod)
    if not owner:
        raise Abort(
            AbortReason.PLAN_STALE,
            f"{move.pod} has no controller owner to recreate it; not evicting it (the plan predates its owner change)",
        )
    run.clock.checkpoint()  # a stop received since the last wait takes effect before the next eviction, not after it
    namespace = move.pod.split("/", 1)[0]
    selector = checked.selector if checked.selector is not None else owner_selector(run.client, pod)
    listed = checked.siblings if checked.siblings is not None else owner_pods(run.client, namespace, owner, selector)
    siblings = sorted(str(p["metadata"].get("uid")) for p in listed)
    surged = _surge_for(run, move, pod, listed)
    flight = InFlight(
        owner=owner, siblings=siblings, grace=grace_seconds(pod), selector=selector, target=move.to_node, surge=surged
    )
    prepared = _prepared(run, move, pod, flight)
    if prepared is None:
        return None
    move = prepared
    run.steerer.engage(run, move)
    if surged is not None:
        run.log.attempted.append(move.pod)
        surge.scale_up(run, move, surged)
        run.event(events.surged(move.pod, move.from_node, run.plan_id, move.reason))
    else:
        _evict(run, move)
    return move


def _prepared(run: Run, move: Move, pod: Obj, flight: InFlight) -> Move | None:
    """The move recorded in flight and its steering prepared (the write-ahead: after a crash, recovery still waits for
    its replacement and finds its steering). A target that lost its room to an arrival is replaced by another under the
    plan's rules (``checks/retarget.py``); with none, the move and what depended on it are refused, and the run goes on."""
    try:
        with run.write_ahead() as state:
            state.inflight[move.pod] = flight
            run.steerer.prepare(run, move, pod)
        return move
    except NoRoom as lost:
        run.state.inflight.pop(move.pod, None)  # the block saved nothing: the state forgets the move as it was
        target, why_not = another_target(run, move, pod)
        if target is None:
            refuse(run, move, f"{lost}; not moved: {why_not}")
            return None
        moved = run.retargeted(move, target, f"{move.to_node} lost its room to an arrival")
        log.info("move re-targeted", extra={"pod": move.pod, "planned": move.to_node, "target": target})
        run.note(f"{move.pod} moved to {target}, not the planned {move.to_node} (it lost its room to an arrival)")
        with run.write_ahead() as state:  # the plan with the new target is saved with it
            state.inflight[moved.pod] = flight.model_copy(update={"target": target})
            run.steerer.prepare(run, moved, pod)
        return moved


def _surge_for(run: Run, move: Move, pod: Obj, siblings: list[Obj]) -> Surge | None:
    """Make-before-break for a pod that opted in, when it can work now; otherwise the move evicts, and the run says why."""
    if not surge.opted_in(run, pod):
        return None
    planned, why_not = surge.plan_surge(run, move, pod, siblings)
    if planned is None:
        log.warning("make-before-break not possible: evicting instead", extra={"pod": move.pod, "reason": why_not})
        run.note(f"{move.pod} evicted, not moved make-before-break: {why_not}")
    return planned


def _await_all(run: Run, waits: Sequence[Move], await_replacement: AwaitReplacement) -> None:
    for move in waits:
        await_replacement(run, move)
        flight = run.state.inflight.get(move.pod)
        if flight is not None and flight.surge is not None:
            surge.retire(run, move, flight.surge)
        mark_done(run, move)


def mark_done(run: Run, move: Move) -> None:
    with run.write_ahead() as state:
        state.done.append(move.pod)
        state.inflight.pop(move.pod, None)
    run.report(f"moved {move.pod}")


def _pdbs(run: Run, pod: Obj) -> list[Obj]:
    return pdbs_selecting(run.client.list_pdbs(namespace=PodView(pod).namespace), pod)


def _key(pdb: Obj) -> str:
    return f"{pdb['metadata'].get('namespace', 'default')}/{pdb['metadata']['name']}"


def _blocking(pdbs: list[Obj]) -> list[str]:
    """The PDBs among ``pdbs`` that allow no disruption now."""
    return [_key(p) for p in pdbs if int(ObjectView(p).status.get("disruptionsAllowed") or 0) <= 0]


def _wait_for_budget(run: Run, move: Move, pod: Obj, pdbs: list[Obj]) -> str:
    """Before evicting, the pod's PDBs should allow it: an unexpected 0 waits (re-reading them) for up to
    ``replacement_timeout_seconds`` (a replacement coming up is the usual cause). "" once they allow it; else why the
    move is refused: a budget at 0 is the workload's owner saying "not now", never a failure of the run."""
    deadline = run.clock.monotonic() + run.settings.executor.replacement_timeout_seconds
    while blocking := _blocking(pdbs):
        if run.clock.monotonic() >= deadline:
            limit = run.settings.executor.replacement_timeout_seconds
            log.warning("a PDB allowed no disruption: move refused", extra={"pod": move.pod, "pdb": blocking[0]})
            return f"PodDisruptionBudget {blocking[0]} allowed no disruption for {limit:g}s"
        run.report(f"evicting {move.pod}", waiting=f"PDB {blocking[0]} allows no disruption")
        run.clock.sleep(run.settings.executor.poll_seconds)
        pdbs = _pdbs(run, pod)
    return ""


def _evict(run: Run, move: Move) -> None:
    namespace, name = move.pod.split("/", 1)
    delays = Backoff.of(run.settings.executor).delays()
    attempts = 0
    while True:
        result = run.client.evict(namespace, name, uid=move.uid, dry_run=False)
        if result.outcome in (EvictionOutcome.EVICTED, EvictionOutcome.GONE):
            run.state.evictions += result.outcome == EvictionOutcome.EVICTED
            run.log.attempted.append(move.pod)
            run.event(events.evicted(move.pod, move.from_node, run.plan_id, move.reason))
            log.info(
                run.said("evicted", "would evict (dry run)"),
                extra={"pod": move.pod, "node": move.from_node, "plan": run.plan_id},
            )
            return
        if result.outcome == EvictionOutcome.FORBIDDEN or MULTIPLE_PDBS in result.message:  # no retry changes these
            run.log.attempted.append(
                move.pod
            )  # refused for good: a failure the breaker counts (an RBAC edit, a webhook)
            raise Abort(
                AbortReason.EVICTION_REFUSED, f"eviction of {move.pod} refused ({result.status}): {result.message}"
            )
        attempts += 1
        delay = next(delays, None)
        if delay is None:
            raise Abort(
                AbortReason.EVICTION_REFUSED,
                f"eviction of {move.pod} failed {attempts} times, last {result.status} {result.outcome.value}: {result.message}",
            )
        run.report(f"evicting {move.pod}", waiting=f"{result.outcome.value} ({result.status}), retry in {delay:g}s")
        run.steerer.step_aside(run)  # rival nodes are not held through the wait (a PDB's 429 can last minutes)
        run.clock.sleep(delay)
        pod = current_pod(run, move)
        if pod is None:
            return  # gone meanwhile
        run.steerer.step_in(run, move, pod)

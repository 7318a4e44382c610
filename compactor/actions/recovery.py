"""After a restart: account for every node the executor marked, then resume or roll back.

Rules: a node carrying our marks is either part of the active plan (recorded in the
state ConfigMap), deliberately kept (``after-drain`` keepCordoned, or a reservation
taint whose TTL has not passed), or an orphan to uncordon. The active plan resumes
when it still validates against the cluster, otherwise it is rolled back.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from compactor.actions import annotations as ann
from compactor.actions import events
from compactor.actions import migmanager as mig
from compactor.actions.client import ClusterClient
from compactor.actions.clock import Clock
from compactor.actions.events import Event
from compactor.actions.executor import Executor, RunReport
from compactor.actions.patching import patch_fresh
from compactor.actions.state import Phase, RunState, StateUnreadable
from compactor.actions.steering.policy import write_entries
from compactor.errors import ClusterError
from compactor.planner.plan import CompactionPlan
from compactor.settings import ExecutorSettings, PlannerSettings

log = logging.getLogger("compactor.recovery")


@dataclass
class RecoveryReport:
    resumed: RunReport | None = None
    released: list[str] = field(default_factory=list)  # orphan cordons undone
    expired: list[str] = field(default_factory=list)  # reservation taints past their TTL removed
    kept: list[str] = field(default_factory=list)  # nodes deliberately left cordoned/reserved
    discarded: str = ""  # why an unreadable state was dropped (its nodes are then released by their marks)
    unpinned: list[str] = field(default_factory=list)  # steering entries (owner uids) no run accounted for, removed

    @property
    def changed(self) -> bool:
        return bool(self.resumed or self.released or self.expired or self.discarded or self.unpinned)


def _parse_time(value: str) -> datetime | None:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def recover(
    client: ClusterClient,
    settings: ExecutorSettings,
    clock: Clock,
    *,
    resume: bool = True,
    rules: PlannerSettings | None = None,
) -> RecoveryReport:
    """``rules``: the movability rules a resumed run checks each eviction against (the planner's settings)."""
    report = RecoveryReport()
    data = client.read_state(ann.STATE_CONFIGMAP)
    if data and data.get("plan"):
        try:
            active, plan = RunState.from_data(data)
        except StateUnreadable as exc:  # from another version, or damaged: never wedge; the node marks say what to undo
            log.warning("discarding an unreadable executor state", extra={"reason": str(exc)})
            client.write_state(ann.STATE_CONFIGMAP, None)
            report.discarded = str(exc)
        else:
            report.resumed = _resume(Executor(client, settings, clock, rules=rules), plan, active, resume=resume)
    elif data is not None:
        client.write_state(ann.STATE_CONFIGMAP, None)  # no plan in it: nothing to resume
    _release_orphans(client, settings, clock, report)
    _remove_orphan_pins(client, settings, report)
    return report


def _resume(executor: Executor, plan: CompactionPlan, state: RunState, *, resume: bool) -> RunReport:
    log.info("found an interrupted plan", extra={"plan": plan.metadata.id, "phase": state.phase.value})
    if not resume:
        return executor.abandon(plan, state, reason="resume disabled")
    if state.phase == Phase.ROLLING_BACK:  # the run had already decided to abort: finish that, never resume
        return executor.abandon(
            plan, state, reason=f"interrupted while rolling back: {state.reason or 'unknown reason'}"
        )
    return executor.execute(plan, resume=state)


def _remove_orphan_pins(client: ClusterClient, settings: ExecutorSettings, report: RecoveryReport) -> None:
    """Steering entries no run accounts for (a crash between writing one and removing it) go: by now no run is active."""
    try:
        parameters = client.get_config_map(settings.steering_name)
    except (
        ClusterError
    ) as exc:  # no policy installed needs no parameters; a failed read is retried by the next recovery
        log.info("steering parameters not read", extra={"error": str(exc)})
        return
    entries = sorted(((parameters or {}).get("data") or {}).keys())
    if not entries:
        return
    try:
        write_entries(client, settings.steering_name, dict.fromkeys(entries), current=parameters)
    except ClusterError as exc:
        log.error("could not remove steering entries", extra={"entries": entries, "error": str(exc)})
        return
    report.unpinned = entries


def _release_orphans(client: ClusterClient, settings: ExecutorSettings, clock: Clock, report: RecoveryReport) -> None:
    now = clock.now()

    identity = settings.identity

    def release(node: dict[str, Any]) -> dict[str, Any] | None:
        return ann.release_patch(node, identity, settings.taint_key) if ann.is_ours(node, identity) else None

    for node in client.list_nodes():
        if not ann.is_ours(node, identity):
            continue  # another installation's marks and fences are its own to release
        name = node["metadata"]["name"]
        marks = ann.node_annotations(node)
        mode = marks.get(ann.AFTER_DRAIN)
        if mode == "keepCordoned":
            report.kept.append(name)
            continue
        if ann.MIG_EXPECTED in marks and _recut_unfinished(client, node, marks, identity):
            # mig-manager may still be at it: opening the node now would let pods land mid re-cut
            report.kept.append(name)
            continue
        if mode == "taint":
            until = _parse_time(marks.get(ann.RESERVED_UNTIL, ""))
            if until is not None and until > now:
                report.kept.append(name)
                continue
            report.expired.append(name)
            expired = True
        else:
            report.released.append(name)
            expired = False
        try:
            if patch_fresh(client, name, release, node=node) is None:
                continue  # released meanwhile (or gone)
            plan = marks.get(ann.PLAN_ID, "?")
            if report.discarded:  # said on every node it touches: the run that marked them cannot be resumed
                _event(client, events.state_discarded(name, plan, report.discarded))
            else:
                _event(client, events.reservation_expired(name, plan) if expired else events.released(name, plan))
        except ClusterError as exc:  # keep releasing the others; the marks stay, so the next recovery retries this one
            log.error("could not release node", extra={"node": name, "error": str(exc)})


def _recut_unfinished(client: ClusterClient, node: dict[str, Any], marks: dict[str, str], identity: str) -> bool:
    """A node relabelled for a MIG re-cut whose run is gone: unless mig-manager reports ``success`` with the expected slices
    in allocatable, it stays fenced and is marked for an operator, as after a failed re-cut (whatever the run state said)."""
    try:
        expected = {str(k): int(v) for k, v in json.loads(marks.get(ann.MIG_EXPECTED) or "{}").items()}
    except (ValueError, TypeError, AttributeError):
        expected = {}
    to_config = mig.labels(node).get(mig.CONFIG_LABEL, "")
    if expected and mig.progress(node, to_config, expected) == "done":
        return False
    why = (
        "a MIG re-cut was under way when the run that asked for it ended without finishing it; left fenced for an operator "
        f"({mig.restore_hint(node['metadata']['name'], marks.get(ann.MIG_PREVIOUS, ''))})"
    )
    try:
        patch_fresh(
            client,
            node["metadata"]["name"],
            lambda n: mig.failed_patch(why) if ann.is_ours(n, identity) else None,
            node=node,
        )
    except ClusterError as exc:  # the node stays fenced either way; the mark is for people
        log.error("could not mark an unfinished re-cut", extra={"node": node["metadata"]["name"], "error": str(exc)})
    return True


def _event(client: ClusterClient, event: Event) -> None:
    client.create_event(event.involved, reason=event.reason, message=event.message, type_=event.type)

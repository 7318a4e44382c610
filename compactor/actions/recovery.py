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

from pydantic import ValidationError

from compactor.actions import annotations as ann
from compactor.actions.client import ClusterClient, ObjectRef
from compactor.actions.clock import Clock
from compactor.actions.executor import Executor, RunReport, decode_plan
from compactor.actions.patching import patch_fresh
from compactor.errors import ClusterError
from compactor.planner.plan import CompactionPlan
from compactor.settings import ExecutorSettings

log = logging.getLogger("compactor.recovery")


@dataclass
class RecoveryReport:
    resumed: RunReport | None = None
    released: list[str] = field(default_factory=list)  # orphan cordons undone
    expired: list[str] = field(default_factory=list)  # reservation taints past their TTL removed
    kept: list[str] = field(default_factory=list)  # nodes deliberately left cordoned/reserved
    discarded: str = ""  # why an unreadable state was dropped (its nodes are then released by their marks)

    @property
    def changed(self) -> bool:
        return bool(self.resumed or self.released or self.expired or self.discarded)


def _parse_time(value: str) -> datetime | None:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def recover(client: ClusterClient, settings: ExecutorSettings, clock: Clock, *, resume: bool = True) -> RecoveryReport:
    report = RecoveryReport()
    state = client.read_state(ann.STATE_CONFIGMAP)
    active_id = ""
    plan, unreadable = _readable(state)
    if unreadable:  # from another version, or damaged: never wedge; the node marks say what to undo
        log.warning("discarding an unreadable executor state", extra={"reason": unreadable})
        client.write_state(ann.STATE_CONFIGMAP, None)
        report.discarded = unreadable
    elif state and plan is not None:
        active_id = plan.metadata.id
        log.info("found an interrupted plan", extra={"plan": active_id, "phase": state.get("phase")})
        executor = Executor(client, settings, clock)
        if not resume:
            report.resumed = executor.abandon(plan, state, reason="resume disabled")
        elif state.get("phase") == "rollingBack":  # the run had already decided to abort: finish that, never resume
            why = state.get("reason") or "unknown reason"
            report.resumed = executor.abandon(plan, state, reason=f"interrupted while rolling back: {why}")
        else:
            report.resumed = executor.execute(plan, resume=state)
    elif state is not None:
        client.write_state(ann.STATE_CONFIGMAP, None)  # no plan in it: nothing to resume
    _release_orphans(client, settings, clock, report, active_plan="")
    return report


_STATE_LISTS = ("cordoned", "done", "held")


def _readable(state: dict[str, str] | None) -> tuple[CompactionPlan | None, str]:
    """(the plan of a state this version can resume, "") or (None, why it cannot); (None, "") when there is no plan."""
    if not state or not state.get("plan"):
        return None, ""
    try:
        plan = decode_plan(state["plan"])
        lists = [json.loads(state.get(key) or "[]") for key in _STATE_LISTS]
        maps = [json.loads(state.get(key) or "{}") for key in ("inflight", "freeBefore")]
        int(state.get("evictions") or 0)
    except (ValueError, ValidationError) as exc:
        return None, f"state ConfigMap {ann.STATE_CONFIGMAP} is unreadable ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})"
    if not all(isinstance(v, list) for v in lists) or not all(isinstance(v, dict) for v in maps):
        return None, f"state ConfigMap {ann.STATE_CONFIGMAP} has fields of the wrong type"
    return plan, ""


def _release_orphans(client: ClusterClient, settings: ExecutorSettings, clock: Clock, report: RecoveryReport, active_plan: str) -> None:
    now = clock.now()

    def release(node: dict[str, Any]) -> dict[str, Any] | None:
        return ann.uncordon_patch(node, settings.taint_key) if ann.is_ours(node) else None

    for node in client.list_nodes():
        if not ann.is_ours(node):
            continue
        name = node["metadata"]["name"]
        marks = ann.node_annotations(node)
        if active_plan and marks.get(ann.PLAN_ID) == active_plan:
            continue
        mode = marks.get(ann.AFTER_DRAIN)
        if mode == "keepCordoned":
            report.kept.append(name)
            continue
        if mode == "taint":
            until = _parse_time(marks.get(ann.RESERVED_UNTIL, ""))
            if until is not None and until > now:
                report.kept.append(name)
                continue
            report.expired.append(name)
            reason = "CompactorReservationExpired"
        else:
            report.released.append(name)
            reason = "CompactorUncordon"
        try:
            if patch_fresh(client, name, release, node=node) is None:
                continue  # released meanwhile (or gone)
            message = f"released by gpu-compactor (plan {marks.get(ann.PLAN_ID, '?')} no longer active)"
            if report.discarded:  # said on every node it touches: the run that marked them cannot be resumed
                client.create_event(ObjectRef("Node", name), reason="CompactorStateDiscarded", type_="Warning",
                                    message=f"{message}; {report.discarded}; rolled back by its node marks")
            else:
                client.create_event(ObjectRef("Node", name), reason=reason, message=message)
        except ClusterError as exc:  # keep releasing the others; the marks stay, so the next recovery retries this one
            log.error("could not release node", extra={"node": name, "error": str(exc)})

"""After a restart: account for every node the executor marked, then resume or roll back.

Rules: a node carrying our marks is either part of the active plan (recorded in the
state ConfigMap), deliberately kept (``after-drain`` keepCordoned, or a reservation
taint whose TTL has not passed), or an orphan whose fence goes. The active plan resumes
when it still validates against the cluster, otherwise it is rolled back.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from compactor.actions.cluster import events
from compactor.actions.cluster import migmanager as mig
from compactor.actions.cluster.events import Event
from compactor.actions.cluster.patching import patch_fresh
from compactor.actions.cluster.run_state import Resume, RunState, StateUnreadable
from compactor.actions.cluster.trust import untrusted
from compactor.actions.executor import Executor
from compactor.actions.port import annotations as ann
from compactor.actions.port.client import ClusterClient, EvictionOutcome
from compactor.actions.port.objects import PodView, api_time
from compactor.actions.services import surge
from compactor.actions.services.report import RunReport
from compactor.actions.steering.pin import STEERED_TO, steered_to
from compactor.actions.steering.policy import write_entries
from compactor.clock import Clock
from compactor.errors import ClusterError
from compactor.model.dra import DriverMapping
from compactor.model.load import DRA_DRIVERS
from compactor.planner.plan import CompactionPlan
from compactor.settings.bundles import PlannerSettings, RunSettings
from compactor.statuses import FINISHED

log = logging.getLogger("compactor.recovery")


@dataclass
class RecoveryReport:
    resumed: RunReport | None = None
    released: list[str] = field(default_factory=list)  # orphan fences lifted
    expired: list[str] = field(default_factory=list)  # reservation taints past their TTL removed
    kept: list[str] = field(default_factory=list)  # nodes deliberately left fenced/reserved
    discarded: str = ""  # why an unreadable state was dropped (its nodes are then released by their marks)
    unpinned: list[str] = field(default_factory=list)  # steering entries (owner uids) no run accounted for, removed
    unsurged: list[str] = field(
        default_factory=list
    )  # Deployments a lost run left surged, scaled back (namespace/name)
    # pinned pods left Pending by a run no state accounts for, evicted so that their owners recreate them unpinned
    released_pods: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(
            self.resumed
            or self.released
            or self.expired
            or self.discarded
            or self.unpinned
            or self.unsurged
            or self.released_pods
        )

    def said(self) -> str:
        """What recovery found and did, in one line for people ("" when it found nothing to do)."""
        parts = []
        if self.resumed is not None:
            how = "finished" if self.resumed.status in FINISHED else "rolled back"
            parts.append(f"{how} interrupted plan {self.resumed.plan_id} ({self.resumed.status})")
        if self.discarded:
            parts.append(f"dropped an unreadable executor state ({self.discarded})")
        if self.released or self.expired:
            parts.append(f"released node(s) {', '.join([*self.released, *self.expired])}")
        if self.unpinned:
            parts.append(f"removed {len(self.unpinned)} steering entr{'y' if len(self.unpinned) == 1 else 'ies'}")
        if self.unsurged:
            parts.append(f"scaled back surged Deployment(s) {', '.join(self.unsurged)}")
        if self.released_pods:
            parts.append(f"evicted pinned pod(s) left Pending: {', '.join(self.released_pods)}")
        return "; ".join(parts)


def recover(
    client: ClusterClient,
    settings: RunSettings,
    clock: Clock,
    *,
    resume: bool = True,
    rules: PlannerSettings | None = None,
    dra_drivers: Sequence[DriverMapping] = DRA_DRIVERS,
    may_go_on: Callable[[], str] | None = None,
) -> RecoveryReport:
    """``rules``: the movability rules a resumed run checks each eviction against (the planner's settings);
    ``dra_drivers``: what DRA devices are GPUs (``dra.drivers``); ``may_go_on``: asked before each eviction of a resumed
    run, as a fresh run asks it (the disruption window: a resumed run stops where a fresh one would)."""
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
            refused = untrusted(active, plan, rules or PlannerSettings())
            if refused:  # planted, or from a run this scope never allowed: never act on it (trust.py)
                log.error("refusing an executor state that names what its plan does not", extra={"reason": refused})
                client.write_state(ann.STATE_CONFIGMAP, None)
                report.discarded = f"refused: {refused}"
                _event(client, events.state_refused(settings.executor.state_namespace, ann.STATE_CONFIGMAP, refused))
            else:
                report.resumed = _resume(
                    Executor(client, settings, clock, rules=rules, dra_drivers=dra_drivers, may_go_on=may_go_on),
                    plan,
                    active,
                    resume=resume,
                )
    elif data is not None:
        client.write_state(ann.STATE_CONFIGMAP, None)  # no plan in it: nothing to resume
    _release_orphans(client, settings, clock, report)
    _remove_orphan_pins(client, settings, report)
    _release_stuck_pins(client, settings, clock, report)
    _undo_orphan_surges(client, settings, rules or PlannerSettings(), report)
    return report


def _release_stuck_pins(client: ClusterClient, settings: RunSettings, clock: Clock, report: RecoveryReport) -> None:
    """Pods the steering policy pinned (its term in their required node affinity, and its mark naming the same node)
    that are still Pending ``steer_timeout_seconds`` after they were created, with no run to see them through: the state
    that would have was lost, or refused (an operator deleted it; a namespace excluded since made it untrusted). A
    pinned pod that cannot bind stays Pending for good (affinity is immutable); evicted while Pending (no
    PodDisruptionBudget is asked of a Pending pod) with its resourceVersion as precondition, so one that bound since
    stays, its owner recreates it unpinned. Run only when no state is left: an active run sees to its own."""
    if client.read_state(ann.STATE_CONFIGMAP) is not None:
        return
    try:
        waiting = client.list_pending_pods()
    except ClusterError as exc:  # retried by the next recovery
        log.info("pending pods not read", extra={"error": str(exc)})
        return
    limit = timedelta(seconds=settings.steering.steer_timeout_seconds)
    for pod in waiting:
        view = PodView(pod)
        node = steered_to(pod)
        created = api_time(str(view.metadata.get("creationTimestamp") or ""))
        if not node or view.annotations.get(STEERED_TO) != node or view.node_name or view.terminating:
            continue
        if created is None or clock.now() - created < limit:
            continue  # a replacement still binding, maybe another installation's: not stuck yet
        try:
            result = client.evict(view.namespace, view.name, uid=view.uid, resource_version=view.resource_version or "")
            if result.outcome in (EvictionOutcome.EVICTED, EvictionOutcome.GONE):
                log.warning("evicted a pinned pod left Pending by a lost run", extra={"pod": view.key, "node": node})
                report.released_pods.append(view.key)
                _event(client, events.unpinned_pending(view.key, node, "(none: its run's state was lost)"))
        except ClusterError as exc:  # the next recovery tries again
            log.error("could not release a pinned pod left Pending", extra={"pod": view.key, "error": str(exc)})


def _resume(executor: Executor, plan: CompactionPlan, state: RunState, *, resume: bool) -> RunReport:
    log.info("found an interrupted plan", extra={"plan": plan.metadata.id, "phase": state.phase.value})
    if not resume:
        return executor.abandon(plan, state, reason="resume disabled")
    if state.resume is Resume.ROLL_BACK:  # the run had already decided to abort: finish that, never resume
        return executor.abandon(
            plan, state, reason=f"interrupted while rolling back: {state.reason or 'unknown reason'}"
        )
    return executor.execute(plan, resume=state)


def _remove_orphan_pins(client: ClusterClient, settings: RunSettings, report: RecoveryReport) -> None:
    """Steering entries no run accounts for (a crash between writing one and removing it) go: by now no run is active."""
    try:
        parameters = client.get_config_map(settings.steering.policy_name)
    except (
        ClusterError
    ) as exc:  # no policy installed needs no parameters; a failed read is retried by the next recovery
        log.info("steering parameters not read", extra={"error": str(exc)})
        return
    entries = sorted(((parameters or {}).get("data") or {}).keys())
    if not entries:
        return
    try:
        write_entries(client, settings.steering.policy_name, dict.fromkeys(entries), current=parameters)
    except ClusterError as exc:
        log.error("could not remove steering entries", extra={"entries": entries, "error": str(exc)})
        return
    report.unpinned = entries


def leftovers(client: ClusterClient, settings: RunSettings) -> bool:
    """Is there anything for recovery to do: a state record, a node carrying this installation's marks, a steering entry,
    a pod carrying its surge mark? Reads only, so a run that may not act takes the Lease only when it must."""
    if client.read_state(ann.STATE_CONFIGMAP) is not None:
        return True
    if any(ann.is_ours(node, settings.executor.identity) for node in client.list_nodes()):
        return True
    try:
        parameters = client.get_config_map(settings.steering.policy_name)
    except ClusterError:  # no policy installed, or not readable: recovery will say so if it must
        parameters = None
    if (parameters or {}).get("data"):
        return True
    return bool(client.list_pods(label_selector=f"{surge.SURGED_BY}={settings.executor.identity}"))


def _undo_orphan_surges(
    client: ClusterClient, settings: RunSettings, scope: PlannerSettings, report: RecoveryReport
) -> None:
    """Make-before-break surges no state accounts for (the state was lost, or dropped as unreadable): found by the mark the
    surge left on the old pod (``surge.SURGED_BY``), each Deployment scaled back from the surged count it recorded (only
    from exactly that) and the pod's marks off. Without this, a lost state left the Deployment one replica over, for
    good."""
    data = client.read_state(ann.STATE_CONFIGMAP)
    active = (data or {}).get("planId", "")
    try:
        marked = client.list_pods(label_selector=f"{surge.SURGED_BY}={settings.executor.identity}")
    except ClusterError as exc:  # the marks stay: the next recovery retries
        log.info("surge marks not read", extra={"error": str(exc)})
        return
    for pod in marked:
        note = surge.surge_note(pod) or {}
        if active and note.get("plan") == active:
            continue  # the active run's own surge: its state says what to do with it
        meta = pod["metadata"]
        namespace, name, uid = meta["namespace"], meta["name"], str(meta.get("uid"))
        deployment, recorded = str(note.get("deployment", "")), note.get("replicas")
        replicas = recorded if isinstance(recorded, int) else 0
        try:
            if why := surge.doubt(client, pod, deployment, scope):  # forged, or not ours to judge: left as found
                log.warning("a surge mark not acted on", extra={"pod": f"{namespace}/{name}", "reason": why})
                continue
            surged = bool(deployment) and replicas >= 1
            if surged and client.scale_deployment(namespace, deployment, expect=replicas + 1, to=replicas):
                report.unsurged.append(f"{namespace}/{deployment}")
            cost = note.get("deletionCost")
            surge.unmark(client, namespace, name, uid, cost if isinstance(cost, str) else None)
        except ClusterError as exc:
            log.error(
                "could not undo a surge left by a lost run", extra={"pod": f"{namespace}/{name}", "error": str(exc)}
            )


def _release_orphans(client: ClusterClient, settings: RunSettings, clock: Clock, report: RecoveryReport) -> None:
    now = clock.now()

    identity = settings.executor.identity

    def release(node: dict[str, Any]) -> dict[str, Any] | None:
        return ann.release_patch(node, identity, settings.executor.taint_key) if ann.is_ours(node, identity) else None

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
            until = api_time(marks.get(ann.RESERVED_UNTIL, ""))
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

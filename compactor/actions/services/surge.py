"""Make-before-break: the replacement starts and is Ready on its planned node before the old replica goes.

For workloads that opt in (the pod annotation ``compactor.io/make-before-break: "true"`` or
``steering.make_before_break_selector``), built on stock objects only (docs/executor.md, "Make-before-break"):

1. the Deployment that owns the pod's ReplicaSet is scaled up by one (a JSON patch that first tests
   ``spec.replicas``, so a concurrent change is never overwritten); the new pod is steered to the planned
   node like any replacement;
2. once it is bound there and Ready, the old pod gets ``controller.kubernetes.io/pod-deletion-cost`` at the
   lowest value, and the Deployment is scaled back (tested again): the ReplicaSet controller removes the pod
   that ranks first for deletion, which, every replica being Ready, is exactly that one;
3. the run waits until the old pod is gone; the Deployment's ``spec.replicas`` is what it was.

Serving capacity never drops below the spec; the move spends no PodDisruptionBudget. Only when it can work:
a ReplicaSet owned by a Deployment not in a rollout (one ReplicaSet holds every replica), every replica Ready,
and no HorizontalPodAutoscaler steering its replicas (it would fight the surge). Otherwise the move falls back
to an eviction and the run says why. StatefulSets always use evictions: a scale-up adds a new ordinal and a
scale-down removes the highest, never the pod being moved. One surge per workload at a time (the batches never
hold two moves of one owner).

A service, not a step: ``evict`` surges and retires, ``rollback`` undoes, and recovery finds the marks a lost run left.
"""

from __future__ import annotations

import json
import logging

from compactor.actions.cluster.live_pods import is_bound, is_ready, is_terminating
from compactor.actions.cluster.owners import DELETION_COST, FIRST_TO_GO, controller_ref, owner_pods
from compactor.actions.cluster.run_state import Surge
from compactor.actions.cluster.trust import in_scope
from compactor.actions.port.client import ClusterClient, Obj
from compactor.actions.port.objects import ObjectView, PodView
from compactor.actions.run.context import Abort, AbortReason, Run
from compactor.errors import ClusterError
from compactor.planner.plan import Move
from compactor.settings.bundles import PlannerSettings

log = logging.getLogger("compactor.executor")
OPT_IN = "compactor.io/make-before-break"
# The surge's evidence on the old pod, written before the scale-up: the label finds it (a cluster-wide list by label,
# when the state that recorded the surge is lost), the annotation says what to undo and is checked before any
# scale-down (a state record alone never scales a Deployment down: anyone may create a ConfigMap by that name).
SURGED_BY = "compactor.io/surged-by"  # label: the installation
SURGE_NOTE = "compactor.io/surge"  # annotation: {"plan", "deployment", "replicas", "deletionCost"}


def opted_in(run: Run, pod: Obj) -> bool:
    view = PodView(pod)
    if view.annotations.get(OPT_IN) == "true":
        return True
    wanted = run.settings.steering.make_before_break_selector
    labels = view.labels
    return bool(wanted) and all(labels.get(k) == v for k, v in wanted.items())


def plan_surge(run: Run, move: Move, pod: Obj, siblings: list[Obj]) -> tuple[Surge | None, str]:
    """The surge for ``move`` when make-before-break can work for it now, else None and why not (the move then evicts)."""
    namespace = move.pod.split("/", 1)[0]
    ref = controller_ref(pod) or {}
    if ref.get("kind") != "ReplicaSet":
        return (
            None,
            f"its owner is a {ref.get('kind', 'bare pod')}, not a ReplicaSet (a StatefulSet's pods keep their identity)",
        )
    replica_set = run.client.get_owner(namespace, "ReplicaSet", str(ref.get("name", "")))
    deployment_ref = controller_ref(replica_set or {}) or {}
    if replica_set is None or deployment_ref.get("kind") != "Deployment":
        return None, f"ReplicaSet {ref.get('name')} has no Deployment to scale"
    name = str(deployment_ref.get("name", ""))
    deployment = run.client.get_owner(namespace, "Deployment", name)
    if deployment is None:
        return None, f"Deployment {name} not found"
    replicas = ObjectView(deployment).replicas
    if ObjectView(replica_set).replicas != replicas:
        return (
            None,
            f"Deployment {name} is rolling out (its ReplicaSet {ref.get('name')} does not hold all {replicas} replicas)",
        )
    if any(_scales(hpa, name) for hpa in run.client.list_autoscalers(namespace)):
        return None, f"a HorizontalPodAutoscaler sets Deployment {name}'s replicas and would undo a surge"
    if len(siblings) != replicas or not all(is_bound(p) and is_ready(p) and not is_terminating(p) for p in siblings):
        return None, f"not every replica of Deployment {name} is Ready (the scale-down could remove another one)"
    if any(_deletion_cost(p) == FIRST_TO_GO for p in siblings):
        return None, f"a replica of Deployment {name} already ranks first for deletion"
    view = PodView(pod)
    return Surge(
        deployment=name, replicas=replicas, pod_uid=view.uid, deletion_cost=view.annotations.get(DELETION_COST)
    ), ""


def _scales(hpa: Obj, deployment: str) -> bool:
    target = ObjectView(hpa).spec.get("scaleTargetRef") or {}
    return bool(target.get("kind") == "Deployment" and target.get("name") == deployment)


def _deletion_cost(pod: Obj) -> str:
    return PodView(pod).annotations.get(DELETION_COST, "")


def scale_up(run: Run, move: Move, surge: Surge) -> None:
    """The old pod marked with the surge (its evidence), then one replica more (idempotent both: already one more is as
    good, after a restart)."""
    namespace, name = move.pod.split("/", 1)
    _mark(run, namespace, name, surge)
    if run.client.scale_deployment(namespace, surge.deployment, expect=surge.replicas, to=surge.replicas + 1):
        log.info(
            run.said("surged", "would surge (dry run)"),
            extra={"pod": move.pod, "deployment": surge.deployment, "replicas": surge.replicas + 1},
        )
        return
    now = _replicas(run, namespace, surge.deployment)
    if now != surge.replicas + 1:
        raise Abort(
            AbortReason.WORKLOAD_CHANGED,
            f"Deployment {namespace}/{surge.deployment} was scaled to {now} by someone else before the surge of {move.pod}; "
            f"not surged",
        )


def retire(run: Run, move: Move, surge: Surge) -> None:
    """The replacement is Ready: the old pod marked first to go, the Deployment back at its replicas, the old pod gone."""
    namespace, name = move.pod.split("/", 1)
    flight = run.state.inflight[move.pod]
    if not _still_there(run, namespace, name, surge):  # retired before a restart: only the scale-back may be left
        run.client.scale_deployment(namespace, surge.deployment, expect=surge.replicas + 1, to=surge.replicas)
        return
    # One deadline for the rest of the move (every replica Ready, the old pod gone): a surge waits at most one
    # replacement_timeout_seconds (plus the old pod's grace) longer than an eviction (settings.worst_case_run_seconds).
    deadline = run.clock.monotonic() + run.settings.executor.replacement_timeout_seconds + flight.grace
    _await_every_replica_ready(run, move, flight.owner, flight.selector, surge, deadline)
    run.client.patch_pod(namespace, name, {"metadata": {"annotations": {DELETION_COST: FIRST_TO_GO}}})
    if not run.client.scale_deployment(namespace, surge.deployment, expect=surge.replicas + 1, to=surge.replicas):
        now = _replicas(run, namespace, surge.deployment)
        if now != surge.replicas:  # someone scaled it meanwhile: theirs to decide; our pod no longer ranks first
            _unmark(run, namespace, name, surge)
            raise Abort(
                AbortReason.WORKLOAD_CHANGED,
                f"Deployment {namespace}/{surge.deployment} was scaled to {now} by someone else during the surge of {move.pod}",
            )
    while _still_there(run, namespace, name, surge):
        if run.clock.monotonic() >= deadline:
            raise Abort(
                AbortReason.REPLACEMENT_TIMEOUT,
                f"the ReplicaSet did not remove {move.pod} after the scale-down of Deployment {surge.deployment}",
            )
        run.report(f"moved {move.pod}", waiting=f"the ReplicaSet to remove {move.pod} (make-before-break)")
        run.clock.sleep(run.settings.executor.poll_seconds)
    log.info(
        run.said("old replica retired", "old replica would be retired (dry run)"),
        extra={"pod": move.pod, "deployment": surge.deployment},
    )


def _still_there(run: Run, namespace: str, name: str, surge: Surge) -> bool:
    old = run.read(lambda: run.client.get_pod(namespace, name), "reading the surged pod")
    return old is not None and str(old["metadata"].get("uid")) == surge.pod_uid and not is_terminating(old)


def _await_every_replica_ready(run: Run, move: Move, owner: str, selector: str, surge: Surge, deadline: float) -> None:
    """The scale-down removes a not-Ready replica before any other: every replica (the new one included) must be Ready."""
    namespace = move.pod.split("/", 1)[0]
    while True:
        pods = [
            p
            for p in run.read(lambda: owner_pods(run.client, namespace, owner, selector), "listing the owner's pods")
            if not is_terminating(p)
        ]
        if len(pods) == surge.replicas + 1 and all(is_bound(p) and is_ready(p) for p in pods):
            return
        if run.clock.monotonic() >= deadline:
            raise Abort(
                AbortReason.REPLACEMENT_TIMEOUT,
                f"not every replica of Deployment {surge.deployment} Ready during the surge of {move.pod}; "
                f"scaling back would remove another one",
            )
        run.report(f"moved {move.pod}", waiting=f"every replica of {surge.deployment} Ready (make-before-break)")
        run.clock.sleep(run.settings.executor.poll_seconds)


def undo(run: Run, pod_key: str, surge: Surge) -> None:
    """A surge the run gives up: the Deployment back at its replicas (the not-yet-Ready new pod, if any, goes first), the
    old pod's mark off. Best effort where someone else changed the Deployment meanwhile: theirs to decide. Only on
    evidence (``doubt``): never on the word of a state record alone, nor when the old pod is gone (the Deployment then
    stays one replica over, said: more serving capacity, never less)."""
    namespace, name = pod_key.split("/", 1)
    old = run.client.get_pod(namespace, name)
    if why := doubt(run.client, old, surge.deployment, run.services.rules, uid=surge.pod_uid, plan_id=run.plan_id):
        log.warning("surge not undone", extra={"pod": pod_key, "deployment": surge.deployment, "reason": why})
        run.note(f"the surge of {surge.deployment} for {pod_key} was not undone ({why}); scale it by hand if need be")
        return
    try:
        if not run.client.scale_deployment(namespace, surge.deployment, expect=surge.replicas + 1, to=surge.replicas):
            now = _replicas(run, namespace, surge.deployment)
            if now not in (None, surge.replicas):  # (== replicas: never surged, or already back)
                log.warning(
                    "surge not undone: the Deployment was scaled by someone else",
                    extra={"deployment": surge.deployment, "replicas": now},
                )
        _unmark(run, namespace, name, surge)
    except ClusterError as exc:
        log.error("could not undo a surge", extra={"pod": pod_key, "deployment": surge.deployment, "error": str(exc)})
        raise


def doubt(
    client: ClusterClient,
    old: Obj | None,
    deployment: str,
    scope: PlannerSettings,
    *,
    uid: str | None = None,
    plan_id: str | None = None,
) -> str:
    """Why a surge of ``deployment`` may not be undone on the evidence of the old pod ``old`` ("" when it may): the pod
    exists (with the ``uid`` recorded, when one is), carries this surge's mark (of ``plan_id``, when one is recorded),
    is in a namespace the planner may move pods of, and its ReplicaSet is owned by that Deployment. A pod's labels and
    annotations are its owner's to write: alone they scale nothing down."""
    if old is None:
        return "the old pod is gone: no evidence left of what the surge did"
    view = PodView(old)
    if uid is not None and view.uid != uid:
        return "the old pod was replaced since (another uid)"
    note = surge_note(old) or {}
    if note.get("deployment") != deployment or (plan_id is not None and note.get("plan") != plan_id):
        return "the pod carries no mark of this surge"
    if not in_scope(view.namespace, scope):
        return f"namespace {view.namespace} is outside the planner's scope"
    ref = controller_ref(old) or {}
    replica_set = (
        client.get_owner(view.namespace, "ReplicaSet", str(ref.get("name", "")))
        if ref.get("kind") == "ReplicaSet"
        else None
    )
    owner = controller_ref(replica_set or {}) or {}
    if replica_set is None or str(ref.get("uid", "")) != ObjectView(replica_set).uid:
        return "the pod's ReplicaSet is not its controller"
    if owner.get("kind") != "Deployment" or owner.get("name") != deployment:
        return f"Deployment {deployment} does not own the pod's ReplicaSet"
    return ""


def _note(plan_id: str, surge: Surge) -> dict[str, object]:
    return {
        "plan": plan_id,
        "deployment": surge.deployment,
        "replicas": surge.replicas,
        "deletionCost": surge.deletion_cost,
    }


def surge_note(pod: Obj) -> dict[str, object] | None:
    """The surge mark of a pod (``SURGE_NOTE``), or None when it has none or it is not one."""
    text = PodView(pod).annotations.get(SURGE_NOTE)
    try:
        note = json.loads(text) if text else None
    except ValueError:
        return None
    return note if isinstance(note, dict) else None


def _mark(run: Run, namespace: str, name: str, surge: Surge) -> None:
    """The surge's evidence on the old pod, before it scales anything (see ``SURGED_BY``)."""
    pod = run.client.get_pod(namespace, name)
    if pod is None or PodView(pod).uid != surge.pod_uid or surge_note(pod) == _note(run.plan_id, surge):
        return
    note = json.dumps(_note(run.plan_id, surge), separators=(",", ":"))
    patch = {"metadata": {"labels": {SURGED_BY: run.settings.executor.identity}, "annotations": {SURGE_NOTE: note}}}
    run.client.patch_pod(namespace, name, patch)


def _unmark(run: Run, namespace: str, name: str, surge: Surge) -> None:
    """The old pod's own deletion cost back (none when it had none), the surge's marks off."""
    unmark(run.client, namespace, name, surge.pod_uid, surge.deletion_cost)


def unmark(client: ClusterClient, namespace: str, name: str, uid: str, deletion_cost: str | None) -> None:
    """The pod ``uid``'s own deletion cost back and the surge's marks off (when it is still there)."""
    pod = client.get_pod(namespace, name)
    if pod is None or PodView(pod).uid != uid:
        return
    annotations: dict[str, str | None] = {}
    if _deletion_cost(pod) == FIRST_TO_GO:
        annotations[DELETION_COST] = deletion_cost
    if surge_note(pod) is not None:
        annotations[SURGE_NOTE] = None
    labels = {SURGED_BY: None} if SURGED_BY in PodView(pod).labels else {}
    if annotations or labels:
        client.patch_pod(namespace, name, {"metadata": {"annotations": annotations, "labels": labels}})


def _replicas(run: Run, namespace: str, deployment: str) -> int | None:
    found = run.client.get_owner(namespace, "Deployment", deployment)
    return None if found is None else ObjectView(found).replicas

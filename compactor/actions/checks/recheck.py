"""Re-check: just before its eviction, a planned pod must still pass every rule that let the planner move it.

A plan is computed on a snapshot; by the time its eviction comes (minutes later, after a restart, or from a
hand-written ``apply --plan``) the pod may have been annotated ``safe-to-evict=false``, lost its last sibling,
gained a DaemonSet owner, its node may have gone NotReady, or its Job may have spent its backoffLimit. The planner's own rules
(``planner.movability.why_not_evictable``: one implementation) are asked again of the pod as read now, with its
PDBs and its node as read now, and the planned target must still be a node that takes it. A move that fails is
never evicted: ``evict`` refuses it with its reason (``actions/services/refusals.py``), and so every move that depended on it.
"""

from __future__ import annotations

from dataclasses import dataclass

from compactor.actions.checks.job_backoff import job_refusal
from compactor.actions.cluster.live_pods import controller_uid, is_ready, is_terminating
from compactor.actions.cluster.owners import owner_pods, owner_selector
from compactor.actions.port import annotations as ann
from compactor.actions.port.client import Obj
from compactor.actions.port.objects import PodView
from compactor.actions.run.context import Run
from compactor.actions.steering.room import SOURCE
from compactor.model.load import DEFAULT_POOL_LABEL
from compactor.model.parse import parse_node, parse_pdb, parse_pod
from compactor.model.scheduling import untolerated_taint
from compactor.model.types import Pod
from compactor.planner.plan import Move
from compactor.planner.rules.movability import STEERING_REASONS, why_not_evictable


@dataclass
class Checked:
    """The re-check's verdict, and what it read of the owner on the way (the move then lists the owner's pods only once)."""

    refusal: str = ""  # why the pod must not be evicted now; "" when it may
    selector: str | None = None  # the owner's label selector, when read
    siblings: list[Obj] | None = None  # the owner's pods, when listed


def recheck(run: Run, move: Move, pod: Obj, pdbs: list[Obj]) -> Checked:
    """Whether ``pod`` may be evicted now, read fresh."""
    checked = Checked()
    source_raw = run.client.get_node(move.from_node)
    source = parse_node(source_raw, source=SOURCE, pool_label=DEFAULT_POOL_LABEL, warnings=[]) if source_raw else None
    model = parse_pod(pod, source=SOURCE)
    replicas = None if pdbs or run.services.rules.movable.min_replicas <= 1 else _ready_replicas(run, pod, checked)
    reason = why_not_evictable(
        model,
        source,
        [parse_pdb(p, source=SOURCE) for p in pdbs],
        run.services.rules,
        ready_replicas=replicas,
        steering=run.steerer.steerability,
        now=run.clock.now(),
    )
    if reason is not None:
        checked.refusal = (
            f"{reason.value} (steering {run.steerer.mechanism})" if reason in STEERING_REASONS else reason.value
        )
    elif source is None or not source.ready:
        checked.refusal = f"its node {move.from_node} is not Ready: an evicted pod would stay Terminating there"
    else:
        checked.refusal = _target_refusal(run, move, model) or job_refusal(run.client, pod)
    return checked


def _ready_replicas(run: Run, pod: Obj, checked: Checked) -> int:
    namespace = PodView(pod).namespace
    checked.selector = owner_selector(run.client, pod)
    checked.siblings = owner_pods(run.client, namespace, controller_uid(pod), checked.selector)
    return sum(1 for p in checked.siblings if is_ready(p) and not is_terminating(p))


def _target_refusal(run: Run, move: Move, pod: Pod) -> str:
    raw = run.client.get_node(move.to_node)
    if raw is None:
        return f"its planned node {move.to_node} is gone"
    target = parse_node(raw, source=SOURCE, pool_label=DEFAULT_POOL_LABEL, warnings=[])
    if not target.ready:
        return f"its planned node {move.to_node} is not Ready"
    if target.unschedulable:
        return f"its planned node {move.to_node} was cordoned (kubectl cordon) since the plan"
    # A taint someone put on the target since the plan: cluster-autoscaler's ToBeDeletedByClusterAutoscaler, Karpenter's
    # karpenter.sh/disrupted, a GPU health taint, another installation's fence. This installation's own (its fence, its
    # holds, its reservations) are its steering's.
    ours = {ann.fence_key(run.settings.executor.identity), run.settings.executor.taint_key}
    theirs = tuple(t for t in target.taints if t.key not in ours)
    taint = untolerated_taint(pod.tolerations, theirs)
    if taint is not None:
        return f"its planned node {move.to_node} has the taint {taint.key}:{taint.effect} the pod does not tolerate"
    return ""

"""A Job's pod may be moved (annotated ``compactor.io/evict=true``) only while its Job survives the eviction.

The Job controller counts an evicted pod as failed (pkg/controller/job: the pod ends ``Failed``, marked
``DisruptionTarget``), unless a ``podFailurePolicy`` rule ignores pods failed by a disruption. Once ``status.failed``
exceeds ``spec.backoffLimit`` (default 6) the Job fails (``BackoffLimitExceeded``): its other pods are deleted and no pod
is recreated. An eviction that would tip a Job over its limit loses the workload, so it is refused, whatever the
annotation says; the Job is read fresh just before the eviction, as every other re-check.
"""

from __future__ import annotations

from compactor.actions.cluster.owners import controller_ref
from compactor.actions.port.client import ClusterClient, Obj
from compactor.actions.port.objects import ObjectView, PodView
from compactor.errors import ClusterError

DEFAULT_BACKOFF_LIMIT = 6  # batch/v1 JobSpec.backoffLimit


def ignores_disruptions(spec: Obj) -> bool:
    """Whether ``podFailurePolicy`` has a rule that ignores pods failed by a disruption (``DisruptionTarget``)."""
    rules = (spec.get("podFailurePolicy") or {}).get("rules") or []
    return any(
        rule.get("action") == "Ignore"
        and any(c.get("type") == "DisruptionTarget" for c in rule.get("onPodConditions") or [])
        for rule in rules
    )


def job_refusal(client: ClusterClient, pod: Obj) -> str:
    """Why evicting ``pod`` would fail its Job ("" when it would not, or the pod has no Job)."""
    ref = controller_ref(pod)
    if ref is None or ref.get("kind") != "Job":
        return ""
    namespace, name = PodView(pod).namespace, str(ref.get("name", ""))
    try:
        job = client.get_owner(namespace, "Job", name)
    except ClusterError as exc:
        return f"its Job {namespace}/{name} could not be read ({exc}): an eviction might fail it"
    if job is None:
        return ""  # the Job is gone: nothing to fail (its pod is an orphan the garbage collector deletes)
    spec, status = ObjectView(job).spec, ObjectView(job).status
    if ignores_disruptions(spec):
        return ""
    failed, limit = int(status.get("failed") or 0), int(spec.get("backoffLimit", DEFAULT_BACKOFF_LIMIT))
    if failed + 1 <= limit:
        return ""
    return (
        f"evicting it would fail Job {namespace}/{name}: the eviction counts as failure {failed + 1}, past its "
        f"backoffLimit {limit} (a podFailurePolicy rule ignoring DisruptionTarget lets its pods move)"
    )

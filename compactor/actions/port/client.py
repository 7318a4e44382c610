"""The one interface through which the executor touches a cluster.

Objects cross it as plain dicts shaped like the API's JSON (``kubectl get -o json``
items), so the same executor code runs against the real API (``KubeClusterClient``),
a recording dry run (``RecordingClient``) and the test fake (``tests/fakecluster/``).
Reads that need something of every node or pod of a large cluster (not the objects themselves)
use ``scan_nodes``/``scan_pods``: each object is passed through the caller's ``keep`` as its page
arrives, so only a page of objects is held at a time, not the 50,000 pods of the cluster.
Writes are few and explicit: patch a node, create an Eviction, create an Event,
read/write the executor's state ConfigMap, patch the steering parameter ConfigMap (one entry
per move, ``actions/steering/policy.py``), add a toleration to a pending pod, and for
make-before-break moves scale a Deployment by one and annotate the pod it retires.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

Obj = dict[str, Any]
T = TypeVar("T")


class EvictionOutcome(enum.StrEnum):
    EVICTED = "evicted"  # 201: the pod is being deleted gracefully
    GONE = "gone"  # 404: already gone, as good as evicted
    BLOCKED = "blocked"  # 429: a PodDisruptionBudget does not allow it now
    CONFLICT = "conflict"  # 409: e.g. changed under us; retry
    ERROR = "error"  # 500/503/timeout: retry a bounded number of times
    FORBIDDEN = "forbidden"  # 403/400/other: abort the run


@dataclass(frozen=True)
class EvictionResult:
    outcome: EvictionOutcome
    status: int = 0
    message: str = ""


@dataclass(frozen=True)
class ObjectRef:
    kind: str
    name: str
    namespace: str = ""
    uid: str = ""


class ClusterClient(Protocol):
    """Reads and the handful of writes the executor needs. Implementations raise ``ClusterError`` on API failure."""

    def list_nodes(self) -> list[Obj]: ...

    def get_node(self, name: str) -> Obj | None: ...

    def scan_nodes(self, keep: Callable[[Obj], T | None]) -> list[T]:
        """What ``keep`` makes of each node of ``list_nodes()``, in the same order, its ``None`` left out; each node is
        passed on as its page arrives and may then be dropped, so a caller that keeps a little of each holds only that.
        A list the server makes start again (an expired continue token) calls ``keep`` again from the first node."""
        ...

    def scan_pods(self, keep: Callable[[Obj], T | None]) -> list[T]:
        """``scan_nodes`` for every pod (``list_pods()`` without a selector)."""
        ...

    def list_pods(
        self, *, node_name: str | None = None, namespace: str | None = None, label_selector: str | None = None
    ) -> list[Obj]:
        """Pods, all of them or those on ``node_name`` and/or in ``namespace`` and/or matching ``label_selector``
        (``a=b,c in (d)``: the API's text form), each narrowing the list the server sends."""
        ...

    def list_pending_pods(self) -> list[Obj]:
        """Pods no node holds yet (``spec.nodeName`` empty, phase ``Pending``): the one narrow list the controller's
        pending trigger sends every few seconds, so it costs the API server what the waiting pods weigh, not the
        cluster's."""
        ...

    def get_owner(self, namespace: str, kind: str, name: str) -> Obj | None:
        """The ``apps/v1`` ReplicaSet, StatefulSet or Deployment ``namespace/name`` (its ``spec.selector`` finds its pods,
        a ReplicaSet's ``ownerReferences`` its Deployment); None when absent or of another kind."""
        ...

    def list_autoscalers(self, namespace: str) -> list[Obj]:
        """The ``autoscaling/v2`` HorizontalPodAutoscalers of ``namespace`` (a surge must not fight one)."""
        ...

    def scale_deployment(self, namespace: str, name: str, *, expect: int, to: int) -> bool:
        """JSON patch (RFC 6902) of the Deployment's ``spec.replicas``: ``test`` it is ``expect``, then ``replace`` it by ``to``.
        False when it was not ``expect`` (the API's 422 for a failed test) or the Deployment is gone: nothing changed."""
        ...

    def get_pod(self, namespace: str, name: str) -> Obj | None: ...

    def list_pdbs(self, *, namespace: str | None = None) -> list[Obj]:
        """PodDisruptionBudgets, all of them or those of ``namespace`` (a PDB only selects pods of its own namespace)."""
        ...

    def list_dra(self, kind: str) -> list[Obj]:
        """Every ``kind`` (ResourceSlice, ResourceClaim) of ``resource.k8s.io/v1`` in the cluster: where GPUs allocated
        through dynamic resource allocation are (``outcome.dra_facts``); none when the cluster does not serve it."""
        ...

    def get_resource_claim(self, namespace: str, name: str) -> Obj | None:
        """One ``resource.k8s.io/v1`` ResourceClaim (a replacement's, to say which devices it got); None when absent."""
        ...

    def get_admission(self, kind: str, name: str) -> Obj | None:
        """A cluster-scoped ``admissionregistration.k8s.io/v1`` object, ``kind`` MutatingAdmissionPolicy,
        MutatingAdmissionPolicyBinding or ValidatingAdmissionPolicy; None when absent or not served (an older API
        server)."""
        ...

    def who_am_i(self) -> str | None:
        """The username the API server knows this client by (an ``authentication.k8s.io/v1`` SelfSubjectReview); None
        when it cannot say (not served, or refused)."""
        ...

    def get_config_map(self, name: str) -> Obj | None:
        """A ConfigMap of the compactor's own namespace (the steering parameters), or None when absent."""
        ...

    def patch_config_map(self, name: str, patch: Obj) -> Obj:
        """JSON merge patch on a ConfigMap of the compactor's own namespace; ``metadata.resourceVersion`` in the patch is
        a precondition (409 when it changed)."""
        ...

    def patch_pod(self, namespace: str, name: str, patch: Obj) -> Obj:
        """JSON merge patch on a pod: ``spec.tolerations`` (the API admits additions) with a resourceVersion precondition, or
        ``metadata.annotations`` (make-before-break's ``pod-deletion-cost``)."""
        ...

    def patch_node(self, name: str, patch: Obj) -> Obj:
        """JSON merge patch (RFC 7386) on the node: ``metadata.labels/annotations``, ``spec.unschedulable``, ``spec.taints``."""
        ...

    def evict(
        self, namespace: str, name: str, *, uid: str = "", resource_version: str = "", dry_run: bool = False
    ) -> EvictionResult:
        """POST a policy/v1 Eviction. Never a DELETE: PDBs must be asked.

        ``uid``: evict only that pod (``deleteOptions.preconditions.uid``); a pod recreated under the same
        name (StatefulSet) answers 409 instead of being evicted by mistake. ``resource_version``: evict only the pod as
        it was read (``deleteOptions.preconditions.resourceVersion``): a Pending pod, which the API server evicts without
        asking its PodDisruptionBudget, answers 409 once it changed (bound, started) since.
        """
        ...

    def create_event(self, involved: ObjectRef, *, reason: str, message: str, type_: str = "Normal") -> None: ...

    def read_state(self, name: str) -> dict[str, str] | None:
        """The data of the executor's state ConfigMap, or None when absent."""
        ...

    def write_state(self, name: str, data: dict[str, str] | None) -> None:
        """Create/replace the state ConfigMap's data; None deletes it."""
        ...

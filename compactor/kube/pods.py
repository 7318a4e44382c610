"""``PodCalls``: the pods part of ``KubeClusterClient``: list, scan, read and patch pods, their PDBs, and evictions.

A part of its own because it holds the one way a pod leaves: nothing here (nor anywhere in the client) can
delete a pod; pods leave only through the Eviction subresource, so PodDisruptionBudgets are always asked, and
an eviction's every answer is an ``EvictionOutcome`` rather than an exception. Pods come back lean
(``compactor.kube.lean``: no ``managedFields``, env, probes, ...), listed, read or returned by a patch, so the
executor never holds a pod's bulk.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from compactor.actions.port.client import EvictionOutcome, EvictionResult, Obj, T
from compactor.errors import ClusterError
from compactor.kube.client_base import ClientBase
from compactor.kube.lean import lean
from compactor.kube.read import _Listing
from compactor.kube.transport import MERGE_PATCH, api_error, reply_object

log = logging.getLogger(__name__)

_RETRYABLE = frozenset({500, 502, 503, 504})
PENDING_FIELDS = "spec.nodeName=,status.phase=Pending"  # both field labels the API server indexes for pods


class PodCalls(ClientBase):
    def list_pods(
        self, *, node_name: str | None = None, namespace: str | None = None, label_selector: str | None = None
    ) -> list[Obj]:
        field_selector = f"spec.nodeName={node_name}" if node_name else None
        where = (f" on node {node_name}" if node_name else "") + (
            f" matching {label_selector}" if label_selector else ""
        )
        if namespace:
            return self._list(
                _Listing(
                    self._core.list_namespaced_pod,
                    (namespace,),
                    "Pod",
                    "v1",
                    f"pods in namespace {namespace}{where}",
                    field_selector=field_selector,
                    label_selector=label_selector or None,
                )
            )
        return self._list(
            _Listing(
                self._core.list_pod_for_all_namespaces,
                (),
                "Pod",
                "v1",
                f"pods{where or ' in all namespaces'}",
                field_selector=field_selector,
                label_selector=label_selector or None,
            )
        )

    def list_pending_pods(self) -> list[Obj]:
        return self._list(
            _Listing(
                self._core.list_pod_for_all_namespaces,
                (),
                "Pod",
                "v1",
                "pods waiting for a node",
                field_selector=PENDING_FIELDS,
            )
        )

    def scan_pods(self, keep: Callable[[Obj], T | None]) -> list[T]:
        return self._list(
            _Listing(self._core.list_pod_for_all_namespaces, (), "Pod", "v1", "pods in all namespaces"), keep
        )

    def get_pod(self, namespace: str, name: str) -> Obj | None:
        pod = self._get(
            "/api/v1/namespaces/{namespace}/pods/{name}",
            {"namespace": namespace, "name": name},
            "Pod",
            f"reading pod {namespace}/{name}",
        )
        return lean(pod, "Pod") if pod is not None else None

    def list_pdbs(self, *, namespace: str | None = None) -> list[Obj]:
        if namespace:
            return self._list(
                _Listing(
                    self._policy.list_namespaced_pod_disruption_budget,
                    (namespace,),
                    "PodDisruptionBudget",
                    "policy/v1",
                    f"poddisruptionbudgets in namespace {namespace}",
                )
            )
        return self._list(
            _Listing(
                self._policy.list_pod_disruption_budget_for_all_namespaces,
                (),
                "PodDisruptionBudget",
                "policy/v1",
                "poddisruptionbudgets in all namespaces",
            )
        )

    def patch_pod(self, namespace: str, name: str, patch: Obj) -> Obj:
        what = f"patching pod {namespace}/{name}"
        reply = self._send(
            "PATCH",
            "/api/v1/namespaces/{namespace}/pods/{name}",
            {"namespace": namespace, "name": name},
            what,
            body=patch,
            content_type=MERGE_PATCH,
        )
        if not reply.ok:
            raise api_error(reply, what)
        return lean(reply_object(reply, "Pod", what), "Pod")

    def evict(
        self, namespace: str, name: str, *, uid: str = "", resource_version: str = "", dry_run: bool = False
    ) -> EvictionResult:
        """POST a policy/v1 Eviction; never raises for API answers or transport failures, the outcome says what happened."""
        dry = dry_run or self.dry_run_all
        delete_options: Obj = {"dryRun": ["All"]} if dry else {}
        preconditions = {"uid": uid} if uid else {}
        if resource_version:
            preconditions["resourceVersion"] = resource_version
        if preconditions:
            delete_options["preconditions"] = preconditions
        body: Obj = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
            "deleteOptions": delete_options,
        }
        what = f"evicting pod {namespace}/{name}"
        try:
            reply = self._send(
                "POST",
                "/api/v1/namespaces/{namespace}/pods/{name}/eviction",
                {"namespace": namespace, "name": name},
                what,
                body=body,
                dry_run=dry,
            )
        except ClusterError as exc:  # no reply: timed out, connection refused or dropped
            return EvictionResult(EvictionOutcome.ERROR, exc.status, exc.message)
        status = reply.status
        if reply.ok:
            outcome = EvictionOutcome.EVICTED
        elif status == 404:
            outcome = EvictionOutcome.GONE
        elif status == 429:
            outcome = EvictionOutcome.BLOCKED
        elif status == 409:
            outcome = EvictionOutcome.CONFLICT
        elif status in _RETRYABLE:
            outcome = EvictionOutcome.ERROR
        else:
            outcome = EvictionOutcome.FORBIDDEN
        message = "" if reply.ok else reply.message()
        log.debug(
            "eviction answered",
            extra={"pod": f"{namespace}/{name}", "status": status, "outcome": outcome.value, "dryRun": dry},
        )
        return EvictionResult(outcome, status, message)

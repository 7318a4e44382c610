"""``WorkloadCalls``: what surrounds the pods the executor moves: their owners and autoscalers, the scale, DRA objects.

A part of ``KubeClusterClient`` of its own because none of it is a pod, a node or the compactor's own state:
the ReplicaSets, StatefulSets, Deployments and Jobs that own pods (and the HorizontalPodAutoscalers a surge must not
fight), the one write to an owner (make-before-break's conditional scale of a Deployment by one), and the dynamic
resource allocation objects (ResourceSlices and ResourceClaims) a move's devices come from.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from compactor.actions.port.client import Obj
from compactor.kube.client_base import ClientBase
from compactor.kube.read import _Listing
from compactor.kube.transport import JSON_PATCH, api_error


class WorkloadCalls(ClientBase):
    def get_owner(self, namespace: str, kind: str, name: str) -> Obj | None:
        params = {"namespace": namespace, "name": name}
        if kind == "ReplicaSet":
            return self._get(
                "/apis/apps/v1/namespaces/{namespace}/replicasets/{name}",
                params,
                kind,
                f"reading replicaset {namespace}/{name}",
            )
        if kind == "StatefulSet":
            return self._get(
                "/apis/apps/v1/namespaces/{namespace}/statefulsets/{name}",
                params,
                kind,
                f"reading statefulset {namespace}/{name}",
            )
        if kind == "Deployment":
            return self._get(
                "/apis/apps/v1/namespaces/{namespace}/deployments/{name}",
                params,
                kind,
                f"reading deployment {namespace}/{name}",
            )
        if kind == "Job":  # whether an eviction would spend its backoffLimit (actions/checks/job_backoff.py)
            return self._get(
                "/apis/batch/v1/namespaces/{namespace}/jobs/{name}", params, kind, f"reading job {namespace}/{name}"
            )
        return None

    def list_autoscalers(self, namespace: str) -> list[Obj]:
        what = f"listing horizontalpodautoscalers in namespace {namespace}"
        reply = self._send(
            "GET",
            "/apis/autoscaling/v2/namespaces/{namespace}/horizontalpodautoscalers",
            {"namespace": namespace},
            what,
        )
        if not reply.ok:
            raise api_error(reply, what)
        items = reply.body.get("items") if isinstance(reply.body, dict) else None
        return [item for item in items or [] if isinstance(item, dict)]

    def scale_deployment(self, namespace: str, name: str, *, expect: int, to: int) -> bool:
        what = f"scaling deployment {namespace}/{name} from {expect} to {to} replicas"
        body = [
            {"op": "test", "path": "/spec/replicas", "value": expect},
            {"op": "replace", "path": "/spec/replicas", "value": to},
        ]
        # The scale subresource: the grant it needs (deployments/scale) changes replicas and nothing else of a Deployment.
        reply = self._send(
            "PATCH",
            "/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale",
            {"namespace": namespace, "name": name},
            what,
            body=body,
            content_type=JSON_PATCH,
        )
        if reply.status in (404, 422):  # gone, or the test failed: spec.replicas is not what it was
            return False
        if not reply.ok:
            raise api_error(reply, what)
        return True

    def list_dra(self, kind: str) -> list[Obj]:
        call: Callable[..., Any] = (
            self._resource.list_resource_slice
            if kind == "ResourceSlice"
            else self._resource.list_resource_claim_for_all_namespaces
        )
        what = "resourceslices" if kind == "ResourceSlice" else "resourceclaims in all namespaces"
        return self._list(_Listing(call, (), kind, "resource.k8s.io/v1", what, optional=True))

    def get_resource_claim(self, namespace: str, name: str) -> Obj | None:
        return self._get(
            "/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}",
            {"namespace": namespace, "name": name},
            "ResourceClaim",
            f"reading resourceclaim {namespace}/{name}",
        )

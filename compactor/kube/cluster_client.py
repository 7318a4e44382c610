"""``KubeClusterClient``: the executor's ``ClusterClient`` on the live API, through the official ``kubernetes`` client.

Lists reuse ``compactor.kube.read`` (paginated, raw JSON). Pods and nodes, listed, read one by one
or returned by a patch, are lean (``compactor.kube.lean``: no ``managedFields``, env, probes, ...),
so the executor never holds a pod's bulk. Every other call goes through
``ApiClient.param_serialize`` + ``call_api`` with a raw JSON body and a raw JSON reply, so
what is sent is exactly what is written here:

* the typed ``create_*``/``replace_*`` methods of kubernetes 37 coerce a dict body through
  their pydantic models, which (among others) rewrites ``eventTime`` without its
  microseconds, a form the API server's MicroTime parser rejects, and send no Content-Type;
* ``patch_node`` with a dict body is sent as a *strategic* merge patch unless forced; the
  executor's patches are RFC 7386 merge patches (``null`` deletes, lists such as
  ``spec.taints`` are replaced whole), so the content type is always
  ``application/merge-patch+json``.

Nothing here can delete a pod: pods leave only through the Eviction subresource, so
PodDisruptionBudgets are always asked. The only DELETE is of the state ConfigMap.
"""

from __future__ import annotations

import json
import logging
import secrets
import socket
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import urllib3
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from compactor.actions.client import EvictionOutcome, EvictionResult, Obj, ObjectRef, T
from compactor.errors import ClusterError
from compactor.kube.client import single_attempt
from compactor.kube.lean import lean
from compactor.kube.read import DEFAULT_PAGE_SIZE, _list_all, _Listing, _status_message, _transport_reason
from compactor.settings import DEFAULT_WRITE_TIMEOUT_SECONDS

log = logging.getLogger(__name__)

COMPONENT = "gpu-compactor"
DEFAULT_NAMESPACE = "gpu-compactor"
DEFAULT_TIMEOUT = 30.0  # reads
DEFAULT_WRITE_TIMEOUT = DEFAULT_WRITE_TIMEOUT_SECONDS  # writes: leader_election.write_timeout_seconds
MERGE_PATCH = "application/merge-patch+json"
JSON = "application/json"
JSON_PATCH = "application/json-patch+json"  # RFC 6902: its "test" op makes a scale conditional on the replicas read
MANAGED_BY = {"app.kubernetes.io/managed-by": COMPONENT}

# Limits the API server validates on core/v1 Events that carry an eventTime.
_EVENT_NOTE_LIMIT = 1024  # bytes of message
_EVENT_FIELD_LIMIT = 128  # reason, action, reportingInstance
_NAME_LIMIT = 253

_API_VERSIONS = {
    "Node": "v1",
    "Pod": "v1",
    "ConfigMap": "v1",
    "Namespace": "v1",
    "PodDisruptionBudget": "policy/v1",
    "Deployment": "apps/v1",
    "ReplicaSet": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "Job": "batch/v1",
    "MutatingAdmissionPolicy": "admissionregistration.k8s.io/v1",
    "MutatingAdmissionPolicyBinding": "admissionregistration.k8s.io/v1",
    "ResourceClaim": "resource.k8s.io/v1",
}

_STATUS_WORDS = {
    400: "bad request",
    401: "unauthorized",
    403: "forbidden",
    404: "not found",
    405: "method not allowed",
    409: "conflict",
    410: "gone",
    413: "request too large",
    415: "unsupported media type",
    422: "invalid",
    429: "too many requests",
    500: "internal error",
    502: "bad gateway",
    503: "service unavailable",
    504: "gateway timeout",
}
_RETRYABLE = frozenset({500, 502, 503, 504})


class _Reply:
    """A decoded API reply: HTTP status and the JSON body (None when empty or not JSON)."""

    __slots__ = ("body", "reason", "retry_after", "status", "text")

    def __init__(self, status: int, reason: str, text: str) -> None:
        self.retry_after: float | None = None
        self.status = status
        self.reason = reason
        self.text = text
        try:
            self.body: Any = json.loads(text) if text.strip() else None
        except ValueError:
            self.body = None

    @property
    def ok(self) -> bool:
        return 200 <= self.status <= 299

    def message(self) -> str:
        """The Status ``message`` (and its causes' messages), else the raw body or reason, on one short line."""
        exc = ApiException(status=self.status, reason=self.reason, body=self.text)
        text = _status_message(exc)
        body = self.body
        if isinstance(body, dict):
            details = body.get("details")
            causes = details.get("causes") if isinstance(details, dict) else None
            extra = [str(c.get("message")) for c in causes or [] if isinstance(c, dict) and c.get("message")]
            extra = [" ".join(e.split()) for e in extra if " ".join(e.split()) not in text]
            if extra:
                text = f"{text} ({'; '.join(extra)})" if text else "; ".join(extra)
        return text or self.reason or f"HTTP {self.status}"


class KubeClusterClient:
    """``ClusterClient`` on a ``kubernetes.client.ApiClient``.

    ``dry_run_all``: every write (patch, eviction, event, state ConfigMap) carries
    ``dryRun=All``, so the API server admits or refuses it without persisting anything.
    ``namespace``: where the executor's state ConfigMap lives.
    ``request_timeout``: seconds for each read (connect + reply).
    ``write_timeout``: seconds for each write (PATCH, POST, PUT, DELETE): ``leader_election.write_timeout_seconds``,
    at most half of ``lease_seconds - renew_deadline_seconds``, so a write checked against the Lease
    (``actions/fencing.py``) gives up long before another replica may take the Lease over. Writes are sent
    once (``client.single_attempt``: no urllib3 retry resends one unchecked); callers that retry go through
    the fence again. A client-side timeout does not cancel the request on the API server: see
    docs/executor.md, "What the Lease does not guarantee".
    """

    def __init__(
        self,
        api_client: k8s_client.ApiClient,
        *,
        dry_run_all: bool = False,
        namespace: str = DEFAULT_NAMESPACE,
        request_timeout: float = DEFAULT_TIMEOUT,
        write_timeout: float = DEFAULT_WRITE_TIMEOUT,
        page_size: int = DEFAULT_PAGE_SIZE,
    ) -> None:
        if page_size < 1:
            raise ValueError(f"page_size must be at least 1, got {page_size}")
        if write_timeout <= 0:
            raise ValueError(f"write_timeout must be > 0, got {write_timeout:g}")
        self.api_client = api_client
        self._writer = single_attempt(api_client)  # writes: one attempt each, bounded by write_timeout
        self.dry_run_all = dry_run_all
        self.namespace = namespace
        self.request_timeout = request_timeout
        self.write_timeout = write_timeout
        self.page_size = page_size
        self._core = k8s_client.CoreV1Api(api_client)
        self._policy = k8s_client.PolicyV1Api(api_client)
        self._resource = k8s_client.ResourceV1Api(api_client)
        self._instance = _reporting_instance()
        self._state_versions: dict[str, str] = {}  # state ConfigMap -> resourceVersion last read or written here

    def close(self) -> None:
        self._writer.close()  # type: ignore[no-untyped-call]
        self.api_client.close()  # type: ignore[no-untyped-call]

    def __enter__(self) -> KubeClusterClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def host(self) -> str:
        return str(self.api_client.configuration.host)

    # ----- reads --------------------------------------------------------------------

    def list_nodes(self) -> list[Obj]:
        return self._list(_Listing(self._core.list_node, (), "Node", "v1", "nodes"))

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

    def scan_nodes(self, keep: Callable[[Obj], T | None]) -> list[T]:
        return self._list(_Listing(self._core.list_node, (), "Node", "v1", "nodes"), keep)

    def scan_pods(self, keep: Callable[[Obj], T | None]) -> list[T]:
        return self._list(
            _Listing(self._core.list_pod_for_all_namespaces, (), "Pod", "v1", "pods in all namespaces"), keep
        )

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
            raise self._error(reply, what)
        items = reply.body.get("items") if isinstance(reply.body, dict) else None
        return [item for item in items or [] if isinstance(item, dict)]

    def get_admission(self, kind: str, name: str) -> Obj | None:
        if kind == "MutatingAdmissionPolicy":
            return self._get(
                "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies/{name}",
                {"name": name},
                kind,
                f"reading mutatingadmissionpolicy {name}",
            )
        if kind == "MutatingAdmissionPolicyBinding":
            return self._get(
                "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings/{name}",
                {"name": name},
                kind,
                f"reading mutatingadmissionpolicybinding {name}",
            )
        raise ValueError(f"not an admission kind this client reads: {kind}")

    def get_config_map(self, name: str) -> Obj | None:
        return self._get(
            "/api/v1/namespaces/{namespace}/configmaps/{name}",
            {"namespace": self.namespace, "name": name},
            "ConfigMap",
            f"reading configmap {self.namespace}/{name}",
        )

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

    def list_dra(self, kind: str) -> list[Obj]:
        call: Callable[..., Any] = (
            self._resource.list_resource_slice
            if kind == "ResourceSlice"
            else self._resource.list_resource_claim_for_all_namespaces
        )
        what = "resourceslices" if kind == "ResourceSlice" else "resourceclaims in all namespaces"
        return self._list(_Listing(call, (), kind, "resource.k8s.io/v1", what, optional=True))

    def get_node(self, name: str) -> Obj | None:
        node = self._get("/api/v1/nodes/{name}", {"name": name}, "Node", f"reading node {name}")
        return lean(node, "Node") if node is not None else None

    def get_resource_claim(self, namespace: str, name: str) -> Obj | None:
        return self._get(
            "/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}",
            {"namespace": namespace, "name": name},
            "ResourceClaim",
            f"reading resourceclaim {namespace}/{name}",
        )

    def get_pod(self, namespace: str, name: str) -> Obj | None:
        pod = self._get(
            "/api/v1/namespaces/{namespace}/pods/{name}",
            {"namespace": namespace, "name": name},
            "Pod",
            f"reading pod {namespace}/{name}",
        )
        return lean(pod, "Pod") if pod is not None else None

    # ----- writes -------------------------------------------------------------------

    def patch_node(self, name: str, patch: Obj) -> Obj:
        """RFC 7386 merge patch (``application/merge-patch+json``): ``null`` deletes, lists are replaced whole."""
        what = f"patching node {name}"
        reply = self._send(
            "PATCH",
            "/api/v1/nodes/{name}",
            {"name": name},
            what,
            body=patch,
            content_type=MERGE_PATCH,
            query=self._dry_run_query(),
        )
        if not reply.ok:
            raise self._error(reply, what)
        return lean(self._object(reply, "Node", what), "Node")

    def patch_config_map(self, name: str, patch: Obj) -> Obj:
        what = f"patching configmap {self.namespace}/{name}"
        reply = self._send(
            "PATCH",
            "/api/v1/namespaces/{namespace}/configmaps/{name}",
            {"namespace": self.namespace, "name": name},
            what,
            body=patch,
            content_type=MERGE_PATCH,
            query=self._dry_run_query(),
        )
        if not reply.ok:
            raise self._error(reply, what)
        return self._object(reply, "ConfigMap", what)

    def patch_pod(self, namespace: str, name: str, patch: Obj) -> Obj:
        what = f"patching pod {namespace}/{name}"
        reply = self._send(
            "PATCH",
            "/api/v1/namespaces/{namespace}/pods/{name}",
            {"namespace": namespace, "name": name},
            what,
            body=patch,
            content_type=MERGE_PATCH,
            query=self._dry_run_query(),
        )
        if not reply.ok:
            raise self._error(reply, what)
        return lean(self._object(reply, "Pod", what), "Pod")

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
            query=self._dry_run_query(),
        )
        if reply.status in (404, 422):  # gone, or the test failed: spec.replicas is not what it was
            return False
        if not reply.ok:
            raise self._error(reply, what)
        return True

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
                query=[("dryRun", "All")] if dry else [],
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

    def create_event(self, involved: ObjectRef, *, reason: str, message: str, type_: str = "Normal") -> None:
        """A core/v1 Event about ``involved`` (cluster-scoped objects: in namespace ``default``, as kubectl does)."""
        namespace = involved.namespace or "default"
        now = datetime.now(UTC)
        reference: Obj = {
            "kind": involved.kind,
            "name": involved.name,
            "apiVersion": _API_VERSIONS.get(involved.kind, "v1"),
        }
        if involved.namespace:
            reference["namespace"] = involved.namespace
        if involved.uid:
            reference["uid"] = involved.uid
        body: Obj = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": _event_name(involved.name), "namespace": namespace, "labels": dict(MANAGED_BY)},
            "involvedObject": reference,
            "reason": reason[:_EVENT_FIELD_LIMIT],
            "message": _truncate_bytes(message, _EVENT_NOTE_LIMIT),
            "type": type_,
            "action": reason[:_EVENT_FIELD_LIMIT],
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self._instance,
            "firstTimestamp": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "lastTimestamp": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "eventTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "count": 1,
        }
        what = f"creating event {reason} for {involved.kind.lower()} {_ref_name(involved)}"
        reply = self._send(
            "POST",
            "/api/v1/namespaces/{namespace}/events",
            {"namespace": namespace},
            what,
            body=body,
            query=self._dry_run_query(),
        )
        if not reply.ok:
            raise self._error(reply, what)

    def read_state(self, name: str) -> dict[str, str] | None:
        what = f"reading configmap {self.namespace}/{name}"
        config_map = self._get(
            "/api/v1/namespaces/{namespace}/configmaps/{name}",
            {"namespace": self.namespace, "name": name},
            "ConfigMap",
            what,
        )
        if config_map is None:
            self._state_versions.pop(name, None)
            return None
        self._state_versions[name] = str((config_map.get("metadata") or {}).get("resourceVersion") or "")
        data = config_map.get("data") or {}
        if not isinstance(data, dict):
            raise ClusterError(f"{what}: data is a JSON {type(data).__name__}, expected an object")
        return {str(k): "" if v is None else str(v) for k, v in data.items()}

    def write_state(self, name: str, data: dict[str, str] | None) -> None:
        """Compare-and-swap the state ConfigMap: PUT/DELETE with the resourceVersion this process last read or wrote,
        POST when it saw none. A 409 means another writer changed it meanwhile: raised, never overwritten."""
        params = {"namespace": self.namespace, "name": name}
        ref = f"{self.namespace}/{name}"
        known = self._state_versions.get(name)
        if data is None:
            what = f"deleting configmap {ref}"
            options: Obj = {"apiVersion": "v1", "kind": "DeleteOptions"}
            if known:
                options["preconditions"] = {"resourceVersion": known}
            reply = self._send(
                "DELETE",
                "/api/v1/namespaces/{namespace}/configmaps/{name}",
                params,
                what,
                body=options,
                query=self._dry_run_query(),
            )
            if reply.status == 409:
                raise _changed_meanwhile(what, reply)
            if not reply.ok and reply.status != 404:
                raise self._error(reply, what)
            if not self.dry_run_all:
                self._state_versions.pop(name, None)
            return
        body: Obj = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": self.namespace, "labels": dict(MANAGED_BY)},
            "data": {str(k): str(v) for k, v in data.items()},
        }
        if known:
            body["metadata"]["resourceVersion"] = known
            what = f"writing configmap {ref}"
            reply = self._send(
                "PUT",
                "/api/v1/namespaces/{namespace}/configmaps/{name}",
                params,
                what,
                body=body,
                query=self._dry_run_query(),
            )
        else:
            what = f"creating configmap {ref}"
            reply = self._send(
                "POST",
                "/api/v1/namespaces/{namespace}/configmaps",
                {"namespace": self.namespace},
                what,
                body=body,
                query=self._dry_run_query(),
            )
        if not reply.ok:
            if reply.status == 409 or (
                known and reply.status == 404
            ):  # a POST's 404 is a missing namespace, not a race
                raise _changed_meanwhile(what, reply)
            raise self._error(reply, what)
        if not self.dry_run_all:
            self._state_versions[name] = str(((reply.body or {}).get("metadata") or {}).get("resourceVersion") or "")

    # ----- plumbing -----------------------------------------------------------------

    def _dry_run_query(self) -> list[tuple[str, str]]:
        return [("dryRun", "All")] if self.dry_run_all else []

    def _list(self, listing: _Listing, keep: Callable[[Obj], Any] | None = None) -> list[Any]:
        """Every item, page by page, each lean as its page arrives; ``keep``: what to hold of each instead (``scan_pods``)."""
        return _list_all(
            listing, page_size=self.page_size, host=self.host, request_timeout=self.request_timeout, keep=keep
        )

    def _get(self, path: str, params: dict[str, str], kind: str, what: str) -> Obj | None:
        reply = self._send("GET", path, params, what)
        if reply.status == 404:
            return None
        if not reply.ok:
            raise self._error(reply, what)
        return self._object(reply, kind, what)

    def _object(self, reply: _Reply, kind: str, what: str) -> Obj:
        if not isinstance(reply.body, dict):
            shown = "invalid JSON" if reply.body is None else f"a JSON {type(reply.body).__name__}"
            raise ClusterError(f"{what}: the API replied with {shown}, expected a {kind}", status=reply.status)
        obj: Obj = reply.body
        obj.setdefault("kind", kind)
        obj.setdefault("apiVersion", _API_VERSIONS.get(kind, "v1"))
        return obj

    def _send(
        self,
        method: str,
        path: str,
        params: dict[str, str],
        what: str,
        *,
        body: Any = None,
        content_type: str = JSON,
        query: list[tuple[str, str]] | None = None,
    ) -> _Reply:
        """One request with a raw JSON body; the reply whatever its status. Raises ClusterError only when no reply came."""
        if method == "DELETE" and not path.endswith("/configmaps/{name}"):
            raise AssertionError(f"refusing to DELETE {path}: only the state ConfigMap is ever deleted")
        headers: dict[str, Any] = {"Accept": JSON}
        if body is not None:
            headers["Content-Type"] = content_type
        api, timeout = (
            (self.api_client, self.request_timeout) if method == "GET" else (self._writer, self.write_timeout)
        )
        try:
            request = api.param_serialize(
                method=method,
                resource_path=path,
                path_params=dict(params),
                query_params=list(query or []),
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
            )
            response = api.call_api(*request, _request_timeout=timeout)
            try:
                raw = response.read()  # type: ignore[no-untyped-call]
            finally:
                response.response.release_conn()
        except ApiException as exc:  # the client's own failures (TLS errors, an unpreparable request): no HTTP status
            raise ClusterError(
                f"cannot talk to the Kubernetes API at {self.host} ({what}): {_status_message(exc) or 'no reply'}"
            ) from None
        except urllib3.exceptions.HTTPError as exc:
            raise ClusterError(f"cannot reach the Kubernetes API at {self.host} ({what}): {_no_reply(exc)}") from None
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes | bytearray) else str(raw or "")
        reply = _Reply(int(response.status), str(response.reason or ""), text)
        reply.retry_after = _retry_after(response.getheader("Retry-After"), reply.body)  # type: ignore[no-untyped-call]
        return reply

    def _error(self, reply: _Reply, what: str) -> ClusterError:
        word = _STATUS_WORDS.get(reply.status, "HTTP error")
        return ClusterError(
            _one_line(f"{word} ({reply.status}) {what}: {reply.message()}"),
            status=reply.status,
            retry_after=reply.retry_after,
        )


def _retry_after(header: str | None, body: Any) -> float | None:
    """Seconds the API server asks a client to wait (the ``Retry-After`` header, else the Status's
    ``details.retryAfterSeconds``, as client-go reads them); None when it asks nothing."""
    details = body.get("details") if isinstance(body, dict) else None
    for value in (header, details.get("retryAfterSeconds") if isinstance(details, dict) else None):
        try:
            seconds = float(value) if value is not None else -1.0
        except (TypeError, ValueError):
            continue
        if 0 <= seconds <= 3600:
            return seconds
    return None


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _no_reply(exc: BaseException) -> str:
    """Why no reply came: 'timed out', 'connection refused', 'the connection closed without a reply', ..."""
    reason = _transport_reason(exc)
    if reason.startswith("("):  # urllib3's ProtocolError tuple text: ('Connection aborted.', RemoteDisconnected(...))
        seen: list[BaseException] = [exc]
        if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
            seen.append(exc.reason)
        for error in seen:
            if isinstance(error, urllib3.exceptions.ProtocolError):  # RemoteDisconnected, ConnectionResetError, ...
                return "the connection closed without a reply"
    return reason


def _ref_name(ref: ObjectRef) -> str:
    return f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name


def _event_name(object_name: str) -> str:
    """``<object>.<16 hex>``, a valid DNS subdomain of at most 253 characters."""
    suffix = secrets.token_hex(8)
    stem = object_name[: _NAME_LIMIT - len(suffix) - 1].rstrip(".-") or "object"
    return f"{stem}.{suffix}"


def _truncate_bytes(text: str, limit: int) -> str:
    encoded = text.encode("utf-8")
    if len(encoded) <= limit:
        return text
    return encoded[: limit - 3].decode("utf-8", "ignore") + "..."


def _changed_meanwhile(what: str, reply: _Reply) -> ClusterError:
    return ClusterError(
        f"{what}: changed by another writer since this process last saw it ({reply.message()}); "
        "another gpu-compactor may be acting",
        status=409,
    )


def _reporting_instance() -> str:
    """Which controller process wrote an event (``reportingInstance``): the pod's host name, as client-go uses."""
    host = socket.gethostname() or "unknown"
    return f"{COMPONENT}-{host}"[:_EVENT_FIELD_LIMIT]

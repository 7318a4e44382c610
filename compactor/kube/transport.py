"""``Transport``: the one place compactor/kube sends a single request to the API server (paginated lists: ``read.py``).

``KubeClusterClient`` and the Lease (``lease.py``) both go through it. Every request is built with
``ApiClient.param_serialize`` + ``call_api`` from a raw JSON body, and its reply is read raw and JSON-decoded
here, so what is sent is exactly what the caller wrote:

* the typed ``create_*``/``replace_*`` methods of kubernetes 37 coerce a dict body through
  their pydantic models, which (among others) rewrites ``eventTime`` and a Lease's MicroTimes without
  their microseconds, a form the API server's MicroTime parser rejects, and send no Content-Type;
* ``patch_node`` with a dict body is sent as a *strategic* merge patch unless forced; the
  executor's patches are RFC 7386 merge patches (``null`` deletes, lists such as
  ``spec.taints`` are replaced whole), so the caller names the content type.

Separate because the client and the Lease must agree on all of it, and it is safety, not convenience: a write
goes out once (``client.single_attempt``: no urllib3 retry resends one after its Lease check) and gives up after
the write timeout the Lease's timing rule bounds; a dry-run transport puts ``dryRun=All`` on every write, so no
write can forget it; nothing but the state ConfigMap can be DELETEd; and a request that got no reply becomes the
same one-line ``ClusterError`` whoever sent it. What a reply's status means is each caller's business: ``Reply``
carries it, ``api_error`` words the usual failures.
"""

from __future__ import annotations

import json
from typing import Any

import urllib3
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from compactor.errors import ClusterError
from compactor.kube.client import single_attempt
from compactor.kube.read import _status_message, _transport_reason

MERGE_PATCH = "application/merge-patch+json"
JSON = "application/json"
JSON_PATCH = "application/json-patch+json"  # RFC 6902: its "test" op makes a scale conditional on the replicas read
DRY_RUN = (("dryRun", "All"),)

API_VERSIONS = {
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


class Reply:
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


class Transport:
    """Single requests with a raw JSON body to the API server of ``api_client``.

    Reads (GET) go through ``api_client`` itself, bounded by ``read_timeout``; ``reads_once``: through the
    single-attempt client too (the Lease: a round's GET must end within its timeout as well). Writes (PATCH, POST,
    PUT, DELETE) go through ``client.single_attempt``, one attempt bounded by ``write_timeout``: callers that retry
    go through the Lease check again. A client-side timeout does not cancel the request on the API server: see
    docs/executor.md, "What the Lease does not guarantee". ``dry_run_all``: every write carries ``dryRun=All``,
    so the API server admits or refuses it without persisting anything.
    """

    def __init__(
        self,
        api_client: k8s_client.ApiClient,
        *,
        read_timeout: float,
        write_timeout: float,
        dry_run_all: bool = False,
        reads_once: bool = False,
    ) -> None:
        self.api_client = api_client
        self._writer = single_attempt(api_client)
        self._reader = self._writer if reads_once else api_client
        self.read_timeout = read_timeout
        self.write_timeout = write_timeout
        self.dry_run_all = dry_run_all

    @property
    def host(self) -> str:
        return str(self.api_client.configuration.host)

    def close(self) -> None:
        """Closes the single-attempt client made here; ``api_client`` is its owner's to close."""
        self._writer.close()  # type: ignore[no-untyped-call]

    def send(
        self,
        method: str,
        path: str,
        params: dict[str, str],
        what: str,
        *,
        body: Any = None,
        content_type: str = JSON,
        dry_run: bool = False,
    ) -> Reply:
        """One request; the reply whatever its status. Raises ClusterError only when no reply came.

        ``what`` names the request in messages ("patching node gpu-1"); ``dry_run``: this write carries
        ``dryRun=All`` even when the transport's other writes do not (an eviction's own dry run)."""
        if method == "DELETE" and not path.endswith("/configmaps/{name}"):
            raise AssertionError(f"refusing to DELETE {path}: only the state ConfigMap is ever deleted")
        headers: dict[str, Any] = {"Accept": JSON}
        if body is not None:
            headers["Content-Type"] = content_type
        read = method == "GET"
        api, timeout = (self._reader, self.read_timeout) if read else (self._writer, self.write_timeout)
        query = DRY_RUN if not read and (dry_run or self.dry_run_all) else ()
        try:
            request = api.param_serialize(
                method=method,
                resource_path=path,
                path_params=dict(params),
                query_params=list(query),
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
        reply = Reply(int(response.status), str(response.reason or ""), text)
        reply.retry_after = _retry_after(response.getheader("Retry-After"), reply.body)  # type: ignore[no-untyped-call]
        return reply

    def get_object(self, path: str, params: dict[str, str], kind: str, what: str) -> dict[str, Any] | None:
        """The object at ``path``, None when there is none (404); other failures raise ``api_error``."""
        reply = self.send("GET", path, params, what)
        if reply.status == 404:
            return None
        if not reply.ok:
            raise api_error(reply, what)
        return reply_object(reply, kind, what)


def reply_object(reply: Reply, kind: str, what: str) -> dict[str, Any]:
    """The reply's body as an object of ``kind`` (its ``kind`` and ``apiVersion`` set when the server left them out)."""
    if not isinstance(reply.body, dict):
        shown = "invalid JSON" if reply.body is None else f"a JSON {type(reply.body).__name__}"
        raise ClusterError(f"{what}: the API replied with {shown}, expected a {kind}", status=reply.status)
    obj: dict[str, Any] = reply.body
    obj.setdefault("kind", kind)
    obj.setdefault("apiVersion", API_VERSIONS.get(kind, "v1"))
    return obj


def api_error(reply: Reply, what: str) -> ClusterError:
    """A failed reply as a one-line ``ClusterError``: "forbidden (403) patching node gpu-1: <the server's message>"."""
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

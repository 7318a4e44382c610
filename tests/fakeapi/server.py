"""A fake Kubernetes API server on a real HTTP stack, for wire-level tests.

``FakeApiServer`` is a stdlib ``ThreadingHTTPServer`` on 127.0.0.1 (a free port),
served from a background thread, speaking HTTP/1.1 with keep-alive like the real
API server, so the official ``kubernetes`` client (urllib3 pool, auth headers,
query encoding, content types) is exercised end to end.

What it serves (JSON only):

* ``GET`` lists of every resource type in ``RESOURCE_TYPES``, cluster-wide and per
  namespace, with ``limit``/``continue`` pagination (opaque tokens; ``expire_continue``
  forces 410 Expired), ``labelSelector`` (``=``, ``==``, ``!=``, ``in``, ``notin``, ``k``,
  ``!k``) and ``fieldSelector`` (``=``, ``==``, ``!=`` on the fields the real server allows);
* ``GET``/``PUT``/``DELETE``/``PATCH`` of single objects (and their ``/status``); PATCH with
  ``application/merge-patch+json`` and ``application/strategic-merge-patch+json`` (both
  applied as RFC 7386 merge patches; strategic ``$`` directives are ignored) and
  ``application/json-patch+json`` (RFC 6902); a ``metadata.resourceVersion`` in a patch or
  PUT body is a precondition (409 Conflict when stale);
* ``POST`` create in a namespace (events in ``v1`` and ``events.k8s.io/v1``, anything else);
* ``POST .../pods/{name}/eviction`` with the policy/v1 Eviction semantics of the real
  server (PDB check with 429, decrement of ``disruptionsAllowed``, ``dryRun=All``); with a
  ``DisruptionController`` attached, PDB status is recomputed after every write as
  kube-controller-manager does (see ``disruption.py``).

Every request is recorded (``requests``) before it is answered; ``inject`` makes
the next N matching requests fail (any status, a delay for client timeouts, or a
dropped connection); ``route`` adds custom handlers. Errors are ``Status`` objects.
"""

from __future__ import annotations

import base64
import copy
import itertools
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.fakeapi.disruption import DisruptionController

JSON = dict[str, Any]

# --------------------------------------------------------------------------- resource types


@dataclass(frozen=True)
class ResourceType:
    group: str  # "" = core
    version: str
    plural: str
    kind: str
    namespaced: bool
    # fieldSelector labels the real server accepts besides metadata.name/namespace; None = any
    field_labels: frozenset[str] | None = frozenset()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def prefix(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    @property
    def key(self) -> str:
        """Unique name: ``pods``, ``policy/poddisruptionbudgets``, ``events.k8s.io/events``."""
        return f"{self.group}/{self.plural}" if self.group else self.plural


_POD_FIELDS = frozenset(
    {
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.podIPs",
        "status.nominatedNodeName",
    }
)

RESOURCE_TYPES: tuple[ResourceType, ...] = (
    ResourceType("", "v1", "nodes", "Node", False, frozenset({"spec.unschedulable"})),
    ResourceType("", "v1", "pods", "Pod", True, _POD_FIELDS),
    ResourceType("", "v1", "configmaps", "ConfigMap", True),
    ResourceType("", "v1", "namespaces", "Namespace", False, frozenset({"status.phase"})),
    ResourceType("", "v1", "persistentvolumes", "PersistentVolume", False),
    ResourceType("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True),
    ResourceType("", "v1", "events", "Event", True, None),
    ResourceType("events.k8s.io", "v1", "events", "Event", True, None),
    ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True),
    ResourceType("apps", "v1", "deployments", "Deployment", True),
    ResourceType("apps", "v1", "replicasets", "ReplicaSet", True),
    ResourceType("apps", "v1", "statefulsets", "StatefulSet", True),
    ResourceType("apps", "v1", "daemonsets", "DaemonSet", True),
    ResourceType("batch", "v1", "jobs", "Job", True),
    ResourceType("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False),
    ResourceType("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False),
    ResourceType("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True),
    ResourceType("admissionregistration.k8s.io", "v1", "mutatingadmissionpolicies", "MutatingAdmissionPolicy", False),
    ResourceType(
        "admissionregistration.k8s.io", "v1", "mutatingadmissionpolicybindings", "MutatingAdmissionPolicyBinding", False
    ),
)
_BY_PATH = {(rt.prefix, rt.plural): rt for rt in RESOURCE_TYPES}


def resource_type(spec: str, api_version: str | None = None) -> ResourceType:
    """``"Pod"``, ``"pods"``, ``"pod"`` or ``"events.k8s.io/events"``; ``api_version`` disambiguates a kind."""
    lowered = spec.lower()
    matches = [
        rt
        for rt in RESOURCE_TYPES
        if lowered in (rt.kind.lower(), rt.plural, rt.key, rt.kind.lower() + "s")
        and (api_version is None or rt.api_version == api_version)
    ]
    if not matches and api_version is not None:
        matches = [rt for rt in RESOURCE_TYPES if lowered in (rt.kind.lower(), rt.plural)]
    if not matches:
        raise KeyError(f"the fake API server has no resource type {spec!r}")
    return matches[0]  # core first for Event


# --------------------------------------------------------------------------- requests, replies, injections


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    at: float

    @property
    def content_type(self) -> str:
        return self.header("Content-Type").split(";")[0].strip()

    def header(self, name: str, default: str = "") -> str:
        lowered = name.lower()
        for key, value in self.headers.items():
            if key.lower() == lowered:
                return value
        return default

    def param(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[-1] if values else None

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    def __repr__(self) -> str:
        query = "&".join(f"{k}={v}" for k, vs in self.query.items() for v in vs)
        return f"<{self.method} {self.path}{'?' + query if query else ''}>"


@dataclass
class Reply:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Injection:
    """Answer the next ``times`` matching requests (None = all) with ``status``/``body``, or drop them."""

    path: str | re.Pattern[str]
    status: int = 500
    method: str | None = None
    times: int | None = 1
    query: dict[str, str] | None = None
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before answering (longer than the client's timeout = a timeout)
    drop: bool = False  # close the connection without answering
    passthrough: bool = False  # after the delay, answer normally instead of with ``status``
    when: Callable[[RecordedRequest], bool] | None = None
    hits: list[RecordedRequest] = field(default_factory=list)

    def matches(self, request: RecordedRequest) -> bool:
        if self.times is not None and len(self.hits) >= self.times:
            return False
        if self.method is not None and self.method.upper() != request.method:
            return False
        if isinstance(self.path, re.Pattern):
            if not self.path.fullmatch(request.path):
                return False
        elif self.path != request.path:
            return False
        if self.query and any(request.param(k) != v for k, v in self.query.items()):
            return False
        return self.when is None or self.when(request)

    @property
    def exhausted(self) -> bool:
        return self.times is not None and len(self.hits) >= self.times


_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def status_body(
    code: int,
    message: str = "",
    *,
    reason: str | None = None,
    details: JSON | None = None,
    metadata: JSON | None = None,
) -> JSON:
    """A ``metav1.Status`` as the API server writes it."""
    body: JSON = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": metadata or {},
        "status": "Success" if 200 <= code < 300 else "Failure",
    }
    if message:
        body["message"] = message
    if code >= 300:
        body["reason"] = reason or _REASONS.get(code, "Unknown")
    elif reason:
        body["reason"] = reason
    if details:
        body["details"] = details
    body["code"] = code
    return body


class ApiError(Exception):
    """Raised inside handlers; becomes a ``Status`` reply."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        details: JSON | None = None,
        metadata: JSON | None = None,
    ) -> None:
        super().__init__(message)
        self.reply = Reply(code, status_body(code, message, reason=reason, details=details, metadata=metadata))


def _not_found(rt: ResourceType, name: str) -> ApiError:
    details: JSON = {"name": name, "kind": rt.plural}
    if rt.group:
        details["group"] = rt.group
    what = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
    return ApiError(404, f'{what} "{name}" not found', details=details)


def _conflict(rt: ResourceType, name: str) -> ApiError:
    what = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {what} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
        details={"name": name, "kind": rt.plural, **({"group": rt.group} if rt.group else {})},
    )


# --------------------------------------------------------------------------- selectors


_LABEL_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_SET_RE = re.compile(rf"^\s*({_LABEL_KEY})\s+(in|notin)\s+\(([^)]*)\)\s*$")
_EQ_RE = re.compile(rf"^\s*({_LABEL_KEY})\s*(==|!=|=)\s*([-A-Za-z0-9_.]*)\s*$")
_EXISTS_RE = re.compile(rf"^\s*(!?)\s*({_LABEL_KEY})\s*$")


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [p for p in parts if p.strip()]


def label_selector_matcher(text: str) -> Callable[[dict[str, str]], bool]:
    """A predicate on a label map for ``labelSelector`` text; ApiError 400 when malformed."""
    checks: list[Callable[[dict[str, str]], bool]] = []
    for part in _split_top_level(text or ""):
        if m := _SET_RE.match(part):
            key, op = m.group(1), m.group(2)
            values = {v.strip() for v in m.group(3).split(",") if v.strip()}
            if op == "in":
                checks.append(lambda labels, k=key, vs=values: labels.get(k) in vs)
            else:
                checks.append(lambda labels, k=key, vs=values: labels.get(k) not in vs)
        elif m := _EQ_RE.match(part):
            key, op, value = m.groups()
            if op == "!=":
                checks.append(lambda labels, k=key, v=value: labels.get(k) != v)
            else:
                checks.append(lambda labels, k=key, v=value: labels.get(k) == v)
        elif m := _EXISTS_RE.match(part):
            negate, key = m.groups()
            if negate:
                checks.append(lambda labels, k=key: k not in labels)
            else:
                checks.append(lambda labels, k=key: k in labels)
        else:
            raise ApiError(400, f"unable to parse requirement: {part.strip()!r} in labelSelector {text!r}")
    return lambda labels: all(check(labels) for check in checks)


def selector_matches(selector: JSON | None, labels: dict[str, str]) -> bool:
    """``metav1.LabelSelector`` semantics: None selects nothing, ``{}`` selects everything."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), set(expr.get("values") or [])
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _field_value(obj: JSON, path: str) -> str:
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, dict):
            return ""
        current = current.get(part)
    if current is None:
        return ""
    if isinstance(current, bool):
        return "true" if current else "false"
    return str(current)


def field_selector_matcher(rt: ResourceType, text: str) -> Callable[[JSON], bool]:
    checks: list[Callable[[JSON], bool]] = []
    for part in _split_top_level(text or ""):
        m = re.match(r"^\s*([A-Za-z0-9_.]+)\s*(==|!=|=)\s*(.*?)\s*$", part)
        if not m:
            raise ApiError(400, f"invalid field selector: {part.strip()!r}")
        path, op, value = m.groups()
        allowed = path in ("metadata.name", "metadata.namespace") or rt.field_labels is None or path in rt.field_labels
        if not allowed:
            raise ApiError(400, f"field label not supported: {path}")
        if op == "!=":
            checks.append(lambda obj, p=path, v=value: _field_value(obj, p) != v)
        else:
            checks.append(lambda obj, p=path, v=value: _field_value(obj, p) == v)
    return lambda obj: all(check(obj) for check in checks)


# --------------------------------------------------------------------------- patches


def merge_patch(target: Any, patch: Any, *, strategic: bool = False) -> Any:
    """RFC 7386 JSON merge patch (``strategic`` also drops ``$`` directive keys)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if strategic and key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value, strategic=strategic)
    return result


class PatchError(Exception):
    pass


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"JSON pointer must start with '/': {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str]) -> tuple[Any, str]:
    current = doc
    for part in parts[:-1]:
        if isinstance(current, dict):
            if part not in current:
                raise PatchError(f"path element {part!r} not found")
            current = current[part]
        elif isinstance(current, list):
            try:
                current = current[int(part)]
            except (ValueError, IndexError):
                raise PatchError(f"index {part!r} out of range") from None
        else:
            raise PatchError(f"cannot descend into {type(current).__name__} at {part!r}")
    return current, parts[-1]


def _get(doc: Any, parts: list[str]) -> Any:
    if not parts:
        return doc
    container, last = _parent(doc, parts)
    if isinstance(container, dict):
        if last not in container:
            raise PatchError(f"path element {last!r} not found")
        return container[last]
    if isinstance(container, list):
        try:
            return container[int(last)]
        except (ValueError, IndexError):
            raise PatchError(f"index {last!r} out of range") from None
    raise PatchError("not a container")


def _remove(doc: Any, parts: list[str]) -> Any:
    container, last = _parent(doc, parts)
    if isinstance(container, dict):
        if last not in container:
            raise PatchError(f"cannot remove missing {last!r}")
        return container.pop(last)
    if isinstance(container, list):
        try:
            return container.pop(int(last))
        except (ValueError, IndexError):
            raise PatchError(f"index {last!r} out of range") from None
    raise PatchError("not a container")


def _add(doc: Any, parts: list[str], value: Any, *, replace: bool = False) -> Any:
    if not parts:
        return copy.deepcopy(value)
    container, last = _parent(doc, parts)
    if isinstance(container, dict):
        if replace and last not in container:
            raise PatchError(f"cannot replace missing {last!r}")
        container[last] = copy.deepcopy(value)
    elif isinstance(container, list):
        if last == "-" and not replace:
            container.append(copy.deepcopy(value))
        else:
            try:
                index = int(last)
            except ValueError:
                raise PatchError(f"bad index {last!r}") from None
            if replace:
                if not 0 <= index < len(container):
                    raise PatchError(f"index {index} out of range")
                container[index] = copy.deepcopy(value)
            else:
                if not 0 <= index <= len(container):
                    raise PatchError(f"index {index} out of range")
                container.insert(index, copy.deepcopy(value))
    else:
        raise PatchError("not a container")
    return doc


def json_patch(doc: Any, operations: Any) -> Any:
    """RFC 6902 JSON patch; raises PatchError (422 on the wire) when an operation fails."""
    if not isinstance(operations, list):
        raise ValueError("a JSON patch must be a list of operations")
    result = copy.deepcopy(doc)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise ValueError(f"malformed JSON patch operation: {op!r}")
        kind, parts = op["op"], _pointer(op["path"])
        if kind == "add":
            result = _add(result, parts, op.get("value"))
        elif kind == "remove":
            _remove(result, parts)
        elif kind == "replace":
            result = _add(result, parts, op.get("value"), replace=True) if parts else copy.deepcopy(op.get("value"))
        elif kind == "test":
            if _get(result, parts) != op.get("value"):
                raise PatchError(f"testing value {op['path']} failed")
        elif kind in ("move", "copy"):
            source = _pointer(op.get("from", ""))
            value = _remove(result, source) if kind == "move" else copy.deepcopy(_get(result, source))
            result = _add(result, parts, value)
        else:
            raise ValueError(f"unknown JSON patch operation {kind!r}")
    return result


# --------------------------------------------------------------------------- the server


CONFIGMAP_LIMIT = 1024 * 1024  # k8s.io/api/core/v1 MaxConfigMapSize, checked by ValidateConfigMap


def _check_size(rt: ResourceType, body: JSON) -> None:
    """The API server refuses a ConfigMap whose data and binaryData (keys and values) exceed 1 MiB."""
    if rt.kind != "ConfigMap":
        return
    total = sum(
        len(str(k)) + len(str(v).encode()) for part in ("data", "binaryData") for k, v in (body.get(part) or {}).items()
    )
    if total > CONFIGMAP_LIMIT:
        name = (body.get("metadata") or {}).get("name", "")
        raise ApiError(
            422,
            f'ConfigMap "{name}" is invalid: []: Too long: must have at most {CONFIGMAP_LIMIT} bytes',
            details={"name": name, "kind": "configmaps"},
        )


def _namespace_of(path: str) -> str:
    parts = path.strip("/").split("/")
    return unquote(parts[parts.index("namespaces") + 1]) if "namespaces" in parts[:-1] else ""


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _b64(data: JSON) -> str:
    return base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode()).decode().rstrip("=")


def _unb64(token: str) -> JSON:
    padded = token + "=" * (-len(token) % 4)
    value = json.loads(base64.urlsafe_b64decode(padded.encode()))
    if not isinstance(value, dict):
        raise ValueError("not an object")
    return value


Route = Callable[["FakeApiServer", RecordedRequest, "re.Match[str]"], Reply | None]


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (it timed out before a delayed reply) is expected, not a traceback on stderr."""
        import sys

        if isinstance(sys.exc_info()[1], BrokenPipeError | ConnectionResetError):
            return
        super().handle_error(request, client_address)


class FakeApiServer:
    """In-memory Kubernetes API on 127.0.0.1. Use as a context manager or ``start()``/``stop()``."""

    def __init__(self, *, token: str | None = None, disruption_controller: DisruptionController | None = None) -> None:
        self.token = token  # when set, requests without "Authorization: Bearer <token>" get 401
        # kube-controller-manager's disruption controller: recomputes PDB status after every write (None: status as written)
        self.disruption_controller = disruption_controller
        self.on_evict: Callable[[FakeApiServer, JSON], None] | None = None  # default: delete the pod
        self.lock = threading.RLock()
        self._store: dict[str, dict[tuple[str, str], JSON]] = {rt.key: {} for rt in RESOURCE_TYPES}
        self._rv = itertools.count(1)
        self._uid = itertools.count(1)
        self.resource_version = 0
        self._requests: list[RecordedRequest] = []
        self._injections: list[Injection] = []
        self._routes: list[tuple[str | None, re.Pattern[str], Route]] = []
        self._expire: list[list[Any]] = []  # [token or None, remaining]
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._clients: list[Any] = []
        self.errors: list[Exception] = []  # unexpected exceptions raised while answering
        self._replies: dict[int, Reply] = {}

    # ---- lifecycle

    def start(self) -> FakeApiServer:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._httpd = _Server(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"fake-kube-api-{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        for api_client in self._clients:
            api_client.close()
        self._clients.clear()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ---- clients

    def api_client(self, **configuration: Any) -> Any:
        """A ``kubernetes.client.ApiClient`` for this server (no TLS; the bearer token if one is required).

        Keyword arguments set ``Configuration`` attributes (e.g. ``retries=False``).
        Closed when the server stops.
        """
        from kubernetes import client as k8s

        config = k8s.Configuration(host=self.url)
        if self.token:
            config.api_key = {"BearerToken": self.token}
            config.api_key_prefix = {"BearerToken": "Bearer"}
        for name, value in configuration.items():
            if not hasattr(config, name):
                raise AttributeError(f"kubernetes Configuration has no attribute {name!r}")
            setattr(config, name, value)
        api_client = k8s.ApiClient(configuration=config)
        self._clients.append(api_client)
        return api_client

    def write_kubeconfig(self, path: str | Path, *, context: str = "fake", token: str | None = None) -> Path:
        """A kubeconfig file whose ``context`` (also the current one) points at this server."""
        import yaml

        document = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": f"{context}-cluster", "cluster": {"server": self.url}}],
            "users": [{"name": f"{context}-user", "user": {"token": token or self.token or "fake-token"}}],
            "contexts": [{"name": context, "context": {"cluster": f"{context}-cluster", "user": f"{context}-user"}}],
            "current-context": context,
        }
        target = Path(path)
        target.write_text(yaml.safe_dump(document), encoding="utf-8")
        return target

    # ---- store

    def _next_rv(self) -> str:
        self.resource_version = next(self._rv)
        return str(self.resource_version)

    def add(self, *objects: JSON) -> None:
        """Store objects (or ``List``s of them) as given, filling namespace/uid/resourceVersion/creationTimestamp."""
        touched: set[str] = set()
        with self.lock:
            for obj in objects:
                if "items" in obj and str(obj.get("kind", "List")).endswith("List"):
                    item_kind = str(obj.get("kind", "")).removesuffix("List")
                    self.add(
                        *(
                            {"kind": item_kind, **item} if item_kind and "kind" not in item else item
                            for item in obj["items"]
                        )
                    )
                    continue
                rt = resource_type(str(obj.get("kind", "")), obj.get("apiVersion"))
                stored = copy.deepcopy(obj)
                stored["kind"], stored["apiVersion"] = rt.kind, rt.api_version
                meta = stored.setdefault("metadata", {})
                if not meta.get("name"):
                    raise ValueError(f"{rt.kind} without metadata.name")
                if rt.namespaced:
                    meta.setdefault("namespace", "default")
                else:
                    meta.pop("namespace", None)
                meta.setdefault("uid", f"fake-uid-{next(self._uid)}")
                meta.setdefault("creationTimestamp", _now())
                meta["resourceVersion"] = self._next_rv()
                self._store[rt.key][(meta.get("namespace", ""), meta["name"])] = stored
                touched.add(meta.get("namespace", ""))
            self._controllers_sync(touched)

    def _controllers_sync(self, namespaces: set[str]) -> None:
        """What kube-controller-manager would do after writes in ``namespaces`` (cluster-scoped writes: ``""``)."""
        if self.disruption_controller is not None and namespaces - {""}:
            self.disruption_controller.sync(self._store, selector_matches, self._next_rv, namespaces - {""})

    def get(self, kind: str, name: str, namespace: str | None = None) -> JSON | None:
        rt = resource_type(kind)
        with self.lock:
            obj = self._store[rt.key].get((namespace or ("default" if rt.namespaced else ""), name))
            return copy.deepcopy(obj) if obj is not None else None

    def objects(self, kind: str, namespace: str | None = None) -> list[JSON]:
        rt = resource_type(kind)
        with self.lock:
            return [
                copy.deepcopy(obj)
                for (ns, _), obj in sorted(self._store[rt.key].items())
                if namespace is None or ns == namespace
            ]

    def events(self, namespace: str | None = None) -> list[JSON]:
        """Events posted through either events API (core v1 first)."""
        return self.objects("events", namespace) + self.objects("events.k8s.io/events", namespace)

    def delete(self, kind: str, name: str, namespace: str | None = None) -> bool:
        rt = resource_type(kind)
        namespace = namespace or ("default" if rt.namespaced else "")
        with self.lock:
            removed = self._store[rt.key].pop((namespace, name), None)
            if removed is not None:
                self._next_rv()
                self._controllers_sync({namespace})
            return removed is not None

    def update(self, obj: JSON) -> None:
        """Replace a stored object (same kind/namespace/name) and bump its resourceVersion."""
        self.add(obj)

    # ---- recording and injection

    @property
    def requests(self) -> list[RecordedRequest]:
        with self.lock:
            return list(self._requests)

    def requests_to(self, path: str | re.Pattern[str], method: str | None = None) -> list[RecordedRequest]:
        def hit(r: RecordedRequest) -> bool:
            ok = bool(path.fullmatch(r.path)) if isinstance(path, re.Pattern) else r.path == path
            return ok and (method is None or r.method == method.upper())

        return [r for r in self.requests if hit(r)]

    def clear_requests(self) -> None:
        with self.lock:
            self._requests.clear()
            self._replies.clear()

    def reply_to(self, request: RecordedRequest) -> Reply | None:
        """What the server answered to a recorded request (None: dropped, or not answered yet)."""
        with self.lock:
            return self._replies.get(id(request))

    def _sent(self, request: RecordedRequest, reply: Reply) -> None:
        with self.lock:
            self._replies[id(request)] = reply

    def inject(self, path: str | re.Pattern[str], status: int = 500, **options: Any) -> Injection:
        """The next ``times`` (default 1; None = forever) requests to ``path`` get ``status``.

        Options: ``method``, ``query`` (params that must match), ``body`` (default: a Status),
        ``headers`` (e.g. ``{"Retry-After": "1"}``), ``delay`` (seconds), ``drop`` (close without
        answering), ``passthrough`` (answer normally after ``delay``), ``when`` (predicate).
        """
        injection = Injection(path=path, status=status, **options)
        with self.lock:
            self._injections.append(injection)
        return injection

    def expire_continue(self, token: str | None = None, *, times: int = 1) -> None:
        """The next ``times`` list requests carrying ``token`` (None = any continue token) get 410 Expired."""
        with self.lock:
            self._expire.append([token, times])

    def route(self, method: str | None, pattern: str, handler: Route) -> None:
        """A custom handler for paths fully matching ``pattern``, tried before the built-in ones.

        ``handler(server, request, match)`` returns a ``Reply`` or None to fall through.
        """
        with self.lock:
            self._routes.append((method.upper() if method else None, re.compile(pattern), handler))

    # ---- dispatch

    def handle(self, request: RecordedRequest) -> Reply | Injection:
        with self.lock:
            self._requests.append(request)
            for injection in self._injections:
                if injection.matches(request):
                    injection.hits.append(request)
                    return injection
        return self.answer(request)

    def answer(self, request: RecordedRequest) -> Reply:
        try:
            if self.token and request.header("Authorization") != f"Bearer {self.token}":
                raise ApiError(401, "Unauthorized")
            for method, pattern, handler in list(self._routes):
                if method is not None and method != request.method:
                    continue
                match = pattern.fullmatch(request.path)
                if match:
                    reply = handler(self, request, match)
                    if reply is not None:
                        return reply
            with self.lock:
                reply = self._builtin(request)
                if request.method not in ("GET", "HEAD"):
                    self._controllers_sync({_namespace_of(request.path)})
                return reply
        except ApiError as exc:
            return exc.reply
        except Exception as exc:  # a bug in the fake (or a test's route): answer 500 and keep it for the test to see
            with self.lock:
                self.errors.append(exc)
            return Reply(500, status_body(500, f"fake API server error: {type(exc).__name__}: {exc}"))

    def _builtin(self, request: RecordedRequest) -> Reply:
        path = request.path.rstrip("/") or "/"
        if path == "/version" and request.method == "GET":
            return Reply(200, {"major": "1", "minor": "31", "gitVersion": "v1.31.0-fake", "platform": "linux/amd64"})
        parts = [unquote(p) for p in path.strip("/").split("/")]
        if parts[:1] == ["api"] and len(parts) >= 2:
            prefix, rest = f"/api/{parts[1]}", parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            prefix, rest = f"/apis/{parts[1]}/{parts[2]}", parts[3:]
        else:
            raise ApiError(404, "the server could not find the requested resource")
        namespace: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise ApiError(404, "the server could not find the requested resource")
        rt = _BY_PATH.get((prefix, rest[0]))
        if rt is None or (namespace is not None and not rt.namespaced):
            raise ApiError(404, "the server could not find the requested resource")
        name = rest[1] if len(rest) >= 2 else None
        sub = rest[2] if len(rest) == 3 else None
        if name is None:
            if request.method == "GET":
                return self._list(rt, namespace, request)
            if request.method == "POST" and (namespace is not None or not rt.namespaced):
                return self._create(rt, namespace, request)
            raise ApiError(405, f"{request.method} is not supported on the {rt.key} collection by the fake API server")
        if rt.namespaced and namespace is None:
            raise ApiError(404, "the server could not find the requested resource")
        ns = namespace or ""
        if sub == "eviction" and rt.key == "pods" and request.method == "POST":
            return self._evict(ns, name, request)
        if sub not in (None, "status"):
            raise ApiError(404, "the server could not find the requested resource")
        if request.method == "GET":
            obj = self._store[rt.key].get((ns, name))
            if obj is None:
                raise _not_found(rt, name)
            return Reply(200, copy.deepcopy(obj))
        if request.method == "PATCH":
            return self._patch(rt, ns, name, request)
        if request.method == "PUT":
            return self._replace(rt, ns, name, request)
        if request.method == "DELETE":
            return self._delete(rt, ns, name, request)
        raise ApiError(405, f"{request.method} is not supported on {rt.key} by the fake API server")

    # ---- verbs

    def _list(self, rt: ResourceType, namespace: str | None, request: RecordedRequest) -> Reply:
        if request.param("watch") in ("true", "1"):
            raise ApiError(400, "watch is not supported by the fake API server")
        label_sel, field_sel = request.param("labelSelector") or "", request.param("fieldSelector") or ""
        labels_ok = label_selector_matcher(label_sel)
        fields_ok = field_selector_matcher(rt, field_sel)
        limit_text = request.param("limit")
        try:
            limit = int(limit_text) if limit_text else 0
        except ValueError:
            raise ApiError(400, f"invalid limit {limit_text!r}") from None
        token = request.param("continue")
        start: tuple[str, str] | None = None
        if token:
            try:
                decoded = _unb64(token)
                start = (str(decoded["start"][0]), str(decoded["start"][1]))
                if decoded.get("path") != request.path:
                    raise ValueError("token from another list")
            except (ValueError, KeyError, IndexError, TypeError):
                raise ApiError(400, f"continue key is not valid: {token!r}") from None
            for rule in self._expire:
                if rule[1] > 0 and rule[0] in (None, token):
                    rule[1] -= 1
                    fresh = _b64({"path": request.path, "start": list(start), "rv": self.resource_version})
                    raise ApiError(
                        410,
                        "The provided continue parameter is too old to display a consistent list result. You can start a new "
                        "list without the continue parameter, or use the continue token in this response to retrieve the "
                        "remainder of the results. Continuing with the provided token results in an inconsistent list - "
                        "objects that were created, modified, or deleted between the time the first chunk was returned "
                        "and now may show up in the list.",
                        reason="Expired",
                        metadata={"continue": fresh},
                    )
        selected = [
            (key, obj)
            for key, obj in sorted(self._store[rt.key].items())
            if (namespace is None or key[0] == namespace)
            and (start is None or key > start)
            and labels_ok((obj.get("metadata") or {}).get("labels") or {})
            and fields_ok(obj)
        ]
        metadata: JSON = {"resourceVersion": str(self.resource_version)}
        page = selected
        if limit > 0 and len(selected) > limit:
            page = selected[:limit]
            metadata["continue"] = _b64({"path": request.path, "start": list(page[-1][0]), "rv": self.resource_version})
            if not label_sel and not field_sel:
                metadata["remainingItemCount"] = len(selected) - limit
        items = []
        for _, obj in page:
            item = copy.deepcopy(obj)
            item.pop("kind", None)  # the real server omits kind/apiVersion on list items
            item.pop("apiVersion", None)
            items.append(item)
        return Reply(
            200, {"kind": f"{rt.kind}List", "apiVersion": rt.api_version, "metadata": metadata, "items": items}
        )

    def _body_object(self, request: RecordedRequest) -> Any:
        try:
            return request.json()
        except ValueError as exc:
            raise ApiError(400, f"the request body is not valid JSON: {exc}") from None

    def _create(self, rt: ResourceType, namespace: str | None, request: RecordedRequest) -> Reply:
        if request.content_type not in ("application/json", ""):
            raise ApiError(
                415,
                f"the body of the request was in an unknown format - accepted media types include: application/json; "
                f"got {request.content_type}",
            )
        body = self._body_object(request)
        if not isinstance(body, dict):
            raise ApiError(400, "the request body must be a JSON object")
        if body.get("kind") not in (None, rt.kind):
            raise ApiError(400, f"the kind {body.get('kind')!r} does not match the endpoint's {rt.kind}")
        meta = body.setdefault("metadata", {})
        if namespace is not None:
            if meta.get("namespace") not in (None, "", namespace):
                raise ApiError(
                    400, "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = namespace
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise ApiError(
                    422,
                    f"{rt.kind} is invalid: metadata.name: Required value: name or generateName is required",
                    details={"kind": rt.plural},
                )
            meta["name"] = f"{meta['generateName']}{next(self._uid):05d}"
        key = (meta.get("namespace", ""), meta["name"])
        if key in self._store[rt.key]:
            what = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
            raise ApiError(
                409,
                f'{what} "{meta["name"]}" already exists',
                reason="AlreadyExists",
                details={"name": meta["name"], "kind": rt.plural},
            )
        body["kind"], body["apiVersion"] = rt.kind, rt.api_version
        _check_size(rt, body)
        meta["uid"] = f"fake-uid-{next(self._uid)}"
        meta.setdefault("creationTimestamp", _now())
        if request.param("dryRun") != "All":
            meta["resourceVersion"] = self._next_rv()
            self._store[rt.key][key] = copy.deepcopy(body)
        return Reply(201, body)

    def _patch(self, rt: ResourceType, ns: str, name: str, request: RecordedRequest) -> Reply:
        current = self._store[rt.key].get((ns, name))
        if current is None:
            raise _not_found(rt, name)
        patch = self._body_object(request)
        content_type = request.content_type
        try:
            if content_type in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
                if not isinstance(patch, dict):
                    raise ApiError(400, "a merge patch must be a JSON object")
                patched = merge_patch(current, patch, strategic=content_type.startswith("application/strategic"))
                precondition = (
                    (patch.get("metadata") or {}).get("resourceVersion")
                    if isinstance(patch.get("metadata"), dict)
                    else None
                )
            elif content_type == "application/json-patch+json":
                patched = json_patch(current, patch)
                precondition = (
                    (patched.get("metadata") or {}).get("resourceVersion") if isinstance(patched, dict) else None
                )
                if precondition == current["metadata"]["resourceVersion"]:
                    precondition = None
            else:
                raise ApiError(
                    415,
                    f"the body of the request was in an unknown format - accepted media types include: "
                    f"application/json-patch+json, application/merge-patch+json, "
                    f"application/strategic-merge-patch+json; got {content_type or 'none'}",
                )
        except ValueError as exc:
            raise ApiError(400, str(exc)) from None
        except PatchError as exc:
            raise ApiError(422, str(exc)) from None
        if not isinstance(patched, dict):
            raise ApiError(422, "the patched object is not a JSON object")
        if precondition is not None and str(precondition) != current["metadata"]["resourceVersion"]:
            raise _conflict(rt, name)
        meta = patched.setdefault("metadata", {})
        if meta.get("name") != name or (rt.namespaced and meta.get("namespace") != ns):
            raise ApiError(422, f'{rt.kind} "{name}" is invalid: metadata.name: Invalid value: field is immutable')
        meta["uid"] = current["metadata"].get("uid")
        patched["kind"], patched["apiVersion"] = rt.kind, rt.api_version
        if request.param("dryRun") != "All":
            meta["resourceVersion"] = self._next_rv()
            self._store[rt.key][(ns, name)] = copy.deepcopy(patched)
        else:
            meta["resourceVersion"] = current["metadata"]["resourceVersion"]
        return Reply(200, patched)

    def _replace(self, rt: ResourceType, ns: str, name: str, request: RecordedRequest) -> Reply:
        current = self._store[rt.key].get((ns, name))
        if current is None:
            raise _not_found(rt, name)
        body = self._body_object(request)
        if not isinstance(body, dict):
            raise ApiError(400, "the request body must be a JSON object")
        meta = body.setdefault("metadata", {})
        if meta.get("name") != name:
            raise ApiError(400, "the name of the object does not match the name on the URL")
        if meta.get("resourceVersion") and meta["resourceVersion"] != current["metadata"]["resourceVersion"]:
            raise _conflict(rt, name)
        if rt.namespaced:
            meta["namespace"] = ns
        meta["uid"] = current["metadata"].get("uid")
        meta["creationTimestamp"] = current["metadata"].get("creationTimestamp")
        body["kind"], body["apiVersion"] = rt.kind, rt.api_version
        _check_size(rt, body)
        if request.param("dryRun") != "All":
            meta["resourceVersion"] = self._next_rv()
            self._store[rt.key][(ns, name)] = copy.deepcopy(body)
        return Reply(200, body)

    def _delete(self, rt: ResourceType, ns: str, name: str, request: RecordedRequest) -> Reply:
        current = self._store[rt.key].get((ns, name))
        if current is None:
            raise _not_found(rt, name)
        options = self._body_object(request) or {}
        preconditions = options.get("preconditions") or {} if isinstance(options, dict) else {}
        if preconditions.get("uid") and preconditions["uid"] != current["metadata"].get("uid"):
            raise ApiError(
                409,
                f"Precondition failed: UID in precondition: {preconditions['uid']}, "
                f"UID in object meta: {current['metadata'].get('uid')}",
            )
        if (
            preconditions.get("resourceVersion")
            and preconditions["resourceVersion"] != current["metadata"]["resourceVersion"]
        ):
            raise _conflict(rt, name)
        dry_run = request.param("dryRun") == "All" or "All" in (
            (options.get("dryRun") or []) if isinstance(options, dict) else []
        )
        if not dry_run:
            del self._store[rt.key][(ns, name)]
            self._next_rv()
        return Reply(200, copy.deepcopy(current))

    def _evict(self, ns: str, name: str, request: RecordedRequest) -> Reply:
        body = self._body_object(request)
        if not isinstance(body, dict):
            raise ApiError(400, "the request body must be a policy/v1 Eviction")
        if body.get("kind") not in (None, "Eviction"):
            raise ApiError(400, f"expected kind Eviction, got {body.get('kind')!r}")
        meta = body.get("metadata") or {}
        if meta.get("name") and meta["name"] != name:
            raise ApiError(400, "name in URL does not match name in Eviction object")
        if meta.get("namespace") not in (None, "", ns):
            raise ApiError(400, "the namespace of the provided object does not match the namespace sent on the request")
        pods = self._store["pods"]
        pod = pods.get((ns, name))
        if pod is None:
            raise ApiError(404, f'pods "{name}" not found', details={"name": name, "kind": "pods"})
        options = body.get("deleteOptions") or {}
        dry_run = request.param("dryRun") == "All" or "All" in (options.get("dryRun") or [])
        preconditions = options.get("preconditions") or {}
        if preconditions.get("uid") and preconditions["uid"] != pod["metadata"].get("uid"):
            raise ApiError(
                409,
                f"Precondition failed: UID in precondition: {preconditions['uid']}, "
                f"UID in object meta: {pod['metadata'].get('uid')}",
            )
        if (
            preconditions.get("resourceVersion")
            and preconditions["resourceVersion"] != pod["metadata"]["resourceVersion"]
        ):
            raise _conflict(resource_type("pods"), name)
        phase = (pod.get("status") or {}).get("phase")
        ignore_pdb = phase in ("Succeeded", "Failed", "Pending") or bool(pod["metadata"].get("deletionTimestamp"))
        if not ignore_pdb:
            labels = pod["metadata"].get("labels") or {}
            budgets = [
                pdb
                for (pdb_ns, _), pdb in sorted(self._store["policy/poddisruptionbudgets"].items())
                if pdb_ns == ns and selector_matches((pdb.get("spec") or {}).get("selector"), labels)
            ]
            if len(budgets) > 1:
                raise ApiError(
                    500,
                    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                )
            if budgets:
                budget = budgets[0]
                status = budget.setdefault("status", {})
                if int(status.get("disruptionsAllowed", 0)) <= 0:
                    budget_name = budget["metadata"]["name"]
                    raise ApiError(
                        429,
                        "Cannot evict pod as it would violate the pod's disruption budget.",
                        details={
                            "causes": [
                                {
                                    "reason": "DisruptionBudget",
                                    "message": f"The disruption budget {budget_name} needs {status.get('desiredHealthy', 0)} healthy pods "
                                    f"and has {status.get('currentHealthy', 0)} currently",
                                }
                            ]
                        },
                    )
                if not dry_run:
                    status["disruptionsAllowed"] = int(status["disruptionsAllowed"]) - 1
                    status.setdefault("disruptedPods", {})[name] = _now()
                    budget["metadata"]["resourceVersion"] = self._next_rv()
        if not dry_run:
            if self.on_evict is not None:
                self.on_evict(self, copy.deepcopy(pod))
            else:
                del pods[(ns, name)]
                self._next_rv()
        return Reply(201, status_body(201))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in separate writes; avoid 40 ms delayed-ACK stalls
    fake: FakeApiServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _serve(self) -> None:
        split = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        request = RecordedRequest(
            method=self.command,
            path=split.path,
            query=parse_qs(split.query, keep_blank_values=True),
            headers=dict(self.headers.items()),
            body=body,
            at=time.monotonic(),
        )
        outcome = self.fake.handle(request)
        if isinstance(outcome, Injection):
            if outcome.delay:
                self.fake._stopping.wait(outcome.delay)
            if outcome.drop:
                self.close_connection = True
                return
            if outcome.passthrough:
                reply = self.fake.answer(request)
            else:
                reply = Reply(
                    outcome.status,
                    outcome.body if outcome.body is not None else status_body(outcome.status),
                    dict(outcome.headers),
                )
        else:
            reply = outcome
        self.fake._sent(request, reply)
        self._send(reply)

    def _send(self, reply: Reply) -> None:
        payload = b"" if reply.body is None else json.dumps(reply.body).encode()
        self.send_response(reply.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for key, value in reply.headers.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _serve

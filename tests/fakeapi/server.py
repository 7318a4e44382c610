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

The server is ``FakeApiServer`` (lifecycle, clients, dispatch); its other concerns have modules of their own:
``transport.py`` (HTTP), ``store.py`` (the objects), ``listing.py``, ``writes.py`` and ``eviction.py`` (the verbs),
``recording.py`` (requests, replies, injections), ``messages.py`` (requests, replies, ``Status`` errors),
``resources.py``, ``selectors.py``, ``patches.py``.
"""

from __future__ import annotations

import copy
import itertools
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from tests.fakeapi.disruption import DisruptionController
from tests.fakeapi.eviction import Eviction
from tests.fakeapi.listing import Listing
from tests.fakeapi.messages import ApiError, RecordedRequest, Reply, status_body
from tests.fakeapi.recording import Injection, RequestRecording
from tests.fakeapi.resources import BY_PATH, RESOURCE_TYPES
from tests.fakeapi.transport import ApiHttpServer, ApiRequestHandler
from tests.fakeapi.writes import Writes


def _namespace_of(path: str) -> str:
    parts = path.strip("/").split("/")
    return unquote(parts[parts.index("namespaces") + 1]) if "namespaces" in parts[:-1] else ""


Route = Callable[["FakeApiServer", RecordedRequest, "re.Match[str]"], Reply | None]


class FakeApiServer(Listing, Writes, Eviction, RequestRecording):
    """In-memory Kubernetes API on 127.0.0.1. Use as a context manager or ``start()``/``stop()``."""

    def __init__(self, *, token: str | None = None, disruption_controller: DisruptionController | None = None) -> None:
        self.token = token  # when set, requests without "Authorization: Bearer <token>" get 401
        self.username = "system:admin"  # who every authenticated request is by (a SelfSubjectReview's answer)
        self.disruption_controller = disruption_controller
        self.on_evict = None
        self.lock = threading.RLock()
        self._store = {rt.key: {} for rt in RESOURCE_TYPES}
        self._rv = itertools.count(1)
        self._uid = itertools.count(1)
        self.resource_version = 0
        self._requests = []
        self._injections = []
        self._routes: list[tuple[str | None, re.Pattern[str], Route]] = []
        self._expire = []
        self._stopping = threading.Event()
        self._httpd: ApiHttpServer | None = None
        self._thread: threading.Thread | None = None
        self._clients: list[Any] = []
        self.errors: list[Exception] = []  # unexpected exceptions raised while answering
        self._replies = {}

    # ---- lifecycle

    def start(self) -> FakeApiServer:
        handler = type("Handler", (ApiRequestHandler,), {"fake": self})
        self._httpd = ApiHttpServer(("127.0.0.1", 0), handler)
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

    # ---- dispatch

    def route(self, method: str | None, pattern: str, handler: Route) -> None:
        """A custom handler for paths fully matching ``pattern``, tried before the built-in ones.

        ``handler(server, request, match)`` returns a ``Reply`` or None to fall through.
        """
        with self.lock:
            self._routes.append((method.upper() if method else None, re.compile(pattern), handler))

    def handle(self, request: RecordedRequest) -> Reply | Injection:
        """Record the request; the injection that answers it, or the reply."""
        injection = self._record(request)
        return injection if injection is not None else self.answer(request)

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
        if path == "/apis/authentication.k8s.io/v1/selfsubjectreviews" and request.method == "POST":
            # who the request is by: the fake has one user (its token's, or anyone's without one), as a cluster admin
            review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
            return Reply(
                201, review | {"status": {"userInfo": {"username": self.username, "groups": ["system:masters"]}}}
            )
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
        rt = BY_PATH.get((prefix, rest[0]))
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
            return Reply(200, copy.deepcopy(self._existing(rt, ns, name)))
        if request.method == "PATCH":
            return self._patch(rt, ns, name, request)
        if request.method == "PUT":
            return self._replace(rt, ns, name, request)
        if request.method == "DELETE":
            return self._delete(rt, ns, name, request)
        raise ApiError(405, f"{request.method} is not supported on {rt.key} by the fake API server")

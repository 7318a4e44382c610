"""Fake kubelets inside the test process: Node objects that the control plane treats as live, for any API server.

``fake_nodes(api_client, NodeSet(...), log_file)`` is a context manager. On entry it creates
the set's Node objects, writes their status once, and starts three background threads that
play the kubelet of exactly those nodes; it yields the node names once the scheduler may
use every one (Ready, no NoSchedule/NoExecute taint). On exit it stops the threads, waits
for them, and deletes exactly its nodes and their Leases, by name (and the nodes by UID).

What the threads do, through the official ``kubernetes`` client (replies read as raw JSON):

* heartbeat: renews each node's Lease in ``kube-node-lease`` every 10 s (holder = node,
  40 s duration, owned by the Node) and refreshes the heartbeat of the node's conditions
  (Ready True, the pressure conditions False) every 30 s, so the node-lifecycle controller
  never taints or evicts. ``status.capacity``/``allocatable`` are written only on creation:
  tests patch them afterwards ("Advertise Extended Resources for a Node") and keep them;
* pods: lists, then watches, every pod from the list's resourceVersion (re-listing after a
  410 or an error, with a bounded backoff). A pod newly bound to one of the nodes is patched
  Running/Ready with started, ready, running container statuses (init containers Completed,
  sidecars running), hostIP 127.0.0.1, as a kubelet would report it. A pod on one of the nodes
  that gets a ``deletionTimestamp`` (an eviction, a scale-down) is handed to the terminator;
* terminator: after ``termination_delay`` seconds (default 0) deletes that pod with
  ``gracePeriodSeconds=0`` and a UID precondition, once per pod UID, so the pod object goes
  and the scheduler sees its resources free, as after a real kubelet's graceful stop.

Nothing listens behind the nodes: they advertise 127.0.0.1 only and no image is ever pulled.
The control plane can be realk8s (no kubelets at all) or kind (the nodes are extra Node
objects beside the real workers; only pods bound to these nodes are touched). Each
``fake_nodes`` serves only its own nodes, so several sets may run side by side.
"""

from __future__ import annotations

import heapq
import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from tests.e2e.helpers import GPU, Obj, blocking_taints, is_ready_node, labels, name_of, raw, wait_for

MARKER_LABEL = "gpu-compactor-e2e/fake-kubelet"  # on every node created here: "true"
LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_SECONDS = 40
LEASE_INTERVAL = 10.0  # seconds between Lease renewals
STATUS_INTERVAL = 30.0  # seconds between heartbeats of the node conditions
KUBELET_VERSION = "v1.36.2-gpu-compactor-e2e"
STARTUP_TIMEOUT = 90
REQUEST_TIMEOUT = 15  # seconds, every non-watch request
WATCH_SECONDS = 60  # server-side timeout of one pod watch; then the watch resumes from the last resourceVersion
BACKOFF_FIRST, BACKOFF_MAX = 0.5, 10.0
STOP_TIMEOUT = REQUEST_TIMEOUT + 5  # seconds each thread may take to finish its current request at exit
FINAL_DELETE_ATTEMPTS = 8

STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"


@dataclass(frozen=True)
class NodeSet:
    """``count`` uniform nodes ``<prefix>0 .. <prefix>N-1``, each with ``gpus`` nvidia.com/gpu (0: none), ``labels`` and ``resources``."""

    prefix: str
    count: int
    gpus: int
    labels: Mapping[str, str] = field(default_factory=dict)
    cpu: str = "64"
    memory: str = "512Gi"
    pods: int = 110
    ephemeral_storage: str = "500Gi"
    resources: Mapping[str, str] = field(default_factory=dict)  # extra (or overriding) resources, e.g. MIG profiles

    @property
    def names(self) -> list[str]:
        return [f"{self.prefix}{i}" for i in range(self.count)]

    def capacity(self) -> dict[str, str]:
        """status.capacity (and allocatable) of every node."""
        found = {
            "cpu": self.cpu,
            "memory": self.memory,
            "pods": str(self.pods),
            "ephemeral-storage": self.ephemeral_storage,
        }
        if self.gpus:
            found[GPU] = str(self.gpus)
        found.update({name: str(qty) for name, qty in self.resources.items()})
        return found

    def node_labels(self, name: str) -> dict[str, str]:
        return {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            MARKER_LABEL: "true",
            **self.labels,
        }


@contextmanager
def fake_nodes(
    api_client: Any, nodes: NodeSet, log_file: Path, *, termination_delay: float = 0.0
) -> Iterator[list[str]]:
    """Serve ``nodes`` until the block ends; yields their names once all are Ready and untainted. Logs to ``log_file``.

    ``api_client`` only lends its configuration: the kubelets open their own connections.
    """
    kubelets = FakeKubelets(api_client, nodes, log_file, termination_delay=termination_delay)
    try:
        kubelets.start()
        wait_for(
            kubelets.all_usable,
            timeout=STARTUP_TIMEOUT,
            interval=1,
            what=f"fake nodes {nodes.prefix}0..{nodes.count - 1} to be Ready and untainted (log: {log_file})",
        )
        yield nodes.names
    except BaseException:
        kubelets.close(strict=False)  # the original error says more than a cleanup problem
        raise
    kubelets.close(strict=True)


class FakeKubelets:
    """The kubelets of one ``NodeSet``: ``start()``, then ``close()``; see the module docstring."""

    def __init__(self, api_client: Any, nodes: NodeSet, log_file: Path, *, termination_delay: float = 0.0) -> None:
        self.nodes = nodes
        self.names = frozenset(nodes.names)
        self.termination_delay = termination_delay
        self.log_file = log_file
        self.log = logging.getLogger(f"{__name__}.{nodes.prefix}")
        self.log.propagate = False
        self.log.setLevel(logging.INFO)
        self._handler = logging.FileHandler(log_file, mode="w", encoding="utf-8")
        self._handler.setFormatter(logging.Formatter("%(asctime)s %(threadName)s %(levelname)s %(message)s"))
        self.log.addHandler(self._handler)
        # own pool: a watch held open never starves the test's requests
        self._api: Any = k8s.ApiClient(api_client.configuration)
        self.core = k8s.CoreV1Api(self._api)
        self.coordination = k8s.CoordinationV1Api(self._api)
        self.uids: dict[str, str] = {}  # node -> its UID, for every node this instance created (or adopted)
        self.failures: list[str] = []  # threads that died: the startup wait fails on them
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._watch_response: Any = None  # the open watch, shut down by close() so the pod thread stops at once
        self._running: set[str] = set()  # UIDs of pods marked Running (or seen so)
        self._finishing: set[str] = set()  # UIDs of pods whose final delete was queued: once per UID
        self._queue: list[tuple[float, int, str, str, str, int]] = []  # (due, seq, namespace, name, uid, attempt)
        self._queue_changed = threading.Condition(self._lock)
        self._seq = 0

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Create the nodes, write their status and Leases, and start the threads."""
        self.log.info(
            "starting fake kubelets for %s (capacity %s, labels %s)",
            sorted(self.names),
            self.nodes.capacity(),
            dict(self.nodes.labels),
        )
        for name in self.nodes.names:
            self._create_node(name)
        for name in self.nodes.names:
            self._write_first_status(name)
            self._renew_lease(name)
        for what, target in (
            ("heartbeat", self._heartbeat_loop),
            ("pods", self._pod_loop),
            ("terminator", self._terminator_loop),
        ):
            thread = threading.Thread(
                target=self._guarded, args=(what, target), name=f"kubelet-{self.nodes.prefix}{what}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def close(self, *, strict: bool = True) -> list[str]:
        """Stop and join the threads, delete exactly our nodes and Leases; raise (``strict``) or log what went wrong."""
        problems: list[str] = []
        try:
            self._stop_threads(problems)
            self._delete_nodes(problems)
        finally:
            self._api.close()
            if problems:
                self.log.error("cleanup problems: %s", problems)
            self.log.info("stopped")
            self.log.removeHandler(self._handler)
            self._handler.close()
        if problems and strict:
            raise AssertionError(
                f"fake kubelets {self.nodes.prefix}*: {'; '.join(problems)} "
                f"(by hand: kubectl delete node {' '.join(self.nodes.names)}; log {self.log_file})"
            )
        return problems

    def _stop_threads(self, problems: list[str]) -> None:
        self._stopping.set()
        with self._lock:
            self._queue_changed.notify_all()
            if self._watch_response is not None:
                _shut_down(self._watch_response)
        for thread in self._threads:
            thread.join(timeout=STOP_TIMEOUT)
            if thread.is_alive():
                problems.append(f"thread {thread.name} did not stop within {STOP_TIMEOUT}s")

    def _delete_nodes(self, problems: list[str]) -> None:
        for name in self.nodes.names:
            uid = self.uids.get(name)
            deletions: list[tuple[str, Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = [
                ("lease", self.coordination.delete_namespaced_lease, (name, LEASE_NAMESPACE), {})
            ]
            if uid:  # by UID: never a node of the same name that is not ours
                deletions.insert(0, ("node", self.core.delete_node, (name,), {"body": {"preconditions": {"uid": uid}}}))
            for what, delete, args, kwargs in deletions:
                try:
                    raw(delete, *args, _request_timeout=REQUEST_TIMEOUT, **kwargs)
                    self.log.info("deleted %s %s", what, name)
                except ApiException as exc:
                    if exc.status != 404:
                        problems.append(f"deleting {what} {name}: HTTP {exc.status} {exc.reason}")
                except Exception as exc:
                    problems.append(f"deleting {what} {name}: {type(exc).__name__}: {exc}")

    def _guarded(self, what: str, target: Callable[[], None]) -> None:
        try:
            target()
        except BaseException as exc:  # a bug: make the startup wait (and the log) say so
            self.failures.append(f"the {what} thread died: {type(exc).__name__}: {exc}")
            self.log.exception("the %s thread died", what)

    def all_usable(self) -> tuple[bool, str]:
        """A ``wait_for`` check: every node exists, is Ready and carries no NoSchedule/NoExecute taint."""
        if self.failures:
            raise AssertionError(f"fake kubelets {self.nodes.prefix}*: {self.failures}\n{self.tail()}")
        found = {
            name_of(n): n
            for n in raw(
                self.core.list_node, label_selector=f"{MARKER_LABEL}=true", _request_timeout=REQUEST_TIMEOUT
            ).get("items")
            or []
        }
        waiting = {name: _why_not_usable(found.get(name)) for name in self.nodes.names}
        waiting = {name: why for name, why in waiting.items() if why}
        return not waiting, f"not usable yet: {waiting}\n--- {self.log_file} ---\n{self.tail()}"

    def tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_file.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
        except OSError as exc:
            return f"(no log: {exc})"

    # ----------------------------------------------------------------- nodes and leases

    def _create_node(self, name: str) -> None:
        node_labels = self.nodes.node_labels(name)
        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": node_labels}, "spec": {}}
        try:
            node = raw(self.core.create_node, body, _request_timeout=REQUEST_TIMEOUT)
            self.log.info("created node %s", name)
        except ApiException as exc:
            if exc.status != 409:
                raise
            existing = raw(self.core.read_node, name, _request_timeout=REQUEST_TIMEOUT)
            if labels(existing).get(MARKER_LABEL) != "true":
                raise AssertionError(
                    f"node {name} already exists and was not made by fake kubelets ({MARKER_LABEL}): leaving it alone"
                ) from None
            node = raw(
                self.core.patch_node,
                name,
                {"metadata": {"labels": node_labels}},
                _content_type=MERGE,
                _request_timeout=REQUEST_TIMEOUT,
            )
            self.log.warning("node %s was left by an earlier run; adopted it", name)
        self.uids[name] = str((node.get("metadata") or {}).get("uid") or "")

    def _write_first_status(self, name: str) -> None:
        """The only write of capacity and allocatable; later heartbeats touch the conditions alone."""
        capacity = self.nodes.capacity()
        status = {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": _conditions(_now(), {}),
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": name,
                "systemUUID": name,
                "bootID": name,
                "kernelVersion": "fake",
                "osImage": "gpu-compactor e2e fake node",
                "containerRuntimeVersion": "fake://0",
                "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        }
        raw(
            self.core.patch_node_status,
            name,
            {"status": status},
            _content_type=STRATEGIC,
            _request_timeout=REQUEST_TIMEOUT,
        )
        self.log.info("node %s: capacity = allocatable = %s, Ready", name, capacity)

    def _refresh_conditions(self, name: str) -> None:
        node = raw(self.core.read_node, name, _request_timeout=REQUEST_TIMEOUT)
        current = {str(c.get("type")): c for c in (node.get("status") or {}).get("conditions") or []}
        raw(
            self.core.patch_node_status,
            name,
            {"status": {"conditions": _conditions(_now(), current)}},
            _content_type=STRATEGIC,
            _request_timeout=REQUEST_TIMEOUT,
        )

    def _renew_lease(self, name: str) -> None:
        spec = {
            "holderIdentity": name,
            "leaseDurationSeconds": LEASE_DURATION_SECONDS,
            "renewTime": _micro_time(_now()),
        }
        try:
            raw(
                self.coordination.patch_namespaced_lease,
                name,
                LEASE_NAMESPACE,
                {"spec": spec},
                _content_type=MERGE,
                _request_timeout=REQUEST_TIMEOUT,
            )
            return
        except ApiException as exc:
            if exc.status != 404:
                raise
        owner = {"apiVersion": "v1", "kind": "Node", "name": name, "uid": self.uids[name]}
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": LEASE_NAMESPACE, "ownerReferences": [owner]},
            "spec": spec,
        }
        raw(self.coordination.create_namespaced_lease, LEASE_NAMESPACE, body, _request_timeout=REQUEST_TIMEOUT)
        self.log.info("created lease %s/%s", LEASE_NAMESPACE, name)

    def _heartbeat_loop(self) -> None:
        next_status = time.monotonic() + STATUS_INTERVAL
        while not self._stopping.wait(LEASE_INTERVAL):
            refresh = time.monotonic() >= next_status
            for name in self.nodes.names:
                if self._stopping.is_set():
                    return
                try:
                    self._renew_lease(name)
                    if refresh:
                        self._refresh_conditions(name)
                except Exception as exc:  # keep the other nodes alive; the next round retries
                    self.log.warning("heartbeat of node %s failed: %s", name, _describe(exc))
            if refresh:
                next_status = time.monotonic() + STATUS_INTERVAL

    # ----------------------------------------------------------------- pods

    def _pod_loop(self) -> None:
        delay = BACKOFF_FIRST
        resource_version = ""
        while not self._stopping.is_set():
            try:
                if not resource_version:
                    listed = raw(self.core.list_pod_for_all_namespaces, _request_timeout=REQUEST_TIMEOUT)
                    for pod in listed.get("items") or []:
                        self._on_pod(pod)
                    resource_version = str((listed.get("metadata") or {}).get("resourceVersion") or "")
                resource_version = self._watch_pods(resource_version)
                delay = BACKOFF_FIRST
            except _Expired as exc:
                self.log.info("pod watch expired (%s); re-listing", exc)
                resource_version = ""
            except Exception as exc:
                if self._stopping.is_set():
                    return
                self.log.warning("pod list/watch failed: %s; re-listing in %.1fs", _describe(exc), delay)
                resource_version = ""
                self._stopping.wait(delay)
                delay = min(delay * 2, BACKOFF_MAX)

    def _watch_pods(self, resource_version: str) -> str:
        """One watch request from ``resource_version``; returns the last resourceVersion seen (raises ``_Expired`` on 410)."""
        response: Any
        try:
            response = self.core.list_pod_for_all_namespaces(
                watch=True,
                resource_version=resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=WATCH_SECONDS,
                _preload_content=False,
                _request_timeout=(REQUEST_TIMEOUT, WATCH_SECONDS + REQUEST_TIMEOUT),
            )
        except ApiException as exc:
            if exc.status == 410:
                raise _Expired(f"HTTP 410 at resourceVersion {resource_version}") from None
            raise
        with self._lock:
            self._watch_response = response
            if self._stopping.is_set():
                _shut_down(response)
        try:
            for line in _lines(response):
                if self._stopping.is_set():
                    break
                event = json.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        raise _Expired(str(obj.get("message") or "410 Gone"))
                    raise RuntimeError(f"watch error event: {obj.get('code')} {obj.get('message')}")
                resource_version = str((obj.get("metadata") or {}).get("resourceVersion") or resource_version)
                if kind in ("ADDED", "MODIFIED"):
                    self._on_pod(obj)
                elif kind == "DELETED":
                    self._forget(obj)
        finally:
            with self._lock:
                self._watch_response = None
            with suppress(Exception):
                response.close()
            with suppress(Exception):
                response.release_conn()
        return resource_version

    def _on_pod(self, pod: Obj) -> None:
        spec = pod.get("spec") or {}
        if spec.get("nodeName") not in self.names:
            return
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        if meta.get("deletionTimestamp"):
            self._queue_final_delete(str(meta.get("namespace")), name_of(pod), uid)
            return
        if uid in self._running or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return
        if _running_and_ready(pod):
            self._running.add(uid)
            return
        try:
            raw(
                self.core.patch_namespaced_pod_status,
                name_of(pod),
                meta.get("namespace"),
                _running_status(pod),
                _content_type=STRATEGIC,
                _request_timeout=REQUEST_TIMEOUT,
            )
            self._running.add(uid)
            self.log.info("pod %s/%s on %s: Running, Ready", meta.get("namespace"), name_of(pod), spec.get("nodeName"))
        except (
            ApiException
        ) as exc:  # 404/409/422: gone, or replaced by a pod of the same name; else the next event retries
            log = self.log.info if exc.status in (404, 409, 422) else self.log.warning
            log(
                "pod %s/%s: status patch failed: HTTP %s %s",
                meta.get("namespace"),
                name_of(pod),
                exc.status,
                exc.reason,
            )

    def _forget(self, pod: Obj) -> None:
        self._running.discard(str((pod.get("metadata") or {}).get("uid") or ""))

    # ----------------------------------------------------------------- graceful deletions

    def _queue_final_delete(
        self, namespace: str, name: str, uid: str, *, attempt: int = 0, delay: float | None = None
    ) -> None:
        with self._lock:
            if attempt == 0:
                if uid in self._finishing:
                    return
                self._finishing.add(uid)
                self.log.info(
                    "pod %s/%s is terminating; final delete in %.1fs", namespace, name, self.termination_delay
                )
            self._seq += 1
            due = time.monotonic() + (self.termination_delay if delay is None else delay)
            heapq.heappush(self._queue, (due, self._seq, namespace, name, uid, attempt))
            self._queue_changed.notify_all()

    def _terminator_loop(self) -> None:
        while True:
            with self._lock:
                while not self._stopping.is_set() and (not self._queue or self._queue[0][0] > time.monotonic()):
                    self._queue_changed.wait(timeout=self._queue[0][0] - time.monotonic() if self._queue else None)
                if self._stopping.is_set():
                    return
                _, _, namespace, name, uid, attempt = heapq.heappop(self._queue)
            self._final_delete(namespace, name, uid, attempt)

    def _final_delete(self, namespace: str, name: str, uid: str, attempt: int) -> None:
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0, "preconditions": {"uid": uid}}
        try:
            raw(self.core.delete_namespaced_pod, name, namespace, body=body, _request_timeout=REQUEST_TIMEOUT)
            self.log.info("pod %s/%s terminated (deleted, grace 0)", namespace, name)
        except Exception as exc:
            status = exc.status if isinstance(exc, ApiException) else None
            if status in (404, 409):  # already gone, or the name now belongs to another pod
                self.log.info("pod %s/%s: final delete not needed (HTTP %s)", namespace, name, status)
            elif attempt + 1 < FINAL_DELETE_ATTEMPTS:
                retry = min(BACKOFF_FIRST * 2**attempt, BACKOFF_MAX)
                self.log.warning(
                    "pod %s/%s: final delete failed: %s; retrying in %.1fs", namespace, name, _describe(exc), retry
                )
                self._queue_final_delete(namespace, name, uid, attempt=attempt + 1, delay=retry)
            else:
                self.log.error(
                    "pod %s/%s: final delete failed %d times: %s; giving up",
                    namespace,
                    name,
                    FINAL_DELETE_ATTEMPTS,
                    _describe(exc),
                )


class _Expired(Exception):
    """The watch's resourceVersion is too old (410 Gone): list again."""


def _shut_down(response: Any) -> None:
    """Unblock a thread reading ``response`` (a streaming urllib3 response) by shutting its socket down."""
    try:
        response.shutdown()  # urllib3 >= 2.3
        return
    except Exception:
        pass
    with suppress(Exception):
        response.connection.sock.shutdown(socket.SHUT_RDWR)


def _lines(response: Any) -> Iterator[str]:
    """The non-empty lines of a streaming response, as they arrive (one watch event each)."""
    buffer = b""
    for chunk in response.stream(amt=None, decode_content=False):
        buffer += chunk if isinstance(chunk, bytes) else str(chunk).encode("utf-8")
        *complete, buffer = buffer.split(b"\n")
        for line in complete:
            if line.strip():
                yield line.decode("utf-8", errors="replace")
    if buffer.strip():
        yield buffer.decode("utf-8", errors="replace")


def _why_not_usable(node: Obj | None) -> str:
    if node is None:
        return "missing"
    if not is_ready_node(node):
        return "not Ready"
    return ", ".join(blocking_taints(node))


def _now() -> datetime:
    return datetime.now(UTC)


def _time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _micro_time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


NODE_CONDITIONS = (  # type, status, reason, message
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "fake kubelet (gpu-compactor e2e) is posting ready status"),
)


def _conditions(moment: datetime, current: Mapping[str, Obj]) -> list[Obj]:
    """The node's conditions with a fresh heartbeat; a transition time only where the status changes (or is new)."""
    found = []
    for kind, status, reason, message in NODE_CONDITIONS:
        condition: Obj = {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": _time(moment),
        }
        if (current.get(kind) or {}).get("status") != status:
            condition["lastTransitionTime"] = _time(moment)
        found.append(condition)
    return found


def _running_and_ready(pod: Obj) -> bool:
    status = pod.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    containers = (pod.get("spec") or {}).get("containers") or []
    statuses = status.get("containerStatuses") or []
    return (
        status.get("phase") == "Running"
        and ready
        and len(statuses) == len(containers)
        and all(s.get("ready") for s in statuses)
    )


def _running_status(pod: Obj) -> Obj:
    """A strategic-merge patch of pods/status: what a kubelet reports once every container started (UID-guarded)."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    uid = str(meta.get("uid") or "")
    now = _time(_now())
    started = str((pod.get("status") or {}).get("startTime") or now)

    def container(c: Obj, *, init: bool) -> Obj:
        image = str(c.get("image") or "")
        found: Obj = {
            "name": c.get("name"),
            "image": image,
            "imageID": f"fake://{image}",
            "containerID": f"fake://{uid}/{c.get('name')}",
            "restartCount": 0,
            "ready": True,
            "started": True,
            "state": {"running": {"startedAt": started}},
        }
        if (
            init and c.get("restartPolicy") != "Always"
        ):  # a plain init container has run to completion; a sidecar keeps running
            found.update(
                started=False,
                state={
                    "terminated": {"exitCode": 0, "reason": "Completed", "startedAt": started, "finishedAt": started}
                },
            )
        return found

    status: Obj = {
        "phase": "Running",
        "hostIP": "127.0.0.1",
        "hostIPs": [{"ip": "127.0.0.1"}],
        "startTime": started,
        "conditions": [
            {"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
            for kind in ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")
        ],
        "containerStatuses": [container(c, init=False) for c in spec.get("containers") or []],
    }
    if spec.get("initContainers"):
        status["initContainerStatuses"] = [container(c, init=True) for c in spec["initContainers"]]
    return {"metadata": {"uid": uid}, "status": status}


def _describe(exc: Exception) -> str:
    if isinstance(exc, ApiException):
        return f"HTTP {exc.status} {exc.reason}"
    return f"{type(exc).__name__}: {exc}"

"""Watch-based observers for a compactor run: every PDB, pod and node change is seen, none is sampled.

``RunWatcher`` lists, then watches from the list's resourceVersion, the namespace's
PodDisruptionBudgets and pods and the cluster's nodes, until stopped. It records:

* PDB violations, with ``PdbWatcher``'s definition: ``status.currentHealthy <
  status.desiredHealthy`` once the disruption controller has observed the PDB
  (``observedGeneration >= generation``), checked on every PDB event;
* evictions: pods of the namespace that received a ``deletionTimestamp`` while watched
  (the test deletes nothing meanwhile), and the pods created meanwhile with the node
  each was bound to;
* fences: how long each node was closed (a compactor fence taint, or cordoned), from the events' arrival times;
* the plan the run carried out, from the executor's state ConfigMap (``compactor run`` plans
  afresh, and the solver may pick another of several equally good plans than ``compactor plan``), and the most moves
  that state recorded in flight at once.

A watch that expires (410) is re-listed and counted in ``gaps``; the test treats any gap
or error as a failure, so a blind watcher can never pass a check vacuously.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubernetes import watch as k8s_watch
from kubernetes.client.exceptions import ApiException

from compactor.actions.cluster.run_state import decode_plan
from tests.e2e.helpers import STATE_CONFIGMAP, STATE_NAMESPACE, Obj, is_closed, name_of, raw

WATCH_SECONDS = 30  # server-side timeout of one watch request; the stream is resumed from the last resourceVersion


@dataclass
class Observed:
    pdb_violations: list[str] = field(default_factory=list)
    pdb_events: int = 0
    evicted: dict[str, str] = field(default_factory=dict)  # pod -> node it was on when it got its deletionTimestamp
    # pod created while watched -> node it is bound to ("" = none yet)
    created: dict[str, str] = field(default_factory=dict)
    owners: dict[str, str] = field(default_factory=dict)  # pod -> its controller's name
    cordon_seconds: dict[str, float] = field(default_factory=dict)  # node -> seconds it was seen unschedulable
    still_cordoned: list[str] = field(default_factory=list)  # nodes unschedulable when the watch stopped
    run_plan: Obj = field(default_factory=dict)  # the plan in the executor's state ConfigMap, as last seen
    max_in_flight: int = 0  # the most moves the executor's state recorded in flight at once (evictions side by side)
    gaps: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def total_cordon_seconds(self) -> float:
        return round(sum(self.cordon_seconds.values()), 1)


class ObjectWatch(threading.Thread):
    """List once (synchronously, in ``start``), then watch from that resourceVersion until ``stop``.

    ``handle(kind, obj)`` gets ``LISTED`` for the first list, ``RELISTED`` after an expired watch, else the event type.
    """

    def __init__(
        self,
        what: str,
        list_call: Callable[..., Any],
        args: tuple[Any, ...],
        handle: Callable[[str, Obj], None],
        observed: Observed,
        **kwargs: Any,
    ) -> None:
        super().__init__(name=f"watch-{what}", daemon=True)
        self.what = what
        self.list_call = list_call
        self.args = args
        self.kwargs = kwargs
        self.handle = handle
        self.observed = observed
        self.resource_version = ""
        self._stopping = threading.Event()
        self._stream: Any = None

    def start(self) -> None:
        self._relist("LISTED")
        super().start()

    def stop(self) -> None:
        self._stopping.set()
        if self._stream is not None:
            self._stream.stop()
        self.join(timeout=WATCH_SECONDS + 10)
        if self.is_alive():
            self.observed.errors.append(f"{self.what}: the watch thread did not stop")

    def run(self) -> None:
        while not self._stopping.is_set():
            try:
                self._watch_once()
            except (ApiException, KeyError) as exc:
                if self._stopping.is_set():
                    return
                # the client (v37) reads an ERROR event's 'raw_object' only when it deserializes: with deserialize=False
                # a 410 (resourceVersion too old) surfaces as KeyError('raw_object'), not as the ApiException it is
                if isinstance(exc, KeyError) and exc.args != ("raw_object",):
                    self._error(f"KeyError: {exc}")
                    continue
                if isinstance(exc, KeyError) or exc.status == 410:
                    self.observed.gaps.append(
                        f"{self.what}: watch expired at resourceVersion {self.resource_version}; re-listed"
                    )
                    self._relist("RELISTED")
                else:
                    self._error(f"HTTP {exc.status} {exc.reason}")
            except Exception as exc:  # a dropped connection: resume from the last resourceVersion
                if self._stopping.is_set():
                    return
                self._error(f"{type(exc).__name__}: {exc}")

    def _watch_once(self) -> None:
        self._stream = k8s_watch.Watch()  # type: ignore[no-untyped-call]
        for event in self._stream.stream(
            self.list_call,
            *self.args,
            **self.kwargs,
            resource_version=self.resource_version,
            deserialize=False,
            allow_watch_bookmarks=True,
            timeout_seconds=WATCH_SECONDS,
            _request_timeout=WATCH_SECONDS + 15,
        ):
            obj = event.get("object") or {}
            version = (obj.get("metadata") or {}).get("resourceVersion")
            if version:
                self.resource_version = str(version)
            if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                self.handle(str(event["type"]), obj)
            if self._stopping.is_set():
                return

    def _relist(self, kind: str) -> None:
        listed = raw(self.list_call, *self.args, **self.kwargs)
        for item in listed.get("items") or []:
            self.handle(kind, item)
        self.resource_version = str((listed.get("metadata") or {}).get("resourceVersion") or "")

    def _error(self, message: str) -> None:
        if len(self.observed.errors) < 20:
            self.observed.errors.append(f"{self.what}: {message}")
        time.sleep(0.5)


class RunWatcher:
    """Watches PDBs and pods of ``namespace`` and every node while a compactor run goes on; use as a context manager."""

    def __init__(self, kube: Any, namespace: str) -> None:
        self.observed = Observed()
        self._terminating_before: set[str] = set()
        self._cordoned_since: dict[str, float] = {}
        self._watches = [
            ObjectWatch(
                "pdbs", kube.policy.list_namespaced_pod_disruption_budget, (namespace,), self._on_pdb, self.observed
            ),
            ObjectWatch("pods", kube.core.list_namespaced_pod, (namespace,), self._on_pod, self.observed),
            ObjectWatch("nodes", kube.core.list_node, (), self._on_node, self.observed),
            ObjectWatch(
                "executor state",
                kube.core.list_namespaced_config_map,
                (STATE_NAMESPACE,),
                self._on_state,
                self.observed,
                field_selector=f"metadata.name={STATE_CONFIGMAP}",
            ),
        ]

    def __enter__(self) -> RunWatcher:
        for w in self._watches:
            w.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> Observed:
        for w in self._watches:
            if w.is_alive():
                w.stop()
        now = time.monotonic()
        for node, since in sorted(self._cordoned_since.items()):
            self._add_cordon(node, now - since)
            self.observed.still_cordoned.append(node)
        self._cordoned_since.clear()
        return self.observed

    # ----- handlers (each runs on its own watch thread, or in __enter__ for the first list)

    def _on_pdb(self, kind: str, pdb: Obj) -> None:
        self.observed.pdb_events += 1
        status = pdb.get("status") or {}
        meta = pdb.get("metadata") or {}
        if kind == "DELETED" or int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
            return
        current, desired = int(status.get("currentHealthy") or 0), int(status.get("desiredHealthy") or 0)
        if current < desired:
            self.observed.pdb_violations.append(
                f"PDB {name_of(pdb)} ({kind}, resourceVersion {meta.get('resourceVersion')}): currentHealthy={current} < "
                f"desiredHealthy={desired} (expectedPods={status.get('expectedPods')}, disruptionsAllowed={status.get('disruptionsAllowed')})"
            )

    def _on_pod(self, kind: str, pod: Obj) -> None:
        name = name_of(pod)
        meta = pod.get("metadata") or {}
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        owner = next((str(o.get("name")) for o in meta.get("ownerReferences") or [] if o.get("controller")), "")
        if kind == "LISTED":  # the first list: what was there before the run
            if meta.get("deletionTimestamp"):
                self._terminating_before.add(name)
            return
        self.observed.owners.setdefault(name, owner)
        if kind == "ADDED" or name in self.observed.created:
            self.observed.created[name] = node
        if meta.get("deletionTimestamp") and name not in self._terminating_before and name not in self.observed.evicted:
            self.observed.evicted[name] = node

    def _on_state(self, kind: str, config_map: Obj) -> None:
        data = config_map.get("data") or {}
        try:
            in_flight = len(json.loads(data.get("inflight") or "{}"))
        except ValueError as exc:
            self.observed.errors.append(f"executor state: inflight does not decode: {exc}")
            in_flight = 0
        self.observed.max_in_flight = max(self.observed.max_in_flight, in_flight)
        text = data.get("plan")
        if kind != "DELETED" and text:
            try:
                self.observed.run_plan = decode_plan(text).model_dump(by_alias=True, mode="json")
            except ValueError as exc:  # pydantic's ValidationError is a ValueError too
                self.observed.errors.append(f"executor state: the plan does not decode: {exc}")

    def _on_node(self, kind: str, node: Obj) -> None:
        name = name_of(node)
        cordoned = kind != "DELETED" and is_closed(node)  # fenced by a compactor's taint (or cordoned)
        now = time.monotonic()
        if cordoned and name not in self._cordoned_since:
            self._cordoned_since[name] = now
            self.observed.cordon_seconds.setdefault(name, 0.0)
        elif not cordoned and name in self._cordoned_since:
            self._add_cordon(name, now - self._cordoned_since.pop(name))

    def _add_cordon(self, node: str, seconds: float) -> None:
        self.observed.cordon_seconds[node] = round(self.observed.cordon_seconds.get(node, 0.0) + seconds, 2)

"""The object store: every object by resource type, namespace and name, the resourceVersion and uid counters, the
controllers that react to writes (the disruption controller), and the tests' direct access to the objects."""

from __future__ import annotations

import copy
import itertools
import threading
from datetime import UTC, datetime

from tests.fakeapi.disruption import DisruptionController
from tests.fakeapi.messages import JSON, not_found
from tests.fakeapi.resources import ResourceType, resource_type
from tests.fakeapi.selectors import selector_matches


def utc_now() -> str:
    """Now as a Kubernetes timestamp (``creationTimestamp``, a PDB's ``disruptedPods``)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ObjectStore:
    """The objects, keyed ``(namespace, name)`` (``""`` for cluster-scoped) under each ``ResourceType.key``, behind
    ``lock``. ``FakeApiServer.__init__`` sets every attribute declared here."""

    lock: threading.RLock
    # kube-controller-manager's disruption controller: recomputes PDB status after every write (None: status as written)
    disruption_controller: DisruptionController | None
    _store: dict[str, dict[tuple[str, str], JSON]]
    _rv: itertools.count[int]
    _uid: itertools.count[int]
    resource_version: int  # the latest one handed out

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
                meta.setdefault("creationTimestamp", utc_now())
                meta["resourceVersion"] = self._next_rv()
                self._store[rt.key][(meta.get("namespace", ""), meta["name"])] = stored
                touched.add(meta.get("namespace", ""))
            self._controllers_sync(touched)

    def _existing(self, rt: ResourceType, namespace: str, name: str) -> JSON:
        """The stored object itself (not a copy); ApiError 404 when there is none."""
        current = self._store[rt.key].get((namespace, name))
        if current is None:
            raise not_found(rt, name)
        return current

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

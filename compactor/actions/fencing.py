"""Writes only while we hold the Lease: a ``ClusterClient`` that asks before every cordon, eviction, event, steering entry or state write.

A replica (or a ``run --once``) that lost the Lease, or could not renew it within the renew
deadline, may still be in the middle of a run. Its next write is refused here, before it
reaches the API server, so two actors never cordon or evict at once; the run stops, and
whoever holds the Lease now recovers from the node marks and the state ConfigMap.
"""

from __future__ import annotations

from collections.abc import Callable

from compactor.actions.client import ClusterClient, EvictionResult, Obj, ObjectRef
from compactor.errors import ClusterError


class LeadershipLost(ClusterError):
    """A write was refused because this process no longer holds the Lease."""


class FencedClient:
    def __init__(self, inner: ClusterClient, holds: Callable[[], bool], lease: str) -> None:
        self.inner = inner
        self.holds = holds
        self.lease = lease

    def _check(self, what: str) -> None:
        if not self.holds():
            raise LeadershipLost(f"not {what}: this process no longer holds the Lease {self.lease} (another gpu-compactor may act now)")

    # reads pass through
    def list_nodes(self) -> list[Obj]:
        return self.inner.list_nodes()

    def get_node(self, name: str) -> Obj | None:
        return self.inner.get_node(name)

    def list_pods(self, *, node_name: str | None = None, namespace: str | None = None, label_selector: str | None = None) -> list[Obj]:
        return self.inner.list_pods(node_name=node_name, namespace=namespace, label_selector=label_selector)

    def get_owner(self, namespace: str, kind: str, name: str) -> Obj | None:
        return self.inner.get_owner(namespace, kind, name)

    def get_admission(self, kind: str, name: str) -> Obj | None:
        return self.inner.get_admission(kind, name)

    def get_config_map(self, name: str) -> Obj | None:
        return self.inner.get_config_map(name)

    def get_pod(self, namespace: str, name: str) -> Obj | None:
        return self.inner.get_pod(namespace, name)

    def list_pdbs(self, *, namespace: str | None = None) -> list[Obj]:
        return self.inner.list_pdbs(namespace=namespace)

    def read_state(self, name: str) -> dict[str, str] | None:
        return self.inner.read_state(name)

    # writes are fenced
    def patch_node(self, name: str, patch: Obj) -> Obj:
        self._check(f"patching node {name}")
        return self.inner.patch_node(name, patch)

    def patch_config_map(self, name: str, patch: Obj) -> Obj:
        self._check(f"patching configmap {name}")
        return self.inner.patch_config_map(name, patch)

    def patch_pod(self, namespace: str, name: str, patch: Obj) -> Obj:
        self._check(f"patching pod {namespace}/{name}")
        return self.inner.patch_pod(namespace, name, patch)

    def evict(self, namespace: str, name: str, *, uid: str = "", dry_run: bool = False) -> EvictionResult:
        self._check(f"evicting {namespace}/{name}")
        return self.inner.evict(namespace, name, uid=uid, dry_run=dry_run)

    def create_event(self, involved: ObjectRef, *, reason: str, message: str, type_: str = "Normal") -> None:
        self._check(f"recording event {reason}")
        self.inner.create_event(involved, reason=reason, message=message, type_=type_)

    def write_state(self, name: str, data: dict[str, str] | None) -> None:
        self._check(f"writing state {name}")
        self.inner.write_state(name, data)

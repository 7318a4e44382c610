"""Writes only while we hold the Lease: a ``ClusterClient`` that asks before every fence, eviction, event, steering entry or state write.

A replica (or a ``run --once``) that lost the Lease, or could not renew it within the renew
deadline, may still be in the middle of a run. Its next write is refused here, before it
reaches the API server; the run stops, and whoever holds the Lease now recovers from the node
marks and the state ConfigMap.

What this check is not: a fencing token. The API server never sees it, so a write checked while
we held the Lease can still land after another process took it over: the process paused between
the check and the send (GC, a stopped container, a migrated VM), or the request reached the API
server, which applied it after the client gave up. Two bounds narrow that window: the check
counts from the moment our last successful renewal *began* (``LeaderElector.holds``), and each
write is one attempt that gives up after ``leader_election.write_timeout_seconds``, at most half of
``lease_seconds - renew_deadline_seconds`` (``settings.lease_timing_problem``), so on the client's
side it is over well before anyone may take over. Narrowed, not closed.

The guards that hold whatever the timing are on the objects themselves:

* the state ConfigMap is written with compare-and-swap on the resourceVersion this process last
  read or wrote (``KubeClusterClient.write_state``), and every fence, hold and eviction is
  announced there before it is made (``Run.save``). Two actors cannot both go on saving: whichever
  saves second over a version the other replaced gets 409 (``ClusterError``) and its run aborts,
  starting no further move (its rollback's writes pass this check like any other). Between two saves (the nodes fenced after one save, an eviction's
  retries, a recovery that found no state and releases orphan fences) only the Lease check stands
  in the way;
* node patches carry the resourceVersion of the read they were built from
  (``actions/cluster/patching.py``): a late patch never overwrites a change made since (``spec.taints`` is
  replaced whole); on 409 the node is read again and the patch rebuilt from what it shows, or
  dropped (a release removes only a fence that is still ours). That keeps a late patch consistent
  with the node; it does not stop a late actor from patching;
* the steering parameter ConfigMap and pod tolerations are patched against their resourceVersion
  in the same way; an eviction names the pod's uid and is still subject to its PodDisruptionBudget.

Events carry no guard: a late one is only a late message.
"""

from __future__ import annotations

from collections.abc import Callable

from compactor.actions.port.client import ClusterClient, EvictionResult, Obj, ObjectRef, T
from compactor.errors import ClusterError


class LeadershipLost(ClusterError):
    """A write was refused because this process no longer holds the Lease: refused here, so retrying it through a
    "brownout" only delays the end (each release of a rollback used to be retried for 120 s)."""

    final = True


class FencedClient:
    def __init__(self, inner: ClusterClient, holds: Callable[[], bool], lease: str) -> None:
        self.inner = inner
        self.holds = holds
        self.lease = lease

    def _check(self, what: str) -> None:
        if not self.holds():
            raise LeadershipLost(
                f"not {what}: this process no longer holds the Lease {self.lease} (another gpu-compactor may act now)"
            )

    # reads pass through
    def list_nodes(self) -> list[Obj]:
        return self.inner.list_nodes()

    def get_node(self, name: str) -> Obj | None:
        return self.inner.get_node(name)

    def list_pods(
        self, *, node_name: str | None = None, namespace: str | None = None, label_selector: str | None = None
    ) -> list[Obj]:
        return self.inner.list_pods(node_name=node_name, namespace=namespace, label_selector=label_selector)

    def list_pending_pods(self) -> list[Obj]:
        return self.inner.list_pending_pods()

    def scan_nodes(self, keep: Callable[[Obj], T | None]) -> list[T]:
        return self.inner.scan_nodes(keep)

    def scan_pods(self, keep: Callable[[Obj], T | None]) -> list[T]:
        return self.inner.scan_pods(keep)

    def get_owner(self, namespace: str, kind: str, name: str) -> Obj | None:
        return self.inner.get_owner(namespace, kind, name)

    def list_autoscalers(self, namespace: str) -> list[Obj]:
        return self.inner.list_autoscalers(namespace)

    def get_admission(self, kind: str, name: str) -> Obj | None:
        return self.inner.get_admission(kind, name)

    def who_am_i(self) -> str | None:
        return self.inner.who_am_i()

    def get_config_map(self, name: str) -> Obj | None:
        return self.inner.get_config_map(name)

    def get_pod(self, namespace: str, name: str) -> Obj | None:
        return self.inner.get_pod(namespace, name)

    def list_pdbs(self, *, namespace: str | None = None) -> list[Obj]:
        return self.inner.list_pdbs(namespace=namespace)

    def list_dra(self, kind: str) -> list[Obj]:
        return self.inner.list_dra(kind)

    def get_resource_claim(self, namespace: str, name: str) -> Obj | None:
        return self.inner.get_resource_claim(namespace, name)

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

    def scale_deployment(self, namespace: str, name: str, *, expect: int, to: int) -> bool:
        self._check(f"scaling deployment {namespace}/{name}")
        return self.inner.scale_deployment(namespace, name, expect=expect, to=to)

    def evict(
        self, namespace: str, name: str, *, uid: str = "", resource_version: str = "", dry_run: bool = False
    ) -> EvictionResult:
        self._check(f"evicting {namespace}/{name}")
        return self.inner.evict(namespace, name, uid=uid, resource_version=resource_version, dry_run=dry_run)

    def create_event(self, involved: ObjectRef, *, reason: str, message: str, type_: str = "Normal") -> None:
        self._check(f"recording event {reason}")
        self.inner.create_event(involved, reason=reason, message=message, type_=type_)

    def write_state(self, name: str, data: dict[str, str] | None) -> None:
        self._check(f"writing state {name}")
        self.inner.write_state(name, data)

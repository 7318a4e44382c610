"""``KubeClusterClient``: the executor's ``ClusterClient`` on the live API, through the official ``kubernetes`` client.

Put together here from one part per concern, each a ``ClientBase`` of its own module: nodes and their patches
(``nodes.py``); pods, PodDisruptionBudgets and evictions (``pods.py``); the compactor's own ConfigMaps, steering
policy and Events (``state.py``); owners, autoscalers, the scale and DRA objects (``workloads.py``). Lists reuse
``compactor.kube.read`` (paginated, raw JSON); every other call is one request through ``transport.py``, shared
with the Lease, which sends raw JSON and reads raw JSON back (it says why). Pods and nodes, listed, read one by one
or returned by a patch, are lean (``compactor.kube.lean``: no ``managedFields``, env, probes, ...), so the
executor never holds a pod's bulk.

Nothing here can delete a pod: pods leave only through the Eviction subresource, so
PodDisruptionBudgets are always asked. The only DELETE is of the state ConfigMap.
"""

from __future__ import annotations

from functools import cached_property

from kubernetes import client as k8s_client

from compactor.kube.nodes import NodeCalls
from compactor.kube.pods import PodCalls
from compactor.kube.read import DEFAULT_PAGE_SIZE
from compactor.kube.state import COMPONENT, MANAGED_BY, StateCalls, reporting_instance
from compactor.kube.transport import JSON, JSON_PATCH, MERGE_PATCH, Transport
from compactor.kube.workloads import WorkloadCalls
from compactor.settings.leader_election import DEFAULT_WRITE_TIMEOUT_SECONDS

__all__ = [
    "COMPONENT",
    "DEFAULT_NAMESPACE",
    "DEFAULT_TIMEOUT",
    "DEFAULT_WRITE_TIMEOUT",
    "JSON",
    "JSON_PATCH",
    "MANAGED_BY",
    "MERGE_PATCH",
    "KubeClusterClient",
]

DEFAULT_NAMESPACE = "gpu-compactor"
DEFAULT_TIMEOUT = 30.0  # reads
DEFAULT_WRITE_TIMEOUT = DEFAULT_WRITE_TIMEOUT_SECONDS  # writes: leader_election.write_timeout_seconds


class KubeClusterClient(NodeCalls, PodCalls, StateCalls, WorkloadCalls):
    """``ClusterClient`` on a ``kubernetes.client.ApiClient``.

    ``dry_run_all``: every write (patch, eviction, event, state ConfigMap) carries
    ``dryRun=All``, so the API server admits or refuses it without persisting anything.
    ``namespace``: where the executor's state ConfigMap lives.
    ``request_timeout``: seconds for each read (connect + reply).
    ``write_timeout``: seconds for each write (PATCH, POST, PUT, DELETE): ``leader_election.write_timeout_seconds``,
    at most half of ``lease_seconds - renew_deadline_seconds``, so a write checked against the Lease
    (``actions/services/fencing.py``) gives up long before another replica may take the Lease over. Writes are sent
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
        self._transport = Transport(
            api_client, read_timeout=request_timeout, write_timeout=write_timeout, dry_run_all=dry_run_all
        )
        self.namespace = namespace
        self.page_size = page_size
        self._core = k8s_client.CoreV1Api(api_client)
        self._policy = k8s_client.PolicyV1Api(api_client)
        self._resource = k8s_client.ResourceV1Api(api_client)
        self._instance = reporting_instance()
        self._state_versions = {}

    @cached_property
    def dry_run_view(self) -> KubeClusterClient:
        """This client's dry-run view: the same connection, each write sent with ``dryRun=All`` (admitted or refused
        by the API server, never persisted)."""
        if self._transport.dry_run_all:
            return self
        return KubeClusterClient(
            self.api_client,
            dry_run_all=True,
            namespace=self.namespace,
            request_timeout=self._transport.read_timeout,
            write_timeout=self._transport.write_timeout,
            page_size=self.page_size,
        )

    def close(self) -> None:
        self._transport.close()
        self.api_client.close()  # type: ignore[no-untyped-call]

    def __enter__(self) -> KubeClusterClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

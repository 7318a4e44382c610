"""``ClientBase``: what every part of ``KubeClusterClient`` shares, apart so the parts need not import each other.

``KubeClusterClient`` (``cluster_client.py``) is put together from one class per concern (``nodes.py``,
``pods.py``, ``state.py``, ``workloads.py``), each a subclass of this one. Here are the fields the
constructor sets and the few ways a part reaches the API: ``_send``/``_get`` (one request, through the
``Transport`` shared with the Lease) and ``_list`` (every page of a list, through ``read.py``), so
that no part builds a request of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubernetes import client as k8s_client

from compactor.actions.port.client import Obj
from compactor.kube.read import _list_all, _Listing
from compactor.kube.transport import JSON, Reply, Transport


class ClientBase:
    """The fields and request helpers of ``KubeClusterClient``; its constructor sets every field declared here."""

    api_client: k8s_client.ApiClient
    namespace: str  # of the executor's state ConfigMap (and the steering parameters)
    page_size: int
    _transport: Transport
    _core: k8s_client.CoreV1Api
    _policy: k8s_client.PolicyV1Api
    _resource: k8s_client.ResourceV1Api

    @property
    def host(self) -> str:
        return self._transport.host

    @property
    def dry_run_all(self) -> bool:
        return self._transport.dry_run_all

    @property
    def request_timeout(self) -> float:
        return self._transport.read_timeout

    @property
    def write_timeout(self) -> float:
        return self._transport.write_timeout

    def _list(self, listing: _Listing, keep: Callable[[Obj], Any] | None = None) -> list[Any]:
        """Every item, page by page, each lean as its page arrives; ``keep``: what to hold of each instead (``scan_pods``)."""
        return _list_all(
            listing, page_size=self.page_size, host=self.host, request_timeout=self.request_timeout, keep=keep
        )

    def _get(self, path: str, params: dict[str, str], kind: str, what: str) -> Obj | None:
        return self._transport.get_object(path, params, kind, what)

    def _send(
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
        return self._transport.send(method, path, params, what, body=body, content_type=content_type, dry_run=dry_run)

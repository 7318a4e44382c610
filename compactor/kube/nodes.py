"""``NodeCalls``: the nodes part of ``KubeClusterClient``: list, scan and read nodes, and patch their taints and labels.

A part of its own because a node patch is how the executor fences a node (taints, cordon, labels): the one node
write, an RFC 7386 merge patch, kept beside the reads it is built from. Nodes come back lean
(``compactor.kube.lean``), read or returned by a patch.
"""

from __future__ import annotations

from collections.abc import Callable

from compactor.actions.port.client import Obj, T
from compactor.kube.client_base import ClientBase
from compactor.kube.lean import lean
from compactor.kube.read import _Listing
from compactor.kube.transport import MERGE_PATCH, api_error, reply_object


class NodeCalls(ClientBase):
    def list_nodes(self) -> list[Obj]:
        return self._list(_Listing(self._core.list_node, (), "Node", "v1", "nodes"))

    def scan_nodes(self, keep: Callable[[Obj], T | None]) -> list[T]:
        return self._list(_Listing(self._core.list_node, (), "Node", "v1", "nodes"), keep)

    def get_node(self, name: str) -> Obj | None:
        node = self._get("/api/v1/nodes/{name}", {"name": name}, "Node", f"reading node {name}")
        return lean(node, "Node") if node is not None else None

    def patch_node(self, name: str, patch: Obj) -> Obj:
        """RFC 7386 merge patch (``application/merge-patch+json``): ``null`` deletes, lists are replaced whole."""
        what = f"patching node {name}"
        reply = self._send("PATCH", "/api/v1/nodes/{name}", {"name": name}, what, body=patch, content_type=MERGE_PATCH)
        if not reply.ok:
            raise api_error(reply, what)
        return lean(reply_object(reply, "Node", what), "Node")

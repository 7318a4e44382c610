"""Node patches that never act on a stale read: built from the node as read, guarded by its resourceVersion.

A merge patch replaces lists whole (``spec.taints``), so a patch built from an old read
would drop a taint someone added since (cluster-autoscaler's ``ToBeDeletedByClusterAutoscaler``)
or uncordon a node an operator cordoned meanwhile. Sending the read's
``metadata.resourceVersion`` makes the API server refuse a patch against a changed node
(409 Conflict); the node is then read again and the patch rebuilt, or dropped when the
fresh node no longer wants it.
"""

from __future__ import annotations

from collections.abc import Callable

from compactor.actions.client import ClusterClient, Obj
from compactor.errors import ClusterError

CONFLICT_RETRIES = 5


def patch_fresh(client: ClusterClient, name: str, build: Callable[[Obj], Obj | None], *, node: Obj | None = None) -> Obj | None:
    """Patch ``name`` with ``build(node)``; None when the node is gone or ``build`` declines. ``node``: a read to start from."""
    for _ in range(CONFLICT_RETRIES):
        current = node if node is not None else client.get_node(name)
        node = None
        if current is None:
            return None
        patch = build(current)
        if patch is None:
            return None
        version = (current.get("metadata") or {}).get("resourceVersion")
        if version:
            patch = {**patch, "metadata": {**(patch.get("metadata") or {}), "resourceVersion": version}}
        try:
            return client.patch_node(name, patch)
        except ClusterError as exc:
            if exc.status != 409:
                raise
    raise ClusterError(f"node {name} changed under every one of {CONFLICT_RETRIES} patches; gave up", status=409)

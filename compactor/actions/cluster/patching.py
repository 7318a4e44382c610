"""Node (and ConfigMap) patches that never act on a stale read: built from the node as read, guarded by its resourceVersion.

A merge patch replaces lists whole (``spec.taints``), so a patch built from an old read
would drop a taint someone added since (cluster-autoscaler's ``ToBeDeletedByClusterAutoscaler``)
or uncordon a node an operator cordoned meanwhile. Sending the read's
``metadata.resourceVersion`` makes the API server refuse a patch against a changed node
(409 Conflict); the node is then read again and the patch rebuilt, or dropped when the
fresh node no longer wants it.
"""

from __future__ import annotations

from collections.abc import Callable

from compactor.actions.port.client import ClusterClient, Obj
from compactor.actions.port.objects import ObjectView
from compactor.errors import ClusterError

CONFLICT_RETRIES = 5


def _with_version(patch: Obj, current: Obj) -> Obj:
    version = ObjectView(current).resource_version
    if not version:
        return patch
    return {**patch, "metadata": {**(patch.get("metadata") or {}), "resourceVersion": version}}


def patch_fresh(
    client: ClusterClient, name: str, build: Callable[[Obj], Obj | None], *, node: Obj | None = None
) -> Obj | None:
    """Patch ``name`` with ``build(node)``; None when the node is gone or ``build`` declines. ``node``: a read to start from."""
    return _fresh(
        lambda: client.get_node(name), lambda patch: client.patch_node(name, patch), build, node, f"node {name}"
    )


def patch_config_map_fresh(
    client: ClusterClient, name: str, build: Callable[[Obj], Obj | None], *, current: Obj | None = None
) -> Obj | None:
    """``patch_fresh`` for a ConfigMap of the compactor's namespace (the steering parameters); ``current``: a read to start
    from (the object a previous patch returned). None when it is gone or ``build`` declines."""
    return _fresh(
        lambda: client.get_config_map(name),
        lambda patch: client.patch_config_map(name, patch),
        build,
        current,
        f"configmap {name}",
    )


def _fresh(
    read: Callable[[], Obj | None],
    write: Callable[[Obj], Obj],
    build: Callable[[Obj], Obj | None],
    start: Obj | None,
    what: str,
) -> Obj | None:
    """``write(build(object) + its resourceVersion)``, the object read again and the patch rebuilt after each 409."""
    for _ in range(CONFLICT_RETRIES):
        current = start if start is not None else read()
        start = None
        if current is None:
            return None
        patch = build(current)
        if patch is None:
            return None
        try:
            return write(_with_version(patch, current))
        except ClusterError as exc:
            if exc.status != 409:
                raise
    raise ClusterError(f"{what} changed under every one of {CONFLICT_RETRIES} patches; gave up", status=409)

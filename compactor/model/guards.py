"""Settings that would silently change what the figures and plans mean on this cluster (issue 14, item 3).

A pool label no GPU node carries puts every GPU model into one pool (a plan may then move a pod sized for an H100 onto
an A100); a shape naming a resource no node offers measures nothing. Pure: the snapshot and the settings' values in,
a one-line message out (None when the setting means what it says).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from compactor.model.load import DEFAULT_POOL_LABEL
from compactor.model.parse import UNLABELLED_GPU_POOL
from compactor.model.types import Snapshot

_EVERY_NODE_OFFERS = frozenset({"cpu", "memory", "ephemeral-storage", "pods"})
_NAMED = 5  # labels or resources named in a message


def pool_label_unused(snapshot: Snapshot, pool_label: str) -> str | None:
    """Why ``pool_label`` would merge every GPU model into one pool, when no GPU node carries it (None: some do)."""
    gpu_nodes = [n for n in snapshot.nodes if n.is_gpu_node]
    # a DRA node's pool is its devices' product when it carries no label of its own (compactor.model.dra)
    if not gpu_nodes or any(pool_label in n.labels or n.pool != UNLABELLED_GPU_POOL for n in gpu_nodes):
        return None
    seen = _named(
        sorted({label for n in gpu_nodes for label in n.labels if "gpu" in label or "product" in label}), _NAMED
    )
    return (
        f"metrics.pool_label {pool_label!r} is on none of the {len(gpu_nodes)} GPU nodes: every GPU model would be one pool "
        f"and plans could move pods across products; GPU-related labels the nodes carry: {seen}"
    )


def pool_label_is_default(pool_label: str) -> bool:
    """Without GPU Feature Discovery no node carries the default label: one pool is then a legitimate reading (warned)."""
    return pool_label == DEFAULT_POOL_LABEL


def unoffered_resources(snapshot: Snapshot, shapes: Iterable[Mapping[str, int]]) -> list[str]:
    """Resources the shapes ask that no node's allocatable offers (a typo such as ``nvidia.com/gpuu``), sorted."""
    offered = {r for n in snapshot.nodes for r, amount in n.allocatable.items() if amount > 0} | _EVERY_NODE_OFFERS
    return sorted({r for shape in shapes for r in shape if r not in offered})


def offered_gpu_resources(snapshot: Snapshot) -> str:
    """The GPU resources nodes offer, for a message."""
    return _named(
        sorted(
            {
                r
                for n in snapshot.nodes
                for r, amount in n.allocatable.items()
                if amount > 0 and r not in _EVERY_NODE_OFFERS
            }
        ),
        2 * _NAMED,
    )


def _named(items: list[str], most: int) -> str:
    """The first ``most`` items, and how many more there are ("none" for none)."""
    return ", ".join(items[:most]) + (f" (+{len(items) - most} more)" if len(items) > most else "") or "none"

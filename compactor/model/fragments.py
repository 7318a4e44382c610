"""How a node's free resources take the reference shapes: the copies of each shape that fit, and the free GPU capacity
the shapes leave as holes (the per-node terms of the fragmentation rates; formulas in ``docs/metrics.md``).

In the model rather than in ``compactor.metrics`` because two services apply the same formula: the figures sum it
over the cluster, and the planner's MIG re-cut step judges a layout by it (``idle_fragmentation_rate``) without
importing the figures.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from compactor.model.resources import PODS, is_gpu_resource
from compactor.model.shapes import ReferenceShape, label_order
from compactor.model.types import Node

_NO_POD_LIMIT = 1 << 62  # a node that does not advertise ``pods`` limits nothing by pod count


@dataclass(frozen=True, slots=True)
class PreparedShape:
    """A reference shape prepared for the per-node loop."""

    items: tuple[tuple[str, int], ...]  # GPU resources first: most nodes fail there
    gpu_items: tuple[tuple[str, int], ...]
    headline_weight: float  # renormalised over GPU shapes only
    fgd_weight: float  # renormalised over all shapes


def prepare_shapes(shapes: Sequence[ReferenceShape]) -> tuple[PreparedShape, ...]:
    total = math.fsum(s.weight for s in shapes)
    gpu_total = math.fsum(s.weight for s in shapes if s.uses_gpu)
    prepared = []
    for s in shapes:
        items = tuple(
            sorted(((r, v) for r, v in s.requests.items() if v > 0 and r != PODS), key=lambda kv: label_order(kv[0]))
        )
        gpu_items = tuple(kv for kv in items if is_gpu_resource(kv[0]))
        headline = s.weight / gpu_total if gpu_items and gpu_total > 0 else 0.0
        prepared.append(PreparedShape(items, gpu_items, headline, s.weight / total if total > 0 else 0.0))
    return tuple(prepared)


def copies_that_fit(items: Sequence[tuple[str, int]], free: Mapping[str, int], pod_slots: int = _NO_POD_LIMIT) -> int:
    """min over requested resources of floor(free / request), and at most one copy per free pod slot."""
    if not items:
        return 0  # an empty shape is no request at all
    best = pod_slots
    for resource, need in items:
        have = free.get(resource, 0)
        if have < need:
            return 0
        best = min(best, have // need)
    return max(best, 0)


@dataclass(frozen=True, slots=True)
class NodeFree:
    """A node's free vector and GPU free capacity, kept for the shape loop and the pending-pod check."""

    node: Node
    free: dict[str, int]
    equivalent: dict[str, float]
    free_gpu_by_resource: dict[str, float]
    free_gpus: float
    pod_slots: int

    @property
    def hostable(self) -> bool:
        return self.node.ready and not self.node.unschedulable


def node_free(node: Node, requested: Mapping[str, int]) -> NodeFree:
    """What ``node`` has free once its bound pods' ``requested`` total is taken."""
    allocatable = node.allocatable.as_dict()
    names = sorted(allocatable.keys() | requested.keys())  # sorted: results independent of pod order
    free = {r: allocatable.get(r, 0) - requested.get(r, 0) for r in names}
    equivalent = dict(node.gpu.gpu_equivalent)
    by_resource = {r: max(0, free.get(r, 0)) * e for r, e in sorted(equivalent.items())}
    slots = max(0, free[PODS]) if PODS in allocatable else _NO_POD_LIMIT
    return NodeFree(node, free, equivalent, by_resource, sum(by_resource.values()), slots)


def copies_per_shape(state: NodeFree, shapes: Sequence[PreparedShape]) -> list[int]:
    free, slots = state.free, state.pod_slots
    copies = []
    for shape in shapes:
        # Most (node, shape) pairs fail on the shape's first (GPU) resource: skip the call for them.
        if not shape.items or free.get(shape.items[0][0], 0) < shape.items[0][1]:
            copies.append(0)
        else:
            copies.append(copies_that_fit(shape.items, free, slots))
    return copies


class ShapesByFirstResource:
    """Shapes indexed by their first (GPU) resource, for many shapes over many nodes: a node is tried only against the
    shapes whose first resource it has free (a MIG node's free ``1g.5gb`` slices never meet the whole-GPU shapes)."""

    def __init__(self, shapes: Sequence[PreparedShape]) -> None:
        self.shapes = shapes
        self.by_first: dict[str, list[int]] = {}
        for i, shape in enumerate(shapes):
            if shape.items:
                self.by_first.setdefault(shape.items[0][0], []).append(i)

    def copies(self, state: NodeFree) -> list[int]:
        """The copies of each shape that fit on ``state`` (as ``copies_per_shape``)."""
        found = [0] * len(self.shapes)
        free, slots = state.free, state.pod_slots
        for resource, indices in self.by_first.items():
            have = free.get(resource, 0)
            for i in indices:
                if have >= self.shapes[i].items[0][1]:
                    found[i] = copies_that_fit(self.shapes[i].items, free, slots)
        return found


def node_fragments(state: NodeFree, shapes: Sequence[PreparedShape]) -> tuple[float, float, list[int]]:
    """(Σ_m p'_m frag_n(m), Σ_m p_m F_n(m)) and the copies of each shape that fit; formulas in docs/metrics.md.

    Plain sums are enough here: the shape order is fixed, so the result does not depend on input order.
    """
    copies = copies_per_shape(state, shapes)
    free_gpus = state.free_gpus
    if free_gpus <= 0:
        return 0.0, 0.0, copies
    hole_sum = fgd_sum = 0.0
    for shape, n in zip(shapes, copies, strict=True):
        if not shape.gpu_items:
            fgd_sum += shape.fgd_weight * free_gpus  # a CPU-only task uses no GPU: FGD counts all of it
        elif n == 0:
            hole_sum += shape.headline_weight * free_gpus
            fgd_sum += shape.fgd_weight * free_gpus
        else:
            per_copy = usable_devices = 0.0
            for resource, amount in shape.gpu_items:
                per_copy += amount * state.equivalent.get(resource, 0.0)
                # FGD: only devices of the requested resources can serve the shape; the rest is R < D.
                usable_devices += state.free_gpu_by_resource.get(resource, 0.0)
            hole_sum += shape.headline_weight * max(0.0, free_gpus - n * per_copy)
            fgd_sum += shape.fgd_weight * max(0.0, free_gpus - usable_devices)
    return min(free_gpus, hole_sum), min(free_gpus, fgd_sum), copies


def idle_fragmentation_rate(node: Node, shapes: Sequence[ReferenceShape]) -> float | None:
    """The headline fragmentation rate of ``node`` running nothing: what ``compactor.metrics`` reports as the cluster's
    ``fragmentation_rate`` for a snapshot of that node alone. None without free GPU capacity or a GPU shape."""
    prepared = prepare_shapes(shapes)
    state = node_free(node, {})
    if not any(s.gpu_items for s in prepared) or state.free_gpus <= 0:
        return None
    fragmented, _, _ = node_fragments(state, prepared)
    return min(1.0, max(0.0, fragmented / state.free_gpus))

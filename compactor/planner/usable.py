"""Usable freed GPUs: the GPUs of a node left with no GPU pod that a request shape in use can take there.

A node whose GPU pods all left is whole-free, but its GPUs serve nothing if the CPU, memory or pod slots beside them
are held by pods without GPUs: an 8-GPU pod asking 64 CPUs does not start on a node with 12 CPUs free. So a freed node
counts as *usable* the GPUs that copies of the best request shape in use fit there, given everything the node has left
after the plan; the shapes are the pending pods' first, then the reference shapes (``metrics``' GPU request shapes by
frequency, which carry their CPU and memory) and every other GPU shape a pod asks: a shape is in use when one pod asks
it, not only when it makes the reference cut (configured shapes are in use by the operator's word). Without shapes
every freed GPU counts.

Units: physical GPUs, as ``freedGpus``. On a node whose GPU resources stand for fractions of a GPU (MIG instances,
time-sliced replicas) the share of its GPU capacity the shape takes, times its physical GPUs, rounded down.

Imports: ``compactor.model`` and the problem; no solver.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache

from compactor.model.quantity import format_amount
from compactor.model.resources import PODS, Resources, is_gpu_resource
from compactor.planner.problem import NodeState, Problem

Shape = tuple[tuple[str, int], ...]  # a request vector's (resource, amount) items, ``pods`` included


def usage_shapes(problem: Problem, reference: Iterable[Resources]) -> tuple[Shape, ...]:
    """The request shapes that judge a freed node: the pending pods' (those the plan may place), then the reference GPU
    shapes (``model.shapes.judged_shapes``: every GPU shape a pod asks, unless configured); each once, in that order."""
    found: dict[Shape, None] = {}
    for ptype in problem.types:
        if ptype.pending:
            found.setdefault(_shape(ptype.requests), None)
    for requests in reference:
        if any(is_gpu_resource(r) for r in requests):
            found.setdefault(_shape(requests), None)
    return tuple(found)


def _shape(requests: Mapping[str, int]) -> Shape:
    """The request's items with one pod slot: a shape's copy takes one of the node's ``pods``."""
    items = {r: v for r, v in requests.items() if v > 0 and not r.startswith("hostport.")}
    items[PODS] = 1
    return tuple(sorted(items.items()))


def usable_gpus(state: NodeState, load: Mapping[str, int], shapes: Sequence[Shape]) -> int:
    """Physical GPUs of ``state`` the best of ``shapes`` can take with what ``load`` leaves free (all of the node's GPUs
    when there are no shapes)."""
    gpus = state.gpus
    if not shapes or not gpus:
        return gpus
    equivalents = dict(state.node.gpu.gpu_equivalent)
    capacity = sum(state.capacity.get(r, 0) * eq for r, eq in equivalents.items())
    if capacity <= 0:
        return 0
    best = 0.0
    for shape in shapes:  # every GPU shape in use: tens at scale, so the cheap tests come first
        per_copy = sum(v * equivalents.get(r, 0.0) for r, v in _gpu_part(shape))
        if per_copy > 0:
            best = max(best, _copies(shape, state.capacity, load) * per_copy)
            if best >= capacity:
                break  # a shape takes all of it: no other can take more
    return min(gpus, int(gpus * min(1.0, best / capacity) + 1e-9))


@lru_cache(maxsize=8192)
def _gpu_part(shape: Shape) -> Shape:
    """The GPU resources of a shape (asked for every freed node of every point: cached)."""
    return tuple((r, v) for r, v in shape if is_gpu_resource(r))


def _copies(shape: Shape, capacity: Mapping[str, int], load: Mapping[str, int]) -> int:
    """Copies of ``shape`` that fit in what ``load`` leaves of ``capacity`` (a resource the node does not list has no
    room, but a node that lists no ``pods`` limits nothing by pod count)."""
    copies: int | None = None
    for resource, need in shape:
        if resource == PODS and PODS not in capacity:
            continue
        room = capacity.get(resource, 0) - load.get(resource, 0)
        if room < need:
            return 0
        copies = room // need if copies is None else min(copies, room // need)
    return copies or 0


def usable_change(
    problem: Problem, after: Sequence[Mapping[str, int]], freed: Iterable[int], filled: Iterable[int]
) -> int:
    """Of the net GPUs a plan makes whole-free (those of the nodes it frees less those of the whole-free nodes it fills),
    the usable ones: less the GPUs of freed nodes no shape in use can take with the loads ``after`` (the shapes are
    ``problem.usage_shapes``). Never more than the net freed GPUs."""
    shapes, nodes = problem.usage_shapes, problem.nodes
    gained = sum(usable_gpus(nodes[n], after[n], shapes) for n in freed)
    return gained - sum(nodes[n].gpus for n in filled)


NAMED_NODES = 3  # nodes named in the one line that says why freed GPUs are not usable


def why_unusable(problem: Problem, after: Sequence[Mapping[str, int]], freed: Iterable[int]) -> str:
    """One line: which freed nodes keep GPUs no shape in use can take, and what the first shape (a pending pod's when
    there is one) lacks there; "" when every freed GPU is usable."""
    shapes, nodes = problem.usage_shapes, problem.nodes
    short = [(n, usable_gpus(nodes[n], after[n], shapes)) for n in freed]
    short = [(n, usable) for n, usable in short if usable < nodes[n].gpus]
    if not shapes or not short:
        return ""
    lost = sum(nodes[n].gpus - usable for n, usable in short)
    total = sum(nodes[n].gpus for n in freed)
    first = dict(shapes[0])
    lacking = []
    for n, _ in short[:NAMED_NODES]:
        state = nodes[n]
        room = {r: state.capacity.get(r, 0) - after[n].get(r, 0) for r in first}
        missing = [r for r, need in first.items() if room[r] < need and not is_gpu_resource(r)]
        what = ", ".join(f"{format_amount(r, max(0, room[r]))} {r} free" for r in missing) or "too few GPUs free"
        lacking.append(f"{state.node.name} ({what})")
    more = f" and {len(short) - NAMED_NODES} more" if len(short) > NAMED_NODES else ""
    asks = ", ".join(f"{r}={format_amount(r, v)}" for r, v in sorted(first.items()) if r != PODS)
    return (
        f"{lost} of the {total} freed GPUs fit no request shape in use: {', '.join(lacking)}{more}; "
        f"the first shape asks {asks}"
    )

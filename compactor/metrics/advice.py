"""Normalisation advice: which GPU request shapes strand the most capacity, and what rounding them up would change.

Pure: a snapshot and its figures in, typed frozen results out; no I/O, no clock. Every number is one of the headline
figures of ``compute_figures`` (stranded capacity and share, whole-free GPUs, blocked demand, pending pods that fit),
measured on the snapshot as it is and on the snapshot as it would be with one shape's requests rounded up.
Definitions and a worked example: ``docs/metrics.md``, "Normalisation advice"; ``tests/unit/metrics/test_advice.py`` checks it.

* A *GPU request shape* is the GPU part of a pod's requests (``nvidia.com/mig-2g.10gb=1``, ``nvidia.com/gpu=2``), over
  the bound and the pending pods, as the reference shapes count them. CPU, memory and the rest stay as each pod asks.
* *Stranded by a shape*: each node's stranded GPU-equivalents are shared among the shapes of the GPU pods bound there,
  in proportion to the GPU-equivalents each shape's pods hold on it (by pod count if they hold none). Nodes running no
  GPU pod strand capacity no shape is blamed for (``unattributed``).
* A *rounding* asks a larger request of the same resource family, in use or offered: the same GPU resource in a
  larger amount some pod asks already (``nvidia.com/gpu`` 1 -> 2 -> 4 -> 8), or for MIG the same amount of a larger
  profile of the same GPU model that a node offers. Never a smaller request, never a resource no node offers (in the
  amount asked).
* In the rounded cluster a bound pod stays on its node while the node has room for the rounded request (as many of
  the shape's pods as fit, in name order); the others are *displaced*: unbound and pending with their rounded request,
  so the pending-pod figures judge them like any other pending pod. MIG layouts and every other pod stay as they are.
* The advice also carries ``cpu_pods.cpu_pods_advice``: CPU-only pods on GPU nodes that keep GPU demand out.

The shapes in use, their candidates and the stranding attributed to them are ``request_shapes``; how the advice is shown
(the report's sections, its JSON form) is ``compactor.render.advice``. The sentences and notes stay here: they are part of
the result, as its JSON carries them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from compactor.metrics.cpu_pods import CpuPodsOnGpuNodes, cpu_pods_advice
from compactor.metrics.fragmentation import (
    CONFIG,
    Figures,
    ReferenceShape,
    compute_figures,
    reference_shapes,
    requests_label,
)
from compactor.metrics.headline import Headline, headline, not_fitting
from compactor.metrics.request_shapes import ShapeIndex, ShapeStranding, rank_shapes
from compactor.metrics.spreading import Spreading, spreading
from compactor.model.numbers import fmt_gpus_exact, fmt_pct
from compactor.model.resources import Resources
from compactor.model.types import Pod, Snapshot

DEFAULT_TOP = 5  # shapes whose roundings are measured, from the top of the ranking
DEFAULT_PER_SHAPE = 2  # roundings measured per shape, nearest first
_EPS = 1e-9


# ---------------------------------------------------------------------------
# Result types


@dataclass(frozen=True)
class Rounding:
    """One shape's pods asking a larger request, measured."""

    shape: str  # label of the request as asked
    rounded_to: str  # label of the rounded request
    request: Resources
    rounded: Resources
    pods: int  # bound and pending pods of the shape
    extra_gpus: float  # GPU-equivalents the rounded requests ask for beyond the current ones
    in_place: int  # bound pods whose rounded request still fits their node
    displaced: int  # bound pods that no longer fit where they run
    displaced_fit: int  # of those, how many fit another node (each on its own)
    before: Headline
    after: Headline
    recovered_gpus: float  # stranded before - after
    placed_gpus: float  # own GPU requests of the snapshot's pending pods that fit after and not before (net)
    stopped_gpus: float  # own GPU requests of displaced pods that fit no node
    benefit_gpus: float  # recovered + placed - stopped: the sort key
    sentence: str


@dataclass(frozen=True)
class Advice:
    stranded_gpus: float  # the cluster's stranded GPU-equivalents
    unattributed_stranded_gpus: float  # stranded on nodes that run no GPU pod
    shapes: tuple[ShapeStranding, ...]  # ranked: most stranded first
    roundings: tuple[Rounding, ...]  # most benefit first
    evaluated_shapes: tuple[str, ...]  # the shapes whose roundings were measured
    notes: tuple[str, ...]
    # CPU-only pods on GPU nodes keeping GPU demand out, measured (None when there are none or it would change nothing)
    cpu_pods_on_gpu_nodes: CpuPodsOnGpuNodes | None = None
    # GPU pods spread over more nodes than they need while demand waits: the scheduler's to remedy first (None: not so)
    spreading: Spreading | None = None


# ---------------------------------------------------------------------------
# Measuring one rounding


def _rounded_shapes(
    shapes: Sequence[ReferenceShape], request: Resources, rounded: Resources
) -> tuple[ReferenceShape, ...]:
    """Configured shapes with the GPU part ``request`` asking ``rounded`` instead (the rest of each shape as it is)."""
    out = []
    for shape in shapes:
        if shape.requests.gpu_part() == request:
            requests = Resources({**{r: v for r, v in shape.requests.items() if r not in request}, **rounded})
            shape = dataclasses.replace(shape, requests=requests, label=requests_label(requests))
        out.append(shape)
    return tuple(out)


@dataclass(frozen=True)
class _Context:
    snapshot: Snapshot
    figures: Figures
    index: ShapeIndex
    before: Headline
    pending_keys: tuple[str, ...]  # the snapshot's pending GPU pods
    own_gpus: dict[str, float]  # pod key -> GPU-equivalents its own (unrounded) request asks for
    coverage: float
    max_shapes: int


def _round(ctx: _Context, request: Resources, rounded: Resources) -> Rounding:
    """The cluster with the pods of ``request`` asking ``rounded``, measured by ``compute_figures``."""
    ((resource, amount),) = request.items()
    ((new_resource, new_amount),) = rounded.items()
    memo: dict[int, Resources] = {}

    def rounded_requests(pod: Pod) -> Resources:
        ident = id(pod.requests)
        if ident not in memo:
            memo[ident] = Resources(
                {**{r: v for r, v in pod.requests.items() if r != resource}, new_resource: new_amount}
            )
        return memo[ident]

    pods = list(ctx.snapshot.pods)
    members = ctx.index.by_shape[request]
    by_node: dict[str, list[int]] = {}
    for i in members:
        pod = pods[i]
        if pod.is_bound:
            by_node.setdefault(pod.node_name, []).append(i)
        else:
            pods[i] = msgspec.structs.replace(pod, requests=rounded_requests(pod))
    nodes = {n.name: n for n in ctx.figures.nodes}
    in_place = 0
    displaced: list[str] = []
    for name, group in by_node.items():
        group.sort(key=lambda i: pods[i].key)
        node = nodes.get(name)
        if node is None:
            stay = len(group)  # a node the snapshot lacks: nothing to measure there, the pods keep their place
        else:
            released = len(group) * amount if new_resource == resource else 0
            room = node.allocatable.get(new_resource) - node.allocated.get(new_resource) + released
            stay = min(len(group), max(0, room) // new_amount)
        for rank, i in enumerate(group):
            pod = pods[i]
            if rank < stay:
                pods[i] = msgspec.structs.replace(pod, requests=rounded_requests(pod))
                in_place += 1
            else:
                pods[i] = msgspec.structs.replace(
                    pod, requests=rounded_requests(pod), node_name="", phase="Pending", nominated_node=""
                )
                displaced.append(pod.key)
    scenario = dataclasses.replace(ctx.snapshot, pods=tuple(pods))
    shapes = ctx.figures.shapes
    if any(s.source == CONFIG for s in shapes):
        chosen = _rounded_shapes(shapes, request, rounded)
    else:
        chosen = reference_shapes(scenario, coverage=ctx.coverage, max_shapes=ctx.max_shapes)
    after_figures = compute_figures(scenario, chosen)
    after = headline(after_figures, ctx.pending_keys)
    out_before = not_fitting(ctx.figures)
    out_after = not_fitting(after_figures)
    placed = math.fsum(
        ctx.own_gpus[key] * ((key not in out_after) - (key not in out_before)) for key in ctx.pending_keys
    )
    stopped = math.fsum(ctx.own_gpus[key] for key in displaced if key in out_after)
    recovered = ctx.before.stranded_gpus - after.stranded_gpus
    result = Rounding(
        shape=requests_label(request),
        rounded_to=requests_label(rounded),
        request=request,
        rounded=rounded,
        pods=len(members),
        extra_gpus=len(members) * (ctx.index.gpus(rounded) - ctx.index.gpus(request)),
        in_place=in_place,
        displaced=len(displaced),
        displaced_fit=sum(1 for key in displaced if key not in out_after),
        before=ctx.before,
        after=after,
        recovered_gpus=recovered,
        placed_gpus=placed,
        stopped_gpus=stopped,
        benefit_gpus=recovered + placed - stopped,
        sentence="",
    )
    return dataclasses.replace(result, sentence=sentence(result))


# ---------------------------------------------------------------------------
# Words


def sentence(r: Rounding) -> str:
    """One line: '5 pods ask for nvidia.com/mig-1g.5gb=1; as nvidia.com/mig-2g.10gb=1 they would take 0.625 more
    GPU-equivalents and strand 0.875 fewer (stranded share 36.0% -> 22.4%), blocked demand 0 -> 0, ...'."""
    b, a = r.before, r.after
    pods = f"{r.pods} pod asks" if r.pods == 1 else f"{r.pods} pods ask"
    they = "it" if r.pods == 1 else "they"
    change = r.before.stranded_gpus - r.after.stranded_gpus
    strand = (
        f"strand {fmt_gpus_exact(change)} fewer"
        if change > _EPS
        else f"strand {fmt_gpus_exact(-change)} more"
        if change < -_EPS
        else "strand as much"
    )
    unit = "GPU-equivalent" if abs(r.extra_gpus - 1) < _EPS else "GPU-equivalents"
    extra = (
        f"take {fmt_gpus_exact(r.extra_gpus)} more {unit}" if r.extra_gpus > _EPS else "take no more GPU-equivalents"
    )
    parts = [
        f"{pods} for {r.shape}; as {r.rounded_to} {they} would {extra} and {strand} "
        f"(stranded share {fmt_pct(b.stranded_share)} -> {fmt_pct(a.stranded_share)}), "
        f"blocked demand {fmt_gpus_exact(b.blocked_demand_gpus)} -> {fmt_gpus_exact(a.blocked_demand_gpus)}"
    ]
    if (grown := a.unplaceable_pending - b.unplaceable_pending) > 0:  # issue 45: "blocked 8 -> 0" by growing too large
        parts.append(
            f" (only because {grown} pending pod(s) would then ask more than the free capacity: no longer counted as "
            "blocked, still waiting)"
        )
    if b.whole_free_physical_gpus != a.whole_free_physical_gpus:
        parts.append(f", whole-free GPUs {b.whole_free_physical_gpus} -> {a.whole_free_physical_gpus}")
    if b.pending:
        parts.append(f", pending GPU pods that fit {b.pending_fit} -> {a.pending_fit} of {b.pending}")
    if r.displaced == 1:
        parts.append(
            f"; 1 would no longer fit where it runs ({'it would fit another node' if r.displaced_fit else 'nor on any other node'})"
        )
    elif r.displaced:
        parts.append(
            f"; {r.displaced} would no longer fit where they run ({r.displaced_fit} of them would fit another node, each on its own)"
        )
    return "".join(parts)


# ---------------------------------------------------------------------------
# Entry point


def advise(
    snapshot: Snapshot,
    figures: Figures,
    *,
    coverage: float = 0.95,
    max_shapes: int = 20,
    top: int = DEFAULT_TOP,
    per_shape: int = DEFAULT_PER_SHAPE,
) -> Advice:
    """Rank the GPU request shapes in use by the capacity they strand and measure rounding the first ``top`` of them
    (that can be rounded) up to their ``per_shape`` nearest larger requests.

    ``figures`` are ``compute_figures(snapshot, shapes)``; the rounded clusters are measured against the shapes the
    same way: configured shapes (``source == CONFIG``) with the rounded request in place of the shape's, else the
    workload's shapes again, with ``coverage`` and ``max_shapes``.
    """
    if top < 1 or per_shape < 1:
        raise ValueError(f"top and per_shape must be >= 1, got {top} and {per_shape}")
    index = ShapeIndex(snapshot)
    ranked, unattributed = rank_shapes(index, figures)
    pending = tuple(sorted(p.key for p in snapshot.pending_pods() if p.uses_gpu))
    own = {p.key: index.gpus(p.requests) for p in snapshot.pods if p.uses_gpu}
    ctx = _Context(snapshot, figures, index, headline(figures, pending), pending, own, coverage, max_shapes)
    roundings: list[Rounding] = []
    evaluated: list[str] = []
    for shape in ranked:
        if len(evaluated) >= top:
            break
        targets = index.candidates(shape.request)[:per_shape]
        if targets:
            evaluated.append(shape.label)
            roundings.extend(_round(ctx, shape.request, target) for target in targets)
    roundings.sort(
        key=lambda r: (-round(r.benefit_gpus, 9), round(r.extra_gpus, 9), r.displaced, r.shape, r.rounded_to)
    )
    return Advice(
        stranded_gpus=figures.cluster.stranded_gpus,
        unattributed_stranded_gpus=unattributed,
        shapes=tuple(ranked),
        roundings=tuple(roundings),
        evaluated_shapes=tuple(evaluated),
        notes=_notes(ranked, roundings, unattributed),
        cpu_pods_on_gpu_nodes=cpu_pods_advice(snapshot, figures),
        spreading=spreading(figures),
    )


def _notes(ranked: Sequence[ShapeStranding], roundings: Sequence[Rounding], unattributed: float) -> tuple[str, ...]:
    notes = []
    if not ranked:
        notes.append("no GPU pod: no request shape to advise on")
    elif not roundings:
        notes.append("no shape in use can be rounded up to a larger request of its family that a node offers")
    elif all(r.benefit_gpus <= _EPS for r in roundings):
        notes.append("no rounding measured lowers stranded capacity or gets more pending GPU pods a place")
    if unattributed > _EPS:
        notes.append(
            f"{fmt_gpus_exact(unattributed)} stranded GPU-equivalents are on nodes running no GPU pod: no shape is blamed for them"
        )
    return tuple(notes)

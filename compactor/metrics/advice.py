"""Normalisation advice: which GPU request shapes strand the most capacity, and what rounding them up would change.

Pure: a snapshot and its figures in, typed frozen results out; no I/O, no clock. Every number is one of the headline
figures of ``compute_figures`` (stranded capacity and share, whole-free GPUs, blocked demand, pending pods that fit),
measured on the snapshot as it is and on the snapshot as it would be with one shape's requests rounded up.
Definitions and a worked example: ``docs/metrics.md``, "Normalisation advice"; ``tests/unit/test_advice.py`` checks it.

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
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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
from compactor.model.catalog import GpuModel, MigProfile, profile_from_resource, resolve_profiles
from compactor.model.resources import Resources, is_gpu_resource, is_mig_resource
from compactor.model.types import Pod, Snapshot

DEFAULT_TOP = 5  # shapes whose roundings are measured, from the top of the ranking
DEFAULT_PER_SHAPE = 2  # roundings measured per shape, nearest first
_EPS = 1e-9


# ---------------------------------------------------------------------------
# Result types


@dataclass(frozen=True)
class ShapeStranding:
    """One GPU request shape in use and the capacity it strands."""

    request: Resources  # the GPU part of the pods' requests
    label: str
    bound_pods: int
    pending_pods: int
    held_gpus: float  # GPU-equivalents its bound pods hold
    stranded_gpus: float  # the share of stranded capacity attributed to it (GPU-equivalents)
    blocked_demand_gpus: float  # GPU-equivalents its blocked pending pods ask for

    @property
    def pods(self) -> int:
        return self.bound_pods + self.pending_pods


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


# ---------------------------------------------------------------------------
# Pods grouped by GPU request shape


class _Index:
    """The snapshot's bound and pending pods by the GPU part of their requests (memoised per requests object)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.pods = snapshot.pods
        parts: dict[int, Resources] = {}
        self.by_shape: dict[Resources, list[int]] = {}
        for i, pod in enumerate(snapshot.pods):
            if not (pod.is_bound or pod.is_pending_demand):
                continue
            ident = id(pod.requests)
            if ident not in parts:
                parts[ident] = pod.requests.gpu_part()
            part = parts[ident]
            if part:
                self.by_shape.setdefault(part, []).append(i)
        # GPU-equivalents of one unit: the most any node gives the resource, as blocked demand counts it.
        self.equivalent: dict[str, float] = {}
        self.offered: dict[str, int] = {}  # the most of each GPU resource one node offers
        self.node_eq: dict[str, dict[str, float]] = {}
        for node in snapshot.nodes:
            self.node_eq[node.name] = dict(node.gpu.gpu_equivalent)
            for resource, eq in node.gpu.gpu_equivalent:
                self.equivalent[resource] = max(eq, self.equivalent.get(resource, 0.0))
            for resource, amount in node.allocatable.items():
                if is_gpu_resource(resource) and amount > 0:
                    self.offered[resource] = max(amount, self.offered.get(resource, 0))
        self._mig = _mig_models(snapshot)

    def gpus(self, requests: Mapping[str, int]) -> float:
        return math.fsum(v * self.equivalent.get(r, 1.0) for r, v in sorted(requests.items()) if is_gpu_resource(r))

    def candidates(self, request: Resources) -> list[Resources]:
        """Larger requests of the same family some node offers, nearest first (fewest extra GPU-equivalents)."""
        if len(request) != 1:
            return []  # a pod asking two GPU resources: no single family to round in
        ((resource, amount),) = request.items()
        found: set[Resources] = set()
        for shape in self.by_shape:
            if len(shape) == 1 and shape.get(resource) > amount and self.offered.get(resource, 0) >= shape[resource]:
                found.add(shape)  # the same resource, a larger amount in use
        if is_mig_resource(resource):
            for larger in self._larger_profiles(resource):
                if self.offered.get(larger, 0) >= amount:
                    found.add(Resources({larger: amount}))
        return sorted(found, key=lambda r: (round(self.gpus(r) - self.gpus(request), 9), requests_label(r)))

    def _larger_profiles(self, resource: str) -> list[str]:
        """MIG resources offered on nodes of the GPU models that offer ``resource``, larger than it in each such model
        that knows them (more memory or compute slices, neither fewer)."""
        models = [(model, profiles) for model, profiles in self._mig.values() if resource in profiles]
        larger: set[str] = set()
        for _, profiles in models:
            own = profiles[resource]
            larger.update(r for r, p in profiles.items() if _larger(p, own))
        for model, _ in models:
            own_profile = model.profile(profile_from_resource(resource))
            for r in list(larger):
                other = model.profile(profile_from_resource(r))
                if own_profile is not None and other is not None and not _larger(other, own_profile):
                    larger.discard(r)
        return sorted(larger)


def _larger(profile: MigProfile, than: MigProfile) -> bool:
    return (
        profile.memory_slices >= than.memory_slices
        and profile.compute_slices >= than.compute_slices
        and (profile.memory_slices, profile.compute_slices) != (than.memory_slices, than.compute_slices)
    )


def _mig_models(snapshot: Snapshot) -> dict[str, tuple[GpuModel, dict[str, MigProfile]]]:
    """GPU model name -> (model, the MIG resources nodes of that model offer and their profile)."""
    out: dict[str, tuple[GpuModel, dict[str, MigProfile]]] = {}
    for node in snapshot.nodes:
        offered = [r for r, amount in node.allocatable.items() if is_mig_resource(r) and amount > 0]
        if not offered:
            continue
        model, found = resolve_profiles(node.gpu.product, [profile_from_resource(r) for r in offered])
        if model is None:
            continue
        entry = out.setdefault(model.name, (model, {}))
        for resource in offered:
            profile = found.get(profile_from_resource(resource))
            if profile is not None:
                entry[1][resource] = profile
    return out


# ---------------------------------------------------------------------------
# Ranking


def _rank(index: _Index, figures: Figures) -> tuple[list[ShapeStranding], float]:
    """Shapes with the stranded capacity attributed to them, most first; and the stranded capacity attributed to none."""
    nodes = {n.name: n for n in figures.nodes}
    held: dict[str, dict[Resources, list[float]]] = {}
    counts: dict[str, dict[Resources, int]] = {}
    bound: dict[Resources, int] = {}
    pending: dict[Resources, int] = {}
    shape_of: dict[str, Resources] = {}
    for shape, members in index.by_shape.items():
        for i in members:
            pod = index.pods[i]
            shape_of[pod.key] = shape
            if not pod.is_bound:
                pending[shape] = pending.get(shape, 0) + 1
                continue
            bound[shape] = bound.get(shape, 0) + 1
            node = nodes.get(pod.node_name)
            if node is None:
                continue  # bound to a node the snapshot lacks: the figures do not see it either
            eq = index.node_eq.get(node.name, {})
            held.setdefault(node.name, {}).setdefault(shape, []).append(
                math.fsum(v * eq.get(r, 0.0) for r, v in shape.items())
            )
            counts.setdefault(node.name, {})[shape] = counts.get(node.name, {}).get(shape, 0) + 1
    attributed: dict[Resources, list[float]] = {}
    holding: dict[Resources, list[float]] = {}
    unattributed: list[float] = []
    for node in figures.nodes:
        on_node = held.get(node.name)
        if not on_node:
            unattributed.append(node.stranded_gpus)
            continue
        weights = {shape: math.fsum(terms) for shape, terms in on_node.items()}
        total = math.fsum(weights.values())
        if total <= 0:
            weights = {shape: float(n) for shape, n in counts[node.name].items()}
            total = math.fsum(weights.values())
        for shape, weight in weights.items():
            attributed.setdefault(shape, []).append(node.stranded_gpus * weight / total)
            holding.setdefault(shape, []).extend(on_node[shape])
    blocked: dict[Resources, list[float]] = {}
    for entry in figures.blocked_pending:
        if entry.pod in shape_of:
            blocked.setdefault(shape_of[entry.pod], []).append(entry.gpu_equivalents)
    ranked = [
        ShapeStranding(
            shape,
            requests_label(shape),
            bound.get(shape, 0),
            pending.get(shape, 0),
            math.fsum(holding.get(shape, ())),
            math.fsum(attributed.get(shape, ())),
            math.fsum(blocked.get(shape, ())),
        )
        for shape in index.by_shape
    ]
    ranked.sort(key=lambda s: (-round(s.stranded_gpus, 9), -round(s.blocked_demand_gpus, 9), -s.pods, s.label))
    return ranked, math.fsum(unattributed)


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
    index: _Index
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


def _num(value: float) -> str:
    """Up to 3 decimals, so that eighths of a GPU (MIG slices) print exactly: ``3``, ``0.5``, ``0.625``, ``0.667``."""
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def sentence(r: Rounding) -> str:
    """One line: '5 pods ask for nvidia.com/mig-1g.5gb=1; as nvidia.com/mig-2g.10gb=1 they would take 0.625 more
    GPU-equivalents and strand 0.875 fewer (stranded share 36.0% -> 22.4%), blocked demand 0 -> 0, ...'."""
    b, a = r.before, r.after
    pods = f"{r.pods} pod asks" if r.pods == 1 else f"{r.pods} pods ask"
    they = "it" if r.pods == 1 else "they"
    change = r.before.stranded_gpus - r.after.stranded_gpus
    strand = (
        f"strand {_num(change)} fewer"
        if change > _EPS
        else f"strand {_num(-change)} more"
        if change < -_EPS
        else "strand as much"
    )
    unit = "GPU-equivalent" if abs(r.extra_gpus - 1) < _EPS else "GPU-equivalents"
    extra = f"take {_num(r.extra_gpus)} more {unit}" if r.extra_gpus > _EPS else "take no more GPU-equivalents"
    parts = [
        f"{pods} for {r.shape}; as {r.rounded_to} {they} would {extra} and {strand} "
        f"(stranded share {_pct(b.stranded_share)} -> {_pct(a.stranded_share)}), "
        f"blocked demand {_num(b.blocked_demand_gpus)} -> {_num(a.blocked_demand_gpus)}"
    ]
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
    index = _Index(snapshot)
    ranked, unattributed = _rank(index, figures)
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
            f"{_num(unattributed)} stranded GPU-equivalents are on nodes running no GPU pod: no shape is blamed for them"
        )
    return tuple(notes)


# ---------------------------------------------------------------------------
# JSON form


def _value(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 4) + 0.0
    if isinstance(value, Resources):
        return {key: int(value[key]) for key in sorted(value)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {_camel(f.name): _value(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [_value(item) for item in value]
    return value


_JSON_NAMES = {
    "whole_free_physical_gpus": "wholeFreePhysicalGpus",
    "blocked_pending": "blockedPendingPods",
    "unplaceable_pending": "unplaceablePendingPods",
    "pending_fit": "pendingPodsThatFit",
    "pending": "pendingPods",
}


def _camel(name: str) -> str:
    if name in _JSON_NAMES:
        return _JSON_NAMES[name]
    if name.endswith("_gpus"):
        name = name.removesuffix("_gpus") + "_gpu_equivalents"
    head, *rest = name.split("_")
    return head + "".join(word.capitalize() for word in rest)


def advice_to_dict(advice: Advice) -> dict[str, Any]:
    """JSON-ready form: camelCase keys, GPU capacity in ``...GpuEquivalents``, floats to 4 places (as ``figures_to_dict``)."""
    result: dict[str, Any] = _value(advice)
    return result

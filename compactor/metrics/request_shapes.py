"""The GPU request shapes in use, for the normalisation advice: the pods grouped by the GPU part of their requests,
the larger requests each shape could be rounded to, and the stranded capacity attributed to each.

Apart from ``compactor.metrics.advice``, which measures the roundings: this is what it measures them on, read off the
snapshot and its figures once. Pure, no I/O; the attribution is defined in ``docs/metrics.md``, "Normalisation advice".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from compactor.metrics.fragmentation import Figures, requests_label
from compactor.model.catalog import GpuModel, MigProfile, profile_from_resource, resolve_profiles
from compactor.model.resources import Resources, is_gpu_resource, is_mig_resource
from compactor.model.types import Snapshot


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


# ---------------------------------------------------------------------------
# Pods grouped by GPU request shape


class ShapeIndex:
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


def rank_shapes(index: ShapeIndex, figures: Figures) -> tuple[list[ShapeStranding], float]:
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

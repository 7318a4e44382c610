"""The reference workload: the request shapes whose copies the figures count and the planner frees room for.

FGD's "task types" M with their popularity p_m: configured shapes (``metrics.reference_shapes``) or the popular GPU
request vectors of the workload. Pure: the figures (``compactor.metrics``) and the planner both read them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from compactor.model.quantity import format_amount
from compactor.model.resources import CPU, MEMORY, PODS, Resources, is_gpu_resource
from compactor.model.types import Pod, Snapshot

WORKLOAD = "workload"
CONFIG = "config"


@dataclass(frozen=True)
class ReferenceShape:
    """One request shape of the reference workload (FGD's "task type" m) and its popularity p_m."""

    requests: Resources
    weight: float
    label: str
    source: str  # WORKLOAD | CONFIG
    pods: int = 0  # how many observed pods have this shape (0 for configured shapes)

    @property
    def uses_gpu(self) -> bool:
        return any(is_gpu_resource(r) for r in self.requests)


def label_order(resource: str) -> tuple[int, str]:
    if is_gpu_resource(resource):
        return (0, resource)
    return {CPU: (1, ""), MEMORY: (2, "")}.get(resource, (3, resource))


def requests_label(requests: Mapping[str, int]) -> str:
    """``nvidia.com/gpu=2 cpu=4 memory=16Gi``: GPU resources first, ``pods`` left out."""
    names = sorted((r for r in requests if r != PODS and requests[r]), key=label_order)
    return " ".join(f"{r}={format_amount(r, requests[r])}" for r in names) or "(no requests)"


def _without_pods(requests: Mapping[str, int]) -> Resources:
    return Resources({r: v for r, v in requests.items() if r != PODS and v > 0})


def reference_shapes(
    snapshot: Snapshot,
    configured: Sequence[Mapping[str, int]] | None = None,
    coverage: float = 0.95,
    max_shapes: int = 20,
) -> tuple[ReferenceShape, ...]:
    """The reference workload M: configured shapes when given, else the popular GPU request shapes.

    Configured shapes get equal weight; listing a shape twice doubles its weight.
    Workload shapes follow FGD's ``GetTypicalPods``: bound and pending GPU pods
    grouped by exact request vector, most frequent first (ties by label), kept
    until they cover ``coverage`` of those pods, at most ``max_shapes``, weights
    renormalised to sum to 1.
    """
    if configured:
        return _configured_shapes(configured)
    return _workload_shapes(snapshot.pods, coverage, max_shapes)


def _configured_shapes(configured: Sequence[Mapping[str, int]]) -> tuple[ReferenceShape, ...]:
    counts: Counter[Resources] = Counter(shape for shape in map(_without_pods, configured) if shape)
    total = sum(counts.values())
    return tuple(ReferenceShape(shape, n / total, requests_label(shape), CONFIG) for shape, n in counts.items())


def shapes_in_use(pods: Iterable[Pod]) -> tuple[ReferenceShape, ...]:
    """Every GPU request shape a bound or pending pod asks, most frequent first, each weighted by its share of those
    pods: what "a request shape in use" means when free capacity is judged stranded or a freed GPU usable (issue 45:
    only the reference shapes, cut at ``metrics.max_shapes``, counted, so a shape 40 pods ask could be "not in use")."""
    ranked = _ranked_gpu_shapes(pods)
    total = sum(n for n, _, _ in ranked)
    return tuple(ReferenceShape(shape, n / total, label, WORKLOAD, pods=n) for n, label, shape in ranked)


# Judging costs nodes x shapes, and tenants choose their requests: pods each asking a request of their own must not make
# that nodes x pods. The most frequent this many are judged (a real cluster has tens: 84 on a generated 5,000 nodes).
MAX_JUDGED_SHAPES = 256


def judged_shapes(pods: Iterable[Pod], chosen: Sequence[ReferenceShape]) -> tuple[ReferenceShape, ...]:
    """The shapes free capacity is judged against (stranded, what limits a node, a freed GPU usable): configured shapes
    are the operator's word for what is in use; otherwise every GPU shape a pod asks (at most ``MAX_JUDGED_SHAPES``, the
    most frequent), not only the reference cut of them (``chosen``, what the weighted rates use:
    ``metrics.shape_coverage``, ``metrics.max_shapes``)."""
    if any(s.source == CONFIG for s in chosen):
        return tuple(chosen)
    return shapes_in_use(pods)[:MAX_JUDGED_SHAPES]


def _ranked_gpu_shapes(pods: Iterable[Pod]) -> list[tuple[int, str, Resources]]:
    """(pods, label, shape) of each GPU request shape of the bound and pending pods, most frequent first (ties by
    label)."""
    # Count identical request vectors first: far fewer distinct vectors than pods.
    vectors: Counter[Resources] = Counter(p.requests for p in pods if p.is_bound or p.is_pending_demand)
    counts: Counter[Resources] = Counter()
    for vector, n in vectors.items():
        if any(is_gpu_resource(r) for r in vector):
            counts[_without_pods(vector)] += n
    return sorted(((n, requests_label(s), s) for s, n in counts.items()), key=lambda t: (-t[0], t[1]))


def _workload_shapes(pods: Iterable[Pod], coverage: float, max_shapes: int) -> tuple[ReferenceShape, ...]:
    ranked = _ranked_gpu_shapes(pods)
    threshold = coverage * sum(n for n, _, _ in ranked)
    kept: list[tuple[int, str, Resources]] = []
    covered = 0
    for entry in ranked:
        if kept and (covered >= threshold - 1e-9 or len(kept) >= max_shapes):
            break
        kept.append(entry)
        covered += entry[0]
    return tuple(ReferenceShape(shape, n / covered, label, WORKLOAD, pods=n) for n, label, shape in kept)

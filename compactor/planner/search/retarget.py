"""Another target for one move whose planned target lost its room while the run went on (issue 42): a local repair under
the plan's own rules, instead of the run's end. Pure: parsed nodes and the requests bound on them in, node names out.

The repair looks at the move's whole source node: the move itself needs another target, and every other move off that
node still to be made must still fit too (its planned target if it has room once the earlier ones are placed, else
another), or the source would not be emptied and the moves made for it would be moves for nothing: then there is no
repair (``assign`` answers None) and the run gives that node's moves up.

The rules a target must meet are the planner's (``eligibility.TargetRules.why_not``, less what a narrow live read cannot
judge: a pod with a PersistentVolumeClaim, a required anti-affinity or a hard topology spread is not re-targeted, and no
node where a pod with a required anti-affinity runs is chosen). What the plan is for stays out of reach: the nodes it
frees or drains, the sources of its moves still to be made (they are being emptied), the move's own target, and for a
GPU pod every GPU node that runs no GPU pod (whole-free: what the plan keeps whole); a CPU-only pod goes to a node
without GPUs, as the planner moves CPU-only pods off GPU nodes. Among the rest, the best fit: the node left with the
fewest free GPUs (then CPU) once the pod is there, so the repair packs as the plan does.

Imports: ``compactor.model`` and the planner's movability rule only.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from compactor.model.resources import CPU, Resources, is_gpu_resource
from compactor.model.scheduling import evicting_taint, why_ineligible
from compactor.model.types import Node, Pod
from compactor.planner.rules.movability import EXCLUDE_LABEL


@dataclass(frozen=True)
class NodeUse:
    """What the pods bound to one node take, and what of them matters to a re-target."""

    requests: Resources
    runs_gpu_pod: bool  # the node is not whole-free
    anti_affinity: bool  # a pod there has a required anti-affinity: a narrow read cannot judge it, the node is left out


def why_not_retargeted(pod: Pod, *, hard_spread: bool) -> str:
    """Why ``pod``'s move cannot be repaired from a narrow read ("" when it can)."""
    if pod.claims or pod.ephemeral_volumes:
        return "it has PersistentVolumeClaims, whose node affinity a re-target does not read"
    if pod.affinity.anti_affinity_terms or pod.affinity.has_required_pod_affinity:
        return "it has required pod (anti-)affinity, which a re-target does not judge"
    if hard_spread:
        return "it has a DoNotSchedule topology spread constraint, which a re-target does not judge"
    if pod.resource_claims:
        return "its devices are allocated through dynamic resource allocation, which the plan chose"
    return ""


@dataclass(frozen=True)
class Wanted:
    """One move off the source node to place: its pod, its planned target, and whether that target may still be kept
    (False for the move whose target lost its room)."""

    pod: Pod
    planned: str
    keep_planned: bool = True


def assign(
    wanted: Sequence[Wanted],
    nodes: Sequence[Node],
    use: Mapping[str, NodeUse],
    *,
    pool: str,
    out_of_reach: Collection[str],
) -> list[str] | None:
    """A target for each of ``wanted`` in turn (its planned one while it fits, else the best other), each placed before
    the next is judged; None when one finds none. ``nodes`` and ``use``: read just now; ``pool``: the pool a GPU pod
    stays in ("" for any); ``out_of_reach``: the nodes the plan keeps for its own ends."""
    by_name = {n.name: n for n in nodes}
    tally = dict(use)
    targets = []
    for one in wanted:
        planned = by_name.get(one.planned)
        if one.keep_planned and planned is not None and _fits(one.pod, planned, tally):
            target: str | None = one.planned
        else:
            target = best_target(one.pod, nodes, tally, pool=pool, out_of_reach=out_of_reach)
        if target is None:
            return None
        was = tally.get(target, NodeUse(Resources(), False, False))
        gpu = any(is_gpu_resource(r) for r in one.pod.requests)
        tally[target] = NodeUse(was.requests + one.pod.requests, was.runs_gpu_pod or gpu, was.anti_affinity)
        targets.append(target)
    return targets


def best_target(
    pod: Pod,
    nodes: Iterable[Node],
    use: Mapping[str, NodeUse],
    *,
    pool: str,
    out_of_reach: Collection[str],
) -> str | None:
    """The best node for ``pod`` among ``nodes`` (read just now, with ``use`` of each), or None when none may take it."""
    wants_gpu = any(is_gpu_resource(r) for r in pod.requests)
    best: tuple[tuple[int, int], str] | None = None
    for node in nodes:
        taken = use.get(node.name, NodeUse(Resources(), False, False))
        if node.name in out_of_reach or taken.anti_affinity or not _may_take(pod, node, pool, wants_gpu, taken):
            continue
        if not _fits(pod, node, use):
            continue
        left = node.allocatable - taken.requests - pod.requests
        rank = (sum(v for r, v in left.items() if is_gpu_resource(r)), left.get(CPU, 0))
        if best is None or (rank, node.name) < best:
            best = (rank, node.name)
    return best[1] if best is not None else None


def _fits(pod: Pod, node: Node, use: Mapping[str, NodeUse]) -> bool:
    taken = use.get(node.name)
    return pod.requests.fits_in(node.allocatable - (taken.requests if taken is not None else Resources()))


def _may_take(pod: Pod, node: Node, pool: str, wants_gpu: bool, taken: NodeUse) -> bool:
    """The planner's target rules that a node and a count of its pods can answer."""
    if node.labels.get(EXCLUDE_LABEL) == "true" or node.unschedulable or not node.ready:
        return False
    if why_ineligible(pod, node) is not None:
        return False
    if evicting_taint(pod.tolerations, node.taints) is not None:
        return False
    if wants_gpu:
        return node.is_gpu_node and taken.runs_gpu_pod and (not pool or node.pool == pool)
    return not node.is_gpu_node

"""kube-scheduler v1.36's choice of a node, emulated as upstream scores it, for the day replay (``day_replay.Day``) and
its calibration against the real scheduler (``calibrate_scheduler.py``).

Two profiles, as a cluster runs them:

* ``default``: the upstream default profile (``pkg/scheduler/apis/config/v1/default_plugins.go``). The scores that
  tell nodes apart for these pods:

  - NodeResourcesFit, weight 1, ``LeastAllocated`` over ``defaultResourceSpec``: cpu 1, memory 1, NOT nvidia.com/gpu
    (``least_allocated.go``): per resource ``(allocatable - requested) * 100 // allocatable`` (0 when over), requested
    being the node's non-zero requests plus the pod's (a container without a cpu / memory request counts 100m / 200Mi,
    ``schedutil.DefaultMilliCPURequest`` / ``DefaultMemoryRequest``), then the weighted integer mean;
  - NodeResourcesBalancedAllocation, weight 1, over cpu and memory (``balanced_allocation.go``, v1.36: the change of
    balance, kubernetes#135573): ``with`` and ``without`` are ``int64((1 - std) * 100)`` of the requested fractions
    (``min(requested / allocatable, 1)``; actual requests, ``useRequested``) with and without the pod, std of two
    fractions ``|f1 - f2| / 2``; the score is ``50 + (50 + with - without) // 2``;
  - PodTopologySpread, weight 2, the system default constraints (``podtopologyspread/plugin.go``:
    ``kubernetes.io/hostname`` maxSkew 3 and ``topology.kubernetes.io/zone`` maxSkew 5, ScheduleAnyway), the selector
    being the pod's ReplicaSet's (``helper.DefaultSelector``). ``scoring.go``: with system-default constraints a node need
    not carry every topology key (``requireAllTopologies`` is false), and a node without the zone label gets nothing
    from the zone constraint, so on these nodes (no zone label, as the trace's and realk8s's fake nodes) only the
    hostname constraint counts: raw ``round(siblings on the node * ln(feasible nodes + 2) + 2)``, then
    ``NormalizeScore``: ``100 * (max + min - raw) // max`` over the feasible nodes.
  - NodeAffinity, weight 2 (``nodeaffinity/node_affinity.go``): the preferred terms' weights summed per node, then
    ``DefaultNormalizeScore`` (``100 * score // max``, all 0 when the max is 0). Only with prevention on: the fill-first
    admission policy (``manifests/prevention``) gives a GPU pod the terms ``compactor.io/fill-first`` In 3 / 2 / 1 at
    weights 100 / 67 / 33, the labels being ``fill_first`` here (what gpu-compactor's last cycle set); other pods have
    no preferred term (PreScore skips the plugin);
  - TaintToleration (3), ImageLocality (1), DynamicResources, InterPodAffinity, VolumeBinding: the same for every node
    for these pods (no PreferNoSchedule taint, no image, claim or volume), so left out: they never change the choice.

* ``bin-packing``: realk8s's ``SCHED_SCORING=MostAllocated`` profile (``../shared/realk8s/up.sh``): NodeResourcesFit
  ``MostAllocated`` with cpu 1, memory 1, nvidia.com/gpu 5 (``most_allocated.go``: ``min(requested, allocatable) * 100
  // allocatable`` per resource, the weighted integer mean), plugin weight 5; BalancedAllocation disabled; the default
  spread constraints removed (``defaultingType: List``, none). An extended resource the pod does not request is left
  out of the mean, weight and all (``resource_allocation.go``: ``calculateResourceAllocatableRequest`` returns (0, 0)
  for it), as is a resource the node does not have.

Both: filters NodeResourcesFit (cpu, memory, nvidia.com/gpu, 110 pods), the pod's required node affinity on
``nvidia.com/gpu.product`` (the trace's ``gpu_spec``) and fences (a NoSchedule taint). ``schedule_one.go``: the nodes are
examined from ``nextStartNodeIndex`` round-robin until ``numFeasibleNodesToFind`` feasible ones are found
(``percentageOfNodesToScore`` 0: adaptive ``50 - nodes / 125`` percent, at least 5%, at least
``minFeasibleNodesToFind`` = 100 nodes, every node below 100), the index then moving on by the nodes examined; a single
feasible node is taken unscored; ``selectHost`` picks uniformly among the nodes of the highest total (seeded here).
Upstream examines nodes with 16 goroutines, so past the cut-off it may examine a few more than the emulation does; its
node order is the scheduler cache's (zones interleaved; one zone here: the order nodes were added), here node-name order.

Extended resources past the three (``extended``: MIG instances such as ``nvidia.com/mig-1g.5gb``, a time-sliced
``nvidia.com/gpu.shared``): NodeResourcesFit filters on them as on any resource; neither profile scores them (the
default profile scores cpu and memory, the bin-packing profile cpu, memory and ``nvidia.com/gpu``: a resource outside
the scoring strategy's list is not scored).

Integer arithmetic as in Go (``//`` on non-negative values is Go's ``/``; ``math.Round`` is half away from zero).
Memory in MiB: every formula is unchanged when both operands are scaled by 2**20 (integer floors of a ratio, float
fractions of exact values), so MiB give the scores bytes give.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

PROFILES = ("default", "bin-packing")
MAX_NODE_SCORE = 100
MAX_PODS = 110
RESOURCES = 3  # cpu milli, memory MiB, nvidia.com/gpu
# schedule_one.go
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
# pkg/scheduler/util/pod_resources.go (non-zero defaults for scoring)
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST_MIB = 200
# apis/config/v1/default_plugins.go
FIT_WEIGHT = 1
BALANCED_WEIGHT = 1
SPREAD_WEIGHT = 2
HOSTNAME_MAX_SKEW = 3  # podtopologyspread: systemDefaultConstraints
NODE_AFFINITY_WEIGHT = 2
FILL_FIRST_TERM_WEIGHTS = (0, 33, 67, 100)  # manifests/prevention/policy.yaml: tier -> the preferred term's weight
# ../shared/realk8s/up.sh, SCHED_SCORING=MostAllocated
BIN_PACKING_FIT_WEIGHT = 5
BIN_PACKING_RESOURCE_WEIGHTS = (1, 1, 5)
LEAST_ALLOCATED_RESOURCE_WEIGHTS = (1, 1, 0)  # defaultResourceSpec: cpu, memory


def num_feasible_nodes_to_find(nodes: int, percentage: int = 0) -> int:
    """How many feasible nodes the scheduler looks for before it stops (``schedule_one.go``,
    ``numFeasibleNodesToFind``; ``percentage`` 0 is the default, adaptive)."""
    if nodes < MIN_FEASIBLE_NODES_TO_FIND or percentage >= 100:
        return nodes
    if percentage <= 0:
        percentage = max(50 - nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    return max(nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


def least_allocated(requested: np.ndarray, allocatable: np.ndarray, weights: Sequence[int]) -> np.ndarray:
    """``least_allocated.go``: ``leastResourceScorer``; rows are nodes, columns resources. A column of weight 0, or a
    node whose allocatable of it is 0, is left out of the weighted mean."""
    return _weighted_mean(_least_requested(requested, allocatable), allocatable, weights)


def most_allocated(requested: np.ndarray, allocatable: np.ndarray, weights: Sequence[int]) -> np.ndarray:
    """``most_allocated.go``: ``mostResourceScorer`` (requested above allocatable counts as allocatable)."""
    safe = np.where(allocatable > 0, allocatable, 1)
    per = np.minimum(requested, allocatable) * MAX_NODE_SCORE // safe
    return _weighted_mean(np.where(allocatable > 0, per, 0), allocatable, weights)


def _least_requested(requested: np.ndarray, allocatable: np.ndarray) -> np.ndarray:
    safe = np.where(allocatable > 0, allocatable, 1)
    per = (allocatable - requested) * MAX_NODE_SCORE // safe
    return np.where((allocatable > 0) & (requested <= allocatable), per, 0)


def _weighted_mean(per: np.ndarray, allocatable: np.ndarray, weights: Sequence[int]) -> np.ndarray:
    w = np.where(allocatable > 0, np.asarray(weights, dtype=np.int64), 0)
    total = w.sum(axis=1)
    return np.where(total > 0, (per * w).sum(axis=1) // np.where(total > 0, total, 1), 0)


def balance(requested: np.ndarray, allocatable: np.ndarray) -> np.ndarray:
    """``balanced_allocation.go``: ``balancedResourceScore`` of cpu and memory: ``int64((1 - std) * 100)``."""
    fractions = np.minimum(requested / allocatable, 1.0)
    std = np.abs((fractions[:, 0] - fractions[:, 1]) / 2)
    return ((1.0 - std) * MAX_NODE_SCORE).astype(np.int64)


def balanced_allocation(without: np.ndarray, with_pod: np.ndarray, allocatable: np.ndarray) -> np.ndarray:
    """``balanced_allocation.go`` (v1.36): how the pod changes the node's balance, 50..100 (75: no change)."""
    change = MAX_NODE_SCORE // 2 + balance(with_pod, allocatable) - balance(without, allocatable)
    return MAX_NODE_SCORE // 2 + change // 2


def spread(siblings: np.ndarray, feasible: int) -> np.ndarray:
    """``podtopologyspread/scoring.go`` for the system default hostname constraint: ``Score`` (siblings on the node x
    ``ln(feasible + 2)`` + maxSkew - 1, rounded half away from zero) then ``NormalizeScore`` (fewer siblings, higher)."""
    raw = np.floor(siblings * math.log(feasible + 2) + (HOSTNAME_MAX_SKEW - 1) + 0.5).astype(np.int64)
    top, bottom = int(raw.max()), int(raw.min())
    if top == 0:
        return np.full(len(raw), MAX_NODE_SCORE, dtype=np.int64)
    return MAX_NODE_SCORE * (top + bottom - raw) // top


class KubeScheduler:
    """The nodes as kube-scheduler's cache holds them, and its choice for each pod (see the module docstring).

    ``used``: the pods' actual requests per node (cpu milli, memory MiB, GPUs), what the Fit filter and BalancedAllocation
    read; ``nonzero``: cpu and memory with the non-zero defaults, what LeastAllocated / MostAllocated read. ``fenced``:
    nodes no new pod may land on (a NoSchedule taint)."""

    def __init__(
        self,
        nodes: Sequence[Any],
        *,
        profile: str = "default",
        seed: int = 1,
        percentage_of_nodes_to_score: int = 0,
        extended: Sequence[str] = (),
    ) -> None:
        """``extended``: the extended resources past cpu, memory and ``nvidia.com/gpu`` (filtered, never scored), in
        the order requests list them; a node's amounts of them are its ``extended`` mapping (none: 0)."""
        if profile not in PROFILES:
            raise ValueError(f"profile {profile!r}: one of {PROFILES}")
        self.profile = profile
        self.extended = tuple(extended)
        self.models = np.array([n.model for n in nodes])
        self.allocatable = np.array(
            [[n.cpu_milli, n.memory_mib, n.gpus, *_amounts(n, self.extended)] for n in nodes], dtype=np.int64
        ).reshape(len(nodes), RESOURCES + len(self.extended))
        self.used = np.zeros_like(self.allocatable)
        self.nonzero = np.zeros((len(nodes), 2), dtype=np.int64)
        self.pods = np.zeros(len(nodes), dtype=np.int64)
        self.fenced = np.zeros(len(nodes), dtype=bool)
        self.fill_first = np.zeros(len(nodes), dtype=np.int64)  # compactor.io/fill-first tier (0: no label)
        self.to_find = num_feasible_nodes_to_find(len(nodes), percentage_of_nodes_to_score)
        self.next_start = 0
        self.rng = np.random.default_rng(seed)
        self.ties = 0  # choices made at random among equal totals

    # ----- the scheduling cycle

    def place(
        self, request: Sequence[int], models: Iterable[str] = (), siblings: Sequence[int] | None = None
    ) -> int | None:
        """Bind a pod of ``request`` (cpu milli, memory MiB, GPUs) to the node the scheduler picks; None when it fits
        nowhere. ``siblings``: the nodes of the bound pods its ReplicaSet selects (one entry per pod); None for a pod no
        controller owns (no default spreading)."""
        candidates = self.candidates(request, models)
        if not len(candidates):
            return None
        if len(candidates) == 1:
            best = int(candidates[0])  # schedule_one.go: a single feasible node is taken unscored
        else:
            totals = self.scores(request, candidates, siblings)
            top = np.flatnonzero(totals == totals.max())
            if len(top) > 1:
                self.ties += 1
            best = int(candidates[top[self.rng.integers(len(top))] if len(top) > 1 else top[0]])
        self.bind(best, request)
        return best

    def candidates(self, request: Sequence[int], models: Iterable[str] = ()) -> np.ndarray:
        """The feasible nodes the scheduler scores, in the order it examined them (and the round-robin start moved)."""
        feasible = self.feasible(request, models)
        n = len(feasible)
        order = (self.next_start + np.arange(n)) % n
        found = np.flatnonzero(feasible[order])
        if len(found) > self.to_find:
            found = found[: self.to_find]
            examined = int(found[-1]) + 1
        else:
            examined = n
        self.next_start = (self.next_start + examined) % n if n else 0
        result: np.ndarray = order[found]
        return result

    def vector(self, request: Sequence[int]) -> np.ndarray:
        """A request (cpu milli, memory MiB, GPUs, then the extended resources in order; missing ones 0) as a row."""
        wanted = np.zeros(self.allocatable.shape[1], dtype=np.int64)
        wanted[: len(request)] = request
        return wanted

    def offer_after(self, index: int, amounts: Mapping[str, int]) -> np.ndarray:
        """Node ``index``'s allocatable once it offers ``amounts`` of its GPU resources (``nvidia.com/gpu`` and the
        extended ones; those left out: none), cpu and memory as now: a MIG re-cut's new layout."""
        row: np.ndarray = self.allocatable[index].copy()
        row[2] = amounts.get("nvidia.com/gpu", 0)
        row[RESOURCES:] = [amounts.get(name, 0) for name in self.extended]
        return row

    def reoffer(self, index: int, amounts: Mapping[str, int]) -> None:
        """Node ``index`` now offers ``amounts`` of its GPU resources (``offer_after``)."""
        self.allocatable[index] = self.offer_after(index, amounts)

    def feasible(self, request: Sequence[int], models: Iterable[str] = ()) -> np.ndarray:
        wanted = self.vector(request)
        mask: np.ndarray = (
            ((self.used + wanted) <= self.allocatable).all(axis=1) & (self.pods < MAX_PODS) & ~self.fenced
        )
        allowed = list(models)
        if allowed:
            mask &= np.isin(self.models, allowed)
        return mask

    def scores(self, request: Sequence[int], nodes: np.ndarray, siblings: Sequence[int] | None = None) -> np.ndarray:
        """The total of the scores that differ between nodes, for ``nodes`` (the feasible ones)."""
        parts = self.components(request, nodes, siblings)
        total: np.ndarray = sum(parts.values(), np.zeros(len(nodes), dtype=np.int64))
        return total

    def components(
        self, request: Sequence[int], nodes: np.ndarray, siblings: Sequence[int] | None = None
    ) -> dict[str, np.ndarray]:
        """Each scoring plugin's weighted score for ``nodes`` (the feasible ones), by the plugin's upstream name: what
        kube-scheduler logs at -v=10 ("Plugin scored node for pod")."""
        wanted = self.vector(request)
        alloc = self.allocatable[nodes, :RESOURCES]
        nonzero = self.nonzero[nodes] + _nonzero(wanted)
        parts = self._node_affinity(wanted, nodes)
        if self.profile == "bin-packing":
            requested = np.column_stack([nonzero, self.used[nodes, 2] + wanted[2]])
            weights = list(BIN_PACKING_RESOURCE_WEIGHTS)
            if wanted[2] == 0:
                weights[2] = 0  # an extended resource the pod does not request is not scored
            parts["NodeResourcesFit"] = BIN_PACKING_FIT_WEIGHT * most_allocated(requested, alloc, weights)
            return parts
        before = self.used[nodes, :2]
        parts |= {
            "NodeResourcesFit": FIT_WEIGHT
            * least_allocated(nonzero, alloc[:, :2], LEAST_ALLOCATED_RESOURCE_WEIGHTS[:2]),
            "NodeResourcesBalancedAllocation": BALANCED_WEIGHT
            * balanced_allocation(before, before + wanted[:2], alloc[:, :2]),
        }
        if siblings is not None:
            parts["PodTopologySpread"] = SPREAD_WEIGHT * spread(self.sibling_counts(nodes, siblings), len(nodes))
        return parts

    def _node_affinity(self, wanted: np.ndarray, nodes: np.ndarray) -> dict[str, np.ndarray]:
        """NodeAffinity's weighted score from the fill-first terms a GPU pod carries under prevention (none else)."""
        if wanted[2] == 0 or not self.fill_first.any():
            return {}
        raw = np.asarray(FILL_FIRST_TERM_WEIGHTS, dtype=np.int64)[self.fill_first[nodes]]
        top = int(raw.max())
        normalized = MAX_NODE_SCORE * raw // top if top else np.zeros(len(nodes), dtype=np.int64)
        return {"NodeAffinity": NODE_AFFINITY_WEIGHT * normalized}

    def sibling_counts(self, nodes: np.ndarray, siblings: Sequence[int]) -> np.ndarray:
        counts = np.bincount(np.asarray(siblings, dtype=np.int64), minlength=len(self.pods)) if len(siblings) else None
        return counts[nodes] if counts is not None else np.zeros(len(nodes), dtype=np.int64)

    # ----- the cache

    def fits(self, index: int, request: Sequence[int]) -> bool:
        """Whether ``request`` fits on node ``index`` as it is now (fences aside: a steered replacement tolerates none)."""
        wanted = self.vector(request)
        return bool((self.used[index] + wanted <= self.allocatable[index]).all()) and bool(self.pods[index] < MAX_PODS)

    def bind(self, index: int, request: Sequence[int]) -> None:
        """A pod bound to node ``index`` (the scheduler's choice, or someone else's: a steered replacement)."""
        wanted = self.vector(request)
        self.used[index] += wanted
        self.nonzero[index] += _nonzero(wanted)
        self.pods[index] += 1

    def release(self, index: int, request: Sequence[int]) -> None:
        """A pod gone from node ``index``."""
        wanted = self.vector(request)
        self.used[index] -= wanted
        self.nonzero[index] -= _nonzero(wanted)
        self.pods[index] -= 1

    def free(self, index: int) -> tuple[int, int, int]:
        cpu, memory, gpus = (int(v) for v in self.allocatable[index, :RESOURCES] - self.used[index, :RESOURCES])
        return cpu, memory, gpus

    def fits_anywhere(self, request: Sequence[int]) -> bool:
        wanted = self.vector(request)
        return bool((((self.used + wanted) <= self.allocatable).all(axis=1) & (self.pods < MAX_PODS)).any())


def _amounts(node: Any, extended: Sequence[str]) -> list[int]:
    offered = getattr(node, "extended", None) or {}
    return [int(offered.get(name, 0)) for name in extended]


def _nonzero(wanted: np.ndarray) -> np.ndarray:
    """cpu and memory as the scoring counts them: a missing request is 100m / 200Mi (``GetNonzeroRequests``)."""
    return np.array(
        [wanted[0] or DEFAULT_MILLI_CPU_REQUEST, wanted[1] or DEFAULT_MEMORY_REQUEST_MIB],
        dtype=np.int64,
    )

"""Pending GPU pods: which could start now, which fragmentation alone keeps out (``blocked``, with the reason), and
which no placement could host even were the free resources pooled (``unplaceable``).

Apart from ``fragmentation.py`` because it asks a different question of the nodes' free resources than the shape
figures: one pod's scheduling rules and requests against every eligible node (or partitionable GPU) in turn.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from compactor.metrics.figure_types import BlockedPod
from compactor.model.cpu_only_pods import cpu_pods_hold, cpu_pods_on_gpu_nodes, held_by_node
from compactor.model.fragments import NodeFree
from compactor.model.numbers import fmt_gpus
from compactor.model.quantity import format_amount
from compactor.model.resources import Resources, is_gpu_resource
from compactor.model.scheduling import why_ineligible
from compactor.model.shapes import label_order, requests_label
from compactor.model.types import Pod, Snapshot


@dataclass(frozen=True, slots=True)
class _Verdict:
    kind: str  # "placeable" | "blocked" | "unplaceable"
    reason: str = ""


class _PendingCheck:
    """Where pending GPU pods could go; results cached per (requests, placement rules)."""

    def __init__(self, states: Sequence[NodeFree], snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.total_free: dict[str, int] = {}
        for state in states:
            if state.hostable:
                for resource, amount in state.free.items():
                    self.total_free[resource] = self.total_free.get(resource, 0) + max(0, amount)
        # Nodes indexed by each GPU resource they have free: a GPU pod only looks at those.
        self.by_gpu: dict[str, list[NodeFree]] = {}
        for state in states:
            for resource, amount in state.free.items():
                if amount > 0 and is_gpu_resource(resource):
                    self.by_gpu.setdefault(resource, []).append(state)
        self._cache: dict[tuple[object, ...], _Verdict] = {}
        # Partitionable nodes: what their free counters allow is not a vector of resources (model.partitions).
        self.partitioned = [s for s in states if s.hostable and s.node.partitions is not None]
        # GPU-equivalents of one unit per GPU resource: the most any node offering it gives (time-sliced replicas differ by
        # node; the largest keeps the figure independent of node order and never understates what is blocked).
        self.equivalent: dict[str, float] = {}
        for state in states:
            for resource, eq in state.equivalent.items():
                self.equivalent[resource] = max(eq, self.equivalent.get(resource, 0.0))

    def _on_partitions(self, pod: Pod, requests: Mapping[str, int]) -> _Verdict | None:
        """Placeable when first fit gives the pod its GPU devices on the free counters of an eligible partitionable
        node; blocked when such nodes offer its devices and have as much free in total, only not together; None when
        no partitionable node is for it (the resource check decides)."""
        asks = {r: v for r, v in requests.items() if is_gpu_resource(r) and v > 0}
        rest = {r: v for r, v in requests.items() if not is_gpu_resource(r)}
        offering = [
            s
            for s in self.partitioned
            if s.node.partitions is not None
            and all(any(d.resource == r for d in s.node.partitions.devices) for r in asks)
            and why_ineligible(pod, s.node) is None
        ]
        for state in offering:
            partitions = state.node.partitions
            fits_rest = all(state.free.get(r, 0) >= v for r, v in rest.items())
            if partitions is not None and fits_rest and partitions.allocate(asks, partitions.free()) is not None:
                return _Verdict("placeable")
        free = math.fsum(s.node.partitions.free_share() for s in offering if s.node.partitions is not None)
        need = self.gpus(pod.requests)
        if not offering or free + 1e-9 < need:
            return None
        return _Verdict(
            "blocked",
            f"{fmt_gpus(free)} GPU-equivalents free on {len(offering)} partitionable node(s), but no GPU's free "
            "counters hold its devices together (scattered partitions)",
        )

    def gpus(self, requests: Resources) -> float:
        """The GPU capacity ``requests`` ask for, in GPU-equivalents (1 per unit of a resource no node offers)."""
        return math.fsum(v * self.equivalent.get(r, 1.0) for r, v in sorted(requests.items()) if is_gpu_resource(r))

    def verdict(self, pod: Pod) -> _Verdict:
        key = (pod.requests, pod.tolerations, pod.node_selector, pod.affinity)
        if key not in self._cache:
            self._cache[key] = self._decide(pod)
        return self._cache[key]

    def _decide(self, pod: Pod) -> _Verdict:
        requests = pod.requests.as_dict()
        if self.partitioned:
            verdict = self._on_partitions(pod, requests)
            if verdict is not None:
                return verdict
        for resource in sorted(requests, key=label_order):
            if requests[resource] > self.total_free.get(resource, 0):
                have = self.total_free.get(resource, 0)
                need = format_amount(resource, requests[resource])
                return _Verdict(
                    "unplaceable",
                    f"needs {need} {resource}, the Ready uncordoned nodes have "
                    f"{format_amount(resource, have)} free in total",
                )
        gpu_resource = min((r for r in requests if is_gpu_resource(r)), key=label_order)
        candidates = [s for s in self.by_gpu.get(gpu_resource, ()) if pod.requests.fits_in(s.free)]
        refusals: Counter[str] = Counter()
        for state in candidates:
            why = why_ineligible(pod, state.node)
            if why is None:
                return _Verdict("placeable")
            refusals[why.value] += 1
        if candidates:
            detail = "; ".join(f"{why}: {n}" for why, n in sorted(refusals.items()))
            return _Verdict("blocked", f"the {len(candidates)} node(s) with room are ineligible ({detail})")
        return _Verdict("blocked", self._split(pod, requests, gpu_resource))

    def _split(self, pod: Pod, requests: Mapping[str, int], gpu_resource: str) -> str:
        need = requests[gpu_resource]
        holders = self.by_gpu.get(gpu_resource, [])
        best = max((s.free.get(gpu_resource, 0) for s in holders), default=0)
        if best < need:
            return f"at most {best} {gpu_resource} free on one node, needs {need}"
        lacking: Counter[str] = Counter()
        eligible: dict[str, dict[str, int]] = {}  # of the nodes with the GPUs free, those the pod may use
        for state in holders:
            if state.free.get(gpu_resource, 0) >= need:
                lacking.update(r for r in requests if requests[r] > state.free.get(r, 0))
                if state.hostable and why_ineligible(pod, state.node) is None:
                    eligible[state.node.name] = state.free
        named = sorted(lacking, key=lambda r: (-lacking[r], r))[:2]
        held = cpu_pods_hold(self.cpu_pods_held, eligible, requests) if eligible else ""
        return f"the nodes with {need} {gpu_resource} free lack {', '.join(named)}" + (
            f"; CPU-only pods hold {held} on the eligible ones" if held else ""
        )

    @functools.cached_property
    def cpu_pods_held(self) -> dict[str, dict[str, int]]:
        """What CPU-only pods hold per GPU node: worked out only when a pod is blocked for lack of CPU or memory."""
        return held_by_node(cpu_pods_on_gpu_nodes(self.snapshot))


def pending_gpu_pods(
    snapshot: Snapshot, states: Sequence[NodeFree]
) -> tuple[int, tuple[BlockedPod, ...], tuple[BlockedPod, ...]]:
    """(pending GPU pods, blocked by fragmentation, unplaceable even in total)."""
    check = _PendingCheck(states, snapshot)
    blocked: list[BlockedPod] = []
    unplaceable: list[BlockedPod] = []
    count = 0
    for pod in snapshot.pending_pods():
        if not pod.uses_gpu:
            continue
        count += 1
        verdict = check.verdict(pod)
        if verdict.kind != "placeable":
            entry = BlockedPod(
                pod.key, requests_label(pod.requests), pod.priority, verdict.reason, check.gpus(pod.requests)
            )
            (blocked if verdict.kind == "blocked" else unplaceable).append(entry)
    return count, tuple(sorted(blocked, key=_by_priority)), tuple(sorted(unplaceable, key=_by_priority))


def _by_priority(blocked: BlockedPod) -> tuple[int, str]:
    return (-blocked.priority, blocked.pod)

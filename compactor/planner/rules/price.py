"""What a move costs: the disruption of restarting one replica elsewhere, in cost units (``base`` = one move).

A move takes a replica out of serving until its replacement is Ready, so its price counts what goes out and for
how long: a fixed part for any restart, a part scaling with the GPU capacity the replica holds (so a ``1g.10gb``
slice is cheap to move and an 8-GPU model server dear), its start-up, and what its owners said (priority,
``controller.kubernetes.io/pod-deletion-cost``, ``compactor.io/move-cost``). See docs/planner.md "What a move costs".

Imports: ``compactor.model``, ``compactor.settings``, history.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from compactor.model.resources import is_gpu_resource
from compactor.model.types import Pod, Snapshot
from compactor.planner.rules.history import workload_key
from compactor.settings.cost import MoveCostSettings

MAX_MOVE_COST_ANNOTATION = 10_000.0  # in moves
DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"


def resource_equivalents(snapshot: Snapshot) -> dict[str, float]:
    """GPU resource -> the physical GPUs one unit stands for, as the nodes advertise it (the largest where they differ)."""
    found: dict[str, float] = {}
    for node in snapshot.nodes:
        for name, value in node.gpu.gpu_equivalent:
            found[name] = max(value, found.get(name, 0.0))
    return found


def workload_startups(snapshot: Snapshot) -> dict[str, float]:
    """Owner (kind/name, namespaced) -> the longest start-up its bound replicas were observed to take.

    One figure per workload, not per pod: its replicas start alike, and a price that differed by a few seconds per
    replica would split identical pods into different types and grow the model.
    """
    found: dict[str, float] = {}
    for pod in snapshot.pods:
        if pod.is_bound and pod.startup_seconds is not None:
            key = _owner_key(pod)
            found[key] = max(pod.startup_seconds, found.get(key, 0.0))
    return found


def _owner_key(pod: Pod) -> str:
    return workload_key(pod.namespace, pod.owners) or pod.key


def gpu_equivalents(pod: Pod, equivalents: Mapping[str, float]) -> float:
    """The GPU capacity the pod holds (a whole GPU when no node says what its resource stands for)."""
    return math.fsum(
        amount * equivalents.get(name, 1.0) for name, amount in pod.requests.items() if is_gpu_resource(name)
    )


@dataclass(frozen=True)
class Price:
    """A move's cost in parts (cost units), for the plan to show."""

    restart: int  # the fixed part and the capacity part
    startup: int
    owner: int  # priority, deletion cost and the move-cost annotation

    @property
    def total(self) -> int:
        return self.restart + self.startup + self.owner


@dataclass(frozen=True)
class Pricing:
    """What prices a snapshot's moves: the settings, what each GPU resource stands for, each workload's start-up."""

    cfg: MoveCostSettings
    equivalents: Mapping[str, float]
    startups: Mapping[str, float]

    @classmethod
    def of(cls, snapshot: Snapshot, cfg: MoveCostSettings) -> Pricing:
        return cls(cfg, resource_equivalents(snapshot), workload_startups(snapshot))

    def price(self, pod: Pod) -> Price:
        return price(pod, self.cfg, self.equivalents, self.startups.get(_owner_key(pod), 0.0))

    def cost(self, pod: Pod) -> int:
        return self.price(pod).total


def price(pod: Pod, cfg: MoveCostSettings, equivalents: Mapping[str, float], observed_startup: float = 0.0) -> Price:
    """``observed_startup``: seconds the pod's workload took to start (the pod's startup annotation wins)."""
    share = cfg.capacity_share
    restart = round(cfg.base * ((1 - share) + share * gpu_equivalents(pod, equivalents)))
    said = _float(pod.annotations.get(cfg.startup_annotation))
    seconds = max(0.0, said) if said is not None else observed_startup
    startup = round(cfg.per_startup_minute * min(round(seconds / 60), cfg.max_startup_minutes))  # whole minutes
    owner = (
        cfg.per_priority_step * (max(0, pod.priority) // cfg.priority_step)
        + cfg.per_deletion_cost_step
        * (max(0, _int(pod.annotations.get(DELETION_COST_ANNOTATION))) // cfg.deletion_cost_step)
        + _annotated_moves(pod, cfg)
    )
    return Price(max(1, restart), startup, owner)


def _annotated_moves(pod: Pod, cfg: MoveCostSettings) -> int:
    moves = _float(pod.annotations.get(cfg.annotation))
    if moves is None or not moves > 0:  # NaN and negatives add nothing
        return 0
    # Capped: an absurd annotation ("1e30", "inf") must not overflow the solver's int64 coefficients.
    return round(min(moves, MAX_MOVE_COST_ANNOTATION) * cfg.base)


def describe(cfg: MoveCostSettings) -> str:
    """The price in words, in moves: what ``plan`` shows beside the curve."""
    share = cfg.capacity_share
    parts = [f"{1 - share:g} + {share:g} x GPU-equivalents restarted" if share else "1 per restart"]
    if cfg.per_startup_minute:
        parts.append(
            f"{cfg.per_startup_minute / cfg.base:g} per minute of start-up (up to {cfg.max_startup_minutes:g})"
        )
    if cfg.per_priority_step:
        parts.append(f"{cfg.per_priority_step / cfg.base:g} per {cfg.priority_step} of priority")
    if cfg.per_deletion_cost_step:
        parts.append(f"{cfg.per_deletion_cost_step / cfg.base:g} per {cfg.deletion_cost_step} of pod-deletion-cost")
    parts.append(f"the pod's {cfg.annotation} annotation")
    return "a move costs " + " + ".join(parts) + " (in moves)"


def _float(text: str | None) -> float | None:
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return None if math.isnan(value) else value  # infinities are capped where used


def _int(text: str | None) -> int:
    try:
        return int(text or 0)  # the annotation is an int32, as the ReplicaSet controller reads it
    except ValueError:
        return 0

"""The compaction plan: a value computed in memory, serialised as ``compactor/v1alpha1`` ``CompactionPlan``.

The executor reads it back (``load_plan``) and re-validates it against fresh cluster
state before acting, so the JSON form is validated as strictly as any input.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import msgspec
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from compactor.errors import InputError
from compactor.model.migparted import recut_node
from compactor.model.types import Snapshot

API_VERSION: Literal["compactor/v1alpha1"] = "compactor/v1alpha1"
KIND: Literal["CompactionPlan"] = "CompactionPlan"


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class Metadata(_Doc):
    id: str
    created_at: str = Field(alias="createdAt")
    source: str


class Move(_Doc):
    pod: str  # namespace/name
    from_node: str = Field(alias="from")
    to_node: str = Field(alias="to")
    reason: str = ""
    uid: str = ""
    owner: str = ""  # Kind/name of the controller, for waiting on the replacement
    requests: dict[str, int] = Field(default_factory=dict)
    gpu: bool = False


class Placement(_Doc):
    pod: str
    to_node: str = Field(alias="to")


class SolverReport(_Doc):
    status: str
    wall_seconds: float = Field(alias="wallSeconds")
    objective: float | None = None
    bound: float | None = None
    gap: float | None = None
    variables: int = 0
    levels: list[dict[str, Any]] = Field(default_factory=list)
    frontier_seconds: float = Field(0.0, alias="frontierSeconds")  # computing the trade-off curve, after the levels
    note: str = ""


class FrontierPoint(_Doc):
    """One point of the trade-off curve: the cheapest plan found that frees this many nodes."""

    freed_nodes: int = Field(alias="freedNodes")
    freed_gpus: int = Field(alias="freedGpus")
    moves: int
    cost: float  # in moves: total move cost / move_cost.base
    status: str  # OPTIMAL: no plan freeing as many nodes costs less; FEASIBLE: ``bound`` is the best proven
    bound: float
    chosen: bool = False
    recuts: int = 0  # MIG re-cuts this step adds to the point before it (their cost included)


class MigRepartition(_Doc):
    """Re-cut a whole-free node to another named mig-parted layout (``nvidia.com/mig.config``)."""

    node: str
    from_config: str = Field(alias="from")
    to_config: str = Field(alias="to")
    reason: str = ""
    allocatable: dict[str, int] = Field(default_factory=dict)  # GPU resources the node advertises once cut
    cost: float = 0.0  # in moves (planner.recut_cost_moves)


class PendingNote(_Doc):
    pod: str
    reason: str


class CompactionPlan(_Doc):
    api_version: Literal["compactor/v1alpha1"] = Field(API_VERSION, alias="apiVersion")
    kind: Literal["CompactionPlan"] = KIND
    metadata: Metadata
    moves: list[Move] = Field(default_factory=list)
    placed_pending: list[Placement] = Field(default_factory=list, alias="placedPending")
    freed_nodes: list[str] = Field(default_factory=list, alias="freedNodes")
    filled_nodes: list[str] = Field(default_factory=list, alias="filledNodes")
    freed_gpus: int = Field(0, alias="freedGpus")
    mig_repartition: list[MigRepartition] = Field(default_factory=list, alias="migRepartition")
    objective: str = ""
    balanced_moves_per_gpu: float | None = Field(None, alias="balancedMovesPerGpu")  # the price balanced used
    frontier: list[FrontierPoint] = Field(default_factory=list)
    pending_not_placed: list[PendingNote] = Field(default_factory=list, alias="pendingNotPlaced")
    solver: SolverReport
    before: dict[str, Any] = Field(default_factory=dict)
    after: dict[str, Any] = Field(default_factory=dict)
    explanations: dict[str, Any] = Field(default_factory=dict)
    mig_advice: list[dict[str, Any]] = Field(default_factory=list, alias="migAdvice")  # plan --explain-mig only

    def to_json(self) -> str:
        return json.dumps(self.model_dump(by_alias=True, mode="json"), indent=2) + "\n"


def load_plan(path: str) -> CompactionPlan:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("no such file", source=path) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc}", source=path) from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", source=path) from None
    try:
        return CompactionPlan.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        plan_id = raw.get("metadata", {}).get("id", "") if isinstance(raw, dict) else ""
        raise InputError(err["msg"], source=path, obj=f"CompactionPlan {plan_id}".strip(), field=field) from None


def apply_plan(snapshot: Snapshot, plan: CompactionPlan) -> Snapshot:
    """The snapshot as it would be after the plan: moved pods on their targets, pending pods placed, re-cut nodes cut."""
    moved = {m.pod: m.to_node for m in plan.moves}
    placed = {p.pod: p.to_node for p in plan.placed_pending}
    pods = []
    for pod in snapshot.pods:
        if pod.key in moved:
            pods.append(msgspec.structs.replace(pod, node_name=moved[pod.key]))
        elif pod.key in placed:
            pods.append(msgspec.structs.replace(pod, node_name=placed[pod.key], phase="Running"))
        else:
            pods.append(pod)
    recut = {r.node: r for r in plan.mig_repartition}
    nodes = tuple(recut_node(node, recut[node.name].allocatable, recut[node.name].to_config) if node.name in recut else node
                  for node in snapshot.nodes)
    return replace(snapshot, pods=tuple(pods), nodes=nodes)


"""The compaction plan: a value computed in memory, serialised as ``compactor/v1alpha1`` ``CompactionPlan``.

The executor reads it back (``load_plan``) and re-validates it against fresh cluster
state before acting, so the JSON form is validated as strictly as any input.

Imports: ``compactor.model``, ``compactor.errors``, pydantic and msgspec; no other planner module (the executor and
the reports read plans without the planner).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import msgspec
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from compactor.errors import InputError
from compactor.model.dra.apply import with_partitions_held
from compactor.model.migparted import recut_node
from compactor.model.types import Snapshot

API_VERSION: Literal["compactor/v1alpha1"] = "compactor/v1alpha1"
KIND: Literal["CompactionPlan"] = "CompactionPlan"


class _Doc(BaseModel):
    """A part of the plan document: unknown keys are refused, fields are read by their JSON names (or Python names)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class Metadata(_Doc):
    """Who the plan is and where it came from."""

    id: str = Field(
        description="Plan identifier: `plan-` and 12 hex digits unless the caller names it. The executor records it on the nodes it "
        "fences, in its events and in its state record."
    )
    created_at: str = Field(
        alias="createdAt",
        description="When the plan was computed: an ISO 8601 (RFC 3339) timestamp in UTC, written with a `Z` suffix.",
    )
    source: str = Field(
        description="Where the snapshot came from, for people: `example cluster`, the snapshot files, or `cluster <context>` "
        "for the live API."
    )


class Move(_Doc):
    """One eviction: the pod leaves ``from`` and its controller's replacement is to run on ``to``."""

    pod: str = Field(description="The pod to evict, as namespace/name.")
    from_node: str = Field(
        alias="from",
        description="The node the pod runs on now; the executor skips the move when the pod is no longer there.",
    )
    to_node: str = Field(
        alias="to",
        description="The node the plan puts the pod's replacement on (the executor steers it there unless "
        "steering.mechanism is off).",
    )
    reason: str = Field(
        "",
        description="Why, for people: what the move frees or makes room for, then `; ` and the target's state. "
        "Free text, not a stable format.",
    )
    uid: str = Field(
        "",
        description="The pod's metadata.uid when planned: the executor skips the move when another pod has taken the name "
        "since (a StatefulSet's). Empty: not checked.",
    )
    owner: str = Field(
        "",
        description="Kind/name of the pod's controller (e.g. `ReplicaSet/web-7d9f`), whose replacement the executor waits "
        "for; empty when the pod has none.",
    )
    requests: dict[str, int] = Field(
        default_factory=dict,
        description="The pod's effective requests as the scheduler computes them, resource "
        "name -> amount in scheduler units: cpu in millicores, every other resource in whole units (bytes for "
        "memory and ephemeral-storage, devices for nvidia.com/gpu and MIG profiles); the `pods` resource is "
        "left out. Informational.",
    )
    gpu: bool = Field(
        False,
        description="Whether the pod requests a GPU resource (nvidia.com/gpu, nvidia.com/gpu.shared or a MIG profile).",
    )
    cost: float = Field(
        1.0,
        description="What the move disrupts, in moves (see movePrice): 1 for a replica of one whole GPU that starts at once.",
    )
    devices: list[str] = Field(
        default_factory=list,
        description="For a pod holding partitionable DRA devices (dynamic MIG): the devices kube-scheduler's first fit "
        "is expected to give its replacement on `to` (the run reads the replacement's claim and says where it got "
        "others). Empty for every other pod.",
    )


class Placement(_Doc):
    """A pending pod the plan places: once the moves (and re-cuts) are done it fits on ``to``."""

    pod: str = Field(description="The pending pod, as namespace/name.")
    to_node: str = Field(
        alias="to",
        description="The node the plan makes room on for it (possibly one re-cut for it: see migRepartition).",
    )
    devices: list[str] = Field(
        default_factory=list,
        description="For a pod asking partitionable DRA devices (dynamic MIG): the devices kube-scheduler's first fit "
        "is expected to give it on `to`. Empty for every other pod.",
    )


STEERING_DECIDED_AT_RUN = (
    "decided when the run starts: the steering policy of manifests/steering when installed, else holds "
    "(steering.mechanism: auto); planned as for holds, so pods tolerating the compactor's fence taint stay"
)


class SteeringNote(_Doc):
    """How the executor would make replacements land on their planned nodes in this cluster (``steering.mechanism``)."""

    mechanism: str = Field(
        description="`policy` (the MutatingAdmissionPolicy of manifests/steering pins each replacement; no node "
        "is touched), `holds` (the other nodes that could take it are fenced for a moment), `off`, or "
        "`auto` when the plan was made from a snapshot: decided when the run starts."
    )
    why: str = Field(
        description="Why that mechanism, for people: the setting, or what the cluster serves (and what is missing)."
    )
    stops: str = Field(
        default="",
        description="What would stop a run of this plan short, steering this way, as the planned cluster shows it: "
        "the first move that would hold more nodes than caps.max_holds_per_move (a run stops there; before its "
        "first move, it changes nothing). Empty when nothing would.",
    )


class SolverReport(_Doc):
    """How the lexicographic CP-SAT solve went: the max-free solve the trade-off curve ends at, not the chosen point."""

    status: str = Field(
        description="`OPTIMAL` when every level was proven optimal (or there was nothing to solve); `FEASIBLE` when the time "
        "limit stopped a level at a solution not proven best, or left it no time at all (the plan is still valid, at least the "
        "greedy warm start; the note says what was left undone)."
    )
    wall_seconds: float = Field(
        alias="wallSeconds",
        description="Wall-clock seconds of the level-by-level solve, rounded to milliseconds "
        "(the trade-off curve's time is frontierSeconds).",
    )
    objective: float | None = Field(
        None,
        description="The main level's value for the max-free solve: net freed GPUs (physical GPUs "
        "whole-free after the plan minus before), or in shape mode the shape headroom (copies of "
        "aims.target_shapes that fit); null when the level reached no value.",
    )
    bound: float | None = Field(
        None,
        description="The best proven bound on objective (an upper bound: the level maximises), same units; "
        "null when none was proven.",
    )
    gap: float | None = Field(
        None,
        description="Relative optimality gap, (bound - objective) / max(|bound|, 1); 0 when proven optimal; "
        "null without a bound.",
    )
    variables: int = Field(
        0,
        description="CP-SAT decision variables in the model (summed over independent pool components); 0 when "
        "nothing was solved.",
    )
    levels: list[dict[str, Any]] = Field(
        default_factory=list,
        description="The levels in the order solved, each an object {name, status, "
        "objective, bound, seconds}. name: `pending` (priority-weighted pending pods placed), "
        "`freedGpus` (physical GPUs whole-free after the plan on nodes it may empty, not net of those "
        "free before), `headroom` (shape mode) or `moveCost` (move-cost units: aims.move_cost.base "
        "per move); status as CP-SAT reports it (OPTIMAL, FEASIBLE, INFEASIBLE, MODEL_INVALID, UNKNOWN); "
        "objective and bound in the level's units (null when not finite); seconds of solver time.",
    )
    frontier_seconds: float = Field(
        0.0, alias="frontierSeconds", description="Seconds spent computing the trade-off curve, after the levels."
    )
    plan_seconds: float = Field(
        0.0,
        alias="planSeconds",
        description="Wall-clock seconds of the whole planning call, from the snapshot in "
        "memory to this document (building the problem, the greedy warm start, every solve, the trade-off "
        "curve, the re-cut step, the figures), rounded to milliseconds: solver.time_limit_seconds bounds it. "
        "Loading the snapshot is apart (loadSeconds).",
    )
    enough_time_limit: int | None = Field(
        None,
        alias="enoughTimeLimitSeconds",
        description="When the time limit ran out before the max-free search built its CP-SAT model: the limit (seconds, "
        "rounded up to a round figure) this run's own phase times say would have left room to build it and give its "
        "levels a solve (search.enough_time_limit); null when the model was built.",
    )
    load_seconds: float | None = Field(
        None,
        alias="loadSeconds",
        description="Wall-clock seconds spent reading and decoding the snapshot "
        "before planning, rounded to milliseconds; null when the caller did not measure it.",
    )
    move_cost: float | None = Field(
        None,
        alias="moveCost",
        description="Move cost of the max-free solve's plan, in moves (move cost / "
        "aims.move_cost.base; the number of moves when no pod carries a priority step or a move-cost "
        "annotation); null when nothing was solved.",
    )
    move_cost_bound: float | None = Field(
        None,
        alias="moveCostBound",
        description="Proven lower bound on the move cost (in moves) of "
        "every plan of the whole cluster that places pending pods of as much priority weight and leaves "
        "at least as many GPUs whole-free as the max-free solve's plan (a relaxation, compactor/planner/"
        "move_bound.py: loose, never above the true minimum); null when not computed (the time limit, "
        "shape mode).",
    )
    move_cost_gap: float | None = Field(
        None,
        alias="moveCostGap",
        description="(moveCost - moveCostBound) / max(moveCost, 1): how far the "
        "plan's moves may be from the fewest that free as much; 0 when proven fewest; null without a bound.",
    )
    note: str = Field(
        "",
        description="Why the plan is empty, when it is (e.g. `nothing to plan: ...`, `this search found no move that "
        "frees usable GPU capacity or places a pending pod`), what a narrowed model searched, and what the time limit "
        "left undone (each part `time limit: ...`); parts separated by `; `.",
    )


class FrontierPoint(_Doc):
    """One point of the trade-off curve: the cheapest plan found that frees this many nodes."""

    freed_nodes: int = Field(
        alias="freedNodes", description="GPU nodes the point's plan frees: they run GPU pods now and none after."
    )
    freed_gpus: int = Field(
        alias="freedGpus",
        description="Net physical GPUs the point makes whole-free, counted as the top-level freedGpus "
        "(GPUs of the nodes it frees minus those of whole-free nodes it fills).",
    )
    usable_gpus: int | None = Field(
        None,
        alias="usableFreedGpus",
        description="Of freedGpus, those a request shape in use can take (the top-level usableFreedGpus): what the "
        "balanced objective prices. Null in documents written before it was measured.",
    )
    moves: int = Field(description="Pod evictions in the point's plan.")
    cost: float = Field(
        description="Total move cost in moves (move cost / aims.move_cost.base), rounded to 2 decimals; a re-cut step "
        "adds mig.recut_cost_moves per re-cut."
    )
    status: str = Field(
        description="`OPTIMAL`: no plan freeing as many nodes costs less; `FEASIBLE`: not proven, bound is the best proven."
    )
    bound: float = Field(
        description="Proven lower bound on the cost of a plan freeing this many nodes, in moves (equal to cost when OPTIMAL)."
    )
    chosen: bool = Field(False, description="True on the point this plan carries out (at most one point).")
    recuts: int = Field(
        0,
        description="MIG re-cuts this step adds to the point before it (their cost included in cost); 0 on an ordinary point.",
    )
    budget_cut: bool = Field(
        False,
        alias="budgetCut",
        description="True on a row that is the point before it cut to what one run may carry out under the run budgets "
        "(heldBack says which), when no point of the curve fits them whole; its bound is not proven (0).",
    )


class MigRepartition(_Doc):
    """Re-cut a whole-free node to another named mig-parted layout (``nvidia.com/mig.config``)."""

    node: str = Field(description="The node to re-cut; no GPU pod runs on it after the plan's moves.")
    from_config: str = Field(
        alias="from", description="The node's current nvidia.com/mig.config layout name; empty when it has none."
    )
    to_config: str = Field(
        alias="to", description="The named mig-parted layout to cut it to (written to nvidia.com/mig.config)."
    )
    reason: str = Field(
        "", description="Why, for people: the pending pods the new layout hosts, or what an idle re-cut improves."
    )
    allocatable: dict[str, int] = Field(
        default_factory=dict,
        description="GPU resources the node advertises once cut: resource name -> "
        "devices (e.g. nvidia.com/mig-3g.40gb: 4).",
    )
    cost: float = Field(
        0.0, description="What the re-cut counts against the move limit, in moves (mig.recut_cost_moves)."
    )


class PendingNote(_Doc):
    """A pending GPU pod the plan leaves pending, and why."""

    pod: str = Field(description="The pending pod, as namespace/name.")
    reason: str = Field(
        description="Why the plan does not place it, in one sentence a person can act on (e.g. `no node fits it even after "
        "every pod that may move has left`)."
    )


class CompactionPlan(_Doc):
    """A compaction plan (``compactor/v1alpha1``): which pods move where, in execution order, which pending pods that places,
    what it frees, and the cluster's fragmentation figures before and after. Written by ``compactor plan --output json`` and
    ``--write``; ``compactor apply --plan`` reads it back and re-validates it against the live cluster before acting."""

    api_version: Literal["compactor/v1alpha1"] = Field(
        API_VERSION, alias="apiVersion", description="Document version: compactor/v1alpha1."
    )
    kind: Literal["CompactionPlan"] = Field(KIND, description="Document kind: CompactionPlan.")
    metadata: Metadata = Field(description="Who the plan is and where its snapshot came from.")
    moves: list[Move] = Field(default_factory=list, description="The evictions, in execution order.")
    placed_pending: list[Placement] = Field(
        default_factory=list,
        alias="placedPending",
        description="Pending GPU pods that fit once the moves (and re-cuts) are done, and where.",
    )
    freed_nodes: list[str] = Field(
        default_factory=list,
        alias="freedNodes",
        description="GPU nodes that run GPU pods now and none after the plan (only Ready, schedulable nodes "
        "whose allocatable offers GPUs count).",
    )
    filled_nodes: list[str] = Field(
        default_factory=list,
        alias="filledNodes",
        description="GPU nodes whole-free now that run GPU pods after the plan (e.g. a pending pod placed "
        "there); their GPUs are subtracted from freedGpus.",
    )
    freed_gpus: int = Field(
        0,
        alias="freedGpus",
        description="Net physical GPUs made whole-free: the GPUs of freedNodes minus those of "
        "filledNodes, each node counting the whole physical GPUs its allocatable offers (Ready, schedulable nodes "
        "only). Negative when the plan fills more than it frees.",
    )
    usable_freed_gpus: int | None = Field(
        None,
        alias="usableFreedGpus",
        description="Of freedGpus, those a request shape in use can take on the freed nodes with the CPU, memory "
        "and pod slots the plan leaves there (the pending pods' shapes first, then the workload's reference shapes; "
        "compactor/planner/usable.py): freedGpus less the GPUs of freedNodes no such shape can take, so never more "
        "than freedGpus. Null in documents written before it was measured.",
    )
    unusable: str = Field(
        "",
        description="Why some freed GPUs are not usable, in one line naming the nodes and what they lack for the "
        "shapes in use; empty when every freed GPU is usable.",
    )
    mig_repartition: list[MigRepartition] = Field(
        default_factory=list,
        alias="migRepartition",
        description="MIG re-cuts of nodes the plan leaves without GPU pods, made after the node "
        "is drained (mig.repartition only; empty otherwise).",
    )
    objective: str = Field(
        "",
        description="The policy that picked the point of the trade-off curve: `pending-only`, `balanced` or `max-free` "
        "(aims.objective, --objective); `shapes` in shape mode (aims.goal: shapes).",
    )
    balanced_moves_per_gpu: float | None = Field(
        None,
        alias="balancedMovesPerGpu",
        description="The price balanced used, in moves per GPU freed (aims.balanced_moves_per_gpu); "
        "null unless objective is balanced.",
    )
    held_back: str = Field(
        "",
        alias="heldBack",
        description="The run budget (caps.max_draining_per_pool, "
        "caps.max_moves_per_workload) that left part of the chosen point for later runs, and how much; "
        "the plan holds the whole source nodes one run may take. Empty when no budget cut it.",
    )
    move_price: str = Field(
        "", alias="movePrice", description="How a move's cost was priced (aims.move_cost), in words, for people."
    )
    frontier: list[FrontierPoint] = Field(
        default_factory=list,
        description="The trade-off curve, fewest freed GPUs first, the chosen point marked; empty in shape mode.",
    )
    pending_not_placed: list[PendingNote] = Field(
        default_factory=list,
        alias="pendingNotPlaced",
        description="Every pending GPU pod the plan leaves pending, with the reason, by pod name.",
    )
    warnings: list[str] = Field(
        default_factory=list,
        description="What the planner noticed about its input (e.g. pods bound to nodes "
        "missing from the snapshot) and what it did about it; text and markdown show them first.",
    )
    solver: SolverReport = Field(description="How the solve went.")
    before: dict[str, Any] = Field(
        default_factory=dict,
        description="The cluster's fragmentation figures before the plan: the same object as "
        "`figures` in `compactor report --output json`.",
    )
    after: dict[str, Any] = Field(
        default_factory=dict,
        description="The same figures as before, for the cluster as it would be after the "
        "plan (moves made, pending pods placed, nodes re-cut).",
    )
    figure_notes: dict[str, str] = Field(
        default_factory=dict,
        alias="figureNotes",
        description="Why a ratio of `after` rose although the plan made nothing worse, by the ratio's JSON name "
        "(`strandedShare`, `fragmentationRate`, `fgdFragmentationRate`): a share of the free GPU capacity rises when "
        "pending pods placed use some of it while the stranded or fragmented capacity stays. Empty when none did.",
    )
    explanations: dict[str, Any] = Field(
        default_factory=dict,
        description="Why pods stay: `unmovablePods` maps each reason a pod may not "
        "move to how many pods it holds in place, most first; `unmovablePodsSample` maps it to the "
        "first 50 of those pods by name (namespace/name).",
    )
    steering: SteeringNote = Field(
        default_factory=lambda: SteeringNote(mechanism="auto", why=STEERING_DECIDED_AT_RUN),
        description="How the executor would steer this plan's replacements in the cluster it was planned on.",
    )
    mig_advice: list[dict[str, Any]] = Field(
        default_factory=list,
        alias="migAdvice",
        description="`compactor plan --explain-mig` only (empty "
        "otherwise): per pool of MIG-capable nodes, the named mig-parted layouts ranked for the "
        "pending and running MIG pods. Advice: nothing is re-cut.",
    )

    def to_json(self) -> str:
        return json.dumps(self.model_dump(by_alias=True, mode="json"), indent=2) + "\n"

    def measured(self, measures: Measures) -> CompactionPlan:
        """The plan with what the figures say of it (``app.plan_document`` measures it: the planner reads no figure)."""
        return self.model_copy(
            update={
                "before": measures.before,
                "after": measures.after,
                "pending_not_placed": [PendingNote(pod=k, reason=v) for k, v in measures.pending.items()],
                "figure_notes": measures.notes,
                "solver": self.solver.model_copy(update={"plan_seconds": round(measures.plan_seconds, 3)}),
            }
        )

    def told(
        self, *, steering: SteeringNote | None = None, stops: str = "", advice: Advice | None = None
    ) -> CompactionPlan:
        """The plan with what a command learnt beside it: the steering the cluster offers, where a run steering by holds
        would stop (``stops``), and the MIG layout advice of ``plan --explain-mig`` (a warning when none)."""
        update: dict[str, Any] = {}
        if steering is not None or stops:
            note = steering or self.steering
            update["steering"] = note.model_copy(update={"stops": stops}) if stops else note
        if advice is not None:
            update["mig_advice"] = advice.pools
            update["warnings"] = [*self.warnings, *([advice.unavailable] if advice.unavailable else [])]
        return self.model_copy(update=update) if update else self


@dataclass(frozen=True)
class Measures:
    """What the figures say of a plan: the cluster before and after it (``report --output json``'s figures), why each
    pending GPU pod it leaves stays pending, the notes on the ratios, and how long planning took."""

    before: dict[str, Any]
    after: dict[str, Any]
    pending: Mapping[str, str]
    notes: dict[str, str]
    plan_seconds: float


@dataclass(frozen=True)
class Advice:
    """The MIG layout advice per pool (``plan --explain-mig``), or why there is none."""

    pools: list[dict[str, Any]]
    unavailable: str | None = None


SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_ID = "urn:gpu-compactor:schema:compactor/v1alpha1:CompactionPlan"


def plan_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the document ``to_json`` writes and ``load_plan`` reads: docs/plan-schema.json.

    Regenerate that file with ``python -m compactor.planner.plan > docs/plan-schema.json``."""
    # Serialisation mode describes what to_json writes; for these models it is the same schema as validation mode.
    schema = CompactionPlan.model_json_schema(by_alias=True, mode="serialization")
    return {"$schema": SCHEMA_DIALECT, "$id": SCHEMA_ID, **schema, "title": f"{API_VERSION} {KIND}"}


def plan_json_schema_text() -> str:
    """``plan_json_schema()`` as committed in docs/plan-schema.json."""
    return json.dumps(plan_json_schema(), indent=2) + "\n"


def load_plan(path: str) -> CompactionPlan:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("no such file", source=path) from None
    except (OSError, UnicodeDecodeError) as exc:  # a directory, no permission, not UTF-8
        raise InputError(f"cannot read: {exc}", source=path) from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", source=path) from None
    except RecursionError:
        raise InputError("JSON nested too deeply to read", source=path) from None
    except ValueError as exc:  # an integer of more digits than Python converts (4,300)
        raise InputError(f"unreadable JSON: {exc}", source=path) from None
    try:
        # Strict: a hand-edited "freedGpus": "8" is an error, as the published schema says, not quietly an 8.
        return CompactionPlan.model_validate_json(text, strict=True)
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
    held = _partitions_held(snapshot, plan)
    nodes = tuple(
        recut_node(node, recut[node.name].allocatable, recut[node.name].to_config)
        if node.name in recut
        else with_partitions_held(node, held[node.name].items())
        if node.name in held
        else node
        for node in snapshot.nodes
    )
    return replace(snapshot, pods=tuple(pods), nodes=nodes)


def _partitions_held(snapshot: Snapshot, plan: CompactionPlan) -> dict[str, dict[str, str]]:
    """node -> device -> pod, for the partitionable nodes whose devices the plan's moves and placements change."""
    held = {n.name: dict(n.partitions.held) for n in snapshot.nodes if n.partitions is not None}
    changed: set[str] = set()
    for move in plan.moves:
        if move.devices and move.from_node in held:
            held[move.from_node] = {d: p for d, p in held[move.from_node].items() if p != move.pod}
            changed.add(move.from_node)
    for pod, node, devices in [(m.pod, m.to_node, m.devices) for m in plan.moves] + [
        (p.pod, p.to_node, p.devices) for p in plan.placed_pending
    ]:
        if devices and node in held:
            held[node] |= dict.fromkeys(devices, pod)
            changed.add(node)
    return {name: held[name] for name in changed}


if __name__ == "__main__":
    sys.stdout.write(plan_json_schema_text())

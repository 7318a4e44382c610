"""What goes under ``planner:``, in the order the YAML shows it. Each field's default, bounds and meaning live in the
module of the question it answers: which pods may move (movable.py), what the plan aims at (aims.py), what a move costs
(cost.py), how the solver searches (solver.py), the caps on one plan (disruption.py), MIG re-cuts (mig.py)."""

from __future__ import annotations

from pydantic import field_validator, model_validator

from compactor.settings.aims import (
    BALANCED_MOVES_PER_GPU,
    MIN_GAIN_PER_MOVE,
    MODE,
    OBJECTIVE,
    PLACE_PENDING,
    TARGET_SHAPES,
    Objective,
    PlanMode,
    check_shape_mode,
)
from compactor.settings.base import Group
from compactor.settings.cost import MOVE_COST, MoveCostSettings
from compactor.settings.disruption import MAX_MOVES, MAX_MOVES_PER_NAMESPACE, MAX_MOVES_PER_NODE
from compactor.settings.mig import MIG_REBALANCE_MIN_GAIN, MIG_REPARTITION, RECUT_COST_MOVES
from compactor.settings.movable import (
    CROSS_POOL_MOVES,
    EXCLUDE_NAMESPACES,
    MAX_PRIORITY,
    MIN_POD_AGE_SECONDS,
    MIN_READY_SECONDS,
    MIN_REPLICAS,
    NAMESPACES,
    POD_SELECTOR,
    RECREATING_CONTROLLERS,
    SCHEDULER_NAMES,
    check_max_priority,
)
from compactor.settings.shapes import check_shapes
from compactor.settings.solver import (
    DETERMINISTIC,
    MAX_CANDIDATE_PODS,
    MAX_TARGETS_PER_TYPE,
    SEED,
    TIME_LIMIT_SECONDS,
    WORKERS,
)


class PlannerSettings(Group):
    mode: PlanMode = MODE
    target_shapes: list[str] = TARGET_SHAPES
    time_limit_seconds: float = TIME_LIMIT_SECONDS
    workers: int = WORKERS
    seed: int = SEED
    deterministic: bool = DETERMINISTIC
    max_moves: int | None = MAX_MOVES
    max_moves_per_node: int | None = MAX_MOVES_PER_NODE
    max_moves_per_namespace: int | None = MAX_MOVES_PER_NAMESPACE
    min_gain_per_move: float = MIN_GAIN_PER_MOVE
    min_replicas: int = MIN_REPLICAS
    place_pending: bool = PLACE_PENDING
    max_candidate_pods: int = MAX_CANDIDATE_PODS
    max_targets_per_type: int = MAX_TARGETS_PER_TYPE
    namespaces: list[str] = NAMESPACES
    exclude_namespaces: list[str] = EXCLUDE_NAMESPACES
    pod_selector: dict[str, str] = POD_SELECTOR
    max_priority: int | None = MAX_PRIORITY
    min_pod_age_seconds: float = MIN_POD_AGE_SECONDS
    min_ready_seconds: float = MIN_READY_SECONDS
    recreating_controllers: list[str] = RECREATING_CONTROLLERS
    move_cost: MoveCostSettings = MOVE_COST
    mig_repartition: bool = MIG_REPARTITION
    mig_rebalance_min_gain: float | None = MIG_REBALANCE_MIN_GAIN
    recut_cost_moves: float = RECUT_COST_MOVES
    cross_pool_moves: bool = CROSS_POOL_MOVES
    scheduler_names: list[str] = SCHEDULER_NAMES
    objective: Objective = OBJECTIVE
    balanced_moves_per_gpu: float = BALANCED_MOVES_PER_GPU

    _shapes_parse = field_validator("target_shapes")(check_shapes)

    @model_validator(mode="after")
    def _shape_mode_needs_shapes(self) -> PlannerSettings:
        check_shape_mode(self.mode, self.target_shapes)
        check_max_priority(self.max_priority)
        return self

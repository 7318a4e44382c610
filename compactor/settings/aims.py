"""What the plan aims at: free whole nodes or room for given shapes, whether to place pending pods, and which point of
the trade-off between GPUs freed and moves made to carry out (``planner`` settings).

The fields are specified here, each with its default, bounds and meaning; ``PlannerSettings`` (planner.py)
lays the group out in the YAML's order.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

PlanMode = Literal["free-nodes", "shapes"]
Objective = Literal["pending-only", "balanced", "max-free"]

MODE: PlanMode = "free-nodes"
TARGET_SHAPES: list[str] = Field(default_factory=list, description="shape mode: maximise headroom for these")
MIN_GAIN_PER_MOVE: float = Field(0.0, ge=0, description="net freed GPUs per move the plan must reach")
PLACE_PENDING: bool = True
OBJECTIVE: Objective = Field(
    "balanced",
    description="which point of the trade-off curve to execute: place pending pods only; free nodes while each costs at "
    "most balanced_moves_per_gpu; or free the most",
)
BALANCED_MOVES_PER_GPU: float = Field(
    0.5,
    ge=0,
    description="balanced: free one more node only while it costs at most this many "
    "moves (move cost / move_cost.base) per GPU it frees",
)


def check_shape_mode(mode: PlanMode, target_shapes: list[str]) -> None:
    """Shape mode has something to aim at."""
    if mode == "shapes" and not target_shapes:
        raise ValueError("planner.mode 'shapes' needs planner.target_shapes")

"""What the plan aims at: free whole nodes or room for given shapes, whether to place pending pods, and which point of
the trade-off between GPUs freed and moves made to carry out, at what price a move (the ``aims`` group)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from compactor.settings.base import Group
from compactor.settings.cost import MoveCostSettings
from compactor.settings.shape_syntax import check_shapes

PlanMode = Literal["free-nodes", "shapes"]
Objective = Literal["pending-only", "balanced", "max-free"]


class AimsSettings(Group):
    goal: PlanMode = "free-nodes"
    target_shapes: list[str] = Field(default_factory=list, description="shape mode: maximise headroom for these")
    objective: Objective = Field(
        "balanced",
        description="which point of the trade-off curve to execute: place pending pods only; free nodes while each costs at "
        "most balanced_moves_per_gpu; or free the most",
    )
    balanced_moves_per_gpu: float = Field(
        0.5,
        ge=0,
        description="balanced: free one more node only while it costs at most this many "
        "moves (move cost / move_cost.base) per GPU it frees",
    )
    place_pending: bool = True
    min_gain_per_move: float = Field(0.0, ge=0, description="net freed GPUs per move the plan must reach")
    move_cost: MoveCostSettings = MoveCostSettings()

    _shapes_parse = field_validator("target_shapes")(check_shapes)

    @model_validator(mode="after")
    def _shape_goal_needs_shapes(self) -> AimsSettings:
        if self.goal == "shapes" and not self.target_shapes:
            raise ValueError("aims.goal 'shapes' needs aims.target_shapes")
        return self

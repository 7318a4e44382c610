"""What one move costs: the price the plan weighs against the GPUs it frees (``aims.move_cost``), from the replica's
size, start-up, priority, deletion cost and its own annotation."""

from __future__ import annotations

from pydantic import Field

from compactor.settings.base import Group


class MoveCostSettings(Group):
    """What a move disrupts, in cost units: ``base`` is one move, restarting a replica of one whole GPU that starts at once."""

    base: int = Field(100, ge=1, description="the cost of one move (the unit)")
    capacity_share: float = Field(
        0.5,
        ge=0,
        le=1,
        description="the share of a move's price that scales with the GPU-equivalents the "
        "replica holds: a move costs (1 - share) + share x GPU-equivalents moves, "
        "so a 1g slice is cheap and an 8-GPU replica dear (0: every move costs 1)",
    )
    per_startup_minute: int = Field(
        5,
        ge=0,
        description="extra cost per minute the replica takes to start: its startup_annotation, "
        "else PodScheduled to Ready as observed (a model server's download and warm-up)",
    )
    max_startup_minutes: float = Field(60.0, ge=0, description="start-up counted at most this long")
    startup_annotation: str = Field(
        "compactor.io/startup-seconds",
        description="pod annotation: the replica's start-up in seconds, instead of the one observed",
    )
    per_priority_step: int = Field(0, ge=0, description="extra cost per `priority_step` of pod priority")
    priority_step: int = Field(1000, ge=1)
    per_deletion_cost_step: int = Field(
        0,
        ge=0,
        description="extra cost per `deletion_cost_step` of the pod's positive "
        "controller.kubernetes.io/pod-deletion-cost (its owner's wish to keep it)",
    )
    deletion_cost_step: int = Field(100, ge=1)
    annotation: str = Field(
        "compactor.io/move-cost", description="pod annotation adding its own restart cost, in moves"
    )
    prefer_full_targets: int = Field(
        0, ge=0, description="cost per spare GPU on a receiving node; >0 may trade extra moves for fuller targets"
    )


MOVE_COST: MoveCostSettings = Field(default_factory=MoveCostSettings)

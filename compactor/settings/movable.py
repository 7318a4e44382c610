"""Which pods may move, and where (the ``movable`` group): what makes a running pod a candidate at all (namespace,
labels, priority, age, readiness, owner, scheduler, replicas left) and whether it may leave its pool."""

from __future__ import annotations

from pydantic import Field, field_validator

from compactor.settings.base import Group

SYSTEM_CRITICAL_PRIORITY = 2_000_000_000


class MovableSettings(Group):
    namespaces: list[str] = Field(
        default_factory=list, description="only pods in these namespaces may move (empty = all)"
    )
    exclude_namespaces: list[str] = Field(default_factory=lambda: ["kube-system"])
    pod_selector: dict[str, str] = Field(default_factory=dict, description="only pods with these labels may move")
    max_priority: int | None = Field(None, description="pods with priority above this never move")
    min_pod_age_seconds: float = Field(
        0.0, ge=0, description="pods created less than this long ago never move (0: any age)"
    )
    min_ready_seconds: float = Field(
        0.0,
        ge=0,
        description="pods Ready for less than this long (their Ready condition's "
        "lastTransitionTime) never move: a replica still warming up "
        "is not taken out of rotation again (0: off)",
    )
    min_replicas: int = Field(
        2,
        ge=1,
        description="a workload with fewer ready replicas than this is not moved unless a "
        "PodDisruptionBudget covers it (moving the only replica of a model server "
        "means its whole start-up as downtime)",
    )
    recreating_controllers: list[str] = Field(
        default_factory=lambda: ["ReplicaSet", "StatefulSet"],
        description="controller kinds that recreate an evicted pod; other owners' pods (Job, CronJob, ...) move only with "
        "compactor.io/evict=true",
    )
    scheduler_names: list[str] = Field(
        default_factory=lambda: ["default-scheduler"],
        description="schedulerNames whose pods the plan may move or place (their scheduler honours taints, "
        "the fence among them, and the filters the planner models)",
    )
    cross_pool_moves: bool = Field(
        False, description="let a GPU pod move to another pool (GPU product); off: it stays in its own"
    )

    @field_validator("max_priority")
    @classmethod
    def _not_system_critical(cls, value: int | None) -> int | None:
        """System-critical pods (node agents, the DNS) never move, whatever ``max_priority`` says."""
        if value is not None and value >= SYSTEM_CRITICAL_PRIORITY:
            raise ValueError(f"may not admit system-critical pods (>= {SYSTEM_CRITICAL_PRIORITY})")
        return value

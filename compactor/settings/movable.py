"""Which pods may move, and where: the ``planner`` settings that make a running pod a candidate at all (namespace,
labels, priority, age, readiness, owner, scheduler, replicas left) and whether it may leave its pool.

The fields are specified here, each with its default, bounds and meaning; ``PlannerSettings`` (planner.py)
lays the group out in the YAML's order.
"""

from __future__ import annotations

from pydantic import Field

SYSTEM_CRITICAL_PRIORITY = 2_000_000_000

MIN_REPLICAS: int = Field(
    2,
    ge=1,
    description="a workload with fewer ready replicas than this is not moved unless a "
    "PodDisruptionBudget covers it (moving the only replica of a model server "
    "means its whole start-up as downtime)",
)
NAMESPACES: list[str] = Field(default_factory=list, description="only pods in these namespaces may move (empty = all)")
EXCLUDE_NAMESPACES: list[str] = Field(default_factory=lambda: ["kube-system"])
POD_SELECTOR: dict[str, str] = Field(default_factory=dict, description="only pods with these labels may move")
MAX_PRIORITY: int | None = Field(None, description="pods with priority above this never move")
MIN_POD_AGE_SECONDS: float = Field(
    0.0, ge=0, description="pods created less than this long ago never move (0: any age)"
)
MIN_READY_SECONDS: float = Field(
    0.0,
    ge=0,
    description="pods Ready for less than this long (their Ready condition's "
    "lastTransitionTime) never move: a replica still warming up "
    "is not taken out of rotation again (0: off)",
)
RECREATING_CONTROLLERS: list[str] = Field(
    default_factory=lambda: ["ReplicaSet", "StatefulSet"],
    description="controller kinds that recreate an evicted pod; other owners' pods (Job, CronJob, ...) move only with "
    "compactor.io/evict=true",
)
CROSS_POOL_MOVES: bool = Field(
    False, description="let a GPU pod move to another pool (GPU product); off: it stays in its own"
)
SCHEDULER_NAMES: list[str] = Field(
    default_factory=lambda: ["default-scheduler"],
    description="schedulerNames whose pods the plan may move or place (their scheduler honours taints, "
    "the fence among them, and the filters the planner models)",
)


def check_max_priority(max_priority: int | None) -> None:
    """System-critical pods (node agents, the DNS) never move, whatever ``planner.max_priority`` says."""
    if max_priority is not None and max_priority >= SYSTEM_CRITICAL_PRIORITY:
        raise ValueError(f"planner.max_priority may not admit system-critical pods (>= {SYSTEM_CRITICAL_PRIORITY})")

"""Every cap in one place (the ``caps`` group): how many moves one plan may make, per node, namespace, workload and
pool; how many all runs together may make in an hour and a day; how many evictions a run starts, at once and in all; how
many nodes steering may hold for one move; how long a run may go on evicting and how old a plan it may carry out."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from compactor.settings.base import Group


class CapsSettings(Group):
    max_moves: int | None = Field(None, ge=0, description="moves one plan may make (null: no cap)")
    max_moves_per_node: int | None = Field(None, ge=0, description="moves one plan may make out of any one node")
    max_moves_per_namespace: int | None = Field(
        None, ge=0, description="moves one plan may make within any one namespace"
    )
    max_moves_per_workload: int | Literal["auto"] | None = Field(
        None,
        description="replicas of one workload (a pod's "
        "controller) one run moves; auto: Koordinator's default for "
        "workloads no PodDisruptionBudget covers (1 below 4 replicas, "
        "2 up to 10, 10% above), the PDB for the others; null: no cap",
    )
    max_draining_per_pool: int | str | None = Field(
        None,
        description="nodes of one pool (metrics.pool_label) a run drains at "
        'once: a count, or a share of the pool\'s nodes like "10%" (rounded '
        "down, at least 1); null: no cap",
    )
    max_moves_per_hour: int | None = Field(
        None, ge=0, description="moves all runs together may make in any hour (null: no cap)"
    )
    max_moves_per_day: int | None = Field(
        None, ge=0, description="moves all runs together may make in any 24 hours (null: no cap)"
    )
    max_concurrent_evictions: int = Field(1, ge=1)
    max_evictions_per_cycle: int = Field(50, ge=1)
    max_run_seconds: float | None = Field(
        None,
        gt=0,
        description="start no eviction after this long; the rest waits for the next run "
        "(a CronJob's activeDeadlineSeconds must cover worst_case_run_seconds)",
    )
    max_plan_age_seconds: float = Field(
        3600.0,
        gt=0,
        description="a plan (apply --plan) or an interrupted run older than this "
        "is refused: the cluster it was computed on is gone",
    )
    max_holds_per_move: int = Field(
        25,
        ge=1,
        description="steering by holds: a move that would fence more nodes than this stops the run "
        "there (partial); install the policy for large clusters",
    )

    @field_validator("max_draining_per_pool")
    @classmethod
    def _count_or_share(cls, value: int | str | None) -> int | str | None:
        if isinstance(value, str) and value.strip().isdigit():  # from an environment variable
            value = int(value)
        if isinstance(value, str):
            number = value.removesuffix("%")
            try:
                ok = value.endswith("%") and 0 < float(number) <= 100
            except ValueError:
                ok = False
            if not ok:
                raise ValueError(f'expected a node count or a share like "10%" (0-100%), got {value!r}')
        elif value is not None and value < 1:
            raise ValueError(f"must be at least 1 (null: no cap), got {value}")
        return value

    @field_validator("max_moves_per_workload")
    @classmethod
    def _positive_moves(cls, value: int | str | None) -> int | str | None:
        if isinstance(value, int) and value < 1:
            raise ValueError(f"must be at least 1, auto or null, got {value}")
        return value

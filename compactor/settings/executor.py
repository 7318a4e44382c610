"""How the executor carries a plan out: what becomes of drained nodes, how many evictions at once and per run, its
timeouts and retries, where its state lives, and which installation it is (the ``executor`` group). How replacements
are steered is steering.py; how long a MIG re-cut may take, mig.py."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from compactor.settings.base import Group
from compactor.settings.mig import MIG_RECONFIGURE_TIMEOUT_SECONDS
from compactor.settings.steering import (
    BIND_POLL_SECONDS,
    MAX_HOLDS_PER_MOVE,
    STEER_TIMEOUT_SECONDS,
    STEERING,
    STEERING_NAME,
    SteeringMode,
    refuse_steer_replacements,
)


class ExecutorSettings(Group):
    after_drain: Literal["uncordon", "keepCordoned", "taint"] = "uncordon"
    taint_key: str = "compactor.io/reserved"
    taint_ttl_seconds: int = Field(900, ge=1)
    max_concurrent_evictions: int = Field(1, ge=1)
    max_evictions_per_cycle: int = Field(50, ge=1)
    replacement_timeout_seconds: float = Field(300.0, gt=0)
    mig_reconfigure_timeout_seconds: float = MIG_RECONFIGURE_TIMEOUT_SECONDS
    eviction_retry_limit: int = Field(5, ge=0)
    backoff_seconds: float = Field(2.0, ge=0)
    backoff_max_seconds: float = Field(60.0, ge=0)
    poll_seconds: float = Field(2.0, gt=0)
    steering: SteeringMode = STEERING
    steering_name: str = STEERING_NAME
    make_before_break_selector: dict[str, str] = Field(
        default_factory=dict,
        description="pods with all these labels move "
        "make-before-break (their Deployment surges by one, the old replica goes "
        "once the new one is Ready on its planned node), as do pods annotated "
        'compactor.io/make-before-break: "true"; empty: only those annotated',
    )
    max_holds_per_move: int = MAX_HOLDS_PER_MOVE
    steer_timeout_seconds: float = STEER_TIMEOUT_SECONDS
    bind_poll_seconds: float = BIND_POLL_SECONDS
    max_run_seconds: float | None = Field(
        None,
        gt=0,
        description="start no eviction after this long; the rest waits for the next run "
        "(a CronJob's activeDeadlineSeconds must cover worst_case_run_seconds)",
    )
    server_dry_run: bool = Field(
        False,
        description="dry runs of a live cluster (apply/run --dry-run, the controller's --dry-run "
        "cycles, mode: plan) send each eviction to the API server with dryRun=All, "
        "so its PodDisruptionBudget check is real (same as --server-dry-run)",
    )
    state_namespace: str = Field(
        "gpu-compactor", min_length=1, description="namespace of the executor's state ConfigMap (must exist)"
    )
    installation: str = Field(
        "",
        max_length=40,
        pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$",
        description="this installation's name, carried by every fence and mark it writes (its fence taint "
        "is compactor.io/fence-<installation>); empty: the state_namespace. Two installations "
        "never release each other's fences",
    )
    max_plan_age_seconds: float = Field(
        3600.0,
        gt=0,
        description="a plan (apply --plan) or an interrupted run older than this "
        "is refused: the cluster it was computed on is gone",
    )
    release_deadline_seconds: float = Field(
        120.0,
        gt=0,
        description="how long releasing fences (end of run, rollback) keeps "
        "retrying through API errors, honouring Retry-After",
    )

    @property
    def identity(self) -> str:
        """The installation's name as written in fences and marks."""
        return self.installation or self.state_namespace

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        return refuse_steer_replacements(data)

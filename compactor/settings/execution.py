"""How the executor carries a plan out (the ``executor`` group): what becomes of drained nodes, its timeouts and retries,
whether dry runs ask the API server, where its state lives, and which installation it is. How replacements are steered
is steering.py; how many evictions a run may start, caps.py; how long a MIG re-cut may take, mig.py."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from compactor.settings.base import Group


class ExecutorSettings(Group):
    after_drain: Literal["uncordon", "keepCordoned", "taint"] = "uncordon"
    taint_key: str = "compactor.io/reserved"
    taint_ttl_seconds: int = Field(900, ge=1)
    replacement_timeout_seconds: float = Field(300.0, gt=0)
    eviction_retry_limit: int = Field(5, ge=0)
    backoff_seconds: float = Field(2.0, ge=0)
    backoff_max_seconds: float = Field(60.0, ge=0)
    poll_seconds: float = Field(2.0, gt=0)
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
        """The setting ``steering.mechanism`` replaced, named with its successor rather than as an unknown key."""
        if isinstance(data, dict) and "steer_replacements" in data:
            raise ValueError(
                "executor.steer_replacements was replaced by steering.mechanism: auto | policy | holds | off "
                "(steer_replacements: false is mechanism: off)"
            )
        return data

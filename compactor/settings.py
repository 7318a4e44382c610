"""Configuration: a YAML file plus ``COMPACTOR_*`` environment variables, validated up front.

Environment variables override the file (``COMPACTOR_PLANNER__TIME_LIMIT_SECONDS=5``).
Unknown keys are errors, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from compactor.errors import ConfigError
from compactor.model.dra import DriverMapping
from compactor.model.quantity import parse_quantity, to_scheduler_units
from compactor.model.resources import Resources
from compactor.model.yamlsafe import YamlRefused, describe_yaml_error, load_yaml

SYSTEM_CRITICAL_PRIORITY = 2_000_000_000


def parse_shape(text: str) -> Resources:
    """``nvidia.com/gpu=4,cpu=8,memory=32Gi`` -> a request vector."""
    amounts: dict[str, int] = {}
    for part in text.replace(" ", ",").split(","):
        if not part:
            continue
        name, sep, value = part.partition("=")
        if not sep or not name:
            raise ValueError(f"expected resource=quantity, got {part!r}")
        _check_resource(name, value)
        amounts[name] = to_scheduler_units(name, value)
    if not amounts:
        raise ValueError("empty shape")
    return Resources(amounts)


_NATIVE_RESOURCES = ("cpu", "memory", "ephemeral-storage")


def _check_resource(name: str, value: str) -> None:
    """A name a pod may request, and for extended resources (``nvidia.com/gpu``) a whole number, as the API server requires."""
    if name in _NATIVE_RESOURCES or name.startswith("hugepages-"):
        return
    if "/" not in name or name.startswith(("kubernetes.io/", "requests.")):
        raise ValueError(
            f"unknown resource {name!r}: expected cpu, memory, ephemeral-storage, hugepages-<size> or an extended "
            "resource such as nvidia.com/gpu or nvidia.com/mig-1g.5gb"
        )
    amount = parse_quantity(value)
    if amount != int(amount):
        raise ValueError(
            f"{name}={value}: an extended resource is requested in whole units (a GPU is not shared by fractions)"
        )


def _check_shapes(value: list[str]) -> list[str]:
    """Every shape string parses (the error names the bad entry)."""
    for text in value:
        parse_shape(text)
    return value


class _Group(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MetricsSettings(_Group):
    pool_label: str = "nvidia.com/gpu.product"
    reference_shapes: list[str] = Field(
        default_factory=list, description="e.g. 'nvidia.com/gpu=4,cpu=8'; empty = from the workload"
    )
    shape_coverage: float = Field(0.95, gt=0, le=1)
    max_shapes: int = Field(20, ge=1)
    pushgateway_url: str = Field(
        "",
        description="a Prometheus Pushgateway (http[s]://HOST:PORT) that `run --once` pushes its "
        "figures and run to at its end (job gpu-compactor, grouping key installation); "
        "empty: no push. The controller is scraped instead",
    )

    _shapes_parse = field_validator("reference_shapes")(_check_shapes)

    @field_validator("pushgateway_url")
    @classmethod
    def _pushgateway_is_a_url(cls, value: str) -> str:
        if not value:
            return value
        try:
            parts = urlsplit(value)
            parts.port  # noqa: B018  (a port that is not a number raises here)
        except ValueError as exc:
            raise ValueError(f"{value!r} is not a URL ({exc})") from None
        if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in value):
            raise ValueError(f"expected http://HOST:PORT or https://HOST:PORT (the Pushgateway), got {value!r}")
        return value

    def shapes(self) -> list[Resources]:
        return [parse_shape(text) for text in self.reference_shapes]


class MoveCostSettings(_Group):
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


class PlannerSettings(_Group):
    mode: Literal["free-nodes", "shapes"] = "free-nodes"
    target_shapes: list[str] = Field(default_factory=list, description="shape mode: maximise headroom for these")
    time_limit_seconds: float = Field(10.0, gt=0, description="the whole plan, trade-off curve included")
    workers: int = Field(2, ge=1)
    seed: int = Field(1, ge=0, description="CP-SAT's random seed")
    deterministic: bool = Field(
        False,
        description="the same plan for the same snapshot, settings and seed, on any machine: CP-SAT's "
        "deterministic time and interleaved search (one thread) instead of wall-clock "
        "seconds and the parallel portfolio (see docs/planner.md)",
    )
    max_moves: int | None = Field(None, ge=0)
    max_moves_per_node: int | None = Field(None, ge=0)
    max_moves_per_namespace: int | None = Field(None, ge=0)
    min_gain_per_move: float = Field(0.0, ge=0, description="net freed GPUs per move the plan must reach")
    min_replicas: int = Field(
        2,
        ge=1,
        description="a workload with fewer ready replicas than this is not moved unless a "
        "PodDisruptionBudget covers it (moving the only replica of a model server "
        "means its whole start-up as downtime)",
    )
    place_pending: bool = True
    max_candidate_pods: int = Field(
        1500, ge=1, description="movable pods the model may move; beyond it, the least-loaded freeable nodes' pods"
    )
    max_targets_per_type: int = Field(24, ge=1, description="candidate target nodes per group of identical pods")
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
    recreating_controllers: list[str] = Field(
        default_factory=lambda: ["ReplicaSet", "StatefulSet"],
        description="controller kinds that recreate an evicted pod; other owners' pods (Job, CronJob, ...) move only with "
        "compactor.io/evict=true",
    )
    move_cost: MoveCostSettings = Field(default_factory=MoveCostSettings)
    mig_repartition: bool = Field(
        False,
        description="re-cut whole-free MIG-capable nodes to a named mig-parted layout that hosts "
        "pending MIG pods (mig.config_map); off: advice only (plan --explain-mig)",
    )
    mig_rebalance_min_gain: float | None = Field(
        None,
        gt=0,
        le=1,
        description="also re-cut idle MIG-capable nodes (no pending pod "
        "to host) when another layout lowers their expected fragmentation rate by at least this "
        "much (0-1); null: never",
    )
    recut_cost_moves: float = Field(
        20.0, ge=0, description="what one re-cut costs, in moves (all its GPUs' device plugin restarts)"
    )
    cross_pool_moves: bool = Field(
        False, description="let a GPU pod move to another pool (GPU product); off: it stays in its own"
    )
    scheduler_names: list[str] = Field(
        default_factory=lambda: ["default-scheduler"],
        description="schedulerNames whose pods the plan may move or place (their scheduler honours taints, "
        "the fence among them, and the filters the planner models)",
    )
    objective: Literal["pending-only", "balanced", "max-free"] = Field(
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

    _shapes_parse = field_validator("target_shapes")(_check_shapes)

    @model_validator(mode="after")
    def _shape_mode_needs_shapes(self) -> PlannerSettings:
        if self.mode == "shapes" and not self.target_shapes:
            raise ValueError("planner.mode 'shapes' needs planner.target_shapes")
        if self.max_priority is not None and self.max_priority >= SYSTEM_CRITICAL_PRIORITY:
            raise ValueError(f"planner.max_priority may not admit system-critical pods (>= {SYSTEM_CRITICAL_PRIORITY})")
        return self


class WindowSettings(_Group):
    """A time a run may act: from each time ``schedule`` fires, in ``timezone``, for ``duration_minutes``."""

    schedule: str = Field(
        description="cron expression, 5 fields (minute hour day-of-month month day-of-week), e.g. '0 22 * * 1-5'"
    )
    duration_minutes: float = Field(gt=0, description="how long the window stays open after each start")
    timezone: str = Field(
        description="IANA timezone the schedule is read in, e.g. Europe/Paris or UTC (no default: say it)"
    )

    @model_validator(mode="after")
    def _valid(self) -> WindowSettings:
        from apscheduler.triggers.cron import CronTrigger

        try:
            zone = ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"timezone {self.timezone!r}: not an IANA timezone (e.g. Europe/Paris, UTC)") from None
        if len(self.schedule.split()) != 5:
            raise ValueError(
                f"schedule {self.schedule!r}: expected 5 cron fields (minute hour day-of-month month day-of-week)"
            )
        try:
            CronTrigger.from_crontab(self.schedule, timezone=zone)
        except ValueError as exc:
            raise ValueError(f"schedule {self.schedule!r}: {exc}") from None
        return self


class DisruptionSettings(_Group):
    windows: list[WindowSettings] = Field(
        default_factory=list,
        description="when runs may act; empty: any time. A run "
        "outside every window changes nothing and says when the next opens",
    )
    workload_cooldown_minutes: float = Field(
        0.0,
        ge=0,
        description="a workload (a pod's controller) moved less than this long ago is not moved again (0: off)",
    )
    node_cooldown_minutes: float = Field(
        0.0,
        ge=0,
        description="a node a move left or reached less than this long ago is neither drained nor filled (0: off)",
    )
    max_moves_per_hour: int | None = Field(
        None, ge=0, description="moves all runs together may make in any hour (null: no cap)"
    )
    max_moves_per_day: int | None = Field(
        None, ge=0, description="moves all runs together may make in any 24 hours (null: no cap)"
    )
    breaker_failures: int = Field(
        0,
        ge=0,
        description="circuit breaker: this many failed moves among the last "
        "breaker_of_last pause every run for breaker_pause_minutes (0: off)",
    )
    breaker_of_last: int = Field(10, ge=1, description="how many of the latest moves the circuit breaker looks at")
    breaker_pause_minutes: float = Field(60.0, gt=0, description="how long the circuit breaker pauses runs once open")
    oscillation_hours: float = Field(
        0.0,
        ge=0,
        description="a plan that takes a workload back to a node a move of the "
        "last this many hours took it from is refused (0: off)",
    )
    max_draining_per_pool: int | str | None = Field(
        None,
        description="nodes of one pool (metrics.pool_label) a run drains at "
        'once: a count, or a share of the pool\'s nodes like "10%" (rounded '
        "down, at least 1); null: no cap",
    )
    max_moves_per_workload: int | Literal["auto"] | None = Field(
        None,
        description="replicas of one workload (a pod's "
        "controller) one run moves; auto: Koordinator's default for "
        "workloads no PodDisruptionBudget covers (1 below 4 replicas, "
        "2 up to 10, 10% above), the PDB for the others; null: no cap",
    )
    history_limit: int = Field(
        500,
        ge=10,
        le=5000,
        description="moves remembered in the gpu-compactor-history ConfigMap "
        "(oldest dropped first; a day is always kept when it fits)",
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

    @model_validator(mode="after")
    def _breaker(self) -> DisruptionSettings:
        if self.breaker_failures > self.breaker_of_last:
            raise ValueError(
                f"disruption.breaker_failures ({self.breaker_failures}) cannot exceed disruption.breaker_of_last "
                f"({self.breaker_of_last})"
            )
        return self


class ExecutorSettings(_Group):
    after_drain: Literal["uncordon", "keepCordoned", "taint"] = "uncordon"
    taint_key: str = "compactor.io/reserved"
    taint_ttl_seconds: int = Field(900, ge=1)
    max_concurrent_evictions: int = Field(1, ge=1)
    max_evictions_per_cycle: int = Field(50, ge=1)
    replacement_timeout_seconds: float = Field(300.0, gt=0)
    mig_reconfigure_timeout_seconds: float = Field(
        900.0,
        gt=0,
        description="longest mig-manager may take to re-cut a node (state success and the new slices in allocatable)",
    )
    eviction_retry_limit: int = Field(5, ge=0)
    backoff_seconds: float = Field(2.0, ge=0)
    backoff_max_seconds: float = Field(60.0, ge=0)
    poll_seconds: float = Field(2.0, gt=0)
    steering: Literal["auto", "policy", "holds", "off"] = Field(
        "auto",
        description="how each replacement is made to bind on its planned node: policy (the MutatingAdmissionPolicy of "
        "manifests/steering pins it; no node touched), holds (the other nodes that could take it are fenced "
        "for a moment), off; auto: policy when installed, else holds (docs/executor.md, Steering)",
    )
    steering_name: str = Field(
        "gpu-compactor-steering",
        min_length=1,
        max_length=253,
        description="name of the steering MutatingAdmissionPolicy, its binding and its parameter "
        "ConfigMap (in state_namespace)",
    )
    make_before_break_selector: dict[str, str] = Field(
        default_factory=dict,
        description="pods with all these labels move "
        "make-before-break (their Deployment surges by one, the old replica goes "
        "once the new one is Ready on its planned node), as do pods annotated "
        'compactor.io/make-before-break: "true"; empty: only those annotated',
    )
    max_holds_per_move: int = Field(
        25,
        ge=1,
        description="holds: a move that would fence more nodes than this stops the run "
        "there (partial); install the policy for large clusters",
    )
    steer_timeout_seconds: float = Field(
        60.0,
        gt=0,
        description="longest a replacement or a placed pending pod may take to bind "
        "once steered; then the run stops and rolls back",
    )
    bind_poll_seconds: float = Field(
        0.2, gt=0, description="poll interval while nodes are held, so holds end soon after the bind"
    )
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
        if isinstance(data, dict) and "steer_replacements" in data:
            raise ValueError(
                "executor.steer_replacements was replaced by executor.steering: auto | policy | holds | off "
                "(steer_replacements: false is steering: off)"
            )
        return data


def worst_case_run_seconds(settings: Settings, *, pending_pods: int = 1, grace_seconds: float = 30.0) -> float:
    """An upper bound on one ``run --once`` under ``settings``: planning, every eviction the run may start, finishing.

    ``grace_seconds``: the longest ``terminationGracePeriodSeconds`` among movable pods (30 is the API default).
    """
    ex, planner = settings.executor, settings.planner
    # A make-before-break move (opt-in per pod, so possibly any) waits once more: every replica Ready, the old pod gone.
    per_move = (
        ex.eviction_retry_limit * ex.backoff_max_seconds
        + 2 * ex.replacement_timeout_seconds
        + 2 * grace_seconds
        + ex.steer_timeout_seconds
    )
    moves = min(
        ex.max_evictions_per_cycle, planner.max_moves if planner.max_moves is not None else ex.max_evictions_per_cycle
    )
    evicting = moves * per_move if ex.max_run_seconds is None else min(moves * per_move, ex.max_run_seconds + per_move)
    planning = 3 * planner.time_limit_seconds + 120  # solver levels, reading the cluster, recovery
    finishing = pending_pods * ex.steer_timeout_seconds + ex.replacement_timeout_seconds + grace_seconds
    if planner.mig_repartition:  # one re-cut per pending pod at most, each waited for in turn
        finishing += pending_pods * ex.mig_reconfigure_timeout_seconds
    if ex.after_drain == "taint":  # the run waits for its reservations to be used, at most their TTL
        finishing += ex.taint_ttl_seconds + ex.poll_seconds
    return planning + evicting + finishing


class MigSettings(_Group):
    config_map: str = Field(
        "",
        description="namespace/name of the mig-parted ConfigMap (key config.yaml); empty: the GPU "
        "Operator's custom-mig-parted-config, else each node's <node>-mig-config, else "
        "default-mig-parted-config, found by selector",
    )
    selector: str = Field(
        "app.kubernetes.io/component=nvidia-mig-manager",
        description="label selector of the GPU Operator's mig-parted ConfigMaps, when config_map is empty",
    )
    operator_namespace: str = Field(
        "gpu-operator",
        min_length=1,
        max_length=63,
        description="the GPU Operator's namespace: the only one mig-parted ConfigMaps are read from "
        "(a tenant's ConfigMap carrying the same label elsewhere is never trusted)",
    )

    @field_validator("config_map")
    @classmethod
    def _namespaced(cls, value: str) -> str:
        if value and (value.count("/") != 1 or not all(value.split("/"))):
            raise ValueError(f"expected namespace/name, got {value!r}")
        return value


DEFAULT_LEASE_SECONDS = 30
DEFAULT_RENEW_DEADLINE_SECONDS = 20.0
DEFAULT_WRITE_TIMEOUT_SECONDS = 4.0


def lease_timing_problem(lease_seconds: float, renew_deadline: float, write_timeout: float) -> str | None:
    """Why these Lease timings cannot keep a late write out of the next leader's time, or None when they can.

    A leader acts while its last successful renewal *began* less than ``renew_deadline`` ago; another replica
    takes the Lease over only after seeing its record unchanged for ``lease_seconds``. Between the two lies
    ``lease_seconds - renew_deadline``. A write checked at the last moment gives up (client side) after
    ``write_timeout`` at most, and a renewal round is two requests (GET, PUT) of ``write_timeout`` each, so:

    * ``2 * write_timeout <= lease_seconds - renew_deadline``: the client side of a fenced write, or a whole
      renewal round, ends at least half the margin before anyone may take over (the other half is left for
      clocks that run at slightly different rates, a pause, a reply in transit);
    * ``lease_seconds / 3 + 2 * write_timeout < renew_deadline``: a round started every third of the lease
      ends before the previous one's renew deadline, so a slow but working API never stops the leader.
    """
    if renew_deadline >= lease_seconds:
        return (
            f"leader_election.renew_deadline_seconds ({renew_deadline:g}) must be shorter than leader_election.lease_seconds "
            f"({lease_seconds:g}): a leader must stop acting before another replica may take the Lease over"
        )
    margin = lease_seconds - renew_deadline
    if 2 * write_timeout > margin:
        return (
            f"leader_election.write_timeout_seconds ({write_timeout:g}) must be at most half of lease_seconds - "
            f"renew_deadline_seconds ({margin:g} s), i.e. {margin / 2:g}: a write checked just before the renew deadline "
            "must have given up well before another replica may take the Lease over"
        )
    if lease_seconds / 3 + 2 * write_timeout >= renew_deadline:
        return (
            f"leader_election.renew_deadline_seconds ({renew_deadline:g}) must exceed a third of lease_seconds plus a "
            f"renewal round of two requests ({lease_seconds / 3:g} + 2 x {write_timeout:g} s): otherwise a slow but working "
            "API server stops the leader between two renewals"
        )
    return None


class DraDriverSettings(_Group):
    """What one DRA driver's device attributes mean (docs/dra.md, "The mapping"); NVIDIA's gpu.nvidia.com by default."""

    driver: str = Field(min_length=1, description="the driver's name (ResourceSlice spec.driver)")
    type_attribute: str = Field("type", min_length=1, description="the attribute saying what a device is")
    gpu_types: list[str] = Field(["gpu"], description="its values for a whole GPU")
    mig_types: list[str] = Field(["mig"], description="its values for a MIG device (static or partitionable)")
    uuid_attribute: str = Field("uuid", description="the attribute naming the physical GPU of a whole-GPU device")
    parent_attribute: str = Field("parentUUID", description="the attribute naming a MIG device's physical GPU")
    profile_attribute: str = Field("profile", description="the attribute naming a MIG device's profile (1g.10gb)")
    product_attribute: str = Field("productName", description="the attribute naming the GPU model (the node's pool)")
    gpu_classes: list[str] = Field(
        default_factory=list, description="DeviceClasses of whole GPUs: a pending claim of `count` asks that many GPUs"
    )
    mig_classes: list[str] = Field(
        default_factory=list,
        description="DeviceClasses of MIG devices: a pending claim asks the profile its CEL selector names "
        '(device.attributes["<driver>"].<profile_attribute> == "3g.40gb")',
    )

    def mapping(self) -> DriverMapping:
        return DriverMapping(
            driver=self.driver,
            type_attribute=self.type_attribute,
            gpu_types=tuple(self.gpu_types),
            mig_types=tuple(self.mig_types),
            uuid_attribute=self.uuid_attribute,
            parent_attribute=self.parent_attribute,
            profile_attribute=self.profile_attribute,
            product_attribute=self.product_attribute,
            gpu_classes=tuple(self.gpu_classes),
            mig_classes=tuple(self.mig_classes),
        )


class DraSettings(_Group):
    drivers: list[DraDriverSettings] = Field(
        default_factory=lambda: [
            DraDriverSettings(driver="gpu.nvidia.com", gpu_classes=["gpu.nvidia.com"], mig_classes=["mig.nvidia.com"])
        ],
        description="the DRA drivers whose devices are GPUs, each with what its attributes mean; devices of any "
        "other driver are not counted, and pods holding them stay in place",
    )

    @field_validator("drivers")
    @classmethod
    def _one_per_driver(cls, value: list[DraDriverSettings]) -> list[DraDriverSettings]:
        names = [d.driver for d in value]
        if twice := sorted({n for n in names if names.count(n) > 1}):
            raise ValueError(f"driver {twice[0]} is described more than once")
        return value

    def mappings(self) -> tuple[DriverMapping, ...]:
        return tuple(d.mapping() for d in self.drivers)


class LeaderElectionSettings(_Group):
    lease_seconds: int = Field(
        DEFAULT_LEASE_SECONDS,
        ge=3,
        description="leaseDurationSeconds of the Lease gpu-compactor-leader: "
        "another replica takes the Lease over once its record "
        "stayed unchanged this long (local monotonic time)",
    )
    renew_deadline_seconds: float = Field(
        DEFAULT_RENEW_DEADLINE_SECONDS,
        gt=0,
        description="the holder acts (every write is fenced on it) only while its last "
        "successful renewal began less than this long ago (client-go's RenewDeadline)",
    )
    write_timeout_seconds: float = Field(
        DEFAULT_WRITE_TIMEOUT_SECONDS,
        gt=0,
        description="timeout of each write (node patches, evictions, events, the state "
        "ConfigMap) and of each request on the Lease; at most half of "
        "lease_seconds - renew_deadline_seconds (reads keep a longer timeout)",
    )

    @model_validator(mode="after")
    def _timing(self) -> LeaderElectionSettings:
        problem = lease_timing_problem(self.lease_seconds, self.renew_deadline_seconds, self.write_timeout_seconds)
        if problem:
            raise ValueError(problem)
        return self


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="COMPACTOR_", env_nested_delimiter="__", extra="forbid", frozen=True)

    mode: Literal["report", "plan", "apply"] = Field(
        "apply",
        description="what `run --once` and the controller may do: report (measure and export figures only), plan "
        "(plan and dry-run every cycle: full reports, nothing changed) or apply (act). --dry-run and "
        "--report-only only ever make a run safer; `apply --plan` refuses to act unless apply. The "
        "shipped manifests set plan",
    )
    # Frozen groups, so one shared default instance is safe.
    metrics: MetricsSettings = MetricsSettings()
    planner: PlannerSettings = PlannerSettings()
    executor: ExecutorSettings = ExecutorSettings()
    mig: MigSettings = MigSettings()
    dra: DraSettings = DraSettings()
    leader_election: LeaderElectionSettings = LeaderElectionSettings()
    disruption: DisruptionSettings = DisruptionSettings()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Environment overrides the file (passed as init kwargs).
        return (env_settings, init_settings)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "config"
    message = str(err["msg"]).removeprefix("Value error, ")
    if message.startswith(f"{where}."):  # a group's own check that names the field itself
        return message
    return f"{where}: {err['msg']}"


ENV_PREFIX = "COMPACTOR_"


def _read_yaml(where: str, read: Callable[..., str] | None) -> dict[str, Any]:
    """A YAML mapping read by ``read``; every failure a one-line ``ConfigError`` naming ``where``."""
    if read is None:
        raise ConfigError(f"{where}: no such file")
    try:
        loaded = load_yaml(read(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:  # a directory, no permission, not UTF-8
        raise ConfigError(f"{where}: cannot read: {exc}") from None
    except YamlRefused as exc:
        raise ConfigError(f"{where}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: {describe_yaml_error(exc)}") from None
    if loaded is not None and not isinstance(loaded, dict):
        raise ConfigError(f"{where}: expected a mapping at the top level")
    return loaded or {}


def setting_env_names(model: type[BaseModel] = Settings, prefix: str = ENV_PREFIX) -> list[str]:
    """Every ``COMPACTOR_*`` variable that names a setting: groups (as JSON) and each field, nested with ``__``."""
    names = []
    for name, info in model.model_fields.items():
        env = f"{prefix}{name.upper()}"
        names.append(env)
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
            names += setting_env_names(info.annotation, env + "__")
    return names


def check_environment(environ: Mapping[str, str]) -> None:
    """A ``COMPACTOR_*`` variable that names no setting is an error: pydantic-settings would ignore it, and a typo
    (``COMPACTOR_PLANER__MAX_MOVES``) would silently leave the default in force."""
    valid = [name.removeprefix(ENV_PREFIX) for name in setting_env_names()]
    for key in sorted(environ):
        name = key.upper().removeprefix(ENV_PREFIX)
        if key.upper().startswith(ENV_PREFIX) and name not in valid:
            closest = difflib.get_close_matches(name, valid, n=1, cutoff=0.75)
            hint = (
                f"; did you mean {ENV_PREFIX}{closest[0]}?"
                if closest
                else f"; settings are {ENV_PREFIX}<GROUP>__<FIELD> as in config/compactor.yaml"
            )
            raise ConfigError(f"environment: {key} names no setting{hint}")


CONFIG_MAP_KEY = "compactor.yaml"  # the key of the shipped ConfigMap, mounted at /etc/gpu-compactor/compactor.yaml


def load_settings(path: str | None = None, overrides: dict[str, Any] | None = None) -> Settings:
    """Settings from an optional YAML file (or the ConfigMap manifest that mounts one: what is deployed), the environment
    and CLI overrides; ``ConfigError`` names file and field."""
    data: dict[str, Any] = {}
    source = path or "environment"
    if path:
        data = _read_yaml(path, Path(path).read_text if Path(path).exists() else None)
        if data.get("kind") == "ConfigMap":
            source = f"{path}: ConfigMap data.{CONFIG_MAP_KEY}"
            inner = (data.get("data") or {}).get(CONFIG_MAP_KEY) if isinstance(data.get("data"), dict) else None
            if not isinstance(inner, str):
                name = (data.get("metadata") or {}).get("name", "") if isinstance(data.get("metadata"), dict) else ""
                raise ConfigError(
                    f"{path}: ConfigMap {name}: data.{CONFIG_MAP_KEY}: missing (the key gpu-compactor mounts)"
                )
            data = _read_yaml(source, lambda encoding: inner)
    for group, values in (overrides or {}).items():
        data.setdefault(group, {}).update(values)
    check_environment(os.environ)
    try:
        return Settings(**data)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_first_error(exc)}") from None

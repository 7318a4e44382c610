"""The plan use case: a compaction plan of a snapshot, made the same way by ``plan``, ``run --once`` and the controller.

``prepare`` checks what the settings ask of the snapshot (shapes its nodes offer, a planner selection that leaves some GPU
pod movable) and derives the reference shapes (``figures.shapes_for``); ``plan_of`` plans with them, the MIG layouts
re-cuts may use (``mig.repartition``), what the steering can keep in place, the history's restraints and the run
budgets. The steering a live cluster offers and the MIG layout advice of ``plan --explain-mig`` are here too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypedDict, Unpack

from compactor.actions.cluster.run_cut import kept_fenced
from compactor.actions.port.client import ClusterClient
from compactor.actions.steering.detect import choose, offline_mechanism, steerability, steerability_of
from compactor.actions.steering.holds import first_wall
from compactor.app.figures import shapes_for
from compactor.app.invocation import Invocation
from compactor.app.plan_document import build_plan
from compactor.app.policy import restraints
from compactor.app.reading import load_for_planning
from compactor.app.sources import check_selection, check_shapes
from compactor.app.windows import window_state
from compactor.app.wiring import cluster_client
from compactor.errors import CompactorError
from compactor.metrics.fragmentation import ReferenceShape
from compactor.model.migparted import find_mig_parted, problems
from compactor.model.types import Snapshot
from compactor.planner.mig_advice import advise
from compactor.planner.plan import Advice, CompactionPlan, SteeringNote
from compactor.planner.recut import mig_parted_for
from compactor.planner.request import PlanRequest
from compactor.planner.rules.history import Restraints
from compactor.planner.rules.movability import Steerability
from compactor.settings.origins import Settings

log = logging.getLogger("compactor.commands")  # what the command line says of its plans, under the name it always had


def prepare(snapshot: Snapshot, settings: Settings) -> tuple[ReferenceShape, ...]:
    """The reference shapes a plan of ``snapshot`` is made and measured with, once the settings are checked against it
    (``ConfigError``: a shape no node offers, a planner selection that keeps every GPU pod in place)."""
    check_shapes(snapshot, settings)
    check_selection(snapshot, settings)
    return shapes_for(snapshot, settings)


class Offered(TypedDict, total=False):
    """What a command adds to a plan's request (``planner.request.PlanRequest`` says what each is)."""

    steering: Steerability
    restraints: Restraints | None
    stage: Callable[[str, str], None] | None
    load_seconds: float | None


def plan_of(
    snapshot: Snapshot,
    settings: Settings,
    shapes: tuple[ReferenceShape, ...],
    *,
    source: str,
    now: datetime,
    **asked: Unpack[Offered],
) -> CompactionPlan:
    """The plan of ``snapshot`` (``prepare`` gave ``shapes``): ``settings.planner`` with the MIG layouts re-cuts may use,
    the run budgets (``disruption``, ``caps``) and what ``asked`` adds: ``steering``, what the run's steering can keep
    where the plan puts a replacement (``steering_in``, ``offline_steerability``); ``restraints``, what the history
    forbids; ``stage``, ``load_seconds``."""
    request = PlanRequest.of(
        snapshot,
        settings.for_planner,
        source=source,
        now=now,
        shapes=shapes,
        mig_parted=mig_parted_for(snapshot, settings),
        budgets=settings.caps,
        max_evictions=settings.caps.max_evictions_per_cycle,
        **asked,
    )
    return build_plan(request)


def steering_in(client: ClusterClient, settings: Settings) -> tuple[SteeringNote, Steerability]:
    """The mechanism a run would steer with in the cluster ``client`` reads, and what it can keep in place
    (``steering.mechanism: policy`` without the policy says so here instead of failing: a plan is only read)."""
    try:
        choice = choose(client, settings.for_executor)
    except CompactorError as exc:
        note = SteeringNote(mechanism="policy", why=f"a run would fail before any change: {exc}")
        return note, steerability("policy", settings.executor.identity)
    note = SteeringNote(mechanism=choice.mechanism.value, why=choice.why)
    return note, steerability_of(choice, settings.executor.identity)


def offline_steerability(settings: Settings) -> Steerability:
    """What a plan made without a cluster reckons the steering can keep in place: as the settings say."""
    return steerability(offline_mechanism(settings.steering), settings.executor.identity)


def with_holds_wall(plan: CompactionPlan, snapshot: Snapshot, settings: Settings) -> CompactionPlan:
    """``plan`` with its steering note saying where a run steering by holds would stop (``max_holds_per_move``), when the
    run would steer by holds: the cluster chose it, or a plan of a snapshot leaves it to the run (``auto``, ``holds``)."""
    stops = holds_wall(plan, snapshot, settings)
    return plan.told(stops=stops)


def holds_wall(plan: CompactionPlan, snapshot: Snapshot, settings: Settings) -> str:
    """Where a run steering by holds would stop ``plan`` ("" when it would not stop, or would not steer by holds)."""
    mechanism = plan.steering.mechanism
    if mechanism not in ("holds", "auto") or (
        mechanism == "auto" and settings.steering.mechanism not in ("auto", "holds")
    ):
        return ""
    wall = first_wall(
        snapshot.nodes,
        snapshot.pods,
        plan.moves,
        fencing=[*plan.freed_nodes, *kept_fenced(plan)],
        caps=settings.caps,
    )
    if wall is None:
        return ""
    return wall.says() if mechanism == "holds" else f"if the steering policy is not installed, {wall.says()}"


def mig_advice(snapshot: Snapshot, settings: Settings) -> tuple[list[dict[str, Any]], str | None]:
    """The MIG layout advice, or none and why it is unavailable (the plan itself stands: advice is an extra)."""
    config_map, namespace = settings.mig.config_map, settings.mig.operator_namespace
    parted = find_mig_parted(snapshot.config_maps, config_map, namespace=namespace)
    if parted is None:
        where = config_map or f"{namespace}/custom-/default-mig-parted-config"
        why = (
            f"--explain-mig: MIG advice unavailable: no mig-parted ConfigMap {where} in the snapshot (include it: kubectl get ... "
            "configmaps; only the GPU Operator's namespace, mig.operator_namespace, is read)"
        )
        log.warning(why)
        return [], why
    advice = [pool.to_dict() for pool in advise(snapshot, parted)]
    for config in parted.parsed():
        for problem in problems(config):
            log.warning(problem)
    return advice, None


class Solving(Protocol):
    """What shows a long solve's progress (``commands.progress.SolveProgress``): entered around the solve, told each stage."""

    def __enter__(self) -> Solving: ...

    def __exit__(self, *exc: object) -> None: ...

    def stage(self, name: str, best: str) -> None: ...


@dataclass(frozen=True)
class Planned:
    """``plan``'s answer: the plan, the snapshot and reference shapes it was made on (the page's pictures need them),
    and the disruption window now ((open, why); None when none is configured)."""

    plan: CompactionPlan
    snapshot: Snapshot
    shapes: tuple[ReferenceShape, ...]
    window: tuple[bool, str] | None


def plan_for_command(inv: Invocation, *, explain_mig: bool, solving: Callable[[], Solving]) -> Planned:
    """``compactor plan``: the snapshot (its load timed apart: the time limit bounds the planning only), the steering a
    live cluster offers, the history's restraints, the plan with the MIG advice (``explain_mig``) and the holds' wall."""
    settings, source = inv.settings, inv.input()
    loading = time.monotonic()
    snapshot = load_for_planning(inv, explain_mig=explain_mig)
    loaded = time.monotonic() - loading
    shapes = prepare(snapshot, settings)
    steering, steerability = (
        steering_in(cluster_client(inv, dry_run=True), settings) if inv.live else (None, offline_steerability(settings))
    )
    with solving() as watch:
        plan = plan_of(
            snapshot,
            settings,
            shapes,
            source=snapshot.source or source.describe(),  # a live read names its context, as `report` does
            now=datetime.now(UTC),
            steering=steerability,
            load_seconds=loaded,
            stage=watch.stage,
            restraints=restraints(inv, datetime.now(UTC)),
        )
    advice = Advice(*mig_advice(snapshot, settings)) if explain_mig else None
    plan = with_holds_wall(plan.told(steering=steering, advice=advice), snapshot, settings)
    windows = settings.disruption.windows
    window = window_state(windows, datetime.now(UTC)) if windows else None
    return Planned(plan, snapshot, shapes, (window.open, window.why) if window else None)

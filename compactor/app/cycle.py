"""One compaction cycle, the one pipeline of ``run --once``, ``apply`` and the controller's tick.

gate -> a dead run's leftovers -> recover -> measure -> plan -> carry out -> measure again, top to bottom in ``cycle``.
What differs between the entry points is what the cycle runs on (``Ports``: how the cluster is read, the client a run
acts through under the Lease, a dry run's client) and who watches it (``Watcher``: the run's record for ``run --once``,
the Prometheus exporter for the controller); each entry point wires its own (``once.py``, ``tick.py``). The gate is asked
before the cycle (``policy.admit``) because each entry point answers a held run its own way: ``apply`` refuses it, the
others measure and say why.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Protocol

from compactor.actions.cluster.state_guard import check_state_guard
from compactor.actions.executor import Progress
from compactor.actions.port.client import ClusterClient
from compactor.actions.recovery import RecoveryReport
from compactor.actions.services.report import RunReport
from compactor.actions.steering.detect import Choice, choose, steerability_of
from compactor.app.carry_out import Carried, execute, recover_run
from compactor.app.figures import Measured, measure
from compactor.app.fill_first_labels import label_fill_first
from compactor.app.planning import Solving, plan_of, prepare
from compactor.app.policy import Admission, HeldBy, Verdict
from compactor.clock import Clock, Interrupted, SimulatedClock
from compactor.errors import CompactorError
from compactor.metrics.fill_first import FILL_FIRST_LABEL
from compactor.metrics.fragmentation import Figures, ReferenceShape
from compactor.model.shorten import listed
from compactor.model.types import Snapshot
from compactor.planner.plan import CompactionPlan
from compactor.planner.rules.movability import Steerability
from compactor.settings.origins import Settings
from compactor.statuses import RunStatus

log = logging.getLogger("compactor.cycle")
# A plan that went stale before its first eviction (a pod bound on a node it frees or drains while it was made: a busy
# cluster does that) is made again from the cluster as it is now, this many times per cycle: nothing was moved, and a
# stale plan is no failure (it counts nothing toward the circuit breaker).
REPLANS_WHEN_STALE = 2


@dataclass(frozen=True)
class Held:
    """A run that changes nothing on purpose (a closed window, the circuit breaker), and why."""

    why: str


Ended = Measured | Held | Carried  # report only | held | carried out (or stopped)


class _NotSolving:
    """No progress shown while the planner solves (the controller logs its cycles instead)."""

    def __enter__(self) -> _NotSolving:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def stage(self, name: str, best: str) -> None:
        return None


@dataclass(frozen=True)
class Ports:
    """What a cycle runs on. ``read``: the cluster (or snapshot) as planning reads it. ``acting()``: the client a real run
    changes the cluster through and its clock, held exclusively while open (the Lease, the stop signals). ``simulating``:
    a dry run's client over its plan. ``dry_steering``: what a dry run's plan reckons the steering can keep in place.
    ``clean_up``: a dead run's leftovers cleared by a run that may not act (None: this run may not touch them)."""

    settings: Settings
    read: Callable[[], Snapshot]
    clock: Clock
    acting: Callable[[], AbstractContextManager[tuple[ClusterClient, Clock]]]
    simulating: Callable[[CompactionPlan], ClusterClient]
    dry_steering: Callable[[], Steerability]
    clean_up: Callable[[], RecoveryReport | None] | None = None
    progress: Callable[[Progress], None] | None = None
    solving: Callable[[], Solving] | None = None  # the planner's progress, shown as it solves (None: not shown)


class Watcher(Protocol):
    """Who watches a cycle: told each thing it saw and did, in order (``once.CommandWatcher``, ``tick.ExporterWatcher``)."""

    @property
    def wants_figures(self) -> bool:
        """Whether the figures before and after a run are worth reading the cluster for (they are the point of a
        report-only run, which measures whatever this says)."""
        ...

    def recovered(self, recovery: RecoveryReport, *, acting: bool) -> None: ...

    def measured(self, snapshot: Snapshot, shapes: tuple[ReferenceShape, ...], figures: Figures | None) -> None:
        """The snapshot read, its shapes, and its figures when the cycle measured them (None: the cycle planned, and the
        plan measures its own; a watcher that keeps figures computes them)."""
        ...

    def held(self, why: str) -> None: ...

    def planned(self, plan: CompactionPlan, steering: Choice | None, *, made: bool) -> None: ...

    def carried_out(self, report: RunReport) -> None: ...

    def measured_after(self, snapshot: Snapshot) -> None:
        """The cluster after a real run that changed it (measured with the shapes of the figures before)."""
        ...


def cycle(admission: Admission, ports: Ports, watcher: Watcher, *, plan: CompactionPlan | None = None) -> Ended:
    """One cycle as ``admission`` allows it: measure only (report only, held), or plan (unless ``plan`` is given) and carry
    the plan out, for real or as a dry run. A run that may not act clears a dead run's leftovers first."""
    if not admission.acts and ports.clean_up is not None and (cleared := ports.clean_up()) is not None:
        watcher.recovered(cleared, acting=False)
    if not admission.plans:
        return _measured_only(admission, ports, watcher)
    if admission.acts:
        return _acted(admission, ports, watcher, plan)
    return _dry_run(admission, ports, watcher, plan)


def _measured_only(admission: Admission, ports: Ports, watcher: Watcher) -> Measured | Held:
    """Report only: the figures (all the run is for); held: the figures when wanted, and why nothing changes."""
    if admission.verdict is Verdict.HELD:
        (log.info if admission.held_by is HeldBy.WINDOW else log.warning)("%s: this run changes nothing", admission.why)
        if watcher.wants_figures:
            _measure(ports, watcher)
        watcher.held(admission.why)
        return Held(admission.why)
    return _measure(ports, watcher)


def _measure(ports: Ports, watcher: Watcher) -> Measured:
    measured = measure(ports.read(), ports.settings)
    watcher.measured(measured.snapshot, measured.figures.shapes, measured.figures)
    return measured


def _acted(admission: Admission, ports: Ports, watcher: Watcher, given: CompactionPlan | None) -> Carried:
    """A real run: under the Lease, recover first, then plan (on the state this run alone changes) and carry it out."""
    seen = _LastRead(ports.read)
    ports = replace(ports, read=seen)
    settings, plan = ports.settings, given
    with ports.acting() as (client, clock):
        try:
            check_state_guard(client, settings.executor.state_namespace)
            recovery = recover_run(client, settings, clock, resume=True)
            watcher.recovered(recovery, acting=True)
            choice = None
            if plan is None:
                choice = choose(
                    client, settings.for_executor, clock.now()
                )  # the plan leaves in place what it cannot place
                plan = _planned(admission, ports, watcher, steerability_of(choice, settings.executor.identity))
            watcher.planned(plan, choice, made=given is None)
            report = _carried(client, clock, plan, admission, ports, choice)
            replanned: list[str] = []
            while choice is not None and report.stale_before_any_eviction and len(replanned) < REPLANS_WHEN_STALE:
                replanned.append(report.reason)
                log.info(
                    f"plan {plan.metadata.id} went stale before its first eviction ({report.reason}): planning again"
                )
                plan = _planned(admission, ports, watcher, steerability_of(choice, settings.executor.identity))
                watcher.planned(plan, choice, made=True)
                report = _carried(client, clock, plan, admission, ports, choice)
            report.replanned = replanned
            _fill_first(client, ports, seen.last)
        except Interrupted:
            return Carried(client, stopped=plan.metadata.id if plan else "")
        watcher.carried_out(report)
    if watcher.wants_figures and (_changed(report) or recovery.changed):
        _measured_after(ports, watcher)
    return Carried(client, report)


def _carried(
    client: ClusterClient, clock: Clock, plan: CompactionPlan, admission: Admission, ports: Ports, choice: Choice | None
) -> RunReport:
    return execute(
        client,
        ports.settings,
        clock,
        plan,
        dry_run=False,
        steering=choice,
        progress=ports.progress,
        restraints=admission.restraints,
    )


def _dry_run(admission: Admission, ports: Ports, watcher: Watcher, given: CompactionPlan | None) -> Carried:
    """A dry run: plan (with the steering the cluster would give a run), then carry the plan out through a client that
    records what a real run would call, over a copy of the cluster, on a clock that does not wait."""
    plan = given or _planned(admission, ports, watcher, ports.dry_steering())
    watcher.planned(plan, None, made=given is None)
    client = ports.simulating(plan)
    clock = SimulatedClock(ports.clock.now())
    report = execute(client, ports.settings, clock, plan, dry_run=True, steering=None, progress=ports.progress)
    watcher.carried_out(report)
    return Carried(client, report)


def _planned(admission: Admission, ports: Ports, watcher: Watcher, steering: Steerability) -> CompactionPlan:
    """The cycle's plan of the cluster as read now, with the restraints the history sets."""
    snapshot = ports.read()
    shapes = prepare(snapshot, ports.settings)
    watcher.measured(snapshot, shapes, None)  # the plan measures them too: a watcher that wants its own computes them
    with (ports.solving or _NotSolving)() as watch:
        plan = plan_of(
            snapshot,
            ports.settings,
            shapes,
            source=snapshot.source,
            now=ports.clock.now(),
            steering=steering,
            stage=watch.stage,
            restraints=admission.restraints,
        )
    log.info(f"plan {plan.metadata.id}: {len(plan.moves)} move(s), frees {listed(plan.freed_nodes) or 'nothing'}")
    return plan


class _LastRead:
    """``Ports.read``, keeping the last snapshot it returned."""

    def __init__(self, read: Callable[[], Snapshot]) -> None:
        self.read = read
        self.last: Snapshot | None = None

    def __call__(self) -> Snapshot:
        snapshot = self.last = self.read()
        return snapshot


def _fill_first(client: ClusterClient, ports: Ports, before: Snapshot | None) -> None:
    """Prevention (``steering.fill_first``): the fill-first labels in line with the cluster after the run, or removed
    once the setting is off (docs/prevention.md). A cluster that cannot be read leaves them as they are."""
    labelled = before is not None and any(FILL_FIRST_LABEL in node.labels for node in before.nodes)
    if not (ports.settings.steering.fill_first or labelled):
        return
    try:
        label_fill_first(client, ports.read(), ports.settings)
    except CompactorError as exc:
        log.warning(f"fill-first labels not brought up to date: {exc}")


def _changed(report: RunReport) -> bool:
    return report.status != RunStatus.NOTHING_TO_DO


def _measured_after(ports: Ports, watcher: Watcher) -> None:
    """The figures after a run that changed the cluster; a failure to read them leaves the run as it ended."""
    try:
        after = ports.read()
    except Exception as exc:
        log.warning(f"could not measure the cluster after the run (the figures before stand): {exc}")
        return
    watcher.measured_after(after)

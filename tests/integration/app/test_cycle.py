"""The one pipeline (``compactor.app.cycle.cycle``) on the fake cluster, told apart from its adapters: what it does in
each verdict of the gate, in what order, through which port.

``run --once``, ``apply`` and the controller's tick differ only in their ports and watchers (``app/once.py``,
``app/tick.py``), so a rule of the cycle holds for all three once it holds here.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from compactor.actions.dryrun import RecordingClient
from compactor.actions.port.client import ClusterClient
from compactor.actions.recovery import RecoveryReport
from compactor.actions.services.report import RunReport
from compactor.actions.steering.detect import Choice
from compactor.app.carry_out import Carried
from compactor.app.cycle import Held, Ports, cycle
from compactor.app.figures import Measured
from compactor.app.planning import offline_steerability
from compactor.app.policy import Admission, HeldBy, Verdict
from compactor.clock import Clock, StoppableClock
from compactor.metrics.fill_first import FILL_FIRST_LABEL
from compactor.metrics.fragmentation import Figures, ReferenceShape
from compactor.model.types import Snapshot
from compactor.planner.plan import CompactionPlan
from compactor.statuses import RunStatus
from tests.builders import pod
from tests.fakecluster import FakeCluster
from tests.scenarios.controller import SETTINGS_ALL, loader
from tests.scenarios.executor import assert_clean, make_plan, one_freed_node, writes

ACT = Admission(Verdict.ACT)
DRY_RUN = Admission(Verdict.DRY_RUN)
MODE_PLAN = Admission(Verdict.DRY_RUN, "mode: plan", HeldBy.MODE)
REPORT = Admission(Verdict.REPORT, "mode: report", HeldBy.MODE)
WINDOW_CLOSED = Admission(Verdict.HELD, "outside the disruption windows", HeldBy.WINDOW)


@dataclass
class Told:
    """A watcher that writes down what the cycle tells it, in order."""

    wants_figures: bool = True
    said: list[str] = field(default_factory=list)
    report: RunReport | None = None

    def recovered(self, recovery: RecoveryReport, *, acting: bool) -> None:
        self.said.append("recovered" if acting else "cleaned up")

    def measured(self, snapshot: Snapshot, shapes: tuple[ReferenceShape, ...], figures: Figures | None) -> None:
        self.said.append("measured" if figures is not None else "read")

    def held(self, why: str) -> None:
        self.said.append(f"held: {why}")

    def planned(self, plan: CompactionPlan, steering: Choice | None, *, made: bool) -> None:
        self.said.append(f"planned {len(plan.moves)} moves" if made else f"given {len(plan.moves)} moves")

    def carried_out(self, report: RunReport) -> None:
        self.report = report
        self.said.append(f"carried out: {report.status}")

    def measured_after(self, snapshot: Snapshot) -> None:
        self.said.append("measured after")


@dataclass
class Through:
    """The fake cluster's ports, counting which ones the cycle opened."""

    c: FakeCluster
    clock: Clock | None = None
    opened: list[str] = field(default_factory=list)

    def ports(self, *, clean: bool = True) -> Ports:
        return Ports(
            settings=SETTINGS_ALL,
            read=loader(self.c),
            clock=self.c.clock,
            acting=self._acting,
            simulating=self._simulating,
            dry_steering=lambda: offline_steerability(SETTINGS_ALL),
            clean_up=self._clean_up if clean else None,
        )

    @contextmanager
    def _acting(self) -> Iterator[tuple[ClusterClient, Clock]]:
        self.opened.append("acting")
        yield self.c, self.clock or self.c.clock

    def _simulating(self, plan: CompactionPlan) -> ClusterClient:
        self.opened.append("simulating")
        objects: list[Any] = [*self.c.list_nodes(), *self.c.list_pods(), *self.c.list_pdbs()]
        return RecordingClient(objects, plan, probe=self.c, namespace=SETTINGS_ALL.executor.state_namespace)

    def _clean_up(self) -> RecoveryReport:
        self.opened.append("clean up")
        return RecoveryReport()


def test_a_cycle_that_acts_recovers_then_plans_carries_out_and_measures_again_under_the_lease() -> None:
    c = FakeCluster(one_freed_node())
    told, through = Told(), Through(c)
    ended = cycle(ACT, through.ports(), told)
    assert isinstance(ended, Carried) and ended.report is not None and ended.report.freed_nodes == ["gpu-3"]
    assert told.said == ["recovered", "read", "planned 3 moves", "carried out: succeeded", "measured after"]
    assert through.opened == ["acting"]  # no clean-up: a run that acts recovers, and resumes what it finds
    assert_clean(c)


def test_a_held_cycle_clears_leftovers_measures_and_says_why_without_a_write() -> None:
    c = FakeCluster(one_freed_node())
    told, through = Told(), Through(c)
    ended = cycle(WINDOW_CLOSED, through.ports(), told)
    assert ended == Held("outside the disruption windows")
    assert told.said == ["cleaned up", "measured", "held: outside the disruption windows"]
    assert through.opened == ["clean up"] and c.history == []


def test_a_held_cycle_reads_nothing_when_its_watcher_wants_no_figures() -> None:
    c = FakeCluster(one_freed_node())
    told = Told(wants_figures=False)
    assert cycle(WINDOW_CLOSED, Through(c).ports(clean=False), told) == Held("outside the disruption windows")
    assert told.said == ["held: outside the disruption windows"]


def test_a_report_only_cycle_measures_whatever_its_watcher_wants() -> None:
    c = FakeCluster(one_freed_node())
    told = Told(wants_figures=False)
    ended = cycle(REPORT, Through(c).ports(), told)
    assert isinstance(ended, Measured) and ended.figures.cluster.gpus == 24
    assert told.said == ["cleaned up", "measured"] and c.history == []


def test_a_dry_run_plans_first_and_carries_the_plan_out_through_the_simulating_port_only() -> None:
    c = FakeCluster(one_freed_node())
    told, through = Told(), Through(c)
    # an operator's --dry-run: its adapter gives it no clean-up (it changes nothing, leftovers included)
    ended = cycle(DRY_RUN, through.ports(clean=False), told)
    assert isinstance(ended, Carried) and isinstance(ended.client, RecordingClient)
    # planning reads the cluster without measuring it twice: the plan measures its own figures
    assert told.said == ["read", "planned 3 moves", "carried out: succeeded"]
    assert told.report is not None and told.report.dry_run
    assert through.opened == ["simulating"] and c.history == [] and c.evicted == []  # the Lease never taken


def test_a_dry_run_held_by_its_mode_clears_a_dead_runs_leftovers_first() -> None:
    c = FakeCluster(one_freed_node())
    told, through = Told(), Through(c)
    cycle(MODE_PLAN, through.ports(), told)
    assert through.opened == ["clean up", "simulating"] and told.said[0] == "cleaned up"


def test_a_given_plan_is_carried_out_as_written_and_the_cluster_not_read_for_it() -> None:
    objects = one_freed_node()
    c = FakeCluster(objects)
    told = Told(wants_figures=False)
    ended = cycle(ACT, Through(c).ports(), told, plan=make_plan(objects))
    assert isinstance(ended, Carried) and ended.report is not None and ended.report.status == RunStatus.SUCCEEDED
    assert told.said == ["recovered", "given 3 moves", "carried out: succeeded"]


def test_a_cycle_stopped_at_a_safe_point_ends_stopped_in_its_plan_with_its_state_kept() -> None:
    c = FakeCluster(one_freed_node())
    stop = threading.Event()
    stop.set()  # the stop signal came before the run's first wait
    through = Through(c, clock=StoppableClock(c.clock, stop))
    told = Told()
    ended = cycle(ACT, through.ports(), told)
    assert isinstance(ended, Carried) and ended.report is None and ended.stopped and ended.stopped.startswith("plan-")
    assert "carried out: succeeded" not in " ".join(told.said)
    assert c.read_state("gpu-compactor-state") is not None  # the next run's recovery resumes or rolls it back


def test_a_plan_gone_stale_before_its_first_eviction_is_made_again_within_the_cycle() -> None:
    """Issue 42: while the cycle planned, a GPU pod bound on the node the plan frees. The run sees it behind its fences,
    evicts nothing, and the cycle plans again from the cluster as it is now (where a bare pod keeps gpu-3 busy: nothing
    left to do), instead of ending ``failed`` and counting the planned moves toward the circuit breaker."""
    c = FakeCluster(one_freed_node())
    told, through = Told(), Through(c)
    ports = through.ports()
    reads = 0

    def read_then_a_pod_binds() -> Snapshot:
        nonlocal reads
        reads += 1
        snapshot = loader(c)()
        if reads == 1:  # bound on gpu-3 just after the planner read the cluster
            c.add_pod(pod("newcomer", on="gpu-3", gpus=1, owner=None, labels={"app": "newcomer"}))
        return snapshot

    ended = cycle(ACT, replace(ports, read=read_then_a_pod_binds), told)
    assert isinstance(ended, Carried) and ended.report is not None
    report = ended.report
    assert told.said[:4] == ["recovered", "read", "planned 3 moves", "read"]  # planned again, from a fresh read
    assert len(report.replanned) == 1 and "default/newcomer" in report.replanned[0]
    assert report.status != RunStatus.FAILED and report.failed_pods == [], report.reason
    assert report.status == RunStatus.NOTHING_TO_DO and c.evicted == []
    assert "default/newcomer" in c.node_gpu_pods("gpu-3")
    assert_clean(c)


def test_with_fill_first_on_a_run_labels_the_nodes_in_use_by_tier_and_off_it_takes_the_labels_back() -> None:
    """Prevention (issue 42): after the run, the GPU nodes running GPU pods with GPUs free carry their fill-first tier,
    the whole-free ones none; once the setting is off, the next run removes the labels it finds."""
    c = FakeCluster(one_freed_node())
    on = SETTINGS_ALL.model_copy(update={"steering": SETTINGS_ALL.steering.amended(fill_first=True)})
    told, through = Told(), Through(c)
    cycle(ACT, replace(through.ports(), settings=on), told)
    labels = {name: (n["metadata"].get("labels") or {}).get(FILL_FIRST_LABEL) for name, n in c.nodes.items()}
    used = {name: len(c.node_gpu_pods(name)) and sum(_gpus(c, pod) for pod in c.node_gpu_pods(name)) for name in labels}
    expected = {name: None if gpus in (0, 8) else str(1 + gpus * 3 // 8) for name, gpus in used.items()}
    assert labels == expected and labels["gpu-3"] is None, used  # gpu-3 freed: whole, left unlabelled
    assert any(labels.values())
    patches = [call for call in writes(c, "patch_node") if FILL_FIRST_LABEL in str(call.args["patch"])]
    assert len(patches) == sum(1 for tier in labels.values() if tier)
    cycle(ACT, through.ports(), Told())  # the shipped default: off
    assert not [n for n in c.nodes.values() if FILL_FIRST_LABEL in (n["metadata"].get("labels") or {})]


def _gpus(c: FakeCluster, key: str) -> int:
    containers = c.pod(*key.split("/"))["spec"]["containers"]
    return sum(int((ct.get("resources") or {}).get("limits", {}).get("nvidia.com/gpu", 0)) for ct in containers)

"""The controller: one cycle against the fake cluster, the HTTP endpoints, leadership, shutdown, the command line.

``run_cycle`` reads its snapshot from the fake cluster's own objects (``build_snapshot`` over
its lists), so the planner's pod uids match what the executor finds.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry

from compactor.actions.executor import Executor
from compactor.actions.port.annotations import HELD_FOR
from compactor.actions.services.memory import HISTORY_CONFIGMAP, HISTORY_KEY
from compactor.app.tick import run_cycle
from compactor.cli import build_parser, main
from compactor.clock import Interrupted, StoppableClock
from compactor.controller.exporter import Exporter
from compactor.controller.http import parse_listen
from compactor.controller.loop import Controller, ControllerOptions
from compactor.errors import CompactorError
from compactor.kube.lease import LeaderElector
from compactor.model.types import Snapshot
from compactor.planner.rules.history import History
from compactor.settings.disruption import DisruptionSettings
from compactor.settings.disruption_windows import WindowSettings
from compactor.settings.steering import SteeringSettings
from tests.builders import A100_40, pod
from tests.fakeapi import FakeApiServer
from tests.fakecluster import FakeCluster
from tests.scenarios.controller import SETTINGS_ALL, http_get, loader, make_controller, sample, wait_for
from tests.scenarios.executor import PLANNER, assert_clean, intercept_evictions, make_plan, one_freed_node
from tests.scenarios.lease import NS, LeaseStore


def gpu_pods_on(c: FakeCluster, name: str) -> list[str]:
    return [k for k, p in c.pods.items() if p["spec"].get("nodeName") == name and "nvidia.com/gpu" in str(p["spec"])]


# --------------------------------------------------------------------------- run_cycle


def test_a_cycle_frees_a_node_and_exports_the_outcome() -> None:
    c = FakeCluster(one_freed_node())
    exporter = Exporter(CollectorRegistry())
    report = run_cycle(loader(c), c, SETTINGS_ALL, c.clock, exporter, execute=True)

    assert report.run is not None and (report.run.status, report.run.freed_nodes) == ("succeeded", ["gpu-3"])
    assert report.planned_moves == 3
    assert gpu_pods_on(c, "gpu-3") == []
    assert_clean(c)
    assert sample(exporter, "gpu_compactor_runs_total", status="succeeded") == 1
    assert sample(exporter, "gpu_compactor_runs_total", status="failed") == 0
    assert sample(exporter, "gpu_compactor_evictions_total") == 3
    assert (
        sample(exporter, "gpu_compactor_last_run_freed_gpus")
        == sample(exporter, "gpu_compactor_last_run_planned_freed_gpus")
        == 8
    )
    # the figures are those after the run: gpu-3 is whole free now, and nothing is left fenced
    assert sample(exporter, "gpu_compactor_whole_free_nodes", pool=A100_40) == 1
    assert sample(exporter, "gpu_compactor_fenced_nodes") == 0
    assert sample(exporter, "gpu_compactor_last_cycle_timestamp_seconds") == pytest.approx(c.clock.now().timestamp())


def test_a_cycle_whose_plan_went_stale_plans_again_and_counts_no_failure() -> None:
    """gpu-3 is to be freed, but a GPU pod the plan does not know lands on it between the snapshot and the run. The run
    sees it behind its fences and evicts nothing; the cycle plans again (nothing is left to do) and reports that run: no
    failed run, no rollback counted (issue 42: a busy cluster makes plans stale, that is no failure)."""
    c = FakeCluster(one_freed_node())
    snapshot_now = loader(c)
    newcomer = pod("newcomer", on="gpu-3", gpus=1, owner=None, labels={"app": "newcomer"})

    def snapshot_then_a_newcomer() -> Snapshot:
        snapshot = snapshot_now()
        if ("default", "newcomer") not in c.pods:
            c.add_pod(newcomer)
        return snapshot

    exporter = Exporter(CollectorRegistry())
    report = run_cycle(snapshot_then_a_newcomer, c, SETTINGS_ALL, c.clock, exporter, execute=True)

    assert report.run is not None and report.run.status == "nothing-to-do", report.run
    assert len(report.run.replanned) == 1 and "plan is stale" in report.run.replanned[0]
    assert report.run.to_dict()["replanned"] == report.run.replanned
    assert c.evicted == [] and c.cordoned_nodes() == []
    assert sample(exporter, "gpu_compactor_runs_total", status="failed") == 0
    assert sample(exporter, "gpu_compactor_rollbacks_total", reason="plan_stale") == 0


def test_a_cycle_with_holds_plans_around_a_pod_tolerating_every_taint_instead_of_refusing_it_at_its_eviction() -> None:
    objects = one_freed_node()
    tolerant = next(o for o in objects if o["kind"] == "Pod" and o["metadata"]["name"] == "serve-a")
    tolerant["spec"]["tolerations"] = [{"operator": "Exists"}]  # no fence keeps it, nor its replacement, off a node
    c = FakeCluster(objects)
    holds = SETTINGS_ALL.model_copy(update={"steering": SteeringSettings(mechanism="holds")})
    report = run_cycle(loader(c), c, holds, c.clock, Exporter(CollectorRegistry()), execute=True)
    assert report.planned_freed == [] and report.planned_moves == 0, "gpu-3 cannot be freed while serve-a stays on it"
    assert report.run is not None and report.run.status == "nothing-to-do" and c.evicted == []


def test_a_cycle_without_execute_only_reports() -> None:
    c = FakeCluster(one_freed_node())
    exporter = Exporter(CollectorRegistry())
    report = run_cycle(loader(c), c, SETTINGS_ALL, c.clock, exporter, execute=False)
    assert report.run is None and report.figures is not None
    assert c.history == []  # not one write
    assert sample(exporter, "gpu_compactor_whole_free_nodes", pool=A100_40) == 0
    assert sample(exporter, "gpu_compactor_runs_total", status="succeeded") == 0


def test_a_dry_run_cycle_changes_nothing_and_counts_no_eviction() -> None:
    c = FakeCluster(one_freed_node())
    exporter = Exporter(CollectorRegistry())
    report = run_cycle(loader(c), c, SETTINGS_ALL, c.clock, exporter, execute=True, dry_run=True)
    assert report.run is not None and report.run.dry_run and report.run.status == "succeeded"
    assert c.history == []
    # An alert on succeeded runs, or a dashboard of them, must not count a run that changed nothing.
    assert sample(exporter, "gpu_compactor_runs_total", status="succeeded") == 0
    assert sample(exporter, "gpu_compactor_runs_total", status="dry-run") == 1
    assert sample(exporter, "gpu_compactor_evictions_total") == 0


def test_a_cycle_exports_its_plan_solver_time_gap_and_moves_and_a_report_only_cycle_none() -> None:
    c = FakeCluster(one_freed_node())
    exporter = Exporter(CollectorRegistry())
    run_cycle(loader(c), c, SETTINGS_ALL, c.clock, exporter, execute=False)
    assert sample(exporter, "gpu_compactor_last_plan_seconds") is None  # no plan was built
    report = run_cycle(loader(c), c, SETTINGS_ALL, c.clock, exporter, execute=True)
    assert sample(exporter, "gpu_compactor_last_plan_moves") == report.planned_moves == 3
    seconds = sample(exporter, "gpu_compactor_last_plan_seconds")
    assert seconds is not None and 0 < seconds <= PLANNER.solver.time_limit_seconds
    assert sample(exporter, "gpu_compactor_last_plan_gap") == 0  # three nodes: the max-free solve is proven optimal


def test_an_interrupted_cycle_leaves_its_state_and_the_next_cycle_recovers_it() -> None:
    c = FakeCluster(one_freed_node())
    exporter = Exporter(CollectorRegistry())
    stop = threading.Event()
    sent: list[str] = []

    def first_eviction(namespace: str, name: str) -> None:  # SIGTERM arrives as the first eviction is sent
        if not sent:
            stop.set()
        sent.append(f"{namespace}/{name}")

    intercept_evictions(c, first_eviction)
    with pytest.raises(Interrupted):
        run_cycle(loader(c), c, SETTINGS_ALL, StoppableClock(c.clock, stop), exporter, execute=True)
    assert c.state, "the run's state must stay for recovery"
    # the nodes held while the replacement bound are released on the way out (a hold lasts a moment, never until the next run)
    assert not any(c.nodes[n]["metadata"].get("annotations", {}).get(HELD_FOR) for n in c.nodes)
    assert any(
        call.args["patch"]["metadata"]["annotations"].get(HELD_FOR) == sent[0]
        for call in c.history
        if call.method == "patch_node"
    )
    assert c.cordoned_nodes() == ["gpu-3"]
    assert len(c.evicted) == 1  # the step in progress finished, nothing after it

    stop.clear()
    c.advance(30)
    report = run_cycle(loader(c), c, SETTINGS_ALL, StoppableClock(c.clock, stop), exporter, execute=True)
    assert report.recovery is not None and report.recovery.resumed is not None
    assert report.recovery.resumed.status == "succeeded"
    assert gpu_pods_on(c, "gpu-3") == []
    assert_clean(c)


def _interrupted(c: FakeCluster) -> None:
    """A cycle stopped as its first eviction is sent: its fence and state stay for the next cycle."""
    stop = threading.Event()
    intercept_evictions(c, lambda namespace, name: stop.set())
    with pytest.raises(Interrupted):
        run_cycle(
            loader(c), c, SETTINGS_ALL, StoppableClock(c.clock, stop), Exporter(CollectorRegistry()), execute=True
        )
    assert c.state and c.cordoned_nodes() == ["gpu-3"]


@pytest.mark.parametrize("options", [{"report_only": True}, {"dry_run": True}], ids=["mode-report", "mode-plan"])
def test_a_leader_that_may_not_act_rolls_a_dead_cycle_back_instead_of_resuming_it(options: dict[str, bool]) -> None:
    """Issue 18, item 1: mode report or plan (the controller's dry run) still clears what a dead cycle left."""
    c = FakeCluster(one_freed_node())
    _interrupted(c)
    c.advance(30)
    controller = make_controller(c, **options)
    report = controller.tick()
    controller.server.stop()
    assert report is not None and report.recovery is not None and report.recovery.resumed is not None
    assert report.recovery.resumed.status == "failed" and report.recovery.resumed.reason == "resume disabled"
    assert not c.state and c.cordoned_nodes() == []
    assert len(c.evicted) == 1  # nothing moved after the dead cycle's one eviction


def test_an_operators_dry_run_controller_clears_nothing() -> None:
    c = FakeCluster(one_freed_node())
    _interrupted(c)
    controller = make_controller(c, dry_run=True, clean_up=False)
    report = controller.tick()
    controller.server.stop()
    assert report is not None and report.recovery is None
    assert c.state and c.cordoned_nodes() == ["gpu-3"]


def test_a_stop_between_moves_is_honoured_before_the_next_eviction_even_without_a_wait() -> None:
    # on a fast cluster the replacement is Ready at the first look: no wait comes between two evictions, yet a
    # SIGTERM received meanwhile must stop the run before it evicts again (CI once saw a run finish after SIGTERM)
    objects = one_freed_node()
    c = FakeCluster(objects)
    stop = threading.Event()
    executor = Executor(
        c,
        SETTINGS_ALL.for_executor,
        StoppableClock(c.clock, stop),
        progress=lambda p: stop.set() if p.done == 1 else None,
    )
    with pytest.raises(Interrupted):
        executor.execute(make_plan(objects))
    assert len(c.evicted) == 1
    assert c.state, "the run's state must stay for recovery"


# --------------------------------------------------------------------------- the loop and its HTTP server


def test_the_loop_runs_a_cycle_and_serves_metrics_and_health_over_http() -> None:
    c = FakeCluster(one_freed_node())
    controller = make_controller(c)
    port = controller.server.port
    assert port != 0
    assert not controller.healthy()
    controller.start()
    try:
        wait_for(lambda: controller.cycles >= 1)
        status, body = http_get(port, "/metrics")
        assert status == 200
        assert 'gpu_compactor_runs_total{status="succeeded"} 1.0' in body
        assert f'gpu_compactor_whole_free_nodes{{pool="{A100_40}"}} 1.0' in body
        assert "gpu_compactor_leader 1.0" in body  # no leader election: always acts
        assert http_get(port, "/healthz") == (200, "ok\n")
        assert http_get(port, "/readyz") == (200, "ok\n")
        assert http_get(port, "/nope")[0] == 404
    finally:
        controller.stop()
    assert not controller.healthy()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2)
    assert not [t for t in threading.enumerate() if t.name == "compactor-http"]


def test_report_only_exports_figures_and_never_writes() -> None:
    c = FakeCluster(one_freed_node())
    controller = make_controller(c, report_only=True)
    report = controller.tick()
    assert report is not None and report.run is None and report.figures is not None
    assert c.history == []
    controller.server.stop()


def test_a_cycle_error_is_counted_and_the_loop_survives() -> None:
    c = FakeCluster(one_freed_node())
    c.fail_next("list_nodes", 503)
    controller = make_controller(c, report_only=True)
    assert controller.tick() is None
    assert sample(controller.exporter, "gpu_compactor_cycle_errors_total") == 1
    assert controller.tick() is not None
    controller.server.stop()


def test_only_the_leader_executes(fake_api: FakeApiServer) -> None:
    LeaseStore(fake_api)
    other = LeaderElector(fake_api.api_client(), NS, "pod-other")
    assert other.try_acquire_or_renew(datetime.now(UTC))  # a fresh lease held by another replica
    c = FakeCluster(one_freed_node())
    controller = make_controller(c, elector=LeaderElector(fake_api.api_client(), NS, "pod-ours"))
    try:
        report = controller.tick()
        assert report is not None and report.run is None and report.figures is not None  # figures, no run
        assert c.history == []
        assert sample(controller.exporter, "gpu_compactor_leader") == 0
        assert other.release(datetime.now(UTC))
        report = controller.tick()
        assert report is not None and report.run is not None and report.run.status == "succeeded"
        assert sample(controller.exporter, "gpu_compactor_leader") == 1
    finally:
        controller.server.stop()


def test_a_standby_whose_cycle_runs_while_another_leads_says_nothing_of_lost_leadership(
    fake_api: FakeApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 45: the standby logged "lost leadership during a cycle" every interval though it never led. Only a cycle
    begun as leader is stopped (and said) when the Lease goes."""
    LeaseStore(fake_api)
    other = LeaderElector(fake_api.api_client(), NS, "pod-other")
    assert other.try_acquire_or_renew(datetime.now(UTC))
    controller = make_controller(
        FakeCluster(one_freed_node()), elector=LeaderElector(fake_api.api_client(), NS, "pod-ours")
    )
    try:
        with caplog.at_level(logging.WARNING):
            assert controller.tick() is not None  # a standby's cycle: figures only
            controller._cycle_running.set()  # the lease job's round while the standby's next cycle runs
            controller._lead()
            assert not controller._interrupt.is_set()
            controller._cycle_as_leader = True  # the same round during a cycle begun as leader: stopped, and said
            controller._lead()
            assert controller._interrupt.is_set()
        assert caplog.text.count("lost leadership during a cycle") == 1
    finally:
        controller._cycle_running.clear()
        controller.server.stop()


def test_sigterm_stops_the_loop_cleanly() -> None:
    c = FakeCluster(one_freed_node())
    controller = make_controller(c, report_only=True)

    def terminate_after_first_cycle() -> None:
        wait_for(lambda: controller.cycles >= 1)
        os.kill(os.getpid(), signal.SIGTERM)

    killer = threading.Thread(target=terminate_after_first_cycle, daemon=True)
    before = signal.getsignal(signal.SIGTERM)
    killer.start()
    assert controller.run_forever() == 0
    killer.join(timeout=5)
    assert signal.getsignal(signal.SIGTERM) == before  # handlers restored
    assert not controller.healthy()


# --------------------------------------------------------------------------- command line


def test_controller_help_parses(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["controller", "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    for flag in (
        "--interval",
        "--listen",
        "--dry-run",
        "--no-leader-election",
        "--report-only",
        "--in-cluster",
        "--config",
    ):
        assert flag in out


def test_controller_arguments_and_defaults() -> None:
    args = build_parser().parse_args(["controller", "--in-cluster", "--config", "x.yaml", "--log-format", "json"])
    assert (args.command, args.in_cluster, args.config, args.interval, args.listen) == (
        "controller",
        True,
        "x.yaml",
        600.0,
        ":8080",
    )
    assert (args.dry_run, args.no_leader_election, args.report_only) == (False, False, False)
    assert (args.pending_after, args.pending_gap) == (60.0, 300.0)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["controller", "--interval", "0"], "--interval must be > 0"),
        (["controller", "--pending-after", "-1"], "--pending-after must be 0 (off) or at least 5 s"),
        # issue 43, item 10: --pending-after 0.01 made 76 lists of the pending pods a second
        (["controller", "--pending-after", "0.01"], "--pending-after must be 0 (off) or at least 5 s"),
        (["controller", "--pending-gap", "0"], "--pending-gap must be at least 10 s, got 0"),
        (["controller", "--listen", "8080"], "expected [HOST]:PORT"),
        (["controller", "--listen", ":http"], "is not a number"),
    ],
)
def test_bad_controller_options_are_one_line_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_parse_listen() -> None:
    assert parse_listen(":8080") == ("", 8080)
    assert parse_listen("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_listen("[::1]:9090") == ("::1", 9090)
    with pytest.raises(CompactorError):
        parse_listen(":70000")


@pytest.mark.parametrize(
    ("mode", "flags", "outcome", "pending_trigger"),
    [
        ("apply", [], "succeeded", True),
        ("plan", [], "dry-run", True),
        ("report", [], None, False),
        ("apply", ["--dry-run"], "dry-run", True),
        ("plan", ["--report-only"], None, False),
        ("report", ["--dry-run"], "dry-run", False),  # an operator's dry run always runs, changing nothing
    ],
)
def test_the_configured_mode_only_ever_makes_the_controller_safer(
    mode: str, flags: list[str], outcome: str | None, pending_trigger: bool
) -> None:
    """The mode is read by the gate alone, each cycle (``app.policy.admit``); the controller passes its flags on."""
    from compactor.commands.controller import controller_options

    c = FakeCluster(one_freed_node())
    args = build_parser().parse_args(["controller", "--in-cluster", "--listen", "127.0.0.1:0", *flags])
    controller = Controller(
        load_snapshot=loader(c),
        client=c,
        settings=SETTINGS_ALL.model_copy(update={"mode": mode}),
        exporter=Exporter(CollectorRegistry()),
        options=controller_options(args),
        clock=c.clock,
    )
    try:
        report = controller.tick()
    finally:
        controller.server.stop()
    assert report is not None and report.figures is not None
    assert (report.run.shown_status if report.run else None) == outcome
    assert bool(c.history) is (outcome == "succeeded")  # nothing evicted but by a run that may act
    assert (controller.pending is not None) is pending_trigger


def test_outside_every_disruption_window_a_cycle_measures_and_changes_nothing() -> None:
    c = FakeCluster(one_freed_node())
    # one minute a year (15 June)
    closed = SETTINGS_ALL.model_copy(
        update={
            "disruption": DisruptionSettings(
                windows=[WindowSettings(schedule="0 12 15 6 *", duration_minutes=1, timezone="UTC")]
            )
        }
    )
    controller = Controller(
        load_snapshot=loader(c),
        client=c,
        settings=closed,
        exporter=Exporter(CollectorRegistry()),
        options=ControllerOptions(interval=3600, listen="127.0.0.1:0"),
        clock=c.clock,
    )
    try:
        report = controller.tick()
        assert report is not None and report.run is None and report.figures is not None
        assert c.history == []
    finally:
        controller.server.stop()


def test_while_the_circuit_breaker_holds_a_cycle_measures_exports_the_pause_and_changes_nothing() -> None:
    c = FakeCluster(one_freed_node())
    until = c.clock.now() + timedelta(minutes=30)
    c.state[HISTORY_CONFIGMAP] = {
        HISTORY_KEY: History(paused_until=until, pause_reason="5 of the last 10 moves failed").to_json()
    }
    controller = make_controller(c)
    try:
        report = controller.tick()
        assert report is not None and report.run is None and report.figures is not None
        assert [call for call in c.history if call.name != "read_state"] == []
        assert sample(controller.exporter, "gpu_compactor_paused_until_timestamp_seconds") == until.timestamp()
    finally:
        controller.server.stop()

"""The re-cut step (``compactor/actions/steps/mig_recut.py``): the executor drives mig-manager: drain, relabel
``nvidia.com/mig.config``, wait for ``success`` and the new slices, then place the pending pods the node was cut for; on
``failed`` or a timeout the node stays cordoned for an operator (``actions/services/recut_failure.py``), never retried. Also a
re-cut in a dry run, resumed after a crash, interrupted by a rollback, and a node mid re-cut whose run state was lost.

The fake cluster plays mig-manager (``FakeMigManager``): ``pending`` at once, ``success`` or ``failed`` after a while,
the device plugin re-advertising the new layout (possibly late), or stuck in ``pending``.
"""

from __future__ import annotations

from typing import Any

import pytest

from compactor.actions.executor import Executor
from compactor.actions.port import annotations as ann
from compactor.actions.recovery import recover
from compactor.actions.services.report import RunReport
from compactor.app.plan_document import build_plan
from compactor.model.migparted import parse_mig_parted
from compactor.planner.plan import CompactionPlan
from compactor.planner.request import PlanRequest
from compactor.settings.bundles import PlannerSettings, RunSettings
from tests.builders import A100_80, cluster, node, pod
from tests.fakecluster import EPOCH, Crash, FakeCluster, FakeMigManager
from tests.scenarios.executor import assert_clean, marks, on_progress

FILTER = '["0x20B210DE"]'
LAYOUTS = "version: v1\nmig-configs:\n" + "".join(
    f"  {name}:\n    - device-filter: {FILTER}\n      devices: all\n      mig-enabled: true\n      mig-devices: {{{body}}}\n"
    for name, body in (("all-1g.10gb", '"1g.10gb": 7'), ("all-3g.40gb", '"3g.40gb": 2'))
)
CUT = {"all-1g.10gb": {"nvidia.com/mig-1g.10gb": 14}, "all-3g.40gb": {"nvidia.com/mig-3g.40gb": 4}}
SETTINGS = RunSettings.of(
    poll_seconds=1, replacement_timeout_seconds=60, reconfigure_timeout_seconds=120, steer_timeout_seconds=30
)

RULES = PlannerSettings.of(
    min_replicas=1
)  # single replicas on purpose: the replica guard is tested in test_nothing_lost


def sliced(name: str) -> dict[str, Any]:
    return node(
        name,
        mig={"1g.10gb": 14},
        physical_gpus=2,
        product=A100_80,
        labels={
            "nvidia.com/mig.config": "all-1g.10gb",
            "nvidia.com/mig.config.state": "success",
            "nvidia.com/mig.capable": "true",
        },
    )


def objects() -> list[dict[str, Any]]:
    """b runs one movable 1g.10gb pod that a can take; two 3g.40gb pods wait, which only a re-cut b can host."""
    return [
        sliced("a"),
        sliced("b"),
        pod("small-a", on="a", mig="1g.10gb", owner=None),
        pod("small-b", on="b", mig="1g.10gb", owner="ReplicaSet/small"),
        pod("wait-0", mig="3g.40gb", owner=None),
        pod("wait-1", mig="3g.40gb", owner=None),
    ]


def recut_plan(objects_: list[dict[str, Any]]) -> CompactionPlan:
    """The planner's plan for these objects (the same dicts as the fake cluster's, so the uids match)."""
    settings = PlannerSettings.of(min_replicas=1, time_limit_seconds=5, workers=2, repartition=True)
    plan = build_plan(
        PlanRequest.of(
            cluster(*objects_),
            settings,
            source="test",
            now=EPOCH,
            plan_id="plan-recut",
            mig_parted=parse_mig_parted(LAYOUTS, source="gpu-operator/default-mig-parted-config"),
        )
    )
    assert [(r.node, r.to_config) for r in plan.mig_repartition] == [("b", "all-3g.40gb")]
    assert [(m.pod, m.to_node) for m in plan.moves] == [("default/small-b", "a")]
    return plan


def run(manager: FakeMigManager) -> tuple[FakeCluster, RunReport]:
    world = objects()
    c = FakeCluster(world)
    c.mig_manager = manager
    return c, Executor(c, SETTINGS, c.clock, rules=RULES).execute(recut_plan(world))


def bound(c: FakeCluster, name: str) -> str:
    return str(c.pods["default", name]["spec"].get("nodeName") or "")


def test_a_drained_node_is_re_cut_and_the_pending_pods_run_there() -> None:
    manager = FakeMigManager(CUT, takes=40)
    c, report = run(manager)
    assert report.status == "succeeded", report.reason
    assert report.recuts == {"b": "success"} and manager.reconfigured == [("b", "all-3g.40gb")]
    b = c.nodes["b"]
    assert b["metadata"]["labels"]["nvidia.com/mig.config"] == "all-3g.40gb"
    assert b["status"]["allocatable"]["nvidia.com/mig-3g.40gb"] == "4"
    assert (bound(c, "wait-0"), bound(c, "wait-1")) == ("b", "b")
    assert [e["reason"] for e in c.events if e["involved"].name == "b"].count("CompactorMigRecut") == 1
    # the label was changed only once the node ran no GPU pod, and while it was cordoned by us
    relabel = next(
        call for call in c.history if call.method == "patch_node" and "labels" in call.args["patch"].get("metadata", {})
    )
    assert relabel.args["name"] == "b"
    assert_clean(c)


def test_allocatable_catching_up_late_is_waited_for() -> None:
    c, report = run(FakeMigManager(CUT, takes=20, allocatable_lag=30))
    assert report.status == "succeeded", report.reason
    assert (bound(c, "wait-0"), bound(c, "wait-1")) == ("b", "b")


def test_a_failed_re_cut_leaves_the_node_cordoned_with_a_warning_and_no_retry() -> None:
    manager = FakeMigManager(CUT, takes=20, outcome="failed")
    c, report = run(manager)
    assert report.status == "partial" and report.recuts == {"b": "failed"}
    assert c.is_fenced("b")
    assert "mig-manager reports failed" in marks(c, "b")[ann.MIG_RECUT_FAILED]
    assert any(e["reason"] == "CompactorMigRecutFailed" and e["type"] == "Warning" for e in c.events)
    assert (bound(c, "wait-0"), bound(c, "wait-1")) == ("", "")
    relabels = [
        call for call in c.history if call.method == "patch_node" and "labels" in call.args["patch"].get("metadata", {})
    ]
    assert len(relabels) == 1  # never retried
    assert "re-cut of b to all-3g.40gb failed" in report.reason
    # the layout it replaced is recorded, and the report says how to restore it (the compactor never re-cuts a failed node)
    assert marks(c, "b")[ann.MIG_PREVIOUS] == "all-1g.10gb"
    assert "kubectl label node b nvidia.com/mig.config=all-1g.10gb --overwrite restores it" in report.reason


def test_mig_manager_stuck_in_pending_times_out() -> None:
    c, report = run(FakeMigManager(CUT, takes=20, outcome="stuck"))
    assert report.recuts == {"b": "timeout"} and report.status == "partial"
    assert c.is_fenced("b")
    assert "not done within 120s (state pending)" in marks(c, "b")[ann.MIG_RECUT_FAILED]


def test_a_dry_run_simulates_mig_manager_and_changes_nothing() -> None:
    from compactor.actions.dryrun import RecordingClient
    from compactor.clock import SimulatedClock

    world = objects()
    c, plan = FakeCluster(world), recut_plan(world)
    recording = RecordingClient([*c.list_nodes(), *c.list_pods(), *c.list_pdbs()], plan)
    report = Executor(recording, SETTINGS, SimulatedClock(EPOCH), dry_run=True, rules=RULES).execute(plan)
    assert report.status == "succeeded" and report.recuts == {"b": "success"}, report.reason
    assert c.nodes["b"]["metadata"]["labels"]["nvidia.com/mig.config"] == "all-1g.10gb"
    assert any(call.method == "patch_node" and call.args["patch"]["metadata"].get("labels") for call in recording.calls)


def test_a_crash_while_mig_manager_works_is_resumed_and_the_label_written_once() -> None:
    from compactor.actions.recovery import recover
    from tests.fakecluster import Crash

    # Where the relabel falls among the run's writes, from an identical run without the crash.
    clean, _ = run(FakeMigManager(CUT, takes=40))
    writes = list(clean.history)
    k = next(
        i
        for i, call in enumerate(writes, 1)
        if call.method == "patch_node" and call.args["patch"]["metadata"].get("labels")
    )
    world = objects()
    c = FakeCluster(world)
    manager = FakeMigManager(CUT, takes=40)
    c.mig_manager = manager
    c.crash_after(k, when="after")
    plan = recut_plan(world)
    try:
        Executor(c, SETTINGS, c.clock, rules=RULES).execute(plan)
    except Crash:
        pass
    else:
        raise AssertionError("the run did not crash at the relabel")
    # mid-reconfigure, state kept
    assert c.nodes["b"]["metadata"]["labels"]["nvidia.com/mig.config"] == "all-3g.40gb" and c.state
    c.advance(10)  # the process restarts while mig-manager is still at it
    recovered = recover(c, SETTINGS, c.clock)
    assert recovered.resumed is not None and recovered.resumed.status == "succeeded", recovered.resumed
    relabels = [
        call for call in c.history if call.method == "patch_node" and call.args["patch"]["metadata"].get("labels")
    ]
    assert len(relabels) == 1 and manager.reconfigured == [("b", "all-3g.40gb")]
    assert (bound(c, "wait-0"), bound(c, "wait-1")) == ("b", "b")
    assert_clean(c)


def test_a_rollback_while_mig_manager_works_leaves_the_node_cordoned_not_released() -> None:
    world = objects()
    c = FakeCluster(world)
    c.mig_manager = FakeMigManager(CUT, takes=60)
    hook = on_progress(lambda p: p.current == "re-cutting b", lambda: c.fail_next("get_node", 403))
    report = Executor(c, SETTINGS, c.clock, progress=hook, rules=RULES).execute(recut_plan(world))
    assert report.status == "failed", report.reason
    b = c.nodes["b"]
    assert c.is_fenced("b") and b["metadata"]["labels"]["nvidia.com/mig.config"] == "all-3g.40gb"
    assert "rolled back while mig-manager was at it" in marks(c, "b")[ann.MIG_RECUT_FAILED]
    assert c.state == {}
    assert not c.is_fenced("a")  # everything else is released as usual


def idle_in_the_wrong_sizes() -> tuple[list[dict[str, Any]], CompactionPlan]:
    """An idle node cut all-3g.40gb beside pinned 1g.10gb pods, and the plan that re-cuts it (mig_rebalance_min_gain)."""
    idle = node(
        "idle",
        mig={"3g.40gb": 2},
        physical_gpus=1,
        product=A100_80,
        labels={
            "nvidia.com/mig.config": "all-3g.40gb",
            "nvidia.com/mig.config.state": "success",
            "nvidia.com/mig.capable": "true",
        },
    )
    world = [sliced("a"), idle, *[pod(f"small-{i}", on="a", mig="1g.10gb", owner=None) for i in range(4)]]
    settings = PlannerSettings.of(
        min_replicas=1, time_limit_seconds=5, workers=2, repartition=True, rebalance_min_gain=0.25
    )
    return world, build_plan(
        PlanRequest.of(
            cluster(*world), settings, source="test", now=EPOCH, mig_parted=parse_mig_parted(LAYOUTS, source="x/y")
        )
    )


def test_an_idle_node_re_cut_for_the_workload_alone_is_relabelled_and_released() -> None:
    world, plan = idle_in_the_wrong_sizes()
    assert [(r.node, r.to_config) for r in plan.mig_repartition] == [("idle", "all-1g.10gb")] and not plan.moves
    c = FakeCluster(world)
    c.mig_manager = FakeMigManager({**CUT, "all-1g.10gb": {"nvidia.com/mig-1g.10gb": 7}}, takes=10)
    report = Executor(c, SETTINGS, c.clock, rules=RULES).execute(plan)
    assert report.status == "succeeded" and report.recuts == {"idle": "success"}, report.reason
    assert c.nodes["idle"]["status"]["allocatable"] == {
        **{k: v for k, v in c.nodes["idle"]["status"]["allocatable"].items() if not k.startswith("nvidia.com/")},
        "nvidia.com/mig-1g.10gb": "7",
    }
    assert_clean(c)


def test_a_failed_re_cut_with_no_pending_pod_still_makes_the_run_partial() -> None:
    world, plan = idle_in_the_wrong_sizes()
    c = FakeCluster(world)
    c.mig_manager = FakeMigManager(CUT, takes=10, outcome="failed")
    report = Executor(c, SETTINGS, c.clock, rules=RULES).execute(plan)
    assert (report.status, report.recuts) == ("partial", {"idle": "failed"}), report.reason
    assert "re-cut of idle to all-1g.10gb failed" in report.reason


@pytest.mark.parametrize("finished", [False, True], ids=["mig-manager-still-at-it", "re-cut-done"])
def test_a_node_mid_re_cut_whose_run_state_was_lost_stays_fenced_until_mig_manager_is_done(finished: bool) -> None:
    world = objects()
    c = FakeCluster(world)
    c.mig_manager = FakeMigManager(CUT, takes=60)

    def die() -> None:  # the process dies while mig-manager works (an OOM kill, a node drain of the compactor itself)
        raise Crash("sleep", "before")

    stop = on_progress(lambda p: p.current == "re-cutting b", die)
    with pytest.raises(Crash):
        Executor(c, SETTINGS, c.clock, progress=stop, rules=RULES).execute(recut_plan(world))
    assert c.is_fenced("b") and c.nodes["b"]["metadata"]["labels"]["nvidia.com/mig.config"] == "all-3g.40gb"
    c.state = {
        ann.STATE_CONFIGMAP: {"plan": "not a plan any version wrote"}
    }  # lost: recovery can only read the node's marks
    if finished:
        c.advance(120)  # mig-manager reports success and the new slices are advertised
    recovered = recover(c, SETTINGS, c.clock)
    assert recovered.discarded
    if finished:
        assert "b" in recovered.released and not c.is_fenced("b")
    else:
        assert "b" in recovered.kept and c.is_fenced("b")
        assert "left fenced for an operator" in marks(c, "b")[ann.MIG_RECUT_FAILED]
        assert "nvidia.com/mig.config=all-1g.10gb --overwrite restores it" in marks(c, "b")[ann.MIG_RECUT_FAILED]


def test_the_nodes_of_one_plan_are_re_cut_side_by_side_and_each_pending_pod_lands_where_planned() -> None:
    """Two whole-free nodes, eight pending 3g.40gb pods of one Job (four fit a re-cut node), planned alternately onto
    the two nodes: both nodes are relabelled before mig-manager finishes either, so the run takes one reconfiguration's
    time (60 s), not two; and each pod lands on its planned node (a node opened after its first pod would take
    whichever pending pods the scheduler picks next, and a pod planned there later would find no room)."""
    world = [sliced("a"), sliced("b"), *[pod(f"wait-{i}", mig="3g.40gb", owner="Job/w") for i in range(8)]]
    settings = PlannerSettings.of(min_replicas=1, time_limit_seconds=5, workers=2, repartition=True)
    planned = build_plan(
        PlanRequest.of(
            cluster(*world), settings, source="test", now=EPOCH, mig_parted=parse_mig_parted(LAYOUTS, source="x/y")
        )
    )
    assert sorted(r.node for r in planned.mig_repartition) == ["a", "b"] and not planned.moves
    alternate = [p.model_copy(update={"to_node": "ab"[i % 2]}) for i, p in enumerate(planned.placed_pending)]
    plan = planned.model_copy(update={"placed_pending": alternate})
    c = FakeCluster(world)
    c.mig_manager = FakeMigManager(CUT, takes=60)
    report = Executor(c, SETTINGS, c.clock, rules=RULES).execute(plan)
    assert report.status == "succeeded" and report.recuts == {"a": "success", "b": "success"}, report.reason
    relabelled = [
        call.time
        for call in c.history
        if call.method == "patch_node" and "labels" in call.args["patch"].get("metadata", {})
    ]
    assert len(relabelled) == 2 and max(relabelled) - min(relabelled) < 60
    assert c.time < 2 * 60 + 30  # one reconfiguration (60 s), the eight binds: not two reconfigurations
    name = {p.pod: p.pod.split("/")[1] for p in alternate}
    assert {name[p.pod]: bound(c, name[p.pod]) for p in alternate} == {name[p.pod]: p.to_node for p in alternate}
    assert not [n for n in report.outcome.notes if "pending pod" in n], report.outcome.notes
    assert_clean(c)

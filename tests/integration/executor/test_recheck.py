"""Every eviction re-checks the planned pod against the planner's rules, as the cluster is now (issue [12], finding 1).

A plan is a snapshot's answer; between it and each eviction an owner may opt a pod out, a node may go NotReady, a
workload may shrink. A pod that no longer passes is never evicted: its move is refused with the reason, so are the
moves that depended on it, and the run says ``partial``.
"""

from __future__ import annotations

import pytest

from compactor.actions.executor import Executor
from compactor.actions.port.client import Obj
from compactor.actions.recovery import recover
from compactor.planner.plan import CompactionPlan
from compactor.planner.rules.movability import SAFE_TO_EVICT_ANNOTATION, Unmovable
from compactor.settings.bundles import PlannerSettings
from tests.builders import job, node, pdb, pod
from tests.fakecluster import Crash, FakeCluster
from tests.scenarios.executor import (
    SETTINGS,
    assert_clean,
    evict_calls,
    hand_plan,
    intercept_evictions,
    rs,
    run,
    setup,
)

GPU_2 = ["default/serve-a", "default/train-a"]  # the plan's moves off gpu-2, made first
GPU_3 = ["default/serve-b", "default/train-b"]


def evicted_names(c: FakeCluster) -> list[str]:
    return [f"{call.args['namespace']}/{call.args['name']}" for call in evict_calls(c)]


def test_a_pod_opted_out_after_planning_is_not_evicted_and_neither_is_the_rest_of_its_node() -> None:
    c, plan = setup()
    assert [m.pod for m in plan.moves] == [*GPU_2, *GPU_3]
    c.pod("default", "serve-a")["metadata"]["annotations"] = {SAFE_TO_EVICT_ANNOTATION: "false"}  # the owner opts out
    report = run(c, plan)
    assert report.status == "partial" and Unmovable.OPTED_OUT.value in report.reason, report.reason
    assert not set(GPU_2) & set(evicted_names(c))  # gpu-2 stays as it is
    assert sorted(c.evicted) == GPU_3 and report.freed_nodes == ["gpu-3"]
    assert report.skipped_moves == ["default/serve-a"] and sorted(
        report.outcome.notes if report.outcome else []
    ) == sorted(
        [
            "not moved default/serve-a: opted out (compactor.io/evict or safe-to-evict = false)",
            "not moved default/train-a: depends on the move of default/serve-a, refused: opted out (compactor.io/evict or "
            "safe-to-evict = false)",
        ]
    )
    assert_clean(c)


def test_a_pod_opted_out_while_the_run_is_under_way_is_not_evicted() -> None:
    c, plan = setup()

    def opt_out_serve_b(_namespace: str, name: str) -> None:  # as gpu-2's last eviction goes out
        if name == "train-a":
            c.pod("default", "serve-b")["metadata"]["annotations"] = {"compactor.io/evict": "false"}

    intercept_evictions(c, opt_out_serve_b)
    report = run(c, plan)
    assert evicted_names(c) == GPU_2 and sorted(c.evicted) == GPU_2  # serve-b kept, so train-b had no node to free
    assert report.status == "partial" and report.freed_nodes == ["gpu-2"]
    assert_clean(c)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda p: p["metadata"]["ownerReferences"][0].update(kind="DaemonSet"), Unmovable.DAEMONSET.value),
        (
            lambda p: p["metadata"]["ownerReferences"][0].update(kind="Job"),
            "its controller does not recreate evicted pods",
        ),
        (
            lambda p: p["metadata"].setdefault("annotations", {}).update({"kubernetes.io/config.mirror": "x"}),
            Unmovable.MIRROR.value,
        ),
        (lambda p: p["spec"].update(priorityClassName="system-node-critical"), Unmovable.SYSTEM_CRITICAL.value),
        (lambda p: p["spec"].update(volumes=[{"name": "scratch", "emptyDir": {}}]), "uses emptyDir/hostPath storage"),
        (
            lambda p: p["metadata"].setdefault("annotations", {}).update({"karpenter.sh/do-not-disrupt": "true"}),
            Unmovable.DO_NOT_DISRUPT.value,
        ),
        (
            lambda p: (
                p["metadata"]
                .setdefault("annotations", {})
                .update({"descheduler.alpha.kubernetes.io/prefer-no-eviction": "true"})
            ),
            Unmovable.DO_NOT_DISRUPT.value,
        ),
    ],
    ids=[
        "daemonset",
        "job",
        "mirror",
        "system-critical",
        "empty-dir",
        "karpenter-do-not-disrupt",
        "descheduler-opt-out",
    ],
)
def test_a_pod_changed_since_planning_into_one_the_rules_keep_is_never_evicted(change: object, why: str) -> None:
    c, plan = setup()
    change(c.pod("default", "serve-b"))  # type: ignore[operator]  # the first move off gpu-3
    report = run(c, plan)
    assert not set(GPU_3) & set(evicted_names(c))
    assert f"not moved default/serve-b: {why}" in report.reason, report.reason
    assert sorted(c.evicted) == GPU_2


def test_a_source_node_gone_not_ready_since_planning_keeps_its_pods() -> None:
    c, plan = setup()
    conditions = c.nodes["gpu-3"]["status"]["conditions"]
    conditions[:] = [{"type": "Ready", "status": "Unknown"}]  # the kubelet stopped reporting
    report = run(c, plan)
    assert not set(GPU_3) & set(evicted_names(c)) and "gpu-3 is not Ready" in report.reason
    assert report.status == "partial" and report.freed_nodes == ["gpu-2"]


def test_a_target_an_operator_cordoned_since_planning_receives_nothing() -> None:
    c, plan = setup()
    c.nodes["gpu-1"]["spec"]["unschedulable"] = True  # every move goes to gpu-1
    report = run(c, plan)
    assert evict_calls(c) == [] and report.status == "partial"
    assert "its planned node gpu-1 was cordoned" in report.reason
    assert c.operator_cordons() == ["gpu-1"]
    assert_clean(c, still_cordoned=("gpu-1",))


@pytest.mark.parametrize(
    "taint",
    [
        {"key": "ToBeDeletedByClusterAutoscaler", "value": "1733000000", "effect": "NoSchedule"},
        {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu.unhealthy", "value": "true", "effect": "NoExecute"},
        # issue 43, item 7: another gpu-compactor installation's fence is not this one's to ignore
        {"key": "compactor.io/fence-other-team", "value": "plan-0123456789ab", "effect": "NoSchedule"},
    ],
    ids=["cluster-autoscaler", "karpenter", "gpu-health", "another-installation"],
)
def test_a_target_tainted_since_planning_receives_nothing(taint: dict[str, str]) -> None:
    """Issue 18: a taint another controller put on the planned node since the plan refuses every move onto it (a
    replacement steered there would stay Pending, or be evicted again)."""
    c, plan = setup()
    c.nodes["gpu-1"]["spec"]["taints"] = [taint]  # every move goes to gpu-1
    report = run(c, plan)
    assert evict_calls(c) == [] and report.status == "partial"
    assert (
        f"its planned node gpu-1 has the taint {taint['key']}:{taint['effect']} the pod does not tolerate"
        in report.reason
    )
    assert_clean(c, still_cordoned=("gpu-1",) if taint["key"].startswith("compactor.io/fence-") else ())


def lone_replica() -> list[object]:
    """gpu-2 runs the only replica of ``serve`` (no PDB) and one of ``train`` (two replicas, PDB)."""
    return [
        node("gpu-1", gpus=8),
        node("gpu-2", gpus=8),
        pod("pinned", on="gpu-1", gpus=4, owner=None),
        rs("serve-a", "gpu-2", "serve"),
        rs("train-a", "gpu-2", "train"),
        rs("train-b", "gpu-1", "train"),
        pdb("train", match={"app": "train"}, max_unavailable=1),
    ]


def test_the_only_ready_replica_without_a_budget_is_not_moved_by_the_planner_nor_the_executor() -> None:
    c = FakeCluster(lone_replica())  # type: ignore[arg-type]
    plan = hand_plan(
        [
            ("default/serve-a", "gpu-2", "gpu-1", "ReplicaSet/serve"),
            ("default/train-a", "gpu-2", "gpu-1", "ReplicaSet/train"),
        ],
        freed=["gpu-2"],
        c=c,
    )
    report = Executor(c, SETTINGS, c.clock, rules=PlannerSettings.of()).execute(plan)  # min_replicas 2 by default
    assert evict_calls(c) == [] and Unmovable.FEW_REPLICAS.value in report.reason
    # with a budget the owner says what it accepts: the guard steps aside
    c2 = FakeCluster([*lone_replica(), pdb("serve", match={"app": "serve"}, max_unavailable=1)])  # type: ignore[list-item]
    plan2 = hand_plan(
        [
            ("default/serve-a", "gpu-2", "gpu-1", "ReplicaSet/serve"),
            ("default/train-a", "gpu-2", "gpu-1", "ReplicaSet/train"),
        ],
        freed=["gpu-2"],
        c=c2,
    )
    assert Executor(c2, SETTINGS, c2.clock, rules=PlannerSettings.of()).execute(plan2).status == "succeeded"
    assert sorted(c2.evicted) == ["default/serve-a", "default/train-a"]


def test_a_pod_tolerating_every_taint_is_not_moved_with_holds_which_cannot_keep_it_off_other_nodes() -> None:
    c, plan = setup()
    c.pod("default", "train-b")["spec"]["tolerations"] = [{"operator": "Exists"}]
    report = run(c, plan, SETTINGS.amended(mechanism="holds"))
    assert "default/train-b" not in evicted_names(c)
    assert "tolerates the compactor's fence taint" in report.reason and "steering holds" in report.reason


def test_a_plan_older_than_the_limit_is_refused_before_any_change() -> None:
    c, plan = setup()
    c.advance(SETTINGS.caps.max_plan_age_seconds + 1)
    report = run(c, plan)
    assert report.status == "failed" and "more than caps.max_plan_age_seconds" in report.reason
    assert [call for call in c.history if call.method in ("patch_node", "evict", "write_state")] == []


def test_an_interrupted_run_of_a_plan_past_the_limit_is_rolled_back_not_resumed() -> None:
    c, plan = setup()
    c.crash_after(4)  # the state is written and a node fenced
    with pytest.raises(Crash):
        run(c, plan)
    assert c.cordoned_nodes() and c.state
    c.advance(2 * 3600)
    recovered = recover(c, SETTINGS, c.clock)
    assert recovered.resumed is not None and recovered.resumed.status == "failed"
    assert "max_plan_age_seconds" in recovered.resumed.reason and evict_calls(c) == []
    assert_clean(c)


def test_the_age_limit_is_a_setting() -> None:
    c, plan = setup()
    c.advance(2 * 3600)
    assert run(c, plan, SETTINGS.amended(max_plan_age_seconds=3 * 3600)).status == "succeeded"


def test_a_source_node_marked_do_not_disrupt_since_planning_keeps_its_pods() -> None:
    c, plan = setup()
    c.nodes["gpu-3"]["metadata"]["annotations"] = {"karpenter.sh/do-not-disrupt": "true"}  # Karpenter's node opt-out
    report = run(c, plan)
    assert not set(GPU_3) & set(evicted_names(c))
    assert Unmovable.NODE_DO_NOT_DISRUPT.value in report.reason, report.reason
    assert report.status == "partial" and report.freed_nodes == ["gpu-2"]
    assert_clean(c)


def test_a_pod_restarted_since_planning_is_not_moved_before_it_has_been_ready_long_enough() -> None:
    c, plan = setup()
    c.pod("default", "serve-b")["status"]["conditions"] = [  # it restarted and turned Ready just as the run began
        {"type": "Ready", "status": "True", "lastTransitionTime": c.clock.now().isoformat()}
    ]
    report = run(c, plan, rules=PlannerSettings.of(min_replicas=1, min_ready_seconds=600))
    assert not set(GPU_3) & set(evicted_names(c))
    assert f"not moved default/serve-b: {Unmovable.TOO_YOUNG.value}" in report.reason, report.reason
    assert sorted(c.evicted) == GPU_2


def job_cluster(batch_job: Obj) -> tuple[FakeCluster, CompactionPlan]:
    """gpu-2 runs one pod of Job ``batch`` (its owner let it move: compactor.io/evict=true, a PDB of minAvailable 0); the
    plan moves it to gpu-1."""
    batch = pod("batch-a", on="gpu-2", gpus=1, owner="Job/batch", annotations={"compactor.io/evict": "true"})
    budget = pdb("batch", match={"app": "batch"}, min_available=0)  # a Job has no scale: maxUnavailable cannot sync
    c = FakeCluster(
        [node("gpu-1", gpus=8), node("gpu-2", gpus=8), rs("serve-a", "gpu-1", "serve"), batch_job, batch, budget]
    )
    return c, hand_plan([("default/batch-a", "gpu-2", "gpu-1", "Job/batch")], freed=["gpu-2"], c=c)


def test_a_job_pod_whose_eviction_would_spend_the_jobs_backoff_limit_is_not_evicted() -> None:
    c, plan = job_cluster(job("batch", backoff_limit=2, failed=2))
    report = run(c, plan)
    assert report.status == "partial" and c.evicted == [] and report.skipped_moves == ["default/batch-a"]
    assert "would fail Job default/batch: the eviction counts as failure 3, past its backoffLimit 2" in report.reason
    assert_clean(c)  # the Job lives on, its pod where it was


@pytest.mark.parametrize(
    "batch_job",
    [job("batch", backoff_limit=2, failed=1), job("batch", backoff_limit=0, ignore_disruptions=True)],
    ids=["within-its-backoff-limit", "its-failure-policy-ignores-disruptions"],
)
def test_a_job_pod_moves_when_its_job_survives_the_eviction(batch_job: Obj) -> None:
    c, plan = job_cluster(batch_job)
    report = run(c, plan)
    assert report.status == "succeeded" and c.evicted == ["default/batch-a"] and report.freed_nodes == ["gpu-2"]
    assert_clean(c)  # the Job recreated its pod (on gpu-1) and did not fail

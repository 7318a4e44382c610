"""The fake cluster's own rules: the executor's scenario tests are only as honest as these."""

from __future__ import annotations

import copy
import inspect
from datetime import UTC, datetime
from typing import Any, Literal

import pytest

from compactor.actions.port.client import ClusterClient, EvictionOutcome, EvictionResult, ObjectRef
from compactor.clock import Clock
from compactor.errors import ClusterError
from tests.builders import job, node, pdb, pod
from tests.fakecluster import PDB_BLOCKED, PDB_MULTIPLE, Crash, FakeClock, FakeCluster, merge_patch

Obj = dict[str, Any]


def app(n: int = 2, *, on: str = "n1", gpus: int = 1, owner: str = "ReplicaSet/app") -> list[Obj]:
    kind, name = owner.split("/")
    sep = "-" if kind == "StatefulSet" else "-x"
    return [pod(f"{name}{sep}{i}", on=on, gpus=gpus, owner=owner) for i in range(n)]


def world(*extra: Obj, pods: int = 2, budget: Obj | None = None, **options: Any) -> FakeCluster:
    budget = budget if budget is not None else pdb("app-pdb", match={"app": "app"}, max_unavailable=1)
    return FakeCluster([node("n1", gpus=8), node("n2", gpus=8), *app(pods), budget, *extra], **options)


def snapshot(c: FakeCluster) -> Any:
    return copy.deepcopy((c.nodes, c.pods, c.pdbs, c.state))


def status(c: FakeCluster, name: str = "app-pdb") -> Any:
    return c.pdbs[("default", name)]["status"]


def test_implements_the_interfaces_exactly() -> None:
    for protocol, impl in ((ClusterClient, FakeCluster), (Clock, FakeClock)):
        for name, member in vars(protocol).items():
            if callable(member) and not name.startswith("_"):
                assert inspect.signature(getattr(impl, name)) == inspect.signature(member), name


def test_pdb_status_is_recomputed_like_the_disruption_controller() -> None:
    c = world(pods=3)
    assert status(c) == {"disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3}


@pytest.mark.parametrize(
    ("spec", "desired", "allowed"),
    [
        ({"min_available": 3}, 3, 1),
        ({"min_available": "50%"}, 2, 2),  # ceil(4 * 0.5)
        ({"min_available": "30%"}, 2, 2),  # ceil(1.2)
        ({"max_unavailable": "30%"}, 2, 2),  # 4 - ceil(1.2)
        ({"max_unavailable": 0}, 4, 0),
    ],
)
def test_desired_healthy_rounds_percentages_up(spec: dict[str, Any], desired: int, allowed: int) -> None:
    c = world(pods=4, budget=pdb("app-pdb", match={"app": "app"}, **spec))
    assert (status(c)["desiredHealthy"], status(c)["disruptionsAllowed"]) == (desired, allowed)


def test_expected_pods_counts_replicas_not_healthy_pods() -> None:
    c = world(pod("app-x9", gpus=1))  # a third replica, still Pending
    assert status(c) == {"disruptionsAllowed": 0, "currentHealthy": 2, "desiredHealthy": 2, "expectedPods": 3}


def test_eviction_blocked_by_a_pdb_at_zero_changes_nothing() -> None:
    c = world(budget=pdb("app-pdb", match={"app": "app"}, min_available=2))
    before = snapshot(c)
    assert c.evict("default", "app-x0") == EvictionResult(EvictionOutcome.BLOCKED, 429, PDB_BLOCKED)
    c.settle()
    assert snapshot(c) == before and c.evicted == []


def test_allowed_eviction_runs_the_whole_replacement_cycle() -> None:
    c = world()
    old_uid = c.pod("default", "app-x0")["metadata"]["uid"]
    assert c.evict("default", "app-x0").outcome is EvictionOutcome.EVICTED
    assert status(c)["disruptionsAllowed"] == 0  # the API server's decrement
    assert c.pod("default", "app-x0")["metadata"]["deletionTimestamp"] == "2026-01-01T00:00:01Z"

    c.clock.sleep(0)  # the ReplicaSet reacts at once: terminating pods do not count
    (new,) = [p for p in c.pods.values() if p["metadata"]["name"] not in ("app-x0", "app-x1")]
    assert new["metadata"]["name"].startswith("app-") and new["metadata"]["uid"] != old_uid
    assert new["metadata"]["ownerReferences"] == c.pod("default", "app-x1")["metadata"]["ownerReferences"]
    assert "nodeName" not in new["spec"] and new["status"]["phase"] == "Pending"
    assert {x["type"]: x["status"] for x in new["status"]["conditions"]} == {"PodScheduled": "False", "Ready": "False"}
    assert status(c)["currentHealthy"] == 1 and status(c)["disruptionsAllowed"] == 0

    c.clock.sleep(1)  # grace over, schedule_after reached
    assert ("default", "app-x0") not in c.pods
    assert new["spec"]["nodeName"] == "n1"  # best fit: n1 has 7 free GPUs, n2 has 8
    assert new["status"]["phase"] == "Pending"

    c.clock.sleep(4)
    assert status(c)["disruptionsAllowed"] == 0
    c.clock.sleep(1)  # ready_after since binding
    assert new["status"]["phase"] == "Running" and status(c)["disruptionsAllowed"] == 1
    assert c.lost_pods() == [] and c.evicted == ["default/app-x0"]
    c.assert_no_pdb_violation()


def test_a_second_eviction_waits_for_the_budget_to_recover() -> None:
    c = world(pods=3)
    assert c.evict("default", "app-x0").outcome is EvictionOutcome.EVICTED
    assert c.evict("default", "app-x1").outcome is EvictionOutcome.BLOCKED
    c.clock.sleep(3)
    assert c.evict("default", "app-x1").outcome is EvictionOutcome.BLOCKED  # replacement not Ready yet
    c.settle()
    assert c.evict("default", "app-x1").outcome is EvictionOutcome.EVICTED
    c.settle()
    assert c.lost_pods() == []
    c.assert_no_pdb_violation()


def test_two_pdbs_selecting_a_pod_is_an_internal_error() -> None:
    c = world(pdb("other", match={"app": "app"}, max_unavailable=1))
    before = snapshot(c)
    assert c.evict("default", "app-x0") == EvictionResult(EvictionOutcome.ERROR, 500, PDB_MULTIPLE)
    assert snapshot(c) == before


def test_missing_pod_is_gone_and_terminating_pod_is_evicted_again_for_free() -> None:
    c = world(pods=3)
    assert c.evict("default", "nope") == EvictionResult(EvictionOutcome.GONE, 404, 'pods "nope" not found')
    c.evict("default", "app-x0")
    assert c.evict("default", "app-x0") == EvictionResult(EvictionOutcome.EVICTED, 201)
    assert status(c)["disruptionsAllowed"] == 0 and c.evicted == ["default/app-x0"]


def test_a_pdb_in_another_namespace_or_not_matching_does_not_apply() -> None:
    c = world(
        pdb("elsewhere", match={"app": "app"}, namespace="other", min_available=5),
        pdb("unrelated", match={"app": "db"}, min_available=5),
    )
    assert c.evict("default", "app-x0").outcome is EvictionOutcome.EVICTED


def test_pending_pod_is_evictable_regardless_of_budget() -> None:
    c = world(pod("app-x9", gpus=1), budget=pdb("app-pdb", match={"app": "app"}, min_available=3), scheduler="never")
    assert status(c)["disruptionsAllowed"] == 0 and status(c)["currentHealthy"] < status(c)["desiredHealthy"]
    assert c.evict("default", "app-x9") == EvictionResult(EvictionOutcome.EVICTED, 201)
    assert status(c)["disruptionsAllowed"] == 0  # nothing spent
    assert c.evict("default", "app-x0").outcome is EvictionOutcome.BLOCKED


def test_unready_running_pod_goes_when_the_application_is_not_disrupted() -> None:
    c = world(pods=3, budget=pdb("app-pdb", match={"app": "app"}, min_available=2))
    c.pod("default", "app-x2")["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    c.tick()
    assert status(c)["disruptionsAllowed"] == 0 and status(c)["currentHealthy"] == 2
    assert c.evict("default", "app-x0").outcome is EvictionOutcome.BLOCKED  # healthy pods still need the budget
    assert c.evict("default", "app-x2").outcome is EvictionOutcome.EVICTED  # IfHealthyBudget


def test_dry_run_checks_everything_and_changes_nothing() -> None:
    c = world(pdb("bare-pdb", match={"app": "bare"}, min_available=1), pod("bare", on="n2", owner=None))
    before = snapshot(c)
    assert c.evict("default", "app-x0", dry_run=True) == EvictionResult(EvictionOutcome.EVICTED, 201)
    assert c.evict("default", "app-x0", dry_run=True).outcome is EvictionOutcome.EVICTED  # nothing was spent
    assert c.evict("default", "bare", dry_run=True).outcome is EvictionOutcome.BLOCKED
    assert c.evict("default", "nope", dry_run=True).outcome is EvictionOutcome.GONE
    c.settle()
    assert snapshot(c) == before and c.lost_pods() == [] and c.evicted == []
    assert [call.args["dry_run"] for call in c.history] == [True] * 4


def gpu_world(scheduler: str = "cooperative") -> FakeCluster:
    return FakeCluster(
        [
            node("busy", gpus=8),
            node("empty", gpus=8),
            node("cordoned", gpus=8, unschedulable=True),
            node("tainted", gpus=8, taints=[{"key": "team", "value": "x", "effect": "NoSchedule"}]),
            node("down", gpus=8, ready=False),
            pod("fill", on="busy", gpus=6, owner=None),
            pod("fill2", on="cordoned", gpus=7, owner=None),
        ],
        scheduler=scheduler,
    )


def place(c: FakeCluster, name: str, **kwargs: Any) -> Any:
    c.add_pod(pod(name, owner=None, **kwargs))
    c.settle()
    return c.pod("default", name)["spec"].get("nodeName")


def test_cooperative_scheduler_best_fit_respecting_cordon_taints_and_capacity() -> None:
    c = gpu_world()
    assert place(c, "small", gpus=1) == "busy"  # least free GPUs that fit
    assert place(c, "big", gpus=3) == "empty"  # busy has 1 left
    assert place(c, "huge", gpus=8) is None  # only the tainted and the NotReady nodes have 8 free
    assert place(c, "tolerant", gpus=6, tolerations=[{"key": "team", "operator": "Exists"}]) == "tainted"
    assert place(c, "picky", gpus=1, node_selector={"kubernetes.io/hostname": "cordoned"}) is None
    assert c.pod("default", "huge")["status"]["phase"] == "Pending"
    assert c.node_gpu_pods("busy") == ["default/fill", "default/small"]


def test_cpu_and_pod_count_capacity_are_enforced_too() -> None:
    c = FakeCluster([node("n", gpus=1, cpu="4", pods=2), pod("a", on="n", cpu="3", owner=None)])
    assert place(c, "b", cpu="2") is None
    assert place(c, "c", cpu="1") == "n"
    assert place(c, "d", cpu="0") is None  # pods: 2


def test_ignore_cordon_scheduler_prefers_cordoned_nodes_but_still_respects_taints() -> None:
    c = gpu_world("ignore-cordon")
    assert place(c, "small", gpus=1) == "cordoned"
    assert place(c, "second", gpus=1) == "busy"  # cordoned is full
    c.patch_node("empty", {"spec": {"unschedulable": True}})
    assert place(c, "third", gpus=1) == "empty"
    c.patch_node("tainted", {"spec": {"unschedulable": True}})
    assert place(c, "fourth", gpus=8) is None  # only the tainted node has 8 free


def test_never_and_slow_schedulers_and_switching_at_runtime() -> None:
    c = FakeCluster([node("n", gpus=8), pod("p", gpus=1, owner=None)], scheduler="never")
    c.clock.sleep(100)
    assert "nodeName" not in c.pod("default", "p")["spec"]
    c.scheduler = "slow"
    c.clock.sleep(1)  # pending since t=0, slow needs 10 s; it has been 101
    assert c.pod("default", "p")["spec"]["nodeName"] == "n"
    c.add_pod(pod("q", gpus=1, owner=None))
    c.clock.sleep(9)
    assert "nodeName" not in c.pod("default", "q")["spec"]
    c.clock.sleep(1)
    assert c.pod("default", "q")["spec"]["nodeName"] == "n"
    with pytest.raises(ValueError, match="scheduler"):
        c.scheduler = "random"


def test_kubelet_readies_a_pod_bound_directly_onto_a_cordoned_node() -> None:
    c = FakeCluster([node("n", gpus=8, unschedulable=True)])
    c.add_pod(pod("ds", on="n", gpus=1, owner="DaemonSet/agent", phase="Pending"))
    assert c.node_gpu_pods("n") == ["default/ds"] and c.cordoned_nodes() == ["n"]
    c.clock.sleep(5)
    assert c.pod("default", "ds")["status"]["phase"] == "Running"


def test_statefulset_replacement_keeps_the_name_after_the_old_pod_is_gone() -> None:
    c = FakeCluster([node("n1", gpus=8), *app(2, owner="StatefulSet/db")])
    old_uid = c.pod("default", "db-0")["metadata"]["uid"]
    c.evict("default", "db-0")
    c.clock.sleep(0.5)
    assert c.pod("default", "db-0")["metadata"]["uid"] == old_uid  # still terminating
    c.clock.sleep(0.5)
    replacement = c.pod("default", "db-0")
    assert replacement["metadata"]["uid"] != old_uid and "nodeName" not in replacement["spec"]
    assert "deletionTimestamp" not in replacement["metadata"]
    c.settle()
    assert replacement["status"]["phase"] == "Running" and len(c.pods) == 2 and c.lost_pods() == []


def test_bare_pod_evicted_is_lost_and_controller_pods_are_recreated() -> None:
    """A Job's controller recreates an evicted pod as a ReplicaSet's does (the work it had done is what is lost, which is
    why the planner moves a Job's pod only when annotated compactor.io/evict=true)."""
    c = world(pod("bare", on="n2", owner=None), pod("job-1", on="n2", owner="Job/batch"))
    for name in ("bare", "job-1", "app-x0"):
        assert c.evict("default", name).outcome is EvictionOutcome.EVICTED
    c.settle()
    assert c.lost_pods() == ["Pod default/bare"]
    (again,) = [p for p in c.pods.values() if p["metadata"]["name"].startswith("batch-")]
    assert again["metadata"]["ownerReferences"][0]["kind"] == "Job" and again["status"]["phase"] == "Running"


def test_an_evicted_pod_is_marked_as_disrupted_before_it_goes() -> None:
    c = world()
    c.evict("default", "app-x0")
    (marked,) = [x for x in c.pods["default", "app-x0"]["status"]["conditions"] if x["type"] == "DisruptionTarget"]
    assert marked == {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}


def test_a_job_counts_an_evicted_pod_as_failed_and_recreates_it_within_its_backoff_limit() -> None:
    c = world(job("batch", backoff_limit=1), pod("batch-a", on="n2", owner="Job/batch"))
    assert c.evict("default", "batch-a").outcome is EvictionOutcome.EVICTED
    c.settle()
    assert c.get_owner("default", "Job", "batch")["status"]["failed"] == 1  # type: ignore[index]
    (again,) = [p for key, p in c.pods.items() if key[1].startswith("batch-")]
    assert again["metadata"]["name"] != "batch-a" and again["status"]["phase"] == "Running" and c.lost_pods() == []


def test_a_job_past_its_backoff_limit_fails_and_its_pods_are_lost() -> None:
    c = world(
        job("batch", backoff_limit=1, failed=1),
        pod("batch-a", on="n2", owner="Job/batch"),
        pod("batch-b", on="n2", owner="Job/batch"),
    )
    c.evict("default", "batch-a")
    c.settle()
    failed = c.get_owner("default", "Job", "batch")
    assert failed is not None and failed["status"]["conditions"][0]["reason"] == "BackoffLimitExceeded"
    assert [p for p in c.pods if p[1].startswith("batch-")] == []  # the other pod deleted, none recreated
    assert c.lost_pods() == ["Job default/batch (BackoffLimitExceeded; pod batch-a evicted)"]


def test_a_budget_that_needs_a_jobs_scale_fails_to_sync_and_allows_nothing() -> None:
    c = world(
        job("batch"),
        pod("batch-a", on="n2", owner="Job/batch", labels={"app": "batch"}),
        pdb("by-count", match={"app": "batch"}, min_available=0),
        pdb("by-share", match={"app": "batch"}, max_unavailable=1),
    )
    assert c.pdbs["default", "by-count"]["status"]["disruptionsAllowed"] == 1
    assert c.pdbs["default", "by-share"]["status"]["disruptionsAllowed"] == 0


def test_a_job_that_ignores_disruptions_does_not_count_an_eviction() -> None:
    c = world(job("batch", backoff_limit=0, ignore_disruptions=True), pod("batch-a", on="n2", owner="Job/batch"))
    c.evict("default", "batch-a")
    c.settle()
    assert "failed" not in c.get_owner("default", "Job", "batch")["status"]  # type: ignore[index]
    assert c.lost_pods() == []


def test_replicaset_below_replicas_is_lost() -> None:
    c = world()
    c.evict("default", "app-x0")
    c.settle()
    del c.pods[next(k for k in c.pods if k[1] not in ("app-x0", "app-x1"))]
    assert c.lost_pods() == ["ReplicaSet default/app"]


def test_merge_patch_follows_rfc_7386() -> None:
    assert merge_patch({"a": "b", "c": {"d": "e", "f": "g"}}, {"a": "z", "c": {"f": None}}) == {
        "a": "z",
        "c": {"d": "e"},
    }
    assert merge_patch({"a": [{"b": "c"}]}, {"a": [1]}) == {"a": [1]}
    assert merge_patch({"a": "b"}, {"c": {"d": None}}) == {"a": "b", "c": {}}
    assert merge_patch({"e": None}, {"a": 1}) == {"e": None, "a": 1}
    target = {"a": {"b": 1}}
    merge_patch(target, {"a": {"b": 2}})
    assert target == {"a": {"b": 1}}


def test_patch_node_applies_a_merge_patch_and_reads_are_copies() -> None:
    c = FakeCluster(
        [node("n", gpus=8, labels={"keep": "1", "drop": "1"}, taints=[{"key": "a", "effect": "NoSchedule"}])]
    )
    patched = c.patch_node(
        "n",
        {
            "metadata": {"labels": {"drop": None, "new": "2"}},
            "spec": {"unschedulable": True, "taints": [{"key": "b", "effect": "NoExecute"}]},
        },
    )
    assert patched == c.get_node("n")
    assert patched["metadata"]["labels"]["keep"] == "1" and "drop" not in patched["metadata"]["labels"]
    assert patched["metadata"]["labels"]["new"] == "2" and patched["spec"]["taints"] == [
        {"key": "b", "effect": "NoExecute"}
    ]
    assert c.cordoned_nodes() == ["n"]
    c.patch_node("n", {"spec": {"unschedulable": None}})
    assert c.cordoned_nodes() == []
    patched["metadata"]["labels"]["keep"] = "mutated"
    c.list_nodes()[0]["spec"]["unschedulable"] = True
    assert c.nodes["n"]["metadata"]["labels"]["keep"] == "1" and c.cordoned_nodes() == []
    with pytest.raises(ClusterError) as err:
        c.patch_node("ghost", {})
    assert err.value.status == 404


def test_reads_filter_and_copy() -> None:
    c = world(pod("bare", on="n2", owner=None))
    assert [p["metadata"]["name"] for p in c.list_pods(node_name="n2")] == ["bare"]
    assert len(c.list_pods()) == 3 and c.get_pod("default", "nope") is None and c.get_node("nope") is None
    c.get_pod("default", "bare")["spec"]["nodeName"] = "n1"  # type: ignore[index]
    c.list_pdbs()[0]["status"]["disruptionsAllowed"] = 99
    assert c.pod("default", "bare")["spec"]["nodeName"] == "n2" and status(c)["disruptionsAllowed"] == 1


def test_events_and_state() -> None:
    c = world()
    ref = ObjectRef("Node", "n1", uid="u")
    c.clock.sleep(2)
    c.create_event(ref, reason="Cordoned", message="freeing n1")
    assert c.events == [
        {
            "involved": ref,
            "reason": "Cordoned",
            "message": "freeing n1",
            "type": "Normal",
            "time": "2026-01-01T00:00:02Z",
        }
    ]
    assert c.read_state("run") is None
    data = {"step": "1"}
    c.write_state("run", data)
    data["step"] = "mutated"
    assert c.read_state("run") == {"step": "1"}
    c.write_state("run", None)
    assert c.read_state("run") is None


def test_calls_record_everything_and_history_only_writes() -> None:
    c = world()
    c.list_nodes()
    c.get_pod("default", "app-x0")
    c.evict("default", "app-x0", dry_run=True)
    c.clock.sleep(1)
    c.write_state("s", {"k": "v"})
    assert [(x.method, x.args) for x in c.calls] == [
        ("list_nodes", {}),
        ("get_pod", {"namespace": "default", "name": "app-x0"}),
        ("evict", {"namespace": "default", "name": "app-x0", "dry_run": True, "uid": "", "resource_version": ""}),
        ("write_state", {"name": "s", "data": {"k": "v"}}),
    ]
    assert [(x.method, x.time) for x in c.history] == [("evict", 0.0), ("write_state", 1.0)]


@pytest.mark.parametrize("when", ["before", "after"])
def test_crash_at_the_nth_write(when: Literal["before", "after"]) -> None:
    c = world()
    c.crash_after(2, when=when)
    c.list_nodes()  # reads do not count
    c.patch_node("n1", {"spec": {"unschedulable": True}})

    def executor_step() -> str:
        try:
            c.evict("default", "app-x0")
        except Exception:
            return "swallowed"
        return "returned"

    with pytest.raises(Crash) as crash:
        executor_step()
    assert (crash.value.method, crash.value.when) == ("evict", when)
    assert c.evicted == ([] if when == "before" else ["default/app-x0"])
    assert ("deletionTimestamp" in c.pod("default", "app-x0")["metadata"]) is (when == "after")
    c.write_state("s", {})  # disarmed after firing
    assert [x.method for x in c.history] == ["patch_node", "evict", "write_state"]


def test_crash_after_a_failed_write_still_crashes() -> None:
    c = world()
    c.crash_after(1, when="after")
    c.fail_next("patch_node", 500)
    with pytest.raises(Crash) as crash:
        c.patch_node("n1", {"spec": {"unschedulable": True}})
    assert isinstance(crash.value.__context__, ClusterError) and c.cordoned_nodes() == []


def test_failure_injection() -> None:
    c = world(pods=3)
    c.fail_next("evict", EvictionOutcome.ERROR, times=2)
    c.fail_next("patch_node", ClusterError("boom", status=500))
    c.fail_next("list_pods", 503)
    before = snapshot(c)
    assert [c.evict("default", "app-x0").status for _ in range(2)] == [500, 500]
    with pytest.raises(ClusterError, match="boom"):
        c.patch_node("n1", {"spec": {"unschedulable": True}})
    with pytest.raises(ClusterError) as err:
        c.list_pods()
    assert err.value.status == 503 and snapshot(c) == before
    c.fail_next("evict", 409)
    assert c.evict("default", "app-x0") == EvictionResult(EvictionOutcome.CONFLICT, 409, "injected")
    assert c.evict("default", "app-x0").outcome is EvictionOutcome.EVICTED  # queue drained
    c.patch_node("n1", {"spec": {"unschedulable": True}})
    assert c.cordoned_nodes() == ["n1"]
    with pytest.raises(ValueError):
        c.fail_next("delete_pod", 500)
    with pytest.raises(TypeError):
        c.fail_next("patch_node", EvictionOutcome.ERROR)


def test_forced_budget_sticky_and_not() -> None:
    c = world(budget=pdb("app-pdb", match={"app": "app"}, min_available=0))
    c.set_pdb_allowed("default", "app-pdb", 0)
    c.clock.sleep(10)
    assert c.evict("default", "app-x0").outcome is EvictionOutcome.BLOCKED
    c.set_pdb_allowed("default", "app-pdb", None)
    c.clock.sleep(0)
    assert status(c)["disruptionsAllowed"] == 2
    c.set_pdb_allowed("default", "app-pdb", 0, sticky=False)
    assert c.evict("default", "app-x0").outcome is EvictionOutcome.BLOCKED
    c.clock.sleep(0)
    assert c.evict("default", "app-x0").outcome is EvictionOutcome.EVICTED


def test_pdb_violation_is_detected_when_a_forced_budget_lets_an_eviction_through() -> None:
    c = world(budget=pdb("app-pdb", match={"app": "app"}, min_available=2))
    c.assert_no_pdb_violation()
    c.set_pdb_allowed("default", "app-pdb", 1)
    assert c.evict("default", "app-x0").outcome is EvictionOutcome.EVICTED
    with pytest.raises(
        AssertionError, match=r"app-pdb .*currentHealthy 1 < desiredHealthy 2 after evicting default/app-x0"
    ):
        c.assert_no_pdb_violation()


def test_clock_is_simulated_utc_time_that_moves_the_world() -> None:
    c = FakeCluster([node("n", gpus=8), pod("p", gpus=1, owner=None)])
    clock: Clock = c.clock
    assert clock.now() == datetime(2026, 1, 1, tzinfo=UTC) and clock.now().tzinfo is not None
    clock.sleep(2.5)
    assert clock.monotonic() == 2.5 and (clock.now() - datetime(2026, 1, 1, tzinfo=UTC)).total_seconds() == 2.5
    assert c.pod("default", "p")["spec"]["nodeName"] == "n"
    with pytest.raises(ValueError):
        clock.sleep(-1)


def test_deterministic() -> None:
    def run() -> list[tuple[str, str]]:
        c = world(pods=4)
        for i in range(4):
            c.settle()
            c.evict("default", f"app-x{i}")
        c.settle()
        return sorted((p["metadata"]["name"], p["metadata"]["uid"]) for p in c.pods.values())

    assert run() == run()

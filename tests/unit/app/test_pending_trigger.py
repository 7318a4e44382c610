"""The controller's pending trigger decides on plain pods: which GPU pods are blocked, and when they start a cycle
(issue 21: the pending-driven path the day's replay compares)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from compactor.app.pending import Blocked, Bound, PendingTrigger, blocked_gpu_pods
from compactor.settings.bundles import PlannerSettings
from tests.builders import pod

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def blocked(name: str, *, waited: float, **kwargs: Any) -> dict[str, Any]:
    """A pod no node holds whose scheduler found none ``waited`` seconds ago (as kube-scheduler records it)."""
    raw = pod(name, **kwargs)
    raw["status"] = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "lastTransitionTime": (NOW - timedelta(seconds=waited)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        ],
    }
    return raw


def test_only_gpu_pods_their_scheduler_found_no_node_for_are_blocked() -> None:
    never_tried = pod("fresh", gpus=8)  # no PodScheduled condition yet: the scheduler has not tried
    gated = blocked("gated", waited=90, gpus=8)
    gated["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    elsewhere = blocked("other-scheduler", waited=90, gpus=8)
    elsewhere["spec"]["schedulerName"] = "volcano"
    claims = blocked("dra", waited=30, cpu="1")
    claims["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    pods = [
        blocked("big", waited=90, gpus=8),
        blocked("slice", waited=120, mig="3g.40gb"),
        blocked("cpu-only", waited=300, cpu="64"),
        never_tried,
        gated,
        elsewhere,
        claims,
    ]
    found = blocked_gpu_pods(pods, NOW, ["default-scheduler"])
    assert found == [Blocked("default/slice", 120.0), Blocked("default/big", 90.0), Blocked("default/dra", 30.0)]


def test_a_bound_pod_or_one_scheduled_since_is_not_blocked() -> None:
    bound = blocked("bound", waited=90, gpus=8)
    bound["spec"]["nodeName"] = "gpu-1"
    scheduled = blocked("scheduled", waited=90, gpus=8)
    scheduled["status"]["conditions"][0].update(status="True", reason="")
    assert blocked_gpu_pods([bound, scheduled], NOW, ["default-scheduler"]) == []


def test_a_pod_starts_a_cycle_once_after_its_wait_and_never_within_the_gap() -> None:
    trigger = PendingTrigger(after_seconds=60, gap_seconds=300)
    assert trigger.due([Blocked("ml/big", 59.0)], since_last_cycle=1000) == []
    assert trigger.due([Blocked("ml/big", 61.0)], since_last_cycle=1000) == [Blocked("ml/big", 61.0)]
    assert trigger.due([Blocked("ml/big", 400.0)], since_last_cycle=1000) == []  # that cycle could not place it
    # another pod, blocked after that cycle began: waits out the gap, then goes
    assert trigger.due([Blocked("ml/big", 400.0), Blocked("ml/other", 70.0)], since_last_cycle=100) == []
    assert trigger.due([Blocked("ml/big", 460.0), Blocked("ml/other", 130.0)], since_last_cycle=301) == [
        Blocked("ml/other", 130.0)
    ]
    # a pod placed (no longer listed) and blocked anew later starts one again
    assert trigger.due([], since_last_cycle=400) == []
    assert trigger.due([Blocked("ml/big", 65.0)], since_last_cycle=400) == [Blocked("ml/big", 65.0)]
    assert PendingTrigger(60, 300).due([Blocked("ml/big", 61.0)], since_last_cycle=None) == [Blocked("ml/big", 61.0)]


def test_a_pod_that_started_a_cycle_is_timed_from_its_trigger_to_its_binding() -> None:
    """Issue 42: each pod's time from trigger to bound, from its PodScheduled condition; a pod still waiting is asked
    again next round, one deleted before any node took it is forgotten."""
    trigger = PendingTrigger(after_seconds=60, gap_seconds=0)
    big, gone = blocked("big", waited=90, gpus=8), blocked("gone", waited=90, gpus=8)
    found = blocked_gpu_pods([big, gone], NOW, ["default-scheduler"])
    assert [b.key for b in trigger.due(found, None, now=NOW)] == ["default/big", "default/gone"]
    assert trigger.bound([big, gone], lambda ns, name: None, NOW) == []  # both still wait
    bound = pod("big", on="gpu-3", gpus=8)
    at = NOW + timedelta(seconds=75)
    bound["status"] = {
        "phase": "Running",
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": at.strftime("%Y-%m-%dT%H:%M:%SZ")}
        ],
    }
    read = {"big": bound, "gone": None}
    later = NOW + timedelta(minutes=5)
    assert trigger.bound([], lambda ns, name: read[name], later) == [Bound("default/big", "gpu-3", 75.0)]
    assert trigger.bound([], lambda ns, name: read[name], later) == []  # each once


def test_pods_outside_the_planners_scope_or_larger_than_any_node_start_no_cycle() -> None:
    """Issue 43, item 10: the trigger started cycles for pods no cycle may place: in a namespace the planner may not move
    pods of, or asking more GPUs than any node has (a cycle per such pod, changing nothing)."""
    scope = PlannerSettings.of(exclude_namespaces=["kube-system", "batch"])
    pods = [
        blocked("in-scope", waited=90, gpus=8),
        blocked("excluded", waited=90, gpus=8, namespace="batch"),
        blocked("huge", waited=90, gpus=16),
    ]
    found = blocked_gpu_pods(pods, NOW, ["default-scheduler"], scope=scope, largest={"nvidia.com/gpu": 8})
    assert [b.key for b in found] == ["default/in-scope"]
    assert len(blocked_gpu_pods(pods, NOW, ["default-scheduler"])) == 3  # unbounded, as before: the caller's choice

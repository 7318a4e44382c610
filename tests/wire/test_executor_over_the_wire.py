"""The executor over the wire: a one-move plan carried out by KubeClusterClient against the fake API server, in real
time; what the API server refuses (a state over 1 MiB, a throttled patch) said as it says it."""

from __future__ import annotations

import re
import threading
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from compactor.actions.executor import Executor
from compactor.actions.port import annotations as ann
from compactor.clock import RealClock, SimulatedClock
from compactor.errors import ClusterError
from compactor.planner.plan import CompactionPlan
from compactor.settings.bundles import RunSettings
from tests.builders import node, pdb, pod
from tests.fakeapi import DisruptionController, FakeApiServer, RecordedRequest, status_body
from tests.wire.requests_seen import client_of, no_pod_deletes, writes_sent

STATE = "gpu-compactor-state"
STATE_PATH = f"/api/v1/namespaces/gpu-compactor/configmaps/{STATE}"
ISO_SECONDS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
ISO_MICROS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


# ---------------------------------------------------------------- the executor over the wire


def _plan(pod_uid: str, *, freed: tuple[str, ...] = ("gpu-1",)) -> CompactionPlan:
    return CompactionPlan.model_validate(
        {
            "apiVersion": "compactor/v1alpha1",
            "kind": "CompactionPlan",
            "metadata": {
                "id": "plan-wire-1",
                "createdAt": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "source": "test",
            },  # just made
            "moves": [
                {
                    "pod": "ml/train-a",
                    "from": "gpu-1",
                    "to": "gpu-2",
                    "reason": "consolidate",
                    "uid": pod_uid,
                    "owner": "ReplicaSet/train",
                    "gpu": True,
                }
            ],
            "freedNodes": list(freed),
            "filledNodes": ["gpu-2"],
            "freedGpus": 8,
            "solver": {"status": "OPTIMAL", "wallSeconds": 0.01},
        }
    )


def _cluster(fake_api: FakeApiServer) -> str:
    fake_api.disruption_controller = DisruptionController()  # budgets recomputed as kube-controller-manager does
    moving = pod("train-a", on="gpu-1", gpus=1, namespace="ml", owner="ReplicaSet/train", labels={"app": "train"})
    fake_api.add(
        node("gpu-1", gpus=8),
        node("gpu-2", gpus=8),
        moving,
        pod("train-x", on="gpu-2", gpus=1, namespace="ml", owner="ReplicaSet/train", labels={"app": "train"}),
        pod("agent", on="gpu-1", namespace="kube-system", owner="DaemonSet/agent"),  # not a GPU pod: may stay
        pdb("train", match={"app": "train"}, namespace="ml", max_unavailable=1),
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "train", "namespace": "ml", "uid": "ReplicaSet-train"},
            "spec": {"replicas": 2},
        },
    )
    return str(moving["metadata"]["uid"])


def _replace_on(target: str, *, ready: bool = True) -> Any:
    """An on_evict hook: the evicted pod goes, its ReplicaSet's replacement appears on ``target``."""

    def hook(server: FakeApiServer, evicted: dict[str, Any]) -> None:
        meta = evicted["metadata"]
        server.delete("Pod", meta["name"], meta["namespace"])
        replacement = pod(
            "train-b", on=target, gpus=1, namespace=meta["namespace"], owner="ReplicaSet/train", labels={"app": "train"}
        )
        if not ready:
            replacement["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
        server.add(replacement)

    return hook


def _assert_in_order(
    requests: list[RecordedRequest], steps: list[tuple[str, str | re.Pattern[str]]]
) -> list[RecordedRequest]:
    """Each (method, path) step matches a later request than the previous one; returns the matched requests."""
    matched: list[RecordedRequest] = []
    position = 0
    for method, path in steps:
        for index in range(position, len(requests)):
            request = requests[index]
            ok = bool(path.fullmatch(request.path)) if isinstance(path, re.Pattern) else request.path == path
            if request.method == method and ok:
                matched.append(request)
                position = index + 1
                break
        else:
            raise AssertionError(f"no {method} {path} after request #{position}: {requests}")
    return matched


STATE_WRITE = re.compile(r"/api/v1/namespaces/gpu-compactor/configmaps(/gpu-compactor-state)?")
EVENTS_DEFAULT = "/api/v1/namespaces/default/events"


def test_executor_moves_one_pod_over_the_wire(fake_api: FakeApiServer) -> None:
    uid = _cluster(fake_api)
    fake_api.on_evict = _replace_on("gpu-2")
    client = client_of(fake_api)
    report = Executor(client, RunSettings(), SimulatedClock()).execute(_plan(uid))

    assert (report.status, report.moves_done, report.freed_nodes, report.reason) == ("succeeded", 1, ["gpu-1"], "")
    requests = fake_api.requests
    state_write, cordon, _, evict, _, uncordon, _, state_delete = _assert_in_order(
        requests,
        [
            ("POST", "/api/v1/namespaces/gpu-compactor/configmaps"),  # write-ahead state, before anything changes
            ("PATCH", "/api/v1/nodes/gpu-1"),
            ("POST", EVENTS_DEFAULT),
            ("POST", "/api/v1/namespaces/ml/pods/train-a/eviction"),
            ("POST", "/api/v1/namespaces/ml/events"),
            ("PATCH", "/api/v1/nodes/gpu-1"),
            ("POST", EVENTS_DEFAULT),
            ("DELETE", STATE_PATH),
        ],
    )
    assert state_write.json()["data"]["planId"] == "plan-wire-1"
    assert cordon.content_type == "application/merge-patch+json"
    assert cordon.json()["spec"]["taints"] == [
        {"key": ann.fence_key(ann.IDENTITY), "value": "plan-wire-1", "effect": "NoSchedule"}
    ]
    assert "unschedulable" not in cordon.json()["spec"]  # the cordon bit is the operators' own
    assert cordon.json()["metadata"]["annotations"][ann.CORDONED_BY] == "gpu-compactor"
    assert cordon.json()["metadata"]["annotations"][ann.PLAN_ID] == "plan-wire-1"
    assert evict.json()["kind"] == "Eviction" and evict.param("dryRun") is None
    assert uncordon.content_type == "application/merge-patch+json" and uncordon.json()["spec"]["taints"] is None
    assert writes_sent(fake_api)[-1] is state_delete

    # the state was written ahead of the cordon, and updated as the run went on
    state_writes = [r for r in requests if STATE_WRITE.fullmatch(r.path) and r.method in ("PUT", "POST")]
    assert requests.index(state_writes[0]) < requests.index(cordon)
    phases = [r.json()["data"]["phase"] for r in state_writes]
    assert phases[0] == "cordoning" and {"evicting", "finishing"} <= set(phases)
    assert all(r.param("dryRun") is None for r in writes_sent(fake_api))

    # the cluster after the run
    gpu_1 = fake_api.get("Node", "gpu-1")
    assert gpu_1 is not None and "unschedulable" not in gpu_1["spec"] and not gpu_1["spec"].get("taints")
    assert not any(key in (gpu_1["metadata"].get("annotations") or {}) for key in ann.OUR_ANNOTATIONS)
    assert fake_api.get("Pod", "train-a", "ml") is None and fake_api.get("Pod", "train-b", "ml") is not None
    assert fake_api.objects("ConfigMap") == []
    reasons = [e["reason"] for e in fake_api.events()]
    assert (
        reasons.count("CompactorCordon") == 1
        and reasons.count("CompactorEvict") == 1
        and reasons.count("CompactorUncordon") == 1
    )
    # the eviction spent the budget; the disruption controller gave it back once the replacement was Ready
    assert fake_api.get("PodDisruptionBudget", "train", "ml")["status"]["disruptionsAllowed"] == 1  # type: ignore[index]
    no_pod_deletes(fake_api)
    assert [r.path for r in requests if r.method == "DELETE"] == [STATE_PATH]


def test_executor_waits_for_the_replacement_in_real_time(fake_api: FakeApiServer) -> None:
    uid = _cluster(fake_api)
    fake_api.on_evict = _replace_on("gpu-2", ready=False)

    def become_ready() -> None:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            replacement = fake_api.get("Pod", "train-b", "ml")
            if replacement is not None:
                time.sleep(0.2)
                replacement["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
                fake_api.update(replacement)
                return
            time.sleep(0.02)

    helper = threading.Thread(target=become_ready, daemon=True)
    helper.start()
    settings = RunSettings.of(poll_seconds=0.05, replacement_timeout_seconds=10, backoff_seconds=0.05)
    report = Executor(client_of(fake_api), settings, RealClock()).execute(_plan(uid))
    helper.join(timeout=5)
    assert report.status == "succeeded", report.reason
    evicted_at = fake_api.requests_to("/api/v1/namespaces/ml/pods/train-a/eviction")[0].at
    polls = [
        r
        for r in fake_api.requests_to("/api/v1/namespaces/ml/pods", "GET")
        if r.at > evicted_at and r.param("fieldSelector") is None
    ]
    assert len(polls) >= 2  # it polled the namespace's pods (not every pod) until the replacement was Ready
    no_pod_deletes(fake_api)


def test_executor_rolls_back_when_the_eviction_is_refused(fake_api: FakeApiServer) -> None:
    uid = _cluster(fake_api)
    fake_api.inject(
        "/api/v1/namespaces/ml/pods/train-a/eviction",
        403,
        body=status_body(403, 'pods "train-a" is forbidden: cannot create resource "pods/eviction"'),
    )
    report = Executor(client_of(fake_api), RunSettings(), SimulatedClock()).execute(_plan(uid))
    assert report.status == "failed" and "refused (403)" in report.reason and "pods/eviction" in report.reason
    _assert_in_order(
        fake_api.requests,
        [
            ("PATCH", "/api/v1/nodes/gpu-1"),
            ("POST", "/api/v1/namespaces/ml/pods/train-a/eviction"),
            ("PATCH", "/api/v1/nodes/gpu-1"),
            ("DELETE", STATE_PATH),
        ],
    )
    gpu_1 = fake_api.get("Node", "gpu-1")
    assert (
        gpu_1 is not None
        and "unschedulable" not in gpu_1["spec"]
        and not gpu_1["spec"].get("taints")
        and not gpu_1["metadata"].get("annotations")
    )
    assert fake_api.get("Pod", "train-a", "ml") is not None
    assert "CompactorAbort" in [e["reason"] for e in fake_api.events()]
    no_pod_deletes(fake_api)


def test_a_state_over_the_api_servers_1_mib_limit_is_refused_by_the_fake_api_as_by_the_real_one(
    fake_api: FakeApiServer,
) -> None:
    client = client_of(fake_api)
    client.read_state(STATE)
    with pytest.raises(ClusterError) as info:
        client.write_state(STATE, {"plan": "x" * (1024 * 1024)})
    assert info.value.status == 422 and "must have at most 1048576 bytes" in str(info.value)
    client.write_state(STATE, {"plan": "x" * 200_000})  # what the executor writes stays far below it


@pytest.mark.parametrize(
    ("headers", "body", "expected"),
    [
        ({"Retry-After": "7"}, None, 7.0),
        (
            {},
            {
                "kind": "Status",
                "status": "Failure",
                "code": 429,
                "message": "slow down",
                "details": {"retryAfterSeconds": 3},
            },
            3.0,
        ),
        ({}, None, None),
        ({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, None, None),  # an HTTP date: not seconds, so not guessed at
    ],
    ids=["header", "status-details", "none", "http-date"],
)
def test_a_refused_patch_says_how_long_the_api_server_asked_to_wait(
    fake_api: FakeApiServer, headers: dict[str, str], body: dict[str, Any] | None, expected: float | None
) -> None:
    fake_api.add(node("gpu-1", gpus=8))
    options: dict[str, Any] = {"headers": headers} | ({"body": body} if body is not None else {})
    fake_api.inject("/api/v1/nodes/gpu-1", 429, **options)
    with pytest.raises(ClusterError) as refused:
        client_of(fake_api).patch_node("gpu-1", {"metadata": {"labels": {"a": "b"}}})
    assert refused.value.status == 429 and refused.value.retry_after == expected

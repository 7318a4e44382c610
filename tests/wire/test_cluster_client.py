"""KubeClusterClient against the fake API server, through the official kubernetes client: exact requests, replies, errors.

The executor running a plan over the wire: test_executor_over_the_wire.py.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

import compactor.kube.cluster_client as cluster_client_module
from compactor.actions.port import annotations as ann
from compactor.actions.port.client import EvictionOutcome, ObjectRef
from compactor.errors import ClusterError
from tests.builders import node, pdb, pod
from tests.fakeapi import FakeApiServer, status_body
from tests.wire.requests_seen import client_of, writes_sent

STATE = "gpu-compactor-state"
STATE_PATH = f"/api/v1/namespaces/gpu-compactor/configmaps/{STATE}"
ISO_SECONDS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
ISO_MICROS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text and "Traceback" not in text, text
    return text


# ---------------------------------------------------------------- reads


def test_list_nodes_is_paginated_raw_json_with_kind(fake_api: FakeApiServer) -> None:
    fake_api.add(*(node(f"gpu-{i}", gpus=8) for i in range(5)))
    nodes = client_of(fake_api, page_size=2).list_nodes()
    assert sorted(n["metadata"]["name"] for n in nodes) == [f"gpu-{i}" for i in range(5)]
    assert all(n["kind"] == "Node" and n["apiVersion"] == "v1" for n in nodes)
    assert nodes[0]["status"]["allocatable"]["nvidia.com/gpu"] == "8"  # camelCase JSON, not model objects
    lists = fake_api.requests_to("/api/v1/nodes", "GET")
    assert [r.param("limit") for r in lists] == ["2", "2", "2"]
    assert lists[0].param("continue") is None and all(r.param("continue") for r in lists[1:])


def test_list_pods_on_a_node_uses_a_field_selector_across_namespaces(fake_api: FakeApiServer) -> None:
    fake_api.add(pod("a", on="gpu-1"), pod("b", on="gpu-1", namespace="ml"), pod("c", on="gpu-2"), pod("pending"))
    found = client_of(fake_api).list_pods(node_name="gpu-1")
    assert sorted((p["metadata"]["namespace"], p["metadata"]["name"]) for p in found) == [("default", "a"), ("ml", "b")]
    assert all(p["kind"] == "Pod" and p["apiVersion"] == "v1" for p in found)
    (request,) = fake_api.requests_to("/api/v1/pods", "GET")
    assert request.param("fieldSelector") == "spec.nodeName=gpu-1" and request.param("limit") == "500"


def test_the_pods_waiting_for_a_node_are_one_list_narrowed_by_the_server(fake_api: FakeApiServer) -> None:
    done = pod("done")
    done["status"] = {"phase": "Failed"}  # unbound and finished: not waiting
    fake_api.add(pod("a", on="gpu-1"), pod("waiting", gpus=8), pod("waiting-too", namespace="ml"), done)
    found = client_of(fake_api, page_size=1).list_pending_pods()
    assert sorted((p["metadata"]["namespace"], p["metadata"]["name"]) for p in found) == [
        ("default", "waiting"),
        ("ml", "waiting-too"),
    ]
    requests = fake_api.requests_to("/api/v1/pods", "GET")
    assert {r.param("fieldSelector") for r in requests} == {"spec.nodeName=,status.phase=Pending"}


def test_list_all_pods_has_no_field_selector(fake_api: FakeApiServer) -> None:
    fake_api.add(pod("a", on="gpu-1"), pod("b", on="gpu-2", namespace="ml"), pod("pending"))
    assert len(client_of(fake_api, page_size=1).list_pods()) == 3
    requests = fake_api.requests_to("/api/v1/pods", "GET")
    assert len(requests) == 3 and all(r.param("fieldSelector") is None for r in requests)


def test_scans_send_the_same_paginated_lists_and_keep_what_keep_returns_of_each_lean_item(
    fake_api: FakeApiServer,
) -> None:
    fake_api.add(
        *(node(f"gpu-{i}", gpus=8) for i in range(3)),
        pod("a", on="gpu-1"),
        pod("b", on="gpu-2", namespace="ml"),
        pod("pending"),
    )
    client = client_of(fake_api, page_size=2)
    seen: list[str] = []

    def bound(p: dict[str, Any]) -> str | None:
        seen.append(p["kind"])
        assert "managedFields" not in p["metadata"]
        return p["spec"].get("nodeName")

    assert sorted(client.scan_pods(bound)) == ["gpu-1", "gpu-2"]  # None is left out
    assert seen == ["Pod"] * 3
    assert client.scan_nodes(lambda n: n["metadata"]["name"]) == [n["metadata"]["name"] for n in client.list_nodes()]
    pods = fake_api.requests_to("/api/v1/pods", "GET")
    assert [r.param("limit") for r in pods] == ["2", "2"] and all(r.param("fieldSelector") is None for r in pods)


def test_a_scan_whose_continue_token_expires_starts_again_from_the_first_item(fake_api: FakeApiServer) -> None:
    fake_api.add(*(pod(f"p{i}", on="gpu-1") for i in range(5)))
    fake_api.expire_continue(times=1)
    names = client_of(fake_api, page_size=2).scan_pods(lambda p: p["metadata"]["name"])
    assert [fake_api.reply_to(r).status for r in fake_api.requests_to("/api/v1/pods")] == [200, 410, 200, 200, 200]  # type: ignore[union-attr]
    assert sorted(names) == [f"p{i}" for i in range(5)]  # what was kept of the first pages is dropped with them


def test_list_pdbs_in_all_namespaces_is_policy_v1(fake_api: FakeApiServer) -> None:
    fake_api.add(pdb("train", match={"app": "train"}, namespace="ml", allowed=0), pdb("web", match={"app": "web"}))
    pdbs = client_of(fake_api).list_pdbs()
    assert sorted(p["metadata"]["name"] for p in pdbs) == ["train", "web"]
    assert all(p["kind"] == "PodDisruptionBudget" and p["apiVersion"] == "policy/v1" for p in pdbs)
    assert {r.path for r in fake_api.requests} == {"/apis/policy/v1/poddisruptionbudgets"}


def test_get_node_and_pod_return_raw_objects_or_none_on_404(fake_api: FakeApiServer) -> None:
    fake_api.add(node("gpu-1", gpus=8), pod("p", on="gpu-1", namespace="ml"))
    client = client_of(fake_api)
    got = client.get_node("gpu-1")
    assert got is not None and got["kind"] == "Node" and got["metadata"]["name"] == "gpu-1"
    assert client.get_node("gone") is None
    found = client.get_pod("ml", "p")
    assert found is not None and found["spec"]["nodeName"] == "gpu-1"
    assert client.get_pod("default", "p") is None
    assert [(r.method, r.path) for r in fake_api.requests] == [
        ("GET", "/api/v1/nodes/gpu-1"),
        ("GET", "/api/v1/nodes/gone"),
        ("GET", "/api/v1/namespaces/ml/pods/p"),
        ("GET", "/api/v1/namespaces/default/pods/p"),
    ]


def test_get_node_forbidden_is_one_line_cluster_error(fake_api: FakeApiServer) -> None:
    message = 'nodes "gpu-1" is forbidden: User "system:serviceaccount:x:y" cannot get resource "nodes"'
    fake_api.inject("/api/v1/nodes/gpu-1", 403, body=status_body(403, message))
    with pytest.raises(ClusterError) as info:
        client_of(fake_api).get_node("gpu-1")
    assert _one_line(info.value) == f"forbidden (403) reading node gpu-1: {message}"
    assert info.value.status == 403


def test_list_failure_is_one_line_cluster_error(fake_api: FakeApiServer) -> None:
    fake_api.inject("/api/v1/pods", 403)
    with pytest.raises(ClusterError) as info:
        client_of(fake_api).list_pods(node_name="gpu-1")
    assert "forbidden (403) listing pods on node gpu-1" in _one_line(info.value) and info.value.status == 403


def test_read_timeout_is_one_line(fake_api: FakeApiServer) -> None:
    fake_api.add(node("gpu-1"))
    fake_api.inject("/api/v1/nodes/gpu-1", delay=1.0, times=None, passthrough=True)
    with pytest.raises(ClusterError) as info:
        client_of(fake_api, request_timeout=0.2).get_node("gpu-1")
    assert _one_line(info.value) == f"cannot reach the Kubernetes API at {fake_api.url} (reading node gpu-1): timed out"
    assert info.value.status == 0


def test_idempotent_reads_are_retried_by_urllib3_after_a_timeout(fake_api: FakeApiServer) -> None:
    """The kubernetes client's urllib3 pool retries GET on read errors; writes are sent once (see the eviction and state tests)."""
    fake_api.add(node("gpu-1"))
    fake_api.inject("/api/v1/nodes/gpu-1", delay=1.0, passthrough=True)
    assert client_of(fake_api, request_timeout=0.2).get_node("gpu-1") is not None
    assert len(fake_api.requests_to("/api/v1/nodes/gpu-1")) == 2


def test_connection_refused(fake_api: FakeApiServer) -> None:
    client = client_of(fake_api)
    url = fake_api.url
    fake_api.stop()
    with pytest.raises(ClusterError) as info:
        client.get_node("gpu-1")
    assert _one_line(info.value) == f"cannot reach the Kubernetes API at {url} (reading node gpu-1): connection refused"
    result = client.evict("default", "p")
    assert (
        result.outcome == EvictionOutcome.ERROR and result.status == 0 and result.message.endswith("connection refused")
    )


# ---------------------------------------------------------------- patch_node


def test_patch_node_is_a_json_merge_patch(fake_api: FakeApiServer) -> None:
    fake_api.add(node("gpu-1", gpus=8))
    patch = ann.fence_patch(node("gpu-1", gpus=8), ann.IDENTITY, "plan-1", "2026-01-01T00:00:00Z")
    patched = client_of(fake_api).patch_node("gpu-1", patch)
    (request,) = fake_api.requests
    assert (request.method, request.path, request.query) == ("PATCH", "/api/v1/nodes/gpu-1", {})
    assert request.content_type == "application/merge-patch+json"
    assert request.json() == patch
    assert patched["kind"] == "Node" and patched["spec"]["taints"] == [
        {"key": ann.fence_key(ann.IDENTITY), "value": "plan-1", "effect": "NoSchedule"}
    ]
    assert patched["metadata"]["annotations"][ann.CORDONED_BY] == "gpu-compactor"


def test_merge_patch_null_deletes_keys_and_replaces_lists(fake_api: FakeApiServer) -> None:
    mine = {"key": "compactor.io/reserved", "value": "x", "effect": "NoSchedule"}
    theirs = {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}
    fake_api.add(node("gpu-1", gpus=8, unschedulable=True, taints=[theirs, mine]))  # an operator's cordon too
    client = client_of(fake_api)
    before = client.get_node("gpu-1")
    assert before is not None
    client.patch_node("gpu-1", ann.fence_patch(before, ann.IDENTITY, "plan-1", "2026-01-01T00:00:00Z"))
    current = client.get_node("gpu-1")
    assert current is not None
    client.patch_node("gpu-1", ann.release_patch(current, ann.IDENTITY, "compactor.io/reserved") or {})
    stored = fake_api.get("Node", "gpu-1")
    assert stored is not None
    assert stored["spec"]["unschedulable"] is True  # the operator's cordon is theirs
    assert not any(key in (stored["metadata"].get("annotations") or {}) for key in ann.OUR_ANNOTATIONS)
    assert stored["spec"]["taints"] == [theirs]
    body = fake_api.requests_to("/api/v1/nodes/gpu-1", "PATCH")[-1].json()
    assert "unschedulable" not in body["spec"] and body["metadata"]["annotations"][ann.CORDONED_BY] is None


def test_the_kubernetes_client_alone_would_send_a_strategic_merge_patch(fake_api: FakeApiServer) -> None:
    """Why KubeClusterClient forces the content type: CoreV1Api.patch_node picks strategic merge for a dict."""
    fake_api.add(node("gpu-1"))
    k8s.CoreV1Api(fake_api.api_client()).patch_node("gpu-1", {"spec": {"unschedulable": True}})
    assert fake_api.requests[-1].content_type == "application/strategic-merge-patch+json"


def test_patch_node_forbidden_is_one_line(fake_api: FakeApiServer) -> None:
    message = 'nodes "gpu-1" is forbidden: User "system:serviceaccount:gpu-compactor:gpu-compactor" cannot patch resource "nodes"'
    fake_api.add(node("gpu-1"))
    fake_api.inject(
        "/api/v1/nodes/gpu-1", 403, method="PATCH", body=status_body(403, message + "\n  at the cluster scope")
    )
    with pytest.raises(ClusterError) as info:
        client_of(fake_api).patch_node("gpu-1", {"spec": {"unschedulable": True}})
    assert _one_line(info.value) == f"forbidden (403) patching node gpu-1: {message} at the cluster scope"
    assert info.value.status == 403
    assert "unschedulable" not in fake_api.get("Node", "gpu-1")["spec"]  # type: ignore[index]


def test_patch_missing_node_and_server_errors_raise(fake_api: FakeApiServer) -> None:
    client = client_of(fake_api)
    with pytest.raises(ClusterError) as info:
        client.patch_node("gone", {"spec": {"unschedulable": True}})
    assert _one_line(info.value) == 'not found (404) patching node gone: nodes "gone" not found'
    fake_api.add(node("gpu-1"))
    fake_api.inject("/api/v1/nodes/gpu-1", 503, method="PATCH")
    with pytest.raises(ClusterError) as info:
        client.patch_node("gpu-1", {"spec": {"unschedulable": True}})
    assert (
        _one_line(info.value).startswith("service unavailable (503) patching node gpu-1") and info.value.status == 503
    )


def test_patch_timeout_is_not_retried(fake_api: FakeApiServer) -> None:
    fake_api.add(node("gpu-1"))
    fake_api.inject("/api/v1/nodes/gpu-1", method="PATCH", delay=1.0, passthrough=True)
    with pytest.raises(ClusterError) as info:
        client_of(fake_api, write_timeout=0.2).patch_node("gpu-1", {"spec": {"unschedulable": True}})
    assert _one_line(info.value).endswith("(patching node gpu-1): timed out")
    assert len(fake_api.requests_to("/api/v1/nodes/gpu-1", "PATCH")) == 1


# ---------------------------------------------------------------- evict


def test_evict_posts_a_policy_v1_eviction(fake_api: FakeApiServer) -> None:
    fake_api.add(pod("p", on="gpu-1", namespace="ml"))
    result = client_of(fake_api).evict("ml", "p")
    assert (result.outcome, result.status, result.message) == (EvictionOutcome.EVICTED, 201, "")
    (request,) = fake_api.requests
    assert (request.method, request.path, request.query) == ("POST", "/api/v1/namespaces/ml/pods/p/eviction", {})
    assert request.content_type == "application/json"
    body = request.json()
    assert body["apiVersion"] == "policy/v1" and body["kind"] == "Eviction"
    assert body["metadata"] == {"name": "p", "namespace": "ml"}
    assert "dryRun" not in body.get("deleteOptions", {})
    assert fake_api.get("Pod", "p", "ml") is None  # the fake deletes an evicted pod, as the API server does


@pytest.mark.parametrize("dry_run_all", [False, True])
def test_evict_dry_run_asks_the_server_and_changes_nothing(fake_api: FakeApiServer, dry_run_all: bool) -> None:
    fake_api.add(pod("p", on="gpu-1"), pdb("pdb", match={"app": "app"}, allowed=1))
    result = client_of(fake_api, dry_run_all=dry_run_all).evict("default", "p", dry_run=not dry_run_all)
    assert result.outcome == EvictionOutcome.EVICTED
    (request,) = fake_api.requests
    assert request.param("dryRun") == "All" and request.json()["deleteOptions"]["dryRun"] == ["All"]
    assert fake_api.get("Pod", "p") is not None
    assert fake_api.get("PodDisruptionBudget", "pdb")["status"]["disruptionsAllowed"] == 1  # type: ignore[index]


def test_evict_as_read_carries_its_resource_version_and_a_pod_changed_since_answers_409(
    fake_api: FakeApiServer,
) -> None:
    fake_api.add(pod("p", on=None, phase="Pending"))
    read = fake_api.get("Pod", "p")
    assert read is not None
    version, uid = read["metadata"]["resourceVersion"], read["metadata"]["uid"]
    fake_api.update({**read, "spec": {**read["spec"], "nodeName": "gpu-1"}})  # bound meanwhile: still phase Pending
    result = client_of(fake_api).evict("default", "p", uid=uid, resource_version=version)
    assert (result.outcome, result.status) == (EvictionOutcome.CONFLICT, 409)
    (request,) = fake_api.requests_to("/api/v1/namespaces/default/pods/p/eviction")
    assert request.json()["deleteOptions"]["preconditions"] == {"uid": uid, "resourceVersion": version}
    assert fake_api.get("Pod", "p") is not None


def test_evict_missing_pod_is_gone(fake_api: FakeApiServer) -> None:
    result = client_of(fake_api).evict("default", "nope")
    assert (result.outcome, result.status) == (EvictionOutcome.GONE, 404) and 'pods "nope" not found' in result.message


def test_evict_blocked_by_a_pdb_keeps_the_servers_message(fake_api: FakeApiServer) -> None:
    fake_api.add(pod("p", on="gpu-1", labels={"app": "train"}), pdb("train-budget", match={"app": "train"}, allowed=0))
    result = client_of(fake_api).evict("default", "p")
    assert (result.outcome, result.status) == (EvictionOutcome.BLOCKED, 429)
    assert result.message.startswith("Cannot evict pod as it would violate the pod's disruption budget.")
    assert "The disruption budget train-budget needs" in result.message and "\n" not in result.message
    assert fake_api.get("Pod", "p") is not None


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (409, EvictionOutcome.CONFLICT),
        (429, EvictionOutcome.BLOCKED),
        (500, EvictionOutcome.ERROR),
        (502, EvictionOutcome.ERROR),
        (503, EvictionOutcome.ERROR),
        (504, EvictionOutcome.ERROR),
        (400, EvictionOutcome.FORBIDDEN),
        (401, EvictionOutcome.FORBIDDEN),
        (403, EvictionOutcome.FORBIDDEN),
        (405, EvictionOutcome.FORBIDDEN),
        (422, EvictionOutcome.FORBIDDEN),
    ],
)
def test_evict_maps_statuses_without_raising(fake_api: FakeApiServer, status: int, outcome: EvictionOutcome) -> None:
    fake_api.add(pod("p", on="gpu-1"))
    fake_api.inject("/api/v1/namespaces/default/pods/p/eviction", status, body=status_body(status, f"answer {status}"))
    result = client_of(fake_api).evict("default", "p")
    assert (result.outcome, result.status, result.message) == (outcome, status, f"answer {status}")
    assert fake_api.get("Pod", "p") is not None


def test_evict_error_without_a_status_body_still_has_a_message(fake_api: FakeApiServer) -> None:
    fake_api.add(pod("p", on="gpu-1"))
    fake_api.inject("/api/v1/namespaces/default/pods/p/eviction", 502, body="<html>bad gateway</html>")
    result = client_of(fake_api).evict("default", "p")
    assert (result.outcome, result.status) == (EvictionOutcome.ERROR, 502) and result.message


def test_evict_timeout_is_an_error_and_is_sent_once(fake_api: FakeApiServer) -> None:
    fake_api.add(pod("p", on="gpu-1"))
    fake_api.inject("/api/v1/namespaces/default/pods/p/eviction", delay=1.0, passthrough=True)
    started = time.monotonic()
    result = client_of(fake_api, write_timeout=0.2).evict("default", "p")
    assert (result.outcome, result.status) == (EvictionOutcome.ERROR, 0)
    assert result.message == f"cannot reach the Kubernetes API at {fake_api.url} (evicting pod default/p): timed out"
    assert time.monotonic() - started < 0.9
    # POST is never retried by urllib3
    assert len(fake_api.requests_to("/api/v1/namespaces/default/pods/p/eviction")) == 1


def test_evict_dropped_connection_is_an_error_and_is_sent_once(fake_api: FakeApiServer) -> None:
    fake_api.add(pod("p", on="gpu-1"))
    fake_api.inject("/api/v1/namespaces/default/pods/p/eviction", drop=True)
    result = client_of(fake_api).evict("default", "p")
    assert (result.outcome, result.status) == (EvictionOutcome.ERROR, 0)
    assert result.message.endswith("(evicting pod default/p): the connection closed without a reply")
    assert len(fake_api.requests_to("/api/v1/namespaces/default/pods/p/eviction")) == 1
    assert fake_api.get("Pod", "p") is not None


def test_no_code_path_deletes_a_pod(fake_api: FakeApiServer) -> None:
    source = Path(cluster_client_module.__file__).read_text(encoding="utf-8")
    assert "delete_namespaced_pod" not in source and "delete_collection_namespaced_pod" not in source
    client = client_of(fake_api)
    with pytest.raises(AssertionError):
        client._send(
            "DELETE", "/api/v1/namespaces/{namespace}/pods/{name}", {"namespace": "default", "name": "p"}, "deleting"
        )
    assert fake_api.requests == []


# ---------------------------------------------------------------- events


def test_node_event_goes_to_default_namespace(fake_api: FakeApiServer) -> None:
    client_of(fake_api).create_event(
        ObjectRef("Node", "gpu-1"), reason="CompactorCordon", message="fenced by gpu-compactor"
    )
    (request,) = fake_api.requests
    assert (request.method, request.path, request.query) == ("POST", "/api/v1/namespaces/default/events", {})
    assert request.content_type == "application/json"
    body = request.json()
    assert body["apiVersion"] == "v1" and body["kind"] == "Event"
    assert re.fullmatch(r"gpu-1\.[0-9a-f]{16}", body["metadata"]["name"]) and body["metadata"]["namespace"] == "default"
    assert body["involvedObject"] == {"kind": "Node", "name": "gpu-1", "apiVersion": "v1"}
    assert (body["reason"], body["message"], body["type"]) == ("CompactorCordon", "fenced by gpu-compactor", "Normal")
    assert body["source"] == {"component": "gpu-compactor"} and body["reportingComponent"] == "gpu-compactor"
    assert body["reportingInstance"].startswith("gpu-compactor-") and body["action"] == "CompactorCordon"
    assert body["count"] == 1
    assert ISO_SECONDS.fullmatch(body["firstTimestamp"]) and body["firstTimestamp"] == body["lastTimestamp"]
    assert ISO_MICROS.fullmatch(body["eventTime"])  # MicroTime: the API server insists on the 6 fraction digits
    (stored,) = fake_api.events("default")
    assert stored["involvedObject"]["name"] == "gpu-1"


def test_pod_event_goes_to_the_pods_namespace(fake_api: FakeApiServer) -> None:
    client = client_of(fake_api)
    client.create_event(
        ObjectRef("Pod", "train-0", "ml", "uid-1"), reason="CompactorEvict", message="moved", type_="Warning"
    )
    client.create_event(ObjectRef("Pod", "train-0", "ml", "uid-1"), reason="CompactorEvict", message="again")
    events = fake_api.events("ml")
    assert len(events) == 2 and events[0]["metadata"]["name"] != events[1]["metadata"]["name"]
    body = fake_api.requests[0].json()
    assert fake_api.requests[0].path == "/api/v1/namespaces/ml/events"
    assert body["involvedObject"] == {
        "kind": "Pod",
        "name": "train-0",
        "namespace": "ml",
        "uid": "uid-1",
        "apiVersion": "v1",
    }
    assert body["type"] == "Warning"


def test_event_message_is_cut_to_the_servers_limit(fake_api: FakeApiServer) -> None:
    client_of(fake_api).create_event(ObjectRef("Node", "gpu-1"), reason="CompactorAbort", message="é" * 2000)
    message = fake_api.requests[0].json()["message"]
    assert len(message.encode()) <= 1024 and message.endswith("...")


def test_event_failure_raises_cluster_error(fake_api: FakeApiServer) -> None:
    fake_api.inject("/api/v1/namespaces/default/events", 403, body=status_body(403, "events is forbidden"))
    with pytest.raises(ClusterError) as info:
        client_of(fake_api).create_event(ObjectRef("Node", "gpu-1"), reason="CompactorCordon", message="m")
    assert _one_line(info.value) == "forbidden (403) creating event CompactorCordon for node gpu-1: events is forbidden"


# ---------------------------------------------------------------- state ConfigMap


def test_state_configmap_round_trip(fake_api: FakeApiServer) -> None:
    client = client_of(fake_api)
    assert client.read_state(STATE) is None
    client.write_state(STATE, {"planId": "plan-1", "phase": "cordoning"})
    assert client.read_state(STATE) == {"planId": "plan-1", "phase": "cordoning"}
    client.write_state(STATE, {"planId": "plan-1", "done": "[]"})
    assert client.read_state(STATE) == {"planId": "plan-1", "done": "[]"}  # replaced, not merged
    stored = fake_api.get("ConfigMap", STATE, "gpu-compactor")
    assert stored is not None and stored["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpu-compactor"}
    client.write_state(STATE, None)
    assert client.read_state(STATE) is None
    client.write_state(STATE, None)  # already gone: fine
    writes = writes_sent(fake_api)
    assert [(r.method, r.path) for r in writes] == [
        ("POST", "/api/v1/namespaces/gpu-compactor/configmaps"),  # read as absent: created
        ("PUT", STATE_PATH),
        ("DELETE", STATE_PATH),
        ("DELETE", STATE_PATH),  # 404
    ]
    created = writes[0].json()
    assert (
        created["kind"] == "ConfigMap"
        and created["metadata"]["name"] == STATE
        and created["data"]["phase"] == "cordoning"
    )
    # compare-and-swap: each replace and the delete name the version this client last read
    assert writes[1].json()["metadata"]["resourceVersion"] and writes[2].json()["preconditions"]["resourceVersion"]


def test_state_in_another_namespace(fake_api: FakeApiServer) -> None:
    client = client_of(fake_api, namespace="ops")
    client.write_state("s", {"a": "1"})
    assert fake_api.get("ConfigMap", "s", "ops") is not None and client.read_state("s") == {"a": "1"}


def test_a_state_written_by_someone_else_meanwhile_is_a_conflict_never_overwritten(fake_api: FakeApiServer) -> None:
    client = client_of(fake_api)
    assert client.read_state(STATE) is None
    fake_api.add(
        {"kind": "ConfigMap", "metadata": {"name": STATE, "namespace": "gpu-compactor"}, "data": {"theirs": "1"}}
    )
    with pytest.raises(ClusterError, match="changed by another writer") as info:
        client.write_state(STATE, {"mine": "2"})  # it was absent when read: create, and find it there (409)
    assert info.value.status == 409
    assert client.read_state(STATE) == {"theirs": "1"}
    other = client_of(fake_api)
    other.read_state(STATE)
    other.write_state(STATE, {"theirs": "2"})  # another writer replaces it after our read
    with pytest.raises(ClusterError, match="changed by another writer"):
        client.write_state(STATE, {"mine": "3"})
    with pytest.raises(ClusterError, match="changed by another writer"):
        client.write_state(STATE, None)  # nor deleted from under it
    assert fake_api.get("ConfigMap", STATE, "gpu-compactor")["data"] == {"theirs": "2"}  # type: ignore[index]


def test_state_errors_are_cluster_errors(fake_api: FakeApiServer) -> None:
    client = client_of(fake_api)
    fake_api.inject(STATE_PATH, 403, method="GET", body=status_body(403, "configmaps is forbidden"))
    with pytest.raises(ClusterError) as info:
        client.read_state(STATE)
    assert _one_line(info.value) == f"forbidden (403) reading configmap gpu-compactor/{STATE}: configmaps is forbidden"
    fake_api.inject(
        "/api/v1/namespaces/gpu-compactor/configmaps",
        404,
        method="POST",
        body=status_body(404, 'namespaces "gpu-compactor" not found'),
    )
    with pytest.raises(ClusterError) as info:
        client.write_state(STATE, {"a": "1"})
    assert (
        _one_line(info.value)
        == f'not found (404) creating configmap gpu-compactor/{STATE}: namespaces "gpu-compactor" not found'
    )
    fake_api.inject(STATE_PATH, 500, method="DELETE")
    with pytest.raises(ClusterError) as info:
        client.write_state(STATE, None)
    assert info.value.status == 500


# ---------------------------------------------------------------- dry_run_all


def test_dry_run_all_marks_every_write_and_persists_nothing(fake_api: FakeApiServer) -> None:
    fake_api.add(node("gpu-1", gpus=8), pod("p", on="gpu-1"))
    client = client_of(fake_api, dry_run_all=True)
    patched = client.patch_node("gpu-1", {"spec": {"unschedulable": True}})
    assert patched["spec"]["unschedulable"] is True  # the server's answer: what it would have stored
    assert client.evict("default", "p").outcome == EvictionOutcome.EVICTED
    client.create_event(ObjectRef("Node", "gpu-1"), reason="CompactorCordon", message="m")
    client.write_state(STATE, {"a": "1"})
    client.write_state(STATE, None)
    assert client.get_node("gpu-1") is not None and client.read_state(STATE) is None
    writes = writes_sent(fake_api)
    assert [r.method for r in writes] == ["PATCH", "POST", "POST", "POST", "DELETE"]
    assert all(r.param("dryRun") == "All" for r in writes)
    assert all(r.param("dryRun") is None for r in fake_api.requests if r.method == "GET")
    assert "unschedulable" not in fake_api.get("Node", "gpu-1")["spec"]  # type: ignore[index]
    assert fake_api.get("Pod", "p") is not None and fake_api.events() == []
    assert fake_api.objects("ConfigMap") == []

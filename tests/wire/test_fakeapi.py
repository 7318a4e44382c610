"""The fake API server's own semantics, through the official kubernetes client.

Later wire tests (the executor's) rely on these behaviours: eviction with PDBs,
node patches, events, injected failures and request recording.
"""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime, timedelta

import pytest
import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from tests.builders import node, pdb, pod
from tests.fakeapi import DisruptionController, FakeApiServer, Reply


def _core(fake: FakeApiServer, **config: object) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(fake.api_client(**config))


def _eviction(name: str, namespace: str = "default", **delete_options: object) -> k8s.V1Eviction:
    return k8s.V1Eviction(
        api_version="policy/v1",
        kind="Eviction",
        metadata=k8s.V1ObjectMeta(name=name, namespace=namespace),
        delete_options=k8s.V1DeleteOptions(**delete_options) if delete_options else None,
    )


def _status(exc: ApiException) -> dict[str, object]:
    body = json.loads(exc.body)
    assert body["kind"] == "Status" and body["apiVersion"] == "v1" and body["status"] == "Failure"
    assert body["code"] == exc.status
    return body


# ---------------------------------------------------------------- reads


def test_get_single_objects_and_not_found_status(fake_api: FakeApiServer) -> None:
    fake_api.add(node("n1", gpus=8), pod("p1", on="n1", namespace="ml"))
    core = _core(fake_api)
    assert core.read_node("n1").metadata.name == "n1"
    read = core.read_namespaced_pod("p1", "ml")
    assert read.spec.node_name == "n1" and read.metadata.resource_version
    with pytest.raises(ApiException) as info:
        core.read_namespaced_pod("p1", "default")
    assert info.value.status == 404
    body = _status(info.value)
    assert body["reason"] == "NotFound" and body["details"] == {"name": "p1", "kind": "pods"}
    assert body["message"] == 'pods "p1" not found'


def test_list_items_omit_kind_like_the_real_server(fake_api: FakeApiServer) -> None:
    fake_api.add(node("n1"))
    response = _core(fake_api).list_node(_preload_content=False)
    body = json.loads(response.data)
    assert body["kind"] == "NodeList" and body["apiVersion"] == "v1"
    assert "kind" not in body["items"][0] and body["items"][0]["metadata"]["name"] == "n1"
    assert body["metadata"]["resourceVersion"]


def test_pagination_and_forced_expiry(fake_api: FakeApiServer) -> None:
    fake_api.add(*(pod(f"p{i:02d}", on="n1") for i in range(5)))
    core = _core(fake_api)
    first = core.list_namespaced_pod("default", limit=2)
    assert [p.metadata.name for p in first.items] == ["p00", "p01"]
    assert first.metadata.remaining_item_count == 3 and first.metadata._continue
    second = core.list_namespaced_pod("default", limit=2, _continue=first.metadata._continue)
    assert [p.metadata.name for p in second.items] == ["p02", "p03"]
    fake_api.expire_continue(second.metadata._continue)
    with pytest.raises(ApiException) as info:
        core.list_namespaced_pod("default", limit=2, _continue=second.metadata._continue)
    body = _status(info.value)
    assert info.value.status == 410 and body["reason"] == "Expired" and body["metadata"]["continue"]
    third = core.list_namespaced_pod("default", limit=2, _continue=second.metadata._continue)  # expired once only
    assert [p.metadata.name for p in third.items] == ["p04"] and not third.metadata._continue
    with pytest.raises(ApiException) as info:
        core.list_namespaced_pod("default", limit=2, _continue="garbage")
    assert info.value.status == 400


def test_label_and_field_selectors(fake_api: FakeApiServer) -> None:
    fake_api.add(
        pod("a", on="n1", labels={"app": "a", "tier": "gpu"}),
        pod("b", on="n2", labels={"app": "b"}),
        pod("c", labels={"app": "c"}),
        node("n1", labels={"pool": "x"}),
        node("n2", unschedulable=True),
    )
    core = _core(fake_api)

    def names(**kwargs: object) -> list[str]:
        return [p.metadata.name for p in core.list_pod_for_all_namespaces(**kwargs).items]

    assert names(field_selector="spec.nodeName=n1") == ["a"]
    assert names(field_selector="spec.nodeName=") == ["c"]
    assert names(field_selector="status.phase!=Pending,metadata.namespace=default") == ["a", "b"]
    assert names(field_selector="metadata.name==b") == ["b"]
    assert names(label_selector="app in (a, c)") == ["a", "c"]
    assert names(label_selector="app notin (a),!tier") == ["b", "c"]
    assert names(label_selector="tier") == ["a"]
    assert names(label_selector="app!=a") == ["b", "c"]
    assert [n.metadata.name for n in core.list_node(field_selector="spec.unschedulable=true").items] == ["n2"]
    assert [n.metadata.name for n in core.list_node(label_selector="pool=x").items] == ["n1"]
    with pytest.raises(ApiException) as info:
        core.list_pod_for_all_namespaces(field_selector="spec.containers=x")
    assert info.value.status == 400 and "field label not supported" in _status(info.value)["message"]


# ---------------------------------------------------------------- node patches


def test_patch_node_strategic_merge_by_default(fake_api: FakeApiServer) -> None:
    fake_api.add(node("n1", gpus=8, labels={"drop-me": "x"}))
    core = _core(fake_api)
    before = fake_api.get("Node", "n1")
    assert before is not None
    patched = core.patch_node(
        "n1", {"spec": {"unschedulable": True}, "metadata": {"labels": {"drop-me": None, "new": "y"}}}
    )
    assert patched.spec.unschedulable is True
    stored = fake_api.get("Node", "n1")
    assert stored is not None
    assert stored["spec"]["unschedulable"] is True
    assert "drop-me" not in stored["metadata"]["labels"] and stored["metadata"]["labels"]["new"] == "y"
    assert stored["metadata"]["labels"]["nvidia.com/gpu.product"]  # merged, not replaced
    assert int(stored["metadata"]["resourceVersion"]) > int(before["metadata"]["resourceVersion"])
    (request,) = fake_api.requests_to("/api/v1/nodes/n1", "PATCH")
    assert request.content_type == "application/strategic-merge-patch+json"
    assert request.json() == {"spec": {"unschedulable": True}, "metadata": {"labels": {"drop-me": None, "new": "y"}}}


def test_patch_node_merge_patch_and_resource_version_conflict(fake_api: FakeApiServer) -> None:
    fake_api.add(node("n1", taints=[{"key": "a", "effect": "NoSchedule"}]))
    core = _core(fake_api)
    taint = {"key": "compactor/draining", "value": "true", "effect": "NoSchedule"}
    core.patch_node("n1", {"spec": {"taints": [taint]}}, _content_type="application/merge-patch+json")
    stored = fake_api.get("Node", "n1")
    assert stored is not None and stored["spec"]["taints"] == [taint]  # lists are replaced
    assert fake_api.requests[-1].content_type == "application/merge-patch+json"
    with pytest.raises(ApiException) as info:
        core.patch_node(
            "n1",
            {"metadata": {"resourceVersion": "1"}, "spec": {"unschedulable": True}},
            _content_type="application/merge-patch+json",
        )
    assert info.value.status == 409 and _status(info.value)["reason"] == "Conflict"
    stored_after = fake_api.get("Node", "n1")
    assert stored_after is not None and not stored_after["spec"].get("unschedulable")
    current = stored_after["metadata"]["resourceVersion"]
    core.patch_node(
        "n1",
        {"metadata": {"resourceVersion": current}, "spec": {"unschedulable": True}},
        _content_type="application/merge-patch+json",
    )
    assert fake_api.get("Node", "n1")["spec"]["unschedulable"] is True  # type: ignore[index]


def test_patch_node_json_patch(fake_api: FakeApiServer) -> None:
    fake_api.add(node("n1"))
    core = _core(fake_api)
    core.patch_node(
        "n1",
        [
            {"op": "add", "path": "/spec/taints", "value": [{"key": "k", "effect": "NoSchedule"}]},
            {"op": "add", "path": "/metadata/labels/compactor~1state", "value": "draining"},
        ],
    )
    request = fake_api.requests[-1]
    assert request.content_type == "application/json-patch+json"
    stored = fake_api.get("Node", "n1")
    assert stored is not None
    assert stored["spec"]["taints"] == [{"key": "k", "effect": "NoSchedule"}]
    assert stored["metadata"]["labels"]["compactor/state"] == "draining"
    with pytest.raises(ApiException) as info:
        core.patch_node("n1", [{"op": "test", "path": "/spec/unschedulable", "value": True}])
    assert info.value.status == 422
    with pytest.raises(ApiException) as info:
        core.patch_node("missing", {"spec": {}})
    assert info.value.status == 404


def test_patch_dry_run_and_unsupported_content_type(fake_api: FakeApiServer) -> None:
    fake_api.add(node("n1"))
    core = _core(fake_api)
    result = core.patch_node("n1", {"spec": {"unschedulable": True}}, dry_run="All")
    assert result.spec.unschedulable is True
    assert not fake_api.get("Node", "n1")["spec"].get("unschedulable")  # type: ignore[index]
    with pytest.raises(ApiException) as info:
        core.patch_node("n1", {"spec": {}}, _content_type="application/apply-patch+yaml")
    assert info.value.status == 415


# ---------------------------------------------------------------- eviction


def test_eviction_deletes_the_pod_then_404(fake_api: FakeApiServer) -> None:
    fake_api.add(pod("p1", on="n1", labels={"app": "free"}))
    core = _core(fake_api)
    core.create_namespaced_pod_eviction("p1", "default", _eviction("p1"))
    assert fake_api.get("Pod", "p1") is None
    (request,) = fake_api.requests_to("/api/v1/namespaces/default/pods/p1/eviction", "POST")
    reply = fake_api.reply_to(request)
    assert reply is not None and reply.status == 201 and reply.body["status"] == "Success"
    # client v37 sends none on POST; the API server assumes JSON
    assert request.content_type in (
        "",
        "application/json",
    )
    assert request.json()["kind"] == "Eviction" and request.json()["apiVersion"] == "policy/v1"
    assert request.json()["metadata"] == {"name": "p1", "namespace": "default"}
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod_eviction("p1", "default", _eviction("p1"))
    assert info.value.status == 404 and _status(info.value)["reason"] == "NotFound"


def test_eviction_blocked_by_pdb_with_no_disruptions_allowed(fake_api: FakeApiServer) -> None:
    fake_api.add(pod("p1", on="n1", labels={"app": "db"}), pdb("db", match={"app": "db"}, allowed=0))
    core = _core(fake_api)
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod_eviction("p1", "default", _eviction("p1"))
    assert info.value.status == 429
    body = _status(info.value)
    assert body["reason"] == "TooManyRequests"
    assert body["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert body["details"]["causes"][0]["reason"] == "DisruptionBudget"
    assert fake_api.get("Pod", "p1") is not None


def test_eviction_consumes_disruptions_allowed(fake_api: FakeApiServer) -> None:
    fake_api.add(
        pod("p1", on="n1", labels={"app": "web"}),
        pod("p2", on="n1", labels={"app": "web"}),
        pod("other", on="n1", namespace="ml", labels={"app": "web"}),  # another namespace: the PDB does not apply
        pdb("web", match={"app": "web"}, allowed=1),
    )
    core = _core(fake_api)
    core.create_namespaced_pod_eviction("p1", "default", _eviction("p1"))
    budget = fake_api.get("PodDisruptionBudget", "web")
    assert (
        budget is not None and budget["status"]["disruptionsAllowed"] == 0 and "p1" in budget["status"]["disruptedPods"]
    )
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod_eviction("p2", "default", _eviction("p2"))
    assert info.value.status == 429
    core.create_namespaced_pod_eviction("other", "ml", _eviction("other", "ml"))
    assert [p["metadata"]["name"] for p in fake_api.objects("Pod")] == ["p2"]


def test_eviction_dry_run_changes_nothing(fake_api: FakeApiServer) -> None:
    fake_api.add(pod("p1", on="n1", labels={"app": "web"}), pdb("web", match={"app": "web"}, allowed=1))
    core = _core(fake_api)
    core.create_namespaced_pod_eviction("p1", "default", _eviction("p1"), dry_run="All")
    assert fake_api.requests[-1].param("dryRun") == "All"
    core.create_namespaced_pod_eviction("p1", "default", _eviction("p1", dry_run=["All"]))
    assert fake_api.get("Pod", "p1") is not None
    assert fake_api.get("PodDisruptionBudget", "web")["status"]["disruptionsAllowed"] == 1  # type: ignore[index]
    fake_api.update({**fake_api.get("PodDisruptionBudget", "web"), "status": {"disruptionsAllowed": 0}})  # type: ignore[dict-item]
    with pytest.raises(ApiException) as info:  # a dry run still reports the PDB refusal
        core.create_namespaced_pod_eviction("p1", "default", _eviction("p1"), dry_run="All")
    assert info.value.status == 429


def test_eviction_pdb_exemptions_and_multiple_budgets(fake_api: FakeApiServer) -> None:
    fake_api.add(
        pod("pending", labels={"app": "x"}),
        pod("done", on="n1", phase="Succeeded", labels={"app": "x"}),
        pod("running", on="n1", labels={"app": "x"}),
        pdb("one", match={"app": "x"}, allowed=0),
        pdb("two", match={"app": "x"}, allowed=5),
    )
    core = _core(fake_api)
    core.create_namespaced_pod_eviction("pending", "default", _eviction("pending"))  # Pending: PDBs are not checked
    core.create_namespaced_pod_eviction("done", "default", _eviction("done"))  # terminal: PDBs are not checked
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod_eviction("running", "default", _eviction("running"))
    assert info.value.status == 500 and "more than one PodDisruptionBudget" in _status(info.value)["message"]


def test_eviction_body_name_must_match_url(fake_api: FakeApiServer) -> None:
    fake_api.add(pod("p1", on="n1"))
    with pytest.raises(ApiException) as info:
        _core(fake_api).create_namespaced_pod_eviction("p1", "default", _eviction("p2"))
    assert info.value.status == 400


def test_on_evict_hook_can_mark_terminating_instead(fake_api: FakeApiServer) -> None:
    def terminate(server: FakeApiServer, evicted: dict[str, object]) -> None:
        evicted["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"  # type: ignore[index]
        server.update(evicted)

    fake_api.on_evict = terminate
    fake_api.add(pod("p1", on="n1"))
    _core(fake_api).create_namespaced_pod_eviction("p1", "default", _eviction("p1"))
    assert fake_api.get("Pod", "p1")["metadata"]["deletionTimestamp"]  # type: ignore[index]


# ---------------------------------------------------------------- events, create, delete


def test_events_through_both_apis(fake_api: FakeApiServer) -> None:
    core = _core(fake_api)
    core.create_namespaced_event(
        "default",
        k8s.CoreV1Event(
            metadata=k8s.V1ObjectMeta(generate_name="compactor-"),
            involved_object=k8s.V1ObjectReference(kind="Node", name="n1"),
            reason="Cordoned",
            message="cordoned for compaction",
            type="Normal",
        ),
    )
    events_api = k8s.EventsV1Api(fake_api.api_client())
    events_api.create_namespaced_event(
        "default",
        k8s.EventsV1Event(
            metadata=k8s.V1ObjectMeta(name="compactor.1", namespace="default"),
            event_time=datetime(2026, 1, 1, tzinfo=UTC),
            reason="Evicted",
            note="evicted p1",
            type="Normal",
            action="Evict",
            reporting_controller="gpu-compactor",
            reporting_instance="test",
        ),
    )
    events = fake_api.events()
    assert [e["reason"] for e in events] == ["Cordoned", "Evicted"]
    assert events[0]["metadata"]["name"].startswith("compactor-") and events[0]["apiVersion"] == "v1"
    assert events[1]["apiVersion"] == "events.k8s.io/v1"
    assert fake_api.requests_to("/apis/events.k8s.io/v1/namespaces/default/events", "POST")
    with pytest.raises(ApiException) as info:  # same name again
        events_api.create_namespaced_event(
            "default",
            k8s.EventsV1Event(
                metadata=k8s.V1ObjectMeta(name="compactor.1"), event_time=datetime(2026, 1, 1, tzinfo=UTC)
            ),
        )
    assert info.value.status == 409 and _status(info.value)["reason"] == "AlreadyExists"


def test_delete_pod(fake_api: FakeApiServer) -> None:
    fake_api.add(pod("p1", on="n1"))
    core = _core(fake_api)
    core.delete_namespaced_pod("p1", "default")
    assert fake_api.get("Pod", "p1") is None
    with pytest.raises(ApiException) as info:
        core.delete_namespaced_pod("p1", "default")
    assert info.value.status == 404


# ---------------------------------------------------------------- injection, recording, auth, routes


def test_injected_statuses_then_normal_service(fake_api: FakeApiServer) -> None:
    fake_api.add(node("n1"))
    injection = fake_api.inject("/api/v1/nodes/n1", 500, times=2, method="PATCH")
    fake_api.inject(
        re.compile(r"/api/v1/namespaces/[^/]+/pods/[^/]+/eviction"),
        409,
        times=1,
        body={"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409},
    )
    core = _core(fake_api)
    for _ in range(2):
        with pytest.raises(ApiException) as info:
            core.patch_node("n1", {"spec": {"unschedulable": True}})
        assert info.value.status == 500 and _status(info.value)["reason"] == "InternalError"
    core.patch_node("n1", {"spec": {"unschedulable": True}})
    assert injection.exhausted and len(injection.hits) == 2
    assert core.read_node("n1").spec.unschedulable is True  # GET was not affected
    fake_api.add(pod("p1", on="n1"))
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod_eviction("p1", "default", _eviction("p1"))
    assert info.value.status == 409
    core.create_namespaced_pod_eviction("p1", "default", _eviction("p1"))


def test_injected_delay_times_out_the_client(fake_api: FakeApiServer) -> None:
    fake_api.add(node("n1"))
    fake_api.inject("/api/v1/nodes/n1", delay=2.0, passthrough=True)
    core = _core(fake_api, retries=False)
    started = time.monotonic()
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        core.read_node("n1", _request_timeout=0.3)
    assert time.monotonic() - started < 1.5
    assert core.read_node("n1").metadata.name == "n1"


def test_injected_drop_closes_the_connection(fake_api: FakeApiServer) -> None:
    fake_api.add(node("n1"))
    fake_api.inject("/api/v1/nodes/n1", drop=True, method="PATCH")
    core = _core(fake_api, retries=False)
    with pytest.raises(urllib3.exceptions.ProtocolError):
        core.patch_node("n1", {"spec": {"unschedulable": True}})
    assert len(fake_api.requests_to("/api/v1/nodes/n1", "PATCH")) == 1  # recorded although not answered


def test_requests_are_recorded_with_headers_and_query(fake_api: FakeApiServer) -> None:
    fake_api.add(node("n1"))
    core = _core(fake_api)
    core.list_node(limit=7, label_selector="a=b")
    (request,) = fake_api.requests
    assert request.method == "GET" and request.path == "/api/v1/nodes"
    assert request.query == {"labelSelector": ["a=b"], "limit": ["7"]}
    assert request.header("accept") == "application/json" and request.header("User-Agent")
    assert request.body == b""
    fake_api.clear_requests()
    assert fake_api.requests == []


def test_bearer_token_required_when_configured() -> None:
    with FakeApiServer(token="s3cret") as server:
        server.add(node("n1"))
        assert k8s.CoreV1Api(server.api_client()).read_node("n1").metadata.name == "n1"
        assert server.requests[-1].header("Authorization") == "Bearer s3cret"
        anonymous = k8s.ApiClient(k8s.Configuration(host=server.url))
        try:
            with pytest.raises(ApiException) as info:
                k8s.CoreV1Api(anonymous).read_node("n1")
            assert info.value.status == 401
        finally:
            anonymous.close()


def test_custom_route(fake_api: FakeApiServer) -> None:
    fake_api.route(
        "GET",
        r"/api/v1/nodes/(?P<name>[^/]+)/proxy/metrics",
        lambda server, request, match: Reply(200, {"node": match["name"]}),
    )
    response = fake_api.api_client().call_api("GET", f"{fake_api.url}/api/v1/nodes/n9/proxy/metrics")
    response.read()
    assert json.loads(response.data) == {"node": "n9"}


def test_unknown_paths_are_404_status(fake_api: FakeApiServer) -> None:
    response = fake_api.api_client().call_api("GET", f"{fake_api.url}/apis/example.com/v1/widgets")
    response.read()
    assert response.status == 404
    assert json.loads(response.data)["reason"] == "NotFound"


# ---------------------------------------------------------------- the disruption controller (kube-controller-manager's)


def _owner(
    kind: str, name: str, replicas: int, *, namespace: str = "default", parent: str | None = None
) -> dict[str, object]:
    meta: dict[str, object] = {"name": name, "namespace": namespace, "uid": f"{kind}-{name}"}
    if parent:
        parent_kind, parent_name = parent.split("/")
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": parent_kind,
                "name": parent_name,
                "uid": f"{parent_kind}-{parent_name}",
                "controller": True,
            }
        ]
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": meta, "spec": {"replicas": replicas}}


def _budget(fake: FakeApiServer, name: str) -> dict[str, object]:
    found = fake.get("PodDisruptionBudget", name)
    assert found is not None
    return dict(found["status"])


def _kcm(now: list[datetime] | None = None) -> FakeApiServer:
    clock = now or [datetime.now(UTC)]
    return FakeApiServer(disruption_controller=DisruptionController(now=lambda: clock[0]))


def test_the_budget_an_eviction_spends_comes_back_when_the_replacement_is_ready() -> None:
    with _kcm() as fake:
        fake.add(
            _owner("ReplicaSet", "web", 2),
            pod("a", on="n1", owner="ReplicaSet/web"),
            pod("b", on="n1", owner="ReplicaSet/web"),
            pdb("web", match={"app": "web"}, allowed=0, max_unavailable=1),
        )
        # recomputed from the pods, not the status it was created with
        assert _budget(fake, "web")["disruptionsAllowed"] == 1
        _core(fake).create_namespaced_pod_eviction("a", "default", _eviction("a"))
        spent = _budget(fake, "web")
        assert (spent["disruptionsAllowed"], spent["currentHealthy"], spent["expectedPods"]) == (0, 1, 2)
        replacement = pod("c", on="n2", owner="ReplicaSet/web")
        replacement["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
        fake.add(replacement)
        assert _budget(fake, "web")["disruptionsAllowed"] == 0  # not Ready yet: still spent
        replacement["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        fake.update(replacement)
        assert _budget(fake, "web")["disruptionsAllowed"] == 1
        assert not fake.errors


def test_an_evicted_pod_not_yet_deleted_stays_disrupted_for_two_minutes() -> None:
    now = [datetime.now(UTC)]  # the API server stamps disruptedPods with its wall clock
    with _kcm(now) as fake:
        fake.on_evict = lambda _server, _pod: None  # the kubelet has not acted yet: the pod is still there, Ready
        fake.add(
            _owner("ReplicaSet", "web", 2),
            pod("a", on="n1", owner="ReplicaSet/web"),
            pod("b", on="n1", owner="ReplicaSet/web"),
            pdb("web", match={"app": "web"}, max_unavailable=1),
        )
        _core(fake).create_namespaced_pod_eviction("a", "default", _eviction("a"))
        status = _budget(fake, "web")
        assert status["disruptionsAllowed"] == 0 and "a" in status["disruptedPods"]  # type: ignore[operator]
        with pytest.raises(ApiException) as info:  # the budget holds until the controller sees the pod go
            _core(fake).create_namespaced_pod_eviction("b", "default", _eviction("b"))
        assert info.value.status == 429
        now[0] += timedelta(minutes=3)
        fake.update(fake.get("Pod", "b"))  # type: ignore[arg-type]  # any write: the controller resyncs
        status = _budget(fake, "web")
        assert status["disruptionsAllowed"] == 1 and "disruptedPods" not in status  # DeletionTimeout passed


def test_expected_pods_follow_the_rules_of_each_budget_form() -> None:
    with _kcm() as fake:
        fake.add(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "api", "uid": "Deployment-api"},
                "spec": {"replicas": 4},
            },
            _owner("ReplicaSet", "api-1", 3, parent="Deployment/api"),
            *(pod(f"api-{i}", on="n1", owner="ReplicaSet/api-1", labels={"app": "api"}) for i in range(3)),
            # the Deployment's 4 replicas, not the ReplicaSet's 3
            pdb("pct", match={"app": "api"}, min_available="50%"),
            pdb("count", match={"app": "api"}, min_available=2, namespace="default"),
        )
        pct, count = _budget(fake, "pct"), _budget(fake, "count")
        assert (pct["expectedPods"], pct["desiredHealthy"], pct["disruptionsAllowed"]) == (4, 2, 1)
        assert (count["expectedPods"], count["desiredHealthy"], count["disruptionsAllowed"]) == (3, 2, 1)


def test_a_budget_over_pods_whose_controller_is_missing_allows_nothing() -> None:
    with _kcm() as fake:
        fake.add(
            pod("a", on="n1", owner="ReplicaSet/gone"),
            pod("b", on="n1", owner="ReplicaSet/gone"),
            pdb("gone", match={"app": "gone"}, allowed=5, max_unavailable=1),
        )
        status = _budget(fake, "gone")
        assert status["disruptionsAllowed"] == 0
        assert status["conditions"][0]["reason"] == "SyncFailed"  # type: ignore[index]

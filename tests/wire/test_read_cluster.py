"""compactor.kube against the fake API server, through the official kubernetes client."""

from __future__ import annotations

import itertools
import re
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes.config import incluster_config

from compactor.errors import ClusterError, InputError
from compactor.kube.client import IN_CLUSTER, USER_AGENT, connect, load_api_client
from compactor.kube.read import read_cluster
from compactor.kube.snapshot import snapshot_from_cluster
from compactor.model.load import build_snapshot
from compactor.model.schema import KubeObject
from compactor.model.types import Snapshot
from tests.builders import A100_80, node, pdb, pod
from tests.fakeapi import FakeApiServer

PODS = "/api/v1/pods"


@pytest.fixture(autouse=True)
def _no_ambient_kubeconfig(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Tests never see the developer's or CI's kubeconfig or service account."""
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def _small_cluster() -> list[dict[str, Any]]:
    return [
        node("gpu-1", gpus=8),
        node("gpu-2", gpus=8, product=A100_80),
        node("cpu-1"),
        pod("train-0", on="gpu-1", gpus=4, labels={"app": "train"}),
        pod("train-1", on="gpu-2", gpus=2, namespace="ml", labels={"app": "train"}),
        pod("web", on="cpu-1", labels={"app": "web"}),
        pod("waiting", gpus=8),
        pdb("train", match={"app": "train"}, namespace="ml", allowed=0),
        pdb("web", match={"app": "web"}),
    ]


def _by_name(snapshot: Snapshot) -> tuple[list[Any], list[Any], list[Any]]:
    return (
        sorted(snapshot.nodes, key=lambda n: n.name),
        sorted(snapshot.pods, key=lambda p: p.key),
        sorted(snapshot.pdbs, key=lambda b: b.key),
    )


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text and "Traceback" not in text, text
    return text


# ---------------------------------------------------------------- pagination


def test_pods_are_paginated_with_limit_and_continue(fake_api: FakeApiServer, fake_api_client: Any) -> None:
    fake_api.add(node("gpu-1", gpus=8), *(pod(f"p{i:04d}", on="gpu-1") for i in range(1203)))
    objects = read_cluster(fake_api_client, page_size=500)

    pod_requests = fake_api.requests_to(PODS, "GET")
    assert len(pod_requests) == 3
    assert [r.param("limit") for r in pod_requests] == ["500", "500", "500"]
    assert pod_requests[0].param("continue") is None
    for previous, following in itertools.pairwise(pod_requests):
        reply = fake_api.reply_to(previous)
        assert reply is not None and reply.status == 200
        assert following.param("continue") == reply.body["metadata"]["continue"]
    last = fake_api.reply_to(pod_requests[-1])
    assert last is not None and "continue" not in last.body["metadata"] and len(last.body["items"]) == 203

    pods = [o for o in objects if o["kind"] == "Pod"]
    names = [p["metadata"]["name"] for p in pods]
    assert len(names) == 1203 and len(set(names)) == 1203
    assert all(p["apiVersion"] == "v1" for p in pods)
    assert [o["kind"] for o in objects if o["kind"] != "Pod"] == ["Node"]


def test_every_list_is_paginated(fake_api: FakeApiServer, fake_api_client: Any) -> None:
    fake_api.add(*(node(f"n{i}") for i in range(5)), *(pdb(f"b{i}", match={"app": str(i)}) for i in range(3)))
    objects = read_cluster(fake_api_client, page_size=2)
    assert len(fake_api.requests_to("/api/v1/nodes")) == 3
    assert len(fake_api.requests_to("/apis/policy/v1/poddisruptionbudgets")) == 2
    assert len(fake_api.requests_to(PODS)) == 1  # empty: one page
    assert sorted(o["metadata"]["name"] for o in objects if o["kind"] == "Node") == [f"n{i}" for i in range(5)]
    assert all(o["apiVersion"] == "policy/v1" for o in objects if o["kind"] == "PodDisruptionBudget")


def test_expired_continue_token_restarts_the_list_once(fake_api: FakeApiServer, fake_api_client: Any) -> None:
    fake_api.add(*(pod(f"p{i:04d}", on="n1") for i in range(1203)), node("n1"))
    fake_api.expire_continue(times=1)
    objects = read_cluster(fake_api_client, page_size=500)

    pod_requests = fake_api.requests_to(PODS)
    statuses = [fake_api.reply_to(r).status for r in pod_requests]  # type: ignore[union-attr]
    assert statuses == [200, 410, 200, 200, 200]
    assert [r.param("continue") is None for r in pod_requests] == [True, False, True, False, False]
    names = [o["metadata"]["name"] for o in objects if o["kind"] == "Pod"]
    assert len(names) == 1203 and len(set(names)) == 1203


def test_continue_token_expiring_twice_is_an_error(fake_api: FakeApiServer, fake_api_client: Any) -> None:
    fake_api.add(*(pod(f"p{i}", on="n1") for i in range(3)))
    fake_api.expire_continue(times=2)
    with pytest.raises(ClusterError) as info:
        read_cluster(fake_api_client, page_size=2)
    text = _one_line(info.value)
    assert info.value.status == 410 and "pods" in text and "410" in text
    assert len(fake_api.requests_to(PODS)) == 4


def test_page_size_must_be_positive(fake_api_client: Any) -> None:
    with pytest.raises(ValueError):
        read_cluster(fake_api_client, page_size=0)


# ---------------------------------------------------------------- fidelity


def test_result_equals_build_snapshot_over_the_same_dicts(fake_api: FakeApiServer, fake_api_client: Any) -> None:
    objects = _small_cluster()
    fake_api.add(*objects)
    live = build_snapshot(read_cluster(fake_api_client, page_size=2), source="live")
    offline = build_snapshot(objects, source="file")
    assert _by_name(live) == _by_name(offline)
    assert {n.name: n.pool for n in live.nodes} == {n.name: n.pool for n in offline.nodes}
    assert {p.key: p.labels for p in live.pods} == {p.key: p.labels for p in offline.pods}
    assert live.config_maps == ()


def test_decoded_lists_build_the_same_snapshot_as_the_dicts(fake_api: FakeApiServer, fake_api_client: Any) -> None:
    objects = _small_cluster()
    fake_api.add(*objects)
    decoded = read_cluster(fake_api_client, page_size=2, decoded=True)
    assert all(isinstance(o, KubeObject) for o in decoded)  # every page fitted the schema: no dict fallback
    # list items carry no kind: filled in
    assert sorted(str(o.kind) for o in decoded) == sorted(o["kind"] for o in objects)
    live = build_snapshot(decoded, source="live")
    assert _by_name(live) == _by_name(build_snapshot(objects, source="file"))
    assert {p.key: p.labels for p in live.pods} == {
        p.key: p.labels for p in build_snapshot(objects, source="file").pods
    }


def test_a_page_that_does_not_fit_the_schema_is_named_field_by_field(
    fake_api: FakeApiServer, fake_api_client: Any
) -> None:
    bad = pod("train-9", on="gpu-1", namespace="ml")
    bad["spec"]["priority"] = "urgent"
    fake_api.add(node("gpu-1", gpus=8), pod("ok", on="gpu-1"), bad)
    objects = read_cluster(fake_api_client, decoded=True)
    assert any(isinstance(o, dict) for o in objects)  # that page came back as dicts
    with pytest.raises(InputError) as info:
        build_snapshot(objects, source="cluster lab")
    assert _one_line(info.value) == "cluster lab: Pod ml/train-9: spec.priority: expected int, got str"


def test_snapshot_from_cluster_through_a_kubeconfig(fake_api: FakeApiServer, tmp_path: Path) -> None:
    objects = _small_cluster()
    fake_api.add(*objects)
    kubeconfig = fake_api.write_kubeconfig(tmp_path / "config", context="lab", token="t0ken")

    snapshot = snapshot_from_cluster(str(kubeconfig), None, pool_label="nvidia.com/gpu.product", page_size=3)

    assert snapshot.source == "cluster lab"
    assert _by_name(snapshot) == _by_name(build_snapshot(objects, source="file"))
    assert {n.pool for n in snapshot.nodes} == {"NVIDIA-A100-SXM4-40GB", A100_80, "cpu-only"}
    for request in fake_api.requests:
        assert request.header("Authorization") == "Bearer t0ken"
        assert request.header("User-Agent") == USER_AGENT
    assert len(fake_api.requests_to(PODS)) == 2  # 4 pods, page size 3


def test_snapshot_uses_the_current_context_of_kubeconfig_env(
    fake_api: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_api.add(node("n1"))
    kubeconfig = fake_api.write_kubeconfig(tmp_path / "config", context="from-env")
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing'}:{kubeconfig}")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")  # $KUBECONFIG wins over in-cluster
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    snapshot = snapshot_from_cluster(None, None)
    assert snapshot.source == "cluster from-env" and [n.name for n in snapshot.nodes] == ["n1"]


# ---------------------------------------------------------------- config maps and namespaces


def _config_map(name: str, namespace: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "data": {"config.yaml": f"version: v1 # {name}"},
    }


def test_config_maps_only_when_asked(fake_api: FakeApiServer, fake_api_client: Any) -> None:
    fake_api.add(
        _config_map("default-mig-parted-config", "gpu-operator", app="mig"),
        _config_map("other", "gpu-operator"),
        _config_map("unrelated", "default"),
    )

    def config_maps(**kwargs: Any) -> list[str]:
        fake_api.clear_requests()
        objects = read_cluster(fake_api_client, **kwargs)
        return [f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in objects if o["kind"] == "ConfigMap"]

    assert config_maps() == []
    assert not [r for r in fake_api.requests if "configmaps" in r.path]
    with pytest.raises(
        ValueError, match="one namespace only"
    ):  # never across namespaces: any tenant may label a ConfigMap
        read_cluster(fake_api_client, include_config_maps=True)
    assert config_maps(include_config_maps="gpu-operator") == [
        "gpu-operator/default-mig-parted-config",
        "gpu-operator/other",
    ]
    assert [r.path for r in fake_api.requests if "configmaps" in r.path] == [
        "/api/v1/namespaces/gpu-operator/configmaps"
    ]
    assert config_maps(include_config_maps="gpu-operator/default-mig-parted-config") == [
        "gpu-operator/default-mig-parted-config"
    ]
    (request,) = [r for r in fake_api.requests if "configmaps" in r.path]
    assert request.param("fieldSelector") == "metadata.name=default-mig-parted-config"
    assert config_maps(include_config_maps="gpu-operator/absent") == []
    assert config_maps(include_config_maps="gpu-operator", config_map_selector="app=mig") == [
        "gpu-operator/default-mig-parted-config"
    ]

    objects = read_cluster(fake_api_client, include_config_maps="gpu-operator/default-mig-parted-config")
    snapshot = build_snapshot(objects, source="live")
    (config_map,) = snapshot.config_maps
    assert config_map.data == {"config.yaml": "version: v1 # default-mig-parted-config"}
    with pytest.raises(ValueError):
        read_cluster(fake_api_client, include_config_maps="a/b/c")


def test_namespaces_restrict_pods_and_pdbs(fake_api: FakeApiServer, fake_api_client: Any) -> None:
    fake_api.add(*_small_cluster())
    objects = read_cluster(fake_api_client, namespaces=["ml"])
    paths = [r.path for r in fake_api.requests]
    assert paths == [
        "/api/v1/nodes",
        "/api/v1/persistentvolumes",
        "/api/v1/namespaces/ml/pods",
        "/apis/policy/v1/namespaces/ml/poddisruptionbudgets",
        "/api/v1/namespaces/ml/persistentvolumeclaims",
        "/apis/resource.k8s.io/v1/deviceclasses",
        "/apis/resource.k8s.io/v1/resourceslices",
        "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims",
    ]
    assert [o["metadata"]["name"] for o in objects if o["kind"] != "Node"] == ["train-1", "train"]


# ---------------------------------------------------------------- errors


FORBIDDEN = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "reason": "Forbidden",
    "code": 403,
    "message": 'pods is forbidden: User "system:serviceaccount:gpu:compactor" cannot list resource "pods" '
    'in API group "" at the cluster scope',
    "details": {"kind": "pods"},
}


def test_forbidden_is_one_line_naming_the_list(fake_api: FakeApiServer, fake_api_client: Any) -> None:
    fake_api.inject(PODS, 403, body=FORBIDDEN)
    with pytest.raises(ClusterError) as info:
        read_cluster(fake_api_client)
    text = _one_line(info.value)
    assert info.value.status == 403
    assert text == (f"{fake_api.url}: forbidden (403) listing pods in all namespaces: " + FORBIDDEN["message"])


def test_unauthorized_is_one_line(tmp_path: Path) -> None:
    with FakeApiServer(token="right") as server:
        kubeconfig = server.write_kubeconfig(tmp_path / "config", token="wrong")
        with pytest.raises(ClusterError) as info:
            snapshot_from_cluster(str(kubeconfig), None)
    text = _one_line(info.value)
    assert info.value.status == 401 and "unauthorized (401) listing nodes" in text


def test_server_error_is_one_line(fake_api: FakeApiServer, fake_api_client: Any) -> None:
    fake_api.inject("/apis/policy/v1/poddisruptionbudgets", 503)
    with pytest.raises(ClusterError) as info:
        read_cluster(fake_api_client)
    text = _one_line(info.value)
    assert info.value.status == 503 and "HTTP 503" in text and "poddisruptionbudgets" in text


def test_non_list_reply_is_an_error(fake_api: FakeApiServer, fake_api_client: Any) -> None:
    fake_api.inject("/api/v1/nodes", 200, body="not a list")
    with pytest.raises(ClusterError) as info:
        read_cluster(fake_api_client)
    assert "expected a List" in _one_line(info.value)


def test_connection_refused_is_one_clear_line(fake_api: FakeApiServer) -> None:
    api_client = fake_api.api_client()
    url = fake_api.url
    fake_api.stop()
    started = time.monotonic()
    with pytest.raises(ClusterError) as info:
        read_cluster(api_client)
    text = _one_line(info.value)
    assert text == f"cannot reach the Kubernetes API at {url} (listing nodes): connection refused"
    assert info.value.status == 0 and time.monotonic() - started < 10
    api_client.close()


def test_connection_refused_through_snapshot_from_cluster(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = tmp_path / "config"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: dead\n"
        f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "users: [{name: u, user: {token: x}}]\n"
        "contexts: [{name: dead, context: {cluster: c, user: u}}]\n"
    )
    with pytest.raises(ClusterError) as info:
        snapshot_from_cluster(str(config), None)
    assert _one_line(info.value).endswith("connection refused")


def test_read_timeout_is_one_line(fake_api: FakeApiServer, fake_api_client: Any) -> None:
    fake_api.inject("/api/v1/nodes", delay=1.0, times=None, passthrough=True)
    with pytest.raises(ClusterError) as info:
        read_cluster(fake_api_client, request_timeout=0.2)
    assert _one_line(info.value).endswith("(listing nodes): timed out")


# ---------------------------------------------------------------- kubeconfig and in-cluster


def test_missing_kubeconfig_names_the_file(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.yaml")
    with pytest.raises(InputError) as info:
        load_api_client(missing, None)
    assert _one_line(info.value) == f"{missing}: kubeconfig: no such file"
    with pytest.raises(InputError) as info:
        load_api_client(None, None)  # no $KUBECONFIG, no ~/.kube/config, not in a pod
    assert "~/.kube/config" in _one_line(info.value)


def test_unknown_context_names_the_context_and_the_choices(fake_api: FakeApiServer, tmp_path: Path) -> None:
    kubeconfig = str(fake_api.write_kubeconfig(tmp_path / "config", context="lab"))
    with pytest.raises(InputError) as info:
        load_api_client(kubeconfig, "prod")
    assert _one_line(info.value) == f"{kubeconfig}: kubeconfig has no context 'prod' (available: lab)"
    connection = connect(kubeconfig, "lab")
    assert connection.name == "lab" and connection.api_client.configuration.host == fake_api.url
    connection.api_client.close()


def test_kubeconfig_without_current_context_needs_one(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text("apiVersion: v1\nkind: Config\nclusters: []\nusers: []\ncontexts: []\n")
    with pytest.raises(InputError) as info:
        load_api_client(str(config), None)
    assert "no current-context" in _one_line(info.value) and str(config) in str(info.value)


def test_malformed_kubeconfig_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text("clusters: [unclosed\n")
    with pytest.raises(InputError) as info:
        load_api_client(str(config), None)
    assert _one_line(info.value).startswith(f"{config}: cannot read kubeconfig")


def test_in_cluster_config_inside_a_pod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("sa-token")
    ca.write_text("not really a certificate")
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    connection = connect(None, None)
    try:
        assert connection.name == IN_CLUSTER
        assert connection.api_client.configuration.host == "https://10.96.0.1:443"
        assert connection.api_client.configuration.ssl_ca_cert == str(ca)
    finally:
        connection.api_client.close()
    token.unlink()
    with pytest.raises(InputError) as info:
        load_api_client(None, None)
    assert _one_line(info.value).startswith("in-cluster: cannot use the pod's service account")


def test_in_cluster_flag_insists_on_the_service_account(
    fake_api: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(fake_api.write_kubeconfig(tmp_path / "config")))  # ignored with in_cluster
    with pytest.raises(InputError) as info:  # not in a pod
        load_api_client(in_cluster=True)
    assert _one_line(info.value).startswith("in-cluster: cannot use the pod's service account")
    with pytest.raises(InputError) as info:
        load_api_client(str(tmp_path / "config"), None, in_cluster=True)
    assert "cannot be combined" in _one_line(info.value)


# ---------------------------------------------------------------- dynamic resource allocation (issue [19])


def _dra_cluster() -> list[dict[str, Any]]:
    from tests.dra_builders import device_class, dra_node, dra_pod, gpu_claim

    return [
        *dra_node("gpu-1"),
        device_class(),
        dra_pod("a", on="gpu-1", claim="a-gpus", namespace="ml"),
        gpu_claim("a-gpus", namespace="ml", devices=[("gpu-1", "gpu-0"), ("gpu-1", "gpu-1")], for_pods=["a"]),
    ]


@pytest.mark.parametrize("decoded", [False, True])
def test_dra_devices_and_claims_are_read_with_the_rest(
    fake_api: FakeApiServer, fake_api_client: Any, decoded: bool
) -> None:
    fake_api.add(*_dra_cluster())
    snapshot = build_snapshot(read_cluster(fake_api_client, decoded=decoded), source="live")
    (gpu_1,) = snapshot.nodes
    (a,) = snapshot.pods
    assert (gpu_1.gpu.physical_gpus, gpu_1.allocatable["nvidia.com/gpu"], a.requests["nvidia.com/gpu"]) == (8, 8, 2)
    assert a.dra_gpus and not snapshot.warnings


def test_a_cluster_that_does_not_serve_dra_is_read_without_it(fake_api: FakeApiServer, fake_api_client: Any) -> None:
    fake_api.add(*_small_cluster())
    for plural in ("deviceclasses", "resourceslices", "resourceclaims"):
        fake_api.inject(re.compile(rf"/apis/resource\.k8s\.io/v1/.*{plural}"), 404, times=None)
    snapshot = build_snapshot(read_cluster(fake_api_client), source="live")
    assert len(snapshot.nodes) == len([o for o in _small_cluster() if o["kind"] == "Node"])

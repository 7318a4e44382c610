"""The request finder itself (``tests/kube_requests.py``), which the RBAC tests rely on: it sees each way
compactor/kube calls the API (raw and typed, the namespace its own, the GPU Operator's or any), a new request
shows up needing a grant, and one it cannot follow fails.
"""

from __future__ import annotations

import textwrap

import pytest

from tests.kube_requests import CLUSTER_WIDE, KUBE_PACKAGE, OWN_NAMESPACE, Permission, api_requests, granted_permissions
from tests.manifests import shown


def test_the_request_finder_sees_each_way_compactor_kube_calls_the_api() -> None:
    requests = api_requests()
    seen = {(r.method, r.path, r.own_namespace) for r in requests}
    # never across namespaces: any tenant may label a ConfigMap
    assert not [r for r in requests if r.path == "/api/v1/configmaps"]
    operator = {(r.method, r.path) for r in requests if r.operator_namespace}
    assert operator == {
        ("GET", "/api/v1/namespaces/{namespace}/configmaps")
    }  # typed list passed on to _Listing: the mig-parted configs
    assert (
        "GET",
        "/api/v1/namespaces/{namespace}/configmaps/{name}",
        True,
    ) in seen  # raw, through _get: the state ConfigMap
    assert (
        "DELETE",
        "/api/v1/namespaces/{namespace}/configmaps/{name}",
        True,
    ) in seen  # raw, path parameters in a local
    assert ("POST", "/api/v1/namespaces/{namespace}/pods/{name}/eviction", False) in seen  # raw: any pod's namespace
    assert (
        "PUT",
        "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}",
        True,
    ) in seen  # path constant, namespace set in _send


_NEW_CALLS = """

class _Extra(KubeClusterClient):
    def read_secret(self, namespace: str, name: str) -> Obj | None:
        return self._get("/api/v1/namespaces/{namespace}/secrets/{name}", {"namespace": namespace, "name": name}, "Secret", "x")

    def read_own_secret(self, name: str) -> Obj | None:
        return self._get("/api/v1/namespaces/{namespace}/secrets/{name}", {"namespace": self.namespace, "name": name}, "Secret", "x")

    def list_services(self) -> list[Obj]:
        return self._list(_Listing(self._core.list_service_for_all_namespaces, (), "Service", "v1", "services"))

    def list_config_maps_in(self, namespace: str) -> list[Obj]:
        return self._list(_Listing(self._core.list_namespaced_config_map, (namespace,), "ConfigMap", "v1", "configmaps"))
"""


def test_a_new_request_needs_a_grant_and_one_the_finder_cannot_follow_fails() -> None:
    path = KUBE_PACKAGE / "cluster_client.py"
    sources = {shown(p): p.read_text(encoding="utf-8") for p in sorted(KUBE_PACKAGE.glob("*.py"))}
    source = sources[shown(path)]
    found = {r.permission() for r in api_requests({**sources, shown(path): source + textwrap.dedent(_NEW_CALLS)})}
    new = {
        Permission("", "secrets", "get", CLUSTER_WIDE),
        Permission("", "secrets", "get", OWN_NAMESPACE),
        Permission("", "services", "list", CLUSTER_WIDE),
        Permission("", "configmaps", "list", CLUSTER_WIDE),
    }  # a list in any namespace but the GPU Operator's needs a new grant
    assert new <= found and not new & granted_permissions()
    dynamic = "\n    def read_any(self, kind: str) -> Obj | None:\n        return self._get(f'/api/v1/{kind}', {}, kind, 'x')\n"
    with pytest.raises(AssertionError, match="cannot follow the path"):
        api_requests({**sources, shown(path): source + "\n\nclass _Dynamic(KubeClusterClient):" + dynamic})

"""RBAC as shipped (manifests/base/rbac.yaml, manifests/gpu-operator): the roles grant exactly the Kubernetes API
requests that compactor/kube makes (found in its source by ``tests/kube_requests.py``), no pod delete and no
wildcard, ConfigMaps and Leases only by name (but create, which RBAC cannot restrict by name) in the
compactor's namespace and a list of ConfigMaps in the GPU Operator's, none cluster-wide; the roles are bound to
the service account the workloads run as.

tests/wire/test_least_privilege.py authorizes the requests the real client sends, resourceNames included.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from compactor.actions.port.annotations import STATE_CONFIGMAP
from compactor.actions.services.memory import HISTORY_CONFIGMAP
from compactor.app.last_run import LAST_RUN_CONFIGMAP
from compactor.kube.lease import LEASE_NAME
from compactor.settings.origins import Settings
from tests.kube_requests import Permission, api_requests, granted_permissions
from tests.manifests import (
    BASE,
    CONTROLLER,
    CRONJOB,
    GPU_OPERATOR,
    KUSTOMIZATIONS,
    OPERATOR_NAMESPACE_NAME,
    OVERLAYS,
    Doc,
    mounted_settings,
    one_object,
    pod_spec,
    read_kustomization,
    resolve_kustomization,
)


def _roles() -> list[Doc]:
    """Every ClusterRole and Role the manifests ship."""
    return [
        doc
        for directory in KUSTOMIZATIONS
        for _, doc in resolve_kustomization(directory)
        if doc["kind"] in ("ClusterRole", "Role")
    ]


def test_rbac_grants_exactly_the_requests_compactor_kube_makes() -> None:
    requests = api_requests()
    needed: dict[Permission, list[str]] = {}
    for request in requests:
        needed.setdefault(request.permission(), []).append(f"{request.method} {request.path} ({request.where})")
    granted = granted_permissions()
    missing = {permission: needed[permission] for permission in sorted(needed.keys() - granted)}
    unused = sorted(granted - needed.keys())
    assert not missing, f"requests without a grant in manifests/base/rbac.yaml (or manifests/gpu-operator): {missing}"
    assert not unused, f"grants no request in compactor/kube uses: {unused}"


def test_the_role_is_in_the_namespace_of_the_state_configmap_and_the_lease(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = mounted_settings(tmp_path, monkeypatch)
    for kind in ("Role", "RoleBinding"):
        assert one_object(BASE, kind)["metadata"]["namespace"] == settings.executor.state_namespace


def test_the_compactor_may_write_its_steering_parameters_and_only_read_the_policies() -> None:
    name = Settings().steering.policy_name
    role_rules = one_object(BASE, "Role")["rules"]
    assert {
        "apiGroups": [""],
        "resources": ["configmaps"],
        "resourceNames": [name],
        "verbs": ["get", "patch"],
    } in role_rules
    admission = [
        r for r in one_object(BASE, "ClusterRole")["rules"] if r["apiGroups"] == ["admissionregistration.k8s.io"]
    ]
    assert admission == [
        {
            "apiGroups": ["admissionregistration.k8s.io"],
            "resources": ["mutatingadmissionpolicies", "mutatingadmissionpolicybindings"],
            "resourceNames": [name],
            "verbs": ["get"],
        },
        {  # the state guard, read (never written) to check it guards this installation
            "apiGroups": ["admissionregistration.k8s.io"],
            "resources": ["validatingadmissionpolicies"],
            "resourceNames": ["gpu-compactor-state-guard"],
            "verbs": ["get"],
        },
    ]


def test_rbac_grants_no_wildcards() -> None:
    for role in _roles():
        kind = f"{role['kind']} {role['metadata']['name']}"
        for rule in role["rules"]:
            assert "*" not in rule.get("verbs", []), f"{kind}: wildcard verb in {rule}"
            assert "*" not in rule.get("resources", []), f"{kind}: wildcard resource in {rule}"
            assert "*" not in rule.get("apiGroups", []), f"{kind}: wildcard API group in {rule}"
            assert "*" not in rule.get("resourceNames", []), f"{kind}: wildcard name in {rule}"


def test_no_role_can_delete_pods() -> None:
    for doc in _roles():
        for rule in doc["rules"]:
            if "" in rule.get("apiGroups", []) and "pods" in rule.get("resources", []):
                assert not {"delete", "deletecollection"} & set(rule["verbs"]), f"{doc['kind']} may delete pods: {rule}"


def test_the_roles_are_bound_to_the_service_account() -> None:
    account = one_object(BASE, "ServiceAccount")["metadata"]
    for binding, role in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        doc = one_object(BASE, binding)
        assert doc["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": role, "name": "gpu-compactor"}
        assert doc["subjects"] == [
            {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
        ]
    operator = one_object(GPU_OPERATOR, "RoleBinding", "gpu-compactor-mig-parted")
    assert (
        operator["metadata"]["namespace"]
        == one_object(GPU_OPERATOR, "Role", "gpu-compactor-mig-parted")["metadata"]["namespace"]
    )
    assert operator["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "gpu-compactor-mig-parted",
    }
    assert operator["subjects"] == [
        {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
    ]
    for overlay, kind in ((CRONJOB, "CronJob"), (CONTROLLER, "Deployment")):
        assert pod_spec(one_object(overlay, kind))["serviceAccountName"] == account["name"]


# ----- least privilege on ConfigMaps and Leases --------------------------------------------------------


# What RBAC cannot restrict by name: a create names its object in the body, not the URL, so the
# authorizer sees no name and a create rule with resourceNames grants nothing
# (kubernetes.io/docs/reference/access-authn-authz/rbac/#referring-to-resources; pkg/apis/rbac/v1
# ResourceNameMatches compares the rule's names with the request's, empty for a create).
UNNAMED_VERBS = frozenset({"create", "list", "watch", "deletecollection"})
NAMED_VERBS = frozenset({"get", "update", "patch", "delete"})


def test_configmaps_and_leases_are_granted_by_name_but_create_and_the_operators_list() -> None:
    """Any tenant's ConfigMaps and Leases are out of reach: a named verb names its objects, create is on its own (a name
    would void it), and the one list is of the GPU Operator's ConfigMaps in that namespace."""
    for role in _roles():
        where = f"{role['kind']} {role['metadata'].get('namespace', '')}/{role['metadata']['name']}"
        for rule in role["rules"]:
            if not {"configmaps", "leases"} & set(rule["resources"]):
                continue
            assert role["kind"] == "Role", f"{where}: {rule}: ConfigMaps and Leases are never granted cluster-wide"
            verbs, names = set(rule["verbs"]), rule.get("resourceNames") or []
            if names:
                assert verbs <= NAMED_VERBS, f"{where}: {rule}: resourceNames void {sorted(verbs & UNNAMED_VERBS)}"
            elif role["metadata"]["namespace"] == OPERATOR_NAMESPACE_NAME:
                assert rule["resources"] == ["configmaps"] and verbs == {"list"}, f"{where}: {rule}"
            else:
                assert verbs == {"create"}, (
                    f"{where}: {rule}: {sorted(verbs - {'create'})} on every object, not by name"
                )


def test_the_cluster_role_has_no_configmap_nor_lease_rule() -> None:
    rules = one_object(BASE, "ClusterRole")["rules"]
    assert not [r for r in rules if {"configmaps", "leases"} & set(r["resources"])], (
        "a tenant's ConfigMaps and Leases are none of ours"
    )


def test_the_named_rules_name_the_objects_the_code_uses() -> None:
    """The state ConfigMap, the last run's summary, the steering parameters and the Lease, each with the verbs its client sends."""
    steering = Settings().steering.policy_name
    named = {
        (rule["resources"][0], name): sorted(rule["verbs"])
        for rule in one_object(BASE, "Role")["rules"]
        for name in rule.get("resourceNames") or []
    }
    assert named == {
        ("configmaps", STATE_CONFIGMAP): ["delete", "get", "update"],  # read_state; write_state: PUT, DELETE
        ("configmaps", LAST_RUN_CONFIGMAP): ["get", "update"],  # last_run.write_summary: read_state, write_state's PUT
        ("configmaps", HISTORY_CONFIGMAP): ["get", "update"],  # memory.load_history / remember_run: GET, PUT
        ("configmaps", steering): ["get", "patch"],  # get_config_map, patch_config_map
        ("leases", LEASE_NAME): ["get", "update"],
    }  # LeaderElector: GET, PUT (renew, take over, release)
    unnamed = [
        (rule["resources"], rule["verbs"])
        for rule in one_object(BASE, "Role")["rules"]
        if not rule.get("resourceNames")
    ]
    # the ConfigMaps' and the Lease's POST
    assert sorted(unnamed) == [
        (["configmaps"], ["create"]),
        (["leases"], ["create"]),
    ]


def test_the_mig_parted_configs_are_listed_only_in_the_operators_namespace() -> None:
    role = one_object(GPU_OPERATOR, "Role", "gpu-compactor-mig-parted")
    assert role["metadata"]["namespace"] == OPERATOR_NAMESPACE_NAME
    assert role["rules"] == [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]
    assert GPU_OPERATOR not in {
        (d / entry).resolve() for d in (BASE, *OVERLAYS) for entry in read_kustomization(d)["resources"]
    }, "the GPU Operator's namespace may not exist: its Role is applied on its own, not with the base"

"""The guards of manifests/guard on the cluster under test: their shipped documents, the service account, and clients that act
as it.

``shipped(file)`` reads a guard's policy and binding as a cluster admin applies them; ``install`` creates them (and the
RBAC a test needs) through the raw API, labelled as this suite's so a run interrupted before its cleanup is recognised
by the next; ``remove`` deletes them. ``compactor_client(user)`` is the compactor's own ``KubeClusterClient`` acting as
``user`` through ``Impersonate-User`` (the kubeconfig is a cluster admin's, who may impersonate), optionally with every
write a server-side dry run (admission runs in full, nothing is written). ``SERVICE_ACCOUNT`` is the shipped service
account (manifests/base/rbac.yaml), ``BYSTANDER`` another one of the same namespace a test gives the same RBAC: only the
policies' username tells them apart. ``shipped_rules(kind)`` are the rules of the shipped ClusterRole or Role.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from kubernetes import config as k8s_config

from compactor.errors import ClusterError
from compactor.kube.cluster_client import KubeClusterClient
from tests.e2e.helpers import CREATED_LABEL, REPO_ROOT, Kube, Obj, api_request

GUARD = REPO_ROOT / "manifests" / "guard"
BASE_RBAC = REPO_ROOT / "manifests" / "base" / "rbac.yaml"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
_CLUSTER_PATHS = {
    "ValidatingAdmissionPolicy": f"{ADMISSION}/validatingadmissionpolicies",
    "ValidatingAdmissionPolicyBinding": f"{ADMISSION}/validatingadmissionpolicybindings",
    "ClusterRole": f"{RBAC}/clusterroles",
    "ClusterRoleBinding": f"{RBAC}/clusterrolebindings",
}
_NAMESPACED_PATHS = {"Role": "roles", "RoleBinding": "rolebindings"}


def documents(path: Path) -> list[Obj]:
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


def one(docs: list[Obj], kind: str) -> Obj:
    (found,) = [doc for doc in docs if doc["kind"] == kind]
    return found


_ACCOUNT = one(documents(BASE_RBAC), "ServiceAccount")["metadata"]
ACCOUNT_NAME, ACCOUNT_NAMESPACE = str(_ACCOUNT["name"]), str(_ACCOUNT["namespace"])
SERVICE_ACCOUNT = f"system:serviceaccount:{ACCOUNT_NAMESPACE}:{ACCOUNT_NAME}"
# Same namespace, same RBAC: only the policies' username tells them apart.
BYSTANDER_NAME = "gpu-compactor-e2e-bystander"
BYSTANDER = f"system:serviceaccount:{ACCOUNT_NAMESPACE}:{BYSTANDER_NAME}"


def shipped(file: str) -> list[Obj]:
    """The policy and binding of ``manifests/guard/<file>``, as shipped."""
    return documents(GUARD / file)


def messages(policy: Obj) -> set[str]:
    return {str(v["message"]) for v in policy["spec"]["validations"]}


def message(policy: Obj, words: str) -> str:
    """The one message of ``policy`` that contains ``words``."""
    (found,) = [m for m in messages(policy) if words in m]
    return found


def shipped_rules(kind: str) -> list[Obj]:
    """The rules of the shipped ClusterRole or Role ``gpu-compactor``."""
    found = next(d for d in documents(BASE_RBAC) if d["kind"] == kind and d["metadata"]["name"] == ACCOUNT_NAME)
    rules: list[Obj] = found["rules"]
    return rules


def rbac_for_both(name: str, *, namespace: str = "") -> list[Obj]:
    """The shipped ClusterRole's rules (or, with ``namespace``, the shipped Role's, in it) under ``name``, bound to the
    service account and the bystander."""
    subjects = [
        {"kind": "ServiceAccount", "name": ACCOUNT_NAME, "namespace": ACCOUNT_NAMESPACE},
        {"kind": "ServiceAccount", "name": BYSTANDER_NAME, "namespace": ACCOUNT_NAMESPACE},
    ]
    role, binding = ("Role", "RoleBinding") if namespace else ("ClusterRole", "ClusterRoleBinding")
    meta: Obj = {"name": name, **({"namespace": namespace} if namespace else {})}
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": role, "metadata": meta, "rules": shipped_rules(role)},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": binding,
            "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role, "name": name},
            "subjects": subjects,
        },
    ]


def path(kind: str, name: str = "", namespace: str = "") -> str:
    namespaced = _NAMESPACED_PATHS.get(kind)
    base = f"{RBAC}/namespaces/{namespace}/{namespaced}" if namespaced else _CLUSTER_PATHS[kind]
    return f"{base}/{name}" if name else base


def marked(obj: Obj) -> Obj:
    """``obj`` labelled as this suite's, so a run interrupted before its cleanup is recognised by the next one."""
    meta = obj["metadata"]
    return {**obj, "metadata": {**meta, "labels": {**(meta.get("labels") or {}), CREATED_LABEL: "true"}}}


def install(kube: Kube, obj: Obj) -> bool:
    """``obj`` created (True), or left as found when it exists and was not made by this suite (False: an admin's install of
    the same thing, used and never removed); one this suite left behind in an interrupted run is replaced."""
    kind, name = obj["kind"], obj["metadata"]["name"]
    namespace = str(obj["metadata"].get("namespace", ""))
    obj = marked(obj)
    status, found = api_request(kube, "GET", path(kind, name, namespace))
    if status == 200:
        if (found["metadata"].get("labels") or {}).get(CREATED_LABEL) != "true":
            spec = {k: v for k, v in obj.items() if k not in ("metadata", "apiVersion", "kind")}
            assert {k: found.get(k) for k in spec} == spec, f"{kind} {name} is installed, but not as shipped: {found}"
            return False
        replaced = {**obj, "metadata": {**obj["metadata"], "resourceVersion": found["metadata"]["resourceVersion"]}}
        status, reply = api_request(kube, "PUT", path(kind, name, namespace), replaced)
    else:
        status, reply = api_request(kube, "POST", path(kind, namespace=namespace), obj)
    assert status in (200, 201), f"creating {kind} {name}: HTTP {status} {reply.get('message', '')}"
    return True


def remove(kube: Kube, obj: Obj) -> None:
    kind, name = obj["kind"], obj["metadata"]["name"]
    status, reply = api_request(kube, "DELETE", path(kind, name, str(obj["metadata"].get("namespace", ""))))
    assert status in (200, 202, 404), f"deleting {kind} {name}: HTTP {status} {reply.get('message', '')}"


def compactor_client(user: str = "", *, dry_run: bool = False) -> KubeClusterClient:
    """The compactor's own client; ``user``: impersonated (the kubeconfig is a cluster admin's, who may impersonate)."""
    api_client: Any = k8s_config.new_client_from_config(config_file=os.environ["KUBECONFIG"], persist_config=False)  # type: ignore[no-untyped-call]
    if user:
        api_client.set_default_header("Impersonate-User", user)  # before the client copies its headers for writes
    return KubeClusterClient(api_client, dry_run_all=dry_run)


def denied_by(exc: ClusterError, policy: str) -> bool:
    """A 403 from the ValidatingAdmissionPolicy ``policy`` (not from RBAC, not from another policy)."""
    return exc.status == 403 and f"ValidatingAdmissionPolicy '{policy}'" in str(exc)

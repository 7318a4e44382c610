"""RBAC as the API server evaluates it, over the RBAC objects the shipped manifests bind to the compactor's service account.

``attributes(request)`` turns a request recorded by the fake API server into what the RBAC authorizer sees (verb,
group, resource, namespace, name: k8s.io/apiserver's RequestInfo); ``grants()`` lists the rules bound to
``SERVICE_ACCOUNT`` by manifests/base and manifests/gpu-operator; ``allowed`` matches a request against them as RBAC
does; ``denied(requests)`` names every request of a list the shipped RBAC would refuse (empty: all allowed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from compactor.settings.bundles import RunSettings
from tests.fakeapi import RecordedRequest
from tests.manifests import BASE, GPU_OPERATOR, kustomize_build

Doc = dict[str, Any]
# (namespace, name), as manifests/base creates it
SERVICE_ACCOUNT = (
    RunSettings().executor.state_namespace,
    "gpu-compactor",
)


@dataclass(frozen=True)
class Attributes:
    """A request as the RBAC authorizer sees it (k8s.io/apiserver RequestInfo)."""

    verb: str
    group: str
    resource: str  # resource[/subresource]
    namespace: str
    name: str


def attributes(request: RecordedRequest) -> Attributes:
    parts = [unquote(p) for p in request.path.strip("/").split("/")]
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    resource = rest[0] if len(rest) < 3 else f"{rest[0]}/{rest[2]}"
    name = rest[1] if len(rest) > 1 else ""
    verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(request.method, "")
    if request.method == "GET":
        verb = "get" if name else ("watch" if request.param("watch") in ("true", "1") else "list")
    elif request.method == "DELETE":
        verb = "delete" if name else "deletecollection"
    if verb in ("list", "watch"):  # a list narrowed to one name is authorized as that name, as the API server does
        selector = request.param("fieldSelector") or ""
        names = [term.split("=", 1)[1].lstrip("=") for term in selector.split(",") if term.startswith("metadata.name=")]
        name = names[0] if names else ""
    return Attributes(verb, group, resource, namespace, name)


def grants(account: tuple[str, str] = SERVICE_ACCOUNT) -> list[tuple[str | None, Doc]]:
    """(namespace the rule applies in, None = all; rule) for every rule bound to the service account by the manifests."""
    docs = [*kustomize_build(BASE), *kustomize_build(GPU_OPERATOR)]
    roles = {
        (doc["kind"], doc["metadata"].get("namespace", ""), doc["metadata"]["name"]): doc
        for doc in docs
        if doc["kind"] in ("ClusterRole", "Role")
    }
    grants: list[tuple[str | None, Doc]] = []
    for binding in docs:
        if binding["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        subjects = {(s.get("namespace", ""), s["name"]) for s in binding["subjects"] if s["kind"] == "ServiceAccount"}
        if account not in subjects:
            continue
        where = binding["metadata"].get("namespace") if binding["kind"] == "RoleBinding" else None
        ref = binding["roleRef"]
        role = roles[(ref["kind"], "" if ref["kind"] == "ClusterRole" else str(where), ref["name"])]
        grants.extend((where, rule) for rule in role["rules"])
    return grants


def allowed(request: RecordedRequest | Attributes, rules: list[tuple[str | None, Doc]] | None = None) -> bool:
    """Whether the shipped RBAC lets the service account send ``request`` (RBAC's rule matching: group, resource,
    verb, then resourceNames against the request's name, which a create or an unnamed list does not have)."""
    attrs = request if isinstance(request, Attributes) else attributes(request)
    for namespace, rule in grants() if rules is None else rules:
        if namespace is not None and namespace != attrs.namespace:
            continue
        if (
            attrs.group not in rule["apiGroups"]
            or attrs.resource not in rule["resources"]
            or attrs.verb not in rule["verbs"]
        ):
            continue
        names = rule.get("resourceNames") or []
        if not names or attrs.name in names:
            return True
    return False


def denied(requests: list[RecordedRequest]) -> list[str]:
    return [f"{r.method} {r.path}?{r.query} -> {attributes(r)}" for r in requests if not allowed(r)]

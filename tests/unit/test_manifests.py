"""The deploy files: manifests/ (a kustomize base, the cronjob and controller overlays, monitoring),
config/compactor.yaml, the Dockerfile, and the install commands the docs give.

Covers: every kustomization resolves (each resource exists, parses, is listed once and names its
kind and namespace; when kubectl is installed, ``kubectl kustomize`` builds the same objects); each
overlay sets the image its workloads name; RBAC grants exactly the Kubernetes API requests that
compactor/kube makes (found in its source), no pod delete and no wildcard, ConfigMaps and Leases only
by name (but create, which RBAC cannot restrict by name) in the compactor's namespace and a list of
ConfigMaps in the GPU Operator's (manifests/gpu-operator), none cluster-wide; the CronJob and the
Deployment command lines are accepted by ``compactor``'s own argument parser; the mounted config
and the example config load; the example config lists every setting at its default; the Service,
probes and alerts line up with the container and the metric names; the docs install with ``-k``.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import json
import os
import re
import shutil
import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s_client
from pydantic import BaseModel

from compactor.actions.annotations import FENCE_TAINT_PREFIX, OUR_ANNOTATIONS, STATE_CONFIGMAP
from compactor.actions.memory import HISTORY_CONFIGMAP
from compactor.actions.migmanager import CONFIG_LABEL as MIG_CONFIG_LABEL
from compactor.actions.owners import DELETION_COST
from compactor.actions.steering.pin import CONTROLLER_USERS, POLICY_VERSION, POLICY_VERSION_ANNOTATION
from compactor.actions.surge import SURGE_NOTE, SURGED_BY
from compactor.app.last_run import LAST_RUN_CONFIGMAP
from compactor.cli import build_parser
from compactor.kube.cluster_client import DEFAULT_TIMEOUT
from compactor.kube.lease import LEASE_NAME
from compactor.settings import Settings, load_settings, worst_case_run_seconds
from tests.manifests import (
    BASE,
    CONTROLLER,
    CRONJOB,
    GPU_OPERATOR,
    GUARD,
    KUSTOMIZATIONS,
    MANIFESTS,
    MODES,
    MONITORING,
    NAMESPACE,
    NAMESPACE_ONLY,
    OVERLAYS,
    ROOT,
    STEERING,
    WORKLOADS,
    clear_compactor_env,
    compactor_args,
    containers_of,
    kustomize_build,
    mounted_settings,
    object_key,
    one_object,
    pod_spec,
    read_kustomization,
    resolve_kustomization,
    shown,
)

OPERATOR_NAMESPACE_NAME = Settings().mig.operator_namespace  # where the GPU Operator's mig-parted configs are read
CLUSTER_SCOPED = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
}
# The name the workloads give their image, and the placeholder each overlay's `images:` entry turns it into.
IMAGE = "gpu-compactor"
IMAGE_PLACEHOLDER = {"name": IMAGE, "newName": "REGISTRY/gpu-compactor", "newTag": "TAG"}
METRICS = (
    "gpu_compactor_stranded_share",
    "gpu_compactor_blocked_demand_gpu_equivalents",
    "gpu_compactor_runs_total",
    "gpu_compactor_fenced_nodes",
    "gpu_compactor_last_cycle_timestamp_seconds",
    "gpu_compactor_cycle_errors_total",
    "gpu_compactor_last_run_status",
    "gpu_compactor_last_run_timestamp_seconds",
)
KUBECTL = os.environ.get("KUBECTL") or shutil.which("kubectl")

Doc = dict[str, Any]


def _kubectl_kustomize(directory: Path) -> list[Doc]:
    assert KUBECTL is not None
    built = subprocess.run(
        [KUBECTL, "kustomize", str(directory)], capture_output=True, text=True, timeout=120, check=False
    )
    assert built.returncode == 0, f"kubectl kustomize {shown(directory)}: {built.stderr.strip()}"
    return [doc for doc in yaml.safe_load_all(built.stdout) if doc is not None]


@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=lambda d: str(d.relative_to(MANIFESTS)))
def test_each_kustomization_resolves_to_objects_that_name_their_kind_and_namespace(directory: Path) -> None:
    namespace = OPERATOR_NAMESPACE_NAME if directory == GPU_OPERATOR else NAMESPACE
    for path, doc in resolve_kustomization(directory):
        where = f"{shown(path)}: {doc.get('kind')} {doc.get('metadata', {}).get('name')}"
        assert doc.get("apiVersion") and doc.get("kind") and doc.get("metadata", {}).get("name"), where
        if doc["kind"] not in CLUSTER_SCOPED:
            assert doc["metadata"].get("namespace") == namespace, f"{where}: not in namespace {namespace}"
    if KUBECTL is not None:  # the real build agrees with the resolution every other test reads
        built = _kubectl_kustomize(directory)
        assert sorted(json.dumps(doc, sort_keys=True) for doc in built) == sorted(
            json.dumps(doc, sort_keys=True) for doc in kustomize_build(directory)
        )
        if any(doc["kind"] == "Namespace" for doc in built):
            assert built[0]["kind"] == "Namespace", "kubectl apply -k would create objects before their namespace"


def test_every_yaml_file_under_manifests_is_part_of_a_kustomization() -> None:
    listed = {path for directory in KUSTOMIZATIONS for path, _ in resolve_kustomization(directory)}
    files = {p for p in MANIFESTS.rglob("*") if p.suffix in (".yaml", ".yml") and p.name != "kustomization.yaml"}
    assert files == listed, f"not in any kustomization: {sorted(map(shown, files - listed))}"


@pytest.mark.parametrize("overlay", OVERLAYS, ids=lambda d: d.name)
def test_the_namespace_comes_first_so_apply_creates_it_before_its_objects(overlay: Path) -> None:
    assert read_kustomization(overlay)["resources"][0] == "../../base"
    assert kustomize_build(overlay)[0]["kind"] == "Namespace"


def test_the_overlays_install_the_base_and_either_the_cronjob_or_the_controller() -> None:
    base = {object_key(doc) for doc in kustomize_build(BASE)}
    cronjob = {object_key(doc) for doc in kustomize_build(CRONJOB)}
    controller = {object_key(doc) for doc in kustomize_build(CONTROLLER)}
    assert base <= cronjob and base <= controller
    assert cronjob - base == {("CronJob", NAMESPACE, "gpu-compactor")}
    assert controller - base == {
        ("Deployment", NAMESPACE, "gpu-compactor"),
        ("Service", NAMESPACE, "gpu-compactor-metrics"),
    }
    assert {kind for kind, _, _ in base} == {
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ConfigMap",
    }


@pytest.mark.parametrize("overlay", OVERLAYS, ids=lambda d: d.name)
def test_the_overlay_sets_the_image_its_workloads_name(overlay: Path) -> None:
    assert read_kustomization(overlay)["images"] == [IMAGE_PLACEHOLDER]
    written = {
        container["image"]
        for _, doc in resolve_kustomization(overlay)
        if doc["kind"] in WORKLOADS
        for container in containers_of(doc)
    }
    assert written == {IMAGE}, f"the workloads name {written}; the images: entry replaces {IMAGE}"
    built = {
        container["image"]
        for doc in kustomize_build(overlay)
        if doc["kind"] in WORKLOADS
        for container in containers_of(doc)
    }
    assert built == {f"{IMAGE_PLACEHOLDER['newName']}:{IMAGE_PLACEHOLDER['newTag']}"}


@pytest.mark.parametrize("directory", [BASE, MONITORING], ids=lambda d: d.name)
def test_the_base_and_monitoring_run_no_image_of_their_own(directory: Path) -> None:
    assert "images" not in read_kustomization(directory)
    assert not [doc for doc in kustomize_build(directory) if doc["kind"] in WORKLOADS]


# ----- the Kubernetes API requests compactor/kube makes, found in its source ----------------------

KUBE_PACKAGE = ROOT / "compactor" / "kube"
HTTP_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})
CLUSTER_WIDE = "ClusterRole"  # cluster-scoped objects, all namespaces, or a namespace only known at run time
OWN_NAMESPACE = "Role"  # the compactor's own namespace (``self.namespace``: executor.state_namespace)
# a namespace held by a name ``operator_namespace`` (mig.operator_namespace)
OPERATOR_NAMESPACE = "Role in the GPU Operator's namespace"
# Where each scope is granted: (kustomization, kind, name).
ROLES = {
    CLUSTER_WIDE: (BASE, "ClusterRole", "gpu-compactor"),
    OWN_NAMESPACE: (BASE, "Role", "gpu-compactor"),
    OPERATOR_NAMESPACE: (GPU_OPERATOR, "Role", "gpu-compactor-mig-parted"),
}
_PRIMITIVE = "param_serialize"  # ApiClient.param_serialize: every raw request goes through it


@dataclass(frozen=True, order=True)
class Permission:
    """One RBAC grant: (API group, resource[/subresource], verb) in the ClusterRole or one of the Roles."""

    group: str
    resource: str
    verb: str
    scope: str


@dataclass(frozen=True)
class Request:
    """One Kubernetes API request the code can make, and where."""

    where: str
    method: str
    path: str
    own_namespace: bool  # the path's {namespace} is always ``self.namespace``
    # the path's {namespace} is always the GPU Operator's (a value named ``operator_namespace``)
    operator_namespace: bool = False

    def permission(self) -> Permission:
        parts = self.path.strip("/").split("/")
        group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
        namespaced = len(rest) > 2 and rest[:2] == ["namespaces", "{namespace}"]
        if namespaced:
            rest = rest[2:]
        assert 1 <= len(rest) <= 3 and (len(rest) == 1 or rest[1] == "{name}"), (
            f"{self.where}: cannot read the path {self.path}"
        )
        named = len(rest) > 1  # [resource, {name}, subresource]
        resource = f"{rest[0]}/{rest[2]}" if len(rest) == 3 else rest[0]
        verb = {
            "GET": "get" if named else "list",
            "POST": "create",
            "PUT": "update",
            "PATCH": "patch",
            "DELETE": "delete" if named else "deletecollection",
        }[self.method]
        scope = CLUSTER_WIDE
        if namespaced and self.own_namespace:
            scope = OWN_NAMESPACE
        elif namespaced and self.operator_namespace:
            scope = OPERATOR_NAMESPACE
        return Permission(group, resource, verb, scope)


@dataclass(frozen=True)
class _Param:
    """A value a function takes from its caller: the name of the parameter."""

    name: str


OWN, OPERATOR, ANY, NO_NAMESPACE = "own", "operator", "any", "none"


@dataclass(frozen=True)
class _Sender:
    """A function that sends a request whose path its caller gives; the method and namespace are its own or the caller's."""

    function: ast.FunctionDef
    method: str | _Param
    path: _Param
    namespace: str | _Param  # OWN / OPERATOR / ANY / NO_NAMESPACE, or the parameter holding the path parameters


class _Module:
    """One source file: its module-level string constants and, per function, the names assigned once."""

    def __init__(self, source: str, filename: str) -> None:
        self.filename = filename
        self.tree = ast.parse(source, filename)
        self.constants: dict[str, ast.expr] = {}
        for node in self.tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                self.constants[node.targets[0].id] = node.value
        self.functions = [node for node in ast.walk(self.tree) if isinstance(node, ast.FunctionDef)]
        self._locals = {id(fn): _assigned_once(fn) for fn in self.functions}

    def calls(self) -> list[tuple[ast.FunctionDef, ast.Call]]:
        """Every call in a function, with the innermost function it is written in (whose parameters it can use)."""
        return [(fn, node) for fn in self.functions for node in _own_nodes(fn) if isinstance(node, ast.Call)]

    def where(self, node: ast.AST) -> str:
        return f"{self.filename}:{getattr(node, 'lineno', '?')}"

    def lookup(self, name: str, fn: ast.FunctionDef | None) -> ast.expr | None:
        if fn is not None and name in self._locals[id(fn)]:
            return self._locals[id(fn)][name]
        return self.constants.get(name)

    def string(self, node: ast.expr, fn: ast.FunctionDef | None) -> str | None:
        """The text of a string built from literals, module constants and locals assigned once; None otherwise."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.string(node.left, fn), self.string(node.right, fn)
            return None if left is None or right is None else left + right
        if isinstance(node, ast.Name) and not _is_parameter(node.id, fn):
            if fn is not None and node.id in self._locals[id(fn)]:
                return self.string(self._locals[id(fn)][node.id], fn)
            if node.id in self.constants:
                return self.string(self.constants[node.id], None)
        return None

    def namespace_value(self, node: ast.expr, fn: ast.FunctionDef) -> str:
        """OWN when the namespace is ``self.namespace``; OPERATOR when it is a value named ``operator_namespace`` (a
        parameter, local or attribute: the GPU Operator's namespace, mig.operator_namespace); ANY for any other value."""
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
            and node.attr == "namespace"
        ):
            return OWN
        if (isinstance(node, ast.Name) and node.id == "operator_namespace") or (
            isinstance(node, ast.Attribute) and node.attr == "operator_namespace"
        ):
            return OPERATOR
        if (
            isinstance(node, ast.Name)
            and not _is_parameter(node.id, fn)
            and (bound := self.lookup(node.id, fn)) is not None
        ):
            return self.namespace_value(bound, fn)
        return ANY

    def path_params_namespace(self, node: ast.expr, fn: ast.FunctionDef) -> str | _Param:
        """Where the ``namespace`` entry of a path-parameters dict comes from (a literal, ``dict(x)``, a local or a parameter)."""
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "namespace":
                    return self.namespace_value(value, fn)
            return NO_NAMESPACE
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "dict"
            and len(node.args) == 1
        ):
            return self.path_params_namespace(node.args[0], fn)
        if isinstance(node, ast.Name):
            if _is_parameter(node.id, fn):
                return _Param(node.id)
            bound = self.lookup(node.id, fn)
            if bound is not None:
                return self.path_params_namespace(bound, fn)
        return ANY


def _own_nodes(fn: ast.FunctionDef) -> list[ast.AST]:
    """The nodes of ``fn``'s body, without those of the functions defined inside it."""
    found: list[ast.AST] = []
    pending: list[ast.AST] = [*fn.args.defaults, *fn.body]
    while pending:
        node = pending.pop()
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.append(node)
            pending.extend(ast.iter_child_nodes(node))
    return found


def _assigned_once(fn: ast.FunctionDef) -> dict[str, ast.expr]:
    assigned: dict[str, list[ast.expr]] = {}
    for node in _own_nodes(fn):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    assigned.setdefault(target.id, []).append(node.value)
    return {name: values[0] for name, values in assigned.items() if len(values) == 1}


def _parameters(fn: ast.FunctionDef) -> list[str]:
    return [a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)]


def _is_parameter(name: str, fn: ast.FunctionDef | None) -> bool:
    return fn is not None and name in _parameters(fn)


def _callee(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return call.func.id if isinstance(call.func, ast.Name) else None


def _bind(call: ast.Call, parameters: list[str]) -> dict[str, ast.expr]:
    """The argument each parameter receives at ``call`` (``self`` dropped for a method called on an object)."""
    if parameters[:1] == ["self"] and isinstance(call.func, ast.Attribute):
        parameters = parameters[1:]
    bound = dict(zip(parameters, call.args, strict=False))
    bound.update({keyword.arg: keyword.value for keyword in call.keywords if keyword.arg is not None})
    return bound


def _raw_requests(modules: list[_Module]) -> list[Request]:
    """Every raw request (through ``param_serialize``) whose path and method the source fixes; fails on one it cannot follow.

    A sender found in one module is one in all: the client's parts call ``_send``/``_get`` of ``client_base.py``,
    which call ``transport.py``, where the one ``param_serialize`` is."""
    primitive = ast.parse("def param_serialize(method, resource_path, path_params): pass").body[0]
    assert isinstance(primitive, ast.FunctionDef)
    primitive_parameters = list(inspect.signature(k8s_client.ApiClient.param_serialize).parameters)
    senders: dict[str, _Sender] = {
        _PRIMITIVE: _Sender(primitive, _Param("method"), _Param("resource_path"), _Param("path_params"))
    }
    requests: dict[str, Request] = {}
    changed = True
    while changed:  # until no new sender appears: a function forwarding its path parameter to a sender is one too
        changed = False
        for module, fn, call in ((m, fn, call) for m in modules for fn, call in m.calls()):
            name = _callee(call)
            if name not in senders or fn.name == name:
                continue
            sender = senders[name]
            bound = _bind(call, primitive_parameters if name == _PRIMITIVE else _parameters(sender.function))
            where = module.where(call)
            method: str | _Param = sender.method
            if isinstance(method, _Param):
                given = bound.get(method.name)
                assert given is not None, f"{where}: {name}() without its method"
                text = module.string(given, fn)
                if text is not None:
                    method = text
                elif isinstance(given, ast.Name) and _is_parameter(given.id, fn):
                    method = _Param(given.id)
                else:
                    raise AssertionError(f"{where}: cannot tell the HTTP method {name}() sends; give it as a literal")
            namespace: str | _Param = sender.namespace
            if isinstance(namespace, _Param):
                params = bound.get(namespace.name)
                namespace = NO_NAMESPACE if params is None else module.path_params_namespace(params, fn)
            path_argument = bound.get(sender.path.name)
            assert path_argument is not None, f"{where}: {name}() without its path"
            path = module.string(path_argument, fn)
            if path is not None:
                assert method in HTTP_METHODS, f"{where}: {name}() sends {path} with method {method!r}"
                assert isinstance(method, str)
                requests[where] = Request(where, method, path, namespace == OWN, namespace == OPERATOR)
            elif isinstance(path_argument, ast.Name) and _is_parameter(path_argument.id, fn):
                assert sum(f.name == fn.name for m in modules for f in m.functions) == 1, (
                    f"{where}: two functions named {fn.name} send requests"
                )
                new = _Sender(fn, method, _Param(path_argument.id), namespace)
                if senders.get(fn.name) != new:
                    senders[fn.name] = new
                    changed = True
            else:
                raise AssertionError(
                    f"{where}: cannot follow the path {name}() requests; build it from literals and constants"
                )
    return list(requests.values())


class _Recorded(Exception):
    """Not an error: carries the method and path of the request a typed API method would send."""


class _PathRecorder(k8s_client.ApiClient):
    """Stops a typed API method at the request it would send, telling its method and path."""

    def param_serialize(self, method: Any, resource_path: Any, *args: Any, **kwargs: Any) -> Any:
        raise _Recorded(method, resource_path)


def _typed_request(api_class: type, method_name: str) -> tuple[str, str]:
    """(HTTP method, path) of a typed method of the kubernetes client, e.g. CoreV1Api.list_node -> (GET, /api/v1/nodes)."""
    recorder = _PathRecorder()
    try:
        bound = getattr(api_class(recorder), method_name)
        required = [
            p
            for p in inspect.signature(bound).parameters.values()
            if p.default is inspect.Parameter.empty and p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
        ]
        try:
            bound(*({} if p.name == "body" else "x" for p in required))
        except _Recorded as recorded:
            method, path = recorded.args
            return str(method), str(path)
        raise AssertionError(f"{api_class.__name__}.{method_name} sent no request")
    finally:
        recorder.close()  # type: ignore[no-untyped-call]


def _typed_requests_in_module(module: _Module, api_classes: list[type]) -> list[Request]:
    """Every use of a typed API method (``core.list_node``, called or passed on, as ``_Listing`` does: its namespace is then
    the first of the ``_Listing``'s arguments, ``(namespace,)``)."""
    methods: dict[str, list[type]] = {}
    for api_class in api_classes:
        for name, _ in inspect.getmembers(api_class, inspect.isfunction):
            operation = name.removesuffix("_with_http_info").removesuffix("_without_preload_content")
            if hasattr(api_class, f"_{operation}_serialize"):  # a request method, not a helper such as close()
                methods.setdefault(name, []).append(api_class)
    calls = {id(call.func): call for _, call in module.calls()}
    listings = {id(call.args[0]): call for _, call in module.calls() if _callee(call) == "_Listing" and call.args}
    found = []
    for fn in module.functions:
        for node in ast.walk(fn):
            if not (isinstance(node, ast.Attribute) and node.attr in methods):
                continue
            owners = methods[node.attr]
            assert len(owners) == 1, (
                f"{module.where(node)}: {node.attr} is a method of {[c.__name__ for c in owners]}: which?"
            )
            method, path = _typed_request(owners[0], node.attr)
            namespace = ANY
            call = calls.get(id(node))
            listing = listings.get(id(node))
            if call is not None:
                given = (
                    call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "namespace"), None)
                )
                namespace = ANY if given is None else module.namespace_value(given, fn)
            elif (
                listing is not None
                and len(listing.args) > 1
                and isinstance(listing.args[1], ast.Tuple)
                and listing.args[1].elts
            ):
                namespace = module.namespace_value(listing.args[1].elts[0], fn)
            found.append(Request(module.where(node), method, path, namespace == OWN, namespace == OPERATOR))
    return found


def _api_classes(modules: list[_Module]) -> list[type]:
    """The typed API classes compactor/kube instantiates (``k8s_client.CoreV1Api(api_client)``, ...)."""
    names = {_callee(call) for module in modules for _, call in module.calls()}
    classes = [
        getattr(k8s_client, name)
        for name in sorted(n for n in names if n and n.endswith("Api") and hasattr(k8s_client, n))
    ]
    assert classes, "compactor/kube instantiates no typed API class"
    return classes


def _check_nothing_escapes(module: _Module, requests: list[Request]) -> None:
    """What the finder cannot see would go unchecked: raw calls outside param_serialize, watches, stray API paths."""
    for fn, call in module.calls():
        if _callee(call) == "call_api":
            assert any(_callee(c) == _PRIMITIVE for c in ast.walk(fn) if isinstance(c, ast.Call)), (
                f"{module.where(call)}: call_api without param_serialize in {fn.name}()"
            )
        assert all(keyword.arg != "watch" for keyword in call.keywords), (
            f"{module.where(call)}: a watch needs the watch verb"
        )
    paths = {request.path for request in requests}
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            assert node.value != "watch", f"{module.where(node)}: a watch needs the watch verb"
            if node.value.startswith(("/api/", "/apis/")):
                assert node.value in paths, (
                    f"{module.where(node)}: the API path {node.value} is used in a way the test cannot follow"
                )


def _api_requests(sources: dict[str, str] | None = None) -> list[Request]:
    """Every Kubernetes API request in compactor/kube (or in ``sources``: file name -> text)."""
    if sources is None:
        sources = {shown(path): path.read_text(encoding="utf-8") for path in sorted(KUBE_PACKAGE.glob("*.py"))}
    modules = [_Module(source, filename) for filename, source in sources.items()]
    api_classes = _api_classes(modules)
    requests = _raw_requests(modules)
    for module in modules:
        requests.extend(_typed_requests_in_module(module, api_classes))
    for module in modules:
        _check_nothing_escapes(module, [r for r in requests if r.where.startswith(f"{module.filename}:")])
    return requests


def _roles() -> list[Doc]:
    """Every ClusterRole and Role the manifests ship."""
    return [
        doc
        for directory in KUSTOMIZATIONS
        for _, doc in resolve_kustomization(directory)
        if doc["kind"] in ("ClusterRole", "Role")
    ]


def _granted() -> set[Permission]:
    granted: set[Permission] = set()
    for scope, (directory, kind, name) in ROLES.items():
        for rule in one_object(directory, kind, name)["rules"]:
            assert set(rule) - {"resourceNames"} == {"apiGroups", "resources", "verbs"}, f"{kind} {name}: {rule}"
            for group, resource, verb in itertools.product(rule["apiGroups"], rule["resources"], rule["verbs"]):
                granted.add(Permission(group, resource, verb, scope))
    return granted


def test_rbac_grants_exactly_the_requests_compactor_kube_makes() -> None:
    requests = _api_requests()
    needed: dict[Permission, list[str]] = {}
    for request in requests:
        needed.setdefault(request.permission(), []).append(f"{request.method} {request.path} ({request.where})")
    granted = _granted()
    missing = {permission: needed[permission] for permission in sorted(needed.keys() - granted)}
    unused = sorted(granted - needed.keys())
    assert not missing, f"requests without a grant in manifests/base/rbac.yaml (or manifests/gpu-operator): {missing}"
    assert not unused, f"grants no request in compactor/kube uses: {unused}"


def test_the_request_finder_sees_each_way_compactor_kube_calls_the_api() -> None:
    requests = _api_requests()
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
    found = {r.permission() for r in _api_requests({**sources, shown(path): source + textwrap.dedent(_NEW_CALLS)})}
    new = {
        Permission("", "secrets", "get", CLUSTER_WIDE),
        Permission("", "secrets", "get", OWN_NAMESPACE),
        Permission("", "services", "list", CLUSTER_WIDE),
        Permission("", "configmaps", "list", CLUSTER_WIDE),
    }  # a list in any namespace but the GPU Operator's needs a new grant
    assert new <= found and not new & _granted()
    dynamic = "\n    def read_any(self, kind: str) -> Obj | None:\n        return self._get(f'/api/v1/{kind}', {}, kind, 'x')\n"
    with pytest.raises(AssertionError, match="cannot follow the path"):
        _api_requests({**sources, shown(path): source + "\n\nclass _Dynamic(KubeClusterClient):" + dynamic})


def test_the_role_is_in_the_namespace_of_the_state_configmap_and_the_lease(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = mounted_settings(tmp_path, monkeypatch)
    for kind in ("Role", "RoleBinding"):
        assert one_object(BASE, kind)["metadata"]["namespace"] == settings.executor.state_namespace


def test_the_steering_policy_reads_the_parameter_configmap_the_compactor_writes() -> None:
    defaults = Settings().executor
    name, namespace = defaults.steering_name, defaults.state_namespace
    policy = one_object(STEERING, "MutatingAdmissionPolicy", name)
    binding = one_object(STEERING, "MutatingAdmissionPolicyBinding", name)
    parameters = one_object(BASE, "ConfigMap", name)
    assert parameters["metadata"]["namespace"] == namespace and not parameters.get("data")
    assert binding["spec"]["policyName"] == name
    assert binding["spec"]["paramRef"] == {"name": name, "namespace": namespace, "parameterNotFoundAction": "Allow"}
    assert policy["metadata"]["annotations"][POLICY_VERSION_ANNOTATION] == POLICY_VERSION  # what detect.py insists on
    spec = policy["spec"]
    assert spec["paramKind"] == {"apiVersion": "v1", "kind": "ConfigMap"} and spec["failurePolicy"] == "Ignore"
    assert spec["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
    ]
    creators = next(c["expression"] for c in spec["matchConditions"] if c["name"] == "creators")
    assert re.findall(r"'([^']+)'", creators) == list(CONTROLLER_USERS)  # the pin's Python mirror admits the same users


def test_the_compactor_may_write_its_steering_parameters_and_only_read_the_policy() -> None:
    name = Settings().executor.steering_name
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
        }
    ]


def test_the_node_guard_holds_the_service_account_to_the_node_fields_the_executor_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """manifests/guard: node UPDATEs by the base's service account only, denied (403) unless they change nothing but taints
    and annotations under compactor.io/ and the MIG config label, which cover every key the executor writes on a node.
    tests/e2e/test_node_guard.py sends each of its node patches, and each forbidden change, to a real kube-apiserver."""
    name = "gpu-compactor-node-guard"
    spec = one_object(GUARD, "ValidatingAdmissionPolicy", name)["spec"]
    assert one_object(GUARD, "ValidatingAdmissionPolicyBinding", name)["spec"] == {
        "policyName": name,
        "validationActions": ["Deny"],
    }
    account = one_object(BASE, "ServiceAccount")["metadata"]
    assert [c["expression"] for c in spec["matchConditions"]] == [
        f"request.userInfo.username == 'system:serviceaccount:{account['namespace']}:{account['name']}'"
    ]
    assert spec["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["nodes"]}
    ]
    assert spec["failurePolicy"] == "Fail" and "paramKind" not in spec
    owned = "compactor.io/"
    variables = {v["name"]: v["expression"] for v in spec["variables"]}
    assert variables["labels"].count(f"k != '{MIG_CONFIG_LABEL}'") == 2  # changed or added, and removed
    assert variables["annotations"].count(f"!k.startsWith('{owned}')") == 2
    assert all(f"!t.key.startsWith('{owned}')" in variables[v] for v in ("oldTaints", "newTaints"))
    settings = mounted_settings(tmp_path, monkeypatch).executor
    for key in (settings.taint_key, FENCE_TAINT_PREFIX, *OUR_ANNOTATIONS):
        assert key.startswith(owned), f"{key}: the executor writes it on nodes, the guard refuses it (outside {owned})"
    # its own taints only as fences: a NoExecute one would evict every pod of the node, no PodDisruptionBudget asked
    assert "variables.ownTaints.all(t, t.effect == 'NoSchedule')" in [v["expression"] for v in spec["validations"]]
    for validation in spec["validations"]:
        assert validation["reason"] == "Forbidden"
        assert validation["messageExpression"].startswith(f"'{validation['message']}; "), (
            "the message, then what was changed"
        )


def _guard(name: str) -> dict[str, Any]:
    """The spec of the guard policy ``name``, checked for what every guard shares: bound with Deny, no parameters,
    failurePolicy Fail (an expression that fails to evaluate denies), each message first in its messageExpression."""
    spec: dict[str, Any] = one_object(GUARD, "ValidatingAdmissionPolicy", name)["spec"]
    assert one_object(GUARD, "ValidatingAdmissionPolicyBinding", name)["spec"] == {
        "policyName": name,
        "validationActions": ["Deny"],
    }
    assert spec["failurePolicy"] == "Fail" and "paramKind" not in spec
    for validation in spec["validations"]:
        assert validation["reason"] == "Forbidden"
        assert validation["messageExpression"].startswith(f"'{validation['message']}; "), validation["message"]
    return spec


def test_the_pod_and_scale_guards_hold_the_service_account_to_what_a_move_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """manifests/guard: pod UPDATEs and Deployment scales by the base's service account only; the keys they let it write
    are the ones compactor/actions/surge.py and steps/steer.py write. tests/e2e/test_guard_policies.py sends every such
    patch, and each forbidden change, to a real kube-apiserver."""
    account = one_object(BASE, "ServiceAccount")["metadata"]
    itself = [f"request.userInfo.username == 'system:serviceaccount:{account['namespace']}:{account['name']}'"]
    pods = _guard("gpu-compactor-pod-guard")
    assert [c["expression"] for c in pods["matchConditions"]] == itself
    assert pods["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods"]}
    ]
    variables = {v["name"]: v["expression"] for v in pods["variables"]}
    assert variables["labels"].count(f"k != '{SURGED_BY}'") == 2  # changed or added, and removed
    owned = "compactor.io/"
    assert variables["annotations"].count(f"!k.startsWith('{owned}')") == 2
    assert variables["annotations"].count(f"k != '{DELETION_COST}'") == 2
    assert SURGE_NOTE.startswith(owned), f"{SURGE_NOTE}: written on pods, refused by the pod guard"
    settings = mounted_settings(tmp_path, monkeypatch).executor
    assert settings.taint_key.startswith(owned), "the toleration of the reservation taint would be refused"
    assert f"t.key.startsWith('{owned}')" in variables["foreignTolerations"]

    scale = _guard("gpu-compactor-scale-guard")
    assert [c["expression"] for c in scale["matchConditions"]] == itself
    assert scale["matchConstraints"]["resourceRules"] == [
        {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["deployments/scale"]}
    ]


def test_the_state_guard_keeps_everyone_else_from_writing_the_compactors_configmaps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """manifests/guard/state.yaml: CREATE and UPDATE (never DELETE) of exactly the ConfigMaps the code writes, in the
    base's namespace, by anyone but the base's service account."""
    settings = mounted_settings(tmp_path, monkeypatch).executor
    account = one_object(BASE, "ServiceAccount")["metadata"]
    assert settings.state_namespace == account["namespace"] == NAMESPACE
    spec = _guard("gpu-compactor-state-guard")
    (rule,) = spec["matchConstraints"]["resourceRules"]
    assert (rule["apiGroups"], rule["resources"], rule["operations"]) == ([""], ["configmaps"], ["CREATE", "UPDATE"])
    assert sorted(rule["resourceNames"]) == sorted(
        [STATE_CONFIGMAP, HISTORY_CONFIGMAP, LAST_RUN_CONFIGMAP, settings.steering_name]
    )
    assert [c["expression"] for c in spec["matchConditions"]] == [
        f"request.namespace == '{NAMESPACE}'",
        f"request.userInfo.username != 'system:serviceaccount:{account['namespace']}:{account['name']}'",
    ]
    variables = {v["name"]: v["expression"] for v in spec["variables"]}
    assert variables["steering"] == f"object.metadata.name == '{settings.steering_name}'"
    assert one_object(BASE, "ConfigMap", settings.steering_name).get("data") in (None, {}), (
        "the admin creates the steering ConfigMap: the guard admits it only empty"
    )


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
    steering = Settings().executor.steering_name
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


# ----- the workloads --------------------------------------------------------------------------


def test_the_cronjob_runs_one_cycle_in_cluster_and_never_overlaps() -> None:
    cronjob = one_object(CRONJOB, "CronJob")
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"
    args = build_parser().parse_args(compactor_args(cronjob))
    assert (args.command, args.once, args.in_cluster, args.dry_run) == ("run", True, True, False)
    assert args.config == "/etc/gpu-compactor/compactor.yaml"


def test_the_deployment_command_is_accepted_by_the_cli() -> None:
    deployment = one_object(CONTROLLER, "Deployment")
    argv = compactor_args(deployment)
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"compactor rejects the Deployment's command line {argv} (exit {exc.code})")
    assert args.command == "controller"
    assert args.in_cluster is True
    assert args.config == "/etc/gpu-compactor/compactor.yaml"


def test_the_controller_runs_two_replicas_live_on_healthz_and_ready_on_readyz() -> None:
    deployment = one_object(CONTROLLER, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    (container,) = pod_spec(deployment)["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http-metrics": 8080}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http-metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http-metrics"}


@pytest.mark.parametrize(
    ("overlay", "kind"), [(CRONJOB, "CronJob"), (CONTROLLER, "Deployment")], ids=["CronJob", "Deployment"]
)
def test_pods_run_as_non_root_on_a_read_only_root_filesystem(overlay: Path, kind: str) -> None:
    spec = pod_spec(one_object(overlay, kind))
    (container,) = spec["containers"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] != 0
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts == {"config": "/etc/gpu-compactor", "tmp": "/tmp"}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["config"]["configMap"]["name"] == "gpu-compactor-config"


def test_the_mounted_config_loads_and_keeps_the_compactor_from_moving_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = mounted_settings(tmp_path, monkeypatch)
    assert {"kube-system", NAMESPACE} <= set(settings.planner.exclude_namespaces)


def test_the_cronjob_deadline_covers_the_longest_run_its_config_allows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = mounted_settings(tmp_path, monkeypatch)
    cronjob = one_object(CRONJOB, "CronJob")
    job = cronjob["spec"]["jobTemplate"]["spec"]
    assert settings.executor.max_run_seconds is not None  # without a budget, 20 moves x 1,590 s could run for hours
    assert worst_case_run_seconds(settings) <= job["activeDeadlineSeconds"]
    # the bound does bind: defaults would not fit
    assert worst_case_run_seconds(Settings()) > job["activeDeadlineSeconds"]
    # SIGTERM stops at the next wait; an API call in flight may take its whole timeout first
    assert pod_spec(cronjob)["terminationGracePeriodSeconds"] >= DEFAULT_TIMEOUT + 10


def test_the_metrics_service_selects_the_controller_pods() -> None:
    service = one_object(CONTROLLER, "Service", "gpu-compactor-metrics")
    labels = one_object(CONTROLLER, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert service["spec"]["ports"] == [
        {"name": "http-metrics", "port": 8080, "targetPort": "http-metrics", "protocol": "TCP"}
    ]
    monitor = one_object(MONITORING, "ServiceMonitor")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert [endpoint["port"] for endpoint in monitor["spec"]["endpoints"]] == ["http-metrics"]


def test_the_alerts_use_the_exported_metric_names() -> None:
    rule = one_object(MONITORING, "PrometheusRule")
    alerts = {r["alert"]: r["expr"] for group in rule["spec"]["groups"] for r in group["rules"]}
    # tests/unit/test_alert_rules.py runs the controller-health and CronJob ones through promtool
    assert len(alerts) == 13
    exprs = " ".join(alerts.values())
    for metric in METRICS:
        assert metric in exprs, f"no alert on {metric}"
    assert 'gpu_compactor_runs_total{status="failed", installation=""}' in exprs
    assert (
        "gpu_compactor_last_run_planned_freed_gpus and on (instance) (gpu_compactor_leader == 1)"
        in alerts["GpuCompactorRunFellShort"]
    )
    assert "by (pool)" in alerts["GpuCapacityStranded"]
    assert "fragmentation_rate" not in exprs  # compaction cannot lower it: no alert keys on it (issue 14)
    assert 'gpu_compactor_mig_reconfigurations_total{result!="success"}' in alerts["GpuCompactorMigRecutFailed"]


# ----- the docs' install commands ---------------------------------------------------------------------


def _install_texts() -> dict[Path, str]:
    files = [
        ROOT / "README.md",
        *sorted((ROOT / "docs").glob("*.md")),
        ROOT / "examples" / "README.md",
        ROOT / "Dockerfile",
        *sorted(MANIFESTS.rglob("*.yaml")),
    ]
    return {path: path.read_text(encoding="utf-8") for path in files}


def test_the_docs_install_with_kustomizations_that_exist() -> None:
    applied: set[Path] = set()
    for path, text in _install_texts().items():
        assert not re.search(r"kubectl apply -f\s+\S*manifests", text), (
            f"{shown(path)} still installs with kubectl apply -f"
        )
        for target in re.findall(r"kubectl apply -k\s+([\w./-]+)", text):
            directory = (ROOT / target).resolve()
            assert directory in KUSTOMIZATIONS, f"{shown(path)}: kubectl apply -k {target}: not a kustomization"
            applied.add(directory)
        for name in re.findall(r"kustomize edit set image ([\w./-]+)=", text):
            assert name == IMAGE, (
                f"{shown(path)}: kustomize edit set image {name}=...: the workloads name their image {IMAGE}"
            )
    assert applied == {NAMESPACE_ONLY, CRONJOB, CONTROLLER, MONITORING, STEERING, GPU_OPERATOR, GUARD, *MODES}
    readme = _install_texts()[ROOT / "README.md"]
    for step in (
        "docker build -t REGISTRY/gpu-compactor:TAG .",
        "docker push REGISTRY/gpu-compactor:TAG",
        f"kustomize edit set image {IMAGE}=REGISTRY/gpu-compactor:TAG",
    ):
        assert step in readme, f"README.md does not say {step}"


def test_the_examples_readme_points_only_inside_the_repository() -> None:
    readme = ROOT / "examples" / "README.md"
    text = readme.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)", text) + re.findall(r"`(\.\./[^`\s]+)`", text)
    for target in targets:
        if re.match(r"[a-z]+://", target):
            continue
        resolved = (readme.parent / target).resolve()
        assert resolved.is_relative_to(ROOT) and resolved.exists(), (
            f"examples/README.md points at {target}, not a file of the repository"
        )


# ----- config and image ----------------------------------------------------------------------------


def test_the_example_config_loads() -> None:
    load_settings(str(ROOT / "config" / "compactor.yaml"))


def test_the_example_config_lists_every_setting_at_its_default(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_compactor_env(monkeypatch)
    written = _flatten(yaml.safe_load((ROOT / "config" / "compactor.yaml").read_text(encoding="utf-8")))
    defaults = _flatten(Settings().model_dump())
    assert sorted(written) == sorted(defaults), (
        f"config/compactor.yaml lacks {sorted(defaults.keys() - written.keys())}, "
        f"has unknown {sorted(written.keys() - defaults.keys())}"
    )
    differing = {k: {"written": v, "default": defaults[k]} for k, v in written.items() if v != defaults[k]}
    assert not differing, f"config/compactor.yaml shows values other than the defaults: {differing}"


def _groups(model: type[BaseModel], prefix: str = "") -> set[str]:
    """Dotted paths of the nested settings groups (``planner``, ``planner.move_cost``, ...)."""
    found: set[str] = set()
    for name, info in model.model_fields.items():
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
            found |= {prefix + name} | _groups(info.annotation, f"{prefix}{name}.")
    return found


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"planner": {"workers": 2}}`` -> ``{"planner.workers": 2}``; dict-valued fields (pod_selector) stay whole."""
    flat: dict[str, Any] = {}
    groups = _groups(Settings)
    for key, value in tree.items():
        path = prefix + key
        if path in groups and isinstance(value, dict):
            flat.update(_flatten(value, path + "."))
        else:
            flat[path] = value
    return flat


def test_the_dockerfile_installs_the_package_and_runs_compactor_as_a_non_root_user() -> None:
    lines = [line.strip() for line in (ROOT / "Dockerfile").read_text(encoding="utf-8").splitlines()]
    assert "FROM python:3.11-slim" in lines
    assert any(line.startswith("RUN pip install") and line.endswith(" .") for line in lines)
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users and not users[-1].startswith(("0", "root")), f"USER {users}"
    assert 'ENTRYPOINT ["compactor"]' in lines


# ----- a first install that cannot hurt (issue 14, item 4) --------------------------------------------


def test_the_shipped_config_plans_without_acting_and_each_mode_kustomization_sets_its_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert mounted_settings(tmp_path, monkeypatch).mode == "plan"
    for directory in MODES:
        (config_map,) = [doc for doc in kustomize_build(directory) if doc["kind"] == "ConfigMap"]
        assert (config_map["metadata"]["name"], config_map["metadata"]["namespace"]) == (
            "gpu-compactor-mode",
            NAMESPACE,
        )
        monkeypatch.setenv("COMPACTOR_MODE", config_map["data"]["COMPACTOR_MODE"])
        path = tmp_path / "compactor.yaml"
        assert load_settings(str(path)).mode == directory.name  # the environment overrides the mounted file's plan


def test_both_workloads_read_the_mode_and_run_without_it(tmp_path: Path) -> None:
    for overlay, kind in ((CRONJOB, "CronJob"), (CONTROLLER, "Deployment")):
        (container,) = pod_spec(one_object(overlay, kind))["containers"]
        assert {"configMapRef": {"name": "gpu-compactor-mode", "optional": True}} in container["envFrom"], overlay


def readme_apply_commands() -> list[Path]:
    """The kustomizations the README applies with `kubectl apply -k`, in the order it lists them."""
    readme = (ROOT / "README.md").read_text()
    return [ROOT / found for found in re.findall(r"kubectl apply -k (manifests/[\w/-]+)", readme)]


def test_the_readme_creates_the_namespace_before_anything_in_it() -> None:
    """Issue 18: the first install applied a mode before the overlay that brought the namespace, and
    `kubectl apply -k manifests/mode/report` failed on an empty cluster ("namespaces gpu-compactor not found")."""
    created: set[str] = set()
    for kustomization in readme_apply_commands():
        built = kustomize_build(kustomization)
        created |= {doc["metadata"]["name"] for doc in built if doc["kind"] == "Namespace"}
        used = {doc["metadata"].get("namespace") for doc in built} & {NAMESPACE}
        assert used <= created, f"{kustomization.relative_to(ROOT)} needs namespace {NAMESPACE} before it exists"
    assert NAMESPACE in created


@pytest.mark.parametrize("mode", MODES, ids=lambda path: path.name)
def test_deleting_a_mode_leaves_the_namespace_and_its_state(mode: Path) -> None:
    """`kubectl delete -k manifests/mode/apply` (going back to the default mode) deletes what the mode holds:
    were the namespace among it, the history, the runs' results and the workloads would go with it."""
    assert [doc["kind"] for doc in kustomize_build(mode)] == ["ConfigMap"]

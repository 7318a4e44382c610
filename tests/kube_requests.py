"""The Kubernetes API requests compactor/kube makes, found in its source, and the RBAC permissions they need.

``api_requests()`` reads every module of compactor/kube (or the sources it is given) and returns each ``Request``:
raw ones (through ``ApiClient.param_serialize``, followed through the functions that forward a path to it) and
typed ones (``CoreV1Api.list_node``, ...: the method and path each would send, recorded by calling it); it fails
on a request whose path or method it cannot follow, a watch, or an API path used in a way it cannot see.
``Request.permission()`` is the ``Permission`` (group, resource, verb, scope) it needs, the scope being
``CLUSTER_WIDE``, ``OWN_NAMESPACE`` or ``OPERATOR_NAMESPACE``; ``granted_permissions()`` is what the shipped roles
(``ROLES``) grant. Used by tests/unit/manifests/test_manifests_rbac.py (RBAC grants exactly these) and
tests/unit/project/test_request_finder.py (the finder itself).
"""

from __future__ import annotations

import ast
import inspect
import itertools
from dataclasses import dataclass
from typing import Any

from kubernetes import client as k8s_client

from tests.manifests import BASE, GPU_OPERATOR, ROOT, one_object, shown

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


def api_requests(sources: dict[str, str] | None = None) -> list[Request]:
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


def granted_permissions() -> set[Permission]:
    granted: set[Permission] = set()
    for scope, (directory, kind, name) in ROLES.items():
        for rule in one_object(directory, kind, name)["rules"]:
            assert set(rule) - {"resourceNames"} == {"apiGroups", "resources", "verbs"}, f"{kind} {name}: {rule}"
            for group, resource, verb in itertools.product(rule["apiGroups"], rule["resources"], rule["verbs"]):
                granted.add(Permission(group, resource, verb, scope))
    return granted

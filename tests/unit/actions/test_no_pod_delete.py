"""No code path in ``compactor/`` deletes a pod: pods leave only through the Eviction API, so PDBs are always asked.

Every ``.py`` file under ``compactor/`` is parsed and walked. A finding is any of:

* a pod-delete API named in code: ``delete_namespaced_pod``, ``delete_collection_namespaced_pod``
  (also ``*_with_http_info``), as an attribute, a name or a ``getattr`` string;
* an HTTP DELETE on a pods path: a call whose string arguments hold both ``DELETE`` and a
  path with a ``pods`` segment (``/api/v1/namespaces/{namespace}/pods/{name}``);
* ``.delete(...)``/``.delete_collection(...)`` on a pod resource: the receiver or the
  arguments mention pods (``api.resources.get(kind="Pod").delete(...)``, ``requests.delete(url_of_pod)``).

The scanner is tested on snippets first, so a scan that sees nothing is not mistaken for a clean tree.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import compactor
from compactor.actions.port.client import ClusterClient

ROOT = Path(compactor.__file__).parent
POD_DELETE_API = re.compile(r"delete_(collection_)?namespaced_pod(_with_http_info)?$|delete_pod$", re.IGNORECASE)
PODS_PATH = re.compile(r"(^|/)pods(/|$|\?)")
HTTP_DELETE = re.compile(r"^\s*delete\s*$", re.IGNORECASE)
POD_WORD = re.compile(r"pod", re.IGNORECASE)


def _strings(node: ast.AST) -> list[str]:
    """Every string constant inside ``node`` (f-string parts included)."""
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def pod_deletes(source: str, filename: str = "<snippet>") -> list[str]:
    """Where ``source`` deletes a pod, as ``file:line: what`` strings."""
    findings: list[str] = []
    tree = ast.parse(source, filename)

    def found(node: ast.AST, what: str) -> None:
        findings.append(f"{filename}:{getattr(node, 'lineno', '?')}: {what}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and POD_DELETE_API.search(node.attr):
            found(node, f"pod delete API .{node.attr}")
        elif isinstance(node, ast.Name) and POD_DELETE_API.search(node.id):
            found(node, f"pod delete API {node.id}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and POD_DELETE_API.match(node.value):
            found(node, f"pod delete API named in a string: {node.value!r}")
        elif isinstance(node, ast.Call):
            strings = _strings(node)
            if any(HTTP_DELETE.match(s) for s in strings) and any(PODS_PATH.search(s) for s in strings):
                found(node, f"HTTP DELETE on a pods path: {ast.unparse(node)[:120]}")
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in ("delete", "delete_collection"):
                around = (
                    ast.unparse(func.value)
                    + " "
                    + " ".join(ast.unparse(a) for a in [*node.args, *(k.value for k in node.keywords)])
                )
                if POD_WORD.search(around):
                    found(node, f".{func.attr}() on a pod resource: {ast.unparse(node)[:120]}")
    return findings


# --------------------------------------------------------------------------- the scanner itself

BAD = {
    "kubernetes client": "core.delete_namespaced_pod(name, namespace)",
    "kubernetes client, collection": "core.delete_collection_namespaced_pod(namespace, label_selector='app=x')",
    "with http info": "self._core.delete_namespaced_pod_with_http_info(name=n, namespace=ns)",
    "bound method": "remove = api.delete_namespaced_pod\nremove(n, ns)",
    "getattr": "getattr(api, 'delete_namespaced_pod')(n, ns)",
    "raw call_api": "api.call_api('/api/v1/namespaces/{namespace}/pods/{name}', 'DELETE', path_params={})",
    "our _send": 'self._send("DELETE", "/api/v1/namespaces/{namespace}/pods/{name}", params, what)',
    "method keyword": 'self._send(path="/api/v1/namespaces/{namespace}/pods/{name}", method="delete")',
    "f-string path": 'session.request("DELETE", f"{base}/api/v1/namespaces/{ns}/pods/{name}")',
    "requests.delete": 'requests.delete(f"{base}/api/v1/namespaces/{ns}/pods/{name}")',
    "dynamic client": 'client.resources.get(api_version="v1", kind="Pod").delete(name=n, namespace=ns)',
    "pod object": "pod.delete()",
    "collection of pods": "pods_api.delete_collection(namespace=ns)",
}

GOOD = {
    "eviction": 'self._send("POST", "/api/v1/namespaces/{namespace}/pods/{name}/eviction", params, what, body=body)',
    "state configmap": 'self._send("DELETE", "/api/v1/namespaces/{namespace}/configmaps/{name}", params, what)',
    "dict bookkeeping": "del self.pods[key]\nself._pending.pop(pod_uid, None)",
    "deletion timestamp": "terminating = bool(pod['metadata'].get('deletionTimestamp'))",
    "docstring": '"""Never calls delete_namespaced_pod: pods leave through evictions."""',
    "reading pods": 'self._send("GET", "/api/v1/namespaces/{namespace}/pods/{name}", params, what)',
    "deleting a node label": "client.delete(name)",
}


@pytest.mark.parametrize("snippet", list(BAD.values()), ids=list(BAD))
def test_the_scanner_finds_pod_deletes(snippet: str) -> None:
    assert pod_deletes(snippet), snippet


@pytest.mark.parametrize("snippet", list(GOOD.values()), ids=list(GOOD))
def test_the_scanner_leaves_other_code_alone(snippet: str) -> None:
    assert pod_deletes(snippet) == []


# --------------------------------------------------------------------------- the tree


def test_no_code_under_compactor_deletes_a_pod() -> None:
    files = sorted(ROOT.rglob("*.py"))
    assert (
        len(files) > 30 and ROOT / "kube" / "cluster_client.py" in files and ROOT / "actions" / "executor.py" in files
    )
    findings = [
        f for path in files for f in pod_deletes(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT.parent)))
    ]
    assert findings == []


def test_the_scan_does_see_the_eviction_call() -> None:
    """The live client's eviction POST and its one DELETE (the state ConfigMap) are where the scanner looks."""
    trees = [ast.parse(path.read_text(encoding="utf-8")) for path in sorted((ROOT / "kube").glob("*.py"))]
    calls = [n for tree in trees for n in ast.walk(tree) if isinstance(n, ast.Call)]
    assert any("POST" in _strings(c) and any(s.endswith("/pods/{name}/eviction") for s in _strings(c)) for c in calls)
    assert any("DELETE" in _strings(c) and any(s.endswith("/configmaps/{name}") for s in _strings(c)) for c in calls)


def test_the_client_interface_has_no_delete() -> None:
    assert [name for name in vars(ClusterClient) if "delete" in name.lower()] == []

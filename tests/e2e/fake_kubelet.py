"""Nodes played by realk8s's ``fake_nodes.py`` (fake kubelets), as a context manager.

``fake_nodes.py`` creates Node objects with the capacity it is given, keeps their Leases
and Ready condition fresh, marks pods bound to them Running/Ready and finishes graceful
deletions. Each process only handles pods bound to its own nodes, so every test can run
its own set. ``fake_nodes(...)`` starts one process for one set, waits until the
scheduler may use every node, and at exit stops exactly that process and deletes
exactly its nodes (and their Leases) by name.

Where the script is: ``$GPU_COMPACTOR_E2E_FAKE_KUBELET``, else ``<repo>/../shared/realk8s/fake_nodes.py``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes.client.exceptions import ApiException

from tests.e2e.helpers import REPO_ROOT, blocking_taints, get_or_none, is_ready_node, name_of, raw, wait_for

FAKE_KUBELET_ENV = "GPU_COMPACTOR_E2E_FAKE_KUBELET"
DEFAULT_FAKE_KUBELET = REPO_ROOT.parent / "shared" / "realk8s" / "fake_nodes.py"
LEASE_NAMESPACE = "kube-node-lease"
STARTUP_TIMEOUT = 90


@dataclass(frozen=True)
class NodeSet:
    """``count`` uniform nodes ``<prefix>0 .. <prefix>N-1``, each with ``gpus`` nvidia.com/gpu (0: none) and ``labels``."""

    prefix: str
    count: int
    gpus: int
    labels: Mapping[str, str] = field(default_factory=dict)
    cpu: str = "64"
    memory: str = "512Gi"

    @property
    def names(self) -> list[str]:
        return [f"{self.prefix}{i}" for i in range(self.count)]

    def arguments(self) -> list[str]:
        args = ["--nodes", str(self.count), "--gpus", str(self.gpus), "--prefix", self.prefix, "--cpu", self.cpu, "--memory", self.memory]
        for key, value in sorted(self.labels.items()):
            args += ["--label", f"{key}={value}"]
        return args


def fake_kubelet_script() -> Path:
    """The path of ``fake_nodes.py``, or an AssertionError saying what to set."""
    configured = os.environ.get(FAKE_KUBELET_ENV, "").strip()
    script = Path(configured) if configured else DEFAULT_FAKE_KUBELET
    if script.is_file():
        return script
    where = f"{FAKE_KUBELET_ENV}={configured} names no file" if configured else f"{FAKE_KUBELET_ENV} is not set and {DEFAULT_FAKE_KUBELET} does not exist"
    raise AssertionError(
        f"these end-to-end tests create their nodes with realk8s's fake kubelets (fake_nodes.py), but {where}. "
        f"Set {FAKE_KUBELET_ENV}=/path/to/realk8s/fake_nodes.py, or unset KUBECONFIG to skip the end-to-end suite.")


@contextmanager
def fake_nodes(kube_core: Any, kube_coordination: Any, nodes: NodeSet, log_file: Path) -> Iterator[list[str]]:
    """Run ``fake_nodes.py`` for ``nodes`` until the block ends; yields the node names once all are Ready and untainted."""
    script = fake_kubelet_script()
    command = [sys.executable, str(script), *nodes.arguments(), "--pidfile", str(log_file.with_suffix(".pid"))]
    with log_file.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=dict(os.environ))
    try:
        wait_for(_all_usable(kube_core, nodes, process, log_file), timeout=STARTUP_TIMEOUT, interval=1,
                 what=f"fake nodes {nodes.prefix}0..{nodes.count - 1} to be Ready and untainted ({' '.join(command)})")
        yield nodes.names
    finally:
        _stop(process)
        _delete_nodes(kube_core, kube_coordination, nodes.names)


def _all_usable(core: Any, nodes: NodeSet, process: subprocess.Popen[bytes], log_file: Path) -> Any:
    """A ``wait_for`` check: every node exists, is Ready, carries no NoSchedule/NoExecute taint (not-ready taints go last)."""

    def check() -> tuple[bool, str]:
        if process.poll() is not None:
            raise AssertionError(f"fake_nodes.py exited with code {process.returncode}:\n{_tail(log_file)}")
        found = {name_of(n): n for n in raw(core.list_node).get("items") or [] if name_of(n) in set(nodes.names)}
        waiting = {name: _why_not_usable(found.get(name)) for name in nodes.names}
        waiting = {name: why for name, why in waiting.items() if why}
        return not waiting, f"not usable yet: {waiting}\n--- fake_nodes.py log ---\n{_tail(log_file)}"

    return check


def _why_not_usable(node: dict[str, Any] | None) -> str:
    if node is None:
        return "missing"
    if not is_ready_node(node):
        return "not Ready"
    return ", ".join(blocking_taints(node))


def _tail(log_file: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log_file.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"(no log: {exc})"


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            warnings.warn(f"fake_nodes.py (pid {process.pid}) ignored SIGTERM for 20 s; killing it", stacklevel=1)
            process.kill()
            process.wait(timeout=10)


def _delete_nodes(core: Any, coordination: Any, names: list[str]) -> None:
    """Delete exactly these nodes and their Leases (404 is fine: never created, or already gone)."""
    problems = []
    for name in names:
        for what, delete, args in (("node", core.delete_node, (name,)), ("lease", coordination.delete_namespaced_lease, (name, LEASE_NAMESPACE))):
            try:
                delete(*args)
            except ApiException as exc:
                if exc.status != 404:
                    problems.append(f"{what} {name}: HTTP {exc.status} {exc.reason}")
    leftover = [n for n in names if not _is_being_deleted(core, n)]
    if problems or leftover:
        raise AssertionError(f"could not delete the fake nodes (kubectl delete node {' '.join(names)}): {problems} {leftover}")


def _is_being_deleted(core: Any, name: str) -> bool:
    node = get_or_none(core.read_node, name)
    return node is None or bool((node.get("metadata") or {}).get("deletionTimestamp"))

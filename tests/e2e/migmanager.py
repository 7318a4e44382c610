"""NVIDIA's mig-manager, played against a real API server for the end-to-end suite.

As realk8s' README describes: watch the test's nodes for a changed ``nvidia.com/mig.config`` label; report
``nvidia.com/mig.config.state=pending`` at once; after ``takes`` seconds write the new layout into the node's
``status.capacity``/``allocatable`` (the nodes/status subresource: the device plugin's part) and report
``success``. Like the real one it evicts nothing: a GPU pod still bound to the node makes the re-cut fail.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from tests.e2e.helpers import Kube, Obj, labels, name_of, raw

CONFIG_LABEL = "nvidia.com/mig.config"
STATE_LABEL = "nvidia.com/mig.config.state"
POLL_SECONDS = 0.5

log = logging.getLogger("tests.e2e.migmanager")


@dataclass
class FakeMigManager:
    kube: Kube
    nodes: list[str]
    layouts: Mapping[str, Mapping[str, int]]  # config name -> the GPU resources a node advertises under it
    takes: float = 3.0
    applied: dict[str, str] = field(default_factory=dict)
    started: dict[str, float] = field(default_factory=dict)
    done: list[tuple[str, str, str]] = field(default_factory=list)  # (node, layout, result)
    noticed: dict[str, float] = field(default_factory=dict)  # node -> when its last change was noticed (monotonic)
    errors: list[str] = field(default_factory=list)

    def step(self) -> None:
        for name in self.nodes:
            node = raw(self.kube.core.read_node, name)
            wanted = labels(node).get(CONFIG_LABEL, "")
            applied = self.applied.setdefault(name, wanted)
            if wanted != applied:
                self._reconfigure(node, wanted)

    def _reconfigure(self, node: Obj, wanted: str) -> None:
        name = name_of(node)
        if name not in self.started:
            self.started[name] = self.noticed[name] = time.monotonic()
            busy = [name_of(p) for p in self._gpu_pods(name)]
            self._state(name, "failed" if busy else "pending")
            if busy:
                self.done.append((name, wanted, f"failed: GPU pods {busy}"))
                self.applied[name] = wanted
            return
        if time.monotonic() - self.started[name] < self.takes:
            return
        old = {r for r in (node.get("status") or {}).get("allocatable") or {} if r.startswith("nvidia.com/")}
        resources = {r: None for r in old} | {r: str(v) for r, v in self.layouts[wanted].items()}
        self.kube.core.patch_node_status(name, {"status": {"capacity": resources, "allocatable": resources}})
        self._state(name, "success")
        self.applied[name] = wanted
        del self.started[name]
        self.done.append((name, wanted, "success"))

    def _state(self, name: str, state: str) -> None:
        self.kube.core.patch_node(name, {"metadata": {"labels": {STATE_LABEL: state}}})

    def _gpu_pods(self, node: str) -> list[Obj]:
        pods = (
            raw(self.kube.core.list_pod_for_all_namespaces, field_selector=f"spec.nodeName={node}").get("items") or []
        )
        return [
            p
            for p in pods
            if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            and any(
                r.startswith("nvidia.com/")
                for c in (p.get("spec") or {}).get("containers") or []
                for r in ((c.get("resources") or {}).get("limits") or {})
            )
        ]


@contextmanager
def running(manager: FakeMigManager) -> Iterator[FakeMigManager]:
    """Run ``manager`` in a thread until the block ends."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            try:
                manager.step()
            except Exception as exc:  # a transient API error: note it and go on, as a controller would
                manager.errors.append(f"{type(exc).__name__}: {exc}")
                log.warning("fake mig-manager step failed: %s", exc)
            stop.wait(POLL_SECONDS)

    thread = threading.Thread(target=loop, name="fake-mig-manager", daemon=True)
    thread.start()
    try:
        yield manager
    finally:
        stop.set()
        thread.join(timeout=30)

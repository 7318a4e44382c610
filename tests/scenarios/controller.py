"""The controller on the fake cluster: build one, read its metrics, talk to its HTTP server, wait for it.

``make_controller(c)`` is a ``Controller`` over the fake cluster ``c`` (snapshots through ``loader(c)``, settings
``SETTINGS_ALL``: the executor scenarios' ``PLANNER`` and ``SETTINGS``, an hour's interval, a free port on
127.0.0.1); ``sample`` reads one metric of an ``Exporter``; ``http_get`` asks its server; ``wait_for`` polls a
predicate (60 s by default).
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from typing import Any

from prometheus_client import CollectorRegistry

from compactor.controller.exporter import Exporter
from compactor.controller.loop import Controller, ControllerOptions
from compactor.kube.lease import LeaderElector
from compactor.model.load import build_snapshot
from compactor.model.types import Snapshot
from compactor.settings.origins import Settings
from tests.fakecluster import FakeCluster
from tests.scenarios.executor import PLANNER, SETTINGS

SETTINGS_ALL = Settings(solver=PLANNER.solver, executor=SETTINGS.executor)


def loader(c: FakeCluster) -> Any:
    def load() -> Snapshot:
        return build_snapshot([*c.list_nodes(), *c.list_pods(), *c.list_pdbs()], source="fakecluster")

    return load


def sample(exporter: Exporter, name: str, **labels: str) -> float | None:
    return exporter.registry.get_sample_value(name, labels)


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def wait_for(predicate: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.05)


def make_controller(c: FakeCluster, *, elector: LeaderElector | None = None, **options: Any) -> Controller:
    """A controller over ``c`` cycling hourly (``options``: more ``ControllerOptions``); ``elector``: leader election."""
    return Controller(
        load_snapshot=loader(c),
        client=c,
        settings=SETTINGS_ALL,
        exporter=Exporter(CollectorRegistry()),
        options=ControllerOptions(interval=3600, listen="127.0.0.1:0", **options),
        elector=elector,
        clock=c.clock,
    )

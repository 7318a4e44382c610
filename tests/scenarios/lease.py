"""The Lease part of an API server on the fake API server, and leader electors that talk to it.

``LeaseStore(fake_api)`` routes create/get/replace of ``coordination.k8s.io/v1`` Leases on a ``FakeApiServer`` (with
resourceVersion conflicts, ``before_put`` to race a write, ``bump`` for someone else's write); ``elector`` builds a
``LeaderElector`` in ``NS`` against it; ``Ticker`` is one process's monotonic clock, moved by hand. ``LEASE_PATH`` is
the compactor's Lease, ``LEASES`` the pattern of the Lease collection, ``T0`` a wall-clock start.
The ``store`` fixture (tests/wire/conftest.py) is a ``LeaseStore`` on the ``fake_api`` fixture.
"""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from compactor.kube.lease import LEASE_NAME, LeaderElector
from tests.fakeapi import FakeApiServer, RecordedRequest, Reply, status_body

NS = "gpu-compactor"
LEASES = r"/apis/coordination\.k8s\.io/v1/namespaces/(?P<ns>[^/]+)/leases"
LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{LEASE_NAME}"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


class LeaseStore:
    """The Lease part of an API server: enough of create/get/replace to test leader election."""

    def __init__(self, api: FakeApiServer) -> None:
        self.leases: dict[tuple[str, str], dict[str, Any]] = {}
        self._rv = itertools.count(100)
        self.before_put: Callable[[], None] | None = None  # runs as a PUT arrives, before it is checked
        api.route("GET", LEASES + r"/(?P<name>[^/]+)", self.get)
        api.route("PUT", LEASES + r"/(?P<name>[^/]+)", self.put)
        api.route("POST", LEASES, self.post)

    def get(self, _api: FakeApiServer, _request: RecordedRequest, match: re.Match[str]) -> Reply:
        lease = self.leases.get((match["ns"], match["name"]))
        if lease is None:
            return Reply(404, status_body(404, f'leases.coordination.k8s.io "{match["name"]}" not found'))
        return Reply(200, copy.deepcopy(lease))

    def post(self, _api: FakeApiServer, request: RecordedRequest, match: re.Match[str]) -> Reply:
        body = request.json()
        key = (match["ns"], body["metadata"]["name"])
        if key in self.leases:
            return Reply(
                409, status_body(409, f'leases.coordination.k8s.io "{key[1]}" already exists', reason="AlreadyExists")
            )
        return self._store(key, body, 201)

    def put(self, _api: FakeApiServer, request: RecordedRequest, match: re.Match[str]) -> Reply:
        body = request.json()
        key = (match["ns"], match["name"])
        if self.before_put is not None:
            self.before_put()
        current = self.leases.get(key)
        if current is None:
            return Reply(404, status_body(404, "not found"))
        if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            return Reply(
                409,
                status_body(
                    409,
                    f'Operation cannot be fulfilled on leases.coordination.k8s.io "{key[1]}": '
                    "the object has been modified; please apply your changes to the latest version and try again",
                ),
            )
        return self._store(key, body, 200)

    def _store(self, key: tuple[str, str], body: dict[str, Any], status: int) -> Reply:
        stored = copy.deepcopy(body)
        stored["metadata"]["namespace"] = key[0]
        stored["metadata"]["resourceVersion"] = str(next(self._rv))
        self.leases[key] = stored
        return Reply(status, copy.deepcopy(stored))

    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.leases[(NS, LEASE_NAME)]["spec"]
        return spec

    def bump(self) -> None:
        """Someone else wrote the Lease (a new resourceVersion) without changing its holder."""
        self.leases[(NS, LEASE_NAME)]["metadata"]["resourceVersion"] = str(next(self._rv))


def elector(fake_api: FakeApiServer, identity: str, **options: Any) -> LeaderElector:
    return LeaderElector(fake_api.api_client(), NS, identity, **options)


class Ticker:
    """One process's monotonic clock, moved by hand; each elector gets its own, so no test shares a clock between them."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t

"""What the wire tests share: a client of the fake API server, and what it was sent (the writes, no pod DELETE)."""

from __future__ import annotations

import re
from typing import Any

from compactor.kube.cluster_client import KubeClusterClient
from tests.fakeapi import FakeApiServer, RecordedRequest

POD_PATH = re.compile(r"/api/v1/namespaces/[^/]+/pods/[^/]+(/.*)?")


def client_of(fake_api: FakeApiServer, **options: Any) -> KubeClusterClient:
    return KubeClusterClient(fake_api.api_client(), **options)


def writes_sent(fake_api: FakeApiServer) -> list[RecordedRequest]:
    return [r for r in fake_api.requests if r.method != "GET"]


def no_pod_deletes(fake_api: FakeApiServer) -> None:
    deletes = [r for r in fake_api.requests if r.method == "DELETE"]
    assert all(not POD_PATH.fullmatch(r.path) for r in deletes), deletes

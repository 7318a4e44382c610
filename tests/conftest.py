"""Shared fixtures. Keep this small: helpers live in tests/builders.py and tests/fakeapi/."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakeapi import FakeApiServer


@pytest.fixture
def fake_api() -> Iterator[FakeApiServer]:
    """A fake Kubernetes API server on 127.0.0.1 (empty store), stopped after the test.

    ``fake_api.add(node(...), pod(...))``, ``fake_api.api_client()``, ``fake_api.requests``,
    ``fake_api.inject(path, status, times=...)``; see tests/fakeapi/server.py.
    """
    with FakeApiServer() as server:
        yield server
        assert not server.errors, f"the fake API server raised: {server.errors!r}"


@pytest.fixture
def fake_api_client(fake_api: FakeApiServer) -> Any:
    """A ``kubernetes.client.ApiClient`` pointing at ``fake_api`` (no auth, no TLS)."""
    return fake_api.api_client()

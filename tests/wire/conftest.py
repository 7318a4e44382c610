"""Fixtures of the wire tier (tests that talk HTTP to ``tests/fakeapi``'s fake API server; see tests/README.md)."""

from __future__ import annotations

import pytest

from tests.fakeapi import FakeApiServer
from tests.scenarios.lease import LeaseStore


@pytest.fixture
def store(fake_api: FakeApiServer) -> LeaseStore:
    """The Lease part of an API server, routed on ``fake_api``: leader election against it works."""
    return LeaseStore(fake_api)

"""Shared fixtures, and the tier markers. Keep this small: helpers live in tests/builders.py, tests/scenarios/, tests/fakeapi/
and the other helper modules tests/README.md lists.

Every test is marked with its tier, the folder it lives in (``unit``, ``property``, ``integration``, ``wire``, ``e2e``;
registered in pyproject.toml), so ``python -m pytest -m "not e2e and not wire"`` is the fast loop and ``-m wire``
runs one tier.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakeapi import FakeApiServer

TIERS = ("unit", "property", "integration", "wire", "e2e")
TESTS = Path(__file__).resolve().parent


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


@pytest.fixture(autouse=True)
def no_cluster_by_default(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside tests/e2e no test reads a real cluster: ``$KUBECONFIG`` (which CI exports for the e2e suite, and which the
    CLI reads as kubectl does when no input is named) is unset; a test that wants it sets it."""
    if request.node.get_closest_marker("e2e") is None:
        monkeypatch.delenv("KUBECONFIG", raising=False)


@pytest.fixture(autouse=True)
def unwrapped_output(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests read what the commands say, not where a terminal would break their lines: text output is fitted to
    ``$COLUMNS`` (then the terminal, then 100), so every test runs with a width no line reaches; a test about wrapping
    sets its own (``COLUMNS``, or ``width=``)."""
    monkeypatch.setenv("COLUMNS", "1000")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with its tier: the first folder under tests/ (tests/e2e modules also mark themselves)."""
    for item in items:
        try:
            folder = item.path.resolve().relative_to(TESTS).parts[0]
        except ValueError:  # a test outside tests/ (none today)
            continue
        if folder in TIERS and item.get_closest_marker(folder) is None:
            item.add_marker(folder)

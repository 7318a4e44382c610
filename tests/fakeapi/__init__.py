"""A fake Kubernetes API server for wire-level tests (see ``server.py``; a module per concern beside it)."""

from tests.fakeapi.disruption import DisruptionController
from tests.fakeapi.messages import ApiError, RecordedRequest, Reply, status_body
from tests.fakeapi.recording import Injection
from tests.fakeapi.resources import RESOURCE_TYPES, ResourceType
from tests.fakeapi.server import FakeApiServer

__all__ = [
    "RESOURCE_TYPES",
    "ApiError",
    "DisruptionController",
    "FakeApiServer",
    "Injection",
    "RecordedRequest",
    "Reply",
    "ResourceType",
    "status_body",
]

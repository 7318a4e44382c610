"""A fake Kubernetes API server for wire-level tests (see ``server.py``)."""

from tests.fakeapi.disruption import DisruptionController
from tests.fakeapi.server import (
    RESOURCE_TYPES,
    ApiError,
    FakeApiServer,
    Injection,
    RecordedRequest,
    Reply,
    ResourceType,
    status_body,
)

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

"""What goes over the wire: the request as recorded, the reply, and errors as the ``metav1.Status`` the API server
writes (``status_body``; ``ApiError`` raised inside handlers)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tests.fakeapi.resources import ResourceType

JSON = dict[str, Any]


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    at: float

    @property
    def content_type(self) -> str:
        return self.header("Content-Type").split(";")[0].strip()

    def header(self, name: str, default: str = "") -> str:
        lowered = name.lower()
        for key, value in self.headers.items():
            if key.lower() == lowered:
                return value
        return default

    def param(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[-1] if values else None

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    def __repr__(self) -> str:
        query = "&".join(f"{k}={v}" for k, vs in self.query.items() for v in vs)
        return f"<{self.method} {self.path}{'?' + query if query else ''}>"


@dataclass
class Reply:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def status_body(
    code: int,
    message: str = "",
    *,
    reason: str | None = None,
    details: JSON | None = None,
    metadata: JSON | None = None,
) -> JSON:
    """A ``metav1.Status`` as the API server writes it."""
    body: JSON = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": metadata or {},
        "status": "Success" if 200 <= code < 300 else "Failure",
    }
    if message:
        body["message"] = message
    if code >= 300:
        body["reason"] = reason or _REASONS.get(code, "Unknown")
    elif reason:
        body["reason"] = reason
    if details:
        body["details"] = details
    body["code"] = code
    return body


class ApiError(Exception):
    """Raised inside handlers; becomes a ``Status`` reply."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        details: JSON | None = None,
        metadata: JSON | None = None,
    ) -> None:
        super().__init__(message)
        self.reply = Reply(code, status_body(code, message, reason=reason, details=details, metadata=metadata))


def object_details(rt: ResourceType, name: str) -> JSON:
    """The ``details`` of a Status about one object."""
    return {"name": name, "kind": rt.plural, **({"group": rt.group} if rt.group else {})}


def not_found(rt: ResourceType, name: str) -> ApiError:
    return ApiError(404, f'{rt.group_resource} "{name}" not found', details=object_details(rt, name))


def conflict(rt: ResourceType, name: str) -> ApiError:
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {rt.group_resource} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
        details=object_details(rt, name),
    )


def json_body(request: RecordedRequest) -> Any:
    """The request's body decoded (None when empty); ApiError 400 when it is not JSON."""
    try:
        return request.json()
    except ValueError as exc:
        raise ApiError(400, f"the request body is not valid JSON: {exc}") from None

"""Request accounting and fault injection: every request received and the reply sent to it, and the ``Injection``s
that make the next matching requests fail (a status, a delay, a dropped connection)."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.fakeapi.messages import RecordedRequest, Reply


@dataclass
class Injection:
    """Answer the next ``times`` matching requests (None = all) with ``status``/``body``, or drop them."""

    path: str | re.Pattern[str]
    status: int = 500
    method: str | None = None
    times: int | None = 1
    query: dict[str, str] | None = None
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before answering (longer than the client's timeout = a timeout)
    drop: bool = False  # close the connection without answering
    passthrough: bool = False  # after the delay, answer normally instead of with ``status``
    when: Callable[[RecordedRequest], bool] | None = None
    hits: list[RecordedRequest] = field(default_factory=list)

    def matches(self, request: RecordedRequest) -> bool:
        if self.times is not None and len(self.hits) >= self.times:
            return False
        if self.method is not None and self.method.upper() != request.method:
            return False
        if isinstance(self.path, re.Pattern):
            if not self.path.fullmatch(request.path):
                return False
        elif self.path != request.path:
            return False
        if self.query and any(request.param(k) != v for k, v in self.query.items()):
            return False
        return self.when is None or self.when(request)

    @property
    def exhausted(self) -> bool:
        return self.times is not None and len(self.hits) >= self.times


class RequestRecording:
    """The requests, the replies and the injections, behind ``lock``. ``FakeApiServer.__init__`` sets every attribute
    declared here."""

    lock: threading.RLock
    _requests: list[RecordedRequest]
    _injections: list[Injection]
    _replies: dict[int, Reply]  # id(request) -> what was answered

    def _record(self, request: RecordedRequest) -> Injection | None:
        """Record a request on arrival; the injection that answers it, if one matches."""
        with self.lock:
            self._requests.append(request)
            for injection in self._injections:
                if injection.matches(request):
                    injection.hits.append(request)
                    return injection
        return None

    @property
    def requests(self) -> list[RecordedRequest]:
        with self.lock:
            return list(self._requests)

    def requests_to(self, path: str | re.Pattern[str], method: str | None = None) -> list[RecordedRequest]:
        def hit(r: RecordedRequest) -> bool:
            ok = bool(path.fullmatch(r.path)) if isinstance(path, re.Pattern) else r.path == path
            return ok and (method is None or r.method == method.upper())

        return [r for r in self.requests if hit(r)]

    def clear_requests(self) -> None:
        with self.lock:
            self._requests.clear()
            self._replies.clear()

    def reply_to(self, request: RecordedRequest) -> Reply | None:
        """What the server answered to a recorded request (None: dropped, or not answered yet)."""
        with self.lock:
            return self._replies.get(id(request))

    def record_reply(self, request: RecordedRequest, reply: Reply) -> None:
        with self.lock:
            self._replies[id(request)] = reply

    def inject(self, path: str | re.Pattern[str], status: int = 500, **options: Any) -> Injection:
        """The next ``times`` (default 1; None = forever) requests to ``path`` get ``status``.

        Options: ``method``, ``query`` (params that must match), ``body`` (default: a Status),
        ``headers`` (e.g. ``{"Retry-After": "1"}``), ``delay`` (seconds), ``drop`` (close without
        answering), ``passthrough`` (answer normally after ``delay``), ``when`` (predicate).
        """
        injection = Injection(path=path, status=status, **options)
        with self.lock:
            self._injections.append(injection)
        return injection

"""The HTTP transport: a stdlib ``ThreadingHTTPServer`` speaking HTTP/1.1 with keep-alive, whose handler turns each
HTTP request into a ``RecordedRequest`` for ``FakeApiServer.handle`` and writes back its reply, or the injection's
(after its delay; nothing when it drops the connection)."""

from __future__ import annotations

import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from tests.fakeapi.messages import RecordedRequest, Reply, status_body
from tests.fakeapi.recording import Injection

if TYPE_CHECKING:
    from tests.fakeapi.server import FakeApiServer


class ApiHttpServer(ThreadingHTTPServer):
    """The listening socket on 127.0.0.1; a thread per connection."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (it timed out before a delayed reply) is expected, not a traceback on stderr."""
        if isinstance(sys.exc_info()[1], BrokenPipeError | ConnectionResetError):
            return
        super().handle_error(request, client_address)


class ApiRequestHandler(BaseHTTPRequestHandler):
    """Serves one connection for ``fake`` (set on a subclass made per server)."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in separate writes; avoid 40 ms delayed-ACK stalls
    fake: FakeApiServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _serve(self) -> None:
        split = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        request = RecordedRequest(
            method=self.command,
            path=split.path,
            query=parse_qs(split.query, keep_blank_values=True),
            headers=dict(self.headers.items()),
            body=body,
            at=time.monotonic(),
        )
        outcome = self.fake.handle(request)
        if isinstance(outcome, Injection):
            if outcome.delay:
                self.fake._stopping.wait(outcome.delay)
            if outcome.drop:
                self.close_connection = True
                return
            if outcome.passthrough:
                reply = self.fake.answer(request)
            else:
                reply = Reply(
                    outcome.status,
                    outcome.body if outcome.body is not None else status_body(outcome.status),
                    dict(outcome.headers),
                )
        else:
            reply = outcome
        self.fake.record_reply(request, reply)
        self._send(reply)

    def _send(self, reply: Reply) -> None:
        payload = b"" if reply.body is None else json.dumps(reply.body).encode()
        self.send_response(reply.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for key, value in reply.headers.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _serve

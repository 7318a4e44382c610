"""The controller's HTTP server: ``/metrics`` (the exporter), ``/healthz`` and ``/readyz`` (the probes), on one port."""

from __future__ import annotations

import io
import logging
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from compactor.controller.exporter import Exporter
from compactor.errors import CompactorError

log = logging.getLogger("compactor.controller")


def parse_listen(text: str) -> tuple[str, int]:
    """``:8080`` (all interfaces), ``127.0.0.1:0``, ``[::1]:8080`` -> (host, port)."""
    host, sep, port = text.rpartition(":")
    if not sep:
        raise CompactorError(f"--listen {text!r}: expected [HOST]:PORT")
    try:
        number = int(port)
    except ValueError:
        raise CompactorError(f"--listen {text!r}: port {port!r} is not a number") from None
    if not 0 <= number <= 65535:
        raise CompactorError(f"--listen {text!r}: port out of range")
    return host.strip("[]"), number


# A scrape or probe sends a few hundred bytes and reads one reply: each connection has a deadline for its
# whole request (a silent or trickling client is dropped, not waited for recv by recv), at most this many
# bytes of request line and headers (nothing reads a body), and at most MAX_CONNECTIONS are served at once.
REQUEST_TIMEOUT_SECONDS = 5.0
MAX_REQUEST_BYTES = 16 * 1024
MAX_CONNECTIONS = 32
CONNECTION_THREAD = "compactor-http-connection"
_BUSY_REPLY = (
    b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 5\r\n"
    b"Connection: close\r\nRetry-After: 1\r\n\r\nbusy\n"
)


class _RequestTooLarge(ConnectionError):
    """The request line and headers went past ``MAX_REQUEST_BYTES``: the connection is dropped."""


class _DeadlineReader(io.RawIOBase):
    """A connection's read side with one deadline for the whole request and a byte budget.

    A socket timeout alone restarts with every byte received, so a client trickling a byte every few
    seconds would hold its thread for ever; here each recv may only wait for what is left of the deadline.
    """

    def __init__(self, connection: socket.socket, deadline: float, budget: int) -> None:
        super().__init__()
        self._connection = connection
        self._deadline = deadline
        self._budget = budget

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("request not received in time")  # BaseHTTPRequestHandler closes the connection on it
        if self._budget <= 0:
            raise _RequestTooLarge(f"request line and headers exceed {MAX_REQUEST_BYTES} bytes")
        self._connection.settimeout(left)
        with memoryview(buffer) as view:
            received = self._connection.recv_into(view[: self._budget])
        self._budget -= received
        return received


class _HttpServer(ThreadingHTTPServer):
    """One thread per connection, at most ``max_connections`` of them: a connection beyond the cap is answered
    503 at once by the accepting thread (without waiting on the client) and closed, so idle clients cannot
    pile up threads; scrapes get through again as soon as the idle ones hit their deadline."""

    daemon_threads = True
    request_queue_size = 64  # a burst of probes and scrapes waits in the backlog instead of retrying its SYN

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], max_connections: int) -> None:
        self._slots = threading.BoundedSemaphore(max_connections)
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self._refuse(request)
            return
        thread = threading.Thread(
            target=self._serve_connection, args=(request, client_address), name=CONNECTION_THREAD, daemon=True
        )
        try:
            thread.start()
        except BaseException:
            self._slots.release()
            self.shutdown_request(request)
            raise

    def _serve_connection(self, request: Any, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)  # handles, then closes the connection
        finally:
            self._slots.release()

    def _refuse(self, request: socket.socket) -> None:
        try:
            request.setblocking(False)  # the accepting thread must never wait on a client
            request.send(_BUSY_REPLY)
        except OSError:
            pass
        self.shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that timed out, reset or sent too much: not worth a traceback on stderr."""
        log.debug("http: connection from %s dropped", client_address, exc_info=True)


class _Http6Server(_HttpServer):
    address_family = socket.AF_INET6


Probe = Callable[[], str | None]  # why the probe fails, None when it passes


class HttpServer:
    """stdlib HTTP server in a thread: ``/metrics`` (the exporter), ``/healthz`` and ``/readyz`` (the probes).

    A failing probe answers 503 with its reason on one line.
    """

    def __init__(
        self,
        host: str,
        port: int,
        exporter: Exporter,
        *,
        health: Probe,
        readiness: Probe,
        timeout: float = REQUEST_TIMEOUT_SECONDS,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        outer = self
        request_timeout = timeout

        class Handler(BaseHTTPRequestHandler):
            # HTTP/1.0 (the default protocol_version): one request per connection, so the deadline is per request.
            timeout = request_timeout  # StreamRequestHandler applies it to the socket: writes are bounded too

            def setup(self) -> None:
                super().setup()
                self.rfile.close()
                self.rfile = io.BufferedReader(
                    _DeadlineReader(self.connection, time.monotonic() + outer.timeout, MAX_REQUEST_BYTES)
                )

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    body, content_type = outer.exporter.render()
                    self._reply(200, body, content_type)
                elif path in ("/healthz", "/readyz"):
                    problem = (outer.health if path == "/healthz" else outer.readiness)()
                    text = "ok" if problem is None else " ".join(problem.split())
                    if (
                        problem is not None and path == "/healthz"
                    ):  # the kubelet's event shows only the status: say why here
                        log.warning("/healthz failing: %s", text)
                    self._reply(200 if problem is None else 503, f"{text}\n".encode(), "text/plain; charset=utf-8")
                else:
                    self._reply(404, b"not found\n", "text/plain; charset=utf-8")

            def _reply(self, status: int, body: bytes, content_type: str) -> None:
                self.connection.settimeout(outer.timeout)  # the reader left what remained of the request's deadline
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("http: " + format, *args)

        self.exporter = exporter
        self.health = health
        self.readiness = readiness
        self.timeout = timeout
        server_class = _Http6Server if ":" in host else _HttpServer
        try:
            self._httpd = server_class((host, port), Handler, max_connections)
        except OSError as exc:
            raise CompactorError(f"cannot listen on {host or '*'}:{port}: {exc.strerror or exc}") from None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.2}, name="compactor-http", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()

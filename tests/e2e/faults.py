"""A TCP proxy in front of kube-apiserver that can refuse connections for a while: an API outage for one client only.

Stopping the real kube-apiserver would take every other test's client down with it; this proxy gives the compactor
under test its own path to the API server (TLS passes through untouched: the serving certificate names 127.0.0.1),
and ``outage(seconds)`` closes every connection it carries and refuses new ones for that long; ``stall()`` keeps every
connection open but forwards nothing until ``resume()``: an API server that accepts and never answers.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

import yaml


class FlakyProxy:
    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._listener = self._listen(0)
        self.port = self._listener.getsockname()[1]
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._flowing = threading.Event()
        self._flowing.set()
        threading.Thread(target=self._accept, daemon=True).start()

    @staticmethod
    def _listen(port: int) -> socket.socket:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(64)
        return listener

    def _accept(self) -> None:
        while not self._stopped.is_set():
            listener = self._listener
            try:
                client, _ = listener.accept()
            except OSError:  # closed for an outage: wait for it to reopen
                time.sleep(0.05)
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open |= {client, server}
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while chunk := source.recv(65536):
                self._flowing.wait()
                sink.sendall(chunk)
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()
            with self._lock:
                self._open.discard(end)

    def outage(self, seconds: float) -> None:
        """Every connection cut, new ones refused (connection refused), for ``seconds``; then served again."""
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() under way: close() alone would not (Linux)
        self._listener.close()
        with self._lock:
            carried, self._open = set(self._open), set()
        for end in carried:
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()
        time.sleep(seconds)
        self._listener = self._listen(self.port)

    def stall(self) -> None:
        """Connections stay open (new ones are accepted) but no byte is forwarded either way until ``resume()``."""
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def close(self) -> None:
        self._stopped.set()
        self._flowing.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()

    def kubeconfig(self, original: Path, into: Path) -> Path:
        """``original`` with its cluster's server pointed at this proxy."""
        config = yaml.safe_load(original.read_text(encoding="utf-8"))
        for cluster in config.get("clusters") or []:
            url = urlparse(cluster["cluster"]["server"])
            cluster["cluster"]["server"] = f"{url.scheme}://127.0.0.1:{self.port}"
        into.write_text(yaml.safe_dump(config), encoding="utf-8")
        return into


def upstream_of(kubeconfig: Path) -> tuple[str, int]:
    config = yaml.safe_load(kubeconfig.read_text(encoding="utf-8"))
    url = urlparse(config["clusters"][0]["cluster"]["server"])
    return url.hostname or "127.0.0.1", url.port or 443

"""Time for the executor, injectable so tests run scenarios in simulated time."""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from types import FrameType
from typing import Protocol

log = logging.getLogger("compactor.clock")


class Clock(Protocol):
    def now(self) -> datetime: ...

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...

    def checkpoint(self) -> None:
        """A safe point that does not wait (before an eviction): raise ``Interrupted`` if the process is stopping."""


class RealClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def checkpoint(self) -> None:
        return None


class SimulatedClock:
    """Time that passes instantly on ``sleep``: dry runs never wait for a world that does not move."""

    def __init__(self, start: datetime | None = None) -> None:
        self._start = start or datetime.now(UTC)
        self._elapsed = 0.0

    def now(self) -> datetime:
        return self._start + timedelta(seconds=self._elapsed)

    def monotonic(self) -> float:
        return self._elapsed

    def sleep(self, seconds: float) -> None:
        self._elapsed += max(0.0, seconds)

    def checkpoint(self) -> None:
        return None


class Interrupted(BaseException):  # a BaseException on purpose: the executor's `except Exception` must not roll back
    """The process is stopping (SIGTERM, or the controller lost leadership): leave the run where it is for recovery."""


class StoppableClock:
    """A ``Clock`` whose waits and checkpoints raise ``Interrupted`` once ``event`` is set: the executor's stop points."""

    def __init__(self, inner: Clock, event: threading.Event) -> None:
        self.inner = inner
        self.event = event

    def now(self) -> datetime:
        return self.inner.now()

    def monotonic(self) -> float:
        return self.inner.monotonic()

    def checkpoint(self) -> None:
        if self.event.is_set():
            raise Interrupted("stopping")

    def sleep(self, seconds: float) -> None:
        self.checkpoint()
        if isinstance(self.inner, RealClock):
            if self.event.wait(max(0.0, seconds)):
                raise Interrupted("stopping")
            return
        self.inner.sleep(seconds)
        if self.event.is_set():
            raise Interrupted("stopping")


@contextmanager
def on_stop_signals(stop: Callable[[], None]) -> Iterator[None]:
    """Call ``stop`` on SIGTERM or SIGINT while inside (main thread only), then put the previous handlers back."""

    def handler(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s: stopping", signal.Signals(signum).name)
        stop()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)

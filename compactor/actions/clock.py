"""Time for the executor, injectable so tests run scenarios in simulated time."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime: ...

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class RealClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class SimulatedClock:
    """Time that passes instantly on ``sleep``: dry runs never wait for a world that does not move."""

    def __init__(self, start: datetime | None = None) -> None:
        self._start = start or datetime.now(UTC)
        self._elapsed = 0.0

    def now(self) -> datetime:
        from datetime import timedelta

        return self._start + timedelta(seconds=self._elapsed)

    def monotonic(self) -> float:
        return self._elapsed

    def sleep(self, seconds: float) -> None:
        self._elapsed += max(0.0, seconds)


class Interrupted(BaseException):  # a BaseException on purpose: the executor's `except Exception` must not roll back
    """The controller is stopping (or lost leadership): leave the run where it is for recovery."""


class StoppableClock:
    """A ``Clock`` whose ``sleep`` raises ``Interrupted`` once ``event`` is set: the executor's waits are its stop points."""

    def __init__(self, inner: Clock, event: threading.Event) -> None:
        self.inner = inner
        self.event = event

    def now(self) -> datetime:
        return self.inner.now()

    def monotonic(self) -> float:
        return self.inner.monotonic()

    def sleep(self, seconds: float) -> None:
        if self.event.is_set():
            raise Interrupted("stopping")
        if isinstance(self.inner, RealClock):
            if self.event.wait(max(0.0, seconds)):
                raise Interrupted("stopping")
            return
        self.inner.sleep(seconds)
        if self.event.is_set():
            raise Interrupted("stopping")

"""One backoff for every retry the executor makes: evictions, reads while waiting, releases.

Exponential from ``backoff_seconds`` to ``backoff_max_seconds``, ``eviction_retry_limit`` retries;
what counts as worth retrying is the caller's (a 429 from a PodDisruptionBudget is, a 403 is not).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from compactor.clock import Clock
from compactor.errors import ClusterError
from compactor.settings.execution import ExecutorSettings

log = logging.getLogger("compactor.retry")
T = TypeVar("T")
TRANSIENT = frozenset({0, 429, 500, 502, 503, 504})  # no reply, throttled, or a server-side hiccup


@dataclass(frozen=True)
class Backoff:
    first: float
    ceiling: float
    retries: int

    @classmethod
    def of(cls, settings: ExecutorSettings) -> Backoff:
        return cls(settings.backoff_seconds, settings.backoff_max_seconds, settings.eviction_retry_limit)

    def delays(self) -> Iterator[float]:
        """The wait before each retry: ``first``, doubling (at least 0.1 s), at most ``ceiling``; ``retries`` of them."""
        delay = self.first
        for _ in range(self.retries):
            yield delay
            delay = min(self.ceiling, max(delay * 2, 0.1))


def retrying(call: Callable[[], T], backoff: Backoff, clock: Clock, *, what: str = "read") -> T:
    """``call()``, retried after a transient failure (no reply, 429, 5xx) with ``backoff``; anything else, or the last
    failure, is raised."""
    for delay in backoff.delays():
        try:
            return call()
        except ClusterError as exc:
            if exc.final or exc.status not in TRANSIENT:
                raise
            log.warning("%s failed; retrying", what, extra={"error": str(exc), "retryIn": delay})
            clock.sleep(delay)
    return call()


def until_deadline(call: Callable[[], T], backoff: Backoff, clock: Clock, *, seconds: float, what: str) -> T:
    """``call()``, retried after each transient failure until ``seconds`` have passed, waiting the backoff's delay or as
    long as the API server asked (``Retry-After``), whichever is longer; the last failure is raised. For releases: a short
    brownout of the API server must not leave a fence behind for a whole cycle."""
    deadline = clock.monotonic() + seconds
    delays = backoff.delays()
    delay = backoff.first
    while True:
        try:
            return call()
        except ClusterError as exc:
            delay = next(delays, delay)
            wait = max(delay, exc.retry_after or 0.0, 0.1)
            if exc.final or exc.status not in TRANSIENT or clock.monotonic() + wait > deadline:
                raise
            log.warning("%s failed; retrying", what, extra={"error": str(exc), "retryIn": wait})
            clock.sleep(wait)

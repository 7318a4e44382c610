"""Fault injection: every ``ClusterClient`` call goes through ``_call``, which records it and fails it as a test asked
(``fail_next``: an HTTP status, an exception or an eviction outcome) or dies before or after it (``crash_after``:
``Crash``, a BaseException as a killed process would be).
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Callable
from typing import Any, Literal

from compactor.actions.port.client import EvictionOutcome, EvictionResult
from compactor.errors import ClusterError
from tests.fakecluster.objects import Call, T
from tests.fakecluster.store import ClusterStore

WRITES = ("patch_node", "evict", "create_event", "write_state", "patch_config_map", "patch_pod", "scale_deployment")
METHODS = (
    "list_nodes",
    "get_node",
    "list_pods",
    "list_pending_pods",
    "get_pod",
    "list_pdbs",
    "list_dra",
    "get_resource_claim",
    "read_state",
    "get_owner",
    "get_admission",
    "get_config_map",
    "list_autoscalers",
    *WRITES,
)
_OUTCOME_STATUS = {
    EvictionOutcome.EVICTED: 201,
    EvictionOutcome.GONE: 404,
    EvictionOutcome.BLOCKED: 429,
    EvictionOutcome.CONFLICT: 409,
    EvictionOutcome.ERROR: 500,
    EvictionOutcome.FORBIDDEN: 403,
}

Failure = EvictionOutcome | EvictionResult | int | BaseException


class Crash(BaseException):
    """The executor process dying mid-write; a BaseException so ``except Exception`` cannot swallow it."""

    def __init__(self, method: str, when: str) -> None:
        super().__init__(f"simulated crash {when} {method}")
        self.method = method
        self.when = when


def _outcome_for(status: int) -> EvictionOutcome:
    by_status = {
        200: EvictionOutcome.EVICTED,
        201: EvictionOutcome.EVICTED,
        404: EvictionOutcome.GONE,
        409: EvictionOutcome.CONFLICT,
        429: EvictionOutcome.BLOCKED,
    }
    return by_status.get(status, EvictionOutcome.ERROR if status >= 500 else EvictionOutcome.FORBIDDEN)


class FaultInjection(ClusterStore):
    """Every interface call recorded (``calls``; the writes in ``history``), and the failures and crashes tests inject
    into them."""

    _failures: dict[str, deque[Failure]]
    _crash: tuple[int, str] | None
    _writes: int

    def fail_next(self, method: str, failure: Failure, times: int = 1) -> None:
        """The next ``times`` calls of ``method`` fail and change nothing.

        ``failure``: an exception to raise; an HTTP status (``evict`` returns the matching outcome,
        other methods raise ``ClusterError(status=...)``); or, for ``evict``, an outcome or result to return.
        """
        if method not in METHODS:
            raise ValueError(f"{method!r} is not a ClusterClient method")
        if method != "evict" and isinstance(failure, EvictionOutcome | EvictionResult):
            raise TypeError(f"{method} cannot return an eviction result; give an HTTP status or an exception")
        self._failures.setdefault(method, deque()).extend([failure] * times)

    def crash_after(self, n_writes: int, *, when: Literal["before", "after"] = "before") -> None:
        """Raise ``Crash`` at the n-th write call from now (1 = the next), before or after it takes effect."""
        if n_writes < 1 or when not in ("before", "after"):
            raise ValueError("crash_after needs n_writes >= 1 and when 'before' or 'after'")
        self._crash = (self._writes + n_writes, when)

    def _call(self, method: str, args: dict[str, Any], action: Callable[[], T]) -> T:
        entry = Call(method, copy.deepcopy(args), self.time)
        self.calls.append(entry)
        crash = ""
        if method in WRITES:
            self.history.append(entry)
            self._writes += 1
            if self._crash is not None and self._crash[0] == self._writes:
                crash, self._crash = self._crash[1], None
                if crash == "before":
                    raise Crash(method, crash)
        queue = self._failures.get(method)
        try:
            return self._injected(method, queue.popleft()) if queue else action()
        finally:
            if crash == "after":
                raise Crash(method, crash)

    @staticmethod
    def _injected(method: str, failure: Failure) -> Any:
        if isinstance(failure, BaseException):
            raise failure
        if isinstance(failure, EvictionResult):
            return failure
        if isinstance(failure, EvictionOutcome):
            return EvictionResult(failure, _OUTCOME_STATUS[failure], "injected")
        if method == "evict":
            return EvictionResult(_outcome_for(failure), failure, "injected")
        raise ClusterError(f"injected failure (HTTP {failure})", status=failure)

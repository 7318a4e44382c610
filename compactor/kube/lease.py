"""Leader election on a ``coordination.k8s.io/v1`` Lease, with client-go's semantics.

One replica of the controller holds the Lease ``gpu-compactor-leader`` and runs the
compaction cycles; the others only export figures. ``try_acquire_or_renew`` is one
round of client-go's ``tryAcquireOrRenew``:

* no Lease yet: create it with us as the holder (a 409 AlreadyExists means another
  replica was faster: we are not the leader);
* held by someone else whose ``renewTime + leaseDurationSeconds`` is still ahead: not ours;
* otherwise (ours, expired, or released) write it back with us as the holder. The PUT
  carries the ``resourceVersion`` we read, so a concurrent writer makes it fail with
  409 Conflict: we lost the race.

Requests go through the ``Transport`` of ``KubeClusterClient`` (``transport.py``): raw JSON, so the
MicroTime fields keep their microseconds; one attempt each, bounded by ``request_timeout``. API failures
raise a one-line ``ClusterError``; the caller decides how long a leader may go without renewing.

**What the Lease guarantees, and what it does not.** ``holds()`` is checked before every write
(``compactor/actions/services/fencing.py``); it is true while our last successful renewal *began* less than
``renew_deadline`` ago, and another replica takes over only after seeing the record unchanged for
``lease_seconds``. Each request gives up after ``write_timeout`` (``leader_election.write_timeout_seconds``,
at most half of ``lease_seconds - renew_deadline``: ``settings.lease_timing_problem``), so the client side
of a write checked at the last moment ends well before a takeover. That narrows the window; it does not
close it. The API server never sees a token: a process paused between the check and the send, or a
request the server applies after the client gave up, can still land after another replica took the
Lease. The guards that hold regardless are on the objects: the state ConfigMap is written with
compare-and-swap on its resourceVersion (and every change is announced there first), node patches carry
the resourceVersion of the read they were built from. See docs/executor.md, "What the Lease does not
guarantee".

**No lock across I/O.** ``_lock`` guards the fields and is never held during a request, so ``holds()``
and ``last_contact()`` (every fenced write, the liveness probe) never wait on the API server. Rounds
and ``release`` run one at a time under ``_round_lock``, which ``holds()`` never takes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes import client as k8s_client

from compactor.errors import ClusterError, CompactorError
from compactor.kube.lease_record import LeaseRecord, format_micro_time, identity, parse_time
from compactor.kube.transport import Transport
from compactor.settings.leader_election import (
    DEFAULT_LEASE_SECONDS,
    DEFAULT_RENEW_DEADLINE_SECONDS,
    DEFAULT_WRITE_TIMEOUT_SECONDS,
    LeaderElectionSettings,
    lease_timing_problem,
)

__all__ = ["LEASE_NAME", "HeldElsewhere", "LeaderElector", "LeaseKeeper", "acquire_once", "identity", "parse_time"]

log = logging.getLogger(__name__)

LEASE_NAME = "gpu-compactor-leader"
_COLLECTION = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
_OBJECT = _COLLECTION + "/{name}"


class LeaderElector:
    """Acquire and renew the Lease ``name`` in ``namespace`` as ``identity``.

    ``is_leader`` is the outcome of the last round; after a failed round (``ClusterError``) a leader
    stays leader until ``renew_deadline`` seconds (default 20 of a 30 s lease) have passed since its
    last successful renewal began, as client-go's ``RenewDeadline``. ``request_timeout`` bounds each
    request (GET, PUT, POST); the three must satisfy ``settings.lease_timing_problem``.

    Expiry is judged as client-go does, never by comparing the holder's ``renewTime`` with the
    local wall clock (clocks differ between machines): a Lease held by someone else counts as
    expired once its record has not changed for ``leaseDurationSeconds`` of *local monotonic*
    time since this elector last saw it change. ``holds()`` is what every write is fenced on;
    it never waits for a round's requests.
    """

    def __init__(
        self,
        api_client: k8s_client.ApiClient,
        namespace: str,
        identity: str,
        lease_seconds: int = DEFAULT_LEASE_SECONDS,
        *,
        name: str = LEASE_NAME,
        request_timeout: float | None = None,
        renew_deadline: float | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if lease_seconds < 1:
            raise ValueError(f"lease_seconds must be >= 1, got {lease_seconds}")
        if not identity:
            raise ValueError("the leader-election identity must not be empty")
        # Unset: the defaults' proportions (20 s and 4 s of a 30 s lease) for any lease duration; they keep the rule.
        if renew_deadline is None:
            renew_deadline = lease_seconds * DEFAULT_RENEW_DEADLINE_SECONDS / DEFAULT_LEASE_SECONDS
        if request_timeout is None:
            request_timeout = lease_seconds * DEFAULT_WRITE_TIMEOUT_SECONDS / DEFAULT_LEASE_SECONDS
        problem = lease_timing_problem(lease_seconds, renew_deadline, request_timeout)
        if problem:
            raise ValueError(problem)
        self.api_client = api_client
        # one attempt per request, GET included, bounded by request_timeout: a round must end within its bound
        self._transport = Transport(
            api_client, read_timeout=request_timeout, write_timeout=request_timeout, reads_once=True
        )
        self.namespace = namespace
        self.identity = identity
        self.lease_seconds = lease_seconds
        self.name = name
        self.request_timeout = request_timeout
        # client-go's RenewDeadline: how long a leader keeps leading while its renewals fail (API unreachable)
        self.renew_deadline = renew_deadline
        self.observed: LeaseRecord | None = None
        self.is_leader = False
        self.monotonic = monotonic
        self.renewed_at: float | None = None  # monotonic time our last successful acquire or renewal round began
        self.observed_at = 0.0  # monotonic time we last saw the record change
        self.changes_seen = 0  # how often we saw it change: more than once means its holder is alive
        self._lock = threading.Lock()  # guards the fields above; never held across a request
        self._round_lock = threading.Lock()  # one round or release at a time; holds() and last_contact() never take it
        self._epoch = 0  # bumped by release(): a round begun before it never makes us leader

    @classmethod
    def configured(
        cls, api_client: k8s_client.ApiClient, namespace: str, identity: str, settings: LeaderElectionSettings
    ) -> LeaderElector:
        """The elector with the timings of ``settings`` (validated there: ``settings.lease_timing_problem``)."""
        return cls(
            api_client,
            namespace,
            identity,
            settings.lease_seconds,
            request_timeout=settings.write_timeout_seconds,
            renew_deadline=settings.renew_deadline_seconds,
        )

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    def try_acquire_or_renew(self, now: datetime) -> bool:
        """One election round at ``now``; True when we hold the Lease afterwards. Raises ``ClusterError`` on API failures.

        The round's requests are made without ``_lock`` (``holds()`` answers meanwhile from the previous
        round); its outcome is applied under it. A renewal counts from the moment its round began: the
        record another replica sees change was written after that, so its takeover comes at least
        ``lease_seconds`` later, whatever the round's requests took."""
        with self._round_lock:
            with self._lock:
                epoch = self._epoch
            began = self.monotonic()
            try:
                held = self._round(now)
            except ClusterError:
                with self._lock:
                    still = self._within_renew_deadline()
                    if self.is_leader and not still:
                        log.warning(
                            "leadership lost: could not renew the lease in time",
                            extra={"lease": self.ref, "identity": self.identity},
                        )
                    self.is_leader = still
                raise
            with self._lock:
                if (
                    epoch != self._epoch
                ):  # release() began meanwhile: it gives the Lease up as soon as this round is done
                    held = False
                if held != self.is_leader:
                    log.info(
                        "leadership %s",
                        "acquired" if held else "lost",
                        extra={
                            "lease": self.ref,
                            "identity": self.identity,
                            "holder": self.observed.holder if self.observed else "",
                        },
                    )
                self.is_leader = held
                if held:
                    self.renewed_at = began
                return held

    def holds(self) -> bool:
        """True while we lead and our last successful renewal began less than ``renew_deadline`` ago: checked
        before every write, so a replica that lost the Lease (or cannot renew it) stops before it fences another
        node or evicts another pod. Never waits for a round's requests. Not a fencing token: see the module docstring."""
        with self._lock:
            return self._within_renew_deadline()

    def last_contact(self) -> float | None:
        """``monotonic()`` time of our last successful renewal or of the last change we saw in the Lease; None before either.

        A leader renews; a follower watching a live leader sees the record change at every renewal. A liveness
        probe asks: ``_lock`` is never held across a request, so this never waits for the API server.
        """
        with self._lock:
            seen = self.observed_at if self.changes_seen else None
            times = [t for t in (self.renewed_at, seen) if t is not None]
        return max(times) if times else None

    def _within_renew_deadline(self) -> bool:
        return (
            self.is_leader and self.renewed_at is not None and self.monotonic() - self.renewed_at < self.renew_deadline
        )

    def release(self, now: datetime) -> bool:
        """Give the Lease up (client-go's ReleaseOnCancel) so a standby takes over at once; True when released.

        Fenced writes stop at once (``holds()`` is false from the first line); the PUT waits for a round in
        flight to end, so it carries the resourceVersion that round wrote, and is made without ``_lock``.
        Given up whenever the record last seen names us, even after the renew deadline passed: a conflict
        (409) means someone else wrote it since, and nothing is released."""
        with self._lock:
            self.is_leader = False
            self._epoch += 1
        with self._round_lock:
            with self._lock:
                observed = self.observed
            if observed is None or observed.holder != self.identity:
                return False
            body = self._body(
                holder="",
                acquire=now,
                renew=now,
                transitions=observed.transitions,
                resource_version=observed.resource_version,
                seconds=1,
            )
            status, reply = self._request("PUT", _OBJECT, body)
            if status == 409:
                return False
            if not 200 <= status <= 299:
                raise self._error("releasing", status, reply)
            with self._lock:
                self.observed = LeaseRecord.from_object(reply, self.lease_seconds) if isinstance(reply, dict) else None
            log.info("leadership released", extra={"lease": self.ref, "identity": self.identity})
            return True

    # ----- one round (requests without _lock; what they read is recorded under it) ---------

    def _round(self, now: datetime) -> bool:
        status, reply = self._request("GET", _OBJECT)
        if status == 404:
            body = self._body(holder=self.identity, acquire=now, renew=now, transitions=0)
            status, reply = self._request("POST", _COLLECTION, body)
            if status == 409:  # AlreadyExists: another replica created it first
                with self._lock:
                    self.observed = None
                return False
            if not 200 <= status <= 299:
                raise self._error("creating", status, reply)
            self._observe(self._record(reply))
            return True
        if not 200 <= status <= 299:
            raise self._error("reading", status, reply)
        current = self._record(reply)
        self._observe(current)
        if current.holder and current.holder != self.identity and not self._expired(current):
            return False
        ours = current.holder == self.identity
        acquire = current.acquire_time if ours and current.acquire_time else now
        transitions = current.transitions if ours else current.transitions + 1
        body = self._body(
            holder=self.identity,
            acquire=acquire,
            renew=now,
            transitions=transitions,
            resource_version=current.resource_version,
        )
        status, reply = self._request("PUT", _OBJECT, body)
        if status == 409:  # the Lease changed since we read it: someone else renewed or took it
            return False
        if not 200 <= status <= 299:
            raise self._error("updating", status, reply)
        self._observe(self._record(reply))
        return True

    def _observe(self, record: LeaseRecord) -> None:
        with self._lock:
            if self.observed is None or record.key != self.observed.key:
                self.observed_at = self.monotonic()
                self.changes_seen += 1
            self.observed = record

    def _expired(self, record: LeaseRecord) -> bool:
        with self._lock:
            return self.monotonic() - self.observed_at >= record.lease_seconds

    def _record(self, reply: Any) -> LeaseRecord:
        if not isinstance(reply, dict):
            raise ClusterError(f"lease {self.ref}: the API replied with something other than a Lease object")
        return LeaseRecord.from_object(reply, self.lease_seconds)

    def _body(
        self,
        *,
        holder: str,
        acquire: datetime,
        renew: datetime,
        transitions: int,
        resource_version: str = "",
        seconds: int | None = None,
    ) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if resource_version:
            metadata["resourceVersion"] = resource_version
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": {
                "holderIdentity": holder,
                "leaseDurationSeconds": seconds or self.lease_seconds,
                "acquireTime": format_micro_time(acquire),
                "renewTime": format_micro_time(renew),
                "leaseTransitions": transitions,
            },
        }

    # ----- plumbing ----------------------------------------------------------------------

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        """(HTTP status, decoded JSON body or None); ClusterError only when no reply came."""
        params = {"namespace": self.namespace, "name": self.name}
        reply = self._transport.send(method, path, params, f"lease {self.ref}", body=body)
        return reply.status, reply.body

    def _error(self, verb: str, status: int, reply: Any) -> ClusterError:
        message = reply.get("message") if isinstance(reply, dict) else None
        detail = " ".join(str(message).split()) if message else f"HTTP {status}"
        return ClusterError(f"{verb} lease {self.ref}: HTTP {status}: {detail}", status=status)


class HeldElsewhere(CompactorError):
    """A one-shot command found the Lease held by a live gpu-compactor."""


def acquire_once(elector: LeaderElector, *, sleep: Callable[[float], None] = time.sleep, poll: float = 1.0) -> None:
    """Take the Lease for a one-shot command (``apply``, ``run --once``), or raise ``HeldElsewhere``.

    Free, released or ours: taken at once. Held by someone else: refused at once when its own
    ``renewTime`` says it is fresh (refusing needs no trust in clocks: it changes nothing), or
    when its record changes while we watch (its holder is alive); never queued behind. Taken
    over only once the record stayed unchanged for a whole lease duration of local monotonic
    time (its holder is gone), the same test the controller's replicas use.
    """
    while True:
        now = datetime.now(UTC)
        if elector.try_acquire_or_renew(now):
            return
        seen = elector.observed
        if seen is not None and seen.holder:
            fresh = seen.renew_time is not None and now < seen.renew_time + timedelta(seconds=seen.lease_seconds)
            if fresh or elector.changes_seen > 1:
                renewed = f", renewed at {format_micro_time(seen.renew_time)}" if seen.renew_time else ""
                raise HeldElsewhere(
                    f"another gpu-compactor is acting: Lease {elector.ref} is held by {seen.holder}{renewed}; "
                    "nothing was changed (run again once it is done, or after its lease expires)"
                )
        sleep(poll)


class LeaseKeeper:
    """Renews the Lease in the background every third of its duration while a one-shot command acts."""

    def __init__(self, elector: LeaderElector) -> None:
        self.elector = elector
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="lease-keeper", daemon=True)

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2 * self.elector.request_timeout + 1)  # a round in flight: GET and PUT
        try:
            self.elector.release(datetime.now(UTC))
        except ClusterError as exc:  # it expires by itself; the next actor waits one lease duration at most
            log.warning("could not release the lease", extra={"lease": self.elector.ref, "error": str(exc)})

    def _loop(self) -> None:
        while not self._stop.wait(self.elector.lease_seconds / 3):
            try:
                self.elector.try_acquire_or_renew(datetime.now(UTC))
            except ClusterError as exc:
                log.warning("lease renewal failed", extra={"lease": self.elector.ref, "error": str(exc)})

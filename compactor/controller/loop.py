"""The controller's loop: a compaction cycle every ``interval`` seconds (``compactor.app.tick.run_cycle``, over ``compactor.app.cycle.cycle``) on the replica
that holds the Lease, figures on every replica, and a cycle at once when a GPU pod has waited ``pending_after`` seconds for a
node its scheduler did not find (``compactor.app.pending``); the probes /healthz and /readyz answer from its bookkeeping."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from apscheduler.schedulers.background import BackgroundScheduler

from compactor.app.pending import Blocked, PendingTrigger, blocked_gpu_pods, largest_gpu_offers
from compactor.app.policy import plans
from compactor.app.tick import CycleReport, run_cycle
from compactor.clock import Clock, Interrupted, RealClock, StoppableClock, on_stop_signals
from compactor.controller.exporter import Exporter
from compactor.controller.http import HttpServer, parse_listen
from compactor.errors import EXIT_OK, CompactorError
from compactor.model.types import Snapshot
from compactor.settings.duration import worst_case_run_seconds
from compactor.settings.origins import Settings

if TYPE_CHECKING:  # names only: the loop is given these, the application layer builds them (app.wiring)
    from compactor.actions.executor import Progress
    from compactor.actions.port.client import ClusterClient
    from compactor.kube.lease import LeaderElector

log = logging.getLogger("compactor.controller")

DEFAULT_INTERVAL = 600.0
DEFAULT_LISTEN = ":8080"
DEFAULT_PENDING_AFTER = 60.0  # a GPU pod blocked this long starts a cycle (0: never)
DEFAULT_PENDING_GAP = 300.0  # ... at least this long after the last cycle ended
MIN_PENDING_AFTER = 5.0  # floors: the trigger lists the pending pods every min(15 s, pending_after) seconds
MIN_PENDING_GAP = 10.0
PENDING_CHECK_SECONDS = 15.0  # how often the leader lists the pods waiting for a node


# How long a replica may go without renewing the Lease or seeing it change before /readyz fails: a follower
# watching a holder that died sees no change for a whole lease duration before it takes over, then needs one
# more round (a third of it) and the round's own requests; twice the duration covers that.
LEASE_STALE_FACTOR = 2


@dataclass(frozen=True)
class ControllerOptions:
    interval: float = DEFAULT_INTERVAL
    listen: str = DEFAULT_LISTEN
    dry_run: bool = False
    report_only: bool = False
    clean_up: bool = True  # clear a dead run's leftovers as leader in every mode (false: an operator's --dry-run)
    # /healthz fails after this long without a cycle starting or ending (None: see stale_after_default)
    stale_after: float | None = None
    cycle_limit: float | None = None  # /healthz fails when one cycle runs longer (None: see cycle_limit_default)
    pending_after: float = DEFAULT_PENDING_AFTER  # 0: no pending trigger
    pending_gap: float = DEFAULT_PENDING_GAP


def stale_after_default(interval: float, settings: Settings) -> float:
    """Three missed cycles, plus one plan's time limit: the scheduler starts a cycle at most ``interval`` after the last ended."""
    return 3 * interval + settings.solver.time_limit_seconds


def cycle_limit_default(settings: Settings) -> float:
    """The longest a cycle can legitimately take: recovery may resume a whole interrupted run before the cycle's own run."""
    return 2 * worst_case_run_seconds(settings)


class Controller:
    """The scheduler (cycle job, lease job) and the HTTP server; ``elector=None`` = always leader (--no-leader-election)."""

    def __init__(
        self,
        *,
        load_snapshot: Callable[[], Snapshot],
        client: ClusterClient,
        settings: Settings,
        exporter: Exporter,
        options: ControllerOptions,
        elector: LeaderElector | None = None,
        clock: Clock | None = None,
    ) -> None:
        if options.interval <= 0:
            raise CompactorError(f"--interval must be > 0, got {options.interval:g}")
        self.stale_after = (
            options.stale_after if options.stale_after is not None else stale_after_default(options.interval, settings)
        )
        if self.stale_after <= options.interval:
            raise CompactorError(
                f"--stale-after must be longer than --interval ({options.interval:g} s), got {self.stale_after:g}"
            )
        self.cycle_limit = options.cycle_limit if options.cycle_limit is not None else cycle_limit_default(settings)
        if self.cycle_limit <= 0:
            raise CompactorError(f"the cycle limit must be > 0, got {self.cycle_limit:g}")
        self.load_snapshot = load_snapshot
        self.client = client
        self.settings = settings
        self.exporter = exporter
        self.options = options
        self.elector = elector
        self.clock: Clock = clock or RealClock()
        self._stopping = threading.Event()
        self._interrupt = threading.Event()  # set on stop or lost leadership: the running cycle stops at its next wait
        self._cycle_running = threading.Event()
        self._scheduler: Any = None
        # Liveness bookkeeping, read by the HTTP thread: plain float assignments, atomic under the GIL.
        self._progress_at: float | None = None  # clock.monotonic() when a cycle last started or ended (or start() ran)
        self._cycle_since: float | None = None  # clock.monotonic() when the running cycle started; None between cycles
        self._lease_grace_from: float | None = None  # elector.monotonic() at start(): the first round has until + limit
        self._cycle_as_leader = False  # the cycle running (if any) began as leader: the only one a lost Lease stops
        host, port = parse_listen(options.listen)
        self.server = HttpServer(host, port, exporter, health=self.health_problem, readiness=self.readiness_problem)
        self.cycles = 0  # completed cycles (for tests and logs)
        self._cycle_ended: float | None = None  # clock.monotonic() when the last cycle ended (the pending gap's start)
        self._largest: dict[str, int] = {}  # GPU resource -> the most any node offers, as the last cycle read them
        # the breaker's pause as the last cycle read it: no pending pod starts a cycle before it ends (held, it changes nothing)
        self._paused_until: datetime | None = None
        self.pending = (
            PendingTrigger(options.pending_after, options.pending_gap)
            if options.pending_after > 0 and not options.report_only and plans(settings.mode)
            else None
        )
        exporter.set_leader(elector is None)

    # ----- probes

    def health_problem(self) -> str | None:
        """Why /healthz (liveness) fails, or None: the process's own health only: the scheduler runs, cycles start and end
        in time. Not the API server's: a brownout that keeps every replica from renewing or reading the Lease would
        then restart them all at once, when a restart cures nothing (that is readiness: ``readiness_problem``)."""
        if self._stopping.is_set():
            return "stopping"
        if self._scheduler is None or not self._scheduler.running:
            return "scheduler not running"
        return self._cycle_problem()

    def readiness_problem(self) -> str | None:
        """Why /readyz fails, or None: healthy, the Lease renewed or seen to change within two lease durations, and the
        first cycle has exported the figures."""
        return (
            self.health_problem()
            or self._lease_problem()
            or (
                None
                if self.exporter.has_figures
                else "no figures yet: the first cycle has not finished reading the cluster"
            )
        )

    def healthy(self) -> bool:
        return self.health_problem() is None

    def ready(self) -> bool:
        return self.readiness_problem() is None

    def _cycle_problem(self) -> str | None:
        now = self.clock.monotonic()
        since, progress = self._cycle_since, self._progress_at
        if since is not None:
            if now - since > self.cycle_limit:
                return f"stuck: a cycle has been running for {now - since:.0f} s, longer than the worst case ({self.cycle_limit:.0f} s)"
            return None
        if progress is not None and now - progress > self.stale_after:
            return f"no cycle started or ended for {now - progress:.0f} s (limit {self.stale_after:.0f} s)"
        return None

    def _lease_problem(self) -> str | None:
        if self.elector is None:
            return None
        times = [t for t in (self.elector.last_contact(), self._lease_grace_from) if t is not None]
        if not times:
            return None
        age = self.elector.monotonic() - max(times)
        limit = LEASE_STALE_FACTOR * self.elector.lease_seconds
        if age > limit:
            return f"leader election: Lease {self.elector.ref} neither renewed nor seen to change for {age:.0f} s (limit {limit:.0f} s)"
        return None

    # ----- jobs

    def _lead(self) -> bool:
        """One election round (lease job and every cycle); errors keep leadership until the renew deadline."""
        if self.elector is None:
            return True
        try:
            held = self.elector.try_acquire_or_renew(datetime.now(UTC))
        except CompactorError as exc:
            log.warning("leader election: %s", exc)
            held = self.elector.is_leader
        self.exporter.set_leader(held)
        if not held and self._cycle_running.is_set() and self._cycle_as_leader:
            # only a cycle begun as leader acts; a standby's cycle measures, and losing what it never held is no news
            log.warning("lost leadership during a cycle: stopping it at its next wait")
            self._interrupt.set()
        return held

    def tick(self) -> CycleReport | None:
        """One scheduled cycle: figures always, recovery/plan/execute only as leader (and not --report-only)."""
        if self._stopping.is_set():
            return None
        leader = self._lead()
        self._cycle_as_leader = leader
        # the cycle's gate (app.policy.admit) holds it outside every disruption window or under the circuit breaker
        execute = leader and not self.options.report_only
        self._interrupt.clear()
        if self._stopping.is_set():
            self._interrupt.set()
        self._cycle_running.set()
        self._cycle_since = self._progress_at = self.clock.monotonic()
        try:
            report = run_cycle(
                self.load_snapshot,
                self.client,
                self.settings,
                StoppableClock(self.clock, self._interrupt),
                self.exporter,
                execute=execute,
                dry_run=self.options.dry_run,
                clean=leader and self.options.clean_up,
                progress=_log_progress,
            )
        except Interrupted:
            log.warning(
                "cycle interrupted; the executor's recovery resumes or rolls back the run on the next cycle or start"
            )
            return None
        except CompactorError as exc:
            self.exporter.record_cycle_error()
            log.error("cycle failed: %s", exc)
            return None
        except Exception:  # a bug: keep the loop alive, the next cycle recovers
            self.exporter.record_cycle_error()
            log.exception("cycle failed unexpectedly")
            return None
        finally:
            self._cycle_running.clear()
            self._progress_at, self._cycle_since = self.clock.monotonic(), None
            self._cycle_ended = self._progress_at
        self.cycles += 1
        self._paused_until = report.paused_until
        if report.figures is not None:
            self._largest = largest_gpu_offers(report.figures)
        log.info("cycle done", extra={"leader": leader, "executed": report.run is not None, **report.summary()})
        return report

    def check_pending(self) -> list[Blocked]:
        """The pending trigger's round, on the leader between cycles: the blocked GPU pods that start a cycle now."""
        if self.pending is None or self._stopping.is_set() or self._cycle_running.is_set():
            return []
        if self.elector is not None and not self.elector.is_leader:
            return []
        if self._paused_until is not None and self.clock.now() < self._paused_until:
            return []  # the breaker holds every cycle until then: a cycle per blocked pod would change nothing
        try:
            waiting = self.client.list_pending_pods()
        except CompactorError as exc:
            log.warning("pending trigger: %s", exc)
            return []
        self._see_bound(waiting)
        since = None if self._cycle_ended is None else self.clock.monotonic() - self._cycle_ended
        blocked = blocked_gpu_pods(
            waiting,
            self.clock.now(),
            self.settings.movable.scheduler_names,
            scope=self.settings.for_planner,
            largest=self._largest or None,  # None: not read yet (no cycle has ended)
        )
        due = self.pending.due(blocked, since, now=self.clock.now())
        if due:
            first = due[0]
            log.info(
                f"pending trigger: {first.key} has waited {first.waited_seconds:.0f} s for a node"
                f"{f' (and {len(due) - 1} more GPU pod(s))' if len(due) > 1 else ''}: a cycle now",
                extra={"pods": [b.key for b in due]},
            )
            self.exporter.record_pending_trigger()
            if self._scheduler is not None:
                self._scheduler.modify_job("cycle", next_run_time=datetime.now(UTC))
        return due

    def _see_bound(self, waiting: list[Any]) -> None:
        """The pods that started a cycle and were bound since: the time from their trigger to their binding, logged and
        observed (``gpu_compactor_pending_trigger_to_bound_seconds``)."""
        assert self.pending is not None
        try:
            bound = self.pending.bound(waiting, self.client.get_pod, self.clock.now())
        except CompactorError as exc:
            log.warning("pending trigger: %s", exc)
            return
        for pod in bound:
            self.exporter.record_pending_bound(pod.seconds)
            log.info(
                f"pending pod {pod.key} bound to {pod.node} {pod.seconds:.0f} s after it started a cycle",
                extra={"pod": pod.key, "node": pod.node, "secondsFromTrigger": round(pod.seconds, 1)},
            )

    # ----- lifecycle

    def start(self) -> None:
        scheduler = BackgroundScheduler(timezone=UTC)
        now = datetime.now(UTC)
        scheduler.add_job(
            self.tick,
            "interval",
            seconds=self.options.interval,
            id="cycle",
            name="compaction cycle",
            max_instances=1,
            coalesce=True,
            next_run_time=now,
            misfire_grace_time=None,
        )
        if self.elector is not None:
            every = max(1.0, self.elector.lease_seconds / 3)
            scheduler.add_job(
                self._lead,
                "interval",
                seconds=every,
                id="lease",
                name="leader lease",
                max_instances=1,
                coalesce=True,
                next_run_time=now,
            )
        if self.pending is not None:
            scheduler.add_job(
                self.check_pending,
                "interval",
                seconds=min(PENDING_CHECK_SECONDS, self.options.pending_after),
                id="pending",
                name="pending trigger",
                max_instances=1,
                coalesce=True,
            )
        self._progress_at = self.clock.monotonic()
        if self.elector is not None:
            self._lease_grace_from = self.elector.monotonic()
        self.server.start()
        scheduler.start()
        self._scheduler = scheduler
        log.info(
            "controller started",
            extra={
                "listen": f"{self.options.listen} (port {self.server.port})",
                "interval": self.options.interval,
                "pendingAfter": self.options.pending_after if self.pending is not None else None,
                "mode": self.settings.mode,
                "dryRun": self.options.dry_run,
                "reportOnly": self.options.report_only,
                "identity": self.elector.identity if self.elector else "(no leader election)",
            },
        )

    def request_stop(self) -> None:
        """Ask the loop to stop (signal-handler safe: only sets events)."""
        self._stopping.set()
        self._interrupt.set()

    def stop(self) -> None:
        """Stop taking cycles, let a running one reach its stop point, release the Lease, close the server."""
        self.request_stop()
        if self._scheduler is not None and self._scheduler.running:
            self._scheduler.shutdown(wait=True)
        if self.elector is not None:
            try:
                self.elector.release(datetime.now(UTC))
            except CompactorError as exc:
                log.warning("could not release the lease: %s", exc)
        self.exporter.set_leader(False)
        self.server.stop()
        log.info("controller stopped")

    def run_forever(self) -> int:
        """Run until SIGTERM/SIGINT (main thread only)."""
        with on_stop_signals(self.request_stop):
            try:
                self.start()
                while not self._stopping.wait(1.0):
                    pass
            finally:
                self.stop()
        return EXIT_OK


def _log_progress(progress: Progress) -> None:
    log.debug(
        "executor: [%d/%d] %s%s",
        progress.done,
        progress.total,
        progress.current,
        f" (waiting: {progress.waiting})" if progress.waiting else "",
    )

"""``compactor controller``: compaction cycles on a schedule, /metrics and /healthz on one HTTP port.

Every replica computes the fragmentation figures each cycle and exports them; only
the holder of the Lease ``gpu-compactor-leader`` (``compactor.kube.lease``) also
recovers, plans and executes. One cycle (``run_cycle``) is the same sequence as
``compactor run --once``: recover -> snapshot -> figures -> plan -> execute.

Shutdown (SIGTERM/SIGINT): the scheduler stops taking new cycles; a cycle in progress
finishes the API call it is making and stops at its next wait (``Interrupted``), leaving
the executor's state ConfigMap in place, so recovery resumes or rolls the run back on the
next start (or on the next leader). The Lease is released so a standby takes over at once.
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from compactor.actions import annotations as ann
from compactor.actions.client import ClusterClient
from compactor.actions.clock import Clock, Interrupted, RealClock, StoppableClock, on_stop_signals
from compactor.errors import CompactorError
from compactor.metrics.exporter import Exporter
from compactor.model.types import Snapshot
from compactor.settings import Settings, worst_case_run_seconds

if TYPE_CHECKING:
    from compactor.actions.executor import Progress, RunReport
    from compactor.actions.recovery import RecoveryReport
    from compactor.kube.lease import LeaderElector
    from compactor.metrics.fragmentation import Figures

log = logging.getLogger("compactor.controller")

DEFAULT_INTERVAL = 600.0
DEFAULT_LISTEN = ":8080"


# --------------------------------------------------------------------------- one cycle


@dataclass
class CycleReport:
    started: datetime
    figures: Figures | None = None
    cordoned_nodes: int = 0
    recovery: RecoveryReport | None = None
    plan_id: str = ""
    planned_moves: int = 0
    planned_freed: list[str] = field(default_factory=list)
    run: RunReport | None = None

    def summary(self) -> dict[str, Any]:
        cluster = self.figures.cluster if self.figures else None
        return {
            "fragmentationRate": None if cluster is None or cluster.fragmentation_rate is None else round(cluster.fragmentation_rate, 4),
            "freeGpuEquivalents": None if cluster is None else round(cluster.free_gpus, 2),
            "plan": self.plan_id, "plannedMoves": self.planned_moves,
            "status": self.run.status if self.run else "", "freedNodes": ",".join(self.run.freed_nodes) if self.run else "",
        }


def _cordoned(snapshot: Snapshot) -> int:
    return sum(1 for node in snapshot.nodes if ann.CORDONED_BY in node.annotations)


def _gained(report: RunReport) -> tuple[int, int] | None:
    """(measured, planned) whole-free GPUs of a real run; dry runs measure a world that only pretends to change."""
    if report.dry_run or report.outcome is None:
        return None
    return report.outcome.freed_gpus, report.outcome.planned_freed_gpus


def _evictions(report: RunReport) -> int:
    return 0 if report.dry_run else max(0, report.moves_done - len(report.skipped_moves))


def _figures(snapshot: Snapshot, settings: Settings) -> Figures:
    from compactor.metrics.fragmentation import compute_figures, reference_shapes

    shapes = reference_shapes(snapshot, configured=settings.metrics.shapes() or None,
                              coverage=settings.metrics.shape_coverage, max_shapes=settings.metrics.max_shapes)
    return compute_figures(snapshot, shapes)


def run_cycle(
    load_snapshot: Callable[[], Snapshot],
    client: ClusterClient,
    settings: Settings,
    clock: Clock,
    exporter: Exporter,
    *,
    execute: bool,
    dry_run: bool = False,
    progress: Callable[[Progress], None] | None = None,
) -> CycleReport:
    """One cycle; the exporter sees the figures and the run's outcome. Raises ``CompactorError`` when the cluster cannot be read.

    ``execute=False``: figures only (report-only mode, or a replica that is not the leader).
    ``execute=True``: recover an interrupted run, plan, and carry the plan out through ``client``.
    ``dry_run``: no recovery; the plan runs against a ``RecordingClient`` over what ``client``
    reads, so nothing is changed (it counts in ``runs_total{status="dry-run"}``, never as succeeded nor in evictions).
    """
    from compactor.actions.executor import Executor
    from compactor.actions.memory import remember_run, restraints_now, reversals
    from compactor.actions.recovery import recover
    from compactor.actions.steering.detect import choose, planning_fence
    from compactor.planner.compose import build_plan
    from compactor.planner.recut import mig_parted_for

    report = CycleReport(started=clock.now())
    if execute and not dry_run:
        report.recovery = recover(client, settings.executor, clock, rules=settings.planner)
        if report.recovery.resumed is not None:
            resumed = report.recovery.resumed
            exporter.record_run(resumed.status, evictions=_evictions(resumed), gained=_gained(resumed), steering=resumed.steering)
    snapshot = load_snapshot()
    figures = _figures(snapshot, settings)
    exporter.set_figures(figures, cordoned_nodes=_cordoned(snapshot))
    report.figures, report.cordoned_nodes = figures, _cordoned(snapshot)
    restraints = restraints_now(client, settings, clock.now()) if execute else None
    if restraints is not None:
        exporter.set_pause(restraints.paused_until.timestamp() if restraints.paused_until else 0.0)
    if restraints is not None and restraints.paused and not dry_run:
        log.warning("%s: this cycle measures only", restraints.paused)
        execute = False
    if execute:
        steering = choose(client, settings.executor)  # the plan leaves in place what this steering cannot place
        plan = build_plan(snapshot, settings.planner, source=snapshot.source, now=clock.now(), shapes=figures.shapes,
                          mig_parted=mig_parted_for(snapshot, settings), fence=planning_fence(steering.mechanism, settings.executor.identity),
                          restraints=restraints, budgets=settings.disruption)
        report.plan_id, report.planned_moves, report.planned_freed = plan.metadata.id, len(plan.moves), list(plan.freed_nodes)
        exporter.record_plan(seconds=plan.solver.plan_seconds, gap=plan.solver.gap, moves=len(plan.moves))
        if dry_run:
            from compactor.actions.clock import SimulatedClock
            from compactor.actions.dryrun import RecordingClient

            objects = [*client.list_nodes(), *client.list_pods(), *client.list_pdbs()]
            recording = RecordingClient(objects, plan, namespace=settings.executor.state_namespace, probe=client)
            run = Executor(recording, settings.executor, SimulatedClock(clock.now()), dry_run=True, progress=progress,
                           rules=settings.planner, steering=steering).execute(plan)
        elif undone := reversals(plan, restraints):
            raise CompactorError(f"plan {plan.metadata.id} would undo recent moves ({', '.join(undone[:3])}): refused, to keep "
                                 "workloads from going back and forth (disruption.oscillation_hours)")
        else:
            run = Executor(client, settings.executor, clock, progress=progress, rules=settings.planner, steering=steering).execute(plan)
            remember_run(client, settings, plan, run, clock.now())
        report.run = run
        exporter.record_run(run.shown_status, evictions=_evictions(run), gained=_gained(run), recuts=tuple(run.recuts.values()),
                            steering=run.steering)
        if not dry_run and (run.status != "nothing-to-do" or (report.recovery and report.recovery.changed)):
            snapshot = load_snapshot()  # the figures after the run, not the ones it started from
            report.figures, report.cordoned_nodes = _figures(snapshot, settings), _cordoned(snapshot)
            exporter.set_figures(report.figures, cordoned_nodes=report.cordoned_nodes)
    exporter.record_cycle(clock.now().timestamp())
    return report


# --------------------------------------------------------------------------- HTTP: /metrics, /healthz, /readyz


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
_BUSY_REPLY = (b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 5\r\n"
               b"Connection: close\r\nRetry-After: 1\r\n\r\nbusy\n")


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
        thread = threading.Thread(target=self._serve_connection, args=(request, client_address), name=CONNECTION_THREAD, daemon=True)
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

    def __init__(self, host: str, port: int, exporter: Exporter, *, health: Probe, readiness: Probe,
                 timeout: float = REQUEST_TIMEOUT_SECONDS, max_connections: int = MAX_CONNECTIONS) -> None:
        outer = self
        request_timeout = timeout

        class Handler(BaseHTTPRequestHandler):
            # HTTP/1.0 (the default protocol_version): one request per connection, so the deadline is per request.
            timeout = request_timeout  # StreamRequestHandler applies it to the socket: writes are bounded too

            def setup(self) -> None:
                super().setup()
                self.rfile.close()
                self.rfile = io.BufferedReader(_DeadlineReader(self.connection, time.monotonic() + outer.timeout, MAX_REQUEST_BYTES))

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    body, content_type = outer.exporter.render()
                    self._reply(200, body, content_type)
                elif path in ("/healthz", "/readyz"):
                    problem = (outer.health if path == "/healthz" else outer.readiness)()
                    text = "ok" if problem is None else " ".join(problem.split())
                    if problem is not None and path == "/healthz":  # the kubelet's event shows only the status: say why here
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
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.2}, name="compactor-http", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()


# --------------------------------------------------------------------------- the loop


# How long a replica may go without renewing the Lease or seeing it change before /healthz fails: a follower
# watching a holder that died sees no change for a whole lease duration before it takes over, then needs one
# more round (a third of it) and the round's own requests; twice the duration covers that.
LEASE_STALE_FACTOR = 2


@dataclass(frozen=True)
class ControllerOptions:
    interval: float = DEFAULT_INTERVAL
    listen: str = DEFAULT_LISTEN
    dry_run: bool = False
    report_only: bool = False
    stale_after: float | None = None  # /healthz fails after this long without a cycle starting or ending (None: see stale_after_default)
    cycle_limit: float | None = None  # /healthz fails when one cycle runs longer (None: see cycle_limit_default)


def stale_after_default(interval: float, settings: Settings) -> float:
    """Three missed cycles, plus one plan's time limit: the scheduler starts a cycle at most ``interval`` after the last ended."""
    return 3 * interval + settings.planner.time_limit_seconds


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
        self.stale_after = options.stale_after if options.stale_after is not None else stale_after_default(options.interval, settings)
        if self.stale_after <= options.interval:
            raise CompactorError(f"--stale-after must be longer than --interval ({options.interval:g} s), got {self.stale_after:g}")
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
        self._lease_grace_from: float | None = None  # elector.monotonic() at start(): the first round has until then + limit
        host, port = parse_listen(options.listen)
        self.server = HttpServer(host, port, exporter, health=self.health_problem, readiness=self.readiness_problem)
        self.cycles = 0  # completed cycles (for tests and logs)
        exporter.set_leader(elector is None)

    # ----- probes

    def health_problem(self) -> str | None:
        """Why /healthz fails, or None: the scheduler runs, cycles start and end in time, and the Lease is renewed or seen."""
        if self._stopping.is_set():
            return "stopping"
        if self._scheduler is None or not self._scheduler.running:
            return "scheduler not running"
        return self._cycle_problem() or self._lease_problem()

    def readiness_problem(self) -> str | None:
        """Why /readyz fails, or None: healthy, and the first cycle has exported the figures."""
        return self.health_problem() or (None if self.exporter.has_figures else "no figures yet: the first cycle has not finished reading the cluster")

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

    def _inside_window(self) -> bool:
        """Cycles outside every disruption window measure and export, and act on nothing (dry runs change nothing)."""
        from compactor.windows import window_state

        if self.options.dry_run:
            return True
        state = window_state(self.settings.disruption.windows, self.clock.now())
        if not state.open:
            log.info("%s: this cycle measures only", state.why)
        return state.open

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
        if not held and self._cycle_running.is_set():
            log.warning("lost leadership during a cycle: stopping it at its next wait")
            self._interrupt.set()
        return held

    def tick(self) -> CycleReport | None:
        """One scheduled cycle: figures always, recovery/plan/execute only as leader (and not --report-only)."""
        if self._stopping.is_set():
            return None
        leader = self._lead()
        execute = leader and not self.options.report_only and self._inside_window()
        self._interrupt.clear()
        if self._stopping.is_set():
            self._interrupt.set()
        self._cycle_running.set()
        self._cycle_since = self._progress_at = self.clock.monotonic()
        try:
            report = run_cycle(self.load_snapshot, self.client, self.settings, StoppableClock(self.clock, self._interrupt),
                               self.exporter, execute=execute, dry_run=self.options.dry_run, progress=_log_progress)
        except Interrupted:
            log.warning("cycle interrupted; the executor's recovery resumes or rolls back the run on the next cycle or start")
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
        self.cycles += 1
        log.info("cycle done", extra={"leader": leader, "executed": execute, **report.summary()})
        return report

    # ----- lifecycle

    def start(self) -> None:
        from apscheduler.schedulers.background import BackgroundScheduler

        scheduler = BackgroundScheduler(timezone=UTC)
        now = datetime.now(UTC)
        scheduler.add_job(self.tick, "interval", seconds=self.options.interval, id="cycle", name="compaction cycle",
                          max_instances=1, coalesce=True, next_run_time=now, misfire_grace_time=None)
        if self.elector is not None:
            every = max(1.0, self.elector.lease_seconds / 3)
            scheduler.add_job(self._lead, "interval", seconds=every, id="lease", name="leader lease",
                              max_instances=1, coalesce=True, next_run_time=now)
        self._progress_at = self.clock.monotonic()
        if self.elector is not None:
            self._lease_grace_from = self.elector.monotonic()
        self.server.start()
        scheduler.start()
        self._scheduler = scheduler
        log.info("controller started", extra={"listen": f"{self.options.listen} (port {self.server.port})",
                                              "interval": self.options.interval, "dryRun": self.options.dry_run,
                                              "reportOnly": self.options.report_only,
                                              "identity": self.elector.identity if self.elector else "(no leader election)"})

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
        return 0


def _log_progress(progress: Progress) -> None:
    log.debug("executor: [%d/%d] %s%s", progress.done, progress.total, progress.current,
              f" (waiting: {progress.waiting})" if progress.waiting else "")


# --------------------------------------------------------------------------- command line


def identity() -> str:
    """The leader-election identity: the pod's name (``POD_NAME``), else host name plus a random suffix."""
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def cmd_controller(args: argparse.Namespace) -> int:
    from compactor.actions.fencing import FencedClient
    from compactor.cli import settings_from_args
    from compactor.kube.client import connect
    from compactor.kube.cluster_client import KubeClusterClient
    from compactor.kube.lease import LeaderElector
    from compactor.kube.read import read_cluster
    from compactor.model.load import build_snapshot, gc_paused
    from compactor.sources import mig_parted_listing, mig_parted_namespace

    if args.interval <= 0:
        raise CompactorError(f"--interval must be > 0, got {args.interval:g}")
    if args.stale_after is not None and args.stale_after <= args.interval:
        raise CompactorError(f"--stale-after must be longer than --interval ({args.interval:g} s), got {args.stale_after:g}")
    parse_listen(args.listen)
    settings = settings_from_args(args)
    # As `run --once` reads it: the mig-parted ConfigMaps, in the GPU Operator's namespace only, when re-cuts need them.
    include, selector = mig_parted_listing(settings.mig.config_map, settings.mig.selector, mig_parted_namespace(settings))
    connection = connect(args.kubeconfig, args.context, in_cluster=args.in_cluster)
    namespace = settings.executor.state_namespace
    # writes give up well within the Lease's margin (leader_election.write_timeout_seconds, validated with the settings)
    client = KubeClusterClient(connection.api_client, namespace=namespace, write_timeout=settings.leader_election.write_timeout_seconds)

    def load_snapshot() -> Snapshot:
        objects = read_cluster(connection.api_client, decoded=True, include_config_maps=include, config_map_selector=selector)
        with gc_paused():
            return build_snapshot(objects, source=f"cluster {connection.name}", pool_label=settings.metrics.pool_label)

    elector = None if args.no_leader_election else LeaderElector.configured(connection.api_client, namespace, identity(),
                                                                               settings.leader_election)
    acting: ClusterClient = client if elector is None else FencedClient(client, elector.holds, elector.ref)  # writes only while leading
    controller = Controller(load_snapshot=load_snapshot, client=acting, settings=settings, exporter=Exporter(),
                            options=controller_options(args, settings),
                            elector=elector)
    try:
        return controller.run_forever()
    finally:
        client.close()


def controller_options(args: argparse.Namespace, settings: Settings) -> ControllerOptions:
    """The flags, made safer by the configured mode: plan dry-runs every cycle, report only measures."""
    return ControllerOptions(interval=args.interval, listen=args.listen, dry_run=args.dry_run or settings.mode == "plan",
                             report_only=args.report_only or settings.mode == "report", stale_after=args.stale_after)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from compactor.cli import _add_common_options

    parser = commands.add_parser("controller", help="run compaction cycles on a schedule; serve /metrics and /healthz")
    group = parser.add_argument_group("cluster")
    group.add_argument("--kubeconfig", metavar="PATH", help="kubeconfig of the cluster (default: in a pod the service account, else ~/.kube/config)")
    group.add_argument("--context", metavar="NAME", help="kubeconfig context")
    group.add_argument("--in-cluster", action="store_true", help="use the pod's service account")
    _add_common_options(parser)
    parser.add_argument("--interval", type=float, default=DEFAULT_INTERVAL, metavar="SECONDS",
                        help=f"seconds between cycles (default {DEFAULT_INTERVAL:g}; the first runs at start)")
    parser.add_argument("--stale-after", type=float, default=None, metavar="SECONDS",
                        help="/healthz fails when no cycle started or ended for this long (default 3 x --interval "
                             "+ planner.time_limit_seconds), when one cycle runs longer than twice the worst-case run, "
                             "or when the Lease was neither renewed nor seen to change for two lease durations")
    parser.add_argument("--listen", default=DEFAULT_LISTEN, metavar="[HOST]:PORT", help=f"/metrics, /healthz, /readyz (default {DEFAULT_LISTEN})")
    parser.add_argument("--dry-run", action="store_true", help="plan and simulate each run; change nothing")
    parser.add_argument("--no-leader-election", action="store_true", help="act without the Lease (one replica only!)")
    parser.add_argument("--report-only", action="store_true", help="export the figures; never recover, plan or execute")
    parser.set_defaults(handler=cmd_controller)

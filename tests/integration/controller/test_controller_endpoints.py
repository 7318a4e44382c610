"""The controller's HTTP endpoints under misbehaving clients, what /healthz says about progress and /readyz about the Lease.

HTTP: a silent or trickling client is dropped at the request deadline, a connection beyond the cap is
answered 503 by the accepting thread without a thread of its own, and scrapes work again once the
idle connections are gone. /healthz: fails when cycles stop, when one cycle runs past the limit, and
when the elector can neither renew nor observe the Lease; passes for a working leader and follower.
Simulated time (the fake cluster's clock for cycles, a hand-moved monotonic clock for the elector) stands in for hours.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from compactor.controller.exporter import Exporter
from compactor.controller.http import CONNECTION_THREAD, MAX_REQUEST_BYTES, HttpServer
from compactor.controller.loop import Controller, ControllerOptions
from compactor.errors import CompactorError
from compactor.kube.lease import LeaderElector
from compactor.model.types import Snapshot
from tests.fakeapi import FakeApiServer
from tests.fakecluster import FakeCluster
from tests.scenarios.controller import SETTINGS_ALL, http_get, loader, make_controller, sample, wait_for
from tests.scenarios.executor import one_freed_node
from tests.scenarios.lease import LEASE_PATH, NS, LeaseStore

TIMEOUT = 0.5  # the request deadline in the HTTP tests: short, so a dropped connection shows within a second


# --------------------------------------------------------------------------- HTTP


@pytest.fixture
def server() -> Iterator[HttpServer]:
    yield from _serve(max_connections=32)


@pytest.fixture
def small_server() -> Iterator[HttpServer]:
    yield from _serve(max_connections=4)


def _serve(max_connections: int) -> Iterator[HttpServer]:
    exporter = Exporter(CollectorRegistry())
    http = HttpServer(
        "127.0.0.1",
        0,
        exporter,
        health=lambda: None,
        readiness=lambda: None,
        timeout=TIMEOUT,
        max_connections=max_connections,
    )
    http.start()
    try:
        yield http
    finally:
        http.stop()


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.settimeout(5)
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    """What the server sent before it closed the connection (a reset counts as closed)."""
    chunks = []
    try:
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    except ConnectionResetError:
        pass
    return b"".join(chunks)


def handler_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name == CONNECTION_THREAD)


def test_a_connection_that_sends_nothing_is_closed_at_the_deadline(server: HttpServer) -> None:
    with connect(server.port) as sock:
        started = time.monotonic()
        assert read_until_closed(sock) == b""  # a client timeout (5 s) here would raise: the server never let go
        elapsed = time.monotonic() - started
    assert TIMEOUT * 0.8 <= elapsed < TIMEOUT + 1.0


def test_a_client_trickling_its_request_is_closed_at_the_deadline_not_kept_byte_by_byte(server: HttpServer) -> None:
    request = b"GET /metrics HTTP/1.0\r\nX-Slow: " + b"a" * 200
    with connect(server.port) as sock:
        started = time.monotonic()
        closed_after = None
        for byte in request:  # a byte every 0.1 s: a per-recv timeout of 0.5 s would never fire
            try:
                sock.send(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                closed_after = time.monotonic() - started
                break
            readable, _, _ = select.select([sock], [], [], 0.1)
            if readable and read_until_closed(sock) == b"":
                closed_after = time.monotonic() - started
                break
    assert closed_after is not None, "the server kept the trickling connection open for the whole request"
    assert closed_after < TIMEOUT + 1.0


def test_a_request_past_the_size_limit_is_dropped_without_an_answer(server: HttpServer) -> None:
    headers = b"".join(b"X-Filler-%d: %s\r\n" % (i, b"x" * 1000) for i in range(MAX_REQUEST_BYTES // 1000 + 2))
    with connect(server.port) as sock:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the server may close while we still send
            sock.sendall(b"GET /metrics HTTP/1.0\r\n" + headers + b"\r\n")
        assert read_until_closed(sock) == b""
    assert http_get(server.port, "/metrics")[0] == 200  # only that connection went


def test_beyond_the_cap_a_connection_gets_503_at_once_without_a_thread_and_scrapes_return_after_the_idle_ones_go(
    small_server: HttpServer,
) -> None:
    before = handler_threads()
    idle = [connect(small_server.port) for _ in range(40)]
    try:
        wait_for(lambda: handler_threads() - before == 4, timeout=TIMEOUT)  # the cap: 4 threads for 40 connections
        refused_replies = [read_until_closed(sock) for sock in idle[4:]]
        assert all(reply.startswith(b"HTTP/1.0 503 ") for reply in refused_replies), refused_replies[:2]

        with connect(small_server.port) as scrape:
            started = time.monotonic()
            scrape.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            reply = read_until_closed(scrape)
            assert reply.startswith(b"HTTP/1.0 503 ") and reply.endswith(b"busy\n")
            assert time.monotonic() - started < 0.3  # answered at once, not after the idle ones' deadline
        assert handler_threads() - before <= 4

        # the idle ones reach their deadline and go; scrapes are served again
        wait_for(lambda: handler_threads() == before, timeout=TIMEOUT + 1.0)
        status, body = http_get(small_server.port, "/metrics")
        assert status == 200 and "gpu_compactor_runs_total" in body
    finally:
        for sock in idle:
            sock.close()


def test_under_the_cap_scrapes_are_served_beside_idle_connections(small_server: HttpServer) -> None:
    before = handler_threads()
    idle = [connect(small_server.port) for _ in range(3)]
    try:
        for path, expected in (("/metrics", 200), ("/healthz", 200), ("/metrics", 200)):
            # a reply can reach the client a moment before its thread gives the slot back: wait for that moment
            wait_for(lambda: handler_threads() - before == 3, timeout=TIMEOUT)
            assert http_get(small_server.port, path)[0] == expected
    finally:
        for sock in idle:
            sock.close()


def test_a_failing_probe_answers_503_with_its_reason_on_one_line() -> None:
    exporter = Exporter(CollectorRegistry())
    http = HttpServer("127.0.0.1", 0, exporter, health=lambda: "no cycle\nfor a while", readiness=lambda: None)
    http.start()
    try:
        assert http_get(http.port, "/healthz") == (503, "no cycle for a while\n")
        assert http_get(http.port, "/readyz") == (200, "ok\n")
    finally:
        http.stop()


# --------------------------------------------------------------------------- /healthz: cycles


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster(one_freed_node())


def test_healthz_fails_when_no_cycle_starts_within_stale_after_and_passes_again_after_one(cluster: FakeCluster) -> None:
    controller = make_controller(cluster, report_only=True)
    assert controller.stale_after == 3 * 3600 + SETTINGS_ALL.solver.time_limit_seconds  # derived from --interval
    controller.start()
    try:
        wait_for(lambda: controller.cycles >= 1)
        assert http_get(controller.server.port, "/healthz") == (200, "ok\n")
        cluster.advance(controller.stale_after - 1)
        assert http_get(controller.server.port, "/healthz") == (200, "ok\n")
        cluster.advance(2)  # the scheduler's next cycle never came
        status, body = http_get(controller.server.port, "/healthz")
        assert status == 503 and body.startswith("no cycle started or ended for ") and body.count("\n") == 1
        assert http_get(controller.server.port, "/readyz")[0] == 503  # not ready when not alive
        assert controller.tick() is not None
        assert http_get(controller.server.port, "/healthz") == (200, "ok\n")
    finally:
        controller.stop()


def test_a_failed_cycle_counts_an_error_keeps_the_last_completed_time_and_still_counts_as_progress(
    cluster: FakeCluster,
) -> None:
    controller = make_controller(cluster, report_only=True)
    controller.start()
    try:
        wait_for(lambda: controller.cycles >= 1)
        completed = sample(controller.exporter, "gpu_compactor_last_cycle_timestamp_seconds")
        assert completed == cluster.clock.now().timestamp()
        cluster.advance(controller.stale_after - 1)
        cluster.fail_next("list_nodes", 503)
        assert controller.tick() is None
        assert sample(controller.exporter, "gpu_compactor_cycle_errors_total") == 1
        # the alert's clock runs on
        assert sample(controller.exporter, "gpu_compactor_last_cycle_timestamp_seconds") == completed
        cluster.advance(2)  # past stale_after since the last success, not since the failed cycle
        assert http_get(controller.server.port, "/healthz") == (200, "ok\n")  # the loop is alive: the error alert tells
    finally:
        controller.stop()


def test_healthz_fails_when_a_cycle_runs_longer_than_the_limit(cluster: FakeCluster) -> None:
    entered, release = threading.Event(), threading.Event()
    load = loader(cluster)

    def blocking_load() -> Snapshot:
        entered.set()
        assert release.wait(10), "the test never released the cycle"
        return load()

    controller = Controller(
        load_snapshot=blocking_load,
        client=cluster,
        settings=SETTINGS_ALL,
        exporter=Exporter(CollectorRegistry()),
        options=ControllerOptions(interval=3600, listen="127.0.0.1:0", report_only=True, cycle_limit=600),
        clock=cluster.clock,
    )
    controller.start()
    try:
        assert entered.wait(5)
        cluster.advance(599)
        assert http_get(controller.server.port, "/healthz") == (200, "ok\n")  # long, within the limit
        cluster.advance(2)
        status, body = http_get(controller.server.port, "/healthz")
        assert status == 503 and body.startswith("stuck: a cycle has been running for 601 s")
        release.set()
        wait_for(lambda: controller.cycles >= 1, timeout=5)
        assert http_get(controller.server.port, "/healthz") == (200, "ok\n")
    finally:
        release.set()
        controller.stop()


def test_the_default_cycle_limit_allows_a_recovered_run_and_a_new_one() -> None:
    from compactor.settings.duration import worst_case_run_seconds

    controller = make_controller(FakeCluster(one_freed_node()))
    try:
        assert controller.cycle_limit == 2 * worst_case_run_seconds(SETTINGS_ALL)
    finally:
        controller.server.stop()


@pytest.mark.parametrize("stale_after", [3600, 10])
def test_stale_after_must_exceed_the_interval(stale_after: float) -> None:
    with pytest.raises(CompactorError, match="--stale-after must be longer than --interval"):
        Controller(
            load_snapshot=loader(FakeCluster(one_freed_node())),
            client=FakeCluster(one_freed_node()),
            settings=SETTINGS_ALL,
            exporter=Exporter(CollectorRegistry()),
            options=ControllerOptions(interval=3600, listen="127.0.0.1:0", stale_after=stale_after),
        )


# --------------------------------------------------------------------------- /readyz: the Lease (never /healthz)


class HandClock:
    """The elector's monotonic clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def lease_controller(fake_api: FakeApiServer, cluster: FakeCluster, clock: HandClock) -> Controller:
    elector = LeaderElector(fake_api.api_client(retries=False), NS, "pod-ours", monotonic=clock, request_timeout=2)
    return Controller(
        load_snapshot=loader(cluster),
        client=cluster,
        settings=SETTINGS_ALL,
        exporter=Exporter(CollectorRegistry()),
        options=ControllerOptions(interval=3600, listen="127.0.0.1:0", report_only=True),
        elector=elector,
        clock=cluster.clock,
    )


@pytest.fixture
def started(fake_api: FakeApiServer, cluster: FakeCluster) -> Iterator[tuple[Controller, HandClock]]:
    LeaseStore(fake_api)
    clock = HandClock()
    controller = lease_controller(fake_api, cluster, clock)
    controller.start()
    try:
        wait_for(lambda: controller.cycles >= 1, timeout=10)
        yield controller, clock
    finally:
        controller.stop()


def lease_failing(fake_api: FakeApiServer) -> Any:
    return fake_api.inject(LEASE_PATH, 503, times=None)


def test_a_leader_that_renews_is_healthy(started: tuple[Controller, HandClock]) -> None:
    controller, clock = started
    assert controller.elector is not None and controller.elector.is_leader
    clock.now += 61  # past two lease durations since the last renewal ...
    assert controller._lead()  # ... and a renewal: fresh again
    assert http_get(controller.server.port, "/healthz") == (200, "ok\n")


def test_a_leader_that_cannot_renew_is_not_ready_after_two_lease_durations_but_stays_alive(
    started: tuple[Controller, HandClock], fake_api: FakeApiServer
) -> None:
    """Issue 18: an API brownout kept every replica from the Lease and failed /healthz, so the kubelet restarted them all
    at once, which cures nothing. It is readiness now; liveness is the process's own."""
    controller, clock = started
    lease_failing(fake_api)
    clock.now += 59
    assert not controller._lead()  # past the renew deadline: no longer leads, still within the limit
    assert http_get(controller.server.port, "/readyz") == (200, "ok\n")
    clock.now += 2
    controller._lead()
    status, body = http_get(controller.server.port, "/readyz")
    assert status == 503
    assert (
        body
        == "leader election: Lease gpu-compactor/gpu-compactor-leader neither renewed nor seen to change for 61 s (limit 60 s)\n"
    )
    assert http_get(controller.server.port, "/healthz") == (200, "ok\n")


def test_a_follower_that_sees_the_leader_renew_is_healthy_and_one_that_cannot_read_the_lease_is_not(
    fake_api: FakeApiServer, cluster: FakeCluster
) -> None:
    LeaseStore(fake_api)
    leader = LeaderElector(fake_api.api_client(), NS, "pod-leader")
    assert leader.try_acquire_or_renew(datetime.now(UTC))
    clock = HandClock()
    controller = lease_controller(fake_api, cluster, clock)
    controller.start()
    try:
        wait_for(lambda: controller.cycles >= 1, timeout=10)
        assert controller.elector is not None and not controller.elector.is_leader
        for _ in range(4):  # two minutes of the leader renewing every 20 s and us watching
            clock.now += 20
            assert leader.try_acquire_or_renew(datetime.now(UTC))
            assert not controller._lead()
        assert http_get(controller.server.port, "/healthz") == (200, "ok\n")

        lease_failing(fake_api)  # the API stops answering us (and the leader; its fate does not matter here)
        clock.now += 61
        controller._lead()
        status, body = http_get(controller.server.port, "/readyz")
        assert status == 503 and body.startswith(
            "leader election: Lease gpu-compactor/gpu-compactor-leader neither renewed"
        )
        assert http_get(controller.server.port, "/healthz") == (200, "ok\n")
    finally:
        controller.stop()


def test_a_replica_that_never_reached_the_lease_is_not_ready_after_its_grace(
    fake_api: FakeApiServer, cluster: FakeCluster
) -> None:
    LeaseStore(fake_api)
    lease_failing(fake_api)
    clock = HandClock()
    controller = lease_controller(fake_api, cluster, clock)
    controller.start()
    try:
        wait_for(lambda: controller.cycles >= 1, timeout=10)
        assert http_get(controller.server.port, "/readyz") == (200, "ok\n")  # just started: within the grace
        clock.now += 61
        assert http_get(controller.server.port, "/readyz")[0] == 503
        assert http_get(controller.server.port, "/healthz") == (200, "ok\n")
    finally:
        controller.stop()

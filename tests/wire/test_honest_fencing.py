"""Honest fencing (issue 12, finding 9): the Lease check never waits on the API server, writes give up within the
Lease's margin and are sent once, and what a late write can still do is caught by the state's compare-and-swap.

Over real HTTP against the fake API server (``tests/scenarios/lease.py``'s ``LeaseStore`` serves the Lease).
A renewal is held on the server with a gate; ``holds()`` is asked from another thread meanwhile.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Generic, TypeVar

import pytest

from compactor.actions.services.fencing import FencedClient
from compactor.errors import ClusterError, ConfigError
from compactor.kube.cluster_client import DEFAULT_TIMEOUT, KubeClusterClient
from compactor.kube.lease import LeaderElector
from compactor.settings.leader_election import LeaderElectionSettings, lease_timing_problem
from compactor.settings.origins import Settings, load_settings
from tests.builders import node
from tests.fakeapi import FakeApiServer
from tests.fakecluster import FakeCluster
from tests.scenarios.lease import LEASE_PATH, NS, LeaseStore, Ticker, elector

T0 = datetime(2026, 1, 1, tzinfo=UTC)
STATE = "gpu-compactor-state"
STATE_PATH = f"/api/v1/namespaces/{NS}/configmaps/{STATE}"
QUICK = 0.5  # what "never waits" means here: the renewal held on the server would take its whole timeout (4 s)

T = TypeVar("T")


class Background(Generic[T]):
    """``call()`` on its own thread; ``result()`` waits for it (and re-raises what it raised)."""

    def __init__(self, call: Callable[[], T]) -> None:
        self._value: list[T] = []
        self._error: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, args=(call,), daemon=True)
        self._thread.start()

    def _run(self, call: Callable[[], T]) -> None:
        try:
            self._value.append(call())
        except BaseException as exc:
            self._error.append(exc)

    def done_within(self, seconds: float) -> bool:
        self._thread.join(seconds)
        return not self._thread.is_alive()

    def result(self, seconds: float = 5.0) -> T:
        assert self.done_within(seconds), f"still running after {seconds} s"
        if self._error:
            raise self._error[0]
        return self._value[0]


def answers_within(call: Callable[[], T], seconds: float = QUICK) -> T:
    """``call()``'s result, asserting it came within ``seconds`` (asked from another thread, so a wait cannot hang the test)."""
    asked = Background(call)
    assert asked.done_within(seconds), f"{getattr(call, '__name__', 'the call')} still waiting after {seconds} s"
    return asked.result(0)


class Gate:
    """Holds every Lease PUT on the API server until ``open`` is set; ``arrived`` says one is being held."""

    def __init__(self, store: LeaseStore) -> None:
        self.arrived = threading.Event()
        self.open = threading.Event()
        store.before_put = self._hold

    def _hold(self) -> None:
        self.arrived.set()
        self.open.wait(10)


# ----- no lock across I/O ---------------------------------------------------------------------------------------------


def test_holds_and_last_contact_never_wait_for_a_renewal_stuck_on_the_api_server(
    fake_api: FakeApiServer, store: LeaseStore
) -> None:
    a = elector(fake_api, "pod-a")
    assert a.try_acquire_or_renew(T0)
    contact = a.last_contact()
    gate = Gate(store)
    renewal = Background(lambda: a.try_acquire_or_renew(T0 + timedelta(seconds=10)))
    try:
        assert gate.arrived.wait(5), "the renewal's PUT never reached the API server"
        # the last renewal is recent: writes go on while the next one is in flight
        assert answers_within(a.holds) is True
        assert answers_within(a.last_contact) == contact  # the liveness probe does not wait either
        cluster = FakeCluster([node("gpu-1", gpus=8)])
        fenced = FencedClient(cluster, a.holds, a.ref)
        answers_within(lambda: fenced.patch_node("gpu-1", {"metadata": {"labels": {"checked": "while-renewing"}}}))
        assert cluster.nodes["gpu-1"]["metadata"]["labels"]["checked"] == "while-renewing"
        assert not renewal.done_within(0)  # all of that happened while the renewal was still waiting on the server
    finally:
        gate.open.set()
    assert renewal.result() is True and a.holds()
    assert store.spec()["holderIdentity"] == "pod-a"


def test_a_release_during_a_renewal_stops_writes_at_once_then_gives_up_the_lease_the_renewal_wrote(
    fake_api: FakeApiServer, store: LeaseStore
) -> None:
    a, b = elector(fake_api, "pod-a"), elector(fake_api, "pod-b")
    assert a.try_acquire_or_renew(T0)
    gate = Gate(store)
    renewal = Background(lambda: a.try_acquire_or_renew(T0 + timedelta(seconds=10)))
    try:
        assert gate.arrived.wait(5)
        release = Background(lambda: a.release(T0 + timedelta(seconds=11)))
        deadline = time.monotonic() + 1
        while a.is_leader and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not a.is_leader, "release() did not begin while a renewal was in flight"
        assert answers_within(a.holds) is False  # fenced writes stop the moment release() begins
        assert not renewal.done_within(0) and not release.done_within(0)  # its PUT waits for the round in flight
    finally:
        gate.open.set()
    # the renewal landed, but a release began meanwhile: it does not make us leader again
    assert renewal.result() is False
    assert release.result() is True  # and the release's PUT carried the resourceVersion the renewal wrote (no 409)
    assert not a.is_leader and not a.holds()
    assert store.spec()["holderIdentity"] == ""
    puts = fake_api.requests_to(LEASE_PATH, "PUT")
    assert [p.json()["spec"]["holderIdentity"] for p in puts] == ["pod-a", ""]
    assert b.try_acquire_or_renew(T0 + timedelta(seconds=12)) is True  # a standby takes over at once


def test_a_renewal_counts_from_when_its_round_began_not_when_its_slow_reply_came(
    fake_api: FakeApiServer, store: LeaseStore
) -> None:
    """Another replica measures its lease duration from when it saw the record change, which is after the round began:
    counting the renew deadline from the reply would let a slow round stretch the time this replica acts."""
    clock = Ticker()
    a = elector(fake_api, "pod-a", monotonic=clock)
    assert a.try_acquire_or_renew(T0)

    def slow() -> None:
        clock.t += 3  # the renewal's PUT takes 3 s on this process's clock

    store.before_put = slow
    clock.t = 1010.0
    assert a.try_acquire_or_renew(T0 + timedelta(seconds=10))
    assert clock.t == 1013.0 and a.renewed_at == 1010.0
    clock.t = 1010.0 + 19.9
    assert a.holds()
    clock.t = 1010.0 + 20  # the renew deadline from when the round began, not from its reply (1013 + 20)
    assert not a.holds()


# ----- writes: sent once, within the margin ---------------------------------------------------------------------------


def test_a_lease_request_is_sent_once_and_gives_up_after_its_timeout(
    fake_api: FakeApiServer, store: LeaseStore
) -> None:
    a = elector(fake_api, "pod-a", request_timeout=0.3)
    assert a.try_acquire_or_renew(T0)
    fake_api.inject(LEASE_PATH, method="PUT", delay=1.0, passthrough=True)
    started = time.monotonic()
    with pytest.raises(ClusterError, match=r"\(lease gpu-compactor/gpu-compactor-leader\): timed out"):
        a.try_acquire_or_renew(T0 + timedelta(seconds=10))
    assert time.monotonic() - started < 0.9
    assert len(fake_api.requests_to(LEASE_PATH, "PUT")) == 1  # urllib3 would have sent it again, unchecked


def test_a_state_write_is_sent_once_may_still_land_late_and_the_next_save_is_then_a_conflict(
    fake_api: FakeApiServer,
) -> None:
    """The limit, shown: a client-side timeout cancels nothing on the server. The guard, shown: the compare-and-swap."""
    client = KubeClusterClient(fake_api.api_client(), namespace=NS, write_timeout=0.3)
    client.write_state(STATE, {"phase": "cordoning"})
    fake_api.inject(STATE_PATH, method="PUT", delay=0.8, passthrough=True)
    started = time.monotonic()
    with pytest.raises(ClusterError, match=r"\(writing configmap gpu-compactor/gpu-compactor-state\): timed out"):
        client.write_state(STATE, {"phase": "evicting"})
    assert time.monotonic() - started < 0.7
    assert len(fake_api.requests_to(STATE_PATH, "PUT")) == 1
    deadline = time.monotonic() + 3
    while (fake_api.get("ConfigMap", STATE, NS) or {}).get("data") != {
        "phase": "evicting"
    } and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (fake_api.get("ConfigMap", STATE, NS) or {}).get("data") == {
        "phase": "evicting"
    }  # applied after the client gave up
    with pytest.raises(ClusterError, match="changed by another writer") as info:
        client.write_state(STATE, {"phase": "finishing"})
    assert info.value.status == 409
    assert (fake_api.get("ConfigMap", STATE, NS) or {}).get("data") == {"phase": "evicting"}  # never overwritten blind


def test_reads_keep_their_own_longer_timeout_and_writes_carry_the_same_credentials_and_user_agent() -> None:
    with FakeApiServer(token="s3cret") as api:
        api.add(node("gpu-1", gpus=8))
        api_client = api.api_client()
        api_client.user_agent = "gpu-compactor/test"
        client = KubeClusterClient(api_client, namespace=NS)
        assert (client.request_timeout, client.write_timeout) == (
            DEFAULT_TIMEOUT,
            Settings().leader_election.write_timeout_seconds,
        )
        assert client.get_node("gpu-1") is not None
        client.patch_node("gpu-1", {"metadata": {"labels": {"a": "b"}}})  # a 401 would raise
        read, write = (
            api.requests_to("/api/v1/nodes/gpu-1", "GET")[0],
            api.requests_to("/api/v1/nodes/gpu-1", "PATCH")[0],
        )
        assert read.header("User-Agent") == write.header("User-Agent") == "gpu-compactor/test"
        client.close()


# ----- the timing rule ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lease", "renew", "write", "problem"),
    [
        (30, 20, 4, None),  # the defaults: 2 x 4 <= 10, and 10 + 8 < 20
        (15, 10, 2, None),
        (60, 40, 8, None),
        (
            30,
            20,
            6,
            "leader_election.write_timeout_seconds (6) must be at most half of lease_seconds - renew_deadline_seconds (10 s), i.e. 5",
        ),
        (
            30,
            20,
            5,
            "leader_election.renew_deadline_seconds (20) must exceed a third of lease_seconds plus a renewal round",
        ),
        (
            30,
            30,
            1,
            "leader_election.renew_deadline_seconds (30) must be shorter than leader_election.lease_seconds (30)",
        ),
        (
            15,
            20,
            1,
            "leader_election.renew_deadline_seconds (20) must be shorter than leader_election.lease_seconds (15)",
        ),
    ],
    ids=["defaults", "client-go-like", "long", "write-too-long", "round-too-long", "no-margin", "deadline-past-lease"],
)
def test_the_timing_rule(lease: int, renew: float, write: float, problem: str | None) -> None:
    found = lease_timing_problem(lease, renew, write)
    assert (found is None) == (problem is None), found
    if problem is not None:
        assert found is not None and found.startswith(problem)


def test_the_elector_refuses_timings_that_break_the_rule_and_takes_them_from_the_settings(
    fake_api: FakeApiServer,
) -> None:
    with pytest.raises(ValueError, match=r"write_timeout_seconds \(6\) must be at most half"):
        LeaderElector(fake_api.api_client(), NS, "pod-a", request_timeout=6)
    scaled = LeaderElector(fake_api.api_client(), NS, "pod-a", 15)  # unset: the defaults' proportions of a 30 s lease
    assert (scaled.renew_deadline, scaled.request_timeout) == (10, 2)
    configured = LeaderElector.configured(
        fake_api.api_client(),
        NS,
        "pod-a",
        LeaderElectionSettings(lease_seconds=60, renew_deadline_seconds=40, write_timeout_seconds=8),
    )
    assert (configured.lease_seconds, configured.renew_deadline, configured.request_timeout) == (60, 40, 8)


def test_settings_that_break_the_rule_are_one_line_naming_the_file_and_the_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in [k for k in os.environ if k.startswith("COMPACTOR_")]:
        monkeypatch.delenv(key)
    config = tmp_path / "compactor.yaml"
    config.write_text("leader_election:\n  write_timeout_seconds: 6\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(str(config))
    assert str(info.value).startswith(f"{config}: leader_election.write_timeout_seconds (6) must be at most half of")
    monkeypatch.setenv("COMPACTOR_LEADER_ELECTION__RENEW_DEADLINE_SECONDS", "30")
    with pytest.raises(
        ConfigError, match=r"^environment: leader_election.renew_deadline_seconds \(30\) must be shorter"
    ):
        load_settings(None)

    result = subprocess.run(
        [sys.executable, "-m", "compactor.cli", "plan", "--example", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith("COMPACTOR_")},
    )
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert (
        f"{config}: leader_election.write_timeout_seconds (6) must be at most half" in line
        and "Traceback" not in result.stderr
    )


def test_one_shot_commands_build_their_client_and_lease_from_the_settings(
    fake_api: FakeApiServer, store: LeaseStore, tmp_path: Path
) -> None:
    from compactor.app.wiring import cluster_client
    from compactor.app.wiring import exclusive as _exclusive
    from compactor.commands.options import from_args

    config = tmp_path / "compactor.yaml"
    config.write_text(
        "leader_election:\n  lease_seconds: 15\n  renew_deadline_seconds: 10\n  write_timeout_seconds: 2\n",
        encoding="utf-8",
    )
    args = argparse.Namespace(
        kubeconfig=str(fake_api.write_kubeconfig(tmp_path / "kubeconfig")),
        context=None,
        in_cluster=False,
        config=str(config),
    )
    client = cluster_client(from_args(args, "apply"), dry_run=False)
    assert isinstance(client, KubeClusterClient)
    assert (client.write_timeout, client.request_timeout) == (2, DEFAULT_TIMEOUT)
    settings = load_settings(str(config))
    with _exclusive(client, settings, dry_run=False) as fenced:
        assert isinstance(fenced, FencedClient)
        held = fenced.holds.__self__  # type: ignore[attr-defined]
        assert isinstance(held, LeaderElector)
        assert (held.lease_seconds, held.renew_deadline, held.request_timeout) == (15, 10, 2)
        assert store.spec()["leaseDurationSeconds"] == 15 and held.holds()
    assert store.spec()["holderIdentity"] == ""  # released at the end
    client.close()

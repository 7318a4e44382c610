"""LeaderElector against the fake API server over real HTTP: create, renew, take over after expiry, lose on 409.

The fake API server does not serve coordination.k8s.io, so this file adds a Lease
endpoint with ``fake_api.route``: GET, POST (409 AlreadyExists) and PUT with the
real server's optimistic concurrency (a stale ``metadata.resourceVersion`` is a 409).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from compactor.actions.port.client import ObjectRef
from compactor.actions.services.fencing import FencedClient, LeadershipLost
from compactor.errors import ClusterError
from compactor.kube.lease import HeldElsewhere, LeaderElector, acquire_once, parse_time
from tests.builders import node, pod
from tests.fakeapi import FakeApiServer, status_body
from tests.fakecluster import FakeCluster
from tests.scenarios.lease import LEASE_PATH, LEASES, NS, T0, LeaseStore, Ticker, elector


def test_the_first_candidate_creates_the_lease_and_leads(fake_api: FakeApiServer, store: LeaseStore) -> None:
    a = elector(fake_api, "pod-a")
    assert a.try_acquire_or_renew(T0) is True
    assert a.is_leader
    spec = store.spec()
    assert spec["holderIdentity"] == "pod-a"
    assert spec["leaseDurationSeconds"] == 30
    assert spec["leaseTransitions"] == 0
    assert spec["acquireTime"] == spec["renewTime"] == "2026-01-01T00:00:00.000000Z"  # MicroTime, microseconds kept
    posts = fake_api.requests_to(re.compile(LEASES), "POST")
    assert len(posts) == 1 and posts[0].content_type == "application/json"
    assert posts[0].json()["kind"] == "Lease" and posts[0].json()["apiVersion"] == "coordination.k8s.io/v1"


def test_the_holder_renews_keeping_its_acquire_time(fake_api: FakeApiServer, store: LeaseStore) -> None:
    a = elector(fake_api, "pod-a")
    assert a.try_acquire_or_renew(T0)
    assert a.try_acquire_or_renew(T0 + timedelta(seconds=10, microseconds=250))
    spec = store.spec()
    assert parse_time(spec["renewTime"]) == T0 + timedelta(seconds=10, microseconds=250)
    assert parse_time(spec["acquireTime"]) == T0
    assert spec["leaseTransitions"] == 0
    put = fake_api.requests_to(LEASE_PATH, "PUT")[-1]
    assert put.json()["metadata"]["resourceVersion"] == "100"  # optimistic concurrency: the version it read


def test_another_candidate_waits_while_the_lease_is_fresh(fake_api: FakeApiServer, store: LeaseStore) -> None:
    a, b = elector(fake_api, "pod-a"), elector(fake_api, "pod-b")
    assert a.try_acquire_or_renew(T0)
    assert b.try_acquire_or_renew(T0) is False  # creating raced: the GET finds a fresh lease
    assert b.try_acquire_or_renew(T0 + timedelta(seconds=29)) is False
    assert store.spec()["holderIdentity"] == "pod-a"
    assert not fake_api.requests_to(LEASE_PATH, "PUT")  # b never wrote


def test_a_candidate_takes_over_only_after_a_lease_duration_of_its_own_time_without_a_change(
    fake_api: FakeApiServer, store: LeaseStore
) -> None:
    a_time, b_time = Ticker(), Ticker()
    a, b = elector(fake_api, "pod-a", monotonic=a_time), elector(fake_api, "pod-b", monotonic=b_time)
    assert a.try_acquire_or_renew(T0)
    skewed = T0 + timedelta(hours=1)  # b's wall clock is an hour ahead: by timestamps the lease looks long expired
    assert b.try_acquire_or_renew(skewed) is False  # first sight of the record starts b's own count
    b_time.t += 29
    assert b.try_acquire_or_renew(skewed + timedelta(seconds=29)) is False
    b_time.t += 1  # 30 s of b's monotonic time with no change: the holder is gone
    assert b.try_acquire_or_renew(skewed + timedelta(seconds=30)) is True
    spec = store.spec()
    assert spec["holderIdentity"] == "pod-b" and spec["leaseTransitions"] == 1
    # the old holder learns it lost on its next round: the lease is b's and fresh
    assert a.try_acquire_or_renew(T0 + timedelta(seconds=31)) is False
    assert not a.is_leader and not a.holds()


def test_a_holder_that_keeps_renewing_is_never_taken_over_whatever_the_clocks_say(
    fake_api: FakeApiServer, store: LeaseStore
) -> None:
    a_time, b_time = Ticker(), Ticker()
    a, b = elector(fake_api, "pod-a", monotonic=a_time), elector(fake_api, "pod-b", monotonic=b_time)
    behind = T0 - timedelta(hours=2)  # a's wall clock lags: every renewTime it writes looks two hours old to b
    assert a.try_acquire_or_renew(behind)
    for step in range(1, 10):
        b_time.t += 10
        assert b.try_acquire_or_renew(T0 + timedelta(seconds=10 * step)) is False
        a_time.t += 10
        assert a.try_acquire_or_renew(behind + timedelta(seconds=10 * step))
    assert store.spec()["holderIdentity"] == "pod-a"
    assert b.changes_seen > 1  # b saw the holder alive


def test_a_released_lease_is_taken_at_once(fake_api: FakeApiServer, store: LeaseStore) -> None:
    a, b = elector(fake_api, "pod-a"), elector(fake_api, "pod-b")
    assert a.try_acquire_or_renew(T0)
    assert a.release(T0 + timedelta(seconds=1)) is True
    assert store.spec()["holderIdentity"] == ""
    assert b.try_acquire_or_renew(T0 + timedelta(seconds=2)) is True


def test_a_conflicting_write_means_the_round_is_lost(fake_api: FakeApiServer, store: LeaseStore) -> None:
    a = elector(fake_api, "pod-a")
    assert a.try_acquire_or_renew(T0)

    store.before_put = store.bump  # another replica writes between our GET and our PUT
    assert a.try_acquire_or_renew(T0 + timedelta(seconds=5)) is False
    assert not a.is_leader
    assert fake_api.reply_to(fake_api.requests_to(LEASE_PATH, "PUT")[-1]).status == 409  # type: ignore[union-attr]


def test_a_create_race_lost_on_409_already_exists(fake_api: FakeApiServer, store: LeaseStore) -> None:
    fake_api.inject(
        re.compile(LEASES), 409, method="POST", body=status_body(409, "already exists", reason="AlreadyExists")
    )
    a = elector(fake_api, "pod-a")
    assert a.try_acquire_or_renew(T0) is False


def test_api_failures_are_one_line_cluster_errors_and_leadership_survives_until_the_renew_deadline(
    fake_api: FakeApiServer, store: LeaseStore
) -> None:
    a_time = Ticker()
    a = elector(fake_api, "pod-a", monotonic=a_time)
    assert a.try_acquire_or_renew(T0)
    fake_api.inject(
        LEASE_PATH,
        403,
        method="GET",
        times=2,
        body=status_body(403, 'leases.coordination.k8s.io "x" is forbidden:\nno'),
    )
    a_time.t += 10
    with pytest.raises(ClusterError) as caught:
        a.try_acquire_or_renew(T0 + timedelta(days=1))  # a wall-clock jump changes nothing: only monotonic time counts
    assert "\n" not in str(caught.value) and "403" in str(caught.value) and caught.value.status == 403
    assert a.is_leader and a.holds()  # 10 s < renew deadline (20 s)
    a_time.t += 11
    assert not a.holds()  # writes stop as soon as the renew deadline passes, before the next round
    with pytest.raises(ClusterError):
        a.try_acquire_or_renew(T0)
    assert not a.is_leader


def test_an_unreachable_api_is_a_cluster_error(fake_api: FakeApiServer) -> None:
    a = LeaderElector(fake_api.api_client(retries=False), NS, "pod-a", request_timeout=2)
    fake_api.inject(LEASE_PATH, drop=True)
    with pytest.raises(ClusterError, match="lease gpu-compactor/gpu-compactor-leader"):
        a.try_acquire_or_renew(T0)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        LeaderElector(object(), NS, "", 30)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        LeaderElector(object(), NS, "x", 0)  # type: ignore[arg-type]


def test_a_one_shot_command_refuses_at_once_when_the_holder_is_alive(
    fake_api: FakeApiServer, store: LeaseStore
) -> None:
    a_time, b_time = Ticker(), Ticker()
    a, b = elector(fake_api, "controller", monotonic=a_time), elector(fake_api, "run-once", monotonic=b_time)
    assert a.try_acquire_or_renew(T0)
    slept: list[float] = []

    def sleep(seconds: float) -> None:  # meanwhile the controller renews, as its lease job does
        slept.append(seconds)
        b_time.t += seconds
        a_time.t += seconds
        a.try_acquire_or_renew(T0 + timedelta(seconds=len(slept)))

    with pytest.raises(
        HeldElsewhere,
        match=re.escape("held by controller, renewed at 2026-01-01T00:00:01.000000Z; nothing was changed"),
    ):
        acquire_once(b, sleep=sleep)
    assert len(slept) == 1 and store.spec()["holderIdentity"] == "controller"


def test_a_one_shot_command_takes_over_a_lease_its_holder_abandoned(fake_api: FakeApiServer, store: LeaseStore) -> None:
    a, b_time = elector(fake_api, "crashed-run"), Ticker()
    b = elector(fake_api, "run-once", monotonic=b_time)
    assert a.try_acquire_or_renew(T0)  # and then the process died without releasing it

    def sleep(seconds: float) -> None:
        b_time.t += seconds

    acquire_once(b, sleep=sleep)
    assert store.spec()["holderIdentity"] == "run-once" and b_time.t - 1000.0 >= 30


def test_writes_are_fenced_on_the_lease_and_reads_are_not() -> None:
    cluster = FakeCluster([node("gpu-1", gpus=8), pod("p", on="gpu-1", gpus=1)])
    leading = [True]
    fenced = FencedClient(cluster, lambda: leading[0], "gpu-compactor/gpu-compactor-leader")
    fenced.patch_node("gpu-1", {"metadata": {"labels": {"a": "b"}}})
    leading[0] = False
    assert fenced.get_node("gpu-1") is not None and fenced.list_pods(namespace="default")
    for write in (
        lambda: fenced.patch_node("gpu-1", {"spec": {"unschedulable": True}}),
        lambda: fenced.evict("default", "p"),
        lambda: fenced.write_state("s", {"k": "v"}),
        lambda: fenced.create_event(ObjectRef("Node", "gpu-1"), reason="R", message="m"),
    ):
        with pytest.raises(LeadershipLost, match="no longer holds the Lease gpu-compactor/gpu-compactor-leader"):
            write()
    assert not cluster.nodes["gpu-1"]["spec"].get("unschedulable") and cluster.evicted == [] and cluster.state == {}


def test_a_one_shot_command_refuses_without_waiting_when_the_lease_is_fresh_by_its_own_timestamps(
    fake_api: FakeApiServer, store: LeaseStore
) -> None:
    a, b = elector(fake_api, "run-once-a"), elector(fake_api, "run-once-b")
    assert a.try_acquire_or_renew(datetime.now(UTC))  # two `run --once` started together: a was first

    def sleep(_seconds: float) -> None:
        raise AssertionError("a fresh lease is refused at once, without waiting")

    with pytest.raises(HeldElsewhere, match="held by run-once-a, renewed at"):
        acquire_once(b, sleep=sleep)
    assert store.spec()["holderIdentity"] == "run-once-a"

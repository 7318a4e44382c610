"""The clients a use case talks through, built in one place: the live client, the leased client, the dry-run client.

A live client writes with the Lease's write timeout (``leader_election.write_timeout_seconds``) so a write gives up
within the Lease's margin; the leased client checks every write against the Lease the controller holds too
(``compactor.actions.services.fencing``); the dry-run client records, over a copy of the cluster, the calls a real run would
make. ``run --once``, ``apply``, ``plan`` and the controller all get theirs here, so they cannot drift apart.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from compactor.actions.dryrun import RecordingClient
from compactor.actions.port.client import ClusterClient, Obj
from compactor.actions.services.fencing import FencedClient
from compactor.app.invocation import Invocation
from compactor.app.reading import load_for_planning, world_objects
from compactor.clock import Clock, RealClock, StoppableClock, on_stop_signals
from compactor.errors import CompactorError
from compactor.kube.cluster_client import KubeClusterClient
from compactor.kube.lease import LeaderElector, LeaseKeeper, acquire_once, identity
from compactor.model.types import Snapshot
from compactor.planner.plan import CompactionPlan
from compactor.settings.origins import Settings


def cluster_client(inv: Invocation, *, dry_run: bool) -> KubeClusterClient:
    """The invocation's client of its live cluster (one per invocation: ``Invocation.client``); ``dry_run``: its view
    whose every write is a server-side dry run (dryRun=All)."""
    return inv.client.dry_run_view if dry_run else inv.client


def recording_client(
    objects: list[Obj],
    plan: CompactionPlan | None,
    settings: Settings,
    *,
    reader: ClusterClient | None,
    server_dry_run: bool = False,
) -> RecordingClient:
    """The dry run's client over ``objects``: ``reader`` (a live cluster's) answers what the copy does not hold, and with
    ``server_dry_run`` or ``executor.server_dry_run`` it is asked whether each eviction would be admitted (dryRun=All)."""
    admitting = reader is not None and (server_dry_run or settings.executor.server_dry_run)
    return RecordingClient(
        objects,
        plan,
        admission=reader if admitting else None,
        probe=reader,
        namespace=settings.executor.state_namespace,
    )


def simulating(inv: Invocation, plan: CompactionPlan | None) -> RecordingClient:
    """A dry run's client for ``apply``/``run --once``: the calls a real run would make, recorded over a copy of the
    snapshot or of the live cluster (whose client answers what the copy does not hold, the steering probe included)."""
    server_dry_run_needs_a_cluster(inv)
    reader = cluster_client(inv, dry_run=True) if inv.live else None
    objects = world_objects(inv, reader)
    return recording_client(objects, plan, inv.settings, reader=reader, server_dry_run=inv.server_dry_run)


@contextmanager
def acting(inv: Invocation) -> Iterator[tuple[ClusterClient, Clock]]:
    """The client a real ``apply``/``run --once`` changes the cluster through, and its clock: while open, the run holds
    the Lease (every write checked against it) and SIGTERM/SIGINT stop it at its next wait."""
    server_dry_run_needs_a_cluster(inv)
    if not inv.live:
        raise CompactorError(
            "a snapshot cannot be changed: add --dry-run, or name a live cluster (--kubeconfig/--context/--in-cluster)"
        )
    if inv.server_dry_run:
        raise CompactorError("--server-dry-run goes with --dry-run")
    live = cluster_client(inv, dry_run=False)
    with stoppable(RealClock()) as clock, exclusive(live, inv.settings, False) as client:
        yield client, clock


def server_dry_run_needs_a_cluster(inv: Invocation) -> None:
    """``--server-dry-run`` of a snapshot refused, before anything is read or planned."""
    if inv.server_dry_run and not inv.live:
        raise CompactorError(
            "--server-dry-run asks a live API server whether each eviction would be admitted: name the cluster "
            "(--kubeconfig/--context/--in-cluster) instead of --snapshot/--example"
        )


@contextmanager
def stoppable(clock: Clock) -> Iterator[Clock]:
    """SIGTERM/SIGINT stop a real run at its next wait (a safe point): the state stays, the next run recovers it."""
    if threading.current_thread() is not threading.main_thread():
        yield clock
        return
    stop = threading.Event()
    with on_stop_signals(stop.set):
        yield StoppableClock(clock, stop)


def elector_for(client: KubeClusterClient, settings: Settings) -> LeaderElector:
    """The Lease this installation's runs and its controller share (``executor.state_namespace``, ``leader_election``)."""
    return LeaderElector.configured(
        client.api_client, settings.executor.state_namespace, identity(), settings.leader_election
    )


@contextmanager
def exclusive(client: ClusterClient, settings: Settings, dry_run: bool) -> Iterator[ClusterClient]:
    """Act only while holding the Lease the controller uses too, every write checked against it first (which narrows,
    not closes, the window for a second actor: see compactor/actions/services/fencing.py)."""
    if dry_run or not isinstance(client, KubeClusterClient):
        yield client
        return
    elector = elector_for(client, settings)
    acquire_once(elector)
    with LeaseKeeper(elector):
        yield FencedClient(client, elector.holds, elector.ref)


@dataclass(frozen=True)
class ControllerWiring:
    """What the controller's loop runs on: one connection read for snapshots, the client it acts through (fenced by the
    Lease unless leader election is off), the Lease's elector (None: always leader) and how to close it all."""

    load_snapshot: Callable[[], Snapshot]
    client: ClusterClient
    elector: LeaderElector | None
    close: Callable[[], None]


def wire_controller(inv: Invocation, *, leader_election: bool) -> ControllerWiring:
    """The controller's clients over one connection; with ``leader_election`` every write is checked against the Lease."""
    client, settings = inv.client, inv.settings

    def load_snapshot() -> Snapshot:  # as `run --once` reads it, through the controller's one connection
        return load_for_planning(inv)

    elector = elector_for(client, settings) if leader_election else None
    acting: ClusterClient = client if elector is None else FencedClient(client, elector.holds, elector.ref)
    return ControllerWiring(load_snapshot, acting, elector, client.close)

"""One command's settings and input, parsed once: the ``Invocation`` every use case of ``compactor.app`` is given.

The settings are loaded once (defaults, then ``--config``, then ``COMPACTOR_*``, then the command's own overrides such
as ``--shape`` or ``plan --time-limit``), the input is named once (files, the example, or a live cluster), and the
switches that change what a run does (dry run, server dry run) sit beside them. Adapters build it
(``commands.options.from_args`` for the command line, ``for_cluster`` for the controller); nothing reads the command line after that.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from compactor.app.sources import SnapshotSource
from compactor.errors import CompactorError
from compactor.kube import client as kube_api
from compactor.kube.cluster_client import KubeClusterClient
from compactor.settings.origins import Settings


@dataclass(frozen=True)
class Invocation:
    """What one command (or the controller) was asked to do, with what settings, on what input."""

    command: str
    settings: Settings
    source: SnapshotSource
    source_problem: str | None = None  # why the options name no single input (said when the input is needed)
    dry_run: bool = False
    server_dry_run: bool = False
    output: str = "text"
    verbose: bool = False
    log_format: str = "text"
    # how the settings differ from the shipped config when no --config named them: warned before a run acts
    unlike_shipped: str | None = None

    @property
    def live(self) -> bool:
        """Whether the input is a live cluster (kubeconfig, context or in-cluster) rather than a snapshot."""
        return self.source.live

    @cached_property
    def connection(self) -> kube_api.Connection:
        """The invocation's one connection to its live cluster, opened when first asked: its snapshot is read through
        it and its client (``client``) talks through it."""
        source = self.source
        return kube_api.connect(source.kubeconfig, source.context, in_cluster=source.in_cluster)

    @cached_property
    def client(self) -> KubeClusterClient:
        """The invocation's one cluster client (over ``connection``); its dry-run view (``KubeClusterClient.dry_run_view``)
        is derived from it. Writes give up within the Lease's margin (``leader_election.write_timeout_seconds``)."""
        settings = self.settings
        return KubeClusterClient(
            self.connection.api_client,
            namespace=settings.executor.state_namespace,
            write_timeout=settings.leader_election.write_timeout_seconds,
        )

    def input(self) -> SnapshotSource:
        """The input, or the ``CompactorError`` saying why the options do not name exactly one."""
        if self.source_problem is not None:
            raise CompactorError(self.source_problem)
        return self.source


def for_cluster(
    settings: Settings,
    *,
    kubeconfig: str | None,
    context: str | None,
    in_cluster: bool,
    dry_run: bool,
    command: str = "controller",
) -> Invocation:
    """The controller's invocation: always a live cluster."""
    source = SnapshotSource(kubeconfig=kubeconfig, context=context, live=True, in_cluster=in_cluster)
    return Invocation(command=command, settings=settings, source=source, dry_run=dry_run)

"""One command's settings and input, parsed once: the ``Invocation`` every use case of ``compactor.app`` is given.

The settings are loaded once (defaults, then ``--config``, then ``COMPACTOR_*``, then the command's own overrides such
as ``--shape`` or ``plan --time-limit``), the input is named once (files, the example, or a live cluster), and the
switches that change what a run does (dry run, server dry run) sit beside them. Adapters build it
(``commands.options.from_args`` for the command line, ``for_cluster`` for the controller); nothing reads the command line after that.
"""

from __future__ import annotations

from dataclasses import dataclass

from compactor.app.sources import SnapshotSource
from compactor.errors import CompactorError
from compactor.settings import Settings


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

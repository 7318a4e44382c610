"""One command's settings and input, parsed once: the ``Invocation`` every use case of ``compactor.app`` is given.

The settings are loaded once (defaults, then ``--config``, then ``COMPACTOR_*``, then the command's own overrides such
as ``--shape`` or ``plan --time-limit``), the input is named once (files, the example, or a live cluster), and the
switches that change what a run does (dry run, server dry run) sit beside them. Adapters build it
(``from_args`` for the command line, ``for_cluster`` for the controller); nothing reads the command line after that.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from compactor.app.sources import SnapshotSource
from compactor.errors import CompactorError
from compactor.settings import Settings, load_settings, parse_shape

NO_INPUT = "no input: give --snapshot FILE, --example, or --kubeconfig/--context/--in-cluster"
TWO_INPUTS = "choose one input: --snapshot, --example, or a live cluster (--kubeconfig/--context/--in-cluster)"


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

    @property
    def live(self) -> bool:
        """Whether the input is a live cluster (kubeconfig, context or in-cluster) rather than a snapshot."""
        return self.source.live

    def input(self) -> SnapshotSource:
        """The input, or the ``CompactorError`` saying why the options do not name exactly one."""
        if self.source_problem is not None:
            raise CompactorError(self.source_problem)
        return self.source


def is_live(args: argparse.Namespace) -> bool:
    """Whether the options name a live cluster (kubeconfig, context or in-cluster) rather than a snapshot."""
    return bool(
        getattr(args, "kubeconfig", None) or getattr(args, "context", None) or getattr(args, "in_cluster", False)
    )


def settings_from_args(args: argparse.Namespace, planner: dict[str, Any] | None = None) -> Settings:
    """The settings: ``--config``, the environment, ``--shape``/``--pool-label``, then ``planner`` (field -> value) on top."""
    overrides: dict[str, dict[str, object]] = {}
    if getattr(args, "shape", None):
        for text in args.shape:
            try:
                parse_shape(text)
            except ValueError as exc:
                raise CompactorError(f"--shape {text!r}: {exc}") from None
        overrides.setdefault("metrics", {})["reference_shapes"] = list(args.shape)
    if getattr(args, "pool_label", None):
        overrides.setdefault("metrics", {})["pool_label"] = args.pool_label
    settings = load_settings(getattr(args, "config", None), overrides)
    if planner:
        settings = settings.model_copy(update={"planner": settings.planner.model_copy(update=planner)})
    return settings


def source_from_args(args: argparse.Namespace) -> tuple[SnapshotSource, str | None]:
    """The input the options name, and why they name none or several (None when they name one)."""
    snapshot, example = getattr(args, "snapshot", None), getattr(args, "example", False)
    chosen = sum(bool(x) for x in (snapshot, example, is_live(args)))
    problem = TWO_INPUTS if chosen > 1 else NO_INPUT if chosen == 0 else None
    source = SnapshotSource(
        files=tuple(snapshot or ()),
        example=bool(example),
        kubeconfig=getattr(args, "kubeconfig", None),
        context=getattr(args, "context", None),
        live=is_live(args),
        in_cluster=bool(getattr(args, "in_cluster", False)),
        allow_empty=bool(getattr(args, "allow_empty", False)),
    )
    return source, problem


def from_args(args: argparse.Namespace, command: str, *, settings: Settings | None = None) -> Invocation:
    """The invocation of the command-line command ``command``; ``settings`` when the command loaded them already (with
    its overrides)."""
    source, problem = source_from_args(args)
    return Invocation(
        command=command,
        settings=settings if settings is not None else settings_from_args(args),
        source=source,
        source_problem=problem,
        dry_run=bool(getattr(args, "dry_run", False)),
        server_dry_run=bool(getattr(args, "server_dry_run", False)),
        output=str(getattr(args, "output", "text") or "text"),
        verbose=bool(getattr(args, "verbose", False)),
        log_format=str(getattr(args, "log_format", "text") or "text"),
    )


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

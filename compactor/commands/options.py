"""The options several commands share (the input: snapshot files, the example, a live cluster; the config; logging),
and the ``Invocation`` they make: the settings with the command's overrides, the one input, the run's switches."""

from __future__ import annotations

import argparse
import logging
import os
from typing import Any

from compactor.app.invocation import Invocation
from compactor.app.sources import SnapshotSource
from compactor.errors import CompactorError
from compactor.settings.origins import Settings, load_settings
from compactor.settings.shape_syntax import parse_shape
from compactor.settings.shipped import unlike_shipped

log = logging.getLogger("compactor.commands")

NO_INPUT = "no input: give --snapshot FILE, --example, or --kubeconfig/--context/--in-cluster (or set $KUBECONFIG)"
TWO_INPUTS = "choose one input: --snapshot, --example, or a live cluster (--kubeconfig/--context/--in-cluster)"


def add_source_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("input (one of)")
    group.add_argument(
        "--snapshot",
        nargs="+",
        metavar="FILE",
        help="kubectl get nodes,pods,pdb,pv,pvc -A -o json|yaml output ('-' = stdin)",
    )
    group.add_argument("--example", action="store_true", help="the bundled example cluster (no Kubernetes needed)")
    group.add_argument("--kubeconfig", metavar="PATH", help="read the live cluster through this kubeconfig")
    group.add_argument("--context", metavar="NAME", help="kubeconfig context of the live cluster")
    group.add_argument("--in-cluster", action="store_true", help="read the live cluster with the pod's service account")
    parser.add_argument(
        "--allow-empty", action="store_true", help="accept input without Node objects (otherwise an error)"
    )


def add_common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", help="YAML settings file (see config/compactor.yaml)")
    parser.add_argument("--log-format", choices=("text", "json"), default="text")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")


def is_live(args: argparse.Namespace) -> bool:
    """Whether the options name a live cluster (kubeconfig, context or in-cluster) rather than a snapshot; with no input
    named at all, ``$KUBECONFIG`` set names its cluster, as kubectl reads it (issue 45)."""
    named = getattr(args, "kubeconfig", None) or getattr(args, "context", None) or getattr(args, "in_cluster", False)
    return bool(named) or by_kubeconfig_variable(args)


def by_kubeconfig_variable(args: argparse.Namespace) -> bool:
    """No input named (no snapshot, example, kubeconfig, context or in-cluster) and ``$KUBECONFIG`` set."""
    named = (
        getattr(args, "snapshot", None)
        or getattr(args, "example", False)
        or getattr(args, "kubeconfig", None)
        or getattr(args, "context", None)
        or getattr(args, "in_cluster", False)
    )
    return not named and bool(os.environ.get("KUBECONFIG"))


def settings_from_args(args: argparse.Namespace, on_top: dict[str, dict[str, Any]] | None = None) -> Settings:
    """The settings: ``--config``, the environment, ``--shape``/``--pool-label``, then ``on_top`` (group -> field ->
    value: a command's own flags, checked by the command)."""
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
    for notice in settings.notices:  # keys of the old layout, read at their new places
        log.warning(notice)
    for group, values in (on_top or {}).items():
        settings = settings.model_copy(update={group: getattr(settings, group).model_copy(update=values)})
    return settings


def source_from_args(args: argparse.Namespace) -> tuple[SnapshotSource, str | None]:
    """The input the options name, and why they name none or several (None when they name one)."""
    snapshot, example = getattr(args, "snapshot", None), getattr(args, "example", False)
    chosen = sum(bool(x) for x in (snapshot, example, is_live(args)))
    problem = TWO_INPUTS if chosen > 1 else NO_INPUT if chosen == 0 else None
    if by_kubeconfig_variable(args):
        log.info(f"reading the cluster of $KUBECONFIG ({os.environ['KUBECONFIG']}, its current context)")
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
    settings = settings if settings is not None else settings_from_args(args)
    looks_only = bool(getattr(args, "dry_run", False)) or bool(getattr(args, "server_dry_run", False))
    acts = command in ("run", "apply") and source.live and not looks_only
    noted = note_the_defaults(args, settings, acts=acts)
    if noted and not acts:
        AT_THE_END.append(noted)
    return Invocation(
        command=command,
        settings=settings,
        source=source,
        source_problem=problem,
        dry_run=bool(getattr(args, "dry_run", False)),
        server_dry_run=bool(getattr(args, "server_dry_run", False)),
        output=str(getattr(args, "output", "text") or "text"),
        verbose=bool(getattr(args, "verbose", False)),
        log_format=str(getattr(args, "log_format", "text") or "text"),
        unlike_shipped=noted[1] if noted and acts else None,  # warned by the run once it is sure to act
    )


def note_the_defaults(args: argparse.Namespace, settings: Settings, *, acts: bool) -> tuple[int, str] | None:
    """Without ``--config`` the built-in defaults rule, and they are not what the manifests ship (``mode: apply``, no
    cooldowns, no breaker, no drain cap): a command that acts on a live cluster warns with each difference; the others
    say in one info line how many there are and where they are listed (issue 45). The level and line, or None."""
    if getattr(args, "config", None) or getattr(args, "report_only", False):
        return None
    line = unlike_shipped(settings, each=acts)
    return (logging.WARNING if acts else logging.INFO, line) if line else None


AT_THE_END: list[tuple[int, str]] = []  # said once the command ended without an error, which stays one line


def said_at_the_end() -> None:
    """Log what a command noted for its end (``AT_THE_END`` is emptied at each command's start: ``cli.main``)."""
    while AT_THE_END:
        level, line = AT_THE_END.pop(0)
        log.log(level, line)

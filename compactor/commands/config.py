"""``compactor config validate FILE`` and ``compactor config show``: check a config (or the ConfigMap holding it) before
applying it, and print the settings a run would use after the file and the environment."""

from __future__ import annotations

import argparse
import json
import sys

import yaml

from compactor.errors import EXIT_OK, CompactorError
from compactor.settings.origins import Settings, load_settings
from compactor.settings.shipped import differences


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    config = commands.add_parser("config", help="validate a config file or ConfigMap; show the effective settings")
    actions = config.add_subparsers(dest="action", required=True, metavar="ACTION")
    validate = actions.add_parser(
        "validate", help="check FILE (settings YAML, or a ConfigMap with a compactor.yaml key)"
    )
    validate.add_argument("file", metavar="FILE", nargs="?")
    # as every other command names its config (issue 45: `validate --config FILE` was refused)
    validate.add_argument("--config", metavar="FILE", dest="config_file", help="the same as FILE")
    show = actions.add_parser(
        "show", help="the effective settings: defaults, then --config FILE, then COMPACTOR_* variables"
    )
    show.add_argument("--config", metavar="FILE", help="settings YAML (or a ConfigMap holding it)")
    show.add_argument("--output", "-o", choices=("yaml", "json"), default="yaml")
    config.set_defaults(handler=cmd_config)


def cmd_config(args: argparse.Namespace) -> int:
    if args.action == "validate":
        if bool(args.file) == bool(args.config_file):
            raise CompactorError("config validate: name one file, as FILE or --config FILE")
        args.file = args.file or args.config_file
        settings = load_settings(args.file)  # a settings YAML, or the ConfigMap manifest mounting one
        changed = _differences(settings)
        sys.stdout.write(
            f"{args.file}: valid; mode {settings.mode}; {len(changed)} setting(s) differ from the defaults"
            f"{': ' + ', '.join(changed) if changed else ''}\n"
        )
        _warn(settings)
        return EXIT_OK
    settings = load_settings(args.config)
    _warn(settings)
    document = settings.model_dump(mode="json")
    sys.stdout.write(
        json.dumps(document, indent=2) + "\n" if args.output == "json" else yaml.safe_dump(document, sort_keys=False)
    )
    return EXIT_OK


def _warn(settings: Settings) -> None:
    """Keys of the old layout, each named with where it lives now (the run goes on: they are read)."""
    for notice in settings.notices:
        sys.stderr.write(f"compactor: warning: {notice}\n")


def _differences(settings: Settings) -> list[str]:
    """Dotted names of the settings that differ from the defaults."""
    return [key for key, _, _ in differences(settings, Settings())]

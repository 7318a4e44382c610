"""The shipped config (manifests/base/config.yaml, packaged as compactor/data/shipped-config.yaml) beside the built-in
defaults: a command run without ``--config`` says where the two differ (issue 45: the bare CLI acted with every safety
net the manifests ship turned off, and said nothing)."""

from __future__ import annotations

from importlib import resources
from typing import Any

from compactor.settings.origins import Settings, load_settings

SHIPPED_FILE = "shipped-config.yaml"
SHIPPED_IN_REPOSITORY = "manifests/base/config.yaml"


def shipped_settings() -> Settings:
    """The shipped config with the environment's ``COMPACTOR_*`` over it, as ``--config`` would read it."""
    with resources.as_file(resources.files("compactor.data") / SHIPPED_FILE) as path:
        return load_settings(str(path))


def flat_settings(settings: Settings) -> dict[str, Any]:
    """Dotted name -> value (JSON form) of every setting."""

    def flat(value: Any, prefix: str = "") -> dict[str, Any]:
        if isinstance(value, dict):
            return {k: v for key, item in value.items() for k, v in flat(item, f"{prefix}{key}.").items()}
        return {prefix.rstrip("."): value}

    return flat(settings.model_dump(mode="json"))


def differences(settings: Settings, reference: Settings) -> list[tuple[str, Any, Any]]:
    """(dotted name, value here, value in ``reference``) for each setting that differs, sorted by name."""
    now, there = flat_settings(settings), flat_settings(reference)
    changed = [(key, value, there.get(key)) for key, value in now.items() if there.get(key) != value]
    return sorted(changed, key=lambda change: (change[0] != "mode", change[0]))  # what a run may do first


def unlike_shipped(settings: Settings, *, each: bool) -> str | None:
    """One line: how ``settings`` (the defaults and the environment, no ``--config``) differ from the shipped config,
    ``each`` difference with both values or only how many; None when they do not."""
    changed = differences(settings, shipped_settings())
    if not changed:
        return None
    if not each:
        return (
            f"no --config: the built-in defaults, which differ from the shipped config in {len(changed)} setting(s) "
            f"(`compactor config validate {SHIPPED_IN_REPOSITORY}` names them)"
        )
    listed = ", ".join(f"{key} {_shown(value)} (shipped: {_shown(there)})" for key, value, there in changed)
    return (
        f"no --config: the built-in defaults differ from the shipped config in {len(changed)} setting(s): {listed}; "
        f"--config {SHIPPED_IN_REPOSITORY} runs as the manifests install it"
    )


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)

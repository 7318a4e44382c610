"""The ``COMPACTOR_*`` environment variables: which name a setting (a typo is an error, with the closest name), and the
sources that read them and the file with the keys of the layout before 0.2 at their new places (relocated.py)."""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from compactor.errors import ConfigError
from compactor.settings.relocated import RELOCATED, RETIRED_GROUPS, RelocationError, relocate

ENV_PREFIX = "COMPACTOR_"


def relocated_env_names() -> dict[str, str]:
    """``COMPACTOR_PLANNER__MAX_MOVES`` -> ``caps.max_moves``: the variables of the layout before 0.2."""
    return {variable(old): old for old in RELOCATED}


RETIRED_GROUP_VARIABLES = [f"{ENV_PREFIX}{group.upper()}" for group in RETIRED_GROUPS]


def _env_value(text: str) -> Any:
    """As pydantic-settings reads a variable: JSON for a list or mapping, the text otherwise."""
    if text.strip()[:1] in ("[", "{"):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def old_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    """The settings of the layout before 0.2 in ``environ``, as the document they wrote (``{"planner": {...}}``)."""
    data: dict[str, Any] = {}
    for old, (value, _) in old_settings_given(environ).items():
        group, name = old.split(".")
        data.setdefault(group, {})[name] = value
    return data


def old_settings_given(environ: Mapping[str, str]) -> dict[str, tuple[Any, str]]:
    """Each old dotted key set in ``environ`` -> its value and how it was given, for the notice to name what the user
    set: a variable of its own (``COMPACTOR_PLANNER__MAX_MOVES``) or a key of a group's JSON (``COMPACTOR_PLANNER``'s
    ``max_moves``; also ``COMPACTOR_EXECUTOR``'s ``max_run_seconds``, a group still read whose key moved)."""
    names = relocated_env_names()
    groups = {old.split(".")[0] for old in RELOCATED}
    given: dict[str, tuple[Any, str]] = {}
    for key, value in environ.items():
        upper = key.upper()
        group_name = upper.removeprefix(ENV_PREFIX).lower()
        if upper.startswith(ENV_PREFIX) and group_name in groups and "__" not in upper:  # a whole group, as JSON
            group = _env_value(value)
            if not isinstance(group, dict):
                if upper in RETIRED_GROUP_VARIABLES:
                    raise ConfigError(f"environment: {key}: expected a JSON mapping of settings, got {value!r}")
                continue  # a group still read: validation names what is wrong with it
            for name, setting in group.items():
                if f"{group_name}.{name}" in RELOCATED or upper in RETIRED_GROUP_VARIABLES:
                    given[f"{group_name}.{name}"] = (setting, f'{upper}\'s "{name}"')
            continue
        old = names.get(upper)
        if old is not None:
            given[old] = (_env_value(value), upper)
    return given


class Relocated(PydanticBaseSettingsSource):
    """A source of settings (the file: init kwargs) with its keys of the layout before 0.2 at their new places."""

    def __init__(self, settings_cls: type[BaseSettings], source: PydanticBaseSettingsSource) -> None:
        super().__init__(settings_cls)
        self.source = source

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # __call__ reads the source whole

    def read(self) -> dict[str, Any]:
        return dict(self.source())

    def __call__(self) -> dict[str, Any]:
        relocated: dict[str, Any] = relocate(self.read())[0]
        return relocated


class Environment(Relocated):
    """The ``COMPACTOR_*`` variables, relocated. pydantic-settings reads those of the groups that exist, old keys
    included (``COMPACTOR_EXECUTOR__STEERING``); those of a group that is gone (``COMPACTOR_PLANNER__*``, or
    ``COMPACTOR_PLANNER`` as JSON) it no longer reads, so they are added here."""

    def read(self) -> dict[str, Any]:
        old = old_environment(os.environ)
        return {**self.source(), **{group: old[group] for group in RETIRED_GROUPS if group in old}}

    def __call__(self) -> dict[str, Any]:
        try:
            return super().__call__()
        except RelocationError as exc:
            raise ConfigError(f"environment: {exc}") from None


def setting_env_names(model: type[BaseModel], prefix: str = ENV_PREFIX) -> list[str]:
    """Every ``COMPACTOR_*`` variable that names a setting: groups (as JSON) and each field, nested with ``__``."""
    names = []
    for name, info in model.model_fields.items():
        env = f"{prefix}{name.upper()}"
        names.append(env)
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
            names += setting_env_names(info.annotation, env + "__")
    return names


def _current_env_name(name: str) -> str:
    """``PLANNER__MAX_MOVES`` -> ``CAPS__MAX_MOVES``: a variable named as the settings are now."""
    old = relocated_env_names().get(f"{ENV_PREFIX}{name}")
    return variable(RELOCATED[old]).removeprefix(ENV_PREFIX) if old else name


def check_environment(environ: Mapping[str, str], document: type[BaseModel]) -> None:
    """A ``COMPACTOR_*`` variable that names no setting is an error: pydantic-settings would ignore it, and a typo
    (``COMPACTOR_PLANER__MAX_MOVES``) would silently leave the default in force."""
    old = [*relocated_env_names(), *RETIRED_GROUP_VARIABLES]
    valid = [name.removeprefix(ENV_PREFIX) for name in [*setting_env_names(document), *old]]
    for key in sorted(environ):
        name = key.upper().removeprefix(ENV_PREFIX)
        if key.upper().startswith(ENV_PREFIX) and name not in valid:
            closest = [_current_env_name(c) for c in difflib.get_close_matches(name, valid, n=1, cutoff=0.75)]
            hint = (
                f"; did you mean {ENV_PREFIX}{closest[0]}?"
                if closest
                else f"; settings are {ENV_PREFIX}<GROUP>__<FIELD> as in config/compactor.yaml"
            )
            raise ConfigError(f"environment: {key} names no setting{hint}")


def variable(key: str) -> str:
    """``caps.max_moves`` -> ``COMPACTOR_CAPS__MAX_MOVES``."""
    return f"{ENV_PREFIX}{key.replace('.', '__').upper()}"

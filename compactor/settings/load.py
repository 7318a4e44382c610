"""Where the settings come from: a YAML file (or the ConfigMap manifest that mounts one) with the command line's
overrides merged in, and ``COMPACTOR_*`` environment variables over both (``COMPACTOR_PLANNER__TIME_LIMIT_SECONDS=5``).
``Settings`` is the whole document (``mode`` and the groups). Every failure is one ``ConfigError`` naming where."""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from compactor.errors import ConfigError
from compactor.model.yamlsafe import YamlRefused, describe_yaml_error, load_yaml
from compactor.settings.disruption import DisruptionSettings
from compactor.settings.dra import DraSettings
from compactor.settings.executor import ExecutorSettings
from compactor.settings.leader_election import LeaderElectionSettings
from compactor.settings.metrics import MetricsSettings
from compactor.settings.mig import MigSettings
from compactor.settings.planner import PlannerSettings


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="COMPACTOR_", env_nested_delimiter="__", extra="forbid", frozen=True)

    mode: Literal["report", "plan", "apply"] = Field(
        "apply",
        description="what `run --once` and the controller may do: report (measure and export figures only), plan "
        "(plan and dry-run every cycle: full reports, nothing changed) or apply (act). --dry-run and "
        "--report-only only ever make a run safer; `apply --plan` refuses to act unless apply. The "
        "shipped manifests set plan",
    )
    # Frozen groups, so one shared default instance is safe.
    metrics: MetricsSettings = MetricsSettings()
    planner: PlannerSettings = PlannerSettings()
    executor: ExecutorSettings = ExecutorSettings()
    mig: MigSettings = MigSettings()
    dra: DraSettings = DraSettings()
    leader_election: LeaderElectionSettings = LeaderElectionSettings()
    disruption: DisruptionSettings = DisruptionSettings()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Environment overrides the file (passed as init kwargs).
        return (env_settings, init_settings)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "config"
    message = str(err["msg"]).removeprefix("Value error, ")
    if message.startswith(f"{where}."):  # a group's own check that names the field itself
        return message
    return f"{where}: {err['msg']}"


ENV_PREFIX = "COMPACTOR_"


def _read_yaml(where: str, read: Callable[..., str] | None) -> dict[str, Any]:
    """A YAML mapping read by ``read``; every failure a one-line ``ConfigError`` naming ``where``."""
    if read is None:
        raise ConfigError(f"{where}: no such file")
    try:
        loaded = load_yaml(read(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:  # a directory, no permission, not UTF-8
        raise ConfigError(f"{where}: cannot read: {exc}") from None
    except YamlRefused as exc:
        raise ConfigError(f"{where}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: {describe_yaml_error(exc)}") from None
    if loaded is not None and not isinstance(loaded, dict):
        raise ConfigError(f"{where}: expected a mapping at the top level")
    return loaded or {}


def setting_env_names(model: type[BaseModel] = Settings, prefix: str = ENV_PREFIX) -> list[str]:
    """Every ``COMPACTOR_*`` variable that names a setting: groups (as JSON) and each field, nested with ``__``."""
    names = []
    for name, info in model.model_fields.items():
        env = f"{prefix}{name.upper()}"
        names.append(env)
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
            names += setting_env_names(info.annotation, env + "__")
    return names


def check_environment(environ: Mapping[str, str]) -> None:
    """A ``COMPACTOR_*`` variable that names no setting is an error: pydantic-settings would ignore it, and a typo
    (``COMPACTOR_PLANER__MAX_MOVES``) would silently leave the default in force."""
    valid = [name.removeprefix(ENV_PREFIX) for name in setting_env_names()]
    for key in sorted(environ):
        name = key.upper().removeprefix(ENV_PREFIX)
        if key.upper().startswith(ENV_PREFIX) and name not in valid:
            closest = difflib.get_close_matches(name, valid, n=1, cutoff=0.75)
            hint = (
                f"; did you mean {ENV_PREFIX}{closest[0]}?"
                if closest
                else f"; settings are {ENV_PREFIX}<GROUP>__<FIELD> as in config/compactor.yaml"
            )
            raise ConfigError(f"environment: {key} names no setting{hint}")


CONFIG_MAP_KEY = "compactor.yaml"  # the key of the shipped ConfigMap, mounted at /etc/gpu-compactor/compactor.yaml


def load_settings(path: str | None = None, overrides: dict[str, Any] | None = None) -> Settings:
    """Settings from an optional YAML file (or the ConfigMap manifest that mounts one: what is deployed), the environment
    and CLI overrides; ``ConfigError`` names file and field."""
    data: dict[str, Any] = {}
    source = path or "environment"
    if path:
        data = _read_yaml(path, Path(path).read_text if Path(path).exists() else None)
        if data.get("kind") == "ConfigMap":
            source = f"{path}: ConfigMap data.{CONFIG_MAP_KEY}"
            inner = (data.get("data") or {}).get(CONFIG_MAP_KEY) if isinstance(data.get("data"), dict) else None
            if not isinstance(inner, str):
                name = (data.get("metadata") or {}).get("name", "") if isinstance(data.get("metadata"), dict) else ""
                raise ConfigError(
                    f"{path}: ConfigMap {name}: data.{CONFIG_MAP_KEY}: missing (the key gpu-compactor mounts)"
                )
            data = _read_yaml(source, lambda encoding: inner)
    for group, values in (overrides or {}).items():
        data.setdefault(group, {}).update(values)
    check_environment(os.environ)
    try:
        return Settings(**data)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_first_error(exc)}") from None

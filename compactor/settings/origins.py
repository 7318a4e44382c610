"""Where the settings come from: a YAML file (or the ConfigMap manifest that mounts one) with the command line's
overrides merged in, and ``COMPACTOR_*`` environment variables over both (``COMPACTOR_SOLVER__TIME_LIMIT_SECONDS=5``).
``Settings`` is the whole document (``mode`` and the groups, in the order config/compactor.yaml shows them). Keys of
the layout before 0.2 are read where they live now (relocated.py). Every failure is one ``ConfigError`` naming where."""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, PrivateAttr, ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from compactor.errors import ConfigError
from compactor.model.yamlsafe import YamlRefused, describe_yaml_error, load_yaml
from compactor.settings.aims import AimsSettings
from compactor.settings.bundles import PlannerSettings, RunSettings
from compactor.settings.caps import CapsSettings
from compactor.settings.disruption import DisruptionSettings
from compactor.settings.dra import DraSettings
from compactor.settings.environment import (
    Environment,
    Relocated,
    check_environment,
    old_environment,
    old_settings_given,
    variable,
)
from compactor.settings.execution import ExecutorSettings
from compactor.settings.leader_election import LeaderElectionSettings
from compactor.settings.metrics import MetricsSettings
from compactor.settings.mig import MigSettings
from compactor.settings.movable import MovableSettings
from compactor.settings.relocated import RelocationError, notice, relocate
from compactor.settings.solving import SolverSettings
from compactor.settings.steering import SteeringSettings


class Settings(BaseSettings):
    # env_parse_none_str: "null" in a variable is YAML's null, "no cap" (issue 45: it could not be said there)
    model_config = SettingsConfigDict(
        env_prefix="COMPACTOR_", env_nested_delimiter="__", extra="forbid", frozen=True, env_parse_none_str="null"
    )

    mode: Literal["report", "plan", "apply"] = Field(
        "apply",
        description="what `run --once` and the controller may do: report (measure and export figures only), plan "
        "(plan and dry-run every cycle: full reports, nothing changed) or apply (act). --dry-run and "
        "--report-only only ever make a run safer; `apply --plan` refuses to act unless apply. The "
        "shipped manifests set plan",
    )
    _notices: tuple[str, ...] = PrivateAttr(default=())
    # One group per question an operator asks; frozen, so one shared default instance is safe.
    movable: MovableSettings = MovableSettings()
    aims: AimsSettings = AimsSettings()
    solver: SolverSettings = SolverSettings()
    caps: CapsSettings = CapsSettings()
    disruption: DisruptionSettings = DisruptionSettings()
    executor: ExecutorSettings = ExecutorSettings()
    steering: SteeringSettings = SteeringSettings()
    mig: MigSettings = MigSettings()
    dra: DraSettings = DraSettings()
    leader_election: LeaderElectionSettings = LeaderElectionSettings()
    metrics: MetricsSettings = MetricsSettings()

    @property
    def for_planner(self) -> PlannerSettings:
        return PlannerSettings(movable=self.movable, aims=self.aims, solver=self.solver, caps=self.caps, mig=self.mig)

    @property
    def for_executor(self) -> RunSettings:
        return RunSettings(executor=self.executor, steering=self.steering, caps=self.caps, mig=self.mig)

    def noting(self, notices: list[str]) -> Settings:
        """These settings, remembering what reading them should tell the operator (``notices``)."""
        self._notices = tuple(notices)
        return self

    @property
    def notices(self) -> tuple[str, ...]:
        """What reading these settings should tell the operator: keys of the old layout read at their new places."""
        return self._notices

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Environment overrides the file (passed as init kwargs), each relocated on its own: a variable of the old
        # layout overrides the file's key at its new place; an old name and its new one in one source is an error.
        return (Environment(settings_cls, env_settings), Relocated(settings_cls, init_settings))


def _first_error(exc: ValidationError, moved: list[tuple[str, str]]) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    message = str(err["msg"]).removeprefix("Value error, ")
    if not where or message.startswith(f"{where}."):  # a check of the document or a group that names the field
        return message
    for old, new in moved:  # the key as the reader wrote it, and where it lives now
        if where == new or where.startswith(f"{new}."):
            where = f"{old} (now {where})"
    return f"{where}: {err['msg']}{_did_you_mean(err)}"


def _did_you_mean(err: Any) -> str:
    """For a key that names no setting, the closest one of its group (issue 45: the environment said it, YAML did not)."""
    if err.get("type") != "extra_forbidden" or not err["loc"]:
        return ""
    *group, key = (str(p) for p in err["loc"])
    model: Any = Settings
    for name in group:
        field = model.model_fields.get(name)
        model = field.annotation if field is not None else None
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return ""
    closest = difflib.get_close_matches(key, list(model.model_fields), n=1, cutoff=0.75)
    return f"; did you mean {'.'.join([*group, closest[0]])}?" if closest else ""


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
    check_environment(os.environ, Settings)
    try:  # what moved, for the notices and errors; Settings relocates file and environment alike
        in_file, in_environment = relocate(data)[1], relocate(old_environment(os.environ))[1]
        given = old_settings_given(os.environ)
        settings = Settings(**data)
    except RelocationError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_first_error(exc, in_file + in_environment)}") from None
    return settings.noting(
        [f"{source}: {notice(old, new)}" for old, new in in_file]
        + [f"environment: {notice(given[old][1], variable(new))}" for old, new in in_environment]
    )

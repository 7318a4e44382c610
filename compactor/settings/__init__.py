"""Configuration: a YAML file plus ``COMPACTOR_*`` environment variables, validated up front.

Environment variables override the file (``COMPACTOR_PLANNER__TIME_LIMIT_SECONDS=5``).
Unknown keys are errors, so a typo never silently falls back to a default.

One module per question an operator asks of the settings; a group whose fields answer several questions (``planner``,
``executor``) is laid out in its own module, in the YAML's order, from the field specifications of those questions:

* which pods may move, and where: ``movable``
* what the plan aims at: ``aims``; what a move costs: ``cost``; how a shape is written: ``shapes``
* how the solver searches: ``solver``
* the caps on one plan and the limits all runs share (``disruption``): ``disruption``
* when runs may act, the disruption calendar: ``windows``
* how the executor carries a plan out: ``executor``; how replacements are steered: ``steering``
* MIG re-cuts and layouts: ``mig``; DRA drivers: ``dra``
* how controller replicas take turns: ``leader_election``
* what the figures are measured against, where they go: ``metrics``
* how long one run may take: ``duration``
* where the settings come from (file, ConfigMap, environment) and the whole document: ``load``

Import from here (``from compactor.settings import PlannerSettings``): the names below are the package's interface.
"""

from __future__ import annotations

from compactor.settings.cost import MoveCostSettings
from compactor.settings.disruption import DisruptionSettings
from compactor.settings.dra import DraDriverSettings, DraSettings
from compactor.settings.duration import worst_case_run_seconds
from compactor.settings.executor import ExecutorSettings
from compactor.settings.leader_election import (
    DEFAULT_LEASE_SECONDS,
    DEFAULT_RENEW_DEADLINE_SECONDS,
    DEFAULT_WRITE_TIMEOUT_SECONDS,
    LeaderElectionSettings,
    lease_timing_problem,
)
from compactor.settings.load import (
    CONFIG_MAP_KEY,
    ENV_PREFIX,
    Settings,
    check_environment,
    load_settings,
    setting_env_names,
)
from compactor.settings.metrics import MetricsSettings
from compactor.settings.mig import MigSettings
from compactor.settings.movable import SYSTEM_CRITICAL_PRIORITY
from compactor.settings.planner import PlannerSettings
from compactor.settings.shapes import parse_shape
from compactor.settings.windows import WindowSettings

__all__ = [
    "CONFIG_MAP_KEY",
    "DEFAULT_LEASE_SECONDS",
    "DEFAULT_RENEW_DEADLINE_SECONDS",
    "DEFAULT_WRITE_TIMEOUT_SECONDS",
    "ENV_PREFIX",
    "SYSTEM_CRITICAL_PRIORITY",
    "DisruptionSettings",
    "DraDriverSettings",
    "DraSettings",
    "ExecutorSettings",
    "LeaderElectionSettings",
    "MetricsSettings",
    "MigSettings",
    "MoveCostSettings",
    "PlannerSettings",
    "Settings",
    "WindowSettings",
    "check_environment",
    "lease_timing_problem",
    "load_settings",
    "parse_shape",
    "setting_env_names",
    "worst_case_run_seconds",
]

"""Configuration: a YAML file plus ``COMPACTOR_*`` environment variables, validated up front.

Environment variables override the file (``COMPACTOR_SOLVER__TIME_LIMIT_SECONDS=5``).
Unknown keys are errors, so a typo never silently falls back to a default.

One module, and one YAML group, per question an operator asks of the settings:

* which pods may move, and where: ``movable``
* what the plan aims at: ``aims``; what a move costs: ``cost``; how a shape is written: ``shapes``
* how the solver searches: ``solver``
* every cap (moves per plan, node, namespace, workload, pool, hour and day; evictions per run): ``caps``
* the disruption calendar (windows: ``windows``), cooldowns, oscillation, the circuit breaker: ``disruption``
* how the executor carries a plan out: ``executor``; how replacements are steered: ``steering``
* MIG re-cuts and layouts: ``mig``; DRA drivers: ``dra``
* how controller replicas take turns: ``leader_election``
* what the figures are measured against, where they go: ``metrics``
* how long one run may take: ``duration``
* where the settings come from (file, ConfigMap) and the whole document: ``load``; the ``COMPACTOR_*`` variables:
  ``environment``; keys that moved in 0.2 and where they live now: ``relocated``
* the groups each component reads (``PlannerSettings``, ``RunSettings``): ``bundles``

Import from here (``from compactor.settings import PlannerSettings``): the names below are the package's interface.
"""

from __future__ import annotations

from compactor.settings.aims import AimsSettings
from compactor.settings.bundles import PlannerSettings, RunSettings
from compactor.settings.caps import CapsSettings
from compactor.settings.cost import MoveCostSettings
from compactor.settings.disruption import DisruptionSettings
from compactor.settings.disruption_windows import WindowSettings
from compactor.settings.dra import DraDriverSettings, DraSettings
from compactor.settings.duration import worst_case_run_seconds
from compactor.settings.environment import ENV_PREFIX
from compactor.settings.execution import ExecutorSettings
from compactor.settings.leader_election import (
    DEFAULT_LEASE_SECONDS,
    DEFAULT_RENEW_DEADLINE_SECONDS,
    DEFAULT_WRITE_TIMEOUT_SECONDS,
    LeaderElectionSettings,
    lease_timing_problem,
)
from compactor.settings.metrics import MetricsSettings
from compactor.settings.mig import MigSettings
from compactor.settings.movable import SYSTEM_CRITICAL_PRIORITY, MovableSettings
from compactor.settings.origins import CONFIG_MAP_KEY, Settings, load_settings
from compactor.settings.relocated import RELOCATED
from compactor.settings.shape_syntax import parse_shape
from compactor.settings.solving import SolverSettings
from compactor.settings.steering import SteeringSettings

__all__ = [
    "CONFIG_MAP_KEY",
    "DEFAULT_LEASE_SECONDS",
    "DEFAULT_RENEW_DEADLINE_SECONDS",
    "DEFAULT_WRITE_TIMEOUT_SECONDS",
    "ENV_PREFIX",
    "RELOCATED",
    "SYSTEM_CRITICAL_PRIORITY",
    "AimsSettings",
    "CapsSettings",
    "DisruptionSettings",
    "DraDriverSettings",
    "DraSettings",
    "ExecutorSettings",
    "LeaderElectionSettings",
    "MetricsSettings",
    "MigSettings",
    "MovableSettings",
    "MoveCostSettings",
    "PlannerSettings",
    "RunSettings",
    "Settings",
    "SolverSettings",
    "SteeringSettings",
    "WindowSettings",
    "lease_timing_problem",
    "load_settings",
    "parse_shape",
    "worst_case_run_seconds",
]

"""What each component is given: the groups it reads, gathered from the settings document in one place
(``Settings.for_planner``, ``Settings.for_executor``), so the planner never sees the executor's settings nor the
executor the solver's."""

from __future__ import annotations

from compactor.settings.aims import AimsSettings
from compactor.settings.base import Bundle
from compactor.settings.caps import CapsSettings
from compactor.settings.execution import ExecutorSettings
from compactor.settings.mig import MigSettings
from compactor.settings.movable import MovableSettings
from compactor.settings.solving import SolverSettings
from compactor.settings.steering import SteeringSettings


class PlannerSettings(Bundle):
    """What the planner reads: which pods may move, what the plan aims at, how the solver searches, the caps on a plan,
    MIG re-cuts."""

    movable: MovableSettings = MovableSettings()
    aims: AimsSettings = AimsSettings()
    solver: SolverSettings = SolverSettings()
    caps: CapsSettings = CapsSettings()
    mig: MigSettings = MigSettings()


class RunSettings(Bundle):
    """What the executor reads: how it carries a plan out, how replacements are steered, the caps on a run, MIG re-cuts."""

    executor: ExecutorSettings = ExecutorSettings()
    steering: SteeringSettings = SteeringSettings()
    caps: CapsSettings = CapsSettings()
    mig: MigSettings = MigSettings()

"""When runs may act: the disruption calendar (``disruption.windows``), each window a cron schedule read in a timezone
and held open for a while. A run outside every window changes nothing.

The one settings module that imports APScheduler (its cron parser, inside the validator): see the ``pure-core`` and
``apscheduler-for-schedules`` import contracts in pyproject.toml.
"""

from __future__ import annotations

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, model_validator

from compactor.settings.base import Group


class WindowSettings(Group):
    """A time a run may act: from each time ``schedule`` fires, in ``timezone``, for ``duration_minutes``."""

    schedule: str = Field(
        description="cron expression, 5 fields (minute hour day-of-month month day-of-week), e.g. '0 22 * * 1-5'"
    )
    duration_minutes: float = Field(gt=0, description="how long the window stays open after each start")
    timezone: str = Field(
        description="IANA timezone the schedule is read in, e.g. Europe/Paris or UTC (no default: say it)"
    )

    @model_validator(mode="after")
    def _valid(self) -> WindowSettings:
        from apscheduler.triggers.cron import CronTrigger

        try:
            zone = ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"timezone {self.timezone!r}: not an IANA timezone (e.g. Europe/Paris, UTC)") from None
        if len(self.schedule.split()) != 5:
            raise ValueError(
                f"schedule {self.schedule!r}: expected 5 cron fields (minute hour day-of-month month day-of-week)"
            )
        try:
            CronTrigger.from_crontab(self.schedule, timezone=zone)
        except ValueError as exc:
            raise ValueError(f"schedule {self.schedule!r}: {exc}") from None
        return self


WINDOWS: list[WindowSettings] = Field(
    default_factory=list,
    description="when runs may act; empty: any time. A run "
    "outside every window changes nothing and says when the next opens",
)

"""Disruption windows: when a run may act. Pure: the caller passes the time.

A window opens at each time its cron ``schedule`` fires, in its own IANA ``timezone`` (so a window at 01:30 Paris
time follows daylight saving), and stays open ``duration_minutes``. With no window configured a run may act at any
time; with some, only while one is open.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from apscheduler.triggers.cron import CronTrigger

from compactor.settings.disruption_windows import WindowSettings


@dataclass(frozen=True)
class WindowState:
    open: bool
    closes_at: datetime | None = None  # while open: when the window that is open closes (the latest, if several)
    next_opens_at: datetime | None = None  # while closed: when the next window opens
    why: str = ""  # one line for logs and reports


def _trigger(window: WindowSettings) -> CronTrigger:
    return CronTrigger.from_crontab(window.schedule, timezone=ZoneInfo(window.timezone))


def _open_until(window: WindowSettings, now: datetime) -> datetime | None:
    """When ``window`` closes if it is open at ``now``, else None: it is open when it fired at most its duration ago."""
    length = timedelta(minutes=window.duration_minutes)
    fired = _trigger(window).get_next_fire_time(None, now - length)
    return fired + length if fired is not None and fired <= now < fired + length else None


def window_state(windows: list[WindowSettings], now: datetime) -> WindowState:
    """Whether a run may act at ``now`` (timezone-aware) under ``windows``."""
    if not windows:
        return WindowState(True, why="no disruption window configured: a run may act at any time")
    closing = [until for w in windows if (until := _open_until(w, now)) is not None]
    if closing:
        until = max(closing)
        return WindowState(True, closes_at=until, why=f"inside a disruption window until {until.isoformat()}")
    upcoming = [(fire, w) for w in windows if (fire := _trigger(w).get_next_fire_time(None, now)) is not None]
    if not upcoming:
        return WindowState(False, why="outside the disruption windows, and none opens again")
    fire, window = min(upcoming, key=lambda pair: pair[0])
    return WindowState(
        False,
        next_opens_at=fire,
        why=f"outside the disruption windows: the next opens at {fire.isoformat()} "
        f"({window.schedule!r} in {window.timezone}, for {window.duration_minutes:g} min)",
    )

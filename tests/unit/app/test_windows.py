"""Disruption windows (issue 15, item 1): open and closed across midnight and across daylight saving, in the window's
own timezone; a bad schedule or timezone is a one-line config error naming the key."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from compactor.app.windows import window_state
from compactor.errors import ConfigError
from compactor.settings.disruption_windows import WindowSettings
from compactor.settings.origins import Settings, load_settings

# 22:00-02:00 local
NIGHTLY_PARIS = WindowSettings(schedule="0 22 * * *", duration_minutes=240, timezone="Europe/Paris")


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def test_without_windows_a_run_may_act_at_any_time() -> None:
    assert window_state([], at("2026-12-04T12:00:00+00:00")).open


@pytest.mark.parametrize(
    ("when", "open_"),
    [
        ("2026-12-04T21:59:00+01:00", False),
        ("2026-12-04T22:00:00+01:00", True),
        ("2026-12-04T23:59:00+01:00", True),
        ("2026-12-05T01:59:00+01:00", True),  # across midnight
        ("2026-12-05T02:00:00+01:00", False),  # closed at the end of its 240 minutes
    ],
    ids=["before", "opening", "before-midnight", "after-midnight", "closing"],
)
def test_a_nightly_window_is_open_from_its_start_for_its_duration_across_midnight(when: str, open_: bool) -> None:
    state = window_state([NIGHTLY_PARIS], at(when))
    assert state.open is open_
    if open_:
        assert state.closes_at is not None and state.closes_at.isoformat().endswith("02:00:00+01:00")
    else:
        assert state.next_opens_at is not None and state.next_opens_at.hour == 22 and "the next opens at" in state.why


def test_a_window_keeps_local_time_across_daylight_saving() -> None:
    window = WindowSettings(schedule="30 1 * * *", duration_minutes=60, timezone="Europe/Paris")  # 01:30-02:30 local
    # Paris moves to summer time on 2026-03-29: 01:30 local is 00:30 UTC before and 23:30 UTC (the day before) after.
    assert window_state([window], at("2026-03-28T00:45:00+00:00")).open
    assert not window_state([window], at("2026-03-29T23:15:00+00:00")).open
    assert window_state([window], at("2026-03-29T23:45:00+00:00")).open  # 01:45 CEST on the 30th
    assert not window_state([window], at("2026-03-30T00:45:00+00:00")).open  # 02:45 CEST: closed


def test_of_several_windows_the_open_one_counts_and_the_next_one_is_the_earliest() -> None:
    weekdays_noon = WindowSettings(schedule="0 12 * * 1-5", duration_minutes=30, timezone="UTC")
    state = window_state([NIGHTLY_PARIS, weekdays_noon], at("2026-12-04T11:00:00+00:00"))  # a Friday
    assert not state.open and state.next_opens_at == at("2026-12-04T12:00:00+00:00")
    assert window_state([NIGHTLY_PARIS, weekdays_noon], at("2026-12-04T12:10:00+00:00")).open


@pytest.mark.parametrize(
    ("window", "message"),
    [
        ({"schedule": "0 22 * *", "duration_minutes": 60, "timezone": "UTC"}, "expected 5 cron fields"),
        ({"schedule": "0 25 * * *", "duration_minutes": 60, "timezone": "UTC"}, "schedule '0 25 * * *'"),
        ({"schedule": "0 22 * * *", "duration_minutes": 60, "timezone": "Europe/Pariss"}, "not an IANA timezone"),
        ({"schedule": "0 22 * * *", "duration_minutes": 0, "timezone": "UTC"}, "duration_minutes"),
        ({"schedule": "0 22 * * *", "duration_minutes": 60}, "timezone"),
    ],
    ids=["four-fields", "hour-25", "unknown-zone", "zero-length", "no-timezone"],
)
def test_a_bad_window_is_a_config_error_naming_the_key(tmp_path: Path, window: dict[str, object], message: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(json.dumps({"disruption": {"windows": [window]}}), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(str(path))
    assert "disruption.windows.0" in str(info.value) and message in str(info.value), str(info.value)
    assert Settings().disruption.windows == []

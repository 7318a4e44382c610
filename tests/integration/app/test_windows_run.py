"""A run outside its disruption windows changes nothing (issue 15, item 1), against the fake API server; and
``compactor/app/carry_out.py``'s ``window_keeper``, which a run asks before each eviction, read on its own.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compactor.app.carry_out import window_keeper
from compactor.cli import main
from compactor.settings.disruption import DisruptionSettings
from compactor.settings.origins import Settings
from tests.fakeapi import FakeApiServer
from tests.fakecluster import FakeCluster
from tests.scenarios.fragmented_api import fragmented, run_config

CLOSED_NOW = [{"schedule": "0 12 15 6 *", "duration_minutes": 1, "timezone": "UTC"}]  # one minute a year: 15 June, noon
ALWAYS_OPEN = [{"schedule": "* * * * *", "duration_minutes": 2, "timezone": "Europe/Paris"}]  # opens every minute


def _config(tmp_path: Path, windows: list[dict[str, object]]) -> str:
    return run_config(tmp_path, windows=windows)


def _evictions(fake_api: FakeApiServer) -> list[object]:
    return [r for r in fake_api.requests if r.path.endswith("/eviction")]


def test_a_run_outside_every_window_changes_nothing_and_says_when_the_next_opens(
    fake_api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = fragmented(fake_api, tmp_path)
    assert main(["run", "--once", "--kubeconfig", kubeconfig, "--config", _config(tmp_path, CLOSED_NOW)]) == 0
    assert not _evictions(fake_api)
    assert not [r for r in fake_api.requests if r.method == "PATCH" and "/nodes/" in r.path]  # no node fenced either
    said = capsys.readouterr()
    assert "outside the disruption windows: the next opens at " in said.err and "this run changes nothing" in said.err
    assert (
        said.out.startswith("held: outside the disruption windows: the next opens at ")
        and "nothing changed" in said.out
    )
    assert (
        main(
            ["run", "--once", "--kubeconfig", kubeconfig, "--config", _config(tmp_path, CLOSED_NOW), "--output", "json"]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert (
        report["status"] == "held"
        and report["movesDone"] == 0
        and report["reason"].startswith("outside the disruption windows")
    )


def test_inside_a_window_the_same_run_moves(fake_api: FakeApiServer, tmp_path: Path) -> None:
    kubeconfig = fragmented(fake_api, tmp_path)
    assert main(["run", "--once", "--kubeconfig", kubeconfig, "--config", _config(tmp_path, ALWAYS_OPEN)]) == 0
    assert len(_evictions(fake_api)) == 1


def test_apply_outside_every_window_is_refused_in_one_line(
    fake_api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = fragmented(fake_api, tmp_path)
    plan = tmp_path / "plan.json"
    assert main(["plan", "--kubeconfig", kubeconfig, "--write", str(plan), "--time-limit", "5"]) == 0
    capsys.readouterr()
    assert (
        main(["apply", "--plan", str(plan), "--kubeconfig", kubeconfig, "--config", _config(tmp_path, CLOSED_NOW)]) == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1
        and "outside the disruption windows: the next opens at " in err[0]
        and "(disruption.windows)" in err[0]
    )
    assert not _evictions(fake_api)


def test_the_window_keeper_reads_the_windows_at_each_ask() -> None:
    """``carry_out.window_keeper``: nothing configured never stops; a window open now, then closed a minute later, stops."""
    c = FakeCluster([])
    assert window_keeper(Settings(), c.clock)() == ""
    now = c.clock.now()
    opens = {"schedule": f"{now.minute} {now.hour} * * *", "duration_minutes": 1, "timezone": "UTC"}
    keeper = window_keeper(Settings(disruption=DisruptionSettings(windows=[opens])), c.clock)
    assert keeper() == ""
    c.advance(120)
    assert keeper().startswith("the end of the disruption window (outside the disruption windows: the next opens at")

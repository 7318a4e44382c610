"""Memory across runs against the fake API server (issue 15, items 3 and 4): two runs do not move one workload twice
within its cooldown; failed moves open the circuit breaker, which pauses the next run and says so in an Event."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from compactor.actions.services.memory import HISTORY_CONFIGMAP, HISTORY_KEY
from compactor.cli import main
from compactor.planner.rules.history import MOVED, History, MoveRecord
from tests.builders import pod
from tests.fakeapi import FakeApiServer, status_body
from tests.scenarios.fragmented_api import STATE_NAMESPACE, fragmented, run_config


def _config(tmp_path: Path, **disruption: Any) -> str:
    return run_config(tmp_path, **disruption)


def _run(kubeconfig: str, config: str) -> int:
    return main(["run", "--once", "--kubeconfig", kubeconfig, "--config", config, "--output", "json"])


def _history(fake_api: FakeApiServer) -> dict[str, Any]:
    config_map = fake_api.get("ConfigMap", HISTORY_CONFIGMAP, STATE_NAMESPACE)
    assert config_map is not None
    history: dict[str, Any] = json.loads(config_map["data"][HISTORY_KEY])
    return history


def _evictions(fake_api: FakeApiServer) -> list[str]:
    return [r.path.split("/")[-2] for r in fake_api.requests if r.path.endswith("/eviction") and r.method == "POST"]


def _spread_again(fake_api: FakeApiServer) -> None:
    """Another replica of the same workload lands on the node the first run freed: fragmented as before."""
    busy = {p["spec"]["nodeName"] for p in fake_api.objects("Pod")}
    free = ({"gpu-1", "gpu-2"} - busy).pop()
    fake_api.add(pod("train-c", on=free, gpus=1, namespace="ml", owner="ReplicaSet/train", labels={"app": "train"}))


@pytest.mark.parametrize(("cooldown", "second_run_moves"), [(30, 0), (0, 1)], ids=["within-cooldown", "no-cooldown"])
def test_two_runs_do_not_move_one_workload_twice_within_its_cooldown(
    fake_api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], cooldown: int, second_run_moves: int
) -> None:
    kubeconfig = fragmented(fake_api, tmp_path)
    config = _config(tmp_path, workload_cooldown_minutes=cooldown)
    assert _run(kubeconfig, config) == 0
    assert len(_evictions(fake_api)) == 1
    (record,) = _history(fake_api)["moves"]
    assert (record["workload"], record["outcome"]) == ("ml/ReplicaSet/train", "moved")
    _spread_again(fake_api)
    capsys.readouterr()
    assert _run(kubeconfig, config) == 0
    assert len(_evictions(fake_api)) == 1 + second_run_moves
    assert len(_history(fake_api)["moves"]) == 1 + second_run_moves
    if not second_run_moves:  # issue 45: "nothing-to-do" says why, in the run's output and its last-run record
        said = json.loads(capsys.readouterr().out)
        assert said["status"] == "nothing-to-do" and "in their cooldown (ml/train-" in said["reason"], said
        assert "moved" in said["reason"] and "cooldown 30 min" in said["reason"], said
        summary = fake_api.get("ConfigMap", "gpu-compactor-last-run", STATE_NAMESPACE)
        assert summary is not None and "in their cooldown" in json.dumps(summary["data"]), summary


def test_failed_moves_open_the_breaker_which_pauses_the_next_run_and_says_so(
    fake_api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = fragmented(fake_api, tmp_path)
    for name in ("train-a", "train-b"):
        fake_api.inject(
            f"/api/v1/namespaces/ml/pods/{name}/eviction",
            403,
            times=1,
            body=status_body(403, f'pods "{name}" is forbidden: cannot create resource "pods/eviction"'),
        )
    config = _config(tmp_path, breaker_failures=1, breaker_of_last=3, breaker_pause_minutes=60)
    assert _run(kubeconfig, config) == 1  # the eviction is refused: the run fails and rolls back
    history = _history(fake_api)
    assert [m["outcome"] for m in history["moves"]] == ["failed"] and history["pausedUntil"]
    (event,) = [e for e in fake_api.events(STATE_NAMESPACE) if e["reason"] == "CompactorPaused"]
    assert (
        event["type"] == "Warning"
        and "compaction paused until" in event["message"]
        and "1 of the last 1 moves failed" in event["message"]
    )
    attempts = len(_evictions(fake_api))
    capsys.readouterr()
    assert _run(kubeconfig, config) == 0  # paused: the injected refusals are spent, but nothing is tried
    assert len(_evictions(fake_api)) == attempts
    assert "circuit breaker open until" in capsys.readouterr().err


@pytest.mark.parametrize(("hours", "code", "evictions"), [(24, 2, 0), (0, 0, 1)], ids=["guarded", "guard-off"])
def test_a_plan_taking_a_workload_back_where_a_recent_move_took_it_from_is_refused(
    fake_api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], hours: int, code: int, evictions: int
) -> None:
    kubeconfig = fragmented(fake_api, tmp_path)
    # the train workload went both ways an hour ago: any move now is back
    hour_ago = datetime.now(UTC) - timedelta(hours=1)
    history = History(
        tuple(
            MoveRecord(hour_ago, "ml/train-x", "ml/ReplicaSet/train", a, b, MOVED)
            for a, b in (("gpu-1", "gpu-2"), ("gpu-2", "gpu-1"))
        )
    )
    fake_api.add(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": HISTORY_CONFIGMAP, "namespace": STATE_NAMESPACE},
            "data": {HISTORY_KEY: history.to_json()},
        }
    )
    assert _run(kubeconfig, _config(tmp_path, oscillation_hours=hours)) == code
    assert len(_evictions(fake_api)) == evictions
    if code:
        assert "would undo recent moves (ml/ReplicaSet/train gpu-" in capsys.readouterr().err


def test_a_history_that_cannot_be_read_holds_the_run_instead_of_reading_as_no_history(
    fake_api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 18, item 6: the breaker is open, and the API server answers the history's read with a 503 once. That read
    used to count as an empty history, and the eviction went through the open breaker. Now the run fails closed."""
    kubeconfig = fragmented(fake_api, tmp_path)
    until = datetime.now(UTC) + timedelta(hours=1)
    fake_api.add(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": HISTORY_CONFIGMAP, "namespace": STATE_NAMESPACE},
            "data": {HISTORY_KEY: History(paused_until=until, pause_reason="3 of the last 3 moves failed").to_json()},
        }
    )
    fake_api.inject(
        f"/api/v1/namespaces/{STATE_NAMESPACE}/configmaps/{HISTORY_CONFIGMAP}",
        503,
        times=1,
        body=status_body(503, "the server is currently unable to handle the request"),
    )
    config = _config(tmp_path, breaker_failures=1, breaker_of_last=3, breaker_pause_minutes=60)
    assert _run(kubeconfig, config) == 0
    assert _evictions(fake_api) == []
    said = capsys.readouterr()
    assert json.loads(said.out)["status"] == "held"
    assert "could not read configmap gpu-compactor-history" in said.err and "fail closed" in said.err


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (403, "may not be read"),  # an RBAC edit took the read away
        ("garbage", "does not parse"),  # damaged, or written by hand
    ],
    ids=["forbidden", "unparsable"],
)
def test_a_history_that_can_never_be_read_fails_the_run_loudly_instead_of_holding_or_starting_anew(
    fake_api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], answer: object, said: str
) -> None:
    """Issue 43, item 8: a history read refused for good (403) held every run with exit 0, status held and no alert; one
    that did not parse was replaced by an empty one, resetting the breaker and the cooldowns. Both fail the run now
    (its summary failed, the CronJob's alert), and nothing is evicted or overwritten."""
    kubeconfig = fragmented(fake_api, tmp_path)
    path = f"/api/v1/namespaces/{STATE_NAMESPACE}/configmaps/{HISTORY_CONFIGMAP}"
    if answer == 403:
        fake_api.inject(path, 403, times=10, body=status_body(403, "configmaps is forbidden"))
    else:
        fake_api.add(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": HISTORY_CONFIGMAP, "namespace": STATE_NAMESPACE},
                "data": {HISTORY_KEY: "{not json"},
            }
        )
    config = _config(tmp_path, breaker_failures=5, breaker_of_last=10, breaker_pause_minutes=60)
    assert _run(kubeconfig, config) == 2
    assert _evictions(fake_api) == []
    assert said in capsys.readouterr().err
    if answer != 403:  # left as found, for the operator to look at or reset
        history = fake_api.get("ConfigMap", HISTORY_CONFIGMAP, STATE_NAMESPACE)
        assert history is not None and history["data"][HISTORY_KEY] == "{not json"


def test_breaker_reset_lifts_the_pause_forgets_the_failures_and_keeps_the_moves_for_their_cooldowns(
    fake_api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = fragmented(fake_api, tmp_path)
    until = datetime.now(UTC) + timedelta(hours=1)
    hour_ago = datetime.now(UTC) - timedelta(minutes=5)
    moves = (
        MoveRecord(hour_ago, "ml/train-x", "ml/ReplicaSet/train", "gpu-1", "gpu-2", MOVED),
        MoveRecord(hour_ago, "ml/serve-x", "ml/ReplicaSet/serve", "gpu-1", "gpu-2", "failed"),
    )
    fake_api.add(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": HISTORY_CONFIGMAP, "namespace": STATE_NAMESPACE},
            "data": {HISTORY_KEY: History(moves, until, "1 of the last 2 moves failed").to_json()},
        }
    )
    config = _config(tmp_path, breaker_failures=1, breaker_of_last=2, workload_cooldown_minutes=30)
    assert main(["breaker", "reset", "--kubeconfig", kubeconfig, "--config", config]) == 0
    out = capsys.readouterr().out
    assert "pause lifted" in out and "1 failed move(s) forgotten, 1 move(s) kept" in out
    history = _history(fake_api)
    assert history["pausedUntil"] is None and [m["outcome"] for m in history["moves"]] == ["moved"]
    (event,) = [e for e in fake_api.events(STATE_NAMESPACE) if e["reason"] == "CompactorBreakerReset"]
    assert "pause lifted" in event["message"]


def test_a_plan_for_another_cluster_applied_again_and_again_counts_nothing_toward_the_breaker(
    fake_api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 43, item 9: a wrong plan file (the bundled example's, none of its nodes here) is refused before anything
    changes, every time; it used to record each planned move as failed, so a few tries opened the breaker and every run
    did nothing for an hour. Now nothing is recorded, and the next run compacts."""
    kubeconfig = fragmented(fake_api, tmp_path)
    plan = tmp_path / "example-plan.json"
    assert main(["plan", "--example", "--time-limit", "2", "--output", "json", "--write", str(plan)]) == 0
    config = _config(tmp_path, breaker_failures=1, breaker_of_last=3, breaker_pause_minutes=60)
    for _ in range(3):
        code = main(["apply", "--plan", str(plan), "--kubeconfig", kubeconfig, "--config", config, "--output", "json"])
        assert code != 0 and "was made for another cluster" in capsys.readouterr().err
    assert _evictions(fake_api) == []
    stored = fake_api.get("ConfigMap", HISTORY_CONFIGMAP, STATE_NAMESPACE)
    history = json.loads(stored["data"][HISTORY_KEY]) if stored is not None else {}
    assert not [m for m in history.get("moves", []) if m["outcome"] == "failed"] and not history.get("pausedUntil")
    assert _run(kubeconfig, config) == 0 and len(_evictions(fake_api)) == 1, "not paused: the next run compacts"

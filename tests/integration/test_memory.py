"""Memory across runs against the fake API server (issue 15, items 3 and 4): two runs do not move one workload twice
within its cooldown; failed moves open the circuit breaker, which pauses the next run and says so in an Event."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from compactor.actions.memory import HISTORY_CONFIGMAP, HISTORY_KEY
from compactor.cli import main
from tests.builders import pod
from tests.fakeapi import FakeApiServer
from tests.fakeapi.server import status_body
from tests.integration.test_last_run import NAMESPACE, _fragmented


def _config(tmp_path: Path, **disruption: Any) -> str:
    path = tmp_path / "compactor.yaml"
    path.write_text(yaml.safe_dump({
        "mode": "apply", "planner": {"time_limit_seconds": 5}, "disruption": disruption,
        "executor": {"poll_seconds": 0.05, "bind_poll_seconds": 0.05, "backoff_seconds": 0.05, "replacement_timeout_seconds": 20},
    }), encoding="utf-8")
    return str(path)


def _run(kubeconfig: str, config: str) -> int:
    return main(["run", "--once", "--kubeconfig", kubeconfig, "--config", config, "--output", "json"])


def _history(fake_api: FakeApiServer) -> dict[str, Any]:
    config_map = fake_api.get("ConfigMap", HISTORY_CONFIGMAP, NAMESPACE)
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
def test_two_runs_do_not_move_one_workload_twice_within_its_cooldown(fake_api: FakeApiServer, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str], cooldown: int,
                                                                     second_run_moves: int) -> None:
    kubeconfig = _fragmented(fake_api, tmp_path)
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


def test_failed_moves_open_the_breaker_which_pauses_the_next_run_and_says_so(fake_api: FakeApiServer, tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = _fragmented(fake_api, tmp_path)
    for name in ("train-a", "train-b"):
        fake_api.inject(f"/api/v1/namespaces/ml/pods/{name}/eviction", 403, times=1,
                        body=status_body(403, f'pods "{name}" is forbidden: cannot create resource "pods/eviction"'))
    config = _config(tmp_path, breaker_failures=1, breaker_of_last=3, breaker_pause_minutes=60)
    assert _run(kubeconfig, config) == 1  # the eviction is refused: the run fails and rolls back
    history = _history(fake_api)
    assert [m["outcome"] for m in history["moves"]] == ["failed"] and history["pausedUntil"]
    (event,) = [e for e in fake_api.events(NAMESPACE) if e["reason"] == "CompactorPaused"]
    assert event["type"] == "Warning" and "compaction paused until" in event["message"] and "1 of the last 1 moves failed" in event["message"]
    attempts = len(_evictions(fake_api))
    capsys.readouterr()
    assert _run(kubeconfig, config) == 0  # paused: the injected refusals are spent, but nothing is tried
    assert len(_evictions(fake_api)) == attempts
    assert "circuit breaker open until" in capsys.readouterr().err

"""Leftovers of a dead run are cleared by the next run whatever it may do (issue 18, item 1), against the fake API server.

A run stopped right after its eviction leaves its fence on the node it was draining and its write-ahead state. The next
``run --once`` in ``mode: report``, in ``mode: plan``, outside every disruption window or with the circuit breaker open
may not act: it rolls that plan back (never resumes it), releases the fence, says so, and makes no move of its own.
Before, such leftovers waited for the next run that may act: a week for a weekly window, for ever in ``mode: report``.
"""

from __future__ import annotations

import json
import os
import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from compactor.actions.port import annotations as ann
from compactor.actions.services.memory import HISTORY_CONFIGMAP, HISTORY_KEY
from compactor.cli import main
from compactor.errors import EXIT_STOPPED
from compactor.planner.rules.history import History
from tests.fakeapi import FakeApiServer
from tests.scenarios.fragmented_api import STATE_NAMESPACE, fragmented, run_config

CLOSED_NOW = [{"schedule": "0 12 15 6 *", "duration_minutes": 1, "timezone": "UTC"}]  # one minute a year


def _fenced(fake_api: FakeApiServer) -> list[str]:
    """Nodes carrying any of the compactor's taints or marks."""
    return sorted(
        n["metadata"]["name"]
        for n in fake_api.objects("Node")
        if any(t["key"].startswith("compactor.io/") for t in n.get("spec", {}).get("taints") or [])
        or any(k.startswith("compactor.io/") for k in (n["metadata"].get("annotations") or {}))
    )


def _evictions(fake_api: FakeApiServer) -> int:
    return len([r for r in fake_api.requests if r.path.endswith("/eviction") and r.method == "POST"])


def killed_run(fake_api: FakeApiServer, tmp_path: Path) -> str:
    """A real run stopped (SIGTERM, as a CronJob's deadline or a node drain sends it) right after its eviction, before
    the replacement exists: its fence and its state stay for the next run's recovery. Returns the kubeconfig."""
    kubeconfig = fragmented(fake_api, tmp_path)

    def evicted_then_killed(server: FakeApiServer, evicted: dict[str, Any]) -> None:
        server.delete("Pod", evicted["metadata"]["name"], evicted["metadata"]["namespace"])
        os.kill(os.getpid(), signal.SIGTERM)  # caught by the run: it stops at its next wait

    fake_api.on_evict = evicted_then_killed
    assert main(["run", "--once", "--kubeconfig", kubeconfig, "--config", run_config(tmp_path)]) == EXIT_STOPPED
    assert _fenced(fake_api), "the killed run left no fence: nothing to clear"
    assert fake_api.get("ConfigMap", ann.STATE_CONFIGMAP, STATE_NAMESPACE) is not None
    fake_api.on_evict = None
    return kubeconfig


def _breaker_open(fake_api: FakeApiServer) -> None:
    until = datetime.now(UTC) + timedelta(hours=1)
    history = History(paused_until=until, pause_reason="1 of the last 1 moves failed")
    fake_api.add(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": HISTORY_CONFIGMAP, "namespace": STATE_NAMESPACE},
            "data": {HISTORY_KEY: history.to_json()},
        }
    )


MAY_NOT_ACT = {
    "mode-report": ("report", {}),
    "mode-plan": ("plan", {}),
    "window-closed": ("apply", {"windows": CLOSED_NOW}),
    "breaker-open": ("apply", {"breaker_failures": 1, "breaker_of_last": 3, "breaker_pause_minutes": 60}),
}


@pytest.mark.parametrize("why", sorted(MAY_NOT_ACT))
def test_a_run_that_may_not_act_rolls_a_dead_run_back_and_releases_its_fence(
    fake_api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], why: str
) -> None:
    kubeconfig = killed_run(fake_api, tmp_path)
    if why == "breaker-open":
        _breaker_open(fake_api)
    mode, disruption = MAY_NOT_ACT[why]
    evictions = _evictions(fake_api)
    capsys.readouterr()
    code = main(["run", "--once", "--kubeconfig", kubeconfig, "--config", run_config(tmp_path, mode, **disruption)])
    assert code == 0
    assert _fenced(fake_api) == []  # the dead run's fence is gone
    assert fake_api.get("ConfigMap", ann.STATE_CONFIGMAP, STATE_NAMESPACE) is None  # its state too: rolled back
    assert _evictions(fake_api) == evictions  # and this run moved nothing of its own
    said = capsys.readouterr()
    assert "recovered plan" in said.err and "failed (resume disabled)" in said.err  # rolled back, not resumed
    summary = fake_api.get("ConfigMap", "gpu-compactor-last-run", STATE_NAMESPACE)
    assert summary is not None
    cleaned = json.loads(summary["data"]["summary.json"])["cleanedUp"]
    assert cleaned.startswith("rolled back interrupted plan plan-")  # its rollback lifted the fence


def test_an_operators_dry_run_clears_nothing(fake_api: FakeApiServer, tmp_path: Path) -> None:
    kubeconfig = killed_run(fake_api, tmp_path)
    fenced = _fenced(fake_api)
    assert main(["run", "--once", "--dry-run", "--kubeconfig", kubeconfig, "--config", run_config(tmp_path)]) == 0
    assert _fenced(fake_api) == fenced  # --dry-run changes nothing, leftovers included
    assert fake_api.get("ConfigMap", ann.STATE_CONFIGMAP, STATE_NAMESPACE) is not None


def test_a_run_that_may_act_resumes_the_dead_run_instead(fake_api: FakeApiServer, tmp_path: Path) -> None:
    kubeconfig = killed_run(fake_api, tmp_path)
    assert main(["run", "--once", "--kubeconfig", kubeconfig, "--config", run_config(tmp_path)]) in (0, 1)
    assert _fenced(fake_api) == []
    assert fake_api.get("ConfigMap", ann.STATE_CONFIGMAP, STATE_NAMESPACE) is None


def test_a_run_acting_on_the_codes_default_mode_says_the_shipped_config_would_only_plan(
    fake_api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issues 18 and 45: a local ``run --once`` without a config acts (``mode: apply`` is the code's default) where the
    shipped config says ``plan``, and with no cooldown, breaker or drain cap where it ships them on: each difference is
    printed before it acts, with how to run as installed."""
    kubeconfig = fragmented(fake_api, tmp_path)
    monkeypatch.setenv("COMPACTOR_SOLVER__TIME_LIMIT_SECONDS", "5")
    monkeypatch.setenv("COMPACTOR_EXECUTOR__POLL_SECONDS", "0.05")
    assert main(["run", "--once", "--kubeconfig", kubeconfig]) == 0
    warning = next(line for line in capsys.readouterr().err.splitlines() if "no --config" in line)
    assert warning.startswith("warning: no --config: the built-in defaults differ from the shipped config in 12 ")
    for difference in (
        "mode apply (shipped: plan), ",  # first: what the run may do
        "disruption.breaker_failures 0 (shipped: 5)",
        "caps.max_draining_per_pool none (shipped: 10%)",
        "disruption.workload_cooldown_minutes 0 (shipped: 30)",
    ):
        assert difference in warning, warning
    # the environment counts as --config would read it: the time limit set there is no difference
    assert "solver.time_limit_seconds" not in warning
    assert warning.endswith(
        "--config manifests/base/config.yaml runs as the manifests install it; this run acts: --dry-run to only look"
    )
    assert main(["run", "--once", "--kubeconfig", kubeconfig, "--config", run_config(tmp_path)]) == 0
    assert "no --config" not in capsys.readouterr().err  # a config that says apply is what it says

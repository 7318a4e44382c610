"""``executor.server_dry_run``: a dry run on a live cluster asks the API server about each eviction (dryRun=All)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from compactor.cli import main
from tests.builders import node, pdb, pod
from tests.fakeapi import FakeApiServer


@pytest.fixture(autouse=True)
def _no_ambient_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for key in [k for k in os.environ if k.startswith("COMPACTOR_")]:
        monkeypatch.delenv(key)


def _fragmented(fake_api: FakeApiServer, tmp_path: Path) -> str:
    """gpu-2 runs two replicas of a 2-replica workload that fit beside the bare pod on gpu-1: freeing gpu-2 is the plan."""
    fake_api.add(
        node("gpu-1", gpus=8),
        node("gpu-2", gpus=8),
        pod("pinned", on="gpu-1", gpus=4, owner=None),
        pod("serve-a", on="gpu-2", gpus=1, owner="ReplicaSet/serve"),
        pod("serve-b", on="gpu-2", gpus=1, owner="ReplicaSet/serve"),
        pdb("serve", match={"app": "serve"}, allowed=1),
    )
    return str(fake_api.write_kubeconfig(tmp_path / "kubeconfig"))


def _evictions(fake_api: FakeApiServer) -> list[str | None]:
    return [r.param("dryRun") for r in fake_api.requests if r.method == "POST" and r.path.endswith("/eviction")]


@pytest.mark.parametrize("server_dry_run", [True, False], ids=["setting-on", "setting-off"])
def test_the_setting_makes_every_live_dry_run_ask_the_api_server(
    fake_api: FakeApiServer, tmp_path: Path, server_dry_run: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = _fragmented(fake_api, tmp_path)
    config = tmp_path / "compactor.yaml"
    config.write_text(
        yaml.safe_dump({"solver": {"time_limit_seconds": 5}, "executor": {"server_dry_run": server_dry_run}}),
        encoding="utf-8",
    )
    assert (
        main(["run", "--once", "--dry-run", "--kubeconfig", kubeconfig, "--config", str(config), "--output", "json"])
        == 0
    ), capsys.readouterr().err
    asked = _evictions(fake_api)
    # every eviction asked with dryRun=All, or none asked at all
    assert asked == (["All", "All"] if server_dry_run else [])
    assert fake_api.get("Pod", "serve-a", "default") is not None  # nothing evicted for real
    # issue 45: what it cannot know says that the API server was asked, or how to ask it
    unknown = " ".join(json.loads(capsys.readouterr().out)["notKnownUntilRealRun"])
    asked_now = "this server dry run asked each one now"
    assert (asked_now in unknown) == server_dry_run and ("--server-dry-run" in unknown) != server_dry_run, unknown

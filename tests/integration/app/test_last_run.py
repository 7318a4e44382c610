"""What ``compactor run --once`` (the CronJob) leaves behind: the ``gpu-compactor-last-run`` ConfigMap, its Event, the Pushgateway.

Every test runs the real command line (``main``) against the fake API server through a kubeconfig, as the CronJob runs in
the cluster: apply (a real move, a replacement made by the fake ReplicaSet), plan (a dry run) and report modes write the
summary and the Event with the figures of the run; a failed run (an eviction refused, the Lease held elsewhere) writes
them too, as a Warning; a write the API server refuses, or a Pushgateway nobody answers, is a warning and leaves the exit
code alone; every request a run sends is one the shipped RBAC allows; nothing is written nor pushed for a snapshot file.
Each push says how its run ended, when, and when the last successful run ended, carried forward from the previous
summary. The Pushgateway is a local ``http.server`` capturing what is pushed.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from compactor.actions.run.context import AbortReason
from compactor.actions.services.report import RunReport
from compactor.app.last_run import LAST_RUN_CONFIGMAP, LAST_RUN_STATUSES, SUMMARY_KEY, RunRecord, push
from compactor.cli import main
from compactor.controller.exporter import Exporter
from compactor.kube.lease import LeaderElector
from compactor.settings.bundles import RunSettings
from compactor.statuses import RunStatus
from tests.builders import A100_40, pod
from tests.fakeapi import FakeApiServer, RecordedRequest, Reply, status_body
from tests.rbac import denied
from tests.scenarios.fragmented_api import fragmented

NAMESPACE = RunSettings().executor.state_namespace
CONFIGMAPS = f"/api/v1/namespaces/{NAMESPACE}/configmaps"
SUMMARY_PATH = f"{CONFIGMAPS}/{LAST_RUN_CONFIGMAP}"
EVENTS = f"/api/v1/namespaces/{NAMESPACE}/events"


@pytest.fixture(autouse=True)
def _no_ambient_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for key in [k for k in os.environ if k.startswith("COMPACTOR_") or k.lower().endswith("_proxy")]:
        monkeypatch.delenv(key)


def _config(tmp_path: Path, mode: str, **metrics: Any) -> str:
    path = tmp_path / f"compactor-{mode}.yaml"
    settings: dict[str, Any] = {
        "mode": mode,
        "solver": {"time_limit_seconds": 5},
        "executor": {"poll_seconds": 0.05, "backoff_seconds": 0.05, "replacement_timeout_seconds": 20},
        "steering": {"bind_poll_seconds": 0.05},
    }
    if metrics:
        settings["metrics"] = metrics
    path.write_text(yaml.safe_dump(settings), encoding="utf-8")
    return str(path)


def _run(kubeconfig: str, config: str, *extra: str) -> int:
    return main(["run", "--once", "--kubeconfig", kubeconfig, "--config", config, "--output", "json", *extra])


def _summary(fake_api: FakeApiServer) -> dict[str, Any]:
    config_map = fake_api.get("ConfigMap", LAST_RUN_CONFIGMAP, NAMESPACE)
    assert config_map is not None, "no summary ConfigMap"
    assert set(config_map["data"]) == {SUMMARY_KEY}
    summary: dict[str, Any] = json.loads(config_map["data"][SUMMARY_KEY])
    return summary


def _summary_events(fake_api: FakeApiServer) -> list[dict[str, Any]]:
    return [e for e in fake_api.events(NAMESPACE) if e["reason"] == "CompactorRunSummary"]


def _the_event(fake_api: FakeApiServer) -> dict[str, Any]:
    (event,) = _summary_events(fake_api)
    assert event["involvedObject"]["kind"] == "ConfigMap"
    assert (event["involvedObject"]["name"], event["involvedObject"]["namespace"]) == (LAST_RUN_CONFIGMAP, NAMESPACE)
    return event


# --------------------------------------------------------------------------- the summary and its Event, in every mode


def test_an_applied_run_records_what_it_did_and_the_figures_measured_before_and_after(
    fake_api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = fragmented(fake_api, tmp_path)
    assert _run(kubeconfig, _config(tmp_path, "apply")) == 0, capsys.readouterr().err
    report = json.loads(capsys.readouterr().out)
    assert (report["status"], report["movesDone"], report["dryRun"]) == ("succeeded", 1, False)

    summary = _summary(fake_api)
    assert {
        k: summary[k]
        for k in (
            "mode",
            "dryRun",
            "planId",
            "status",
            "exitCode",
            "movesPlanned",
            "movesDone",
            "freedGpusPlanned",
            "freedGpusMeasured",
            "pendingPodsPlanned",
            "pendingPodsPlaced",
            "installation",
            "reason",
        )
    } == {
        "mode": "apply",
        "dryRun": False,
        "planId": report["planId"],
        "status": "succeeded",
        "exitCode": 0,
        "movesPlanned": 1,
        "movesDone": 1,
        "freedGpusPlanned": 8,
        "freedGpusMeasured": 8,
        "pendingPodsPlanned": 0,
        "pendingPodsPlaced": 0,
        "installation": NAMESPACE,
        "reason": "",
    }
    assert summary["freedNodes"] == report["freedNodes"] and len(summary["freedNodes"]) == 1
    assert summary["before"]["wholeFreeGpus"] == 0 and summary["before"]["freeGpuEquivalents"] == 14
    # measured on the cluster again
    assert summary["after"]["wholeFreeGpus"] == 8 and summary["after"]["wholeFreeNodes"] == 1
    assert summary["plannedAfter"]["wholeFreeGpus"] == 8
    assert summary["before"]["blockedDemandGpuEquivalents"] == 0 and summary["before"]["blockedPendingPods"] == 0
    assert summary["startedAt"] <= summary["endedAt"] and summary["endedAt"].endswith("Z")

    event = _the_event(fake_api)
    assert event["type"] == "Normal"
    assert event["message"].startswith(
        f"run --once (mode apply): plan {report['planId']} succeeded; 1/1 moves done; "
        "+8 whole-free GPUs measured (plan: +8)"
    )
    assert "whole-free GPUs 0 -> 8" in event["message"]
    # the whole run, its record included, within the RBAC
    assert not denied(fake_api.requests), denied(fake_api.requests)


def test_a_plan_mode_run_writes_its_record_for_real_and_changes_nothing_else(
    fake_api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = fragmented(fake_api, tmp_path)
    assert _run(kubeconfig, _config(tmp_path, "plan")) == 0, capsys.readouterr().err
    report = json.loads(capsys.readouterr().out)
    assert report["dryRun"] is True and report["status"] == "dry-run"

    summary = _summary(fake_api)
    assert (summary["mode"], summary["dryRun"], summary["status"], summary["planId"]) == (
        "plan",
        True,
        "dry-run",
        report["planId"],
    )
    assert (summary["movesPlanned"], summary["movesDone"], summary["freedGpusPlanned"]) == (1, 1, 8)
    assert summary["freedGpusMeasured"] is None and summary["pendingPodsPlaced"] is None  # a dry run measures nothing
    assert (
        summary["after"] is None
        and summary["plannedAfter"]["wholeFreeGpus"] == 8
        and summary["before"]["wholeFreeGpus"] == 0
    )
    event = _the_event(fake_api)
    assert event["type"] == "Normal" and event["message"].startswith(
        f"run --once (mode plan, dry run): plan {report['planId']} dry-run; 1/1 moves simulated; the plan frees 8 GPU(s)"
    )
    assert "whole-free GPUs 0 -> 8" in event["message"] and "as planned, not measured" in event["message"]

    # written for real (no dryRun=All), the only writes of the run: nothing evicted, fenced nor kept in the state ConfigMap
    writes = [r for r in fake_api.requests if r.method != "GET"]
    assert [(r.method, r.path) for r in writes] == [("POST", CONFIGMAPS), ("POST", EVENTS)]
    assert all(r.param("dryRun") is None for r in writes)
    assert fake_api.get("Pod", "train-a", "ml") is not None and fake_api.get("Pod", "train-b", "ml") is not None
    assert fake_api.get("ConfigMap", "gpu-compactor-state", NAMESPACE) is None
    assert not denied(fake_api.requests), denied(fake_api.requests)


def test_a_report_mode_run_records_the_figures_and_the_next_run_replaces_them(
    fake_api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = fragmented(fake_api, tmp_path)
    # fits 14 free GPUs in total, no node: blocked
    fake_api.add(pod("waiting", gpus=8, namespace="ml", owner="ReplicaSet/big"))
    assert _run(kubeconfig, _config(tmp_path, "report")) == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["figures"]["cluster"]["wholeFreePhysicalGpus"] == 0

    summary = _summary(fake_api)
    assert (summary["mode"], summary["dryRun"], summary["status"], summary["planId"], summary["movesPlanned"]) == (
        "report",
        False,
        "measured",
        None,
        None,
    )
    assert summary["before"] == {
        "wholeFreeGpus": 0,
        "wholeFreeNodes": 0,
        "blockedDemandGpuEquivalents": 8,
        "blockedPendingPods": 1,
        "strandedShare": summary["before"]["strandedShare"],
        "strandedGpuEquivalents": 0,
        "freeGpuEquivalents": 14,
    }
    assert summary["after"] is None and summary["plannedAfter"] is None
    assert _the_event(fake_api)["message"] == (
        f"run --once (mode report): measured; whole-free GPUs 0, blocked demand 8 GPU-equivalents, stranded share "
        f"{summary['before']['strandedShare']:.1%}"
    )
    first = fake_api.get("ConfigMap", LAST_RUN_CONFIGMAP, NAMESPACE)

    fake_api.clear_requests()  # the next run (plan mode) replaces the summary with a PUT of the version it read
    assert _run(kubeconfig, _config(tmp_path, "plan")) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert _summary(fake_api)["mode"] == "plan" and len(_summary_events(fake_api)) == 2
    (put,) = [r for r in fake_api.requests if r.method == "PUT" and r.path == SUMMARY_PATH]
    assert first is not None and put.json()["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert not [r for r in fake_api.requests if r.method == "POST" and r.path == CONFIGMAPS]
    assert not denied(fake_api.requests), denied(fake_api.requests)


# --------------------------------------------------------------------------- failed runs, failed writes, no cluster


def test_a_run_that_fails_is_recorded_as_a_warning(
    fake_api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = fragmented(fake_api, tmp_path)
    fake_api.inject(
        "/api/v1/namespaces/ml/pods/train-a/eviction",
        403,
        times=None,
        body=status_body(403, 'pods "train-a" is forbidden: cannot create resource "pods/eviction"'),
    )
    fake_api.inject(
        "/api/v1/namespaces/ml/pods/train-b/eviction",
        403,
        times=None,
        body=status_body(403, 'pods "train-b" is forbidden: cannot create resource "pods/eviction"'),
    )
    assert _run(kubeconfig, _config(tmp_path, "apply")) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["status"] == "failed"

    summary = _summary(fake_api)
    assert (summary["status"], summary["exitCode"], summary["movesDone"], summary["reason"]) == (
        "failed",
        1,
        0,
        report["reason"],
    )
    assert "forbidden" in summary["reason"]
    assert summary["after"]["wholeFreeGpus"] == 0  # rolled back: measured again, nothing freed
    event = _the_event(fake_api)
    assert (
        event["type"] == "Warning"
        and f"plan {report['planId']} failed" in event["message"]
        and "forbidden" in event["message"]
    )


def test_a_run_stopped_by_an_error_is_recorded_and_fails_as_before(
    fake_api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = fragmented(fake_api, tmp_path)
    # another gpu-compactor (the controller) holds the Lease: the run refuses to act
    assert LeaderElector(fake_api.api_client(), NAMESPACE, "controller-0").try_acquire_or_renew(datetime.now(UTC))
    assert _run(kubeconfig, _config(tmp_path, "apply")) == 2
    err = capsys.readouterr().err
    assert "compactor: error:" in err and "controller-0" in err

    summary = _summary(fake_api)
    assert (summary["status"], summary["exitCode"], summary["planId"]) == ("failed", 2, None)
    assert "controller-0" in summary["reason"]
    event = _the_event(fake_api)
    assert event["type"] == "Warning" and event["message"].startswith("run --once (mode apply): failed; reason: ")


@pytest.mark.parametrize("mode", ["report", "plan", "apply"])
def test_a_summary_the_api_server_refuses_is_a_warning_and_the_exit_code_stays(
    fake_api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    kubeconfig = fragmented(fake_api, tmp_path)
    refused: list[str] = []

    def refuse_the_summary(_api: FakeApiServer, request: RecordedRequest, _match: Any) -> Reply | None:
        if request.json()["metadata"]["name"] != LAST_RUN_CONFIGMAP:
            return None  # the executor's state ConfigMap (apply) is created as usual
        refused.append(request.method)
        return Reply(
            403,
            status_body(403, f'configmaps "{LAST_RUN_CONFIGMAP}" is forbidden: cannot create resource "configmaps"'),
        )

    fake_api.route("POST", CONFIGMAPS, refuse_the_summary)
    # every Event of the namespace: only the summary's is sent there
    fake_api.inject(EVENTS, 500, method="POST", times=None)
    assert _run(kubeconfig, _config(tmp_path, mode)) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)  # the run's own report, whole
    assert (
        f"could not record the run in configmap {NAMESPACE}/{LAST_RUN_CONFIGMAP} (the run itself is unaffected)"
        in captured.err
    )
    assert "forbidden" in captured.err and "could not send the CompactorRunSummary Event" in captured.err
    assert fake_api.get("ConfigMap", LAST_RUN_CONFIGMAP, NAMESPACE) is None and not _summary_events(fake_api)
    assert refused == ["POST"]  # it did try, once (a refusal is no conflict to retry)


@pytest.mark.parametrize("extra", [(), ("--dry-run",)], ids=["applied", "dry-run"])
def test_a_live_run_talks_through_one_connection_and_one_client(
    fake_api: FakeApiServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    extra: tuple[str, ...],
) -> None:
    """Issue 46: a ``run --once`` reads, plans, carries out and records through the invocation's one connection and
    one ``KubeClusterClient`` (its dry-run view derived from it), not a client per step."""
    import compactor.kube.client as kube_client
    from compactor.kube.cluster_client import KubeClusterClient

    connections: list[Any] = []
    clients: list[KubeClusterClient] = []
    connect, init = kube_client.connect, KubeClusterClient.__init__

    def counted_connect(*args: Any, **kwargs: Any) -> Any:
        connections.append(connect(*args, **kwargs))
        return connections[-1]

    def counted_init(self: KubeClusterClient, *args: Any, **kwargs: Any) -> None:
        clients.append(self)
        init(self, *args, **kwargs)

    monkeypatch.setattr(kube_client, "connect", counted_connect)
    monkeypatch.setattr(KubeClusterClient, "__init__", counted_init)
    kubeconfig = fragmented(fake_api, tmp_path)
    assert _run(kubeconfig, _config(tmp_path, "apply"), *extra) == 0, capsys.readouterr().err
    assert len(connections) == 1
    first, *derived = clients
    assert all(c.api_client is first.api_client for c in derived) and len(derived) <= 1  # the dry-run view


def test_a_snapshot_run_writes_nothing_and_pushes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, pushgateway: Pushgateway
) -> None:
    import compactor.kube.client as kube_client

    def no_cluster(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("a snapshot run must not talk to a cluster")

    monkeypatch.setattr(kube_client, "load_api_client", no_cluster)
    monkeypatch.setattr(kube_client, "connect", no_cluster)
    for mode in ("report", "plan"):
        config = _config(tmp_path, mode, pushgateway_url=pushgateway.url)
        assert main(["run", "--once", "--example", "--config", config, "--output", "json"]) == 0, (
            capsys.readouterr().err
        )
        assert "could not" not in capsys.readouterr().err
    assert pushgateway.received == []


# --------------------------------------------------------------------------- the Pushgateway


@dataclass
class Pushed:
    method: str
    path: str
    body: str


@dataclass
class Pushgateway:
    url: str
    received: list[Pushed] = field(default_factory=list)

    def families(self, index: int = -1) -> dict[str, Any]:
        return {family.name: family for family in text_string_to_metric_families(self.received[index].body)}


@pytest.fixture
def pushgateway() -> Iterator[Pushgateway]:
    """A Pushgateway on 127.0.0.1 that keeps every push (method, path, body) and answers 200."""
    gateway = Pushgateway(url="")

    class Handler(BaseHTTPRequestHandler):
        def _keep(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            gateway.received.append(Pushed(self.command, self.path, self.rfile.read(length).decode("utf-8")))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_PUT = do_POST = _keep

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    gateway.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield gateway
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _sample(families: dict[str, Any], name: str, **labels: str) -> float:
    family_name = name.removesuffix("_total")
    values = [s.value for s in families[family_name].samples if s.name == name and s.labels == labels]
    assert len(values) == 1, (name, labels, families[family_name].samples)
    return float(values[0])


def test_an_applied_run_pushes_the_controllers_metric_families(
    fake_api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], pushgateway: Pushgateway
) -> None:
    kubeconfig = fragmented(fake_api, tmp_path)
    assert _run(kubeconfig, _config(tmp_path, "apply", pushgateway_url=pushgateway.url)) == 0, capsys.readouterr().err
    capsys.readouterr()
    (pushed,) = pushgateway.received
    assert (pushed.method, pushed.path) == ("PUT", f"/metrics/job/gpu-compactor/installation/{NAMESPACE}")
    families = pushgateway.families()
    pool = A100_40  # the builders' GPU product, the pool label
    assert f'gpu_compactor_whole_free_gpus{{pool="{pool}"}} 8.0' in pushed.body  # after the run, measured
    assert _sample(families, "gpu_compactor_whole_free_gpus", pool=pool) == 8
    assert _sample(families, "gpu_compactor_runs_total", status="succeeded") == 1
    assert _sample(families, "gpu_compactor_runs_total", status="failed") == 0
    assert _sample(families, "gpu_compactor_evictions_total") == 1
    assert (
        _sample(families, "gpu_compactor_last_run_freed_gpus") == 8
        and _sample(families, "gpu_compactor_last_run_planned_freed_gpus") == 8
    )
    assert _sample(families, "gpu_compactor_last_plan_moves") == 1
    assert _sample(families, "gpu_compactor_cycle_errors_total") == 0 and _sample(families, "gpu_compactor_leader") == 1
    assert _sample(families, "gpu_compactor_last_cycle_timestamp_seconds") > 0
    # what the CronJob's alerts read: how the run ended, when, and the last success (this run)
    assert _ended_as(families) == "succeeded"
    ended = _sample(families, "gpu_compactor_last_run_timestamp_seconds")
    assert int(ended) == _epoch(_summary(fake_api)["endedAt"])  # the summary says it to the second
    assert _sample(families, "gpu_compactor_last_run_success_timestamp_seconds") == ended


def test_a_run_that_rolled_back_pushes_its_rollback_under_its_reason(pushgateway: Pushgateway) -> None:
    record = RunRecord(mode="apply", installation=NAMESPACE, started=datetime(2026, 1, 1, tzinfo=UTC))
    record.report = RunReport("plan-1", RunStatus.SUCCEEDED, moves_total=2, moves_done=1).rolled_back(
        AbortReason.PLAN_STALE, "node gpu-2 is gone"
    )
    push(pushgateway.url, record, exit_code=1, ended=datetime(2026, 1, 1, 0, 5, tzinfo=UTC), exporter=Exporter())
    families = pushgateway.families()
    assert _sample(families, "gpu_compactor_rollbacks_total", reason="plan_stale") == 1
    assert _sample(families, "gpu_compactor_rollbacks_total", reason="node_gone") == 0
    assert _sample(families, "gpu_compactor_runs_total", status="failed") == 1


def test_a_report_mode_run_pushes_the_figures(
    fake_api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], pushgateway: Pushgateway
) -> None:
    kubeconfig = fragmented(fake_api, tmp_path)
    assert _run(kubeconfig, _config(tmp_path, "report", pushgateway_url=pushgateway.url)) == 0, capsys.readouterr().err
    capsys.readouterr()
    families = pushgateway.families()
    pool = A100_40
    assert _sample(families, "gpu_compactor_whole_free_gpus", pool=pool) == 0
    assert _sample(families, "gpu_compactor_free_gpu_equivalents", pool=pool) == 14
    assert all(sample.value == 0 for sample in families["gpu_compactor_runs"].samples)  # measured only: no run
    assert "gpu_compactor_last_plan_moves" not in families


def _ended_as(families: dict[str, Any]) -> str:
    """The one status ``gpu_compactor_last_run_status`` says the run ended with (every other status 0)."""
    samples = {s.labels["status"]: s.value for s in families["gpu_compactor_last_run_status"].samples}
    assert set(samples) == set(LAST_RUN_STATUSES) and sorted(samples.values()) == [0] * (len(samples) - 1) + [1]
    (status,) = [status for status, value in samples.items() if value == 1]
    return status


def _epoch(iso: str) -> float:
    return datetime.strptime(iso, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def test_a_failed_run_pushes_its_status_and_carries_the_last_success_forward_from_the_summary(
    fake_api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], pushgateway: Pushgateway
) -> None:
    kubeconfig = fragmented(fake_api, tmp_path)
    assert _run(kubeconfig, _config(tmp_path, "report", pushgateway_url=pushgateway.url)) == 0, capsys.readouterr().err
    measured_at = _summary(fake_api)["endedAt"]
    assert _summary(fake_api)["lastSucceededAt"] == measured_at  # measuring is all report mode does
    assert _ended_as(pushgateway.families()) == "measured"

    # another gpu-compactor holds the Lease: the next run fails before it can act; its push replaces the group
    assert LeaderElector(fake_api.api_client(), NAMESPACE, "controller-0").try_acquire_or_renew(datetime.now(UTC))
    assert _run(kubeconfig, _config(tmp_path, "apply", pushgateway_url=pushgateway.url)) == 2
    capsys.readouterr()
    summary = _summary(fake_api)
    assert (summary["status"], summary["lastSucceededAt"]) == ("failed", measured_at)
    families = pushgateway.families()
    assert len(pushgateway.received) == 2 and _ended_as(families) == "failed"
    assert int(_sample(families, "gpu_compactor_last_run_timestamp_seconds")) == _epoch(summary["endedAt"])
    assert _sample(families, "gpu_compactor_last_run_success_timestamp_seconds") == _epoch(measured_at)
    assert not denied(fake_api.requests), denied(fake_api.requests)


def test_a_summary_from_before_last_succeeded_at_still_tells_the_last_success(
    fake_api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], pushgateway: Pushgateway
) -> None:
    kubeconfig = fragmented(fake_api, tmp_path)
    older = {"status": "succeeded", "startedAt": "2026-01-01T00:00:00Z", "endedAt": "2026-01-01T00:05:00Z"}
    fake_api.add(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": LAST_RUN_CONFIGMAP, "namespace": NAMESPACE},
            "data": {SUMMARY_KEY: json.dumps(older)},
        }
    )
    assert LeaderElector(fake_api.api_client(), NAMESPACE, "controller-0").try_acquire_or_renew(datetime.now(UTC))
    assert _run(kubeconfig, _config(tmp_path, "apply", pushgateway_url=pushgateway.url)) == 2
    capsys.readouterr()
    assert _summary(fake_api)["lastSucceededAt"] == "2026-01-01T00:05:00Z"
    families = pushgateway.families()
    assert _sample(families, "gpu_compactor_last_run_success_timestamp_seconds") == _epoch("2026-01-01T00:05:00Z")
    # the previous summary was read once: the replace is a PUT of the version that read saw, not a second GET
    assert [r.method for r in fake_api.requests if r.path == SUMMARY_PATH] == ["GET", "PUT"]


def test_an_unreachable_pushgateway_is_a_warning_and_the_run_stands(
    fake_api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = fragmented(fake_api, tmp_path)
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    assert _run(kubeconfig, _config(tmp_path, "apply", pushgateway_url=url)) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["status"] == "succeeded"
    assert f"could not push the run's metrics to the Pushgateway {url} (the run itself is unaffected)" in captured.err
    assert _summary(fake_api)["status"] == "succeeded"  # the summary is written all the same


def test_the_pushgateway_url_must_be_an_http_url(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path, "report", pushgateway_url="pushgateway:9091")
    assert main(["run", "--once", "--example", "--config", config]) == 2
    err = capsys.readouterr().err
    assert "metrics.pushgateway_url" in err and "http://HOST:PORT" in err and len(err.strip().splitlines()) == 1

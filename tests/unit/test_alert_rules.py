"""The alerts of manifests/monitoring/prometheusrule.yaml on the controller's own health, evaluated by ``promtool test rules``.

Each alert is shown firing on the series that should fire it and silent on the ones that should not
(a replica whose cycles complete, a long but legitimate cycle, a single API hiccup). promtool comes with
Debian's ``prometheus`` package (or set PROMTOOL); without it those tests skip, except in CI, which requires it. The stall threshold is also
checked, without promtool, against the longest cycle the shipped config and Deployment allow.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest

from compactor.cli import build_parser
from compactor.controller.exporter import Exporter
from compactor.controller.loop import cycle_limit_default
from compactor.metrics.fragmentation import compute_figures
from tests.builders import cluster, node, pod
from tests.manifests import CONTROLLER, MONITORING, compactor_args, mounted_settings, one_object
from tests.tools import required

PROMTOOL = os.environ.get("PROMTOOL") or shutil.which("promtool")
needs_promtool = pytest.mark.usefixtures("promtool_installed")


@pytest.fixture
def promtool_installed() -> None:
    """On a laptop without promtool these tests skip; CI installs it and sets GPU_COMPACTOR_REQUIRE_PROMTOOL, so there a
    missing promtool fails them instead of leaving the alerts unchecked."""
    required(
        PROMTOOL,
        name="promtool",
        require_env="GPU_COMPACTOR_REQUIRE_PROMTOOL",
        install="Debian: apt-get install prometheus, or set PROMTOOL",
    )


def _spec() -> dict[str, Any]:
    spec: dict[str, Any] = one_object(MONITORING, "PrometheusRule")["spec"]
    return spec


def _rule(alert: str) -> dict[str, Any]:
    (rule,) = [r for group in _spec()["groups"] for r in group["rules"] if r.get("alert") == alert]
    return rule


def _annotations(alert: str, pod: str, value: str = "") -> dict[str, str]:
    """The rule's annotations as Prometheus renders them for ``pod`` (``value``: the rendered ``$value``)."""
    rendered = {}
    for key, text in _rule(alert)["annotations"].items():
        text = text.replace("{{ $labels.pod }}", pod).replace("{{ $value | humanizeDuration }}", value)
        assert "{{" not in text, f"{alert}: a template this test does not render: {text}"
        rendered[key] = text
    return rendered


def _promtool(tmp_path: Path, *args: str) -> None:
    assert PROMTOOL is not None
    result = subprocess.run([PROMTOOL, *args], cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, f"promtool {' '.join(args)}:\n{result.stdout}{result.stderr}"


def _test_rules(tmp_path: Path, tests: list[dict[str, Any]]) -> None:
    """``promtool test rules`` on ``tests`` against the PrometheusRule's groups (promtool reads plain rule files)."""
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(_spec()), encoding="utf-8")
    unit = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": tests}
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(unit, sort_keys=False), encoding="utf-8")
    _promtool(tmp_path, "test", "rules", "test.yaml")


@needs_promtool
def test_promtool_accepts_every_rule(tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(_spec()), encoding="utf-8")
    _promtool(tmp_path, "check", "rules", "rules.yaml")


def _stalled(pod: str, seconds: str) -> dict[str, Any]:
    return {
        "exp_labels": {"severity": "warning", "pod": pod},
        "exp_annotations": _annotations("GpuCompactorCyclesStalled", pod, seconds),
    }


@needs_promtool
def test_cycles_stalled_fires_for_a_replica_without_a_completed_cycle_for_two_and_a_half_hours_only(
    tmp_path: Path,
) -> None:
    series = "gpu_compactor_last_cycle_timestamp_seconds"
    _test_rules(
        tmp_path,
        [
            {
                "interval": "1m",
                "input_series": [
                    {"series": f'{series}{{pod="stuck"}}', "values": "0x200"},  # one cycle at t=0, then none
                    {"series": f'{series}{{pod="working"}}', "values": "0+60x200"},  # a cycle completing every minute
                    # a long legitimate cycle: nothing completes for 2 h 3 min (interval + the longest cycle), then it does
                    {"series": f'{series}{{pod="long-run"}}', "values": "0x122 7380+60x77"},
                ],
                "alert_rule_test": [
                    {"eval_time": "2h", "alertname": "GpuCompactorCyclesStalled", "exp_alerts": []},
                    {
                        "eval_time": "150m",
                        "alertname": "GpuCompactorCyclesStalled",
                        "exp_alerts": [],
                    },  # 9000 s: not yet over
                    {
                        "eval_time": "151m",
                        "alertname": "GpuCompactorCyclesStalled",
                        "exp_alerts": [_stalled("stuck", "2h 31m 0s")],
                    },
                    {
                        "eval_time": "3h",
                        "alertname": "GpuCompactorCyclesStalled",
                        "exp_alerts": [_stalled("stuck", "3h 0m 0s")],
                    },
                ],
            }
        ],
    )


@needs_promtool
def test_cycle_errors_fire_on_repeated_errors_not_on_one_hiccup(tmp_path: Path) -> None:
    series = "gpu_compactor_cycle_errors_total"
    firing = {
        "exp_labels": {"severity": "warning", "pod": "failing"},
        "exp_annotations": _annotations("GpuCompactorCycleErrors", "failing"),
    }
    _test_rules(
        tmp_path,
        [
            {
                "interval": "1m",
                "input_series": [
                    {
                        "series": f'{series}{{pod="failing"}}',
                        "values": "0x10 1x10 2x10 3x150",
                    },  # three errors in 30 minutes
                    {"series": f'{series}{{pod="hiccup"}}', "values": "0x10 1x180"},  # one error, then fine
                    {"series": f'{series}{{pod="clean"}}', "values": "0x190"},
                ],
                "alert_rule_test": [
                    {"eval_time": "20m", "alertname": "GpuCompactorCycleErrors", "exp_alerts": []},  # two so far
                    {"eval_time": "40m", "alertname": "GpuCompactorCycleErrors", "exp_alerts": [firing]},
                    {
                        "eval_time": "3h",
                        "alertname": "GpuCompactorCycleErrors",
                        "exp_alerts": [],
                    },  # an hour without errors: resolved
                ],
            }
        ],
    )


def test_the_stall_threshold_outlasts_the_longest_cycle_the_shipped_deployment_allows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    match = re.fullmatch(
        r"time\(\) - gpu_compactor_last_cycle_timestamp_seconds > (\d+)", _rule("GpuCompactorCyclesStalled")["expr"]
    )
    assert match, _rule("GpuCompactorCyclesStalled")["expr"]
    threshold = int(match[1])
    interval = build_parser().parse_args(compactor_args(one_object(CONTROLLER, "Deployment"))).interval
    # the next cycle starts, then runs long
    longest_gap = interval + cycle_limit_default(mounted_settings(tmp_path, monkeypatch))
    assert longest_gap < threshold <= longest_gap + 3600  # never during a legitimate cycle, and not hours later either


def _rendered(alert: str, labels: dict[str, str], value: str) -> dict[str, Any]:
    rendered = {}
    for key, text in _rule(alert)["annotations"].items():
        text = text.replace("{{ $value | humanizePercentage }}", value).replace("{{ $value }}", value)
        for name, label in labels.items():
            text = text.replace(f"{{{{ $labels.{name} }}}}", label)
        assert "{{" not in text, f"{alert}: a template this test does not render: {text}"
        rendered[key] = text
    return {"exp_labels": {"severity": "warning", **labels}, "exp_annotations": rendered}


@needs_promtool
def test_blocked_demand_fires_while_pods_wait_and_clears_once_a_compaction_places_them(tmp_path: Path) -> None:
    series = "gpu_compactor_blocked_demand_gpu_equivalents"
    alert = "GpuDemandBlockedByFragmentation"
    # Both replicas export the figure; 8 GPUs blocked for 40 minutes, then a compaction run places the pod.
    _test_rules(
        tmp_path,
        [
            {
                "interval": "1m",
                "input_series": [
                    {"series": f'{series}{{pod="a"}}', "values": "8x40 0x60"},
                    {"series": f'{series}{{pod="b"}}', "values": "8x40 0x60"},
                ],
                "alert_rule_test": [
                    {"eval_time": "10m", "alertname": alert, "exp_alerts": []},  # not yet 15 minutes
                    {"eval_time": "20m", "alertname": alert, "exp_alerts": [_rendered(alert, {}, "8")]},
                    {"eval_time": "50m", "alertname": alert, "exp_alerts": []},  # placed: cleared
                ],
            }
        ],
    )


@needs_promtool
def test_stranded_capacity_fires_per_pool_after_an_hour_and_not_for_a_gpu_or_two(tmp_path: Path) -> None:
    share, gpus = "gpu_compactor_stranded_share", "gpu_compactor_stranded_gpu_equivalents"
    alert = "GpuCapacityStranded"
    _test_rules(
        tmp_path,
        [
            {
                "interval": "1m",
                "input_series": [
                    # pool big: half of the free capacity (6 GPUs) stranded for 2 hours, then a re-cut uses it
                    {"series": f'{share}{{pool="big"}}', "values": "0.5x120 0.1x60"},
                    {"series": f'{gpus}{{pool="big"}}', "values": "6x120 1x60"},
                    # pool small: the share is high but it is one GPU
                    {"series": f'{share}{{pool="small"}}', "values": "0.9x180"},
                    {"series": f'{gpus}{{pool="small"}}', "values": "1x180"},
                ],
                "alert_rule_test": [
                    {"eval_time": "50m", "alertname": alert, "exp_alerts": []},
                    {"eval_time": "90m", "alertname": alert, "exp_alerts": [_rendered(alert, {"pool": "big"}, "50%")]},
                    {"eval_time": "150m", "alertname": alert, "exp_alerts": []},
                ],
            }
        ],
    )


def test_every_metric_an_alert_uses_is_one_the_exporter_defines() -> None:
    registry = CollectorRegistry()
    exporter = Exporter(registry)
    exporter.set_figures(compute_figures(cluster(node("a", gpus=8), pod("p", on="a", gpus=1))), cordoned_nodes=0)
    exporter.record_run("success", evictions=1, gained=(8, 8))
    exporter.record_cycle(1.0)
    exporter.record_cycle_error()
    exporter.set_pause(0.0)
    text = generate_latest(registry).decode()
    exported = set(re.findall(r"^# TYPE (\w+) ", text, re.M)) | set(re.findall(r"^(\w+)[{ ]", text, re.M))
    used = {
        name
        for group in _spec()["groups"]
        for r in group["rules"]
        for name in re.findall(r"gpu_compactor_\w+", r["expr"])
    }
    assert used and used <= exported, sorted(used - exported)


@needs_promtool
def test_run_fell_short_compares_the_leaders_own_last_run_only(tmp_path: Path) -> None:
    alert = "GpuCompactorRunFellShort"
    planned, freed, leader = (
        "gpu_compactor_last_run_planned_freed_gpus",
        "gpu_compactor_last_run_freed_gpus",
        "gpu_compactor_leader",
    )
    # Replica a led and its last run freed 16 of 16; b took over at 30 min and its run freed 8 of 8: a's stale 16 planned
    # against b's 8 measured must not fire. At 60 min b's next run frees 0 of 8 planned: that fires.
    _test_rules(
        tmp_path,
        [
            {
                "interval": "1m",
                "input_series": [
                    {"series": f'{planned}{{instance="a"}}', "values": "16x90"},
                    {"series": f'{freed}{{instance="a"}}', "values": "16x90"},
                    {"series": f'{leader}{{instance="a"}}', "values": "1x30 0x60"},
                    {"series": f'{planned}{{instance="b"}}', "values": "_x30 8x60"},
                    {"series": f'{freed}{{instance="b"}}', "values": "_x30 8x30 0x30"},
                    {"series": f'{leader}{{instance="b"}}', "values": "0x30 1x60"},
                ],
                "alert_rule_test": [
                    {"eval_time": "20m", "alertname": alert, "exp_alerts": []},
                    {"eval_time": "45m", "alertname": alert, "exp_alerts": []},
                    {"eval_time": "75m", "alertname": alert, "exp_alerts": [_rendered(alert, {}, "8")]},
                ],
            }
        ],
    )


@needs_promtool
def test_paused_fires_while_the_breaker_holds_and_clears_when_its_pause_ends(tmp_path: Path) -> None:
    alert = "GpuCompactorPaused"
    rendered = {
        k: v.replace("{{ $value | humanizeTimestamp }}", "1970-01-01 01:00:00 +0000 UTC")
        for k, v in _rule(alert)["annotations"].items()
    }
    # Not paused (0) for 10 minutes, then paused until t = 3600 s (one hour from the start).
    _test_rules(
        tmp_path,
        [
            {
                "interval": "1m",
                "input_series": [
                    {"series": 'gpu_compactor_paused_until_timestamp_seconds{pod="a"}', "values": "0x10 3600x110"}
                ],
                "alert_rule_test": [
                    {"eval_time": "5m", "alertname": alert, "exp_alerts": []},
                    {
                        "eval_time": "30m",
                        "alertname": alert,
                        "exp_alerts": [{"exp_labels": {"severity": "warning"}, "exp_annotations": rendered}],
                    },
                    {"eval_time": "61m", "alertname": alert, "exp_alerts": []},  # the pause is over
                ],
            }
        ],
    )

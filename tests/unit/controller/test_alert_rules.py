"""The alerts of manifests/monitoring/prometheusrule.yaml, evaluated by ``promtool test rules``.

Each alert is shown firing on the series that should fire it and silent on the ones that should not
(a replica whose cycles complete, a long but legitimate cycle, a single API hiccup). The CronJob's alerts are fed the
series a Pushgateway exposes for the groups ``run --once`` pushes (one per installation, replaced by each run, scraped
with honor_labels): they fire on a failed or stopped last run and on a CronJob whose runs stopped ending, never on the
controller's scraped series; the controller's own alerts never fire on the pushed ones. promtool comes with Debian's
``prometheus`` package (or set PROMTOOL); without it those tests skip, except in CI, which requires it. The stall
threshold and the CronJob's silence threshold are also checked, without promtool, against the longest gap the shipped
config, Deployment and CronJob allow; so is every key metric of the compactor having an alert on it.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from apscheduler.triggers.cron import CronTrigger
from prometheus_client import CollectorRegistry, generate_latest

from compactor.app.last_run import LAST_RUN_STATUSES
from compactor.cli import build_parser
from compactor.controller.exporter import Exporter
from compactor.controller.loop import cycle_limit_default
from compactor.metrics.fragmentation import compute_figures
from tests.builders import cluster, node, pod
from tests.manifests import CONTROLLER, CRONJOB, MONITORING, compactor_args, mounted_settings, one_object
from tests.tools import required

PROMTOOL = os.environ.get("PROMTOOL") or shutil.which("promtool")
needs_promtool = pytest.mark.usefixtures("promtool_installed")
# The labels a series pushed by `run --once` has once Prometheus scraped the Pushgateway with honor_labels: the group's
# job and installation (the Pushgateway's empty instance label is no label), and the Pushgateway's own target labels.
INSTALLATION = "gpu-compactor"


def _pushed_labels(installation: str) -> str:
    return f'job="gpu-compactor", installation="{installation}", namespace="monitoring", pod="pushgateway-0"'


PUSHED_LABELS = _pushed_labels(INSTALLATION)
PUSHED = "{" + PUSHED_LABELS + "}"
# A controller replica's series as the ServiceMonitor scrapes it: no installation label.
SCRAPED_LABELS = (
    'job="gpu-compactor-metrics", instance="10.0.0.1:8080", namespace="gpu-compactor", pod="gpu-compactor-a"'
)


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
                    # a daily CronJob's pushed cycle: its schedule is GpuCompactorCronJobNotRunning's to judge
                    {"series": f"{series}{PUSHED}", "values": "0x200"},
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
                    # a pushed counter is one run's errors, 0 or 1: runs that stop on an error every other time flip
                    # it, which increase() would read as new errors; the CronJob has its own alerts
                    {"series": f"{series}{PUSHED}", "values": "0x3 1x3 0x3 1x3 0x3 1x3 0x3 1x160"},
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
        r'time\(\) - gpu_compactor_last_cycle_timestamp_seconds\{installation=""\} > (\d+)',
        _rule("GpuCompactorCyclesStalled")["expr"],
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
    exporter.record_run("succeeded", evictions=1, gained=(8, 8), steering="holds", steering_not_in_effect=True)
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


@needs_promtool
def test_run_failed_counts_the_controllers_failed_runs_and_not_the_pushed_counters(tmp_path: Path) -> None:
    alert = "GpuCompactorRunFailed"
    series = "gpu_compactor_runs_total"
    _test_rules(
        tmp_path,
        [
            {
                "interval": "1m",
                "input_series": [
                    # the controller's leader: one failed run at 20 min
                    {"series": f'{series}{{{SCRAPED_LABELS}, status="failed"}}', "values": "0x20 1x100"},
                    # the CronJob's pushed groups: a failed run at 30 min, a succeeded one at 60 (the counter back to 0)
                    {"series": f'{series}{{{PUSHED_LABELS}, status="failed"}}', "values": "0x30 1x30 0x60"},
                ],
                "alert_rule_test": [
                    {"eval_time": "10m", "alertname": alert, "exp_alerts": []},
                    {"eval_time": "40m", "alertname": alert, "exp_alerts": [_rendered(alert, {}, "1")]},
                    # an hour after the controller's failure; the pushed 0 -> 1 at 30 min is not counted
                    {"eval_time": "85m", "alertname": alert, "exp_alerts": []},
                ],
            }
        ],
    )


def _pushed_runs(statuses: list[str], *, every: int = 30) -> list[dict[str, Any]]:
    """The Pushgateway's ``gpu_compactor_last_run_status`` series, one sample a minute, for a CronJob whose runs end every
    ``every`` minutes with ``statuses`` in turn (the first at minute 0): each push replaces the last, so a series keeps
    its value until the next push changes it."""
    return [
        {
            "series": f'gpu_compactor_last_run_status{{{PUSHED_LABELS}, status="{status}"}}',
            "values": " ".join(f"{1 if ended == status else 0}x{every - 1}" for ended in statuses),
        }
        for status in LAST_RUN_STATUSES
    ]


def _cronjob_alert(alert: str, installation: str = INSTALLATION, value: str = "") -> dict[str, Any]:
    """The alert as promtool renders it for ``installation`` (``value``: the rendered ``$value | humanizeDuration``)."""
    rendered = {}
    for key, text in _rule(alert)["annotations"].items():
        text = text.replace("{{ $labels.installation }}", installation).replace(
            "{{ $value | humanizeDuration }}", value
        )
        assert "{{" not in text, f"{alert}: a template this test does not render: {text}"
        rendered[key] = text
    return {"exp_labels": {"severity": "warning", "installation": installation}, "exp_annotations": rendered}


@needs_promtool
def test_cronjob_run_failed_fires_while_the_last_pushed_run_failed_even_twice_running(tmp_path: Path) -> None:
    alert = "GpuCompactorCronJobRunFailed"
    # Runs end at 0, 30, 60, 90 min: succeeded, failed, failed again (the same pushed 1: increase() sees nothing new),
    # then succeeded. Beside them, a controller replica whose last run failed: the controller's own alert says that.
    _test_rules(
        tmp_path,
        [
            {
                "interval": "1m",
                "input_series": [
                    *_pushed_runs(["succeeded", "failed", "failed", "succeeded", "succeeded"]),
                    {
                        "series": f'gpu_compactor_last_run_status{{{SCRAPED_LABELS}, status="failed"}}',
                        "values": "1x150",
                    },
                ],
                "alert_rule_test": [
                    {"eval_time": "15m", "alertname": alert, "exp_alerts": []},
                    {"eval_time": "45m", "alertname": alert, "exp_alerts": [_cronjob_alert(alert)]},
                    {"eval_time": "85m", "alertname": alert, "exp_alerts": [_cronjob_alert(alert)]},
                    {"eval_time": "100m", "alertname": alert, "exp_alerts": []},  # the next run succeeded
                ],
            }
        ],
    )


@needs_promtool
def test_cronjob_run_stopped_fires_while_the_last_pushed_run_was_stopped_short(tmp_path: Path) -> None:
    alert = "GpuCompactorCronJobRunStopped"
    _test_rules(
        tmp_path,
        [
            {
                "interval": "1m",
                "input_series": _pushed_runs(["measured", "held", "stopped", "partial", "failed"]),
                "alert_rule_test": [
                    {"eval_time": "45m", "alertname": alert, "exp_alerts": []},  # held: nothing changed on purpose
                    {"eval_time": "75m", "alertname": alert, "exp_alerts": [_cronjob_alert(alert)]},
                    {"eval_time": "105m", "alertname": alert, "exp_alerts": []},  # partial, then failed: other alerts
                    {"eval_time": "135m", "alertname": alert, "exp_alerts": []},
                ],
            }
        ],
    )


def _cronjob_silence_threshold() -> int:
    match = re.fullmatch(
        r'time\(\) - max by \(installation\) \(gpu_compactor_last_run_timestamp_seconds\{installation!=""\}\) > (\d+)',
        _rule("GpuCompactorCronJobNotRunning")["expr"],
    )
    assert match, _rule("GpuCompactorCronJobNotRunning")["expr"]
    return int(match[1])


@needs_promtool
def test_cronjob_not_running_fires_once_no_pushed_run_has_ended_for_two_hours_only(tmp_path: Path) -> None:
    alert = "GpuCompactorCronJobNotRunning"
    series = "gpu_compactor_last_run_timestamp_seconds"
    assert _cronjob_silence_threshold() == 7200  # the times below are read against it
    every_half_hour = " ".join(f"{run * 1800}x29" for run in range(11))  # an end every 30 min for 5.5 h
    _test_rules(
        tmp_path,
        [
            {
                "interval": "1m",
                "input_series": [
                    # runs end at 0, 30 and 60 min, then none: the Pushgateway keeps showing the last end
                    {
                        "series": f"{series}{{{_pushed_labels('stuck')}}}",
                        "values": "0x29 1800x29 3600x240",
                    },
                    {
                        "series": f"{series}{{{_pushed_labels('healthy')}}}",
                        "values": every_half_hour,
                    },
                    # the longest legitimate gap: a run ends at 0, the next starts 10 min late at 40 and runs until the
                    # Job's deadline stops it (101 min), then runs end every 30 min again
                    {
                        "series": f"{series}{{{_pushed_labels('long')}}}",
                        "values": "0x100 " + " ".join(f"{6060 + run * 1800}x29" for run in range(7)),
                    },
                    # a controller replica's last run, long ago: its cycles are GpuCompactorCyclesStalled's to judge
                    {"series": f"{series}{{{SCRAPED_LABELS}}}", "values": "0x300"},
                ],
                "alert_rule_test": [
                    {"eval_time": "100m", "alertname": alert, "exp_alerts": []},
                    {"eval_time": "180m", "alertname": alert, "exp_alerts": []},  # 7200 s since the last end: not over
                    {
                        "eval_time": "181m",
                        "alertname": alert,
                        "exp_alerts": [_cronjob_alert(alert, "stuck", "2h 1m 0s")],
                    },
                    {
                        "eval_time": "300m",
                        "alertname": alert,
                        "exp_alerts": [_cronjob_alert(alert, "stuck", "4h 0m 0s")],
                    },
                ],
            }
        ],
    )


def test_the_cronjob_silence_threshold_outlasts_the_longest_gap_the_shipped_cronjob_allows() -> None:
    cronjob = one_object(CRONJOB, "CronJob")
    schedule = CronTrigger.from_crontab(cronjob["spec"]["schedule"], timezone="UTC")
    start = datetime(2026, 1, 5, tzinfo=UTC)  # a Monday: a week of fire times covers any weekly schedule
    fires, at = [], schedule.get_next_fire_time(None, start)
    while at is not None and at < start + timedelta(days=8):
        fires.append(at)
        at = schedule.get_next_fire_time(at, at + timedelta(seconds=1))
    period = max((later - earlier).total_seconds() for earlier, later in itertools.pairwise(fires))
    job = cronjob["spec"]["jobTemplate"]["spec"]
    grace = job["template"]["spec"].get("terminationGracePeriodSeconds", 30)
    # one run ends at once; the next starts as late as the CronJob allows, runs until the Job's deadline and stops
    longest_gap = period + cronjob["spec"]["startingDeadlineSeconds"] + job["activeDeadlineSeconds"] + grace
    threshold = _cronjob_silence_threshold()
    assert (
        longest_gap < threshold <= longest_gap + 3600
    )  # never between two legitimate runs, and not hours later either


@needs_promtool
def test_fenced_too_long_fires_after_two_hours_of_a_fence_and_not_for_a_run_that_lifts_its_own(tmp_path: Path) -> None:
    alert = "GpuCompactorNodeFencedTooLong"
    series = "gpu_compactor_fenced_nodes"
    expected = {
        "exp_labels": {"severity": "critical"},
        "exp_annotations": {k: v.replace("{{ $value }}", "1") for k, v in _rule(alert)["annotations"].items()},
    }
    _test_rules(
        tmp_path,
        [
            {
                "interval": "1m",
                "input_series": [
                    # the CronJob's pushed figure: a run fences two nodes for 40 minutes and lifts the fences; later a
                    # run stops midway and leaves one node fenced (each push replaces the last: the value persists)
                    {"series": f"{series}{PUSHED}", "values": "2x40 0x20 1x200"},
                ],
                "alert_rule_test": [
                    {"eval_time": "50m", "alertname": alert, "exp_alerts": []},
                    {"eval_time": "3h", "alertname": alert, "exp_alerts": []},  # fenced for 1 h 59 min: not yet
                    {"eval_time": "3h2m", "alertname": alert, "exp_alerts": [expected]},
                ],
            }
        ],
    )


@needs_promtool
def test_steering_policy_not_in_effect_fires_on_the_leaders_last_run_and_a_pushed_real_run(tmp_path: Path) -> None:
    alert = "GpuCompactorSteeringPolicyNotInEffect"
    gauge, leader = "gpu_compactor_steering_policy_not_in_effect", "gpu_compactor_leader"
    # Replica a leads for 30 min and concludes the policy is not in effect at 10 min; b takes over at 30 min and its runs
    # find it in effect again (a keeps its stale 1). A CronJob installation pushes a real run that concluded it at 60 min.
    cron = 'installation="batch", job="gpu-compactor", pod="pushgateway-0"'
    _test_rules(
        tmp_path,
        [
            {
                "interval": "1m",
                "input_series": [
                    {"series": f'{gauge}{{instance="a"}}', "values": "0x10 1x80"},
                    {"series": f'{leader}{{instance="a"}}', "values": "1x30 0x60"},
                    {"series": f'{gauge}{{instance="b"}}', "values": "_x30 0x60"},
                    {"series": f'{leader}{{instance="b"}}', "values": "0x30 1x60"},
                    {"series": f"{gauge}{{{cron}}}", "values": "0x60 1x30"},
                    {"series": f"{leader}{{{cron}}}", "values": "1x90"},
                ],
                "alert_rule_test": [
                    {"eval_time": "5m", "alertname": alert, "exp_alerts": []},
                    {"eval_time": "20m", "alertname": alert, "exp_alerts": [_rendered(alert, {}, "1")]},
                    {"eval_time": "45m", "alertname": alert, "exp_alerts": []},  # a's 1 is stale: b leads
                    {
                        "eval_time": "75m",
                        "alertname": alert,
                        "exp_alerts": [_rendered(alert, {"installation": "batch"}, "1")],
                    },
                ],
            }
        ],
    )


METRICS = (
    "gpu_compactor_stranded_share",
    "gpu_compactor_blocked_demand_gpu_equivalents",
    "gpu_compactor_runs_total",
    "gpu_compactor_fenced_nodes",
    "gpu_compactor_last_cycle_timestamp_seconds",
    "gpu_compactor_cycle_errors_total",
    "gpu_compactor_last_run_status",
    "gpu_compactor_last_run_timestamp_seconds",
)


def test_the_alerts_use_the_exported_metric_names() -> None:
    rule = one_object(MONITORING, "PrometheusRule")
    alerts = {r["alert"]: r["expr"] for group in rule["spec"]["groups"] for r in group["rules"]}
    # the tests above run the controller-health and CronJob ones through promtool
    assert len(alerts) == 14
    exprs = " ".join(alerts.values())
    for metric in METRICS:
        assert metric in exprs, f"no alert on {metric}"
    assert 'gpu_compactor_runs_total{status="failed", installation=""}' in exprs
    assert (
        "gpu_compactor_last_run_planned_freed_gpus and on (instance) (gpu_compactor_leader == 1)"
        in alerts["GpuCompactorRunFellShort"]
    )
    assert "by (pool)" in alerts["GpuCapacityStranded"]
    assert "fragmentation_rate" not in exprs  # compaction cannot lower it: no alert keys on it (issue 14)
    assert 'gpu_compactor_mig_reconfigurations_total{result!="success"}' in alerts["GpuCompactorMigRecutFailed"]


@needs_promtool
def test_no_successful_run_fires_after_a_day_without_one_in_either_run_mode(tmp_path: Path) -> None:
    """Issue 43, item 8: runs held or failing for good (a history the API server refuses, a breaker reopening) used to
    raise no alert. The age of the last successful run now does, for the controller and for each CronJob alike."""
    alert = "GpuCompactorNoSuccessfulRun"
    series = "gpu_compactor_last_run_success_timestamp_seconds"
    hour = 3600

    def expected(installation: str, value: str) -> dict[str, Any]:
        rendered = {}
        for key, text in _rule(alert)["annotations"].items():
            text = text.replace("{{ $labels.installation }}", installation).replace(
                "{{ $value | humanizeDuration }}", value
            )
            assert "{{" not in text, text
            rendered[key] = text
        labels = {"severity": "warning", **({"installation": installation} if installation else {})}
        return {"exp_labels": labels, "exp_annotations": rendered}

    _test_rules(
        tmp_path,
        [
            {
                "interval": "1h",
                "input_series": [
                    # a controller whose last success was at 0: held ever since
                    {"series": f"{series}{{{SCRAPED_LABELS}}}", "values": "0x40"},
                    # a CronJob succeeding every hour
                    {"series": f"{series}{{{_pushed_labels('busy')}}}", "values": f"0+{hour}x40"},
                ],
                "alert_rule_test": [
                    {"eval_time": "26h", "alertname": alert, "exp_alerts": []},  # 26 h: not over the threshold
                    {"eval_time": "27h", "alertname": alert, "exp_alerts": [expected("", "1d 3h 0m 0s")]},
                ],
            }
        ],
    )

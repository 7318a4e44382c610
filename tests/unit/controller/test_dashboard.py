"""The Grafana dashboard of manifests/monitoring/dashboard.yaml: a ConfigMap the Grafana sidecar loads, holding the dashboard JSON.

Covers: the ConfigMap is labelled for kube-prometheus-stack's sidecar and its JSON parses; the templating offers a
Prometheus data source and the pools; every panel is a timeseries or a stat reading the chosen data source, with ids and
places of its own; every metric a panel reads is one the exporter defines, and every metric the exporter defines is
shown; pool series are filtered by the pool variable, the rest are not; with promtool (Debian's ``prometheus`` package,
or PROMTOOL), every expression parses and, on two replicas exporting the same figures, figures count once, counters add
up across replicas and the last run's and plan's gauges are the leader's; the last run's status and times are the
leader's beside those a CronJob pushed to a Pushgateway.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from compactor.controller.exporter import Exporter
from compactor.metrics.fragmentation import compute_figures
from tests.builders import cluster
from tests.manifests import MONITORING, NAMESPACE, one_object
from tests.scenarios.pools import small_cluster

PROMTOOL = os.environ.get("PROMTOOL") or shutil.which("promtool")
needs_promtool = pytest.mark.usefixtures("promtool_installed")

DASHBOARD = "gpu-compactor-dashboard"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
POOL_FILTER = '{pool=~"$pool"}'
METRIC = re.compile(r"\b(gpu_compactor_\w+)(\{[^}]*\})?")
# What the dashboard is for (issue 14): these must be exported and shown, whatever else is.
HEADLINE = (
    "gpu_compactor_whole_free_gpus",
    "gpu_compactor_stranded_share",
    "gpu_compactor_stranded_gpu_equivalents",
    "gpu_compactor_free_gpu_equivalents",
    "gpu_compactor_blocked_demand_gpu_equivalents",
    "gpu_compactor_blocked_pending_pods",
    "gpu_compactor_last_run_planned_freed_gpus",
    "gpu_compactor_last_run_freed_gpus",
    "gpu_compactor_runs_total",
    "gpu_compactor_evictions_total",
    "gpu_compactor_last_plan_seconds",
    "gpu_compactor_last_plan_gap",
    "gpu_compactor_last_plan_moves",
    "gpu_compactor_steering_mechanism",
    "gpu_compactor_steered_runs_total",
    "gpu_compactor_fenced_nodes",
    "gpu_compactor_last_run_status",
    "gpu_compactor_last_run_timestamp_seconds",
    "gpu_compactor_last_run_success_timestamp_seconds",
    "gpu_compactor_leader",
    "gpu_compactor_mig_idle_instances",
)

Doc = dict[str, Any]


@pytest.fixture
def promtool_installed() -> None:
    """As in tests/unit/controller/test_alert_rules.py: skip without promtool, fail when CI requires it."""
    if PROMTOOL is None:
        if os.environ.get("GPU_COMPACTOR_REQUIRE_PROMTOOL"):
            pytest.fail(
                "promtool not installed but GPU_COMPACTOR_REQUIRE_PROMTOOL is set (Debian: apt-get install prometheus)"
            )
        pytest.skip("promtool not installed (Debian: apt-get install prometheus, or set PROMTOOL)")


def _config_map() -> Doc:
    return one_object(MONITORING, "ConfigMap", DASHBOARD)


def _dashboard() -> Doc:
    (text,) = _config_map()["data"].values()
    dashboard: Doc = json.loads(text)
    return dashboard


def _panels(panels: list[Doc]) -> Iterator[Doc]:
    """Every panel, those inside (collapsed) rows included."""
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels") or [])


def _graphs() -> list[Doc]:
    return [panel for panel in _panels(_dashboard()["panels"]) if panel["type"] != "row"]


def _exprs() -> list[str]:
    return [target["expr"] for panel in _graphs() for target in panel["targets"]]


def _expr(title: str, ref: str = "A") -> str:
    (panel,) = [panel for panel in _graphs() if panel["title"] == title]
    (expr,) = [target["expr"] for target in panel["targets"] if target["refId"] == ref]
    assert isinstance(expr, str)
    return expr


def _promql(expr: str, pool: str = ".*") -> str:
    """The expression Grafana sends for the pool variable's value ``pool`` (All: ``.*``)."""
    sent = expr.replace("$pool", pool)
    assert "$" not in sent, f"a Grafana variable this test does not substitute: {expr}"
    return sent


def _exported() -> dict[str, set[str]]:
    """Metric name -> its label names, as an exporter with every kind of update exports them (counters as ``_total``)."""
    registry = CollectorRegistry()
    exporter = Exporter(registry)
    exporter.set_figures(compute_figures(cluster(*small_cluster())), cordoned_nodes=0)
    exporter.record_run("succeeded", evictions=3, gained=(8, 8), recuts=("success",), steering="policy")
    exporter.record_plan(seconds=1.5, gap=0.0, moves=3)
    exporter.record_cycle(1_767_225_600.0)
    exporter.record_cycle_error()
    exporter.set_pause(0.0)
    exporter.set_leader(True)
    names: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(exporter.render()[0].decode()):
        suffix = {"counter": "_total", "histogram": "_bucket"}.get(family.type, "")  # what a panel reads of it
        name = family.name + suffix
        names[name] = {label for sample in family.samples for label in sample.labels}
    return names


# ----- the ConfigMap and the JSON ------------------------------------------------------------------


def test_the_configmap_is_labelled_for_the_grafana_sidecar_and_holds_one_dashboard_that_parses() -> None:
    config_map = _config_map()
    assert config_map["metadata"]["namespace"] == NAMESPACE
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"  # a string: kube-prometheus-stack's labelValue
    (key,) = config_map["data"]
    assert key.endswith(".json")
    dashboard = _dashboard()
    assert dashboard["uid"] == "gpu-compactor" and dashboard["title"]
    assert dashboard["schemaVersion"] == 39
    assert dashboard.get("id") is None  # a provisioned dashboard gets its id from Grafana


def test_the_templating_offers_a_prometheus_datasource_and_the_pools() -> None:
    variables = {v["name"]: v for v in _dashboard()["templating"]["list"]}
    assert list(variables) == ["datasource", "pool"]  # the data source first: the pool query runs against it
    datasource, pool = variables["datasource"], variables["pool"]
    assert (datasource["type"], datasource["query"]) == ("datasource", "prometheus")
    assert pool["type"] == "query" and pool["datasource"] == DATASOURCE
    assert pool["query"] == pool["definition"] == "label_values(gpu_compactor_free_gpu_equivalents, pool)"
    assert pool["includeAll"] and pool["multi"] and pool["allValue"] == ".*"  # read as a regex: pool=~"$pool"


def test_every_panel_is_a_timeseries_or_stat_on_the_chosen_datasource_with_an_id_and_a_place_of_its_own() -> None:
    dashboard = _dashboard()
    panels = list(_panels(dashboard["panels"]))
    assert {panel["type"] for panel in panels} == {"row", "timeseries", "stat"}
    ids = [panel["id"] for panel in panels]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    titles = [panel["title"] for panel in panels]
    assert len(titles) == len(set(titles)), "panel titles repeat"
    for panel in _graphs():
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"] and panel.get("description"), panel["title"]
        refs = [target["refId"] for target in panel["targets"]]
        assert len(refs) == len(set(refs)), f"{panel['title']}: refIds repeat"
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE and target["expr"].strip(), panel["title"]

    def cells(group: list[Doc]) -> None:
        taken: dict[tuple[int, int], str] = {}
        for panel in group:
            pos = panel["gridPos"]
            assert pos["w"] > 0 and pos["h"] > 0 and pos["x"] >= 0 and pos["y"] >= 0 and pos["x"] + pos["w"] <= 24, (
                panel["title"]
            )
            for x in range(pos["x"], pos["x"] + pos["w"]):
                for y in range(pos["y"], pos["y"] + pos["h"]):
                    assert (x, y) not in taken, f"{panel['title']} overlaps {taken[(x, y)]}"
                    taken[(x, y)] = panel["title"]

    cells(dashboard["panels"])
    for row in dashboard["panels"]:
        if row["type"] == "row" and row["panels"]:
            assert row["collapsed"], f"row {row['title']}: only a collapsed row holds its panels"
            cells(row["panels"])
            assert all(panel["gridPos"]["y"] > row["gridPos"]["y"] for panel in row["panels"]), row["title"]


# ----- the metrics -----------------------------------------------------------------------------


def test_the_panels_read_exactly_the_metrics_the_exporter_defines() -> None:
    exported = set(_exported())
    assert set(HEADLINE) <= exported, sorted(set(HEADLINE) - exported)
    used = {match.group(1) for expr in _exprs() for match in METRIC.finditer(expr)}
    assert used <= exported, f"panels read metrics the exporter does not define: {sorted(used - exported)}"
    assert exported <= used, f"metrics no panel shows (add a panel): {sorted(exported - used)}"


def test_pool_series_are_filtered_by_the_pool_variable_and_only_those() -> None:
    exported = _exported()
    pooled = {name for name, labels in exported.items() if "pool" in labels}
    assert {
        "gpu_compactor_whole_free_gpus",
        "gpu_compactor_stranded_share",
        "gpu_compactor_mig_idle_instances",
    } <= pooled
    for expr in _exprs():
        for match in METRIC.finditer(expr):
            name, selector = match.group(1), match.group(2) or ""
            if name in pooled:
                assert selector == POOL_FILTER, f"{expr}: {name} is not filtered by the pool variable"
            else:
                assert "pool" not in selector, f"{expr}: {name} has no pool label; filtering by it shows nothing"


def test_every_series_is_aggregated_over_the_replicas_or_is_the_leader_filter() -> None:
    """Both replicas export every metric: a series read bare would be drawn twice. Syntax only; the promtool tests below
    evaluate the main panels on two replicas."""
    aggregated = re.compile(r"\b(max|sum)( (by|without) \([\w, ]*\))? ?\((increase\()?$")
    for expr in _exprs():
        for match in METRIC.finditer(expr):
            before = expr[: match.start()]
            leader_filter = before.endswith(("and on (instance) (", "unless on (instance) ("))
            if match.group(1) == "gpu_compactor_leader" and leader_filter:
                continue
            assert aggregated.search(before), f"{expr}: {match.group(1)} is not aggregated over the replicas"


# ----- promtool ---------------------------------------------------------------------------------


def _promtool(tmp_path: Path, *args: str) -> None:
    assert PROMTOOL is not None
    result = subprocess.run([PROMTOOL, *args], cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, f"promtool {' '.join(args)}:\n{result.stdout}{result.stderr}"


def _write_rules(tmp_path: Path) -> None:
    """Every panel expression as a recording rule (promtool checks rule files, not bare expressions)."""
    rules = [
        {"record": f"dashboard:panel_{panel['id']}:{target['refId'].lower()}", "expr": _promql(target["expr"])}
        for panel in _graphs()
        for target in panel["targets"]
    ]
    (tmp_path / "rules.yaml").write_text(
        yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}), encoding="utf-8"
    )


@needs_promtool
def test_promtool_accepts_every_panel_expression(tmp_path: Path) -> None:
    _write_rules(tmp_path)
    _promtool(tmp_path, "check", "rules", "rules.yaml")


REPLICAS = {
    "a": '{instance="10.0.0.1:8080", pod="gpu-compactor-a", job="gpu-compactor-metrics", namespace="gpu-compactor"',
    "b": '{instance="10.0.0.2:8080", pod="gpu-compactor-b", job="gpu-compactor-metrics", namespace="gpu-compactor"',
}


def _series(name: str, replica: str, values: str, **labels: str) -> Doc:
    extra = "".join(f', {key}="{value}"' for key, value in labels.items())
    return {"series": f"{name}{REPLICAS[replica]}{extra}}}", "values": values}


def _sample(value: float, **labels: str) -> Doc:
    return {"labels": "{" + ", ".join(f'{key}="{text}"' for key, text in labels.items()) + "}", "value": value}


@needs_promtool
def test_two_replicas_count_figures_once_add_their_runs_and_the_leader_speaks_for_the_last_run_and_plan(
    tmp_path: Path,
) -> None:
    # Two hours at one sample a minute; replica a leads the first hour, b the second.
    series = []
    for replica in REPLICAS:  # the same figures from both replicas
        series += [
            _series("gpu_compactor_whole_free_gpus", replica, "8x120", pool="a100"),
            _series("gpu_compactor_whole_free_gpus", replica, "16x120", pool="h100"),
            _series("gpu_compactor_stranded_share", replica, "0.25x120", pool="a100"),
            _series("gpu_compactor_blocked_demand_gpu_equivalents", replica, "4x120"),
        ]
    series += [
        _series("gpu_compactor_leader", "a", "1x60 0x59"),
        _series("gpu_compactor_leader", "b", "0x60 1x59"),
        # a planned and ran in the first hour and keeps its last values as a standby; b's are the last ones in the second
        _series("gpu_compactor_last_plan_seconds", "a", "30x120"),
        _series("gpu_compactor_last_plan_seconds", "b", "12x120"),
        _series("gpu_compactor_last_run_planned_freed_gpus", "a", "16x120"),
        _series("gpu_compactor_last_run_planned_freed_gpus", "b", "8x120"),
        _series("gpu_compactor_steering_mechanism", "a", "1x120", mechanism="policy"),
        _series("gpu_compactor_steering_mechanism", "a", "0x120", mechanism="holds"),
        _series("gpu_compactor_steering_mechanism", "b", "0x120", mechanism="policy"),
        _series("gpu_compactor_steering_mechanism", "b", "1x120", mechanism="holds"),
        # one succeeded run a minute on whichever replica leads
        _series("gpu_compactor_runs_total", "a", "0+1x60 60x59", status="succeeded"),
        _series("gpu_compactor_runs_total", "b", "0x60 1+1x59", status="succeeded"),
    ]
    whole_free, stranded = _expr("Whole-free GPUs per pool"), _expr("Stranded share per pool")
    plan_seconds, planned = _expr("Planning time (last plan)"), _expr("Freed GPUs: planned vs measured (last run)")
    steering, runs = _expr("Steering mechanism"), _expr("Runs by status (last hour)")
    blocked = _expr("Blocked demand")
    tests = [
        {
            "expr": _promql(whole_free),
            "eval_time": "30m",
            "exp_samples": [_sample(8, pool="a100"), _sample(16, pool="h100")],
        },
        {"expr": _promql(whole_free, "a100"), "eval_time": "30m", "exp_samples": [_sample(8, pool="a100")]},
        {
            "expr": _promql(_expr("Whole-free GPUs")),
            "eval_time": "30m",
            "exp_samples": [_sample(24)],
        },  # 8 + 16, not twice that
        {"expr": _promql(stranded), "eval_time": "30m", "exp_samples": [_sample(0.25, pool="a100")]},
        {"expr": _promql(blocked), "eval_time": "30m", "exp_samples": [_sample(4)]},
        {"expr": _promql(plan_seconds), "eval_time": "30m", "exp_samples": [_sample(30)]},
        {
            "expr": _promql(plan_seconds),
            "eval_time": "90m",
            "exp_samples": [_sample(12)],
        },  # not a's larger, older value
        {"expr": _promql(planned), "eval_time": "90m", "exp_samples": [_sample(8)]},
        {"expr": _promql(steering), "eval_time": "30m", "exp_samples": [_sample(1, mechanism="policy")]},
        {"expr": _promql(steering), "eval_time": "90m", "exp_samples": [_sample(1, mechanism="holds")]},
        {"expr": _promql(runs), "eval_time": "60m", "exp_samples": [_sample(60, status="succeeded")]},
        {
            "expr": _promql(runs),
            "eval_time": "120m",
            "exp_samples": [_sample(60, status="succeeded")],
        },  # b's runs, after a's
        {
            "expr": _promql(runs),
            "eval_time": "90m",
            "exp_samples": [_sample(60, status="succeeded")],
        },  # 30 of a's and 30 of b's
    ]
    _write_rules(tmp_path)
    unit = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, "promql_expr_test": tests}],
    }
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(unit, sort_keys=False), encoding="utf-8")
    _promtool(tmp_path, "test", "rules", "test.yaml")


@needs_promtool
def test_the_last_run_is_the_leaders_beside_each_pushed_cronjob_run_and_its_times_the_latest(tmp_path: Path) -> None:
    # Replica a led and its last run failed at 10 min; b leads and its last run succeeded at 40 min, then partial at 80.
    # A CronJob installation pushes its runs to a Pushgateway: stopped at 30 min, succeeded at 60.
    pushed = 'job="gpu-compactor", installation="batch", namespace="monitoring", pod="pushgateway-0"'
    series = [
        _series("gpu_compactor_leader", "a", "0x120"),
        _series("gpu_compactor_leader", "b", "1x120"),
        _series("gpu_compactor_last_run_status", "a", "1x120", status="failed"),
        _series("gpu_compactor_last_run_status", "a", "0x120", status="succeeded"),
        _series("gpu_compactor_last_run_status", "b", "_x40 0x39 1x40", status="partial"),
        _series("gpu_compactor_last_run_status", "b", "_x40 1x39 0x40", status="succeeded"),
        _series("gpu_compactor_last_run_timestamp_seconds", "a", "600x120"),
        _series("gpu_compactor_last_run_timestamp_seconds", "b", "_x40 2400x39 4800x40"),
        _series("gpu_compactor_last_run_success_timestamp_seconds", "b", "_x40 2400x80"),
        # the Pushgateway's leader series says whether the run held the Lease: it must not hide the pushed status
        {"series": f"gpu_compactor_leader{{{pushed}}}", "values": "0x120"},
        {"series": f'gpu_compactor_last_run_status{{{pushed}, status="stopped"}}', "values": "1x59 0x60"},
        {"series": f'gpu_compactor_last_run_status{{{pushed}, status="succeeded"}}', "values": "0x59 1x60"},
        {"series": f"gpu_compactor_last_run_timestamp_seconds{{{pushed}}}", "values": "1800x59 3600x60"},
        {"series": f"gpu_compactor_last_run_success_timestamp_seconds{{{pushed}}}", "values": "_x59 3600x60"},
    ]
    status = _expr("Last run status")
    ended, succeeded = _expr("Time since the last run ended"), _expr("Time since the last run ended", "B")
    tests = [
        {
            "expr": _promql(status),
            "eval_time": "50m",
            "exp_samples": [_sample(1, status="succeeded"), _sample(1, installation="batch", status="stopped")],
        },
        {
            "expr": _promql(status),
            "eval_time": "100m",
            "exp_samples": [_sample(1, status="partial"), _sample(1, installation="batch", status="succeeded")],
        },
        # 100 min = 6000 s: the controller's latest end is b's (4800 s), not a's older one
        {
            "expr": _promql(ended),
            "eval_time": "100m",
            "exp_samples": [_sample(1200), _sample(2400, installation="batch")],
        },
        {
            "expr": _promql(succeeded),
            "eval_time": "100m",
            "exp_samples": [_sample(3600), _sample(2400, installation="batch")],
        },
    ]
    _write_rules(tmp_path)
    unit = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, "promql_expr_test": tests}],
    }
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(unit, sort_keys=False), encoding="utf-8")
    _promtool(tmp_path, "test", "rules", "test.yaml")

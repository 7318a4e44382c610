"""The Prometheus exporter: values of every series from the figures of a small cluster, no stale series, counters, the
last run's status and times."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from compactor.actions.run.context import AbortReason
from compactor.app.last_run import LAST_RUN_STATUSES
from compactor.controller.exporter import ROLLBACK_REASONS, Exporter
from compactor.metrics.fragmentation import compute_figures
from tests.builders import A100_40, H100_80, cluster, node, pod
from tests.scenarios.pools import small_cluster

Obj = dict[str, Any]


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_the_pool_series_carry_the_figures_of_each_pool() -> None:
    registry = CollectorRegistry()
    exporter = Exporter(registry)
    snapshot = cluster(*small_cluster())
    figures = compute_figures(snapshot)
    exporter.set_figures(figures, cordoned_nodes=1)

    pools = {p.name: p for p in figures.pools}
    assert set(pools) == {A100_40, H100_80}
    for name, pool in pools.items():
        assert value(registry, "gpu_compactor_free_gpu_equivalents", pool=name) == pytest.approx(pool.free_gpus)
        assert value(registry, "gpu_compactor_whole_free_nodes", pool=name) == pool.whole_free_nodes
        assert value(registry, "gpu_compactor_stranded_gpu_equivalents", pool=name) == pytest.approx(pool.stranded_gpus)
        assert value(registry, "gpu_compactor_stranded_share", pool=name) == pytest.approx(pool.stranded_share)
        assert value(registry, "gpu_compactor_busy_node_free_gpu_equivalents", pool=name) == pytest.approx(
            pool.busy_free_gpus
        )
        assert value(registry, "gpu_compactor_whole_free_gpus", pool=name) == pool.whole_free_physical_gpus
        assert value(registry, "gpu_compactor_fragmentation_rate", pool=name) == pytest.approx(pool.fragmentation_rate)
        assert value(registry, "gpu_compactor_fgd_fragmentation_rate", pool=name) == pytest.approx(
            pool.fgd_fragmentation_rate
        )
    # concrete numbers: A100 pool = 4 free on a-1, 8 on a-2, half a GPU of MIG on m-1; H100 = 7 free
    assert value(registry, "gpu_compactor_free_gpu_equivalents", pool=A100_40) == pytest.approx(12.5)
    assert value(registry, "gpu_compactor_free_gpu_equivalents", pool=H100_80) == pytest.approx(7.0)
    assert value(registry, "gpu_compactor_whole_free_nodes", pool=A100_40) == 1
    assert value(registry, "gpu_compactor_whole_free_nodes", pool=H100_80) == 0
    assert value(registry, "gpu_compactor_whole_free_gpus", pool=A100_40) == 8  # a-2: 8 physical GPUs, no GPU pod
    # a-1's 4 free GPUs take 2-GPU (and 1-GPU) pods, m-1's idle 3g.20gb takes the 3g.20gb shape: nothing stranded
    assert value(registry, "gpu_compactor_stranded_gpu_equivalents", pool=A100_40) == 0
    assert value(registry, "gpu_compactor_busy_node_free_gpu_equivalents", pool=A100_40) == pytest.approx(4.5)
    assert value(registry, "gpu_compactor_blocked_demand_gpu_equivalents") == 0
    assert value(registry, "gpu_compactor_mig_idle_instances", pool=A100_40, profile="3g.20gb") == 1
    assert value(registry, "gpu_compactor_mig_idle_rate", pool=A100_40) == pytest.approx(0.5)
    assert value(registry, "gpu_compactor_mig_idle_rate", pool=H100_80) is None  # no MIG: undefined, no series
    assert value(registry, "gpu_compactor_cluster_fragmentation_rate") == pytest.approx(
        figures.cluster.fragmentation_rate
    )
    assert value(registry, "gpu_compactor_blocked_pending_pods") == 0
    assert value(registry, "gpu_compactor_fenced_nodes") == 1


def test_blocked_pending_pods_counts_the_pods_fragmentation_keeps_pending() -> None:
    registry = CollectorRegistry()
    exporter = Exporter(registry)
    # 4 + 4 GPUs free, on two nodes: an 8-GPU pod fits the total but no node
    snapshot = cluster(
        node("a-1", gpus=8),
        node("a-2", gpus=8),
        pod("x", on="a-1", gpus=4),
        pod("y", on="a-2", gpus=4),
        pod("wants-8", gpus=8),
    )
    figures = compute_figures(snapshot)
    assert len(figures.blocked_pending) == 1
    exporter.set_figures(figures)
    assert value(registry, "gpu_compactor_blocked_pending_pods") == 1
    assert value(registry, "gpu_compactor_fenced_nodes") is None  # never measured: no series


def test_a_pool_that_disappears_leaves_no_stale_series() -> None:
    registry = CollectorRegistry()
    exporter = Exporter(registry)
    exporter.set_figures(compute_figures(cluster(*small_cluster())))
    assert value(registry, "gpu_compactor_free_gpu_equivalents", pool=H100_80) == pytest.approx(7.0)
    exporter.set_figures(compute_figures(cluster(*small_cluster(with_h100=False))))
    assert value(registry, "gpu_compactor_free_gpu_equivalents", pool=H100_80) is None
    assert value(registry, "gpu_compactor_fragmentation_rate", pool=H100_80) is None
    assert value(registry, "gpu_compactor_free_gpu_equivalents", pool=A100_40) == pytest.approx(12.5)
    exposed = exporter.render()[0].decode()
    assert H100_80 not in exposed


def test_counters_start_at_zero_for_every_status_and_accumulate() -> None:
    registry = CollectorRegistry()
    exporter = Exporter(registry)
    for status in ("succeeded", "failed", "nothing-to-do"):
        assert value(registry, "gpu_compactor_runs_total", status=status) == 0
    assert value(registry, "gpu_compactor_evictions_total") == 0
    assert value(registry, "gpu_compactor_leader") == 0
    assert value(registry, "gpu_compactor_last_cycle_timestamp_seconds") is None
    exporter.record_run("succeeded", evictions=3)
    exporter.record_run("failed", evictions=1)
    exporter.record_run("succeeded")
    exporter.record_cycle(1_767_225_600.0)
    exporter.set_leader(True)
    assert value(registry, "gpu_compactor_runs_total", status="succeeded") == 2
    assert value(registry, "gpu_compactor_runs_total", status="failed") == 1
    assert value(registry, "gpu_compactor_runs_total", status="nothing-to-do") == 0
    assert value(registry, "gpu_compactor_evictions_total") == 4
    assert value(registry, "gpu_compactor_last_cycle_timestamp_seconds") == 1_767_225_600.0
    assert value(registry, "gpu_compactor_leader") == 1
    with pytest.raises(ValueError):
        exporter.record_run("succeeded", evictions=-1)


def test_the_last_measured_gain_is_exported_beside_the_planned_one() -> None:
    registry = CollectorRegistry()
    exporter = Exporter(registry)
    exporter.record_run("succeeded", evictions=2)
    # never measured: no series rather than a made-up 0
    assert value(registry, "gpu_compactor_last_run_freed_gpus") is None
    exporter.record_run("partial", evictions=17, gained=(64, 72))
    assert value(registry, "gpu_compactor_last_run_freed_gpus") == 64
    assert value(registry, "gpu_compactor_last_run_planned_freed_gpus") == 72
    exporter.record_run("failed")  # a run without a measurement keeps the last one
    assert value(registry, "gpu_compactor_last_run_freed_gpus") == 64


def test_mig_reconfigurations_count_by_result() -> None:
    registry = CollectorRegistry()
    exporter = Exporter(registry)
    assert value(registry, "gpu_compactor_mig_reconfigurations_total", result="failed") == 0
    exporter.record_run("succeeded", recuts=("success", "success"))
    exporter.record_run("partial", recuts=("timeout",))
    exporter.record_run("partial", recuts=("failed",))
    assert [
        value(registry, "gpu_compactor_mig_reconfigurations_total", result=r) for r in ("success", "failed", "timeout")
    ] == [2, 1, 1]
    with pytest.raises(ValueError, match="unknown re-cut result"):
        exporter.record_run("failed", recuts=("maybe",))


def test_rollbacks_count_by_their_reason_from_zero_and_a_run_that_rolled_nothing_back_in_none() -> None:
    registry = CollectorRegistry()
    exporter = Exporter(registry)
    assert {value(registry, "gpu_compactor_rollbacks_total", reason=r) for r in ROLLBACK_REASONS} == {0}
    exporter.record_run("failed", abort_reason=AbortReason.PLAN_STALE)  # a GPU pod arrived on a node the plan frees
    exporter.record_run("failed", abort_reason=AbortReason.PLAN_STALE)  # a planned target lost its room
    exporter.record_run("failed", abort_reason=AbortReason.PDB_BLOCKED)
    exporter.record_run("failed")  # could not start its first move: nothing changed, nothing rolled back
    exporter.record_run("succeeded")
    assert value(registry, "gpu_compactor_rollbacks_total", reason="plan_stale") == 2
    assert value(registry, "gpu_compactor_rollbacks_total", reason="pdb_blocked") == 1
    assert value(registry, "gpu_compactor_rollbacks_total", reason="node_gone") == 0
    assert value(registry, "gpu_compactor_runs_total", status="failed") == 4
    with pytest.raises(ValueError, match="unknown abort reason"):
        exporter.record_run("failed", abort_reason="bad luck")


def test_the_exposition_is_valid_prometheus_text_with_the_alerted_names() -> None:
    registry = CollectorRegistry()
    exporter = Exporter(registry)
    exporter.set_figures(compute_figures(cluster(*small_cluster())), cordoned_nodes=0)
    body, content_type = exporter.render()
    assert content_type.startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    for name in (
        "gpu_compactor_fragmentation_rate",
        "gpu_compactor_blocked_pending_pods",
        "gpu_compactor_fenced_nodes",
        "gpu_compactor_runs",
        "gpu_compactor_leader",
        "gpu_compactor_mig_idle_instances",
    ):
        assert name in families, name
    assert families["gpu_compactor_runs"].type == "counter"
    assert 'gpu_compactor_runs_total{status="failed"} 0.0' in body.decode()


def test_cycle_errors_count_and_the_last_cycle_is_a_timestamp_gauge_the_alerts_read() -> None:
    registry = CollectorRegistry()
    exporter = Exporter(registry)
    # present from the start: increase() sees the first error
    assert value(registry, "gpu_compactor_cycle_errors_total") == 0
    assert value(registry, "gpu_compactor_last_cycle_timestamp_seconds") is None  # no cycle yet: no made-up time
    exporter.record_cycle_error()
    exporter.record_cycle_error()
    exporter.record_cycle(1_767_225_600.0)
    exporter.record_cycle(1_767_226_200.0)
    families = {f.name: f for f in text_string_to_metric_families(exporter.render()[0].decode())}
    assert families["gpu_compactor_cycle_errors"].type == "counter"
    assert families["gpu_compactor_last_cycle_timestamp_seconds"].type == "gauge"
    assert value(registry, "gpu_compactor_cycle_errors_total") == 2
    assert value(registry, "gpu_compactor_last_cycle_timestamp_seconds") == 1_767_226_200.0


def test_cycles_a_pending_pod_started_are_a_counter_present_from_the_start() -> None:
    registry = CollectorRegistry()
    exporter = Exporter(registry)
    assert value(registry, "gpu_compactor_pending_triggered_cycles_total") == 0
    exporter.record_pending_trigger()
    families = {f.name: f for f in text_string_to_metric_families(exporter.render()[0].decode())}
    assert families["gpu_compactor_pending_triggered_cycles"].type == "counter"
    assert value(registry, "gpu_compactor_pending_triggered_cycles_total") == 1


def test_two_exporters_with_their_own_registries_do_not_interfere() -> None:
    first, second = Exporter(), Exporter()
    first.record_run("failed")
    assert first.registry.get_sample_value("gpu_compactor_runs_total", {"status": "failed"}) == 1
    assert second.registry.get_sample_value("gpu_compactor_runs_total", {"status": "failed"}) == 0


def test_the_steering_mechanism_of_the_last_run_is_one_series_at_1_and_each_mechanism_counts_its_runs() -> None:
    registry = CollectorRegistry()
    exporter = Exporter(registry)
    assert value(registry, "gpu_compactor_steering_mechanism", mechanism="policy") is None  # no run yet: no claim
    exporter.record_run("succeeded", evictions=3, steering="holds")
    exporter.record_run("succeeded", evictions=2, steering="policy")
    assert [value(registry, "gpu_compactor_steering_mechanism", mechanism=m) for m in ("policy", "holds", "off")] == [
        1,
        0,
        0,
    ]
    assert [value(registry, "gpu_compactor_steered_runs_total", mechanism=m) for m in ("policy", "holds", "off")] == [
        1,
        1,
        0,
    ]
    with pytest.raises(ValueError, match="unknown steering mechanism"):
        exporter.record_run("succeeded", steering="webhook")


def test_the_policy_found_not_in_effect_is_a_gauge_of_the_last_run_that_steered() -> None:
    registry = CollectorRegistry()
    exporter = Exporter(registry)
    name = "gpu_compactor_steering_policy_not_in_effect"
    exporter.record_run("failed")
    assert value(registry, name) is None  # no run that chose a mechanism yet: no claim
    exporter.record_run("succeeded", steering="holds", steering_not_in_effect=True)
    assert value(registry, name) == 1
    exporter.record_run("failed")  # a run that never chose (stopped before) keeps the last one's word
    assert value(registry, name) == 1
    exporter.record_run("succeeded", steering="policy")
    assert value(registry, name) == 0


def test_blocked_demand_is_exported_in_gpu_equivalents_beside_the_blocked_pod_count() -> None:
    registry = CollectorRegistry()
    # 4 GPUs free on each of two nodes: the 8-GPU pod fits the free capacity in total, no single node
    snapshot = cluster(
        node("a", gpus=8), node("b", gpus=8), pod("p", on="a", gpus=4), pod("q", on="b", gpus=4), pod("big", gpus=8)
    )
    Exporter(registry).set_figures(compute_figures(snapshot), cordoned_nodes=0)
    assert value(registry, "gpu_compactor_blocked_demand_gpu_equivalents") == 8
    assert value(registry, "gpu_compactor_blocked_pending_pods") == 1


def test_the_last_plan_exports_its_solver_time_gap_and_moves() -> None:
    registry = CollectorRegistry()
    exporter = Exporter(registry)
    for name in ("gpu_compactor_last_plan_seconds", "gpu_compactor_last_plan_gap", "gpu_compactor_last_plan_moves"):
        assert value(registry, name) is None  # no plan yet: no made-up 0
    exporter.record_plan(seconds=12.5, gap=0.04, moves=7)
    assert value(registry, "gpu_compactor_last_plan_seconds") == 12.5
    assert value(registry, "gpu_compactor_last_plan_gap") == pytest.approx(0.04)
    assert value(registry, "gpu_compactor_last_plan_moves") == 7
    # no proven bound: the gap has no series, the rest is the new plan's
    exporter.record_plan(seconds=0.3, gap=None, moves=0)
    assert value(registry, "gpu_compactor_last_plan_gap") is None
    assert value(registry, "gpu_compactor_last_plan_seconds") == pytest.approx(0.3)
    assert value(registry, "gpu_compactor_last_plan_moves") == 0
    families = {f.name: f for f in text_string_to_metric_families(exporter.render()[0].decode())}
    assert {
        families[n].type
        for n in ("gpu_compactor_last_plan_seconds", "gpu_compactor_last_plan_gap", "gpu_compactor_last_plan_moves")
    } == {"gauge"}
    with pytest.raises(ValueError):
        exporter.record_plan(seconds=-1.0, gap=0.0, moves=1)
    with pytest.raises(ValueError):
        exporter.record_plan(seconds=1.0, gap=0.0, moves=-1)
    assert value(registry, "gpu_compactor_last_plan_seconds") == pytest.approx(0.3)  # a refused plan changes nothing


def test_the_breakers_pause_is_exported_once_a_cycle_read_it() -> None:
    registry = CollectorRegistry()
    exporter = Exporter(registry)
    assert value(registry, "gpu_compactor_paused_until_timestamp_seconds") is None  # no cycle read the history yet
    exporter.set_pause(1_800_000_000.0)
    assert value(registry, "gpu_compactor_paused_until_timestamp_seconds") == 1_800_000_000.0
    exporter.set_pause(0.0)
    assert value(registry, "gpu_compactor_paused_until_timestamp_seconds") == 0.0


def _last_run(registry: CollectorRegistry) -> dict[str, float | None]:
    return {status: value(registry, "gpu_compactor_last_run_status", status=status) for status in LAST_RUN_STATUSES}


def test_the_last_run_status_is_one_series_at_1_with_its_end_and_the_end_of_the_last_success() -> None:
    registry = CollectorRegistry()
    now = [1_767_225_600.0]
    exporter = Exporter(registry, clock=lambda: now[0])
    # no run yet: no status, no made-up time
    assert set(_last_run(registry).values()) == {None}
    assert value(registry, "gpu_compactor_last_run_timestamp_seconds") is None
    exporter.record_run("failed")
    assert {s for s, v in _last_run(registry).items() if v == 1} == {"failed"}
    assert {v for s, v in _last_run(registry).items() if s != "failed"} == {0}
    assert value(registry, "gpu_compactor_last_run_timestamp_seconds") == 1_767_225_600.0
    assert value(registry, "gpu_compactor_last_run_success_timestamp_seconds") is None  # none succeeded yet
    now[0] += 600
    exporter.record_run("succeeded", evictions=2)
    assert {s for s, v in _last_run(registry).items() if v == 1} == {"succeeded"}
    assert value(registry, "gpu_compactor_last_run_success_timestamp_seconds") == 1_767_226_200.0
    now[0] += 600
    exporter.record_run("partial")  # fell short: the last success stays the one before
    assert {s for s, v in _last_run(registry).items() if v == 1} == {"partial"}
    assert value(registry, "gpu_compactor_last_run_timestamp_seconds") == 1_767_226_800.0
    assert value(registry, "gpu_compactor_last_run_success_timestamp_seconds") == 1_767_226_200.0
    families = {f.name: f for f in text_string_to_metric_families(exporter.render()[0].decode())}
    assert {
        families[name].type
        for name in (
            "gpu_compactor_last_run_status",
            "gpu_compactor_last_run_timestamp_seconds",
            "gpu_compactor_last_run_success_timestamp_seconds",
        )
    } == {"gauge"}


def test_a_run_once_says_its_own_status_and_end_and_carries_the_last_success_forward() -> None:
    registry = CollectorRegistry()
    exporter = Exporter(registry, clock=lambda: 0.0)
    exporter.record_last_run("stopped", ended=2_000.0, succeeded_at=1_000.0)
    assert {s for s, v in _last_run(registry).items() if v == 1} == {"stopped"}
    assert value(registry, "gpu_compactor_last_run_timestamp_seconds") == 2_000.0
    assert value(registry, "gpu_compactor_last_run_success_timestamp_seconds") == 1_000.0
    exporter.record_last_run("measured", ended=3_000.0, succeeded_at=1_000.0)  # report mode did all it does
    assert value(registry, "gpu_compactor_last_run_success_timestamp_seconds") == 3_000.0
    exporter.record_last_run("held", ended=4_000.0)
    assert {s for s, v in _last_run(registry).items() if v == 1} == {"held"}
    assert value(registry, "gpu_compactor_last_run_success_timestamp_seconds") == 3_000.0


def test_an_unknown_run_status_is_refused_and_changes_nothing() -> None:
    registry = CollectorRegistry()
    exporter = Exporter(registry, clock=lambda: 5.0)
    exporter.record_run("nothing-to-do")
    with pytest.raises(ValueError, match="unknown run status"):
        exporter.record_run("success", evictions=3)
    with pytest.raises(ValueError, match="unknown run status"):
        exporter.record_last_run("killed", ended=9.0)
    assert value(registry, "gpu_compactor_evictions_total") == 0
    assert value(registry, "gpu_compactor_runs_total", status="success") is None
    assert {s for s, v in _last_run(registry).items() if v == 1} == {"nothing-to-do"}
    assert value(registry, "gpu_compactor_last_run_timestamp_seconds") == 5.0


def test_the_seconds_from_a_pending_trigger_to_the_binding_are_a_histogram() -> None:
    registry = CollectorRegistry()
    exporter = Exporter(registry)
    assert value(registry, "gpu_compactor_pending_trigger_to_bound_seconds_count") == 0
    for seconds in (10.0, 45.0, 4000.0):
        exporter.record_pending_bound(seconds)
    families = {f.name: f for f in text_string_to_metric_families(exporter.render()[0].decode())}
    assert families["gpu_compactor_pending_trigger_to_bound_seconds"].type == "histogram"
    assert value(registry, "gpu_compactor_pending_trigger_to_bound_seconds_bucket", le="15.0") == 1
    assert value(registry, "gpu_compactor_pending_trigger_to_bound_seconds_bucket", le="60.0") == 2
    assert value(registry, "gpu_compactor_pending_trigger_to_bound_seconds_bucket", le="+Inf") == 3
    assert value(registry, "gpu_compactor_pending_trigger_to_bound_seconds_sum") == 4055.0

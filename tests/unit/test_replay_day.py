"""benchmarks/replay_day.py's smoke test: an hour of the small openb slice under every strategy, checked for what must hold
whatever the figures are (the figures themselves are the benchmark's, in docs/benchmarks.md, not asserted here)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import replay_day  # noqa: E402  (benchmarks/ is not a package)

SLICE = ROOT / "tests" / "data" / "openb-slice"
OPTIONS = replay_day.Options(nodes=None, hours=1.0, fill=0.95, every_minutes=10, time_limit=1.0, trace_dir=SLICE)


@pytest.fixture(scope="module")
def rows() -> dict[str, dict[str, Any]]:
    played = {}
    for strategy in replay_day.STRATEGIES:
        figures, wall, about = replay_day.play(strategy, OPTIONS)
        played[strategy] = replay_day.summary(strategy, figures, wall, about, OPTIONS)
    return played


@pytest.mark.parametrize("strategy", replay_day.STRATEGIES)
def test_no_pod_is_lost_no_node_overcommitted_no_pdb_violated(rows: dict[str, dict[str, Any]], strategy: str) -> None:
    row = rows[strategy]
    assert row["lost"] == 0 and row["overcommittedNodes"] == 0 and row["pdbViolations"] == 0, row
    assert row["heldAtStart"] + row["arrived"] - row["left"] == row["alive"], row


def test_every_strategy_meets_the_same_arrivals(rows: dict[str, dict[str, Any]]) -> None:
    arrived = {s: r["arrived"] for s, r in rows.items()}
    assert len(set(arrived.values())) == 1 and next(iter(arrived.values())) > 0, arrived


@pytest.mark.parametrize("strategy", replay_day.STRATEGIES)
def test_the_figures_agree_with_their_samples(rows: dict[str, dict[str, Any]], strategy: str) -> None:
    row, series = rows[strategy], rows[strategy]["series"]
    assert len(series["minutes"]) == 61 and all(0 <= a <= 1 for a in series["allocation"]), series["minutes"][-3:]
    assert all(0 <= w <= row["gpus"] for w in series["wholeFree"])
    # blocked GPU-hours integrate the queue's GPUs: the minute samples' sum is the same integral, one minute coarse
    sampled = sum(series["pendingGpus"]) / 60
    assert abs(row["blockedGpuHours"] - sampled) <= max(1.0, 0.2 * sampled), (row["blockedGpuHours"], sampled)
    assert row["restartGpuHours"] == pytest.approx(0, abs=1e-9) if not row["evictions"] else row["restartGpuHours"] > 0


def test_only_the_strategies_that_move_pods_evict_and_only_the_compactor_plans(rows: dict[str, dict[str, Any]]) -> None:
    assert rows["none"]["evictions"] == rows["most-allocated"]["evictions"] == 0
    assert rows["none"]["plannerCycles"] == rows["hnu"]["plannerCycles"] == 0
    assert rows["compactor"]["plannerCycles"] >= 1


def test_the_table_has_a_row_per_strategy(rows: dict[str, dict[str, Any]]) -> None:
    table = replay_day.table(list(rows.values()))
    assert [line.split(" | ")[0].strip("| ") for line in table.splitlines()[2:]] == list(replay_day.STRATEGIES)


def test_fgds_experiment_lets_no_pod_leave_and_measures_every_arrived_percent() -> None:
    options = replay_day.Options(fgd=True, every_minutes=1, time_limit=1.0, startup_seconds=0, trace_dir=SLICE)
    rows = []
    for strategy in ("none", "compactor"):
        figures, wall, about = replay_day.play(strategy, options)
        rows.append(replay_day.summary(strategy, figures, wall, about, options))
        assert figures.left == 0 and figures.lost == 0 and figures.overcommitted_nodes == 0
        assert sorted(figures.by_arrived) == list(range(131)), sorted(figures.by_arrived)[-3:]
        assert all(0 <= a <= 1 for a in figures.by_arrived.values())
    points = rows[0]["byArrivedPercent"]
    assert all(points[p] <= points[p + 1] for p in range(130)), "without departures nor moves, allocation only grows"
    assert "| none (here) |" in replay_day.fgd_table(rows)


def test_the_controllers_emulation_cycles_on_its_interval_and_when_its_pending_trigger_says() -> None:
    """``compactor-pending-trigger`` decides with the controller's own ``PendingTrigger``: the interval's cycle, else one
    a GPU pod waiting a minute starts, once per pod, not within the gap of the last cycle."""
    from types import SimpleNamespace

    from day_strategies import Compactor

    from compactor.app.pending import PendingTrigger

    def waiting(pod_id: int, arrived: float, gpus: int = 8) -> Any:
        return SimpleNamespace(id=pod_id, arrived=arrived, first_bound=-1.0, gpus=gpus)

    compactor = Compactor(trigger=PendingTrigger(60, 300), every=600)
    day = SimpleNamespace(now=0.0, queue={})

    def due(now: float, *pods: Any) -> bool:
        day.now, day.queue = now, {p.id: p for p in pods}
        fired = compactor._controller_due(day)  # type: ignore[arg-type]
        if fired:
            compactor.last_run, compactor.next_regular = now, now + compactor.every
        return fired

    assert not due(30, waiting(1, 0))  # waited 30 s; the first cycle is at 600
    assert due(75, waiting(1, 0))  # a minute: a cycle now, the interval counting from here
    assert not due(120, waiting(1, 0)), "once per pod"
    assert not due(200, waiting(1, 0), waiting(2, 100)), "within the gap of the last cycle"
    assert not due(200, waiting(1, 0), waiting(3, 100, gpus=0)), "a CPU pod never starts one"
    assert due(390, waiting(1, 0), waiting(2, 100))  # the gap is over
    assert not due(980, waiting(1, 0)) and due(990, waiting(1, 0))  # the interval from the last cycle (390 + 600)


def test_a_tick_while_a_run_still_goes_on_is_skipped_with_or_without_the_controllers_schedule() -> None:
    from types import SimpleNamespace

    from day_strategies import Compactor

    from compactor.app.pending import PendingTrigger

    busy_day = SimpleNamespace(now=1200.0, queue={})
    every_tick = Compactor()  # the plain ``run --once`` every tick: no interval of its own
    every_tick.busy_until = float("inf")
    every_tick(busy_day)  # type: ignore[arg-type]
    assert every_tick.last_run == -float("inf")
    controller = Compactor(trigger=PendingTrigger(60, 300), every=600)
    controller.busy_until = float("inf")
    controller(busy_day)  # type: ignore[arg-type]
    assert (controller.last_run, controller.next_regular) == (
        -float("inf"),
        1800.0,
    )  # the runs due at 600, 1200 skipped
    with pytest.raises(ValueError, match="need an interval"):
        Compactor(trigger=PendingTrigger(60, 300))

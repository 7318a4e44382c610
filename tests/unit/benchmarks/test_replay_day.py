"""benchmarks/replay_day.py's smoke test: an hour of the small openb slice under every strategy, checked for what must hold
whatever the figures are (the figures themselves are the benchmark's, in docs/benchmarks.md, not asserted here); and the
fairness rules of issue 42: one common start for every strategy, a pod that fits nowhere waiting from time 0, a cycle's
planning charged to the simulated clock."""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))

import replay_day  # noqa: E402  (benchmarks/ is not a package)
from day_replay import Arrival, Day, Workload, beyond_capacity  # noqa: E402
from generate_cluster import Shape  # noqa: E402
from trace_replay import TraceNode, TracePod  # noqa: E402

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
    assert row["heldAtStart"] + row["queuedAtStart"] + row["arrived"] - row["left"] == row["alive"], row


def test_every_strategy_meets_the_same_start_and_the_same_arrivals(rows: dict[str, dict[str, Any]]) -> None:
    arrived = {s: r["arrived"] for s, r in rows.items()}
    assert len(set(arrived.values())) == 1 and next(iter(arrived.values())) > 0, arrived
    start = {
        s: (r["heldAtStart"] + r["queuedAtStart"], r["commonStartPods"], r["commonStartGpus"]) for s, r in rows.items()
    }
    assert len(set(start.values())) == 1, start
    pods, _, gpus = next(iter(start.values()))
    assert pods > 0 and gpus >= OPTIONS.fill * rows[replay_day.DEFAULT]["gpus"]


def test_the_common_start_is_the_same_list_in_the_same_order_for_every_strategy() -> None:
    """Drawn once, whatever the scheduler: each strategy's day places the same pods in the same order at time 0 (where
    they land is its scheduler's business)."""
    starts = {}
    for strategy in replay_day.STRATEGIES:
        day, _, _ = replay_day.day_for(strategy, OPTIONS)
        day.run(0.0)
        starts[strategy] = day.start
        initial = [a.pod.name for a in day.load.initial]
        assert [name for name, _ in day.start] == initial
        queued = [name for name, node in day.start if node < 0]
        assert sorted(day.pods[p].arrival.pod.name for p in day.queue) == sorted(queued), "fits nowhere: it waits"
    names = {s: [name for name, _ in start] for s, start in starts.items()}
    assert all(n == names[replay_day.DEFAULT] for n in names.values())
    # the two profiles place the start differently: the start is common, the placement is each scheduler's own
    nodes = {s: [node for _, node in start] for s, start in starts.items()}
    assert nodes[replay_day.DEFAULT] != nodes[replay_day.BIN_PACKING]


def _node(name: str, gpus: int) -> TraceNode:
    return TraceNode(name, 64_000, 262_144, gpus, "G2")


def _arrival(name: str, gpus: int, life: float, initial: bool = True) -> Arrival:
    return Arrival(TracePod(name, Shape(4_000, 16_384, gpus, 1000, "LS"), ()), life, initial=initial)


def _load(initial: tuple[Arrival, ...]) -> Workload:
    def never() -> Any:
        while True:
            yield _arrival("later", 1, 60.0, initial=False)

    return Workload(never(), initial, 1e9, 0.0, 60.0, 3600.0, 1)


def test_a_pod_of_the_start_that_fits_nowhere_waits_from_time_zero_and_counts() -> None:
    """Two 4-GPU nodes: the 8-GPU pod of the start fits nowhere; it waits (not dropped), its GPUs count as blocked and it
    is an 8-GPU pod that never started; the pods after it in the list are still placed."""
    initial = (_arrival("four", 4, 3600.0), _arrival("eight", 8, 600.0), _arrival("one", 1, 3600.0))
    day = Day([_node("a", 4), _node("b", 4)], _load(initial), startup=0.0, seed=1)
    figures = day.run(1800.0)
    assert [(name, node >= 0) for name, node in day.start] == [("four", True), ("eight", False), ("one", True)]
    assert figures.held_at_start == 2 and figures.queued_at_start == 1
    assert [day.pods[p].arrival.pod.name for p in day.queue] == ["eight"]
    assert figures.still_waiting["8 GPUs"] == 1 and figures.waits["8 GPUs"] == [1800.0]
    assert figures.blocked_gpu_seconds == pytest.approx(8 * 1800.0)


def test_blocked_demand_beyond_capacity_is_what_no_arrangement_of_the_pods_alive_could_serve() -> None:
    """Two 4-GPU nodes of model G2. The 8-GPU pod fits no node of them (beyond capacity: no arrangement serves it); a
    pod pinned to model T4, which the cluster lacks, neither; a 2-GPU pod waiting while the GPUs free are split 1 + 1 by
    pods that could move is above capacity (moves could serve it): only the first two count."""
    pinned = Arrival(TracePod("t4", Shape(4_000, 16_384, 1, 1000, "LS"), ("T4",)), 3600.0, initial=True)
    initial = (
        _arrival("three-a", 3, 3600.0),
        _arrival("three-b", 3, 3600.0),
        _arrival("eight", 8, 3600.0),
        pinned,
        _arrival("two", 2, 3600.0),
    )
    day = Day([_node("a", 4), _node("b", 4)], _load(initial), startup=0.0, seed=1)
    figures = day.run(600.0)
    assert sorted(day.pods[p].arrival.pod.name for p in day.queue) == ["eight", "t4", "two"]
    assert beyond_capacity(day) == 8 + 1
    assert figures.blocked_gpu_seconds == pytest.approx((8 + 1 + 2) * 600.0)
    # sampled each minute (0, 60, ..., 600 s): 9 GPUs a sample
    assert figures.beyond_capacity_gpu_seconds == pytest.approx(9 * 60.0 * len(figures.times))


def test_a_pod_of_the_start_that_waited_runs_what_was_left_of_its_life_once_bound() -> None:
    initial = (_arrival("four", 4, 1000.0), _arrival("eight", 8, 600.0))
    day = Day([_node("a", 8)], _load(initial), startup=0.0, seed=1)
    figures = day.run(3600.0)
    assert figures.waits["8 GPUs"] == [1000.0]  # bound when "four" left, at 1000 s
    assert figures.still_waiting["8 GPUs"] == 0 and figures.left == 2  # it left 600 s later
    assert figures.allocated_gpu_seconds == pytest.approx(4 * 1000 + 8 * 600)


@pytest.mark.parametrize("strategy", replay_day.STRATEGIES)
def test_the_figures_agree_with_their_samples(rows: dict[str, dict[str, Any]], strategy: str) -> None:
    row, series = rows[strategy], rows[strategy]["series"]
    assert len(series["minutes"]) == 61 and all(0 <= a <= 1 for a in series["allocation"]), series["minutes"][-3:]
    assert all(0 <= w <= row["gpus"] for w in series["wholeFree"])
    # blocked GPU-hours integrate the queue's GPUs: the minute samples' sum is the same integral, one minute coarse
    sampled = sum(series["pendingGpus"]) / 60
    assert abs(row["blockedGpuHours"] - sampled) <= max(1.0, 0.2 * sampled), (row["blockedGpuHours"], sampled)
    allocated = sum(series["allocation"][:-1]) / 60 * row["gpus"]
    assert row["allocatedGpuHours"] == pytest.approx(allocated, rel=0.05, abs=1.0)
    # each 8-GPU pod still waiting is named with what could have held it (a pod never started is one of them)
    waiting = row["eightGpuWaitingAtEnd"]
    assert sum(not w["replacement"] for w in waiting) == row["queueSeconds"]["8 GPUs"]["stillWaiting"]
    assert all(w["nodesThatCouldHoldIt"] >= 0 and 0 <= w["waitedHours"] <= 1.0 for w in waiting), waiting
    if not row["evictions"]:
        assert row["restartGpuHours"] == pytest.approx(0, abs=1e-9) and row["restartShareOfAllocated"] == 0
    else:
        assert row["restartShareOfAllocated"] == pytest.approx(row["restartGpuHours"] / row["allocatedGpuHours"])


def test_only_the_strategies_that_move_pods_evict_and_only_the_controller_plans(
    rows: dict[str, dict[str, Any]],
) -> None:
    assert rows[replay_day.DEFAULT]["evictions"] == rows[replay_day.BIN_PACKING]["evictions"] == 0
    assert rows[replay_day.DEFAULT]["plannerCycles"] == rows[replay_day.HNU]["plannerCycles"] == 0
    for strategy in (
        replay_day.DEFAULT_CONTROLLER,
        replay_day.DEFAULT_FILL_FIRST_CONTROLLER,
        replay_day.BIN_PACKING_CONTROLLER,
    ):
        assert rows[strategy]["plannerCycles"] >= 1
        # every cycle's planning cost its time limit on the simulated clock
        assert rows[strategy]["planningChargedSeconds"] == pytest.approx(rows[strategy]["plannerCycles"] * 1.0)


def test_each_strategy_runs_the_scheduler_profile_its_name_says(rows: dict[str, dict[str, Any]]) -> None:
    profiles = {s: r["profile"] for s, r in rows.items()}
    assert profiles == {
        replay_day.DEFAULT: "default",
        replay_day.BIN_PACKING: "bin-packing",
        replay_day.HNU: "bin-packing",
        replay_day.DEFAULT_CONTROLLER: "default",
        replay_day.DEFAULT_FILL_FIRST_CONTROLLER: "default",
        replay_day.BIN_PACKING_CONTROLLER: "bin-packing",
    }
    assert replay_day.strategy_named("compactor-pending-trigger") == replay_day.DEFAULT_CONTROLLER
    assert replay_day.strategy_named("bin-packing+hnu") == replay_day.HNU


def test_the_table_has_a_row_per_strategy_with_the_mean_and_range_over_seeds(rows: dict[str, dict[str, Any]]) -> None:
    table = replay_day.table(list(rows.values()))
    assert [line.split(" | ")[0].strip("| ") for line in table.splitlines()[2:]] == list(replay_day.STRATEGIES)
    second = [dict(r, seed=2, allocationMean=r["allocationMean"] - 0.1) for r in rows.values()]
    merged = replay_day.table([*rows.values(), *second])
    line = next(row for row in merged.splitlines() if row.startswith(f"| {replay_day.DEFAULT} |"))
    a = 100 * rows[replay_day.DEFAULT]["allocationMean"]
    assert f"| 2 | {a - 5:.1f} ({a - 10:.1f}-{a:.1f}) % |" in line, line
    assert replay_day.mean_range([1.0]) == "1.0" and replay_day.mean_range([math.nan, math.nan]) == "n/a"


def test_the_command_line_takes_seeds_a_trace_variant_and_the_operators_names() -> None:
    options, seeds, strategies, _ = replay_day.parse(
        [
            "--seeds",
            "1,2,3",
            "--trace-variant",
            "gpuspec33",
            "--strategy",
            "bin-packing + controller",
            "--strategy",
            "hnu",
        ]
    )
    assert seeds == [1, 2, 3] and options.variant == "gpuspec33"
    assert strategies == [replay_day.BIN_PACKING_CONTROLLER, replay_day.HNU]
    assert replay_day.parse([])[2] == list(replay_day.STRATEGIES)


def test_cross_pool_moves_reach_the_controllers_settings_and_are_off_as_shipped() -> None:
    crossing = replay_day.parse(["--cross-pool-moves"])[0]
    assert replay_day.settings_for(crossing).movable.cross_pool_moves is True
    assert replay_day.settings_for(replay_day.parse([])[0]).movable.cross_pool_moves is False


def test_the_table_can_be_rebuilt_from_results_run_apart(rows: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    import json

    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text("".join(json.dumps(r) + "\n" for r in rows.values()))
    second.write_text("".join(json.dumps(dict(r, seed=2)) + "\n" for r in rows.values()))
    with pytest.raises(SystemExit) as done:
        replay_day.main(["--table-from", str(first), str(second), "--out", str(tmp_path / "out")])
    assert not done.value.code
    text = (tmp_path / "out" / "table.md").read_text()
    assert text.startswith("default trace, seeds 1,2: mean (min-max)")
    assert f"| {replay_day.HNU} | 2 |" in text


def test_a_trace_variant_reaches_the_workload() -> None:
    """gpuspec33: some pods of the day carry their GPU-model constraint (the default list has none)."""
    constrained = {}
    for variant in ("default", "gpuspec33"):
        day, _, _ = replay_day.day_for(replay_day.DEFAULT, replay_day.Options(trace_dir=SLICE, variant=variant))
        constrained[variant] = sum(1 for a in day.load.initial if a.pod.models)
    assert constrained["default"] == 0 and constrained["gpuspec33"] > 0


def test_fgds_experiment_lets_no_pod_leave_and_measures_every_arrived_percent() -> None:
    options = replay_day.Options(fgd=True, every_minutes=1, time_limit=1.0, startup_seconds=0, trace_dir=SLICE)
    rows = []
    for strategy in (replay_day.DEFAULT, replay_day.DEFAULT_RUN_ONCE):
        figures, wall, about = replay_day.play(strategy, options)
        rows.append(replay_day.summary(strategy, figures, wall, about, options))
        assert figures.left == 0 and figures.lost == 0 and figures.overcommitted_nodes == 0
        assert figures.held_at_start == figures.queued_at_start == 0
        assert sorted(figures.by_arrived) == list(range(131)), sorted(figures.by_arrived)[-3:]
        assert all(0 <= a <= 1 for a in figures.by_arrived.values())
    points = rows[0]["byArrivedPercent"]
    assert all(points[p] <= points[p + 1] for p in range(130)), "without departures nor moves, allocation only grows"
    assert f"| {replay_day.DEFAULT} (here) |" in replay_day.fgd_table(rows)


# ---------------------------------------------------------------- the controller's emulation


def test_a_cycles_evictions_start_once_its_planning_time_has_passed_on_the_simulated_clock() -> None:
    """With the planning clock at the time limit (7 s here), the plan found at 100 s moves its pod at 107 s; meanwhile
    the day goes on. With ``none`` it moves at once."""
    from day_strategies import Compactor

    for clock, moved_at in (("limit", 107.0), ("none", 100.0)):
        initial = (_arrival("p", 1, 1e6),)
        day = Day([_node("a", 4), _node("b", 4)], _load(initial), startup=0.0, seed=1)
        day.run(100.0)
        pod = next(iter(day.pods.values()))
        source, target = pod.node, 1 - pod.node
        compactor = Compactor(planning_clock=clock)
        compactor.settings = compactor.settings.model_copy(
            update={"solver": compactor.settings.solver.amended(time_limit_seconds=7.0)}
        )
        move = SimpleNamespace(
            pod=f"replay/{pod.name}", from_node=day.nodes[source].name, to_node=day.nodes[target].name, owner=""
        )
        plan = SimpleNamespace(
            moves=[move], placed_pending=[], freed_nodes=[day.nodes[source].name], mig_repartition=[]
        )
        compactor._plan = lambda _day, found=plan: found  # type: ignore[method-assign,misc]
        compactor(day)
        assert compactor.busy_until == float("inf"), "the cycle is still going: the next one waits"
        if moved_at > day.now:
            day.advance(moved_at - 0.5)
            assert pod.node == source and day.figures.evictions == 0, clock
            day.advance(moved_at)
        assert pod.node == target and day.figures.evictions == 1, clock
        assert day.figures.planning_charged_seconds == (7.0 if clock == "limit" else 0.0)


def test_the_controllers_emulation_cycles_on_its_interval_and_when_its_pending_trigger_says() -> None:
    """``default + controller`` decides with the controller's own ``PendingTrigger``: the interval's cycle, else one
    a GPU pod waiting a minute starts, once per pod, not within the gap of the last cycle."""
    from day_strategies import Compactor

    from compactor.app.pending import PendingTrigger

    def waiting(pod_id: int, arrived: float, gpus: int = 8) -> Any:
        return SimpleNamespace(id=pod_id, arrived=arrived, first_bound=-1.0, gpus=gpus, uses_gpu=gpus > 0)

    compactor = Compactor(trigger=PendingTrigger(60, 300), every=600)
    day = SimpleNamespace(now=0.0, queue={})

    def due(now: float, *pods: Any) -> bool:
        day.now, day.queue = now, {p.id: p for p in pods}
        fired = compactor._controller_due(day)  # type: ignore[arg-type]
        if fired:  # a cycle that ends at once: the gap counts from its end
            compactor.last_run, compactor.next_regular, compactor.last_end = now, now + compactor.every, now
        return fired

    assert not due(30, waiting(1, 0))  # waited 30 s; the first cycle is at 600
    assert due(75, waiting(1, 0))  # a minute: a cycle now, the interval counting from here
    assert not due(120, waiting(1, 0)), "once per pod"
    assert not due(200, waiting(1, 0), waiting(2, 100)), "within the gap of the last cycle"
    assert not due(200, waiting(1, 0), waiting(3, 100, gpus=0)), "a CPU pod never starts one"
    assert due(390, waiting(1, 0), waiting(2, 100))  # the gap is over
    assert not due(980, waiting(1, 0)) and due(990, waiting(1, 0))  # the interval from the last cycle (390 + 600)


def test_a_tick_while_a_run_still_goes_on_is_skipped_with_or_without_the_controllers_schedule() -> None:
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
    with pytest.raises(ValueError, match="planning clock"):
        Compactor(planning_clock="sometimes")


def test_the_trace_with_its_cpu_only_pods_runs_them_beside_the_same_gpu_nodes_and_loses_none() -> None:
    """--with-cpu-only (issue [24]): the trace's CPU-only pods in the stream and its CPU-only nodes in its proportion
    (310 to 1,213: 10 beside the slice's 40 GPU nodes), the GPU nodes the same sample as without them. Under the default
    profile CPU-only pods land on GPU nodes too (nothing keeps them off); the controller's snapshot reads CPU-only nodes
    as nodes without GPUs, and nothing is lost, overcommitted or past a PDB."""
    with_cpu = replace(OPTIONS, cpu_only=True)
    day, _, about = replay_day.day_for(replay_day.DEFAULT, with_cpu)
    gpu_only, _, _ = replay_day.day_for(replay_day.DEFAULT, OPTIONS)
    assert [n.name for n in day.nodes if n.gpus] == [n.name for n in gpu_only.nodes]
    assert about["cpuOnlyNodes"] == 10 and all(n.name.startswith("openb-cpu-node-") for n in day.nodes if not n.gpus)
    for strategy in (replay_day.DEFAULT, replay_day.DEFAULT_CONTROLLER):
        figures, wall, about = replay_day.play(strategy, with_cpu)
        row = replay_day.summary(strategy, figures, wall, about, with_cpu)
        assert row["lost"] == 0 and row["overcommittedNodes"] == 0 and row["pdbViolations"] == 0, row
        assert row["queueSeconds"]["CPU-only"]["pods"] > 0
        assert row["cpuPodsOnGpuNodesMean"] > 0 and 0 < row["gpuNodeCpuToCpuPodsMean"] < 1
    assert "CPU-only wait p50 / p95 s" in replay_day.cpu_only_table([row])

"""The source article's day (``benchmarks/article_day.py``, ``replay_day.py --world article``, issue [24]): its cluster in
the article's proportions, Deployments following the traffic, and a quick day of each kind of strategy that loses no
pod, overcommits no node, keeps every PDB and leaves every MIG node in a layout its GPUs can hold."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))

import article_day  # noqa: E402  (benchmarks/ is not a package)
import day_replay  # noqa: E402
import day_strategies  # noqa: E402
import replay_day  # noqa: E402
from day_replay import Arrival, Day, Workload  # noqa: E402

from compactor.model.load import DEFAULT_POOL_LABEL  # noqa: E402
from compactor.model.parse import parse_node  # noqa: E402

QUICK = replay_day.Options(nodes=30, hours=2.0, time_limit=1.0, world="article", every_minutes=10)
ROWS = (replay_day.DEFAULT, replay_day.HNU, replay_day.DEFAULT_CONTROLLER, replay_day.BIN_PACKING_RECUTS)


def test_the_cluster_has_the_articles_proportions_and_layouts() -> None:
    nodes = article_day.nodes_of(40, seed=1)
    kinds = [n.name.split("-")[0] for n in nodes]
    assert (kinds.count("mig"), kinds.count("gpu"), kinds.count("cpu")) == (16, 18, 6)
    layouts = [n.layout for n in nodes if n.layout]
    assert layouts.count("all-balanced") == 4 and layouts.count("all-1g.5gb") == 12
    one_g = next(n for n in nodes if n.layout == "all-1g.5gb")
    assert one_g.extended == {article_day.MIG_1G: 56} and one_g.gpus == 0 and one_g.physical_gpus == 8


def test_time_sliced_nodes_come_out_of_the_whole_gpu_ones_and_read_as_the_device_plugin_advertises_them() -> None:
    """``--time-sliced``: each GPU four ``nvidia.com/gpu.shared`` replicas (``renameByDefault: true``), GFD's
    replicas and sharing labels; the compactor reads the node as 8 GPUs, a replica as a quarter of one."""
    nodes = article_day.nodes_of(40, seed=1, time_sliced=0.1)
    kinds = [n.name.split("-")[0] for n in nodes]
    assert (kinds.count("mig"), kinds.count("gpu"), kinds.count("ts"), kinds.count("cpu")) == (16, 14, 4, 6)
    index = kinds.index("ts")
    day = Day(
        nodes,
        Workload(iter(()), (), float("inf"), 0.0, 0.0, float("inf"), 1),
        startup=120.0,
        extended=article_day.GPU_FRACTION,
    )
    raw = day_strategies._node_object(nodes[index], day=day, index=index)
    assert raw["status"]["allocatable"][article_day.GPU_SHARED] == "32"
    assert "nvidia.com/gpu" not in raw["status"]["allocatable"]
    warnings: list[str] = []
    node = parse_node(raw, source="replay", pool_label=DEFAULT_POOL_LABEL, warnings=warnings)
    assert warnings == [] and node.gpu.physical_gpus == 8 and node.gpu.sharing_strategy == "time-slicing"
    assert node.gpu.equivalent(article_day.GPU_SHARED) == pytest.approx(0.25)
    plain = article_day.nodes_of(40, seed=1)
    assert [n for n in plain if n.layout] == [n for n in nodes if n.layout]  # the MIG nodes as without time-slicing


def test_the_traffic_peaks_at_two_in_the_afternoon_and_bottoms_out_at_two_at_night() -> None:
    assert article_day.traffic(14 * 3600) == pytest.approx(1.0)
    assert article_day.traffic(2 * 3600) == pytest.approx(0.35)
    assert article_day.traffic(2 * 3600) < article_day.traffic(8 * 3600) < article_day.traffic(14 * 3600)


def _day(pods: int) -> tuple[Day, list[int]]:
    """One ReplicaSet of ``pods`` 1g.5gb replicas on a MIG node and a whole-GPU node, bound by the scheduler."""
    nodes = article_day.nodes_of(3, seed=1)[:2]
    kind = article_day.KINDS[0]
    deployment = article_day.Deployment(7, kind, pods, float("inf"))
    day = Day(
        nodes,
        Workload(iter(()), (), float("inf"), 0.0, 0.0, float("inf"), 1),
        startup=120.0,
        extended=article_day.GPU_FRACTION,
    )
    for second in range(pods):
        day.now = float(second)  # created a second apart: the newest is the last
        day.create(article_day.arrival(deployment))
    return day, sorted(day.groups[7])


def _mig_day(asked: dict[int, int]) -> Day:
    """One MIG-capable node (8 A100-40GB GPUs) beside a whole-GPU node, and ``asked``: Deployment kind index -> replicas,
    created (bound where the starting layout has room, else waiting)."""
    nodes = article_day.nodes_of(3, seed=1)[:2]
    day = Day(
        nodes,
        Workload(iter(()), (), float("inf"), 0.0, 0.0, float("inf"), 1),
        startup=120.0,
        extended=article_day.GPU_FRACTION,
        mig_layouts=article_day.node_layouts(),
    )
    for kind, replicas in asked.items():
        deployment = article_day.Deployment(kind, article_day.KINDS[kind], replicas, float("inf"))
        for _ in range(replicas):
            day.create(article_day.arrival(deployment))
    return day


def test_mig_demand_no_layout_could_host_is_beyond_capacity_and_demand_a_layout_could_host_is_not() -> None:
    """All-3g.20gb offers two 3g instances per GPU, 16 on the node: 20 3g replicas leave 4 (3/7 GPU each) beyond
    capacity whatever the re-cuts; 16 leave none, though the starting layout hosts fewer. 56 1g replicas and one 3g
    ask 8 3/7 GPUs of an 8-GPU node: 3/7 beyond."""
    assert day_replay.mig_beyond_capacity(_mig_day({2: 20})) == pytest.approx(4 * 3 / 7)
    sixteen = _mig_day({2: 16})
    assert sixteen.queue and day_replay.mig_beyond_capacity(sixteen) == pytest.approx(0.0)
    assert day_replay.mig_beyond_capacity(_mig_day({0: 56, 2: 1})) == pytest.approx(3 / 7)


def test_a_scale_down_deletes_the_pods_the_replicaset_controller_would() -> None:
    """``ActivePodsWithRanks``: a pod not yet Ready goes before a Ready one, and among Ready ones the newest."""
    day, ids = _day(3)
    assert all(day.pods[i].node >= 0 for i in ids)
    day.now = 500.0  # all Ready (start-up 120 s)
    day.pods[ids[0]].ready_at = 1_000.0  # the oldest restarted: not Ready
    day.scale_down(7, 2)
    assert sorted(day.groups[7]) == [ids[1]]  # the not-Ready one, then the newest of the Ready ones


def test_a_mig_pod_counts_its_compute_share_of_a_gpu() -> None:
    day, ids = _day(7)
    assert day.pods[ids[0]].gpu_eq == pytest.approx(1 / 7)
    assert day.bound_gpus() == pytest.approx(1.0)
    assert day.pods[ids[0]].size == "MIG 1g" and day.pods[ids[0]].uses_gpu


@pytest.fixture(scope="module")
def quick_days() -> dict[str, tuple[dict[str, Any], Day]]:
    played = {}
    for strategy in ROWS:
        day, seconds, about = replay_day.day_for(strategy, QUICK)
        ticks = [(0.0, article_day.SCALE_SECONDS, day.scaler), *replay_day._ticks(strategy, QUICK)]  # type: ignore[attr-defined]
        figures = day.run(seconds, ticks)
        played[strategy] = (replay_day.summary(strategy, figures, 0.0, about, QUICK), day)
    return played


@pytest.mark.parametrize("strategy", ROWS)
def test_a_quick_article_day_loses_no_pod_overcommits_no_node_and_keeps_every_pdb(
    quick_days: dict[str, tuple[dict[str, Any], Day]], strategy: str
) -> None:
    row, day = quick_days[strategy]
    assert row["lost"] == 0 and row["overcommittedNodes"] == 0 and row["pdbViolations"] == 0, row
    assert row["heldAtStart"] + row["queuedAtStart"] + row["arrived"] - row["left"] == row["alive"], row
    per_gpu = {
        layout: {r: n * article_day.GPUS_PER_NODE for r, n in counts.items()}
        for layout, counts in article_day.LAYOUTS.items()
    }
    for index, node in enumerate(day.nodes):
        if node.layout:  # MIG-capable: it offers a layout of mig-parted's for its GPUs, the one its label names
            offered = {r: int(n) for r, n in zip(day.extended, day.scheduler.allocatable[index, 3:], strict=True) if n}
            assert offered == per_gpu[day.layouts[index]], (node.name, day.layouts[index], offered)


def test_every_strategy_meets_the_same_deployments_and_the_same_start(
    quick_days: dict[str, tuple[dict[str, Any], Day]],
) -> None:
    starts = {
        s: (r["commonStartPods"], r["deployments"], r["newModels"], r["arrived"]) for s, (r, _) in quick_days.items()
    }
    assert len(set(starts.values())) == 1, starts
    assert next(iter(starts.values()))[0] > 0


def test_re_cuts_host_the_slices_the_starting_layouts_leave_blocked(
    quick_days: dict[str, tuple[dict[str, Any], Day]],
) -> None:
    """The starting layouts offer few 2g.10gb instances (the balanced nodes' one per GPU): without re-cuts ResNet's
    replicas wait; the controller with ``mig.repartition`` re-cuts nodes the traffic left free and places them."""
    without, _ = quick_days[replay_day.HNU]
    recut, _ = quick_days[replay_day.BIN_PACKING_RECUTS]
    assert recut["recuts"] > 0 and recut["recutOfflineGpuHours"] > 0
    blocked = {r["strategy"]: r["blockedGpuHoursBySize"].get("MIG 2g", 0.0) for r in (without, recut)}
    assert blocked[replay_day.BIN_PACKING_RECUTS] < blocked[replay_day.HNU] / 2, blocked


def test_a_quick_time_sliced_day_serves_its_small_models_and_loses_nothing() -> None:
    """A tenth of the nodes time-sliced: the small models' replicas ask a replica each; the controller with re-cuts
    plays the day beside them, nothing lost, no node overcommitted, no PDB broken, and the table shows the size."""
    options = replace(QUICK, time_sliced=0.1)
    strategy = replay_day.BIN_PACKING_RECUTS
    day, seconds, about = replay_day.day_for(strategy, options)
    ticks = [(0.0, article_day.SCALE_SECONDS, day.scaler), *replay_day._ticks(strategy, options)]  # type: ignore[attr-defined]
    row = replay_day.summary(strategy, day.run(seconds, ticks), 0.0, about, options)
    assert row["lost"] == 0 and row["overcommittedNodes"] == 0 and row["pdbViolations"] == 0, row
    shared = row["queueSeconds"]["shared GPU"]
    assert about["nodesByKind"]["ts"] == 3 and shared["pods"] > 0 and shared["stillWaiting"] == 0, shared
    assert "shared GPU blocked GPU-h / never started" in replay_day.article_table([row])


def test_the_article_table_has_a_row_per_strategy_and_the_sizes(
    quick_days: dict[str, tuple[dict[str, Any], Day]],
) -> None:
    text = replay_day.article_table([row for row, _ in quick_days.values()])
    assert all(f"| {s} |" in text for s in ROWS)
    assert "MIG 2g blocked GPU-h / never started" in text and "re-cuts" in text
    assert "shared GPU" not in text  # no time-sliced node, no column for it
    assert all(line.count("|") == text.splitlines()[0].count("|") for line in text.splitlines())


def test_an_arrival_keeps_its_deployment() -> None:
    deployment = article_day.Deployment(3, article_day.KINDS[1], 2, float("inf"))
    made = article_day.arrival(deployment)
    assert isinstance(made, Arrival) and made.group == 3 and made.size == "MIG 2g"
    assert made.extended == (0, 1, 0, 0)


def test_the_command_line_plays_the_article_world_with_its_rows_and_a_re_cut_price() -> None:
    argv = ["--world", "article", "--recut-cost-moves", "5", "--rebalance-min-gain", "0.25"]
    options, _, strategies, _ = replay_day.parse(argv)
    assert (options.world, options.nodes) == ("article", replay_day.ARTICLE_NODES)
    assert strategies == list(replay_day.ARTICLE_STRATEGIES)
    priced = replay_day.settings_for(options, recuts=True).mig
    assert priced.repartition and priced.recut_cost_moves == 5 and priced.rebalance_min_gain == 0.25
    shipped = replay_day.settings_for(replace(options, recut_cost_moves=None), recuts=True).mig
    assert shipped.recut_cost_moves == 5 and not replay_day.settings_for(options).mig.repartition
    assert (
        replay_day.settings_for(replace(options, rebalance_min_gain=None), recuts=True).mig.rebalance_min_gain is None
    )

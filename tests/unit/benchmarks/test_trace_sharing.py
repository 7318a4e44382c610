"""The trace's GPU-sharing pods as time-sliced replicas (``benchmarks/trace_sharing.py``, ``replay_day.py
--shared-replicas``, issue [24] item 3): the mapping of a pod's share to replicas, the nodes sliced for them, and an hour
of the small openb slice that places the replicas on sliced nodes only and loses nothing."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))

import day_strategies  # noqa: E402  (benchmarks/ is not a package)
import replay_day  # noqa: E402
import trace_sharing  # noqa: E402
from generate_cluster import Shape  # noqa: E402
from trace_replay import TraceNode, TracePod  # noqa: E402

from compactor.model.load import DEFAULT_POOL_LABEL  # noqa: E402
from compactor.model.parse import parse_node  # noqa: E402

SLICE = ROOT / "tests" / "data" / "openb-slice"
OPTIONS = replay_day.Options(
    nodes=None, hours=1.0, fill=0.95, every_minutes=10, time_limit=1.0, trace_dir=SLICE, shared_replicas=True
)


def _pod(name: str, gpus: int, milli: int, models: tuple[str, ...] = ()) -> TracePod:
    return TracePod(name, Shape(4_000, 16_384, gpus, milli), models)


def test_a_sharing_pod_asks_the_replicas_its_share_of_a_gpu_rounds_up_to() -> None:
    stream = [(_pod("a", 1, 810), 60.0), (_pod("b", 1, 470), 60.0), (_pod("c", 1, 230), 60.0)]
    stream += [(_pod("whole", 1, 1000), 60.0), (_pod("two", 2, 1000), 60.0), (_pod("cpu", 0, 0), 60.0)]
    mapped = trace_sharing.as_replicas(stream)
    assert [trace_sharing.replicas_asked(p) for p, _ in mapped] == [4, 2, 1, 0, 0, 0]
    assert [trace_sharing.demand_of(p) for p, _ in mapped] == [1.0, 0.5, 0.25, 1.0, 2.0, 0.0]
    assert [p.shape.num_gpu for p, _ in mapped] == [0, 0, 0, 1, 2, 0]


def test_each_models_smallest_nodes_are_sliced_up_to_its_share_of_the_sharing_demand() -> None:
    """T4: a quarter of its demand shares (one GPU of 1 + 3 whole), so 2 of its 8 GPUs, its 2-GPU node; G2: none."""
    nodes = [TraceNode("t4-big", 64_000, 262_144, 4, "T4"), TraceNode("t4-small", 64_000, 262_144, 2, "T4")]
    nodes += [TraceNode("t4-mid", 64_000, 262_144, 2, "T4"), TraceNode("g2", 96_000, 786_432, 8, "G2")]
    stream = [(_pod("s", 1, 810, ("T4",)), 100.0), (_pod("w", 3, 1000, ("T4",)), 100.0), (_pod("g", 8, 1000), 1.0)]
    sliced = trace_sharing.time_slice(nodes, trace_sharing.as_replicas(stream))
    assert [n.name for n in sliced if isinstance(n, trace_sharing.SlicedNode)] == ["t4-mid"]  # ties by name
    t4 = next(n for n in sliced if n.name == "t4-mid")
    assert (t4.gpus, t4.physical_gpus, t4.extended) == (0, 2, {trace_sharing.GPU_SHARED: 8})


def test_an_hour_of_the_slice_places_replicas_on_sliced_nodes_only_and_loses_nothing() -> None:
    day, _, about = replay_day.day_for(replay_day.DEFAULT_CONTROLLER, OPTIONS)
    assert about["timeSlicedNodes"] > 0
    index = next(i for i, n in enumerate(day.nodes) if isinstance(n, trace_sharing.SlicedNode))
    raw = day_strategies._node_object(day.nodes[index], day=day, index=index)
    warnings: list[str] = []
    node = parse_node(raw, source="replay", pool_label=DEFAULT_POOL_LABEL, warnings=warnings)
    assert warnings == [] and node.gpu.physical_gpus == day.nodes[index].physical_gpus
    for strategy in (replay_day.BIN_PACKING, replay_day.DEFAULT_CONTROLLER):
        day, seconds, about = replay_day.day_for(strategy, OPTIONS)
        figures = day.run(seconds, replay_day._ticks(strategy, OPTIONS))
        row = replay_day.summary(strategy, figures, 0.0, about, OPTIONS)
        assert row["lost"] == 0 and row["overcommittedNodes"] == 0 and row["pdbViolations"] == 0, row
        assert row["queueSeconds"][trace_sharing.SHARED_SIZE]["pods"] > 0
        for pod in day.pods.values():
            if pod.node >= 0:
                sliced = isinstance(day.nodes[pod.node], trace_sharing.SlicedNode)
                assert sliced == (pod.size == trace_sharing.SHARED_SIZE) or not pod.uses_gpu, pod
    assert "shared GPU wait p50 / p95 s" in replay_day.small_pods_table([row])


def test_without_the_option_the_replay_is_the_trace_as_before() -> None:
    day, _, about = replay_day.day_for(replay_day.DEFAULT, replace(OPTIONS, shared_replicas=False))
    assert about["timeSlicedNodes"] == 0 and day.extended == {}
    assert not any(a.extended for a in day.load.initial)

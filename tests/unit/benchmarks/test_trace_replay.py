"""benchmarks/trace_replay.py on the small openb slice (tests/data/openb-slice), then the planner and the baselines on what it builds.

The replay is checked with the tool's own model (``load_files``): no node over-allocated, every pod on a node of a
GPU model its ``gpu_spec`` allows, the fill target reached, pending 8-GPU pods that fit nowhere. Then every
method runs on the replayed clusters: the independent checker passes the planner's plans, no method frees more
than the planner's proven bound allows, and the planner is never lexicographically worse than greedy drain.
"""

from __future__ import annotations

import json
import random
import sys
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from compactor.app.plan_document import build_plan
from compactor.model.load import load_files
from compactor.model.resources import GPU
from compactor.model.types import Node, Pod, Snapshot
from compactor.planner.plan import CompactionPlan
from compactor.planner.request import PlanRequest
from compactor.planner.search.baselines import BaselineResult, greedy_drain, high_node_utilization
from compactor.settings.bundles import PlannerSettings
from tests.plancheck import check_plan

ROOT = Path(__file__).resolve().parents[3]
SLICE = ROOT / "tests" / "data" / "openb-slice"
sys.path.insert(0, str(ROOT / "benchmarks"))

import trace_replay  # noqa: E402  (benchmarks/ is not a package)
from generate_cluster import Shape, write  # noqa: E402

VARIANTS = ("default", "gpuspec33")
FILLS = (0.6, 0.8, 0.95)
PLANNER = PlannerSettings.of(objective="max-free", time_limit_seconds=2)
NO_PENDING = PLANNER.amended(place_pending=False)
Replayed = tuple[Path, trace_replay.ReplayStats]


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Replayed]:
    """``replayed(variant, fill, seed=1, nodes=None)``: the snapshot file written from the slice (cached) and the replay's figures."""
    folder = tmp_path_factory.mktemp("openb")
    cache: dict[tuple[str, float, int, int | None], Replayed] = {}

    def make(variant: str, fill: float, seed: int = 1, nodes: int | None = None) -> Replayed:
        key = (variant, fill, seed, nodes)
        if key not in cache:
            options = trace_replay.ReplayOptions(variant=variant, nodes=nodes, fill=fill, seed=seed, trace_dir=SLICE)
            cluster, stats = trace_replay.replay(options)
            path = folder / f"{variant}-{fill}-{seed}-{nodes}.json"
            write(cluster, path)
            cache[key] = path, stats
        return cache[key]

    return make


def _used(snapshot: Snapshot) -> dict[str, dict[str, int]]:
    used: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for pod in snapshot.bound_pods():
        for resource, amount in pod.requests.items():
            used[pod.node_name][resource] += amount
        used[pod.node_name]["pods"] += 0 if "pods" in pod.requests else 1
    return used


def _allowed_products(pod: Pod) -> set[str] | None:
    terms = pod.affinity.required_node_terms
    if terms is None:
        return None
    (term,) = terms
    (requirement,) = term.match_expressions
    assert (requirement.key, requirement.operator) == (trace_replay.PRODUCT_LABEL, "In")
    return set(requirement.values)


def _free(node: Node, used: dict[str, int]) -> dict[str, int]:
    return {resource: amount - used.get(resource, 0) for resource, amount in node.allocatable.items()}


# ---------------------------------------------------------------- the replay


@pytest.mark.parametrize("fill", FILLS)
@pytest.mark.parametrize("variant", VARIANTS)
def test_no_node_is_over_allocated_and_every_pod_runs_on_a_gpu_model_its_spec_allows(
    replayed: Callable[..., Replayed], variant: str, fill: float
) -> None:
    snapshot = load_files([str(replayed(variant, fill)[0])])
    assert snapshot.warnings == ()
    used = _used(snapshot)
    for node in snapshot.nodes:
        assert all(amount >= 0 for amount in _free(node, used[node.name]).values()), node.name
    nodes = snapshot.node_by_name()
    constrained = 0
    for pod in snapshot.bound_pods():
        allowed = _allowed_products(pod)
        if allowed is not None:
            constrained += 1
            assert nodes[pod.node_name].labels[trace_replay.PRODUCT_LABEL] in allowed, pod.key
    assert (constrained > 0) == (variant == "gpuspec33")


def _spec_of_each_trace_pod(variant: str) -> dict[str, tuple[str, ...]]:
    return {pod.name: pod.models for pod in trace_replay.read_pods(SLICE, variant)}


def test_every_gpu_spec_of_the_trace_becomes_the_pods_node_affinity(replayed: Callable[..., Replayed]) -> None:
    cluster = json.loads(replayed("gpuspec33", 0.8)[0].read_text())
    specs = _spec_of_each_trace_pod("gpuspec33")
    pods = [i for i in cluster["items"] if i["kind"] == "Pod" and "annotations" in i["metadata"]]
    assert pods
    for pod in pods:
        models = specs[pod["metadata"]["annotations"][f"{trace_replay.ANNOTATION}/openb-pod"]]
        expected = trace_replay.gpu_spec_affinity(models) if models else None
        assert pod["spec"].get("affinity") == expected


@pytest.mark.parametrize("fill", FILLS)
def test_the_fill_target_is_reached_within_one_pods_gpus(replayed: Callable[..., Replayed], fill: float) -> None:
    path, stats = replayed("gpuspec33", fill)
    snapshot = load_files([str(path)])
    held = sum(pod.requests.get(GPU, 0) for pod in snapshot.bound_pods())
    gpus = sum(node.allocatable.get(GPU, 0) for node in snapshot.nodes)
    assert (held, gpus) == (stats.held_gpus, stats.gpus)
    assert fill * gpus <= held < fill * gpus + stats.last_pod_gpus


@pytest.mark.parametrize("fill", FILLS)
def test_the_pending_8_gpu_pods_fit_nowhere_though_the_cluster_has_8_free_gpus(
    replayed: Callable[..., Replayed], fill: float
) -> None:
    path, stats = replayed("default", fill)
    snapshot = load_files([str(path)])
    pending = snapshot.pending_pods()
    assert len(pending) == 2 and all(pod.requests[GPU] == 8 for pod in pending)
    used = _used(snapshot)
    for node in snapshot.nodes:
        free = _free(node, used[node.name])
        assert not all(amount <= free.get(resource, 0) for resource, amount in pending[0].requests.items()), node.name
    assert sum(_free(node, used[node.name]).get(GPU, 0) for node in snapshot.nodes) >= 8
    assert not stats.pending_fits_somewhere
    raw = [i for i in json.loads(path.read_text())["items"] if i["kind"] == "Pod" and i["status"]["phase"] == "Pending"]
    assert [c["reason"] for pod in raw for c in pod["status"]["conditions"]] == ["Unschedulable", "Unschedulable"]


def test_the_same_seed_gives_a_byte_identical_snapshot(tmp_path: Path) -> None:
    def written(seed: int, name: str) -> bytes:
        cluster, _ = trace_replay.replay(
            trace_replay.ReplayOptions(variant="gpuspec33", nodes=20, fill=0.8, seed=seed, trace_dir=SLICE)
        )
        write(cluster, tmp_path / name)
        return (tmp_path / name).read_bytes()

    assert written(7, "a.json") == written(7, "b.json")
    assert written(7, "a.json") != written(8, "c.json")


def test_a_node_sample_keeps_every_gpu_model_in_proportion() -> None:
    nodes = trace_replay.read_nodes(SLICE)
    sample = trace_replay.stratified_sample(nodes, 20, random.Random(3))
    assert len(sample) == 20 and len({n.name for n in sample}) == 20
    models = {n.model for n in nodes}
    assert {n.model for n in sample} == models
    for model in models:
        share = sum(n.model == model for n in nodes) / len(nodes)
        assert abs(sum(n.model == model for n in sample) - 20 * share) <= 1, model


def _trace_node(name: str, gpus: int = 8, model: str = "G2") -> trace_replay.TraceNode:
    return trace_replay.TraceNode(name, 96_000, 393_216, gpus, model)


def _trace_pod(name: str, gpus: int, models: tuple[str, ...] = ()) -> trace_replay.TracePod:
    return trace_replay.TracePod(name, Shape(4_000, 16_384, gpus, 1000), models)


def test_the_scheduler_spreads_by_least_allocated_breaks_ties_by_name_and_honours_the_gpu_spec() -> None:
    nodes = [_trace_node("a"), _trace_node("b"), _trace_node("c", model="T4")]
    scheduler = trace_replay.DefaultScheduler(nodes, [[0, 0, 0]] * 3, [0] * 3, balanced=True)
    assert scheduler.place((4_000, 16_384, 1), ["G2"]) == 0  # a tie: the first name
    assert scheduler.place((4_000, 16_384, 1), ["G2"]) == 1  # b is now the least allocated
    assert scheduler.place((4_000, 16_384, 1)) == 2
    assert scheduler.place((4_000, 16_384, 8), ["G2"]) is None  # 7 GPUs free on a and b


def test_inflation_replays_the_pod_list_until_the_target_and_skips_what_fits_nowhere() -> None:
    scheduler = trace_replay.DefaultScheduler(
        [_trace_node("a", 16), _trace_node("b", 16)], [[0, 0, 0]] * 2, [0] * 2, balanced=True
    )
    pods = [_trace_pod("one", 1), _trace_pod("t4", 1, ("T4",)), _trace_pod("four", 4)]
    run = trace_replay.inflate(scheduler, pods, target_gpus=12, keep=1.0, rng=random.Random(0))
    assert run.held_gpus == 15 and run.cycles == 3  # 5 GPUs a cycle; the pod crossing 12 is the last
    assert run.skipped == 3  # the T4 pod, once per cycle
    assert [pod.name for pod, _ in run.placed] == ["one", "four"] * 3


# ---------------------------------------------------------------- the methods on replayed clusters


@dataclass(frozen=True)
class Outcome:
    """One method's result, in the terms the invariants compare."""

    method: str
    freed_gpus: int
    pending_placed: int
    moves: int


@dataclass(frozen=True)
class Runs:
    snapshot: Snapshot
    planner: CompactionPlan
    no_pending: CompactionPlan
    outcomes: tuple[Outcome, ...]


def _planned(snapshot: Snapshot, settings: PlannerSettings, source: str) -> CompactionPlan:
    return build_plan(
        PlanRequest.of(snapshot, settings, source=source, now=datetime(2024, 3, 18, tzinfo=UTC), plan_id="plan-test")
    )


def _outcome(method: str, result: CompactionPlan | BaselineResult) -> Outcome:
    if isinstance(result, CompactionPlan):
        return Outcome(method, result.freed_gpus, len(result.placed_pending), len(result.moves))
    return Outcome(method, result.freed_gpus, result.pending_placed, result.moves)


@pytest.fixture(scope="module", params=VARIANTS)
def runs(request: pytest.FixtureRequest, replayed: Callable[..., Replayed]) -> Runs:
    """Every method on the slice replayed at fill 0.8: planner (2 s), planner without pending placement, greedy, both HNU scorings."""
    path = str(replayed(request.param, 0.8)[0])
    snapshot = load_files([path])
    planner, no_pending = _planned(snapshot, PLANNER, path), _planned(snapshot, NO_PENDING, path)
    baselines = {
        "greedy-drain": greedy_drain(snapshot, PLANNER),
        "hnu-least": high_node_utilization(snapshot, PLANNER, scoring="LeastAllocated"),
        "hnu-most": high_node_utilization(snapshot, PLANNER, scoring="MostAllocated"),
    }
    outcomes = [
        _outcome("planner", planner),
        _outcome("planner-no-pending", no_pending),
        *(_outcome(m, r) for m, r in baselines.items()),
    ]
    return Runs(snapshot, planner, no_pending, tuple(outcomes))


def test_the_independent_checker_passes_every_planner_plan(runs: Runs) -> None:
    assert check_plan(runs.snapshot, runs.planner, PLANNER) == []
    assert check_plan(runs.snapshot, runs.no_pending, NO_PENDING) == []


def test_no_method_frees_more_gpus_than_the_planners_proven_bound(runs: Runs) -> None:
    """Without pending placement the bound caps every method (placing a pending pod never frees a node). With it,
    the bound is the max-free level's under the pending level's result: it caps the methods that place as many."""
    over = []
    bound = runs.no_pending.solver.bound
    if bound is not None:
        over += [
            f"{o.method}: {o.freed_gpus} > no-pending bound {bound:g}" for o in runs.outcomes if o.freed_gpus > bound
        ]
    bound = runs.planner.solver.bound
    placed = len(runs.planner.placed_pending)
    if bound is not None:
        over += [
            f"{o.method}: {o.freed_gpus} > bound {bound:g} with {placed} pending placed"
            for o in runs.outcomes
            if o.pending_placed >= placed and o.freed_gpus > bound
        ]
    assert over == []


def test_the_planner_is_never_worse_than_greedy_drain_in_pending_placed_then_freed_gpus(runs: Runs) -> None:
    ours, greedy = runs.outcomes[0], next(o for o in runs.outcomes if o.method == "greedy-drain")
    assert (ours.pending_placed, ours.freed_gpus) >= (greedy.pending_placed, greedy.freed_gpus), (ours, greedy)


# ---------------------------------------------------------------- kube-scheduler v1.36 as upstream scores (kube_scheduler.py)
# The day replay's scheduler. Expected values are worked by hand from the Go formulas; those marked "realk8s" are also the
# scores the real v1.36.2 scheduler logged for the same pods and nodes (calibrate_scheduler.py).

import kube_scheduler as ks  # noqa: E402
import numpy as np  # noqa: E402


@pytest.mark.parametrize(("nodes", "expected"), [(50, 50), (99, 99), (100, 100), (400, 188), (1213, 497), (5000, 500)])
def test_num_feasible_nodes_to_find_is_upstreams_adaptive_percentage(nodes: int, expected: int) -> None:
    """Below 100 nodes every node; else nodes x (50 - nodes / 125)% (at least 5%), at least 100: 400 x 47% = 188,
    1,213 x 41% = 497 (integer), 5,000 x 10% = 500."""
    assert ks.num_feasible_nodes_to_find(nodes) == expected
    assert ks.num_feasible_nodes_to_find(nodes, percentage=100) == nodes
    assert ks.num_feasible_nodes_to_find(20_000) == 1_000  # the 5% floor: 50 - 160 < 5


def test_least_allocated_is_the_integer_mean_of_cpu_and_memory_only() -> None:
    """(allocatable - requested) * 100 // allocatable per resource, then the weighted integer mean; nvidia.com/gpu is not
    in the default profile's resources. realk8s: 91 on a 96-core / 384 GiB node for a 12-core / 16 GiB pod (87 and 95),
    92 on a 104-core / 512 GiB one (88 and 96), 84 there with a second such pod (76 and 93)."""
    alloc = np.array([[96_000, 393_216], [104_000, 524_288], [104_000, 524_288]])
    requested = np.array([[12_000, 16_384], [12_000, 16_384], [24_000, 32_768]])
    assert ks.least_allocated(requested, alloc, (1, 1)).tolist() == [91, 92, 84]
    assert ks.least_allocated(np.array([[97_000, 0]]), np.array([[96_000, 1]]), (1, 1)).tolist() == [50]  # over: 0


def test_balanced_allocation_scores_the_change_of_balance_as_v1_36_does() -> None:
    """50 + (50 + with - without) // 2, with/without = int((1 - |f_cpu - f_mem| / 2) * 100). realk8s: 72 for the first
    12-core / 16 GiB pod on an empty 96-core / 384 GiB node (with 95, without 100), 73 for the second on a 104-core /
    512 GiB node already holding one (with 91, without 95)."""
    alloc = np.array([[96_000, 393_216], [104_000, 524_288]])
    without = np.array([[0, 0], [12_000, 16_384]])
    with_pod = without + np.array([12_000, 16_384])
    assert ks.balance(with_pod, alloc).tolist() == [95, 91]
    assert ks.balance(without, alloc).tolist() == [100, 95]
    assert ks.balanced_allocation(without, with_pod, alloc).tolist() == [72, 73]
    # no change of balance: 75; from balanced to the most unbalanced: 50
    assert ks.balanced_allocation(np.array([[0, 0]]), np.array([[0, 0]]), np.array([[10, 10]])).tolist() == [75]
    assert ks.balanced_allocation(np.array([[0, 0]]), np.array([[10, 0]]), np.array([[10, 10]])).tolist() == [50]


def test_most_allocated_weights_the_gpus_five_times_and_skips_them_for_a_pod_without_any() -> None:
    """min(requested, allocatable) * 100 // allocatable per resource; cpu 1, memory 1, nvidia.com/gpu 5: a 96-core /
    384 GiB / 8-GPU node with 24 cores, 32 GiB, 2 GPUs requested: (25 + 8 + 5 x 25) // 7 = 22; without the GPU
    (a pod not requesting it) (25 + 8) // 2 = 16."""
    alloc = np.array([[96_000, 393_216, 8]])
    requested = np.array([[24_000, 32_768, 2]])
    assert ks.most_allocated(requested, alloc, (1, 1, 5)).tolist() == [22]
    assert ks.most_allocated(requested, alloc, (1, 1, 0)).tolist() == [16]
    assert ks.most_allocated(np.array([[200_000, 0, 9]]), alloc, (1, 1, 5)).tolist() == [85]  # (100 + 0 + 500) // 7


def test_the_profiles_total_what_differs_between_nodes() -> None:
    nodes = [_trace_node("a"), _trace_node("b")]
    default = ks.KubeScheduler(nodes, profile="default")
    default.bind(0, (48_000, 0, 4))
    parts = default.components((4_000, 16_384, 1), np.array([0, 1]), siblings=[0])
    assert set(parts) == {"NodeResourcesFit", "NodeResourcesBalancedAllocation", "PodTopologySpread"}
    # LeastAllocated ignores the 4 GPUs held on a: only its cpu tells it apart
    assert parts["NodeResourcesFit"].tolist() == [(45 + 95) // 2, (95 + 95) // 2]
    bin_packing = ks.KubeScheduler(nodes, profile="bin-packing")
    bin_packing.bind(0, (48_000, 0, 4))
    parts = bin_packing.components((4_000, 16_384, 1), np.array([0, 1]))
    # weight 5 x the weighted mean: a (54 + 4 + 5 x 62) // 7 = 52, b (4 + 4 + 5 x 12) // 7 = 9
    assert parts == {"NodeResourcesFit": pytest.approx(np.array([5 * 52, 5 * 9]))}


def test_default_spreading_counts_the_replicasets_pods_per_node_and_normalizes_them() -> None:
    """round(count x ln(feasible + 2) + 2), then 100 x (max + min - raw) // max. realk8s, 3 feasible nodes, one sibling
    on the first: raw 4 (1 x ln 5 + 2 = 3.6), 2, 2: 50, 100, 100 (the scheduler logs them x 2, the weight)."""
    assert ks.spread(np.array([1, 0, 0]), 3).tolist() == [50, 100, 100]
    assert ks.spread(np.array([0, 0, 0]), 3).tolist() == [100, 100, 100]
    assert ks.spread(np.array([2, 1, 0]), 100).tolist() == [100 * (11 + 2 - 11) // 11, 100 * (11 + 2 - 7) // 11, 100]


def test_ties_are_broken_at_random_but_the_same_seed_breaks_them_the_same_way() -> None:
    nodes = [_trace_node(f"n{i}") for i in range(8)]

    def picks(seed: int) -> list[int | None]:
        scheduler = ks.KubeScheduler(nodes, profile="bin-packing", seed=seed)
        return [scheduler.place((1_000, 1_024, 8)) for _ in range(8)]  # identical empty nodes: all tie each time

    assert picks(1) == picks(1)
    assert sorted(p for p in picks(1) if p is not None) == list(range(8))
    assert len({tuple(picks(seed)) for seed in range(1, 6)}) > 1, "different seeds, different ties"
    assert picks(1) != list(range(8)), "not the first node by name"


def test_only_the_feasible_nodes_found_from_the_round_robin_start_are_scored() -> None:
    nodes = [_trace_node(f"n{i:03d}") for i in range(400)]
    scheduler = ks.KubeScheduler(nodes, profile="default")
    assert scheduler.to_find == 188
    first = scheduler.candidates((1_000, 1_024, 1))
    assert first.tolist() == list(range(188)) and scheduler.next_start == 188
    scheduler.fenced[188:200] = True  # infeasible nodes are examined, not found
    second = scheduler.candidates((1_000, 1_024, 1))
    assert second.tolist() == list(range(200, 388)) and scheduler.next_start == 388
    third = scheduler.candidates((1_000, 1_024, 1))
    assert third.tolist() == [*range(388, 400), *range(0, 176)] and scheduler.next_start == 176


def test_the_upstream_emulation_fits_as_the_filters_say_and_keeps_its_books() -> None:
    nodes = [_trace_node("a"), _trace_node("b"), _trace_node("c", model="T4")]
    scheduler = ks.KubeScheduler(nodes, profile="default")
    assert scheduler.place((4_000, 16_384, 8), ["T4"]) == 2
    assert scheduler.place((4_000, 16_384, 1), ["T4"]) is None  # c's 8 GPUs are held
    node = scheduler.place((4_000, 0, 1))
    assert node in (0, 1) and scheduler.nonzero[node].tolist() == [4_000, ks.DEFAULT_MEMORY_REQUEST_MIB]
    assert scheduler.used[node].tolist() == [4_000, 0, 1]
    scheduler.release(node, (4_000, 0, 1))
    assert scheduler.used.sum() == 4_000 + 16_384 + 8 and scheduler.nonzero[node].tolist() == [0, 0]


def _mig_node(name: str, slices: int = 0) -> SimpleNamespace:
    """A node of 96 cores and 384 GiB whose device plugin offers ``slices`` MIG 1g.5gb instances and no whole GPU."""
    extended = {"nvidia.com/mig-1g.5gb": slices} if slices else {}
    return SimpleNamespace(name=name, cpu_milli=96_000, memory_mib=393_216, gpus=0, model="A100", extended=extended)


def test_extended_resources_filter_as_any_resource_and_neither_profile_scores_them() -> None:
    """MIG instances are extended resources: a pod asking one fits only where the node offers it, and the scores are
    the same whatever instances a node already holds (neither profile lists them); a re-cut changes what it offers."""
    nodes = [_mig_node("a", 56), _mig_node("b", 56), _mig_node("c")]
    slice_pod = (4_000, 16_384, 0, 1)
    for profile in ks.PROFILES:
        scheduler = ks.KubeScheduler(nodes, profile=profile, extended=("nvidia.com/mig-1g.5gb",))
        assert scheduler.feasible(slice_pod).tolist() == [True, True, False]
        scheduler.bind(0, (0, 0, 0, 55))
        parts = scheduler.components(slice_pod, np.array([0, 1]))
        assert parts and all(v[0] == v[1] for v in parts.values()), (profile, parts)
        assert scheduler.fits(0, slice_pod) and not scheduler.fits(0, (0, 0, 0, 2))
        scheduler.reoffer(1, {})  # b re-cut away from 1g instances
        assert scheduler.feasible(slice_pod).tolist() == [True, False, False]
        assert scheduler.fits(2, (4_000, 16_384))  # a request without the extended columns asks none of them

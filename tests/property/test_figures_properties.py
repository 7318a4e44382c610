"""Properties of the fragmentation figures on random small clusters.

Covers: independence from node and pod order; free + allocated = allocatable per
resource for every node, pool and the cluster; pools add up to the cluster;
every rate in [0, 1]; per-node identities (fragment <= free, whole-free +
busy-node free = free, headline >= FGD for GPU-only shapes).
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactor.metrics.figure_types import AggregateFigures, Figures
from compactor.metrics.figures_json import figures_to_dict
from compactor.metrics.fragmentation import compute_figures
from compactor.model.resources import Resources
from tests.builders import A100_40, cluster, node, pod

# Valid A100-40GB mixed layouts (memory slices <= 8 per GPU).
MIG_LAYOUTS = (
    {"1g.5gb": 7},
    {"3g.20gb": 2},
    {"2g.10gb": 3},
    {"3g.20gb": 1, "1g.5gb": 3},
    {"4g.20gb": 1, "2g.10gb": 1, "1g.5gb": 1},
)
MIG_PROFILES = ("1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb")
SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def nodes(draw: st.DrawFn, index: int) -> dict[str, Any]:
    name = f"n{index}"
    kind = draw(st.sampled_from(("cpu", "whole", "mig", "mixed", "sliced")))
    common: dict[str, Any] = {
        "cpu": str(draw(st.integers(4, 64))),
        "pods": draw(st.integers(2, 20)),
        "unschedulable": draw(st.booleans()),
        "ready": draw(st.booleans().map(lambda down: not down) if index else st.just(True)),
    }
    if kind == "cpu":
        return node(name, **common)
    if kind == "whole":
        return node(name, gpus=draw(st.integers(1, 8)), **common)
    if kind == "sliced":
        return node(name, gpus=draw(st.integers(1, 4)), replicas=draw(st.sampled_from((2, 4))), **common)
    mig = dict(draw(st.sampled_from(MIG_LAYOUTS)))
    return node(name, gpus=1 if kind == "mixed" else 0, mig=mig, product=A100_40, **common)


@st.composite
def pods(draw: st.DrawFn, index: int, node_names: list[str]) -> dict[str, Any]:
    on = draw(st.one_of(st.none(), st.sampled_from(node_names)))
    gpu_kind = draw(st.sampled_from(("none", "whole", "mig")))
    extra: dict[str, Any] = {}
    if gpu_kind == "whole":
        extra["gpus"] = draw(st.integers(1, 4))
    elif gpu_kind == "mig":
        extra["mig"] = draw(st.sampled_from(MIG_PROFILES))
    return pod(f"p{index}", on=on, cpu=str(draw(st.integers(1, 16))), priority=draw(st.integers(0, 2)), **extra)


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    node_objs = [draw(nodes(i)) for i in range(draw(st.integers(1, 6)))]
    names = [n["metadata"]["name"] for n in node_objs]
    pod_objs = [draw(pods(i, names)) for i in range(draw(st.integers(0, 14)))]
    return node_objs, pod_objs


def by_name(doc: dict[str, Any]) -> dict[str, Any]:
    return {**doc, "nodes": sorted(doc["nodes"], key=lambda n: n["name"])}


def rates(a: AggregateFigures) -> list[float | None]:
    return [a.fragmentation_rate, a.fgd_fragmentation_rate, a.mig_idle_rate, a.gpu_utilisation]


@SETTINGS
@given(clusters(), st.data())
def test_figures_do_not_depend_on_node_or_pod_order(objects: tuple[list[Any], list[Any]], data: st.DataObject) -> None:
    node_objs, pod_objs = objects
    shuffled_nodes = data.draw(st.permutations(node_objs))
    shuffled_pods = data.draw(st.permutations(pod_objs))
    first = figures_to_dict(compute_figures(cluster(*node_objs, *pod_objs)))
    second = figures_to_dict(compute_figures(cluster(*shuffled_nodes, *shuffled_pods)))
    assert by_name(first) == by_name(second)


def check_balance(allocatable: Resources, allocated: Resources, free: Resources) -> None:
    for resource in set(allocatable) | set(allocated) | set(free):
        assert free.get(resource) + allocated.get(resource) == allocatable.get(resource), resource


@SETTINGS
@given(clusters())
def test_free_plus_allocated_is_allocatable_for_every_node_pool_and_the_cluster(
    objects: tuple[list[Any], list[Any]],
) -> None:
    figures = compute_figures(cluster(*objects[0], *objects[1]))
    for item in figures.nodes:
        check_balance(item.allocatable, item.allocated, item.free)
    for aggregate in (*figures.pools, figures.cluster):
        check_balance(aggregate.allocatable, aggregate.allocated, aggregate.free)


def pool_sums(figures: Figures) -> None:
    c = figures.cluster
    for name in (
        "node_count",
        "gpu_node_count",
        "gpus",
        "whole_free_nodes",
        "overcommitted_nodes",
        "pod_count",
        "gpu_pod_count",
    ):
        assert sum(getattr(p, name) for p in figures.pools) == getattr(c, name), name
    for name in (
        "allocatable_gpus",
        "allocated_gpus",
        "free_gpus",
        "whole_free_gpus",
        "busy_free_gpus",
        "stranded_gpus",
        "unavailable_free_gpus",
        "fragmented_gpus",
        "fgd_fragmented_gpus",
        "mig_idle_gpus",
        "mig_gpus",
    ):
        assert math.isclose(math.fsum(getattr(p, name) for p in figures.pools), getattr(c, name), abs_tol=1e-9), name
    for name in ("allocatable", "allocated", "free"):
        total: Resources = Resources()
        for p in figures.pools:
            total = total + getattr(p, name)
        assert total == getattr(c, name), name


@SETTINGS
@given(clusters())
def test_pool_figures_add_up_to_the_cluster(objects: tuple[list[Any], list[Any]]) -> None:
    pool_sums(compute_figures(cluster(*objects[0], *objects[1])))


@SETTINGS
@given(clusters())
def test_every_rate_lies_between_zero_and_one(objects: tuple[list[Any], list[Any]]) -> None:
    figures = compute_figures(cluster(*objects[0], *objects[1]))
    for aggregate in (figures.cluster, *figures.pools):
        assert all(0.0 <= r <= 1.0 for r in rates(aggregate) if r is not None)
    assert math.isclose(sum(s.weight for s in figures.shapes), 1.0) or not figures.shapes


@SETTINGS
@given(clusters())
def test_node_fragments_stay_within_the_free_capacity_and_the_headline_bounds_fgd(
    objects: tuple[list[Any], list[Any]],
) -> None:
    figures = compute_figures(cluster(*objects[0], *objects[1]))
    for n in figures.nodes:
        assert n.free_gpus >= 0
        assert 0 <= n.fgd_fragmented_gpus <= n.fragmented_gpus + 1e-9  # workload shapes all request a GPU
        assert n.fragmented_gpus <= n.free_gpus + 1e-9
        assert math.isclose((n.free_gpus if n.whole_free else 0.0) + n.busy_free_gpus, n.free_gpus) or n.gpus == 0
        assert -1e-9 <= n.stranded_gpus <= n.free_gpus + 1e-9
    c = figures.cluster
    assert math.isclose(c.whole_free_gpus + c.busy_free_gpus, c.free_gpus, abs_tol=1e-9) or c.gpus == 0
    assert c.stranded_share is None or 0.0 <= c.stranded_share <= 1.0

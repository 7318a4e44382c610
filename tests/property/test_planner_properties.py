"""Planner properties on random small clusters.

1. Any plan for a random cluster (whole-GPU and MIG nodes, taints, cordons, bare
   pods, blocking PDBs, local storage, pending pods, random limits and modes)
   passes the independent checker.
2. On tiny clusters (<= 4 nodes, <= 6 movable pods) a brute force enumerates every
   assignment of the movable pods (and pending pods) to nodes that respects
   eligibility and capacity; the plan places as many pending pods as the best
   assignment, frees as many net GPUs, and uses the fewest moves among those.

The brute force uses only the checker's re-derived rules (``tests/plancheck``).
"""

from __future__ import annotations

import os
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, assume, given, note
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from compactor.app.plan_document import build_plan
from compactor.model.types import Pod, Snapshot
from compactor.planner.cpsat.deadline import Deadline
from compactor.planner.objective import empty_nodes, within_limits
from compactor.planner.plan import CompactionPlan
from compactor.planner.problem import build_problem
from compactor.planner.request import PlanRequest
from compactor.planner.search.baselines import greedy_drain
from compactor.planner.search.greedy import Drainer, greedy
from compactor.planner.search.move_bound import fewest_moves_cost, most_freed_within
from compactor.planner.solution import concretise, gpu_nodes_changed
from compactor.settings.bundles import PlannerSettings
from compactor.settings.cost import MoveCostSettings
from tests.builders import A100_40, H100_80, claim_volume, cluster, node, pdb, pod, pv, pvc
from tests.plancheck import (
    capacity_of,
    check_plan,
    demand,
    is_gpu_pod,
    is_pending,
    loads_before,
    movable_pods,
    node_gpus,
    placeable_reason,
    target_reason,
    uses_capacity,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
# brute forces count moves: every move priced alike
BY_COUNT = MoveCostSettings(capacity_share=0.0, per_startup_minute=0)
TAINT = {"key": "dedicated", "value": "batch", "effect": "NoSchedule"}
TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}
DRAINING = {"key": "draining", "value": "", "effect": "NoExecute"}
TOLERATE_DRAINING = (
    {"key": "draining", "operator": "Exists", "effect": "NoExecute"},
    {"key": "draining", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
)
KEEP_WEB_OUT = (
    {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"},
    {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone"},
)
MIG_PROFILES = ("1g.5gb", "2g.10gb")
# PLANNER_PROPERTY_EXAMPLES=1000 for a longer hunt; 30 keeps the suite well under a minute.
PROPERTY = hsettings(
    max_examples=int(os.environ.get("PLANNER_PROPERTY_EXAMPLES", "30")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# ---------------------------------------------------------------------------- random clusters


@st.composite
def clusters(
    draw: st.DrawFn, *, max_nodes: int = 5, max_bound: int = 12, max_pending: int = 2, tiny: bool = False
) -> list[dict[str, Any]]:
    """Kubernetes objects for a random small GPU cluster (sometimes with a CPU-only node and CPU-only pods)."""
    objects: list[dict[str, Any]] = []
    free: dict[str, dict[str, int]] = {}
    nodes = draw(st.integers(2, max_nodes))
    for i in range(nodes):
        name = f"n{i}"
        features: dict[str, Any] = {"cpu": str(draw(st.sampled_from([8, 16, 64])))}
        if draw(st.integers(0, 9)) < 2:
            features["unschedulable"] = True
        elif draw(st.integers(0, 19)) == 0:
            features["ready"] = False
        taint = draw(st.integers(0, 9))
        if taint < 2:
            features["taints"] = [TAINT]
        elif taint == 2:
            features["taints"] = [DRAINING]
        features["labels"] = {"zone": f"z{i % 2}"}
        if not tiny and draw(st.integers(0, 19)) == 0:
            features["labels"]["compactor.io/exclude"] = "true"
        if draw(st.integers(0, 3)) == 0:
            small = draw(st.integers(0, 4))
            double = draw(st.integers(0 if small else 1, 3))
            mig = {p: k for p, k in zip(MIG_PROFILES, (small, double), strict=True) if k}
            objects.append(node(name, mig=mig, physical_gpus=1, **features))
            free[name] = {"nvidia.com/mig-" + p: k for p, k in mig.items()}
        else:
            gpus = draw(st.integers(2, 8))
            label = gpus + draw(st.sampled_from([0, 0, 0, 0, 2]))  # now and then GFD counts GPUs allocatable lacks
            product = draw(st.sampled_from([A100_40, A100_40, H100_80]))  # two pools
            objects.append(node(name, gpus=gpus, physical_gpus=label, product=product, **features))
            free[name] = {"nvidia.com/gpu": gpus}
        free[name]["cpu"] = int(features["cpu"])
    names = [f"n{i}" for i in range(nodes)]
    if draw(st.integers(0, 3)) == 0:
        cpu_node = str(draw(st.sampled_from([4, 8])))
        objects.append(node("cpu0", cpu=cpu_node))
        free["cpu0"] = {"cpu": int(cpu_node)}
        names.append("cpu0")

    guarded = False
    wanted, bound = draw(st.integers(2 if tiny else 0, max_bound)), 0
    for j in range(3 * wanted):
        if bound == wanted:
            break
        where = draw(st.sampled_from(names))
        kwargs = _pod_shape(draw, free[where])
        if kwargs is None:
            continue
        overcommit = not tiny and draw(st.integers(0, 19)) == 0
        cpu = draw(st.sampled_from([1, 1, 1, 2, 4]))  # mostly equal, so pods share a type
        if any(free[where][r] < v for r, v in kwargs["_res"].items()) and not overcommit:
            continue
        if free[where]["cpu"] < cpu and not overcommit:
            continue
        for r, v in kwargs.pop("_res").items():
            free[where][r] -= v
        free[where]["cpu"] -= cpu
        bound += 1
        namespace = draw(st.sampled_from(["default"] * 4 + ["team"]))
        feature = draw(
            st.sampled_from(
                ["plain"] * 6
                + [
                    "bare",
                    "pdb",
                    "local",
                    "daemonset",
                    "evict-true-local",
                    "web",
                    "anti",
                    "port",
                    "pvc-zonal",
                    "pvc-local",
                    "pvc-unknown",
                ]
            )
        )
        extra: dict[str, Any] = {}
        if feature == "web":
            extra["labels"] = {"app": "web"}
        elif feature == "anti":
            extra["anti_affinity"] = [draw(st.sampled_from(KEEP_WEB_OUT))]
        elif feature == "port":
            extra["host_ports"] = [9000]
        elif feature.startswith("pvc"):
            extra["volumes"] = claim_volume(f"claim{j}")
            if feature != "pvc-unknown":
                zonal = feature == "pvc-zonal"
                objects += [
                    pvc(f"claim{j}", volume=f"vol{j}", namespace=namespace),
                    pv(
                        f"vol{j}",
                        zone=f"z{int(where[1:]) % 2}" if zonal and where != "cpu0" else None,
                        on_nodes=None if zonal else [where],
                    ),
                ]
        elif feature == "bare":
            extra["owner"] = None
        elif feature == "pdb":
            extra["labels"] = {"app": "guarded"}
            guarded = True
        elif feature == "local":
            extra["volumes"] = [{"name": "scratch", "emptyDir": {}}]
        elif feature == "daemonset":
            extra["owner"] = "DaemonSet/agent"
        elif feature == "evict-true-local":
            extra["volumes"] = [{"name": "scratch", "emptyDir": {}}]
            extra["annotations"] = {"compactor.io/evict": "true"}
        tolerate = draw(st.integers(0, 5))
        if tolerate == 0:
            extra["tolerations"] = [TOLERATION]
        elif tolerate == 1:
            extra["tolerations"] = [draw(st.sampled_from(TOLERATE_DRAINING))]
        objects.append(pod(f"p{j}", on=where, cpu=str(cpu), namespace=namespace, **kwargs, **extra))
    if guarded:
        objects.append(pdb("guard", match={"app": "guarded"}, allowed=0))

    for k in range(draw(st.integers(0, max_pending))):
        if draw(st.booleans()):
            shape: dict[str, Any] = {"gpus": draw(st.integers(1, 8))}
        else:
            shape = {"mig": draw(st.sampled_from(MIG_PROFILES))}
        if draw(st.integers(0, 3)) == 0:
            shape["tolerations"] = [TOLERATION]
        unmodelled = draw(st.integers(0, 7))
        if unmodelled == 0:
            shape["anti_affinity"] = [KEEP_WEB_OUT[0]]
        elif unmodelled == 1:
            shape["scheduler"] = "volcano"
        elif unmodelled == 2:
            shape["labels"] = {"app": "web"}  # kept off nodes where an anti-affinity holder runs
        if not tiny:  # the brute force counts placed pods; priorities only vary where no optimum is compared
            shape["priority"] = draw(st.sampled_from([0, 100]))
        objects.append(pod(f"wait{k}", owner="Job/wait", cpu=str(draw(st.integers(1, 4))), **shape))
    return objects


def _pod_shape(draw: st.DrawFn, free: dict[str, int]) -> dict[str, Any] | None:
    """A GPU request the node advertises (1-4 whole GPUs or one MIG slice), or now and then no GPU at all."""
    if draw(st.integers(0, 7)) == 0:
        return {"_res": {}}
    if "nvidia.com/gpu" in free:
        gpus = draw(st.integers(1, 4))
        return {"gpus": gpus, "_res": {"nvidia.com/gpu": gpus}}
    profiles = [r.removeprefix("nvidia.com/mig-") for r in free if r.startswith("nvidia.com/mig-")]
    if not profiles:
        return None
    profile = draw(st.sampled_from(sorted(profiles)))
    return {"mig": profile, "_res": {"nvidia.com/mig-" + profile: 1}}


@st.composite
def planner_settings(draw: st.DrawFn) -> PlannerSettings:
    shapes = draw(st.integers(0, 4)) == 0
    return PlannerSettings.of(
        min_replicas=1,
        time_limit_seconds=5,
        workers=2,
        goal="shapes" if shapes else "free-nodes",
        target_shapes=[draw(st.sampled_from(["nvidia.com/gpu=2", "nvidia.com/gpu=4", "nvidia.com/mig-1g.5gb=1"]))]
        if shapes
        else [],
        max_moves=draw(st.sampled_from([None, None, 0, 1, 3])),
        max_moves_per_node=draw(st.sampled_from([None, None, 1, 2])),
        max_moves_per_namespace=draw(st.sampled_from([None, None, 1, 2])),
        min_gain_per_move=draw(st.sampled_from([0.0, 0.0, 0.5, 2.0])),
        exclude_namespaces=draw(st.sampled_from([["kube-system"], ["team"]])),
        namespaces=draw(st.sampled_from([[], [], ["default"]])),
    )


def _plan(snapshot: Snapshot, config: PlannerSettings) -> CompactionPlan:
    plan = build_plan(PlanRequest.of(snapshot, config, source="property", now=NOW))
    note(plan.to_json())
    return plan


# ---------------------------------------------------------------------------- property 1: every plan is valid


@PROPERTY
@given(objects=clusters(), config=planner_settings())
def test_every_plan_passes_the_checker(objects: list[dict[str, Any]], config: PlannerSettings) -> None:
    snapshot = cluster(*objects)
    plan = _plan(snapshot, config)
    assert plan.solver.status in ("OPTIMAL", "FEASIBLE")
    errors = check_plan(snapshot, plan, config)
    assert not errors, errors


# ---------------------------------------------------------------------------- property 2: optimal vs brute force


def brute_force(snapshot: Snapshot, config: PlannerSettings) -> tuple[int, int, int]:
    """(most pending pods placed, best net freed GPUs given that, fewest moves given both)."""
    leaves = enumerate_outcomes(snapshot, config)
    placed, net, _, moves = max(leaves, key=lambda leaf: (leaf[0], leaf[1], -leaf[3]))
    return placed, net, moves


def brute_force_curve(snapshot: Snapshot, config: PlannerSettings) -> dict[int, int]:
    """With the most pending pods placed: k freed nodes -> the fewest moves of any assignment freeing at least k."""
    leaves = enumerate_outcomes(snapshot, config)
    most = max(leaf[0] for leaf in leaves)
    best = {
        leaf[2]: min(m for p, _, n, m in leaves if p == most and n >= leaf[2]) for leaf in leaves if leaf[0] == most
    }
    return dict(sorted(best.items()))


def brute_force_gpu_curve(snapshot: Snapshot, config: PlannerSettings) -> dict[int, int]:
    """With the most pending pods placed: net freed GPUs -> the fewest moves of any assignment freeing exactly that many."""
    leaves = enumerate_outcomes(snapshot, config)
    most = max(leaf[0] for leaf in leaves)
    best: dict[int, int] = {}
    for placed, net, _, moves in leaves:
        if placed == most:
            best[net] = min(moves, best.get(net, moves))
    return best


def enumerate_outcomes(snapshot: Snapshot, config: PlannerSettings) -> set[tuple[int, int, int, int]]:
    """(pending placed, net freed GPUs, freed nodes, moves) of every assignment that respects eligibility and capacity and
    whose moves can be made one eviction at a time (an end state only a swap of full nodes reaches is no plan)."""
    nodes = list(snapshot.nodes)
    names = [n.name for n in nodes]
    index = {name: i for i, name in enumerate(names)}
    reasons = movable_pods(snapshot, config)
    movable = [p for p in snapshot.pods if uses_capacity(p) and reasons[p.key] is None]
    pending = [
        p for p in snapshot.pods if is_pending(p) and is_gpu_pod(p) and placeable_reason(p, snapshot, config) is None
    ]
    before = loads_before(snapshot)
    caps = [capacity_of(n, before[n.name], snapshot) for n in nodes]
    loads = [dict(before[name]) for name in names]
    for p in movable:
        for r, v in demand(p).items():
            loads[index[p.node_name]][r] -= v
    gpu_before = Counter(index[p.node_name] for p in snapshot.pods if uses_capacity(p) and is_gpu_pod(p))
    gpu_now = Counter(
        index[p.node_name] for p in snapshot.pods if uses_capacity(p) and is_gpu_pod(p) and reasons[p.key] is not None
    )
    gpus = [node_gpus(n) for n in nodes]

    def options(p: Pod, current: int | None) -> list[int | None]:
        others = [i for i, n in enumerate(nodes) if i != current and target_reason(p, n, snapshot, config) is None]
        return [current, *others]

    items: list[tuple[Pod, int | None, list[int | None]]] = [
        (p, index[p.node_name], options(p, index[p.node_name])) for p in movable
    ]
    items += [(p, None, options(p, None)) for p in pending]
    outcomes: set[tuple[int, int, int, int]] = set()

    def fits(p: Pod, i: int) -> bool:
        load, cap = loads[i], caps[i]
        return all(load.get(r, 0) + v <= cap.get(r, 0) for r, v in demand(p).items())

    def shift(p: Pod, i: int, sign: int) -> None:
        for r, v in demand(p).items():
            loads[i][r] = loads[i].get(r, 0) + sign * v
        if is_gpu_pod(p):
            gpu_now[i] += sign

    chosen: list[tuple[Pod, int, int]] = []  # the moves of the assignment being walked: (pod, from, to)

    def runnable() -> bool:
        """Whether the moves can be made one eviction at a time, as the executor makes them (a pod leaves its node as its
        replacement arrives; each target must have room then): a search over the sets of moves done."""
        start = [dict(before[name]) for name in names]
        seen: set[frozenset[int]] = set()

        def search(done: frozenset[int], load: list[dict[str, int]]) -> bool:
            if len(done) == len(chosen):
                return True
            if done in seen:
                return False
            seen.add(done)
            for k, (p, source, target) in enumerate(chosen):
                need = demand(p)
                if k in done or not all(load[target].get(r, 0) + v <= caps[target].get(r, 0) for r, v in need.items()):
                    continue
                after = [dict(x) for x in load]
                for r, v in need.items():
                    after[target][r] = after[target].get(r, 0) + v
                    after[source][r] = after[source].get(r, 0) - v
                if search(done | {k}, after):
                    return True
            return False

        return search(frozenset(), start)

    def leaf(placed: int, moves: int) -> None:
        if chosen and not runnable():
            return
        net = 0
        for i, g in enumerate(gpus):
            if g and gpu_before[i] and not gpu_now[i]:
                net += g
            elif g and not gpu_before[i] and gpu_now[i]:
                net -= g
        freed = sum(1 for i, g in enumerate(gpus) if g and gpu_before[i] and not gpu_now[i])
        outcomes.add((placed, net, freed, moves))

    def walk(k: int, placed: int, moves: int) -> None:
        if k == len(items):
            leaf(placed, moves)
            return
        p, current, choices = items[k]
        for choice in choices:
            if choice is None:
                walk(k + 1, placed, moves)
                continue
            if not fits(p, choice):
                continue
            shift(p, choice, 1)
            moved = current is not None and choice != current
            if moved:
                chosen.append((p, current, choice))
            walk(k + 1, placed + (current is None), moves + moved)
            if moved:
                chosen.pop()
            shift(p, choice, -1)

    walk(0, 0, 0)
    return outcomes


@PROPERTY
@given(objects=clusters(max_nodes=4, max_bound=6, max_pending=2, tiny=True))
def test_plan_matches_brute_force_optimum(objects: list[dict[str, Any]]) -> None:
    snapshot = cluster(*objects)
    config = PlannerSettings.of(min_replicas=1, time_limit_seconds=5, workers=2, objective="max-free")
    movable = [k for k, why in movable_pods(snapshot, config).items() if why is None]
    assume(len(movable) <= 6)
    plan = _plan(snapshot, config)
    errors = check_plan(snapshot, plan, config)
    assert not errors, errors
    assert plan.solver.status == "OPTIMAL"
    placed, net, moves = brute_force(snapshot, config)
    note(f"brute force: placed={placed} net={net} moves={moves}")
    assert len(plan.placed_pending) == placed
    assert searched(plan) == (net, moves)


def searched(plan: CompactionPlan) -> tuple[int, int]:
    """(net freed GPUs, moves) of the max-free search's plan: the curve's last point. The plan carried out is the curve's
    first point instead when the last frees no GPU a request shape in use can take (issue 17); it is the last otherwise."""
    if not plan.frontier:
        return plan.freed_gpus, len(plan.moves)
    last = plan.frontier[-1]
    if not last.chosen:
        assert plan.frontier[0].chosen and (last.usable_gpus or 0) <= (plan.frontier[0].usable_gpus or 0)
    return last.freed_gpus, last.moves


@PROPERTY
@given(objects=clusters(max_nodes=4, max_bound=6, max_pending=2, tiny=True))
def test_every_point_of_the_curve_is_a_valid_plan_no_cheaper_than_the_true_optimum(
    objects: list[dict[str, Any]],
) -> None:
    """Each objective's plan passes the checker; every point costs at least the brute force's fewest moves for its
    freed-node count, and exactly that where it claims OPTIMAL (move cost = moves: no cost annotations here, every move priced
    alike)."""
    snapshot = cluster(*objects)
    config = PlannerSettings.of(min_replicas=1, time_limit_seconds=5, workers=2, move_cost=BY_COUNT)
    assume(len([k for k, why in movable_pods(snapshot, config).items() if why is None]) <= 6)
    curve = brute_force_curve(snapshot, config)
    note(f"brute force curve: {curve}")
    plans = {o: _plan(snapshot, config.amended(objective=o)) for o in ("pending-only", "balanced", "max-free")}
    for objective, plan in plans.items():
        assert not check_plan(snapshot, plan, config), (objective, check_plan(snapshot, plan, config))
        chosen = [p for p in plan.frontier if p.chosen]
        assert len(chosen) == 1 and (chosen[0].moves, chosen[0].freed_gpus) == (len(plan.moves), plan.freed_gpus), (
            objective
        )
    frontier = plans["balanced"].frontier
    # max-free runs the last point, unless it frees no GPU more a shape in use can take: then the first (issue 17)
    last = frontier[-1]
    hollow = last.cost > frontier[0].cost and (last.usable_gpus or 0) <= (frontier[0].usable_gpus or 0)
    assert (frontier[0].moves, (frontier[0] if hollow else last).moves) == (
        len(plans["pending-only"].moves),
        len(plans["max-free"].moves),
    )
    by_gpus = brute_force_gpu_curve(snapshot, config)
    for point in frontier:
        fewest = min(m for k, m in curve.items() if k >= point.freed_nodes)
        assert point.moves >= fewest
        # The max-free point's claim is about its GPUs: no plan freeing as many costs less.
        assert point.bound <= (
            fewest if point is not frontier[-1] else min(m for g, m in by_gpus.items() if g >= point.freed_gpus)
        )
        if point.status == "OPTIMAL" and point is not frontier[-1]:
            assert point.moves == fewest, point
    assert [p.freed_gpus for p in frontier] == sorted({p.freed_gpus for p in frontier})  # strictly more GPUs ...
    assert [p.cost for p in frontier] == sorted({p.cost for p in frontier})  # ... for strictly more cost


def test_brute_force_sees_what_the_planner_must_do() -> None:
    """The brute force itself on hand-checked cases."""
    snapshot = cluster(
        *[node(f"g{i}", gpus=8) for i in range(3)],
        pod("a", on="g0", gpus=4),
        pod("b", on="g1", gpus=4),
        pod("c", on="g2", gpus=2),
        pod("big", gpus=8, owner="Job/big"),
    )
    config = PlannerSettings.of(min_replicas=1, time_limit_seconds=5, workers=2)
    # 18 GPUs of demand on 24: big fits once b joins a (1 move); no node can also be freed.
    assert brute_force(snapshot, config) == (1, 0, 1)
    # Without the pending pod: c joins a or b and g2 is freed.
    snapshot = cluster(
        *[node(f"g{i}", gpus=8) for i in range(3)],
        pod("a", on="g0", gpus=4),
        pod("b", on="g1", gpus=4),
        pod("c", on="g2", gpus=2),
    )
    assert brute_force(snapshot, config) == (0, 8, 1)
    # A cordoned node is no target (a stays), and freeing it is worth nothing (c stays).
    snapshot = cluster(
        node("g0", gpus=8), node("g1", gpus=8, unschedulable=True), pod("a", on="g0", gpus=4), pod("c", on="g1", gpus=2)
    )
    assert brute_force(snapshot, config) == (0, 0, 0)
    # An existing pod's anti-affinity against web keeps web off g1, and its hostPort, taken on g2, off g2.
    keep_out = [{"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]
    snapshot = cluster(
        node("g0", gpus=8),
        node("g1", gpus=8),
        node("g2", gpus=8),
        pod("web", on="g0", gpus=2, labels={"app": "web"}, host_ports=[9000]),
        pod("guard", on="g1", gpus=2, owner=None, anti_affinity=keep_out),
        pod("edge", on="g2", gpus=2, owner=None, host_ports=[9000]),
    )
    assert brute_force(snapshot, config) == (0, 0, 0)
    snapshot = cluster(
        node("g0", gpus=8),
        node("g1", gpus=8),
        node("g2", gpus=8),
        pod("ported", on="g0", gpus=2, host_ports=[9000]),
        pod("guard", on="g1", gpus=2, owner=None, anti_affinity=keep_out),
        pod("edge", on="g2", gpus=2, owner=None, host_ports=[9000]),
    )
    assert brute_force(snapshot, config) == (0, 8, 1)  # anti-affinity selects only web: ported joins guard on g1


# ---------------------------------------------------------------------------- property 3: claims that hold for the whole cluster


@PROPERTY
@given(
    objects=clusters(max_nodes=4, max_bound=6, max_pending=2, tiny=True),
    narrow=st.sampled_from([(1, 1), (1, 2), (2, 1), (24, 1500)]),
)
def test_a_narrowed_model_claims_only_what_holds_for_the_whole_cluster(
    objects: list[dict[str, Any]], narrow: tuple[int, int]
) -> None:
    """However narrow the model (targets per type, candidate pods), the plan is valid, its bound is at least the true
    optimum, OPTIMAL means the true optimum, and it is never worse than the greedy warm start."""
    snapshot = cluster(*objects)
    targets, pods = narrow
    config = PlannerSettings.of(
        min_replicas=1,
        time_limit_seconds=5,
        workers=2,
        objective="max-free",
        max_targets_per_type=targets,
        max_candidate_pods=pods,
    )
    assume(len([k for k, why in movable_pods(snapshot, config).items() if why is None]) <= 6)
    plan = _plan(snapshot, config)
    assert not check_plan(snapshot, plan, config)
    placed, net, moves = brute_force(snapshot, config)
    note(f"brute force: placed={placed} net={net} moves={moves}")
    if len(plan.placed_pending) == placed and plan.solver.bound is not None:
        assert plan.solver.bound >= net
    # The max-free search's plan is the curve's last point (the plan carried out is the first when that one frees no GPU
    # a shape in use can take: issue 17).
    found = (len(plan.placed_pending), *searched(plan))
    if plan.solver.status == "OPTIMAL":
        assert found == (placed, net, moves)
    warm = greedy_drain(snapshot, config)
    mine, theirs = found[:2], (warm.pending_placed, warm.freed_gpus)
    assert mine > theirs or (mine == theirs and found[2] <= warm.moves), (mine, found[2], theirs, warm.moves)


# ---------------------------------------------------------------------------- property 4: the time limit is a contract


@PROPERTY
@given(objects=clusters(), config=planner_settings())
def test_greedy_keeps_the_move_limits_and_counts_them_as_the_solver_does(
    objects: list[dict[str, Any]], config: PlannerSettings
) -> None:
    """The warm start never breaks a move limit (it is the fallback when no level has time), and the running tally behind
    that (``greedy._Tally``) agrees with ``objective.within_limits`` after every drain of the curve's greedy steps."""
    snapshot = cluster(*objects)
    problem = build_problem(snapshot, config, max_targets=len(snapshot.nodes))
    assert within_limits(problem, greedy(problem))
    drainer = Drainer(problem, greedy(problem, drain=False))
    for state in problem.nodes:
        drainer.drain(state.index)
        assert drainer.loads.within_limits() == within_limits(problem, drainer.assignment)


@PROPERTY
@given(objects=clusters(), config=planner_settings())
def test_a_plan_with_no_time_left_is_valid_and_never_below_the_greedy_warm_start(
    objects: list[dict[str, Any]], config: PlannerSettings
) -> None:
    """A microsecond's limit has run out before the problem is built: the plan is still valid, not claimed OPTIMAL unless
    there was nothing to plan, and places and frees at least what greedy does within the same limits."""
    snapshot = cluster(*objects)
    config = config.amended(time_limit_seconds=1e-6)
    plan = _plan(snapshot, config)
    assert not check_plan(snapshot, plan, config)
    if plan.solver.levels:
        assert plan.solver.status == "FEASIBLE" and "time limit" in plan.solver.note
    if config.aims.goal == "shapes":
        return
    problem = build_problem(snapshot, config, max_targets=len(snapshot.nodes))
    warm = greedy(problem)
    moves, placements = concretise(problem, warm, empty_nodes(problem, warm))
    freed, filled = gpu_nodes_changed(problem, moves, placements)
    theirs = (len(placements), sum(problem.nodes[i].gpus for i in freed) - sum(problem.nodes[i].gpus for i in filled))
    mine = (len(plan.placed_pending), plan.freed_gpus)
    assert mine > theirs or (mine == theirs and len(plan.moves) <= len(moves)), (
        mine,
        len(plan.moves),
        theirs,
        len(moves),
    )


# ---------------------------------------------------------------------------- property 5: move bounds never claim too much


@PROPERTY
@given(objects=clusters(max_nodes=4, max_bound=6, max_pending=2, tiny=True), cap=st.integers(min_value=0, max_value=4))
def test_move_bounds_never_claim_more_than_the_brute_force_finds(objects: list[dict[str, Any]], cap: int) -> None:
    """The fewest moves to free so many GPUs (placing so many pending pods) is at most the brute force's, the most GPUs
    within ``cap`` moves at least the brute force's, and the plan's stated bound on its own moves holds (move cost =
    moves: no cost annotations, one priority here, every move priced alike)."""
    snapshot = cluster(*objects)
    config = PlannerSettings.of(
        min_replicas=1, time_limit_seconds=5, workers=2, objective="max-free", move_cost=BY_COUNT
    )
    assume(len([k for k, why in movable_pods(snapshot, config).items() if why is None]) <= 6)
    outcomes = enumerate_outcomes(snapshot, config)
    problem = build_problem(snapshot, config, max_targets=len(snapshot.nodes))
    base = config.aims.move_cost.base
    for placed, net, _, moves in outcomes:
        fewest = fewest_moves_cost(problem, freed_gpus=net, pending_weight=placed, deadline=Deadline(5, 1))
        assert fewest is not None and fewest <= base * moves, (placed, net, moves, fewest)
    most = most_freed_within(problem, max_moves=cap, pending_weight=0, deadline=Deadline(5, 1))
    assert most is not None and most >= max(net for _, net, _, moves in outcomes if moves <= cap)
    plan = _plan(snapshot, config)
    if plan.solver.move_cost_bound is not None:
        # the bound is the max-free solve's: the curve's last point, which the plan need not carry out (a point freeing
        # only GPUs no shape in use can take gives way to the first, issue 17)
        freed = max((p.freed_gpus for p in plan.frontier if not p.budget_cut), default=plan.freed_gpus)
        truth = min(m for p, n, _, m in outcomes if p >= len(plan.placed_pending) and n >= freed)
        assert plan.solver.move_cost_bound <= truth


# ---------------------------------------------------------------------------- property 6: the headline figures track the plan


@PROPERTY
@given(objects=clusters(), config=planner_settings())
def test_a_plan_that_frees_nodes_or_places_pending_pods_shows_it_in_the_headline_figures(
    objects: list[dict[str, Any]], config: PlannerSettings
) -> None:
    plan = _plan(cluster(*objects), config)
    before, after = plan.before, plan.after
    gained = after["cluster"]["wholeFreePhysicalGpus"] - before["cluster"]["wholeFreePhysicalGpus"]
    assert gained == plan.freed_gpus  # the plan's promise is the figure users alert on
    if plan.freed_gpus > 0:
        assert gained > 0
    assert after["pendingGpuPods"] == before["pendingGpuPods"] - len(plan.placed_pending)
    # Blocked demand falls by what the plan places of it, and grows only by pods the planner may not place (inter-pod
    # affinity, ...) whose room a placed pod took: never by one it could have placed.
    blocked = {b["pod"]: b["gpuEquivalents"] for b in before["blockedPending"]}
    newly = {b["pod"]: b["gpuEquivalents"] for b in after["blockedPending"] if b["pod"] not in blocked}
    assert set(newly) <= {p.pod for p in plan.pending_not_placed}
    placed = sum(blocked.get(p.pod, 0.0) for p in plan.placed_pending)
    assert (
        after["blockedDemandGpuEquivalents"]
        <= before["blockedDemandGpuEquivalents"] - placed + sum(newly.values()) + 1e-6
    )

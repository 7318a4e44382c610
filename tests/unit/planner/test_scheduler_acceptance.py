"""Moves kube-scheduler would refuse are never planned (issue [7]), one class per test.

Each case is a cluster where the cheapest plan, before the rule, sent a pod where the
real scheduler would not bind it; every plan also passes the independent checker.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from compactor.app.plan_document import build_plan
from compactor.model.types import Snapshot
from compactor.planner.plan import CompactionPlan
from compactor.planner.request import PlanRequest
from compactor.settings.bundles import PlannerSettings
from tests.builders import A100_40, A100_80, H100_80, claim_volume, cluster, node, pod, pv, pvc
from tests.plancheck import assert_valid

NOW = datetime(2026, 1, 1, tzinfo=UTC)
MAX_FREE = PlannerSettings.of(min_replicas=1, time_limit_seconds=5, workers=2, objective="max-free")


def plan_for(*objects: dict[str, Any], config: PlannerSettings = MAX_FREE) -> tuple[Snapshot, CompactionPlan]:
    snapshot = cluster(*objects)
    plan = build_plan(PlanRequest.of(snapshot, config, source="test", now=NOW))
    assert_valid(snapshot, plan, config)
    return snapshot, plan


def moves(plan: CompactionPlan) -> list[tuple[str, str, str]]:
    return [(m.pod.split("/")[1], m.from_node, m.to_node) for m in plan.moves]


def keep_out(app: str, topology: str = "kubernetes.io/hostname", **term: Any) -> list[dict[str, Any]]:
    return [{"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": topology, **term}]


# ---------------------------------------------------------------- existing pods' required anti-affinity


def test_an_existing_pods_anti_affinity_keeps_the_mover_off_its_node() -> None:
    # The only room for web is beside the guard, which refuses app=web: web stays.
    guarded = [
        node("src", gpus=8),
        node("guarded", gpus=8),
        pod("web", on="src", gpus=2, labels={"app": "web"}),
        pod("guard", on="guarded", gpus=6, owner=None, anti_affinity=keep_out("web")),
    ]
    _, plan = plan_for(*guarded)
    assert plan.moves == []
    # With another node, web goes there instead.
    _, plan = plan_for(*guarded, node("roomy", gpus=8), pod("anchor", on="roomy", gpus=4, owner=None))
    assert moves(plan) == [("web", "src", "roomy")]


def test_a_zone_wide_anti_affinity_closes_every_node_of_the_zone() -> None:
    _, plan = plan_for(
        node("src", gpus=8, labels={"zone": "a"}),
        node("near", gpus=8, labels={"zone": "b"}),
        node("guarded", gpus=8, labels={"zone": "b"}),
        pod("web", on="src", gpus=2, labels={"app": "web"}),
        pod("guard", on="guarded", gpus=2, owner=None, anti_affinity=keep_out("web", "zone")),
        pod("anchor", on="near", gpus=4, owner=None),
    )
    assert plan.moves == [] and plan.freed_gpus == 0


def test_anti_affinity_selects_only_its_namespaces_and_labels() -> None:
    guard = keep_out("web")
    _, plan = plan_for(
        node("src", gpus=8),
        node("guarded", gpus=8),
        # the term looks in the guard's namespace only
        pod("web", on="src", gpus=2, labels={"app": "web"}, namespace="other"),
        pod("guard", on="guarded", gpus=2, owner=None, anti_affinity=guard),
    )
    assert moves(plan) == [("web", "src", "guarded")]
    _, plan = plan_for(
        node("src", gpus=8),
        node("guarded", gpus=8),
        pod("web", on="src", gpus=2, labels={"app": "web"}, namespace="other"),
        # every namespace
        pod("guard", on="guarded", gpus=2, owner=None, anti_affinity=keep_out("web", namespaceSelector={})),
    )
    assert plan.moves == []


def test_match_label_keys_narrow_the_term_to_the_holders_own_value() -> None:
    term = keep_out("web", matchLabelKeys=["version"])
    _, plan = plan_for(
        node("src", gpus=8),
        node("guarded", gpus=8),
        pod("web", on="src", gpus=2, labels={"app": "web", "version": "v2"}),
        pod("guard", on="guarded", gpus=2, owner=None, labels={"app": "guard", "version": "v1"}, anti_affinity=term),
    )
    assert moves(plan) == [("web", "src", "guarded")]


def test_a_pending_pod_is_not_placed_where_anti_affinity_keeps_it_out() -> None:
    _, plan = plan_for(
        node("free", gpus=8),
        node("full", gpus=8),
        pod("guard", on="free", gpus=0, owner=None, anti_affinity=keep_out("web")),
        pod("anchor", on="full", gpus=8, owner=None),
        pod("big", gpus=8, labels={"app": "web"}, owner="Job/big"),
    )
    assert plan.placed_pending == []
    assert [(p.pod, p.reason) for p in plan.pending_not_placed] == [
        ("default/big", "no node fits it even after every pod that may move has left")
    ]


# ---------------------------------------------------------------- host ports


def test_a_host_port_taken_on_the_target_keeps_the_mover_off() -> None:
    taken = [
        node("src", gpus=8),
        node("taken", gpus=8),
        pod("edge", on="src", gpus=2, host_ports=[8443]),
        pod("proxy", on="taken", gpus=6, owner=None, host_ports=[8443]),
    ]
    _, plan = plan_for(*taken)
    assert plan.moves == []
    _, plan = plan_for(*taken, node("roomy", gpus=8), pod("anchor", on="roomy", gpus=4, owner=None))
    assert moves(plan) == [("edge", "src", "roomy")]


def test_two_movers_with_one_host_port_never_share_a_node() -> None:
    _, plan = plan_for(
        node("src", gpus=8),
        node("t", gpus=8),
        node("u", gpus=8),
        pod("edge-a", on="src", gpus=1, host_ports=[8443]),
        pod("edge-b", on="src", gpus=1, host_ports=[8443]),
        pod("anchor-t", on="t", gpus=6, owner=None),
        pod("anchor-u", on="u", gpus=4, owner=None),
    )
    assert sorted(to for _, _, to in moves(plan)) == ["t", "u"]


def test_a_port_freed_by_a_leaving_pod_is_free_for_another() -> None:
    # x's edge pod leaves for z; only then may y's edge pod take x's port... but x is being freed, so y's pod waits: nothing
    # breaks capacity either way, and the plan frees one node with the ports never doubled.
    _, plan = plan_for(
        node("x", gpus=8),
        node("y", gpus=8),
        node("z", gpus=8),
        pod("edge-x", on="x", gpus=1, host_ports=[80]),
        pod("edge-y", on="y", gpus=1, host_ports=[80]),
        pod("anchor", on="z", gpus=6, owner=None),
    )
    assert len(plan.freed_nodes) == 1


# ---------------------------------------------------------------- volumes


def test_a_zonal_volume_keeps_its_pod_in_the_zone() -> None:
    zonal = [
        node("src", gpus=8, labels={"topology.kubernetes.io/zone": "a"}),
        node("other-zone", gpus=8, labels={"topology.kubernetes.io/zone": "b"}),
        pod("db", on="src", gpus=2, volumes=claim_volume("data")),
        pvc("data", volume="disk"),
        pv("disk", zone="a"),
        pod("anchor-b", on="other-zone", gpus=6, owner=None),
    ]
    _, plan = plan_for(*zonal)
    assert plan.moves == []
    _, plan = plan_for(
        *zonal,
        node("same-zone", gpus=8, labels={"topology.kubernetes.io/zone": "a"}),
        pod("anchor-a", on="same-zone", gpus=4, owner=None),
    )
    assert moves(plan) == [("db", "src", "same-zone")]


def test_a_local_volume_pins_its_pod() -> None:
    _, plan = plan_for(
        node("src", gpus=8),
        node("t", gpus=8),
        pod("db", on="src", gpus=2, volumes=claim_volume("data")),
        pvc("data", volume="disk"),
        pv("disk", on_nodes=["src"]),
        pod("anchor", on="t", gpus=2, owner=None),
    )
    assert plan.moves == []


def test_a_pending_pod_with_an_unbound_claim_is_left_with_its_reason() -> None:
    _, plan = plan_for(
        node("free", gpus=8), pod("train", gpus=8, owner="Job/train", volumes=claim_volume("data")), pvc("data")
    )
    assert plan.placed_pending == []
    assert (
        plan.pending_not_placed[0].reason
        == "PersistentVolumeClaim default/data is not bound: its provisioner picks the node"
    )


# ---------------------------------------------------------------- NoExecute with tolerationSeconds


def test_a_no_execute_taint_tolerated_for_a_while_is_no_target() -> None:
    draining = [{"key": "draining", "effect": "NoExecute"}]
    forever = {"key": "draining", "operator": "Exists", "effect": "NoExecute"}
    for tolerations, expected in (
        ([{**forever, "tolerationSeconds": 60}], []),
        ([forever], [("p", "src", "draining")]),
        ([{**forever, "tolerationSeconds": 60}, forever], []),
    ):  # the first matching toleration counts
        _, plan = plan_for(
            node("src", gpus=8),
            node("draining", gpus=8, taints=draining),
            pod("p", on="src", gpus=2, tolerations=tolerations),
            pod("anchor", on="draining", gpus=6, owner=None),
        )
        assert moves(plan) == expected, tolerations


# ---------------------------------------------------------------- pending pods with constraints the model does not check


def test_pending_pods_the_model_cannot_judge_drive_no_evictions() -> None:
    waiting = [
        pod(
            "spread",
            gpus=8,
            owner="Job/a",
            spread=[
                {
                    "maxSkew": 1,
                    "topologyKey": "zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "a"}},
                }
            ],
        ),
        pod("other-scheduler", gpus=8, owner="Job/b", scheduler="volcano"),
        pod("system", gpus=8, owner="Job/c", namespace="kube-system"),
        pod("anti", gpus=8, owner="Job/d", anti_affinity=keep_out("x")),
    ]
    _, plan = plan_for(
        node("a", gpus=8),
        node("b", gpus=8),
        pod("p", on="a", gpus=2),
        pod("q", on="b", gpus=2),
        *waiting,
        config=MAX_FREE.amended(objective="pending-only"),
    )
    assert plan.moves == [] and plan.placed_pending == []
    reasons = {p.pod.split("/")[1]: p.reason for p in plan.pending_not_placed}
    assert reasons == {
        "spread": "DoNotSchedule topology spread constraint, which the planner does not model",
        "other-scheduler": "scheduled by 'volcano', not a scheduler the planner predicts (movable.scheduler_names)",
        "system": "namespace kube-system is outside the planner's scope (movable.namespaces / exclude_namespaces)",
        "anti": "required inter-pod (anti-)affinity, which the planner does not model",
    }


def test_a_pending_pod_blocked_by_a_pdb_says_which() -> None:
    _, plan = plan_for(
        node("a", gpus=8),
        pod("p", on="a", gpus=2, labels={"app": "serve"}),
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "serve", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "serve"}}, "maxUnavailable": 0},
            "status": {"disruptionsAllowed": 0},
        },
        pod("big", gpus=8, owner="Job/big"),
    )
    assert [(p.pod, p.reason) for p in plan.pending_not_placed] == [
        (
            "default/big",
            "fits on a only if pods protected by PodDisruptionBudget default/serve (no disruption allowed) moved",
        )
    ]


# ---------------------------------------------------------------- what a freed node counts


def test_freed_counts_only_ready_schedulable_allocatable_gpus() -> None:
    # GFD says 8 GPUs, the device plugin offers 6: freeing the node is worth 6.
    _, plan = plan_for(
        node("short", gpus=6, physical_gpus=8),
        node("t", gpus=8),
        pod("p", on="short", gpus=1),
        pod("anchor", on="t", gpus=4, owner=None),
    )
    assert plan.freed_nodes == ["short"] and plan.freed_gpus == 6
    # Someone else's cordon, or NotReady: freeing it gains nothing, so nothing moves.
    for bad in ({"unschedulable": True}, {"ready": False}):
        _, plan = plan_for(
            node("x", gpus=8, **bad),
            node("t", gpus=8),
            pod("p", on="x", gpus=1),
            pod("anchor", on="t", gpus=4, owner=None),
        )
        assert plan.moves == [] and plan.freed_gpus == 0, bad


# ---------------------------------------------------------------- pools


def test_a_gpu_pod_stays_in_its_pool_unless_crossing_is_allowed() -> None:
    objects = [
        node("h100-a", gpus=8, product=H100_80),
        node("h100-b", gpus=8, product=H100_80),
        node("a100", gpus=8, product=A100_40),
        pod("llm", on="h100-a", gpus=2),
        pod("anchor-h", on="h100-b", gpus=8, owner=None),
        pod("anchor-a", on="a100", gpus=4, owner=None),
    ]
    _, plan = plan_for(*objects)
    assert plan.moves == []  # the only room is on an A100-40GB: a model sized for 80 GB would not start there
    _, plan = plan_for(*objects, config=MAX_FREE.amended(cross_pool_moves=True))
    assert moves(plan) == [("llm", "h100-a", "a100")]
    _, plan = plan_for(
        node("x", gpus=8, product=A100_80),
        node("y", gpus=8, product=A100_80),
        pod("p", on="x", gpus=2),
        pod("anchor", on="y", gpus=4, owner=None),
    )
    assert moves(plan) == [("p", "x", "y")]  # within a pool, as before

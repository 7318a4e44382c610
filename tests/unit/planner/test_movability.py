"""Which pods may move: every rule of the contract, and config narrowing, each where it binds.

Every scenario is the same two-node cluster: ``keep`` runs an unmovable 6-GPU pod
(2 GPUs free), ``src`` runs one 2-GPU candidate ``c``. Moving ``c`` to ``keep``
frees ``src`` (8 GPUs) in one move, so the planner does it unless a rule keeps
``c`` in place; then the plan is empty and ``src`` is not freed. Each rule has a
near-miss control that does move, so no test passes for the wrong reason.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from compactor.app.plan_document import build_plan
from compactor.errors import ConfigError
from compactor.model.types import Snapshot, Taint
from compactor.planner.plan import CompactionPlan
from compactor.planner.request import PlanRequest
from compactor.planner.rules.movability import EVERY_NAMESPACE, NamespaceScope, Steerability, Unmovable, movability
from compactor.settings.bundles import PlannerSettings
from compactor.settings.origins import load_settings
from tests.builders import claim_volume, cluster, node, pdb, pod, pv, pvc
from tests.plancheck import assert_valid, movable_reason

NOW = datetime(2026, 1, 1, tzinfo=UTC)
FAST = {
    "time_limit_seconds": 5,
    "workers": 2,
    "min_replicas": 1,
}  # single replicas on purpose: the guard has tests of its own
EMPTY_DIR = [{"name": "scratch", "emptyDir": {}}]
HOST_PATH = [{"name": "host", "hostPath": {"path": "/var/data"}}]
AFFINITY_TERM = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}


def settings(**overrides: Any) -> PlannerSettings:
    return PlannerSettings.of(**{**FAST, **overrides})


def scenario(
    candidate: dict[str, Any] | None = None,
    *extra: dict[str, Any],
    src: dict[str, Any] | None = None,
    config: PlannerSettings | None = None,
) -> tuple[Snapshot, CompactionPlan]:
    cand = {"on": "src", "gpus": 2, **(candidate or {})}
    snapshot = cluster(
        node("keep", gpus=8),
        node("src", gpus=8, **(src or {})),
        pod("anchor", on="keep", gpus=6, owner=None),
        pod("c", **cand),
        *extra,
    )
    cfg = config or settings()
    plan = build_plan(PlanRequest.of(snapshot, cfg, source="test", now=NOW))
    assert_valid(snapshot, plan, cfg)
    return snapshot, plan


def assert_stays(plan: CompactionPlan, reason: Unmovable | None = None) -> None:
    assert plan.moves == []
    assert "src" not in plan.freed_nodes
    assert plan.freed_gpus == 0
    if reason is not None:
        assert reason.value in plan.explanations["unmovablePods"]


def assert_moves(plan: CompactionPlan, namespace: str = "default") -> None:
    assert [(m.pod, m.from_node, m.to_node) for m in plan.moves] == [(f"{namespace}/c", "src", "keep")]
    assert plan.freed_nodes == ["src"]
    assert plan.freed_gpus == 8


def test_baseline_candidate_moves_and_frees_src() -> None:
    _, plan = scenario()
    assert_moves(plan)
    assert plan.solver.status == "OPTIMAL"


# ---------------------------------------------------------------- rule 1: not Running, or being deleted


@pytest.mark.parametrize("phase", ["Pending", "Unknown"])
def test_rule1_bound_pod_not_running_stays(phase: str) -> None:
    _, plan = scenario({"phase": phase})
    assert_stays(plan, Unmovable.NOT_RUNNING)


def test_rule1_pod_with_deletion_timestamp_stays() -> None:
    _, plan = scenario({"deleting": True})
    assert_stays(plan, Unmovable.TERMINATING)


# ---------------------------------------------------------------- rule 2: DaemonSet, mirror pod


def test_rule2_daemonset_pod_stays() -> None:
    _, plan = scenario({"owner": "DaemonSet/gpu-agent"})
    assert_stays(plan, Unmovable.DAEMONSET)


def test_rule2_mirror_pod_stays() -> None:
    _, plan = scenario({"owner": "Node/src", "annotations": {"kubernetes.io/config.mirror": "abc123"}})
    assert_stays(plan, Unmovable.MIRROR)


@pytest.mark.parametrize("owner", ["ReplicaSet/app", "StatefulSet/db"])
def test_rule2_control_recreating_controllers_move(owner: str) -> None:
    _, plan = scenario({"owner": owner})
    assert_moves(plan)


# ---------------------------------------------------------------- rule 3b: only a controller that recreates the pod


@pytest.mark.parametrize("owner", ["Job/train", "MPIJob/allreduce"])
def test_rule3_pods_whose_controller_does_not_recreate_them_stay(owner: str) -> None:
    _, plan = scenario({"owner": owner})
    assert_stays(plan, Unmovable.NOT_RECREATED)


def test_rule3_control_a_job_pod_moves_when_annotated() -> None:
    _, plan = scenario({"owner": "Job/train", "annotations": {"compactor.io/evict": "true"}})
    assert_moves(plan)


def test_rule3_control_an_operator_kind_listed_in_config_moves() -> None:
    config = settings(recreating_controllers=["ReplicaSet", "StatefulSet", "InferenceService"])
    _, plan = scenario({"owner": "InferenceService/llm"}, config=config)
    assert_moves(plan)


def test_rule3_an_owner_that_is_not_a_controller_keeps_the_pod() -> None:
    candidate = pod("c", on="src", gpus=2)
    for ref in candidate["metadata"]["ownerReferences"]:
        ref["controller"] = False  # e.g. an object that only garbage-collects the pod
    snapshot = cluster(
        node("keep", gpus=8), node("src", gpus=8), pod("anchor", on="keep", gpus=6, owner=None), candidate
    )
    plan = build_plan(PlanRequest.of(snapshot, settings(), source="test", now=NOW))
    assert_stays(plan, Unmovable.NO_CONTROLLER)


def test_rule7_a_pod_covered_by_two_budgets_stays() -> None:
    budgets = (
        pdb("a", match={"app": "app"}, max_unavailable=1, allowed=1),
        pdb("b", match={"app": "app"}, max_unavailable=1, allowed=1),
    )
    _, plan = scenario({"labels": {"app": "app"}}, *budgets)
    assert_stays(plan, Unmovable.MULTIPLE_PDBS)


# ---------------------------------------------------------------- rule 3: no ownerReferences


def test_rule3_bare_pod_stays() -> None:
    _, plan = scenario({"owner": None})
    assert_stays(plan, Unmovable.BARE)


# ---------------------------------------------------------------- rule 4: system-critical


@pytest.mark.parametrize("priority", [2_000_000_000, 2_000_001_000])
def test_rule4_critical_priority_stays(priority: int) -> None:
    _, plan = scenario({"priority": priority})
    assert_stays(plan, Unmovable.SYSTEM_CRITICAL)


@pytest.mark.parametrize("klass", ["system-cluster-critical", "system-node-critical"])
def test_rule4_critical_priority_class_stays(klass: str) -> None:
    _, plan = scenario({"priority_class": klass})
    assert_stays(plan, Unmovable.SYSTEM_CRITICAL)


def test_rule4_control_just_below_critical_moves() -> None:
    _, plan = scenario({"priority": 1_999_999_999, "priority_class": "high"})
    assert_moves(plan)


# ---------------------------------------------------------------- rule 5: local storage


@pytest.mark.parametrize("volumes", [EMPTY_DIR, HOST_PATH], ids=["emptyDir", "hostPath"])
def test_rule5_local_storage_stays(volumes: list[dict[str, Any]]) -> None:
    _, plan = scenario({"volumes": volumes})
    assert_stays(plan, Unmovable.LOCAL_STORAGE)


@pytest.mark.parametrize("volumes", [EMPTY_DIR, HOST_PATH], ids=["emptyDir", "hostPath"])
def test_rule5_local_storage_annotated_evict_true_moves(volumes: list[dict[str, Any]]) -> None:
    _, plan = scenario({"volumes": volumes, "annotations": {"compactor.io/evict": "true"}})
    assert_moves(plan)


def test_rule5_control_other_volumes_move() -> None:
    volumes = [
        {"name": "cfg", "configMap": {"name": "x"}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "d"}},
    ]
    _, plan = scenario({"volumes": volumes}, pvc("d", volume="disk"), pv("disk"))
    assert_moves(plan)


@pytest.mark.parametrize("objects", [[], [pvc("d")], [pvc("d", volume="disk")]], ids=["no-pvc", "unbound", "no-pv"])
def test_a_pod_whose_volume_placement_is_unknown_stays(objects: list[dict[str, Any]]) -> None:
    _, plan = scenario({"volumes": claim_volume("d")}, *objects)
    assert_stays(plan, Unmovable.VOLUMES)


def test_a_generic_ephemeral_volume_keeps_the_pod_in_place() -> None:
    ephemeral = [
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}}
    ]
    _, plan = scenario({"volumes": ephemeral})
    assert_stays(plan, Unmovable.VOLUMES)


# ---------------------------------------------------------------- rule 6: opt-out annotations


@pytest.mark.parametrize(
    "annotations",
    [
        {"compactor.io/evict": "false"},
        {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
        {"compactor.io/evict": "true", "cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
    ],
    ids=["evict-false", "safe-to-evict-false", "evict-true-but-safe-to-evict-false"],
)
def test_rule6_opted_out_stays(annotations: dict[str, str]) -> None:
    _, plan = scenario({"annotations": annotations})
    assert_stays(plan, Unmovable.OPTED_OUT)


def test_rule6_control_safe_to_evict_true_moves() -> None:
    _, plan = scenario({"annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}})
    assert_moves(plan)


@pytest.mark.parametrize(
    "annotation", ["karpenter.sh/do-not-disrupt", "descheduler.alpha.kubernetes.io/prefer-no-eviction"]
)
def test_rule6_other_tools_do_not_disrupt_marks_keep_the_pod(annotation: str) -> None:
    _, plan = scenario({"annotations": {annotation: "true"}})
    assert_stays(plan, Unmovable.DO_NOT_DISRUPT)
    _, plan = scenario({"annotations": {annotation: "false"}})
    assert_moves(plan)


def test_rule6_the_descheduler_opt_in_annotation_is_no_opt_out() -> None:
    _, plan = scenario({"annotations": {"descheduler.alpha.kubernetes.io/evict": "false"}})
    assert_moves(plan)


# ---------------------------------------------------------------- rule 7: PDB with disruptionsAllowed == 0


def test_rule7_pdb_allowing_no_disruption_stays() -> None:
    _, plan = scenario({"labels": {"app": "trainer"}}, pdb("trainer", match={"app": "trainer"}, allowed=0))
    assert_stays(plan, Unmovable.PDB_BLOCKS)


def test_rule7_two_budgets_keep_the_pod_even_when_one_is_loose() -> None:
    _, plan = scenario(
        {"labels": {"app": "trainer", "tier": "gpu"}},
        pdb("loose", match={"app": "trainer"}, allowed=3),
        pdb("tight", match={"tier": "gpu"}, allowed=0),
    )
    assert_stays(plan, Unmovable.MULTIPLE_PDBS)


@pytest.mark.parametrize(
    "budget",
    [
        pdb("trainer", match={"app": "trainer"}, allowed=1),
        pdb("other", match={"app": "other"}, allowed=0),
        pdb("trainer", match={"app": "trainer"}, allowed=0, namespace="elsewhere"),
    ],
    ids=["allows-one", "selects-other-pods", "other-namespace"],
)
def test_rule7_control_pdb_that_does_not_bind_moves(budget: dict[str, Any]) -> None:
    _, plan = scenario({"labels": {"app": "trainer"}}, budget)
    assert_moves(plan)


# ---------------------------------------------------------------- rule 8: node excluded


def test_rule8_pod_on_excluded_node_stays() -> None:
    _, plan = scenario(src={"labels": {"compactor.io/exclude": "true"}})
    assert_stays(plan, Unmovable.NODE_EXCLUDED)


@pytest.mark.parametrize(
    "annotation", ["karpenter.sh/do-not-disrupt", "cluster-autoscaler.kubernetes.io/scale-down-disabled"]
)
def test_rule8_a_node_other_tools_may_not_disrupt_keeps_its_pods(annotation: str) -> None:
    _, plan = scenario(src={"annotations": {annotation: "true"}})
    assert_stays(plan, Unmovable.NODE_DO_NOT_DISRUPT)
    _, plan = scenario(src={"annotations": {annotation: "false"}})
    assert_moves(plan)


def test_rule8_control_exclude_label_not_true_moves() -> None:
    _, plan = scenario(src={"labels": {"compactor.io/exclude": "false"}})
    assert_moves(plan)


# ---------------------------------------------------------------- rule 9: inter-pod (anti-)affinity, hard spread


@pytest.mark.parametrize("kind", ["podAffinity", "podAntiAffinity"])
def test_rule9_required_inter_pod_affinity_stays(kind: str) -> None:
    _, plan = scenario({"affinity": {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [AFFINITY_TERM]}}})
    assert_stays(plan, Unmovable.POD_AFFINITY)


@pytest.mark.parametrize("when", ["DoNotSchedule", None])
def test_rule9_hard_topology_spread_stays(when: str | None) -> None:
    constraint: dict[str, Any] = {
        "maxSkew": 1,
        "topologyKey": "kubernetes.io/hostname",
        "labelSelector": {"matchLabels": {"app": "app"}},
    }
    if when:
        constraint["whenUnsatisfiable"] = when  # absent defaults to DoNotSchedule
    _, plan = scenario({"spread": [constraint]})
    assert_stays(plan, Unmovable.TOPOLOGY_SPREAD)


def test_rule9_control_preferred_affinity_and_soft_spread_move() -> None:
    preferred = [{"weight": 10, "podAffinityTerm": AFFINITY_TERM}]
    soft = [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app": "app"}},
        }
    ]
    affinity = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}
    _, plan = scenario({"affinity": affinity, "spread": soft})
    assert_moves(plan)


# ---------------------------------------------------------------- config narrowing


def test_config_namespaces_not_selected_stays() -> None:
    _, plan = scenario({"namespace": "team-a"}, config=settings(namespaces=["team-b"]))
    assert_stays(plan, Unmovable.NAMESPACE)


def test_config_namespaces_selected_moves() -> None:
    _, plan = scenario({"namespace": "team-a"}, config=settings(namespaces=["team-a", "team-b"]))
    assert_moves(plan, "team-a")


def test_config_exclude_namespaces_defaults_to_kube_system() -> None:
    assert PlannerSettings.of().movable.exclude_namespaces == ["kube-system"]
    _, plan = scenario({"namespace": "kube-system"})
    assert_stays(plan, Unmovable.NAMESPACE)


def test_config_exclude_namespaces_can_be_cleared_and_set() -> None:
    _, plan = scenario({"namespace": "kube-system"}, config=settings(exclude_namespaces=[]))
    assert_moves(plan, "kube-system")
    _, plan = scenario({"namespace": "batch"}, config=settings(exclude_namespaces=["batch"]))
    assert_stays(plan, Unmovable.NAMESPACE)


def test_config_exclusion_wins_over_selection() -> None:
    _, plan = scenario({"namespace": "batch"}, config=settings(namespaces=["batch"], exclude_namespaces=["batch"]))
    assert_stays(plan, Unmovable.NAMESPACE)


def test_config_pod_selector_mismatch_stays() -> None:
    _, plan = scenario(
        {"labels": {"app": "x", "compactable": "no"}}, config=settings(pod_selector={"compactable": "yes"})
    )
    assert_stays(plan, Unmovable.SELECTOR)
    _, plan = scenario({"labels": {"app": "x"}}, config=settings(pod_selector={"compactable": "yes"}))
    assert_stays(plan, Unmovable.SELECTOR)


def test_config_pod_selector_match_moves() -> None:
    _, plan = scenario(
        {"labels": {"app": "x", "compactable": "yes"}}, config=settings(pod_selector={"compactable": "yes"})
    )
    assert_moves(plan)


@pytest.mark.parametrize(
    ("candidate", "config"),
    [
        ({"created": "2025-12-31T23:50:00Z"}, {"min_pod_age_seconds": 3600}),  # created 10 minutes before the plan
        ({"ready_since": "2025-12-31T23:55:00Z"}, {"min_ready_seconds": 900}),  # Ready for 5 minutes, still warming up
    ],
    ids=["younger-than-min-age", "ready-for-less-than-min-ready"],
)
def test_config_a_pod_too_young_or_ready_too_recently_stays(candidate: dict[str, Any], config: dict[str, Any]) -> None:
    _, plan = scenario(candidate, config=settings(**config))
    assert_stays(plan, Unmovable.TOO_YOUNG)
    _, plan = scenario(candidate)  # the limits are off by default
    assert_moves(plan)


def test_config_a_pod_old_enough_and_ready_long_enough_moves() -> None:
    _, plan = scenario(
        {"created": "2025-12-31T22:00:00Z", "ready_since": "2025-12-31T23:00:00Z"},
        config=settings(min_pod_age_seconds=3600, min_ready_seconds=900),
    )
    assert_moves(plan)


def test_config_max_priority_above_stays_equal_moves() -> None:
    _, plan = scenario({"priority": 1001}, config=settings(max_priority=1000))
    assert_stays(plan, Unmovable.PRIORITY)
    _, plan = scenario({"priority": 1000}, config=settings(max_priority=1000))
    assert_moves(plan)


@pytest.mark.parametrize("value", [2_000_000_000, 3_000_000_000])
def test_config_max_priority_may_not_admit_system_critical(value: int) -> None:
    with pytest.raises(ConfigError, match="max_priority"):
        load_settings(overrides={"movable": {"max_priority": value}})


def test_config_max_priority_just_below_critical_loads() -> None:
    loaded = load_settings(overrides={"movable": {"max_priority": 1_999_999_999}})
    assert loaded.movable.max_priority == 1_999_999_999


LOOSEST = {"namespaces": [], "exclude_namespaces": [], "pod_selector": {}, "max_priority": 1_999_999_999}


@pytest.mark.parametrize(
    ("candidate", "reason"),
    [
        ({"phase": "Pending"}, Unmovable.NOT_RUNNING),
        ({"deleting": True}, Unmovable.TERMINATING),
        ({"owner": "DaemonSet/ds"}, Unmovable.DAEMONSET),
        ({"owner": "Node/src", "annotations": {"kubernetes.io/config.mirror": "x"}}, Unmovable.MIRROR),
        ({"owner": None}, Unmovable.BARE),
        ({"priority_class": "system-node-critical"}, Unmovable.SYSTEM_CRITICAL),
        ({"priority": 2_000_000_000, "namespace": "kube-system"}, Unmovable.SYSTEM_CRITICAL),
    ],
    ids=["not-running", "deleting", "daemonset", "mirror", "bare", "critical-class", "critical-priority-kube-system"],
)
def test_config_cannot_loosen_rules_1_to_4(candidate: dict[str, Any], reason: Unmovable) -> None:
    _, plan = scenario(candidate, config=settings(**LOOSEST))
    assert_stays(plan, reason)


# ---------------------------------------------------------------- planner rules agree with the independent checker


def test_movability_reasons_agree_with_checker() -> None:
    cases = [
        pod("ok", on="src", gpus=1),
        pod("pending", on="src", gpus=1, phase="Pending"),
        pod("ds", on="src", gpus=1, owner="DaemonSet/d"),
        pod("bare", on="src", gpus=1, owner=None),
        pod("crit", on="src", gpus=1, priority_class="system-cluster-critical"),
        pod("local", on="src", gpus=1, volumes=EMPTY_DIR),
        pod("local-ok", on="src", gpus=1, volumes=EMPTY_DIR, annotations={"compactor.io/evict": "true"}),
        pod("opt", on="src", gpus=1, annotations={"compactor.io/evict": "false"}),
        pod("pdb", on="src", gpus=1, labels={"app": "p"}),
        pod(
            "anti",
            on="src",
            gpus=1,
            affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [AFFINITY_TERM]}},
        ),
        pod("sys", on="src", gpus=1, namespace="kube-system"),
        pod("excl", on="x", gpus=1),
    ]
    snapshot = cluster(
        node("src", gpus=8),
        node("x", gpus=8, labels={"compactor.io/exclude": "true"}),
        pdb("p", match={"app": "p"}, allowed=0),
        *cases,
    )
    cfg = settings()
    planner = movability(snapshot.pods, snapshot.node_by_name(), snapshot.pdbs, cfg)
    nodes = snapshot.node_by_name()
    checker = {p.key: movable_reason(p, nodes.get(p.node_name), snapshot.pdbs, cfg) for p in snapshot.pods}
    assert {k: v is None for k, v in planner.items()} == {k: v is None for k, v in checker.items()}
    assert {k for k, v in planner.items() if v is None} == {"default/ok", "default/local-ok"}


# ----- the replica guard (movable.min_replicas) ----------------------------------------------------------------


def guard_reasons(*objects: dict[str, Any], min_replicas: int = 2) -> dict[str, Unmovable | None]:
    snapshot = cluster(node("gpu-1", gpus=8), node("gpu-2", gpus=8), *objects)
    nodes = {n.name: n for n in snapshot.nodes}
    return movability(snapshot.pods, nodes, snapshot.pdbs, settings(min_replicas=min_replicas))


def test_the_only_ready_replica_without_a_budget_stays() -> None:
    reasons = guard_reasons(pod("solo", on="gpu-1", gpus=1, owner="ReplicaSet/solo"))
    assert reasons["default/solo"] is Unmovable.FEW_REPLICAS


def test_two_ready_replicas_may_move_but_one_not_ready_sibling_does_not_count() -> None:
    pair = [pod("a-0", on="gpu-1", gpus=1, owner="ReplicaSet/a"), pod("a-1", on="gpu-2", gpus=1, owner="ReplicaSet/a")]
    assert guard_reasons(*pair)["default/a-0"] is None
    pair[1]["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    assert guard_reasons(*pair)["default/a-0"] is Unmovable.FEW_REPLICAS


def test_a_budget_says_what_the_owner_accepts_so_the_guard_steps_aside() -> None:
    reasons = guard_reasons(
        pod("solo", on="gpu-1", gpus=1, owner="ReplicaSet/solo"), pdb("solo", match={"app": "solo"}, allowed=1)
    )
    assert reasons["default/solo"] is None


def test_min_replicas_one_turns_the_guard_off() -> None:
    assert (
        guard_reasons(pod("solo", on="gpu-1", gpus=1, owner="ReplicaSet/solo"), min_replicas=1)["default/solo"] is None
    )


# ----- pods that tolerate the compactor's fences (issue [12], finding 5) --------------------------------------------------

FENCE = Taint(key="compactor.io/fence-gpu-compactor", value="any-plan", effect="NoSchedule")


@pytest.mark.parametrize(
    "tolerations",
    [
        [{"operator": "Exists"}],
        [{"key": "compactor.io/fence-gpu-compactor", "operator": "Exists"}],
        [{"operator": "Exists", "effect": "NoSchedule"}],
    ],
)
def test_a_pod_tolerating_the_fence_stays_when_fences_steer(tolerations: list[dict[str, str]]) -> None:
    snapshot = cluster(
        node("keep", gpus=8),
        node("src", gpus=8),
        pod("anchor", on="keep", gpus=6, owner=None),
        pod("c", on="src", gpus=2, tolerations=tolerations),
    )
    plan = build_plan(PlanRequest.of(snapshot, settings(), source="test", now=NOW, steering=Steerability(fence=FENCE)))
    assert_stays(plan, Unmovable.TOLERATES_FENCES)


def test_a_pod_tolerating_the_fence_moves_when_the_steering_policy_pins_replacements() -> None:
    snapshot = cluster(
        node("keep", gpus=8),
        node("src", gpus=8),
        pod("anchor", on="keep", gpus=6, owner=None),
        pod("c", on="src", gpus=2, tolerations=[{"operator": "Exists"}]),
    )
    assert_moves(
        build_plan(
            PlanRequest.of(snapshot, settings(), source="test", now=NOW, steering=Steerability(policy=EVERY_NAMESPACE))
        )
    )


def test_a_toleration_of_other_taints_or_another_installations_fence_does_not_hold_a_pod() -> None:
    snapshot = cluster(
        node("keep", gpus=8),
        node("src", gpus=8),
        pod("anchor", on="keep", gpus=6, owner=None),
        pod(
            "c",
            on="src",
            gpus=2,
            tolerations=[
                {"key": "nvidia.com/gpu", "operator": "Exists"},
                {"key": "compactor.io/fence-other", "operator": "Exists"},
                {"operator": "Exists", "effect": "NoExecute"},
            ],
        ),
    )
    assert_moves(
        build_plan(PlanRequest.of(snapshot, settings(), source="test", now=NOW, steering=Steerability(fence=FENCE)))
    )


# ----- pods the steering policy would not pin (issue [18], finding 3) -----------------------------------------------------

POLICY_EVERYWHERE_BUT_KUBE_SYSTEM = Steerability(policy=NamespaceScope(never=frozenset({"kube-system"})))


@pytest.mark.parametrize("owner", ["Job/batch", "InferenceService/llm"])
def test_under_the_policy_a_pod_whose_creator_it_does_not_pin_stays(owner: str) -> None:
    snapshot = cluster(
        node("keep", gpus=8),
        node("src", gpus=8),
        pod("anchor", on="keep", gpus=6, owner=None),
        pod("c", on="src", gpus=2, owner=owner, annotations={"compactor.io/evict": "true"}),
    )
    plan = build_plan(
        PlanRequest.of(snapshot, settings(), source="test", now=NOW, steering=POLICY_EVERYWHERE_BUT_KUBE_SYSTEM)
    )
    assert_stays(plan, Unmovable.NOT_PINNED_OWNER)


def test_under_holds_the_same_job_pod_moves() -> None:
    snapshot = cluster(
        node("keep", gpus=8),
        node("src", gpus=8),
        pod("anchor", on="keep", gpus=6, owner=None),
        pod("c", on="src", gpus=2, owner="Job/batch", annotations={"compactor.io/evict": "true"}),
    )
    assert_moves(
        build_plan(PlanRequest.of(snapshot, settings(), source="test", now=NOW, steering=Steerability(fence=FENCE)))
    )


@pytest.mark.parametrize("owner", ["ReplicaSet/app", "StatefulSet/db"])
def test_under_the_policy_replicaset_and_statefulset_pods_move(owner: str) -> None:
    snapshot = cluster(
        node("keep", gpus=8),
        node("src", gpus=8),
        pod("anchor", on="keep", gpus=6, owner=None),
        pod("c", on="src", gpus=2, owner=owner),
    )
    assert_moves(
        build_plan(
            PlanRequest.of(snapshot, settings(), source="test", now=NOW, steering=POLICY_EVERYWHERE_BUT_KUBE_SYSTEM)
        )
    )


def test_under_the_policy_a_pod_outside_its_binding_namespaces_stays() -> None:
    snapshot = cluster(
        node("keep", gpus=8),
        node("src", gpus=8),
        pod("anchor", on="keep", gpus=6, owner=None),
        pod("c", on="src", gpus=2, namespace="team-b"),
    )
    scope = Steerability(policy=NamespaceScope(only=frozenset({"team-a"})))
    plan = build_plan(PlanRequest.of(snapshot, settings(), source="test", now=NOW, steering=scope))
    assert_stays(plan, Unmovable.OUTSIDE_POLICY)


def test_a_namespace_scope_covers_what_its_selector_says() -> None:
    assert EVERY_NAMESPACE.covers("kube-system")
    assert not NamespaceScope(never=frozenset({"kube-system"})).covers("kube-system")
    assert NamespaceScope(never=frozenset({"kube-system"})).covers("team-a")
    assert not NamespaceScope(only=frozenset({"a"}), never=frozenset({"a"})).covers("a")

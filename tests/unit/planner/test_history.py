"""Memory across runs (issue 15, items 1, 3 and 4), pure: cooldowns, the hourly and daily budgets, the circuit breaker,
oscillation, and what the planner does with them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from compactor.app.plan_document import build_plan
from compactor.planner.request import PlanRequest
from compactor.planner.rules.history import FAILED, MOVED, History, MoveRecord, remember, restraints_at, undoes
from compactor.planner.rules.movability import Unmovable
from compactor.settings.bundles import PlannerSettings
from compactor.settings.caps import CapsSettings
from compactor.settings.disruption import DisruptionSettings
from tests.builders import cluster, node, pod

NO_CAPS = CapsSettings()
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
COOL = DisruptionSettings(workload_cooldown_minutes=30, node_cooldown_minutes=10)


def moved(
    minutes_ago: float,
    pod_: str = "ml/a-0",
    workload: str = "ml/ReplicaSet/a",
    source: str = "gpu-1",
    target: str = "gpu-2",
    outcome: str = MOVED,
) -> MoveRecord:
    return MoveRecord(NOW - timedelta(minutes=minutes_ago), pod_, workload, source, target, outcome)


def test_a_workload_and_its_nodes_cool_down_for_their_configured_minutes() -> None:
    restraints = restraints_at(History((moved(12),)), COOL, NOW, caps=NO_CAPS)
    assert restraints.workloads == {"ml/ReplicaSet/a": "its workload ml/ReplicaSet/a moved 12 min ago; cooldown 30 min"}
    assert restraints.nodes == {}  # 12 minutes is past the nodes' 10
    restraints = restraints_at(History((moved(4),)), COOL, NOW, caps=NO_CAPS)
    assert restraints.nodes == {
        "gpu-1": "drained 4 min ago; cooldown 10 min",
        "gpu-2": "filled 4 min ago; cooldown 10 min",
    }
    assert not restraints_at(History((moved(31),)), COOL, NOW, caps=NO_CAPS).any
    assert not restraints_at(
        History((moved(4, outcome=FAILED),)), COOL, NOW, caps=NO_CAPS
    ).workloads  # only moves that happened cool


def test_the_hourly_and_daily_budgets_leave_what_the_last_hour_and_day_did_not_use() -> None:
    history = History(tuple(moved(m, pod_=f"ml/a-{m}") for m in (5, 20, 50, 70, 300)))
    hourly = restraints_at(history, DisruptionSettings(), NOW, caps=CapsSettings(max_moves_per_hour=5))
    assert (hourly.moves_left, hourly.budget) == (2, "caps.max_moves_per_hour 5 (3 moved in the last hour)")
    both = restraints_at(
        history, DisruptionSettings(), NOW, caps=CapsSettings(max_moves_per_hour=5, max_moves_per_day=6)
    )
    assert (both.moves_left, both.budget) == (1, "caps.max_moves_per_day 6 (5 moved in the last day)")


def test_the_breaker_opens_after_k_failures_of_the_last_n_and_closes_after_its_pause() -> None:
    cfg = DisruptionSettings(breaker_failures=3, breaker_of_last=5, breaker_pause_minutes=60)
    history = History((moved(30), moved(29, outcome=FAILED)))
    run = [(f"ml/b-{i}", "ml/ReplicaSet/b", "gpu-3", "gpu-4") for i in range(2)]
    failed = {p for p, *_ in run}
    history = remember(history, run, done=set(), failed=failed, now=NOW, cfg=cfg)  # two more failures: 3 of the last 4
    assert history.paused_until == NOW + timedelta(minutes=60)
    assert history.pause_reason == "3 of the last 4 moves failed (disruption.breaker_failures 3)"
    assert restraints_at(history, cfg, NOW + timedelta(minutes=59), caps=NO_CAPS).paused.startswith(
        "circuit breaker open until "
    )
    assert not restraints_at(history, cfg, NOW + timedelta(minutes=61), caps=NO_CAPS).paused
    calm = remember(History((moved(30),)), run, done={"ml/b-0", "ml/b-1"}, failed=set(), now=NOW, cfg=cfg)
    assert calm.paused_until is None and [m.outcome for m in calm.moves] == [MOVED, MOVED, MOVED]


def test_moves_refused_at_their_recheck_are_not_failures_and_history_is_bounded() -> None:
    cfg = DisruptionSettings(history_limit=10, workload_cooldown_minutes=30)
    run = [(f"ml/c-{i}", "ml/ReplicaSet/c", "gpu-1", "gpu-2") for i in range(30)]
    history = remember(History(), run, done={"ml/c-0"}, failed=set(), now=NOW, cfg=cfg)
    assert [m.pod for m in history.moves] == ["ml/c-0"]  # the 29 not done were refused or not reached: nothing recorded
    history = remember(History(), run, done={p for p, *_ in run}, failed=set(), now=NOW, cfg=cfg)
    assert len(history.moves) == 10 and history.moves[-1].pod == "ml/c-29"
    assert History.from_json(history.to_json()) == history


def test_a_failed_run_records_as_failed_only_the_moves_it_attempted() -> None:
    """Issue 42: a run that rolled back after one eviction whose replacement never came up, with four more moves it never
    reached (or that went stale before their turn), is one failure, not five: the breaker at 2 of the last 10 stays shut."""
    cfg = DisruptionSettings(breaker_failures=2, breaker_of_last=10)
    run = [(f"ml/d-{i}", f"ml/ReplicaSet/d{i}", "gpu-1", "gpu-2") for i in range(5)]
    history = remember(History(), run, done=set(), failed={"ml/d-0"}, now=NOW, cfg=cfg)
    assert [(m.pod, m.outcome) for m in history.moves] == [("ml/d-0", FAILED)]
    assert history.paused_until is None
    stale = remember(History(), run, done=set(), failed=set(), now=NOW, cfg=cfg)  # refused before any eviction
    assert stale.moves == () and stale.paused_until is None


def test_a_move_back_where_a_recent_move_came_from_is_an_oscillation() -> None:
    day = DisruptionSettings(oscillation_hours=24)
    restraints = restraints_at(History((moved(60),)), day, NOW, caps=NO_CAPS)
    assert undoes([("ml/ReplicaSet/a", "gpu-2", "gpu-1")], restraints) == ["ml/ReplicaSet/a gpu-2 -> gpu-1"]
    assert undoes([("ml/ReplicaSet/a", "gpu-2", "gpu-3")], restraints) == []
    later = restraints_at(History((moved(60 * 25),)), day, NOW, caps=NO_CAPS)
    assert undoes([("ml/ReplicaSet/a", "gpu-2", "gpu-1")], later) == []  # a day later: allowed
    off = restraints_at(History((moved(60),)), DisruptionSettings(), NOW, caps=NO_CAPS)
    assert undoes([("ml/ReplicaSet/a", "gpu-2", "gpu-1")], off) == []  # the guard is off by default


def _cluster() -> object:
    return cluster(
        node("gpu-1", gpus=8),
        node("gpu-2", gpus=8),
        node("gpu-3", gpus=8),
        pod("keep", on="gpu-1", gpus=4, owner=None),
        pod("a-0", on="gpu-2", gpus=1, namespace="ml", owner="ReplicaSet/a"),
        pod("b-0", on="gpu-3", gpus=1, namespace="ml", owner="ReplicaSet/b"),
    )


def test_the_plan_leaves_a_cooling_workload_in_place_and_says_why_per_pod() -> None:
    restraints = restraints_at(
        History((moved(12, pod_="ml/a-old", source="gpu-9", target="gpu-8"),)), COOL, NOW, caps=NO_CAPS
    )
    plan = build_plan(
        PlanRequest.of(
            _cluster(),
            PlannerSettings.of(min_replicas=1, time_limit_seconds=5),
            source="t",
            now=NOW,  # type: ignore[arg-type]
            restraints=restraints,
        )
    )
    assert [m.pod for m in plan.moves] == ["ml/b-0"]  # a-0's workload moved 12 minutes ago
    assert plan.explanations["cooldowns"] == {
        "ml/a-0": "its workload ml/ReplicaSet/a moved 12 min ago; cooldown 30 min"
    }
    assert plan.explanations["unmovablePods"][Unmovable.COOLDOWN.value] == 1
    assert any(w.startswith("in their cooldown: 1 workload(s), 0 node(s)") for w in plan.warnings)


def test_a_cooling_node_is_neither_drained_nor_filled_and_the_budget_caps_the_plan() -> None:
    restraints = restraints_at(
        History((moved(4, pod_="ml/x-0", workload="ml/ReplicaSet/x", source="gpu-3", target="gpu-9"),)),
        DisruptionSettings(node_cooldown_minutes=10),
        NOW,
        caps=CapsSettings(max_moves_per_hour=1),
    )
    plan = build_plan(
        PlanRequest.of(
            _cluster(),
            PlannerSettings.of(min_replicas=1, time_limit_seconds=5),
            source="t",
            now=NOW,  # type: ignore[arg-type]
            restraints=restraints,
        )
    )
    assert "gpu-3" not in {m.from_node for m in plan.moves} | {m.to_node for m in plan.moves}
    assert plan.explanations["cooldowns"] == {"ml/b-0": "its node gpu-3 was drained 4 min ago; cooldown 10 min"}
    assert len(plan.moves) <= 1 and any(w.startswith("at most 0 move(s) now") for w in plan.warnings)

"""Keys that moved when the settings were regrouped by the operator's questions (0.2): the old ``planner`` and
``executor`` groups, and the caps that were ``disruption``'s, each with where it lives now. An old key is still read
for one release, moved to its new place with a notice that names both; given together with its new key, it is an
error (which one was meant?). ``planner:`` and ``executor:`` keys that did not move are read in place."""

from __future__ import annotations

import difflib
from typing import Any

_PLANNER = {
    "mode": "aims.goal",
    "target_shapes": "aims.target_shapes",
    "objective": "aims.objective",
    "balanced_moves_per_gpu": "aims.balanced_moves_per_gpu",
    "place_pending": "aims.place_pending",
    "min_gain_per_move": "aims.min_gain_per_move",
    "move_cost": "aims.move_cost",
    "time_limit_seconds": "solver.time_limit_seconds",
    "workers": "solver.workers",
    "seed": "solver.seed",
    "deterministic": "solver.deterministic",
    "max_candidate_pods": "solver.max_candidate_pods",
    "max_targets_per_type": "solver.max_targets_per_type",
    "max_moves": "caps.max_moves",
    "max_moves_per_node": "caps.max_moves_per_node",
    "max_moves_per_namespace": "caps.max_moves_per_namespace",
    "mig_repartition": "mig.repartition",
    "mig_rebalance_min_gain": "mig.rebalance_min_gain",
    "recut_cost_moves": "mig.recut_cost_moves",
} | {
    name: f"movable.{name}"
    for name in (
        "namespaces",
        "exclude_namespaces",
        "pod_selector",
        "max_priority",
        "min_pod_age_seconds",
        "min_ready_seconds",
        "min_replicas",
        "recreating_controllers",
        "scheduler_names",
        "cross_pool_moves",
    )
}
_EXECUTOR = {
    "max_concurrent_evictions": "caps.max_concurrent_evictions",
    "max_evictions_per_cycle": "caps.max_evictions_per_cycle",
    "max_run_seconds": "caps.max_run_seconds",
    "max_plan_age_seconds": "caps.max_plan_age_seconds",
    "mig_reconfigure_timeout_seconds": "mig.reconfigure_timeout_seconds",
    "steering": "steering.mechanism",
    "steering_name": "steering.policy_name",
    "make_before_break_selector": "steering.make_before_break_selector",
    "steer_timeout_seconds": "steering.steer_timeout_seconds",
    "bind_poll_seconds": "steering.bind_poll_seconds",
    "max_holds_per_move": "caps.max_holds_per_move",
}
_DISRUPTION = {
    name: f"caps.{name}"
    for name in ("max_moves_per_hour", "max_moves_per_day", "max_draining_per_pool", "max_moves_per_workload")
}

RELOCATED: dict[str, str] = {
    **{f"planner.{old}": new for old, new in _PLANNER.items()},
    **{f"executor.{old}": new for old, new in _EXECUTOR.items()},
    **{f"disruption.{old}": new for old, new in _DISRUPTION.items()},
}
"""Old dotted key -> new dotted key."""

RETIRED_GROUPS = ("planner",)  # every key of the group moved: the group itself is gone


class RelocationError(ValueError):
    """An old key given together with its new one, or one of a retired group that never existed."""


def relocate(data: Any) -> tuple[Any, list[tuple[str, str]]]:
    """``data`` (the settings document as read) with every old key moved to its new place, and the (old, new) pairs
    moved. Leaves anything that is not a mapping to validation."""
    if not isinstance(data, dict):
        return data, []
    moved: list[tuple[str, str]] = []
    result = {key: dict(value) if isinstance(value, dict) else value for key, value in data.items()}
    for old, new in RELOCATED.items():
        old_group, old_name = old.split(".")
        group = result.get(old_group)
        if not isinstance(group, dict) or old_name not in group:
            continue
        new_group, new_name = new.split(".")
        target = result.setdefault(new_group, {})
        if not isinstance(target, dict):
            continue  # validation names the malformed group
        if new_name in target:
            raise RelocationError(f"{old} and {new} are both given: {old} is the old name of {new}; keep one")
        target[new_name] = group.pop(old_name)
        moved.append((old, new))
    for name in RETIRED_GROUPS:
        left = result.pop(name, {})
        if isinstance(left, dict) and left:
            raise RelocationError(_unknown(f"{name}.{sorted(left)[0]}"))
    return result, moved


def _unknown(key: str) -> str:
    """A key of a retired group that never existed, with the closest one that did, named with where it lives now."""
    closest = difflib.get_close_matches(key, list(RELOCATED), n=1, cutoff=0.75)
    hint = f"; did you mean {closest[0]} (now {RELOCATED[closest[0]]})?" if closest else "; see config/compactor.yaml"
    return f"{key} names no setting{hint}"


def notice(old: str, new: str) -> str:
    """What a relocated key's reader is told."""
    return f"{old} is now {new}: the old name is read until the next release (CHANGELOG, 0.2)"

"""The move limits, asked in one place (planner/rules/move_limits.py): what a plan may do and what a neighbourhood of
the LNS is left when the rest of the plan is fixed."""

from __future__ import annotations

from compactor.planner.rules.move_limits import NO_MOVE_LIMITS, MoveLimits
from compactor.settings.bundles import PlannerSettings


def limits(**changes: object) -> MoveLimits:
    return MoveLimits.of(PlannerSettings.of(**changes))


def test_no_limit_by_default_and_none_after_the_baselines_lift_them() -> None:
    assert not limits().any
    capped = PlannerSettings.of(max_moves=3, max_moves_per_node=1, min_gain_per_move=0.5)
    assert MoveLimits.of(capped).any
    assert not MoveLimits.of(capped.amended(**NO_MOVE_LIMITS)).any


def test_a_plan_of_five_moves_passes_a_cap_of_five_not_of_four() -> None:
    assert limits(max_moves=5).within(5, [3, 2], [5], gained_gpus=0)
    assert not limits(max_moves=4).within(5, [3, 2], [5], gained_gpus=0)


def test_three_moves_out_of_one_node_break_a_per_node_cap_of_two_and_a_namespace_cap_counts_its_own() -> None:
    assert not limits(max_moves_per_node=2).within(4, [3, 1], [4], gained_gpus=0)
    assert limits(max_moves_per_namespace=2).within(4, [3, 1], [2, 2], gained_gpus=0)
    assert not limits(max_moves_per_namespace=2).within(4, [3, 1], [3, 1], gained_gpus=0)


def test_four_moves_freeing_eight_gpus_pay_two_per_move_not_two_and_a_half() -> None:
    assert limits(min_gain_per_move=2).within(4, [4], [4], gained_gpus=8)
    assert not limits(min_gain_per_move=2.5).within(4, [4], [4], gained_gpus=8)


def test_a_neighbourhood_gets_what_the_fixed_moves_leave_of_each_cap() -> None:
    caps = limits(max_moves=10, max_moves_per_node=3, max_moves_per_namespace=4, min_gain_per_move=1)
    assert caps.left_after(6, 1, 4) == {
        "max_moves": 4,
        "max_moves_per_node": 2,
        "max_moves_per_namespace": 0,
        "min_gain_per_move": 0.0,  # checked on the whole plan, which counts freed GPUs everywhere
    }
    assert caps.left_after(11, 0, 0) is None  # the fixed part alone spends more than the cap: nothing is left


def test_the_hourly_remainder_lowers_the_cap_only_when_it_is_lower() -> None:
    assert limits().lowered(5)
    assert limits(max_moves=8).lowered(5)
    assert not limits(max_moves=4).lowered(5)
    assert not limits(max_moves=4).lowered(None)

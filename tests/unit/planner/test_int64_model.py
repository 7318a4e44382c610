"""The planner's 64-bit guard (compactor/planner/cpsat/int64.py): capacity rows restated in small numbers keep every solution.

Checked by brute force: every assignment of small variables satisfies the restated row exactly when it satisfies the
original one (evaluated with Python's unbounded integers), for random amounts up to 2^63-1 and rooms beyond it.
"""

from __future__ import annotations

import itertools
import random

import pytest
from ortools.sat.python import cp_model

from compactor.planner.cpsat.int64 import (
    REACH_LIMIT,
    ModelRangeError,
    at_most,
    at_most_unless_empty,
    checked,
    too_large,
    upper,
)

INT64_MAX = 2**63 - 1


def variables(uppers: list[int]) -> list[cp_model.IntVar]:
    model = cp_model.CpModel()
    return [model.new_int_var(0, hi, f"x{i}") for i, hi in enumerate(uppers)]


def assignments(vars_: list[cp_model.IntVar]) -> list[tuple[int, ...]]:
    return list(itertools.product(*(range(upper(v) + 1) for v in vars_)))


def total(terms: list[tuple[cp_model.IntVar, int]], values: tuple[int, ...]) -> int:
    return sum(amount * value for (_, amount), value in zip(terms, values, strict=True))


def random_row(rng: random.Random) -> tuple[list[cp_model.IntVar], list[int], int]:
    vars_ = variables([rng.randint(0, 3) for _ in range(rng.randint(1, 3))])
    unit = rng.choice([1, 1000, 1 << 20, 10**15, 2 * 10**18])  # a shared factor, as Mi-multiples of memory share one
    amounts = [min(INT64_MAX, unit * rng.choice([0, 1, 2, 3, 7])) for _ in vars_]
    room = rng.choice([0, 1, unit * rng.randint(0, 12), INT64_MAX, 3 * INT64_MAX, rng.randint(0, 4 * INT64_MAX)])
    return vars_, amounts, room


def test_upper_reads_the_largest_value_of_a_domain() -> None:
    x, b = variables([7])[0], cp_model.CpModel().new_bool_var("b")
    # domain[-1] reads 0 in this proto binding: a guard built on it would drop every row
    assert (upper(x), upper(b)) == (
        7,
        1,
    )


@pytest.mark.parametrize("seed", range(40))
def test_a_restated_capacity_row_has_the_same_solutions(seed: int) -> None:
    rng = random.Random(seed)
    vars_, amounts, room = random_row(rng)
    terms = list(zip(vars_, amounts, strict=True))
    restated = at_most(terms, room)
    for values in assignments(vars_):
        fits = total(terms, values) <= room
        if restated is None:
            assert fits, (amounts, room, values)  # a row dropped as never binding must hold everywhere
        else:
            small, small_room = restated
            assert (total(small, values) <= small_room) == fits, (amounts, room, values)
    if restated is not None and restated[1] >= 0:
        assert all(amount <= restated[1] + 1 for _, amount in restated[0])  # no amount beyond what says "none of these"


@pytest.mark.parametrize("seed", range(40))
def test_a_restated_emptiness_row_has_the_same_solutions(seed: int) -> None:
    rng = random.Random(1000 + seed)
    vars_, amounts, room = random_row(rng)
    terms = list(zip(vars_, amounts, strict=True))
    restated = at_most_unless_empty(terms, room)
    for values, empty in itertools.product(assignments(vars_), (0, 1)):
        holds = total(terms, values) + room * empty <= room
        if restated is None:
            assert holds, (amounts, room, values, empty)
        else:
            small, cap = restated
            assert (total(small, values) + cap * empty <= cap) == holds, (amounts, room, values, empty)


def test_exabyte_rows_become_small_numbers() -> None:
    """Four pods of 2Ei on a node of 2^63-1 bytes: three fit. The row reaches 2^63 as stated; restated, it is 3 x 1 <= 3."""
    pods = variables([4])
    restated = at_most([(pods[0], 2**61)], INT64_MAX)
    assert restated is not None
    small, room = restated
    assert [amount for _, amount in small] == [1] and room == 3


def test_what_cannot_be_restated_is_refused_with_the_node_and_field() -> None:
    x = variables([4])[0]
    refuse = too_large("snap.json", "n1", "status.allocatable", "GPU count")
    assert checked([(x, REACH_LIMIT // 4)], refuse) == [(x, REACH_LIMIT // 4)]
    with pytest.raises(ModelRangeError) as caught:
        checked([(x, REACH_LIMIT // 4 + 1)], refuse)
    message = str(caught.value)
    assert message.startswith(
        "snap.json: Node n1: status.allocatable: GPU count too large for the planner's 64-bit integer model"
    )
    assert "\n" not in message

"""Keeping the CP-SAT models inside 64-bit integers.

CP-SAT declares a model invalid when a linear expression could pass half of int64
(``PossibleIntegerOverflow`` in ``cp_model_checker.cc``: the sum of |coefficient| x
largest value, over the terms), and its Python layer raises a C++ cast error for a
coefficient beyond int64. Kubernetes admits amounts up to 2^63-1 scheduler units
(``model/quantity.py``), so a node of exabytes of memory, times a pod count, is
already past it; so is a node advertising 10^18 GPUs, times a move cost.

Capacity rows are restated with small numbers and the same solutions (``at_most``,
``at_most_unless_empty``); anything still too large is refused by
``ModelRangeError``, naming the node and resource, rather than crashing or being
solved as an invalid model that silently keeps the warm start.

Imports: the CP-SAT types through ``cpsat`` (never ``ortools`` itself) and ``compactor.errors``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from compactor.errors import InputError

if TYPE_CHECKING:
    from compactor.planner.cpsat import IntVar

REACH_LIMIT = (2**63 - 1) // 2  # CP-SAT: no linear expression may reach beyond half of int64
LinearTerms = list[tuple["IntVar", int]]
Bound = Callable[["IntVar"], int]  # a variable's largest value (``upper``, or a faster lookup of the same)


class ModelRangeError(InputError):
    """Amounts or GPU counts too large for the planner's 64-bit integer model."""


def upper(var: IntVar) -> int:
    # [lo, hi, lo, hi, ...]; this proto binding reads domain[-1] as 0, so index from the front
    domain = var.proto.domain
    return int(domain[len(domain) - 1])


def reach(terms: LinearTerms, bound: Bound = upper) -> int:
    """The largest magnitude the weighted sum can take (variables are non-negative)."""
    return sum(abs(coefficient) * bound(var) for var, coefficient in terms)


def checked(
    terms: LinearTerms, refuse: Callable[[int], ModelRangeError], extra: int = 0, bound: Bound = upper
) -> LinearTerms:
    """``terms`` if their sum (plus a constant of magnitude ``extra``) fits the model; else ``refuse(reach)`` is raised."""
    total = reach(terms, bound) + abs(extra)
    if total > REACH_LIMIT:
        raise refuse(total)
    return terms


def _reduced(terms: LinearTerms, room: int) -> tuple[LinearTerms, int] | None:
    """Amounts and room divided by the amounts' gcd: the sum is a multiple of it, so room rounds down losing no solution.
    ``None`` when every amount is zero (the sum is always 0)."""
    divisor = math.gcd(*(amount for _, amount in terms))
    if divisor == 0:
        return None
    return [(var, amount // divisor) for var, amount in terms], room // divisor


def _clamped(terms: LinearTerms, room: int) -> LinearTerms:
    """An amount above ``room`` only says "none of these", and so does ``room + 1``."""
    return [(var, min(amount, room + 1)) for var, amount in terms] if room >= 0 else terms


def at_most(
    terms: LinearTerms, room: int, bound: Bound = upper, *, total: int | None = None
) -> tuple[LinearTerms, int] | None:
    """``sum(amount x var) <= room`` (amounts >= 0) with the same solutions in small numbers; ``None`` if it never binds.
    ``total``: ``reach(terms)`` when the caller has it. The restated amounts are never larger than the given ones."""
    if room >= 0 and (reach(terms, bound) if total is None else total) <= room:
        return None
    reduced = _reduced(terms, room)
    if reduced is None:
        return None if room >= 0 else ([], room)
    terms, room = reduced
    return _clamped(terms, room), room


def at_most_unless_empty(terms: LinearTerms, room: int, bound: Bound = upper) -> tuple[LinearTerms, int] | None:
    """``sum(amount x var) + room x empty <= room``: none of these if ``empty``, else at most ``room``; same solutions.

    The big-M ``room`` shrinks to what the terms can reach when that is smaller. ``None`` when every amount is zero."""
    reduced = _reduced(terms, room)
    if reduced is None:
        return None
    terms, room = reduced
    terms = _clamped(terms, room)
    return terms, min(room, reach(terms, bound)) if room >= 0 else room


def too_large(source: str, node: str | None, field: str, what: str) -> Callable[[int], ModelRangeError]:
    """The refusal for ``checked``: names the file, and the node and resource or count at fault when there is one."""

    def refuse(total: int) -> ModelRangeError:
        return ModelRangeError(
            f"{what} too large for the planner's 64-bit integer model (a sum reaches {total:.3g}, "
            f"the solver holds at most {REACH_LIMIT:.3g})",
            source=source,
            obj=f"Node {node}" if node else "",
            field=field,
        )

    return refuse

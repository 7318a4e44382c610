"""The limits on one plan's moves, read from the settings here alone.

``caps.max_moves`` (in total), ``caps.max_moves_per_node`` (out of any one source node), ``caps.max_moves_per_namespace``
and ``aims.min_gain_per_move`` (GPUs freed per move, net of those free before). Every stage that keeps a plan within
them asks one ``MoveLimits`` (``Problem.limits``): the CP-SAT model states them as constraints, the greedy search and
the LNS check them move by move, a neighbourhood gets what the fixed part leaves, the re-cuts spend what the moves
leave, and a pending pod left waiting is told the cap in the operator's words.

Not the run's budgets (``budgets.py``: what one run may carry out of a plan), nor the hourly and daily caps
(``history.py``), which reach a plan as a lower ``max_moves`` (``MoveLimits.lowered``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from compactor.settings.bundles import PlannerSettings

# the settings under which nothing limits a plan's moves (the baselines' planner sees every node and pod)
NO_MOVE_LIMITS: dict[str, object] = {
    "max_moves": None,
    "max_moves_per_node": None,
    "max_moves_per_namespace": None,
    "min_gain_per_move": 0.0,
}


@dataclass(frozen=True)
class MoveLimits:
    total: int | None
    per_node: int | None
    per_namespace: int | None
    gain_per_move: int  # hundredths of a GPU per move, so that CP-SAT states it in integers

    @classmethod
    def of(cls, settings: PlannerSettings) -> MoveLimits:
        caps = settings.caps
        gain = round(settings.aims.min_gain_per_move * 100)
        return cls(caps.max_moves, caps.max_moves_per_node, caps.max_moves_per_namespace, gain)

    @property
    def any(self) -> bool:
        return self.total is not None or self.per_node is not None or self.per_namespace is not None or self.asks_gain

    @property
    def asks_gain(self) -> bool:
        return self.gain_per_move > 0

    @property
    def ties_nodes(self) -> bool:
        """Does a limit tie nodes of different pools together (so the problem does not split into components)?"""
        return self.total is not None or self.per_namespace is not None or self.asks_gain

    @property
    def none_allowed(self) -> bool:
        return self.total == 0

    def within(self, total: int, per_node: Iterable[int], per_namespace: Iterable[int], gained_gpus: int) -> bool:
        """``total`` moves, so many out of each node and each namespace, freeing ``gained_gpus`` GPUs more than were
        free before: within every limit?"""
        if self.total is not None and total > self.total:
            return False
        if self.per_node is not None and any(k > self.per_node for k in per_node):
            return False
        if self.per_namespace is not None and any(k > self.per_namespace for k in per_namespace):
            return False
        return not self.asks_gain or 100 * gained_gpus >= self.gain_per_move * total

    def room(self, moves: int) -> float | None:
        """What ``max_moves`` leaves beside ``moves`` moves (None: no cap), for steps costed in moves (re-cuts)."""
        return None if self.total is None else self.total - moves

    def lowered(self, moves_left: int | None) -> bool:
        """Would ``moves_left`` (the hourly/daily caps' remainder) lower ``max_moves``?"""
        return moves_left is not None and (self.total is None or moves_left < self.total)

    @property
    def cap_words(self) -> str:
        return f"moves are capped at {self.total} (--max-moves / caps.max_moves)"

    def left_after(self, total: int, node: int, namespace: int) -> dict[str, object] | None:
        """The settings a neighbourhood plans under when the fixed part of a plan makes ``total`` moves, at most
        ``node`` out of one of its source nodes and ``namespace`` in one of its namespaces (None: nothing is left).
        ``min_gain_per_move`` is dropped: it is checked on the whole plan, which counts freed GPUs everywhere."""
        update: dict[str, object] = {"min_gain_per_move": 0.0}
        for name, cap, spent in (
            ("max_moves", self.total, total),
            ("max_moves_per_node", self.per_node, node),
            ("max_moves_per_namespace", self.per_namespace, namespace),
        ):
            if cap is not None:
                if cap < spent:
                    return None
                update[name] = cap - spent
        return update

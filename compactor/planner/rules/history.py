"""Memory across runs (issue 15, items 1, 3 and 4): what earlier runs moved, and what that forbids now. Pure.

The shell (``compactor/actions/services/memory.py``) keeps a ``History`` in the state namespace and hands the planner the
``Restraints`` it implies at a given time:

* a workload (a pod's controller) moved within ``disruption.workload_cooldown_minutes`` is not moved again;
* a node a move left or reached within ``disruption.node_cooldown_minutes`` is neither drained nor filled;
* ``caps.max_moves_per_hour`` / ``max_moves_per_day`` cap the moves a plan may make now;
* the circuit breaker: ``breaker_failures`` failed moves among the last ``breaker_of_last`` pause every run for
  ``breaker_pause_minutes``.

Imports: ``compactor.model`` and ``compactor.settings`` only.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from compactor.model.types import OwnerRef
from compactor.settings.caps import CapsSettings
from compactor.settings.disruption import DisruptionSettings

MOVED = "moved"  # evicted, and its replacement came up
# attempted and not made: the eviction was sent and its replacement never came up where planned (the run rolled back),
# or the API refused the eviction for good (403). A move refused before its eviction, by its PDB, its re-check or a stale
# plan, was not attempted: it disrupted nothing and is not a failure.
FAILED = "failed"
HOUR, DAY = timedelta(hours=1), timedelta(days=1)


@dataclass(frozen=True)
class MoveRecord:
    at: datetime
    pod: str  # namespace/name
    workload: str  # namespace/Kind/name of its controller
    from_node: str
    to_node: str
    outcome: str  # MOVED | FAILED


@dataclass(frozen=True)
class History:
    moves: tuple[MoveRecord, ...] = ()  # oldest first
    paused_until: datetime | None = None
    pause_reason: str = ""

    def to_json(self) -> str:
        return (
            json.dumps(
                {
                    "moves": [
                        {
                            "at": m.at.isoformat(),
                            "pod": m.pod,
                            "workload": m.workload,
                            "from": m.from_node,
                            "to": m.to_node,
                            "outcome": m.outcome,
                        }
                        for m in self.moves
                    ],
                    "pausedUntil": self.paused_until.isoformat() if self.paused_until else None,
                    "pauseReason": self.pause_reason,
                },
                indent=1,
            )
            + "\n"
        )

    @classmethod
    def from_json(cls, text: str) -> History:
        """Raises ValueError (or KeyError/TypeError) on anything but what ``to_json`` writes."""
        raw: Any = json.loads(text)
        moves = tuple(
            MoveRecord(
                datetime.fromisoformat(m["at"]),
                str(m["pod"]),
                str(m["workload"]),
                str(m["from"]),
                str(m["to"]),
                _outcome(m["outcome"]),
            )
            for m in raw["moves"]
        )
        until = raw.get("pausedUntil")
        return cls(moves, datetime.fromisoformat(until) if until else None, str(raw.get("pauseReason") or ""))


def _outcome(value: object) -> str:
    if value not in (MOVED, FAILED):
        raise ValueError(f"outcome {value!r}")
    return str(value)


def workload_key(namespace: str, owners: Sequence[OwnerRef]) -> str:
    controller = next((o for o in owners if o.controller), None)
    return f"{namespace}/{controller.kind}/{controller.name}" if controller else ""


@dataclass(frozen=True)
class Restraints:
    """What history forbids at one moment, as plain data for the planner and the executor."""

    workloads: dict[str, str] = field(default_factory=dict)  # workload -> "moved 12 min ago; cooldown 30 min"
    nodes: dict[str, str] = field(default_factory=dict)  # node -> "drained 3 min ago; cooldown 10 min"
    # under the hourly/daily move caps (caps.max_moves_per_hour/_per_day); None: no cap
    moves_left: int | None = None
    budget: str = ""  # which of those caps sets moves_left, in words (a run budget, not the planner's time limit)
    paused: str = ""  # the circuit breaker's pause, in words; "" when runs may act
    paused_until: datetime | None = None
    # (workload, from, to) of a move that would take a workload back where a move within disruption.oscillation_hours
    # took it from
    returns: frozenset[tuple[str, str, str]] = frozenset()

    @property
    def any(self) -> bool:
        return bool(self.workloads or self.nodes or self.moves_left is not None or self.paused)


def _minutes(delta: timedelta) -> str:
    return f"{delta.total_seconds() / 60:.0f} min"


def restraints_at(history: History, cfg: DisruptionSettings, now: datetime, *, caps: CapsSettings) -> Restraints:
    moved = [m for m in history.moves if m.outcome == MOVED]
    workloads: dict[str, str] = {}
    nodes: dict[str, str] = {}
    for m in moved:  # oldest first: the latest move of each wins
        ago = now - m.at
        if m.workload and ago < timedelta(minutes=cfg.workload_cooldown_minutes):
            workloads[m.workload] = (
                f"its workload {m.workload} moved {_minutes(ago)} ago; cooldown {cfg.workload_cooldown_minutes:g} min"
            )
        if ago < timedelta(minutes=cfg.node_cooldown_minutes):
            nodes[m.from_node] = f"drained {_minutes(ago)} ago; cooldown {cfg.node_cooldown_minutes:g} min"
            nodes[m.to_node] = f"filled {_minutes(ago)} ago; cooldown {cfg.node_cooldown_minutes:g} min"
    left, budget = _moves_left(moved, caps, now)
    paused = ""
    if history.paused_until is not None and now < history.paused_until:
        paused = f"circuit breaker open until {history.paused_until.isoformat()}: {history.pause_reason}"
    back = timedelta(hours=cfg.oscillation_hours)
    returns = frozenset((m.workload, m.to_node, m.from_node) for m in moved if now - m.at < back)
    return Restraints(workloads, nodes, left, budget, paused, history.paused_until if paused else None, returns)


def _moves_left(moved: Sequence[MoveRecord], cfg: CapsSettings, now: datetime) -> tuple[int | None, str]:
    limits = [
        (cfg.max_moves_per_hour, HOUR, "caps.max_moves_per_hour"),
        (cfg.max_moves_per_day, DAY, "caps.max_moves_per_day"),
    ]
    found: list[tuple[int, str]] = []
    for limit, span, key in limits:
        if limit is not None:
            done = sum(now - m.at < span for m in moved)
            found.append(
                (max(0, limit - done), f"{key} {limit} ({done} moved in the last {'hour' if span == HOUR else 'day'})")
            )
    if not found:
        return None, ""
    return min(found)


def remember(
    history: History,
    moves: Iterable[tuple[str, str, str, str]],
    done: Collection[str],
    failed: Collection[str],
    now: datetime,
    cfg: DisruptionSettings,
) -> History:
    """``history`` with a run's moves added ((pod, workload, from, to) each): ``done`` ones as moved, ``failed`` ones
    (attempted and not made) as failed; the others are left out: refused at their re-check or by their PDB, stale, or
    not reached, they were never attempted (docs/executor.md, "Disruption controls"). Kept to ``history_limit``
    records and to what the longest rule still needs; then the circuit breaker is judged."""
    added = [
        MoveRecord(now, pod, workload, source, target, MOVED if pod in done else FAILED)
        for pod, workload, source, target in moves
        if pod in done or pod in failed
    ]
    keep = max(timedelta(days=1), timedelta(minutes=max(cfg.workload_cooldown_minutes, cfg.node_cooldown_minutes)))
    records = tuple(m for m in (*history.moves, *added) if now - m.at < keep)[-cfg.history_limit :]
    updated = replace(history, moves=records)
    return _judged(updated, cfg, now) if added else updated


def _judged(history: History, cfg: DisruptionSettings, now: datetime) -> History:
    """Open the breaker when ``breaker_failures`` of the last ``breaker_of_last`` moves failed (and it is not open)."""
    if cfg.breaker_failures <= 0 or (history.paused_until is not None and now < history.paused_until):
        return history
    last = history.moves[-cfg.breaker_of_last :]
    failures = sum(m.outcome == FAILED for m in last)
    if failures < cfg.breaker_failures:
        return history
    until = now + timedelta(minutes=cfg.breaker_pause_minutes)
    return replace(
        history,
        paused_until=until,
        pause_reason=f"{failures} of the last {len(last)} moves failed "
        f"(disruption.breaker_failures {cfg.breaker_failures})",
    )


def undoes(moves: Iterable[tuple[str, str, str]], restraints: Restraints) -> list[str]:
    """Moves ((workload, from, to) each) that take a workload back where a recent move took it from (``returns``)."""
    return [
        f"{workload} {source} -> {target}"
        for workload, source, target in moves
        if (workload, source, target) in restraints.returns
    ]


def forgive(history: History) -> History:
    """``history`` with its circuit breaker closed: no pause, no failed move left to count; the moves made stay, with
    their cooldowns, budgets and oscillation guard."""
    return replace(
        history, moves=tuple(m for m in history.moves if m.outcome == MOVED), paused_until=None, pause_reason=""
    )

"""The history the restraints of ``compactor/planner/rules/history.py`` read: kept in the ConfigMap gpu-compactor-history of
the state namespace, written after every real run (never by a dry run). Reading fails closed: when the API server does
not answer the read and a control needs the history (the circuit breaker, cooldowns, move budgets, the oscillation
guard), the run acts on nothing and says so, as an open breaker holds it: one 503 used to read as "no history" and let
an eviction through an open breaker. A read refused for good (401/403) or a history that does not parse fails every run
that needs it (``HistoryBroken``) until it is fixed or reset (``reset_breaker``); a failed write is a warning."""

from __future__ import annotations

import logging
from datetime import datetime

from compactor.actions.cluster import events
from compactor.actions.port.client import ClusterClient
from compactor.actions.services.report import RunReport
from compactor.errors import ClusterError, CompactorError
from compactor.planner.plan import CompactionPlan
from compactor.planner.rules.history import MOVED, History, Restraints, forgive, remember, restraints_at, undoes
from compactor.settings.origins import Settings

log = logging.getLogger("compactor.memory")

HISTORY_CONFIGMAP = "gpu-compactor-history"
HISTORY_KEY = "history.json"


RESET_HINT = "compactor breaker reset starts a new history (it keeps the moves it can read, so their cooldowns hold)"


class HistoryUnread(Exception):
    """The history could not be read (the API server did not answer it): nothing may act that needs it."""


class HistoryBroken(CompactorError):
    """The history can never be read as it is: the API server refuses the read (401/403: an RBAC edit, a token gone), or
    its content does not parse. Every run fails, loudly (its status failed, its alert), until it is fixed: holding runs
    quietly, or starting a new history (which would reset the circuit breaker and the cooldowns), hid it."""


def load_history(client: ClusterClient) -> History:
    """The history (empty when there is none yet); ``HistoryUnread`` when the read failed for now, ``HistoryBroken``
    when it fails for good or does not parse."""
    try:
        data = client.read_state(HISTORY_CONFIGMAP)
    except ClusterError as exc:
        if exc.status in (401, 403):
            raise HistoryBroken(f"configmap {HISTORY_CONFIGMAP} may not be read ({exc}): check the RBAC") from None
        raise HistoryUnread(f"could not read configmap {HISTORY_CONFIGMAP}: {exc}") from exc
    except Exception as exc:
        raise HistoryUnread(f"could not read configmap {HISTORY_CONFIGMAP}: {exc}") from exc
    if not data or HISTORY_KEY not in data:
        return History()
    try:
        return History.from_json(data[HISTORY_KEY])
    except (ValueError, KeyError, TypeError) as exc:
        raise HistoryBroken(
            f"configmap {HISTORY_CONFIGMAP}: {HISTORY_KEY} does not parse ({exc}); {RESET_HINT}"
        ) from None


def restraints_now(client: ClusterClient, settings: Settings, now: datetime) -> Restraints:
    """What the history forbids now; when it cannot be read and a control needs it, a pause that says so (fail closed)."""
    try:
        return restraints_at(load_history(client), settings.disruption, now, caps=settings.caps)
    except HistoryUnread as exc:
        if not needs_history(settings):
            log.warning(f"{exc} (no control needs it)")
            return Restraints()
        log.error(f"{exc}: this run acts on nothing (the breaker, cooldowns and budgets fail closed)")
        return Restraints(paused=f"{exc}; the circuit breaker, cooldowns and move budgets cannot be checked")


def needs_history(settings: Settings) -> bool:
    """Does a control read the history (the circuit breaker, a cooldown, an hourly or daily move budget, the oscillation
    guard)?"""
    cfg, caps = settings.disruption, settings.caps
    return bool(
        cfg.breaker_failures > 0
        or cfg.workload_cooldown_minutes > 0
        or cfg.node_cooldown_minutes > 0
        or caps.max_moves_per_hour is not None
        or caps.max_moves_per_day is not None
        or cfg.oscillation_hours > 0
    )


def reversals(plan: CompactionPlan, restraints: Restraints | None) -> list[str]:
    """The plan's moves that take a workload back where a move of the last ``disruption.oscillation_hours`` took it from."""
    if restraints is None:
        return []
    return undoes(((_workload(m.pod, m.owner), m.from_node, m.to_node) for m in plan.moves), restraints)


def _workload(pod: str, owner: str) -> str:
    return f"{pod.split('/', 1)[0]}/{owner}" if owner else ""


def remember_run(
    client: ClusterClient, settings: Settings, plan: CompactionPlan, report: RunReport, now: datetime
) -> None:
    """Add a real run's moves to the history; when that opens the circuit breaker, say so (log and Event)."""
    if report.dry_run or not plan.moves:
        return
    try:
        before = load_history(client)
    except (HistoryUnread, HistoryBroken) as exc:  # writing a history of this run alone would erase the others'
        log.warning(f"{exc}: this run's moves are not remembered")
        return
    moves = [(m.pod, _workload(m.pod, m.owner), m.from_node, m.to_node) for m in plan.moves]
    after = remember(before, moves, set(report.done_pods), set(report.failed_pods), now, settings.disruption)
    try:
        client.write_state(HISTORY_CONFIGMAP, {HISTORY_KEY: after.to_json()})
    except Exception as exc:
        log.warning(f"could not write configmap {HISTORY_CONFIGMAP} (the run itself is unaffected): {exc}")
        return
    if after.paused_until is not None and after.paused_until != before.paused_until:
        until = after.paused_until.isoformat()
        log.warning(f"circuit breaker open: compaction paused until {until}: {after.pause_reason}")
        event = events.breaker_opened(settings.executor.state_namespace, HISTORY_CONFIGMAP, until, after.pause_reason)
        try:
            client.create_event(event.involved, reason=event.reason, message=event.message, type_=event.type)
        except Exception as exc:
            log.warning(f"could not send the {event.reason} Event: {exc}")


def reset_breaker(client: ClusterClient, settings: Settings, now: datetime) -> str:
    """The circuit breaker closed by hand (``compactor breaker reset``): the pause lifted and the failed moves forgotten,
    the moves made kept (their cooldowns hold); a history that does not parse is started anew. An Event says who may
    look. What was done, in words."""
    try:
        before, found = load_history(client), "reset"
    except HistoryBroken as exc:
        if "does not parse" not in str(exc):
            raise
        before, found = History(), "started anew (it did not parse)"
    except HistoryUnread as exc:
        raise CompactorError(f"{exc}; nothing was reset") from None
    after = forgive(before)
    client.write_state(HISTORY_CONFIGMAP, {HISTORY_KEY: after.to_json()})
    forgotten = sum(m.outcome != MOVED for m in before.moves)
    said = (
        f"circuit breaker {found}: pause lifted{f' (it held until {before.paused_until.isoformat()})' if before.paused_until else ''}, "
        f"{forgotten} failed move(s) forgotten, {len(after.moves)} move(s) kept for their cooldowns"
    )
    event = events.breaker_reset(settings.executor.state_namespace, HISTORY_CONFIGMAP, said)
    try:
        client.create_event(event.involved, reason=event.reason, message=event.message, type_=event.type)
    except ClusterError as exc:
        log.warning(f"could not send the {event.reason} Event: {exc}")
    return said

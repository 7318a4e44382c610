"""What a run may do now, decided in one place for ``run --once``, ``apply`` and the controller's cycle: the configured
mode, then the disruption windows, then the history's circuit breaker (``admit``). Each only ever makes a run safer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from functools import cache

from compactor.actions.services.memory import restraints_now
from compactor.app.invocation import Invocation
from compactor.app.windows import window_state
from compactor.app.wiring import cluster_client
from compactor.planner.rules.history import Restraints
from compactor.settings.disruption_windows import WindowSettings


class Verdict(StrEnum):
    """What a run does: carry its plan out, simulate it, only measure, or change nothing for a stated reason."""

    ACT = "act"
    DRY_RUN = "dry run"
    REPORT = "report only"
    HELD = "held"


class HeldBy(StrEnum):
    """Which rule keeps a run from acting (the first that does, in the order ``admit`` asks them)."""

    NOTHING = ""
    MODE = "mode"
    WINDOW = "window"
    BREAKER = "breaker"


def _nothing_read() -> Restraints | None:
    return None


@dataclass(frozen=True)
class Admission:
    """``admit``'s answer: the verdict, why a run that would act does not (``why``, ``held_by``), and how to read what
    the history forbids now (``restraints``: cooldowns and budgets the plan honours; read once, when first asked)."""

    verdict: Verdict
    why: str = ""
    held_by: HeldBy = HeldBy.NOTHING
    history: Callable[[], Restraints | None] = _nothing_read

    @property
    def restraints(self) -> Restraints | None:
        return self.history()

    @property
    def acts(self) -> bool:
        return self.verdict is Verdict.ACT

    @property
    def plans(self) -> bool:
        """Whether the run plans and carries its plan out (for real or as a dry run)."""
        return self.verdict in (Verdict.ACT, Verdict.DRY_RUN)


def admit(
    mode: str,
    windows: list[WindowSettings],
    now: datetime,
    *,
    dry_run: bool,
    history: Callable[[], Restraints | None],
) -> Admission:
    """The one gate: an operator's dry run always runs (it changes nothing, at any time); else ``mode: report`` only
    measures and ``mode: plan`` dry-runs; else a closed disruption window, then an open circuit breaker, hold the run.
    ``history`` reads the restraints: at most once, and only when the breaker is asked or a plan needs them (a dry run's
    plan honours the cooldowns too), so a refusal by mode or window reads nothing of the cluster."""
    history = cache(history)
    if dry_run:
        return Admission(Verdict.DRY_RUN, history=history)
    if mode == "report":
        return Admission(Verdict.REPORT, "mode: report", HeldBy.MODE)
    if mode == "plan":
        return Admission(Verdict.DRY_RUN, "mode: plan", HeldBy.MODE, history)
    window = window_state(windows, now)
    if not window.open:
        return Admission(Verdict.HELD, window.why, HeldBy.WINDOW)
    restrained = history()
    if restrained is not None and restrained.paused:
        return Admission(Verdict.HELD, restrained.paused, HeldBy.BREAKER, history)
    return Admission(Verdict.ACT, history=history)


def may_change(mode: str, *, dry_run: bool = False) -> bool:
    """Whether a command in ``mode`` may change the cluster at all (windows and the breaker aside): ``apply`` only, and
    never under an operator's ``--dry-run`` (what ``admit`` answers ``ACT`` to at best)."""
    return mode == "apply" and not dry_run


def plans(mode: str) -> bool:
    """Whether cycles in ``mode`` plan (for real or as a dry run): ``report`` only measures, so a pending pod starts no
    cycle for it."""
    return mode != "report"


def admit_invocation(inv: Invocation, now: datetime) -> Admission:
    """``admit`` for a command: its mode and windows, the history read from the live cluster (none for a snapshot)."""
    settings = inv.settings
    return admit(
        settings.mode, settings.disruption.windows, now, dry_run=inv.dry_run, history=lambda: restraints(inv, now)
    )


def restraints(inv: Invocation, now: datetime) -> Restraints | None:
    """What earlier runs' history forbids now (cooldowns, budgets, the circuit breaker), read from a live cluster; None
    for a snapshot file (it holds no history)."""
    if not inv.live:
        return None
    return restraints_now(cluster_client(inv, dry_run=True), inv.settings, now)

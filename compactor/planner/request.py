"""What a plan is asked for: one frozen value, built once by the caller, read by every stage of ``compose``."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypedDict, Unpack

from compactor.model.migparted import Layouts
from compactor.model.shapes import ReferenceShape, reference_shapes
from compactor.model.types import Snapshot
from compactor.planner.cpsat.deadline import Deadline, deadline_for
from compactor.planner.rules.history import Restraints
from compactor.planner.rules.movability import Steerability
from compactor.planner.rules.pins import without_own_pins
from compactor.settings.bundles import PlannerSettings
from compactor.settings.caps import CapsSettings


class Asked(TypedDict, total=False):
    """What a request may ask besides its snapshot, settings, source, time and shapes (``PlanRequest`` says what each
    is)."""

    plan_id: str | None
    mig_parted: Layouts | None
    steering: Steerability | None
    restraints: Restraints | None
    budgets: CapsSettings | None
    max_evictions: int | None
    load_seconds: float | None
    stage: Callable[[str, str], None] | None


@dataclass(frozen=True)
class PlanRequest:
    """A compaction of ``snapshot`` under ``settings``.

    ``snapshot``: as planned (``of`` lifts the compactor's own pins: pods a run moved may move again). ``shapes``: the
    reference shapes (those the re-cut step rebalances idle MIG nodes for). ``clock``: the time limit of the whole call,
    started when the request was made. ``source``, ``now``, ``plan_id``: the plan's metadata. ``mig_parted``: the
    layouts whole-free MIG-capable nodes may be re-cut into (with ``settings.mig_repartition``). ``steering``: what the
    run's steering can keep where the plan puts a replacement (``movability.Steerability``; None: nothing asked of it).
    ``restraints``: what earlier runs forbid now (``history.restraints_at``). ``budgets`` and ``max_evictions``: the run
    budgets the plan must fit (``disruption.*``, ``caps.max_evictions_per_cycle``). ``load_seconds``: how long the
    caller took to load the snapshot (``solver.loadSeconds``). ``stage(name, best)``: told as each stage starts, with the
    best plan so far in words, so a caller can show progress on long solves."""

    snapshot: Snapshot
    settings: PlannerSettings
    shapes: tuple[ReferenceShape, ...]
    clock: Deadline
    source: str
    now: datetime
    plan_id: str | None = None
    mig_parted: Layouts | None = None
    steering: Steerability | None = None
    restraints: Restraints | None = None
    budgets: CapsSettings | None = None
    max_evictions: int | None = None
    load_seconds: float | None = None
    stage: Callable[[str, str], None] | None = field(default=None, compare=False)
    started: float = field(default=0.0, compare=False)  # time.monotonic() when the request was made: planSeconds' start

    @classmethod
    def of(
        cls,
        snapshot: Snapshot,
        settings: PlannerSettings,
        *,
        source: str,
        now: datetime,
        shapes: Sequence[ReferenceShape] | None = None,
        **asked: Unpack[Asked],
    ) -> PlanRequest:
        """The request, its clock started now (solver.deterministic: CP-SAT's deterministic time, which only the solves
        spend), the snapshot without the compactor's own pins, the shapes of that snapshot unless given."""
        started, clock = time.monotonic(), deadline_for(settings)
        snapshot = without_own_pins(snapshot)
        chosen = tuple(shapes) if shapes is not None else reference_shapes(snapshot)
        return cls(snapshot, settings, chosen, clock, source, now, started=started, **asked)

    def say(self, name: str, best: str) -> None:
        if self.stage is not None:
            self.stage(name, best)

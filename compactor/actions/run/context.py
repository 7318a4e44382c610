"""One run of a plan as the steps see it: the plan, its persisted state, the services they share.

``Run`` is what every step module (``actions/steps/``) and every steerer (``actions/steering/``)
takes, in three parts: the persisted state (``RunState``, changed and saved to the state ConfigMap in a
``write_ahead`` block *before* each change the steps make to the cluster: the write-ahead rule), the
services it was given (``RunServices``: the cluster client, settings, clock, steering mechanism,
progress), and what only this process saw (``RunLog``: notes, the time it started, holds' duration).
Its methods are the services every step shares: Events, progress lines, the retry helper for reads.
A run that must stop and roll back raises ``Abort`` with its ``AbortReason``.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cached_property
from typing import TypeVar

from compactor.actions.cluster.events import Event
from compactor.actions.cluster.retry import Backoff, retrying
from compactor.actions.cluster.run_cut import kept_fenced
from compactor.actions.cluster.run_state import STATE_CONFIGMAP, RunState, encode_plan
from compactor.actions.port.client import ClusterClient, Obj
from compactor.actions.run.log import RunLog
from compactor.actions.run.steerer import Steerer
from compactor.clock import Clock
from compactor.errors import ClusterError
from compactor.planner.plan import CompactionPlan, Move
from compactor.settings.bundles import PlannerSettings, RunSettings

log = logging.getLogger("compactor.executor")
T = TypeVar("T")


class AbortReason(enum.StrEnum):
    """Why a run stopped and rolled back, in a word a metric or a test can switch on (``Abort.reason``, the report's
    ``abortReason``, ``gpu_compactor_rollbacks_total{reason}``); the message beside it says the rest."""

    PLAN_STALE = "plan_stale"  # the cluster no longer matches the plan: a node, a pod, an owner or a target's room
    NODE_GONE = "node_gone"  # a node of the plan disappeared while the run fenced or re-cut it
    # no longer raised (issue 42): a PodDisruptionBudget at 0 for replacement_timeout_seconds refuses that move, the rest
    # goes on; kept so that dashboards and recorded reports still name it
    PDB_BLOCKED = "pdb_blocked"
    EVICTION_REFUSED = "eviction_refused"  # the Eviction API refused for good, or kept refusing through every retry
    REPLACEMENT_TIMEOUT = "replacement_timeout"  # a replacement (or a surge's every replica) was not Ready in time
    STEERING_FAILED = "steering_failed"  # a replacement not bound where planned, or the steering itself gone
    WORKLOAD_CHANGED = "workload_changed"  # someone else scaled the Deployment of a make-before-break move
    CLUSTER_ERROR = "cluster_error"  # the API server failed a call the run could not go on without
    UNEXPECTED = "unexpected"  # a bug: an error the executor does not expect
    INTERRUPTED = "interrupted"  # a run interrupted by a restart that recovery rolled back instead of resuming


class Abort(Exception):
    """Stop the run and roll back: ``reason`` says why in a word, the message in words (it becomes an Event and a log
    line)."""

    def __init__(self, reason: AbortReason, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class NoRoom(Abort):
    """A move's target lost its room since the plan was made (an arrival took it): the evict step looks for another target
    under the plan's rules (``checks/retarget.py``) before it gives the move up; elsewhere it stops the run as any stale
    plan does."""

    def __init__(self, pod: str, target: str, short: str) -> None:
        super().__init__(
            AbortReason.PLAN_STALE, f"plan is stale: {target} has no room for {pod} now (short of {short})"
        )
        self.pod, self.target = pod, target


class StopHere(Exception):
    """Stop starting moves at a safe point: what is done stays, the rest waits for the next run (status partial).

    ``limit``: the setting reached, as "name (value)"; ``detail``: what reached it. ``str()`` is the whole sentence."""

    def __init__(self, limit: str, detail: str = "") -> None:
        super().__init__(f"{limit} reached: {detail}" if detail else f"{limit} reached")
        self.limit, self.detail = limit, detail


@dataclass
class Progress:
    plan_id: str
    done: int
    total: int
    current: str = ""
    waiting: str = ""


@dataclass(frozen=True)
class RunServices:
    """What a run is given: the cluster client (the port), its settings, the clock, the steering mechanism, and the
    hooks the executor's caller passes in."""

    client: ClusterClient
    settings: RunSettings
    clock: Clock
    steerer: Steerer[Run]
    dry_run: bool = False
    progress: Callable[[Progress], None] = lambda _p: None
    rules: PlannerSettings = field(default_factory=PlannerSettings)  # the movability rules asked again at each eviction
    may_go_on: Callable[[], str] = lambda: ""  # asked before each batch of evictions: a reason stops the run there


@dataclass
class Run:
    """The plan; its persisted state (``state``, saved in ``write_ahead`` blocks); the services it was given
    (``services``; the four every step uses also by name: ``client``, ``settings``, ``clock``, ``steerer``); what this
    process saw of it (``log``)."""

    plan: CompactionPlan
    state: RunState
    services: RunServices
    log: RunLog = field(default_factory=RunLog)

    @property
    def client(self) -> ClusterClient:
        return self.services.client

    @property
    def settings(self) -> RunSettings:
        return self.services.settings

    @property
    def clock(self) -> Clock:
        return self.services.clock

    @property
    def steerer(self) -> Steerer[Run]:
        return self.services.steerer

    @property
    def dry_run(self) -> bool:
        return self.services.dry_run

    def node_and_pods(self, name: str) -> tuple[Obj | None, list[Obj]]:
        """The node and the pods bound to it: as read when the run began (once, for validating and fencing right after),
        else read now."""
        if name in self.log.first_reads:
            return self.log.first_reads.pop(name)
        node = self.client.get_node(name)
        return node, (self.client.list_pods(node_name=name) if node is not None else [])

    @property
    def plan_id(self) -> str:
        return self.plan.metadata.id

    @cached_property
    def freed(self) -> frozenset[str]:
        return frozenset(self.plan.freed_nodes)

    @cached_property
    def plan_record(self) -> str:
        """The plan as the state stores it, encoded once per run (every save writes it)."""
        return encode_plan(self.plan)

    @property
    def unfinished_sources(self) -> set[str]:
        """Nodes with a planned move not done (the run stopped at a budget before them, or the move was refused at its
        eviction): not drained, not to wait for."""
        return {m.from_node for m in self.plan.moves if m.pod not in self.state.done or m.pod in self.state.refused}

    def retargeted(self, move: Move, target: str, why: str) -> Move:
        """``move`` sent to ``target`` instead (its planned target lost its room): the plan this run carries out, and
        records in its state from the next save on, says so."""
        moved = move.model_copy(update={"to_node": target, "reason": f"{move.reason}; re-targeted: {why}".lstrip("; ")})
        moves = [moved if m.pod == move.pod else m for m in self.plan.moves]
        self.plan = self.plan.model_copy(update={"moves": moves})
        self.__dict__.pop("plan_record", None)  # encoded afresh at the next save
        return moved

    @cached_property
    def fences(self) -> list[str]:
        """Nodes drained for a pending pod (and not freed), and nodes to re-cut: fenced until the pending pod binds there."""
        return kept_fenced(self.plan)

    # ----- services ---------------------------------------------------------------

    @contextmanager
    def write_ahead(self) -> Iterator[RunState]:
        """The state, for the block to change, saved as the block ends: the one way steps save it. What the block
        records reaches the state ConfigMap before the change it announces, made after the block (the write-ahead rule:
        after a crash, recovery resumes or rolls back from what the state says); what it forgets (a node released) was
        undone before it. A block that raises saves nothing.

            with run.write_ahead() as state:
                state.cordoned.append(name)
            fence(name)
        """
        yield self.state
        self.save()

    def save(self) -> None:
        """Write the state as it is; ``write_ahead`` is how steps change and save it."""
        self.state.updated_at = self.stamp()
        self.client.write_state(STATE_CONFIGMAP, self.state.to_data(self.plan_record))

    def event(self, event: Event) -> None:
        try:
            self.client.create_event(event.involved, reason=event.reason, message=event.message, type_=event.type)
        except ClusterError as exc:  # an event is a courtesy; never fail a run on it
            log.warning("event not recorded", extra={"reason": event.reason, "error": str(exc)})

    def read(self, call: Callable[[], T], what: str = "read") -> T:
        """A read while waiting: a transient failure (no reply, 429, 5xx) is retried with backoff, not a rollback."""
        return retrying(call, Backoff.of(self.settings.executor), self.clock, what=what)

    def report(self, current: str, waiting: str = "") -> None:
        if self.dry_run:
            current = intention(current)
        self.services.progress(Progress(self.plan_id, len(self.state.done), len(self.plan.moves), current, waiting))

    def said(self, real: str, dry: str) -> str:
        """A log message that says something happened: in a dry run, what would happen instead."""
        return dry if self.dry_run else real

    def stamp(self, offset: float = 0.0) -> str:
        return (self.clock.now() + timedelta(seconds=offset)).isoformat().replace("+00:00", "Z")

    def note(self, text: str) -> None:
        self.log.notes.append(text)


# A progress line of a dry run says what a real run would do: its first words, for each step that reports.
_INTENTIONS = (
    ("evicting ", "would evict "),
    ("moved ", "would move "),
    ("placing pending ", "would place pending "),
    ("re-cutting ", "would re-cut "),
    ("finishing", "would finish"),
)


def intention(current: str) -> str:
    """``evicting p from n`` -> ``would evict p from n``; ``done`` stays (the walk through the plan is done)."""
    if current == "done":
        return current
    for real, dry in _INTENTIONS:
        if current.startswith(real):
            return dry + current[len(real) :]
    return f"(dry run) {current}"

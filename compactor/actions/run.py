"""One run of a plan as the steps see it: the plan, its persisted state, the services they share.

``Run`` is what every step module (``actions/steps/``) and every steerer (``actions/steering/``)
takes. It holds the typed state (``RunState``, changed and saved to the state ConfigMap in a
``write_ahead`` block *before* each change the steps make to the cluster: the write-ahead rule), what
only this process knows (notes, the time it started, holds' duration), and the services: the cluster
client, settings, clock, Events, progress, and the retry helper for reads. A run that must stop and
roll back raises ``Abort`` with its ``AbortReason``.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cached_property
from typing import Protocol, TypeVar

from compactor.actions.client import ClusterClient, Obj
from compactor.actions.clock import Clock
from compactor.actions.events import Event
from compactor.actions.retry import Backoff, retrying
from compactor.actions.scope import kept_fenced
from compactor.actions.state import STATE_CONFIGMAP, RunState, encode_plan
from compactor.errors import ClusterError
from compactor.planner.movability import Steerability
from compactor.planner.plan import CompactionPlan, Move, Placement
from compactor.settings import ExecutorSettings, PlannerSettings

log = logging.getLogger("compactor.executor")
T = TypeVar("T")


class AbortReason(enum.StrEnum):
    """Why a run stopped and rolled back, in a word a metric or a test can switch on (``Abort.reason``, the report's
    ``abortReason``, ``gpu_compactor_rollbacks_total{reason}``); the message beside it says the rest."""

    PLAN_STALE = "plan_stale"  # the cluster no longer matches the plan: a node, a pod, an owner or a target's room
    NODE_GONE = "node_gone"  # a node of the plan disappeared while the run fenced or re-cut it
    PDB_BLOCKED = "pdb_blocked"  # a PodDisruptionBudget allowed no disruption for replacement_timeout_seconds
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


class Mechanism(enum.StrEnum):
    """How a run steers replacements onto their planned nodes (``actions/steering/``)."""

    POLICY = "policy"
    HOLDS = "holds"
    OFF = "off"


class Steerer(Protocol):
    """One steering mechanism, as a run drives it (``actions/steering/``: policy, holds, off)."""

    mechanism: Mechanism
    why: str  # how it was chosen, for the plan, the run report and the log
    steerability: Steerability  # what it can keep where a plan puts a replacement (asked again before each eviction)
    exact: bool  # the replacement must land on its planned node (else the run stops and rolls back)
    parallel: bool  # moves of different owners may be in flight together (max_concurrent_evictions)
    release_on_stop: (
        bool  # let go at once when the process stops (holds keep other pods out); else recovery resumes them
    )

    def prepare(self, run: Run, move: Move, pod: Obj) -> None:
        """Before the eviction, reads only: the target's room checked (``Abort`` when the plan no longer holds), what steering
        will write recorded in ``run.state``, inside the eviction's ``Run.write_ahead`` (saved before ``engage``)."""

    def engage(self, run: Run, move: Move) -> None:
        """Steering written into the cluster for the move's replacement, just before the eviction."""

    def observe(self, run: Run, move: Move, fresh: list[Obj]) -> None:
        """Each look at the owner's new pods (``fresh``) while waiting: release what is no longer needed; ``Abort`` when
        steering failed."""

    def after_move(self, run: Run, move: Move, fresh: list[Obj]) -> None:
        """The replacement is Ready: whatever steering still holds for this move goes."""

    def before_placement(self, run: Run, placement: Placement, pod: Obj) -> None:
        """Steering for a pending pod about to be let onto the node drained for it."""

    def after_placement(self, run: Run) -> None:
        """The pending pod is bound (or its wait is over)."""

    def release(self, run: Run) -> None:
        """Stopping or rolling back: let go of everything this mechanism holds for the run."""

    def step_aside(self, run: Run) -> None:
        """The eviction was refused for now (a PodDisruptionBudget, throttling) and will be retried: let go, while the run
        waits, of what keeps other pods off other nodes (holds); ``step_in`` takes it up again before the retry."""

    def step_in(self, run: Run, move: Move, pod: Obj) -> None:
        """Before an eviction is retried: steering as ``prepare`` and ``engage`` made it, read afresh."""

    def preflight(self, run: Run, move: Move, *, fencing: Collection[str]) -> None:
        """Before the run changes anything (no state, no fence): ``StopHere`` when this mechanism could not start the
        plan's first move, ``move``, once the nodes in ``fencing`` are fenced: a run that cannot start changes nothing.
        A mechanism that needs the pod for it reads it; the others read nothing."""


@dataclass
class Run:
    plan: CompactionPlan
    state: RunState
    client: ClusterClient
    settings: ExecutorSettings
    clock: Clock
    steerer: Steerer
    dry_run: bool = False
    progress: Callable[[Progress], None] = lambda _p: None
    rules: PlannerSettings = field(default_factory=PlannerSettings)  # the movability rules asked again at each eviction
    may_go_on: Callable[[], str] = lambda: ""  # asked before each batch of evictions: a reason stops the run there
    # which limit (max_evictions_per_cycle, max_run_seconds, max_holds_per_move) left moves for a later run
    capped: str = ""
    dra_nodes: frozenset[str] = frozenset()  # nodes whose GPUs are in ResourceSlices, read as the run began
    cap_detail: str = ""  # what reached it, when the limit alone does not say (the move that would hold too many nodes)
    notes: list[str] = field(default_factory=list)  # what did not go as planned without stopping the run
    recuts: dict[str, str] = field(default_factory=dict)  # node -> success | failed | timeout
    # moved pod -> the DRA devices its replacement's claims got ("driver/pool/device"), read once it was Ready
    devices: dict[str, list[str]] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # planned pods found gone or elsewhere
    started: float = 0.0  # monotonic time this process began the run (max_run_seconds counts from here)
    held_since: float = 0.0
    held_seconds: float = 0.0  # node-seconds of holds so far
    holds: int = 0  # node holds made so far
    # node -> (node, its pods) read as the run began
    first_reads: dict[str, tuple[Obj, list[Obj]]] = field(default_factory=dict)

    def node_and_pods(self, name: str) -> tuple[Obj | None, list[Obj]]:
        """The node and the pods bound to it: as read when the run began (once, for validating and fencing right after),
        else read now."""
        if name in self.first_reads:
            return self.first_reads.pop(name)
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
        return retrying(call, Backoff.of(self.settings), self.clock, what=what)

    def report(self, current: str, waiting: str = "") -> None:
        if self.dry_run:
            current = intention(current)
        self.progress(Progress(self.plan_id, len(self.state.done), len(self.plan.moves), current, waiting))

    def said(self, real: str, dry: str) -> str:
        """A log message that says something happened: in a dry run, what would happen instead."""
        return dry if self.dry_run else real

    def stamp(self, offset: float = 0.0) -> str:
        return (self.clock.now() + timedelta(seconds=offset)).isoformat().replace("+00:00", "Z")

    def note(self, text: str) -> None:
        self.notes.append(text)


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

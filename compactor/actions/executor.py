"""Carry out a ``CompactionPlan`` safely: validate, cordon, evict under PDBs, verify, finish or roll back.

The same code runs for real and dry runs; only the ``ClusterClient`` differs. Every
change is marked on the node (``annotations.py``) and recorded in a state
ConfigMap *before* it is made, so ``recovery.py`` can resume or undo after a crash.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Any, TypeVar

from compactor.actions import annotations as ann
from compactor.actions import migmanager as mig
from compactor.actions.client import ClusterClient, EvictionOutcome, Obj, ObjectRef
from compactor.actions.clock import Clock, Interrupted
from compactor.actions.outcome import Outcome, compare, physical_gpus, whole_free_gpu_nodes
from compactor.actions.patching import patch_fresh
from compactor.actions.pods import controller_uid, gpu_pods_on, is_ready, is_terminating, pdbs_selecting, pod_key, requests_gpu
from compactor.actions.scope import within_cap
from compactor.actions.steering import plan_hold
from compactor.errors import ClusterError
from compactor.planner.plan import CompactionPlan, MigRepartition, Move, Placement
from compactor.settings import ExecutorSettings

log = logging.getLogger("compactor.executor")
# The plan as recovery needs it: moves, nodes, placements. The figures before/after grow with the cluster
# (per node) and would push the state ConfigMap past the API server's 1 MiB limit at a few hundred nodes.
_FIGURES_DROPPED: dict[str, Any] = {"before": {}, "after": {}, "explanations": {}}
TRANSIENT = frozenset({0, 429, 500, 502, 503, 504})  # no reply, throttled, or a server-side hiccup
T = TypeVar("T")
_PLAIN_PLAN_LIMIT = 32 * 1024
_GZIP_PREFIX = "gzip+base64:"
MULTIPLE_PDBS = "more than one PodDisruptionBudget"  # the Eviction API's 500 for such a pod (eviction.go)


class Abort(Exception):
    """Stop the run and roll back; the message says why (it becomes an Event and a log line)."""


@dataclass
class Progress:
    plan_id: str
    done: int
    total: int
    current: str = ""
    waiting: str = ""


@dataclass
class RunReport:
    plan_id: str
    status: str  # succeeded | partial (per-cycle cap reached) | failed | nothing-to-do
    moves_total: int
    moves_done: int = 0
    freed_nodes: list[str] = field(default_factory=list)
    skipped_moves: list[str] = field(default_factory=list)
    reason: str = ""
    dry_run: bool = False
    outcome: Outcome | None = None  # measured on the cluster once the run is over (None when it never started)
    recuts: dict[str, str] = field(default_factory=dict)  # MIG re-cuts attempted: node -> success | failed | timeout

    @property
    def shown_status(self) -> str:
        """The status as output says it: ``dry-run`` for a dry run that walked the plan (its ``succeeded`` or ``partial``
        judges a simulated world); a dry run that failed or had nothing to do says so as a real run would."""
        if self.dry_run and self.status in ("succeeded", "partial"):
            return "dry-run"
        return self.status

    def to_dict(self) -> dict[str, Any]:
        return {
            "planId": self.plan_id, "status": self.shown_status, "movesTotal": self.moves_total, "movesDone": self.moves_done,
            "freedNodes": self.freed_nodes, "skippedMoves": self.skipped_moves, "reason": self.reason, "dryRun": self.dry_run,
            "outcome": self.outcome.to_dict() if self.outcome else None, "migRecuts": self.recuts,
        }


@dataclass
class _Run:
    plan: CompactionPlan
    freed: set[str]
    cordoned: list[str] = field(default_factory=list)  # nodes this run cordoned (and only those)
    done: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    phase: str = "cordoning"  # cordoning | evicting | finishing | rollingBack
    # evictions sent (write-ahead) whose replacement is not confirmed yet: pod -> {"owner": uid, "siblings": [uid, ...]}
    inflight: dict[str, dict[str, Any]] = field(default_factory=dict)
    reason: str = ""  # why a rollback started
    capped: str = ""  # which limit (max_evictions_per_cycle, max_run_seconds) left moves for a later run
    held: list[str] = field(default_factory=list)  # nodes cordoned for a moment so that a pod binds on its planned node
    held_since: float = 0.0
    held_seconds: float = 0.0  # node-seconds of holds so far
    free_before: dict[str, int] = field(default_factory=dict)  # whole-free GPU nodes when the run began
    evictions: int = 0
    notes: list[str] = field(default_factory=list)  # what did not go as planned without stopping the run
    recuts: dict[str, str] = field(default_factory=dict)  # node -> success | failed | timeout
    started: float = 0.0  # monotonic time this process began the run (max_run_seconds counts from here)

    @cached_property
    def plan_record(self) -> str:
        """The plan as the state stores it, encoded once per run (every save writes it)."""
        return encode_plan(self.plan)

    @classmethod
    def resumed(cls, plan: CompactionPlan, state: dict[str, str]) -> _Run:
        return cls(plan, set(plan.freed_nodes), cordoned=json.loads(state.get("cordoned", "[]")),
                   done=json.loads(state.get("done", "[]")), phase=state.get("phase", "cordoning"),
                   inflight=json.loads(state.get("inflight", "{}")), reason=state.get("reason", ""),
                   held=json.loads(state.get("held", "[]")), free_before=json.loads(state.get("freeBefore", "{}")),
                   evictions=int(state.get("evictions", "0") or 0))

    def state(self, at: str) -> dict[str, str]:
        return {
            "planId": self.plan.metadata.id, "phase": self.phase, "updatedAt": at,
            "cordoned": json.dumps(self.cordoned), "done": json.dumps(self.done), "inflight": json.dumps(self.inflight),
            "held": json.dumps(self.held), "freeBefore": json.dumps(self.free_before), "evictions": str(self.evictions),
            "reason": self.reason, "plan": self.plan_record,
        }

    @property
    def unfinished_sources(self) -> set[str]:
        """Nodes with a planned move not done (the run stopped at a budget before them): not drained, not to wait for."""
        return {m.from_node for m in self.plan.moves if m.pod not in self.done}

    @property
    def fences(self) -> list[str]:
        """Nodes drained for a pending pod (and not freed): kept from replacements until the pending pod binds there."""
        sources = {m.from_node for m in self.plan.moves}
        targets = {m.to_node for m in self.plan.moves}
        drained_for_pending = {p.to_node for p in self.plan.placed_pending} & sources - self.freed - targets
        return sorted(drained_for_pending | {r.node for r in self.plan.mig_repartition})


class Executor:
    def __init__(
        self,
        client: ClusterClient,
        settings: ExecutorSettings,
        clock: Clock,
        *,
        dry_run: bool = False,
        progress: Callable[[Progress], None] | None = None,
    ) -> None:
        self.client = client
        self.settings = settings
        self.clock = clock
        self.dry_run = dry_run
        self.progress = progress or (lambda _p: None)

    # ----- public -----------------------------------------------------------------

    def execute(self, plan: CompactionPlan, *, resume: dict[str, str] | None = None) -> RunReport:
        """Run the plan to the end, or abort and roll back. ``resume`` is a state record from recovery."""
        report = RunReport(plan.metadata.id, "succeeded", len(plan.moves), dry_run=self.dry_run)
        if not plan.moves and not plan.freed_nodes and not plan.mig_repartition:
            report.status = "nothing-to-do"
            return report
        run = _Run.resumed(plan, resume) if resume else _Run(plan, set(plan.freed_nodes))
        try:
            run.started = self.clock.monotonic()
            if not resume:
                nodes = self.client.list_nodes()
                run.free_before = whole_free_gpu_nodes(nodes, self.client.list_pods())
                run = self._scoped(run, nodes)
                if not run.plan.moves and not run.plan.mig_repartition:
                    report.status = "failed"
                    report.reason = f"every node of the plan needs more evictions than {run.capped}; nothing done"
                    return report
            run.held_since = self.clock.monotonic()  # holds found in a resumed state get a full steer_timeout from now
            if run.phase != "finishing":  # interrupted while finishing: every move is done, nodes may already be released
                run.phase = "cordoning"
                self._validate(run)
                self._save_first(run)
                self._cordon_all(run)
                run.phase = "evicting"
                self._save(run)
                self._evict_all(run)
                run.phase = "finishing"
                self._save(run)
            report.freed_nodes = self._finish(run)
            if run.capped:
                report.status = "partial"
                report.reason = f"{run.capped} reached; the rest waits for the next run"
        except Interrupted:  # stopping (SIGTERM, lost lease): the state stays for recovery, but holds are only for a moment
            self._release_holds_quietly(run)
            raise
        except (Abort, ClusterError) as exc:
            self._rollback(run, str(exc))
            report.status = "failed"
            report.reason = str(exc)
        except Exception as exc:  # a bug or an unexpected client failure must not leave nodes cordoned
            log.exception("unexpected error while executing", extra={"plan": plan.metadata.id})
            report.status = "failed"
            report.reason = f"unexpected {type(exc).__name__}: {exc}"
            self._rollback(run, report.reason)
        report.moves_done = len(run.done)
        report.skipped_moves = run.skipped
        report.recuts = dict(run.recuts)
        self._judge(run, report)
        return report

    def _judge(self, run: _Run, report: RunReport) -> None:
        """Measure what the cluster shows now; a run that did not get the planned result is not ``succeeded``."""
        try:
            report.outcome = self._measure(run)
        except ClusterError as exc:
            report.reason = "; ".join(filter(None, [report.reason, f"outcome not measured: {exc}"]))
            if report.status == "succeeded":
                report.status = "partial"
            return
        failed_recuts = sorted(n for n, result in run.recuts.items() if result != "success")
        if report.status == "succeeded" and (not report.outcome.as_planned or failed_recuts):
            report.status = "partial"
            report.reason = "; ".join([report.outcome.summary(), *run.notes])
        log.info(self._said("run outcome", "simulated run outcome (dry run)"),
                 extra={"plan": run.plan.metadata.id, "status": report.shown_status, **report.outcome.to_dict()})

    def _measure(self, run: _Run) -> Outcome:
        nodes, pods = self.client.list_nodes(), self.client.list_pods()
        outcome = compare(run.free_before, whole_free_gpu_nodes(nodes, pods), planned=run.plan.freed_gpus)
        bound = {pod_key(p): (p.get("spec") or {}).get("nodeName") for p in pods if not is_terminating(p)}
        outcome.pending_planned = len(run.plan.placed_pending)
        outcome.pending_placed = sum(1 for p in run.plan.placed_pending if bound.get(p.pod) == p.to_node)
        outcome.evictions = run.evictions
        outcome.replacements_ready = sum(1 for m in run.plan.moves if m.pod in run.done and m.pod not in run.skipped)
        outcome.held_node_seconds = run.held_seconds
        outcome.notes = list(run.notes)
        outcome.simulated = self.dry_run
        return outcome

    def abandon(self, plan: CompactionPlan, state: dict[str, str], *, reason: str) -> RunReport:
        """Roll back an interrupted run without resuming it."""
        run = _Run.resumed(plan, state)
        self._rollback(run, reason)
        return RunReport(plan.metadata.id, "failed", len(plan.moves), moves_done=len(run.done), reason=reason, dry_run=self.dry_run)

    # ----- steps --------------------------------------------------------------------

    def _validate(self, run: _Run) -> None:
        """Karpenter-style: the plan was computed on a snapshot; check it against the cluster now."""
        for name in run.plan.freed_nodes:
            node = self.client.get_node(name)
            if node is None:
                raise Abort(f"plan is stale: node {name} no longer exists")
            planned = {m.pod for m in run.plan.moves if m.from_node == name}
            strangers = [pod_key(p) for p in gpu_pods_on(self.client, name) if pod_key(p) not in planned and pod_key(p) not in run.done]
            if strangers:
                raise Abort(f"plan is stale: node {name} now runs GPU pod(s) the plan does not move: {', '.join(strangers[:3])}")

    def _cordon_all(self, run: _Run) -> None:
        for name in [*run.plan.freed_nodes, *run.fences]:
            node = self.client.get_node(name)
            if node is None:
                raise Abort(f"node {name} disappeared while cordoning")
            if name in run.cordoned:  # resumed: the state says we cordoned it (or were about to)
                if ann.is_unschedulable(node) and ann.is_ours(node):
                    continue
                if ann.is_unschedulable(node):  # only the write-ahead was ours; someone else cordoned it since
                    run.cordoned.remove(name)
                    self._save(run)
                    continue
                # the write-ahead landed but the patch did not (crash in between): cordon it now
            elif ann.is_unschedulable(node):
                continue  # cordoned by someone else before us: never ours to uncordon
            else:
                run.cordoned.append(name)
                self._save(run)  # write-ahead: recovery may find the node either way
            if patch_fresh(self.client, name, self._cordon_unless_taken(run), node=node) is None:
                run.cordoned.remove(name)  # someone else cordoned it meanwhile: theirs, never ours to uncordon
                self._save(run)
                continue
            self._event(ObjectRef("Node", name), "CompactorCordon", f"cordoned by gpu-compactor for plan {run.plan.metadata.id}")

    def _cordon_unless_taken(self, run: _Run) -> Callable[[Obj], Obj | None]:
        cordon = ann.cordon_patch(run.plan.metadata.id, self._stamp())
        return lambda node: None if ann.is_unschedulable(node) and not ann.is_ours(node) else cordon

    def _scoped(self, run: _Run, nodes: list[Obj]) -> _Run:
        """A plan longer than max_evictions_per_cycle: this run takes whole nodes up to the cap, and only those."""
        cap = self.settings.max_evictions_per_cycle
        if len(run.plan.moves) <= cap:
            return run
        plan = within_cap(run.plan, cap, physical_gpus(nodes))
        log.info("per-cycle eviction cap: this run takes whole nodes up to it",
                 extra={"cap": cap, "moves": len(plan.moves), "of": len(run.plan.moves), "nodes": len(plan.freed_nodes)})
        return _Run(plan, set(plan.freed_nodes), free_before=run.free_before, capped=f"max_evictions_per_cycle ({cap})")

    def _evict_all(self, run: _Run) -> None:
        pending = [m for m in run.plan.moves if m.pod not in run.done]
        width = 1 if self.settings.steer_replacements else self.settings.max_concurrent_evictions  # holds steer one pod at a time
        budget = self.settings.max_run_seconds
        for batch in _batches(pending, width):
            if budget is not None and self.clock.monotonic() - run.started >= budget:
                log.info("run time budget reached", extra={"maxRunSeconds": budget})
                run.capped = f"max_run_seconds ({budget:g})"
                break
            self._evict_batch(run, batch)

    def _evict_batch(self, run: _Run, batch: Sequence[Move]) -> None:
        waits: list[Move] = []
        busy: set[str] = set()  # PDBs with an eviction of this batch still being replaced: one at a time per PDB
        for move in batch:
            self._report(run, f"evicting {move.pod} from {move.from_node}")
            pod = self._current_pod(move)
            if pod is not None and busy & self._pdb_keys(pod):
                self._await_all(run, waits)  # the PDB is shared with an earlier move of the batch: let that one finish first
                waits, busy = [], set()
                pod = self._current_pod(move)
            if pod is None:
                if move.pod in run.inflight:  # evicted before a restart: its replacement is still to be confirmed
                    waits.append(move)
                    continue
                run.skipped.append(move.pod)
                self._mark_done(run, move)
                continue
            if not controller_uid(pod):
                raise Abort(f"{move.pod} has no controller owner to recreate it; not evicting it (the plan predates its owner change)")
            self._wait_for_budget(run, move)
            self.clock.checkpoint()  # a stop received since the last wait takes effect before the next eviction, not after it
            if self.settings.steer_replacements:
                self._hold_rivals(run, pod, target=move.to_node, why=move.pod)
            run.inflight[move.pod] = {"owner": controller_uid(pod), "siblings": sorted(self._owner_pod_uids(pod)),
                                      "grace": _grace_seconds(pod)}
            self._save(run)  # write-ahead: after a crash, recovery still waits for this replacement
            self._evict(run, move)
            waits.append(move)
            busy |= self._pdb_keys(pod)
        self._await_all(run, waits)

    def _await_all(self, run: _Run, waits: Sequence[Move]) -> None:
        for move in waits:
            context = run.inflight[move.pod]
            self._await_replacement(run, move, str(context["owner"]), set(context["siblings"]), float(context.get("grace", 0)))
            self._mark_done(run, move)

    def _pdb_keys(self, pod: Obj) -> set[str]:
        pdbs = pdbs_selecting(self.client.list_pdbs(namespace=(pod.get("metadata") or {}).get("namespace", "default")), pod)
        return {f"{p['metadata'].get('namespace', 'default')}/{p['metadata']['name']}" for p in pdbs}

    def _current_pod(self, move: Move) -> Obj | None:
        namespace, name = move.pod.split("/", 1)
        pod = self.client.get_pod(namespace, name)
        if pod is None or is_terminating(pod):
            return None
        if (pod.get("spec") or {}).get("nodeName") != move.from_node:
            return None  # already elsewhere: nothing to move
        if move.uid and (pod.get("metadata") or {}).get("uid") != move.uid:
            return None  # a new pod with the same name (StatefulSet): the planned one is gone
        return pod

    def _wait_for_budget(self, run: _Run, move: Move) -> None:
        """Before evicting, the budget should allow it; an unexpected 0 waits, then aborts."""
        deadline = self.clock.monotonic() + self.settings.replacement_timeout_seconds
        while True:
            blocking = self._blocking_pdbs(move)
            if not blocking:
                return
            if self.clock.monotonic() >= deadline:
                waited = self.settings.replacement_timeout_seconds
                raise Abort(f"PodDisruptionBudget {blocking[0]} allows no disruption for {move.pod}; gave up after {waited:g}s")
            self._report(run, f"evicting {move.pod}", waiting=f"PDB {blocking[0]} allows no disruption")
            self.clock.sleep(self.settings.poll_seconds)
            self._check_sources(run)

    def _blocking_pdbs(self, move: Move) -> list[str]:
        namespace, name = move.pod.split("/", 1)
        pod = self.client.get_pod(namespace, name)
        if pod is None:
            return []
        return [f"{p['metadata'].get('namespace')}/{p['metadata']['name']}" for p in pdbs_selecting(self.client.list_pdbs(namespace=namespace), pod)
                if int((p.get("status") or {}).get("disruptionsAllowed") or 0) <= 0]

    def _evict(self, run: _Run, move: Move) -> None:
        namespace, name = move.pod.split("/", 1)
        delay = self.settings.backoff_seconds
        attempts = 0
        while True:
            result = self.client.evict(namespace, name, uid=move.uid, dry_run=False)
            if result.outcome in (EvictionOutcome.EVICTED, EvictionOutcome.GONE):
                run.evictions += result.outcome == EvictionOutcome.EVICTED
                self._event(ObjectRef("Pod", name, namespace), "CompactorEvict",
                            f"evicted from {move.from_node} by plan {run.plan.metadata.id}: {move.reason}")
                log.info(self._said("evicted", "would evict (dry run)"), extra={"pod": move.pod, "node": move.from_node, "plan": run.plan.metadata.id})
                return
            if result.outcome == EvictionOutcome.FORBIDDEN or MULTIPLE_PDBS in result.message:  # no retry changes these
                raise Abort(f"eviction of {move.pod} refused ({result.status}): {result.message}")
            attempts += 1
            if attempts > self.settings.eviction_retry_limit:
                raise Abort(f"eviction of {move.pod} failed {attempts} times, last {result.status} {result.outcome.value}: {result.message}")
            self._report(run, f"evicting {move.pod}", waiting=f"{result.outcome.value} ({result.status}), retry in {delay:g}s")
            self.clock.sleep(delay)
            delay = min(self.settings.backoff_max_seconds, max(delay * 2, 0.1))
            if self._current_pod(move) is None:
                return  # gone meanwhile

    def _owner_pod_uids(self, pod: Obj) -> set[str]:
        owner = controller_uid(pod)
        if not owner:
            return set()
        namespace = (pod.get("metadata") or {}).get("namespace", "default")
        return {str(p["metadata"].get("uid")) for p in self.client.list_pods(namespace=namespace) if controller_uid(p) == owner}

    def _await_replacement(self, run: _Run, move: Move, owner: str, siblings: set[str], grace: float = 0.0) -> None:
        """Wait until the owner is whole again: a new Ready pod of the same controller, not on a node being freed."""
        if not owner:
            self._release_holds(run)
            return  # bare pods are never in a plan; nothing would replace one
        deadline = self.clock.monotonic() + self.settings.replacement_timeout_seconds + grace  # a StatefulSet waits for the old pod
        while True:
            fresh = [
                p for p in self._read(lambda: self.client.list_pods(namespace=move.pod.split("/", 1)[0]))
                if controller_uid(p) == owner and str(p["metadata"].get("uid")) not in siblings and not is_terminating(p)
            ]
            landed = [(pod_key(p), (p.get("spec") or {}).get("nodeName")) for p in fresh if (p.get("spec") or {}).get("nodeName")]
            for replacement, node in landed:
                self._check_landing(run, move, replacement, str(node))
            if landed:
                self._release_holds(run)
            self._read(lambda: self._check_sources(run))  # after the replacement check: our own replacement is not a stranger
            ready = [p for p in fresh if (p.get("spec") or {}).get("nodeName") and is_ready(p)]
            if ready:
                return
            self._check_hold_age(run, f"the replacement of {move.pod}")
            if self.clock.monotonic() >= deadline:
                state = "Pending" if not landed else "not Ready"
                raise Abort(f"replacement for {move.pod} still {state} after {self.settings.replacement_timeout_seconds:g}s")
            self._report(run, f"moved {move.pod}", waiting=f"replacement of {move.pod} ({len(fresh)} new, none Ready yet)")
            self.clock.sleep(self.settings.bind_poll_seconds if run.held else self.settings.poll_seconds)

    def _read(self, call: Callable[[], T]) -> T:
        """A read while waiting: a transient failure (no reply, 429, 5xx) is retried with backoff, not a rollback."""
        delay = self.settings.backoff_seconds
        for attempt in range(self.settings.eviction_retry_limit + 1):
            try:
                return call()
            except ClusterError as exc:
                if exc.status not in TRANSIENT or attempt == self.settings.eviction_retry_limit:
                    raise
                log.warning("read failed; retrying", extra={"error": str(exc), "retryIn": delay})
                self.clock.sleep(delay)
                delay = min(self.settings.backoff_max_seconds, max(delay * 2, 0.1))
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def _check_landing(self, run: _Run, move: Move, replacement: str, node: str) -> None:
        """Where a replacement was bound decides whether the plan still holds; a wrong landing stops the run."""
        if node in run.freed:
            raise Abort(f"replacement {replacement} for {move.pod} landed on {node}, a node this plan frees; stopped and rolled back")
        if self.settings.steer_replacements and node != move.to_node:
            raise Abort(f"replacement {replacement} for {move.pod} was bound to {node}, not the planned {move.to_node}; "
                        f"stopped after {len(run.done)}/{len(run.plan.moves)} moves and rolled back (re-plan from live state next run)")

    # ----- steering -----------------------------------------------------------------

    def _hold_rivals(self, run: _Run, pod: Obj, *, target: str, why: str) -> None:
        """Cordon, for a moment, every other schedulable node that could take ``pod``: only ``target`` stays feasible."""
        nodes, pods = self.client.list_nodes(), self.client.list_pods()
        hold = plan_hold(nodes, pods, pod, target=target)
        if not hold.room.fits:
            lacking = ", ".join(f"{r} {v}" for r, v in sorted(hold.room.short.items())) or "the node is gone"
            raise Abort(f"plan is stale: {target} has no room for {why} now (short of {lacking})")
        names = hold.rivals
        if not names:
            return
        read = {n["metadata"]["name"]: n for n in nodes}
        run.held = sorted({*run.held, *names})
        run.held_since = self.clock.monotonic()
        self._save(run)  # write-ahead: recovery releases whatever it finds held
        patch = ann.hold_patch(run.plan.metadata.id, self._stamp(), why)
        for name in names:
            if patch_fresh(self.client, name, lambda n: None if ann.is_unschedulable(n) else patch, node=read.get(name)) is None:
                run.held.remove(name)  # cordoned by someone else meanwhile (or gone): not ours to hold or release
        log.info(self._said("holding nodes", "would hold nodes (dry run)"), extra={"pod": why, "target": target, "held": len(names)})

    def _release_holds(self, run: _Run) -> None:
        if not run.held:
            return
        current = {n["metadata"]["name"]: n for n in self._read(self.client.list_nodes)}
        for name in run.held:
            self._uncordon(name, ann.is_held, node=current.get(name))
        run.held_seconds += len(run.held) * max(0.0, self.clock.monotonic() - run.held_since)
        run.held = []
        self._save(run)

    def _release_holds_quietly(self, run: _Run) -> None:
        try:
            self._release_holds(run)
        except Exception as exc:  # recovery releases them from the state and the marks
            log.error("could not release held nodes while stopping", extra={"nodes": run.held, "error": str(exc)})

    def _check_hold_age(self, run: _Run, what: str) -> None:
        held_for = self.clock.monotonic() - run.held_since
        if run.held and held_for >= self.settings.steer_timeout_seconds:
            raise Abort(f"{what} was not bound within steer_timeout_seconds ({self.settings.steer_timeout_seconds:g}s) "
                        f"while {len(run.held)} node(s) were held; stopped and rolled back")

    def _check_sources(self, run: _Run) -> None:
        """A GPU pod the plan does not move appearing on a cordoned source (ours or someone else's cordon) defeats the plan."""
        planned = {m.pod for m in run.plan.moves}
        for name in run.plan.freed_nodes:
            for pod in gpu_pods_on(self.client, name):
                if pod_key(pod) not in planned:
                    raise Abort(f"new GPU pod {pod_key(pod)} appeared on cordoned node {name}")

    def _finish(self, run: _Run) -> list[str]:
        self._release_holds(run)  # resumed after a crash between a bind and its release
        unfinished = run.unfinished_sources
        failed = self._recut_all(run, unfinished)
        for placement in run.plan.placed_pending:
            if placement.to_node in unfinished:
                run.notes.append(f"pending pod {placement.pod} not placed: {placement.to_node} was not drained in this run")
                continue
            if placement.to_node in failed:
                run.notes.append(f"pending pod {placement.pod} not placed: the re-cut of {placement.to_node} failed")
                continue
            self._place_pending(run, placement)
        for name in run.fences:  # a pending pod that was not placed leaves its fence behind
            self._release_fence(run, name)
        self._await_drained(run, [n for n in run.plan.freed_nodes if n not in unfinished])
        freed = []
        for name in run.plan.freed_nodes:
            if name in unfinished:  # the run stopped at its time budget before this node's moves: released as it was
                self._after_drain(run, name, freed=False)
                continue
            leftovers = [pod_key(p) for p in gpu_pods_on(self.client, name)]
            if leftovers:
                log.warning(self._said("node not freed", "node would not be freed (dry run)"), extra={"node": name, "pods": leftovers[:5]})
            else:
                freed.append(name)
            self._after_drain(run, name, freed=not leftovers)
        run.phase = "done"
        self.client.write_state(ann.STATE_CONFIGMAP, None)
        self._report(run, "done")
        return freed

    def _place_pending(self, run: _Run, placement: Placement) -> None:
        """Open the fence around the node drained for a pending pod and steer the pod there, as for a replacement."""
        namespace, name = placement.pod.split("/", 1)
        pod = self.client.get_pod(namespace, name)
        if pod is None or is_terminating(pod):
            run.notes.append(f"pending pod {placement.pod} is gone")
            return
        if not (pod.get("spec") or {}).get("nodeName") and self.settings.steer_replacements:
            try:
                self._hold_rivals(run, pod, target=placement.to_node, why=placement.pod)
            except Abort as exc:  # every move is done by now: say why the pending pod may not land, and go on
                run.notes.append(str(exc))
        self._release_fence(run, placement.to_node)
        deadline = self.clock.monotonic() + self.settings.steer_timeout_seconds
        while not (node := (pod.get("spec") or {}).get("nodeName")) and self.clock.monotonic() < deadline:
            self._report(run, f"placing pending {placement.pod}", waiting=f"bind on {placement.to_node}")
            self.clock.sleep(self.settings.bind_poll_seconds)
            pod = self.client.get_pod(namespace, name) or {}
        self._release_holds(run)
        if not node:
            run.notes.append(f"pending pod {placement.pod} not bound within {self.settings.steer_timeout_seconds:g}s")
        elif node != placement.to_node:
            run.notes.append(f"pending pod {placement.pod} was bound to {node}, not the planned {placement.to_node}")

    def _recut_all(self, run: _Run, unfinished: set[str]) -> set[str]:
        """Re-cut each drained node of the plan's migRepartition; returns the nodes whose re-cut did not succeed."""
        failed = set()
        for change in run.plan.mig_repartition:
            if change.node in unfinished:
                failed.add(change.node)
                continue
            result = self._recut(run, change)
            run.recuts[change.node] = result
            if result != "success":
                failed.add(change.node)
        return failed

    def _recut(self, run: _Run, change: MigRepartition) -> str:
        """Drained node -> relabelled -> mig-manager done (``success``), or ``failed``/``timeout``: then the node stays
        cordoned and marked for an operator, with a Warning Event; never retried in a loop."""
        name = change.node
        self._await_drained(run, [name])
        holding = [pod_key(p) for p in self._gpu_pods_holding(name)]
        if holding:
            return self._recut_failed(run, change, f"GPU pod(s) {', '.join(holding[:3])} still on it", "failed")
        node = self._read(partial(self.client.get_node, name))
        if node is None:
            raise Abort(f"node {name} disappeared before its re-cut")
        if mig.labels(node).get(mig.CONFIG_LABEL) != change.to_config:  # a resumed run finds it relabelled already
            if patch_fresh(self.client, name, lambda n: mig.relabel_patch(change.to_config, change.allocatable) if ann.is_ours(n) else None,
                           node=node) is None:
                return self._recut_failed(run, change, "the node is no longer cordoned by gpu-compactor", "failed")
            self._event(ObjectRef("Node", name), "CompactorMigRecut", f"{change.from_config} -> {change.to_config} for plan {run.plan.metadata.id}")
        deadline = self.clock.monotonic() + self.settings.mig_reconfigure_timeout_seconds
        while True:
            node = self._read(partial(self.client.get_node, name)) or {}
            state = mig.progress(node, change.to_config, change.allocatable)
            if state == "done":
                return "success"
            if state == "failed":
                return self._recut_failed(run, change, f"mig-manager reports {mig.labels(node).get(mig.STATE_LABEL, 'a changed label')}", "failed")
            if self.clock.monotonic() >= deadline:
                return self._recut_failed(run, change, f"not done within {self.settings.mig_reconfigure_timeout_seconds:g}s "
                                                       f"(state {mig.labels(node).get(mig.STATE_LABEL, '-')})", "timeout")
            self._report(run, f"re-cutting {name}", waiting=f"mig-manager: {mig.labels(node).get(mig.STATE_LABEL, '-')}")
            self.clock.sleep(self.settings.poll_seconds)

    def _recut_failed(self, run: _Run, change: MigRepartition, why: str, result: str) -> str:
        message = f"re-cut of {change.node} to {change.to_config} failed: {why}; left cordoned for an operator"
        log.warning(self._said("mig re-cut failed", "mig re-cut would fail (dry run)"),
                    extra={"node": change.node, "to": change.to_config, "reason": why})
        if change.node in run.cordoned and patch_fresh(self.client, change.node, lambda n: mig.failed_patch(why) if ann.is_ours(n) else None):
            run.cordoned.remove(change.node)  # deliberately kept: recovery and _finish leave it
            self._save(run)
        self._event(ObjectRef("Node", change.node), "CompactorMigRecutFailed", message, "Warning")
        run.notes.append(message)
        return result

    def _release_fence(self, run: _Run, name: str) -> None:
        if name not in run.cordoned:
            return
        if self._uncordon(name):
            self._event(ObjectRef("Node", name), "CompactorUncordon", f"opened for the pending pod of plan {run.plan.metadata.id}")
        run.cordoned.remove(name)
        self._save(run)

    def _await_drained(self, run: _Run, nodes: list[str]) -> None:
        """A node is freed once its GPU pods are deleted, not merely terminating; wait for that (their grace period included)."""
        deadline: float | None = None
        while True:
            staying = {n: self._read(partial(self._gpu_pods_holding, n)) for n in nodes}
            holding = [n for n, pods in staying.items() if pods]
            if not holding:
                return
            if deadline is None:
                grace = max(_grace_seconds(p) for pods in staying.values() for p in pods)
                deadline = self.clock.monotonic() + self.settings.replacement_timeout_seconds + grace
            if self.clock.monotonic() >= deadline:
                return  # _finish reports these nodes as not freed
            self._report(run, "finishing", waiting=f"evicted pods to terminate on {', '.join(holding[:3])}")
            self.clock.sleep(self.settings.poll_seconds)

    def _gpu_pods_holding(self, node: str) -> list[Obj]:
        """GPU pods still on ``node``, terminating ones included: they hold the node until deleted."""
        return [p for p in self.client.list_pods(node_name=node)
                if requests_gpu(p) and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]

    def _after_drain(self, run: _Run, name: str, *, freed: bool) -> None:
        if name not in run.cordoned:
            return
        mode = self.settings.after_drain if freed else "uncordon"
        # a node gone, or already released by this run before a restart (or never actually cordoned), is left alone
        if mode == "uncordon":
            if self._uncordon(name):
                self._event(ObjectRef("Node", name), "CompactorUncordon", f"uncordoned after plan {run.plan.metadata.id}")
        elif mode == "keepCordoned":
            keep = {"metadata": {"annotations": {ann.AFTER_DRAIN: "keepCordoned"}}}
            if patch_fresh(self.client, name, lambda n: keep if ann.is_ours(n) else None):
                self._event(ObjectRef("Node", name), "CompactorKeepCordoned", f"freed by plan {run.plan.metadata.id}; kept cordoned")
        else:
            self._reserve(run, name)

    def _uncordon(self, name: str, mine: Callable[[Obj], bool] = ann.is_ours, *, node: Obj | None = None) -> bool:
        """Uncordon and unmark ``name`` if, as read fresh, it still carries our marks (``mine``); True when patched."""
        key = self.settings.taint_key
        return patch_fresh(self.client, name, lambda n: ann.uncordon_patch(n, key) if mine(n) else None, node=node) is not None

    def _reserve(self, run: _Run, name: str) -> None:
        """Uncordon behind a NoSchedule taint that only the pending pod it was freed for tolerates."""
        placed = next((p.pod for p in run.plan.placed_pending if p.to_node == name), "")
        until = self._stamp(offset=self.settings.taint_ttl_seconds)
        reservation = {"key": self.settings.taint_key, "value": _taint_value(placed), "effect": "NoSchedule"}

        def build(node: Obj) -> Obj | None:
            if not ann.is_ours(node):
                return None
            taints = [*ann.without_taints((node.get("spec") or {}).get("taints") or [], self.settings.taint_key), reservation]
            return {"metadata": {"annotations": {ann.AFTER_DRAIN: "taint", ann.RESERVED_UNTIL: until, ann.RESERVED_FOR: placed}},
                    "spec": {"unschedulable": None, "taints": taints}}

        if patch_fresh(self.client, name, build) is None:
            return
        self._event(ObjectRef("Node", name), "CompactorReserve", f"reserved for {placed or 'pending pods'} until {until} (plan {run.plan.metadata.id})")

    def _rollback(self, run: _Run, reason: str) -> None:
        log.error(self._said("aborting plan", "aborting plan (dry run: the rollback's calls are recorded, not made)"),
                  extra={"plan": run.plan.metadata.id, "reason": reason})
        run.phase, run.reason = "rollingBack", reason
        try:
            self._save(run)  # so that a crash from here on makes recovery finish the rollback, not resume the plan
        except Exception as exc:  # best effort; the rollback itself matters more
            log.error("could not record the rollback", extra={"error": str(exc)})
        for name in dict.fromkeys([*run.cordoned, *run.held]):
            try:
                if self._recut_midway(run, name, reason):
                    continue
                if self._uncordon(name):
                    self._event(ObjectRef("Node", name), "CompactorUncordon", f"rolled back plan {run.plan.metadata.id}")
            except Exception as exc:  # keep going: recovery retries whatever is left marked
                log.error("rollback failed for node", extra={"node": name, "error": str(exc)})
        # one Warning per run, on the first node the plan frees (or, freeing none, the first node it moves a pod from)
        subject = next(iter(run.plan.freed_nodes), None) or next((m.from_node for m in run.plan.moves), None)
        if subject:
            message = f"plan {run.plan.metadata.id} aborted: {reason}"
            self._event(ObjectRef("Node", subject), "CompactorAbort", message, type_="Warning")
        try:
            self.client.write_state(ann.STATE_CONFIGMAP, None)
        except Exception as exc:  # never leave the rollback half done for want of a state write
            log.error("could not clear executor state", extra={"error": str(exc)})

    def _recut_midway(self, run: _Run, name: str, reason: str) -> bool:
        """A node relabelled for a re-cut that mig-manager has not finished is not released by a rollback (pods landing
        while the device plugin restarts): it stays cordoned and marked for an operator, as after a failed re-cut."""
        change = next((r for r in run.plan.mig_repartition if r.node == name), None)
        node = self.client.get_node(name) if change is not None else None
        if change is None or node is None or mig.labels(node).get(mig.CONFIG_LABEL) != change.to_config:
            return False
        if mig.progress(node, change.to_config, change.allocatable) == "done":
            return False
        self._recut_failed(run, change, f"the run rolled back while mig-manager was at it ({reason})", "failed")
        return True

    # ----- helpers ----------------------------------------------------------------

    def _mark_done(self, run: _Run, move: Move) -> None:
        run.done.append(move.pod)
        run.inflight.pop(move.pod, None)
        self._save(run)
        self._report(run, f"moved {move.pod}")

    def _save_first(self, run: _Run) -> None:
        try:
            self._save(run)
        except ClusterError as exc:
            if exc.status == 404:
                raise Abort(
                    f"cannot record the run's state ({exc}); create the state namespace "
                    f"(kubectl create namespace {self.settings.state_namespace}) or set executor.state_namespace"
                ) from None
            raise

    def _save(self, run: _Run) -> None:
        self.client.write_state(ann.STATE_CONFIGMAP, run.state(self._stamp()))

    def _stamp(self, offset: float = 0.0) -> str:
        from datetime import timedelta

        return (self.clock.now() + timedelta(seconds=offset)).isoformat().replace("+00:00", "Z")

    def _event(self, ref: ObjectRef, reason: str, message: str, type_: str = "Normal") -> None:
        try:
            self.client.create_event(ref, reason=reason, message=message, type_=type_)
        except ClusterError as exc:  # an event is a courtesy; never fail a run on it
            log.warning("event not recorded", extra={"reason": reason, "error": str(exc)})

    def _report(self, run: _Run, current: str, waiting: str = "") -> None:
        if self.dry_run:
            current = _intention(current)
        self.progress(Progress(run.plan.metadata.id, len(run.done), len(run.plan.moves), current, waiting))

    def _said(self, real: str, dry: str) -> str:
        """A log message that says something happened: in a dry run, what would happen instead."""
        return dry if self.dry_run else real


# A progress line of a dry run says what a real run would do: its first words, for each step that reports.
_INTENTIONS = (("evicting ", "would evict "), ("moved ", "would move "), ("placing pending ", "would place pending "),
               ("re-cutting ", "would re-cut "), ("finishing", "would finish"))


def _intention(current: str) -> str:
    """``evicting p from n`` -> ``would evict p from n``; ``done`` stays (the walk through the plan is done)."""
    if current == "done":
        return current
    for real, dry in _INTENTIONS:
        if current.startswith(real):
            return dry + current[len(real):]
    return f"(dry run) {current}"


def encode_plan(plan: CompactionPlan) -> str:
    """The plan as recovery needs it: no figures, no move explanations or request vectors (they grow with the cluster),
    compact JSON, gzipped and base64-encoded past 32 KiB, so a 2,000-move plan still fits well inside a ConfigMap."""
    moves = [m.model_copy(update={"reason": "", "requests": {}}) for m in plan.moves]
    slim = plan.model_copy(update={**_FIGURES_DROPPED, "moves": moves})
    text = json.dumps(slim.model_dump(by_alias=True, mode="json"), separators=(",", ":"))
    if len(text) <= _PLAIN_PLAN_LIMIT:
        return text
    return _GZIP_PREFIX + base64.b64encode(gzip.compress(text.encode(), mtime=0)).decode()


def decode_plan(text: str) -> CompactionPlan:
    """The plan of a state record (plain or gzipped JSON); ``ValueError``/``ValidationError`` when it is not one."""
    if text.startswith(_GZIP_PREFIX):
        try:
            text = gzip.decompress(base64.b64decode(text[len(_GZIP_PREFIX):], validate=True)).decode()
        except (OSError, EOFError, binascii.Error) as exc:
            raise ValueError(f"the gzipped plan is damaged: {exc}") from None
    return CompactionPlan.model_validate_json(text)


def _grace_seconds(pod: Obj) -> float:
    """How long the evicted pod may take to stop: ``terminationGracePeriodSeconds``, 30 when unset (the API default)."""
    value = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    return float(value) if isinstance(value, int | float) and value >= 0 else 30.0


def _taint_value(pod: str) -> str:
    """The pod's ``namespace.name`` as a valid taint value (a label value: at most 63 characters, alphanumeric at both ends).

    The full key is in the ``reserved-for`` annotation; a long one is cut here, or the API would refuse the whole patch.
    """
    value = re.sub(r"[^A-Za-z0-9_.-]", ".", pod.replace("/", "."))[:63].strip("-_.")
    return value or "any"


def _batches(moves: Sequence[Move], width: int) -> list[list[Move]]:
    """Consecutive groups of at most ``width`` moves, no two of one owner (so one at a time per PDB/owner)."""
    batches: list[list[Move]] = []
    current: list[Move] = []
    owners: set[str] = set()
    for move in moves:
        key = move.owner or move.pod
        if len(current) >= width or key in owners:
            batches.append(current)
            current, owners = [], set()
        current.append(move)
        owners.add(key)
    if current:
        batches.append(current)
    return batches



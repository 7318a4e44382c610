"""Carry out a ``CompactionPlan`` safely: validate, fence, evict under PDBs with steering, finish, or roll back.

The same code runs for real and dry runs; only the ``ClusterClient`` differs. The executor strings
the steps together (``actions/steps/``, one module each) over one ``Run``, and owns two rules:
every change is announced in the run state before it is made (``Run.write_ahead``: recovery resumes
or undoes from it after a crash), and an abort rolls back exactly once, its reason in the report
(``AbortReason``). How replacements are made to land where the plan says is the ``Steerer``'s
business (``actions/steering/``), chosen per run. The report is ``actions/services/report.py``; what the run
measures of the cluster, before and after, ``actions/services/measurement.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime

from compactor.actions.checks.validate import plan_still_holds
from compactor.actions.cluster.run_state import Phase, Resume, RunState
from compactor.actions.port.client import ClusterClient
from compactor.actions.run.context import Abort, AbortReason, Progress, Run, RunServices, StopHere
from compactor.actions.services.measurement import measure
from compactor.actions.services.outcome import Outcome, compare, dra_facts
from compactor.actions.services.report import RunReport
from compactor.actions.steering.detect import Choice, choose, steerer_for
from compactor.actions.steps.await_replacement import await_replacement
from compactor.actions.steps.cordon import fence_all
from compactor.actions.steps.evict import evict_all
from compactor.actions.steps.finish import finish
from compactor.actions.steps.mig_recut import recut_all
from compactor.actions.steps.reservations import await_reservations
from compactor.actions.steps.rollback import roll_back
from compactor.actions.steps.steer import place_all_pending
from compactor.clock import Clock, Interrupted
from compactor.errors import ClusterError
from compactor.model.dra import DriverMapping
from compactor.model.load import DRA_DRIVERS
from compactor.planner.plan import CompactionPlan
from compactor.planner.rules.budgets import EvictionCap
from compactor.planner.rules.movability import Unmovable
from compactor.settings.bundles import PlannerSettings, RunSettings
from compactor.statuses import RunStatus

__all__ = ["Abort", "Executor", "Progress"]
log = logging.getLogger("compactor.executor")


class Executor:
    def __init__(  # noqa: PLR0913
        self,
        client: ClusterClient,
        settings: RunSettings,
        clock: Clock,
        *,
        dry_run: bool = False,
        progress: Callable[[Progress], None] | None = None,
        steering: Choice | None = None,
        rules: PlannerSettings | None = None,
        may_go_on: Callable[[], str] | None = None,
        dra_drivers: Sequence[DriverMapping] = DRA_DRIVERS,
    ) -> None:
        """``may_go_on``: asked before each eviction; a reason stops the run there, as a budget does (the disruption
        window closing: ``app/carry_out.py``). ``dra_drivers``: what DRA devices are GPUs (``dra.drivers``)."""
        self.dra_drivers = tuple(dra_drivers)
        self.may_go_on = may_go_on or (lambda: "")
        self.client = client
        self.settings = settings
        self.clock = clock
        self.dry_run = dry_run
        self.progress = progress or (lambda _p: None)
        self._choice = steering
        self.rules = rules or PlannerSettings()  # the movability rules each eviction is checked against again

    @property
    def steering(self) -> Choice:
        """The steering mechanism for this executor's runs, chosen once (``steering.mechanism`` and what the cluster serves)."""
        if self._choice is None:
            self._choice = choose(self.client, self.settings, self.clock.now())
            log.info("steering", extra={"mechanism": self._choice.mechanism.value, "why": self._choice.why})
        return self._choice

    def execute(self, plan: CompactionPlan, *, resume: RunState | None = None) -> RunReport:
        """Run the plan to the end, or abort and roll back. ``resume``: the state of an interrupted run (from recovery)."""
        report = self._new_report(plan)
        if not plan.moves and not plan.freed_nodes and not plan.mig_repartition:
            return report.ended(RunStatus.NOTHING_TO_DO, why_nothing_to_do(plan))
        if age := self._too_old(plan):
            return self._refuse_old(plan, report, resume, age)
        run = self._run(plan, resume or RunState(plan_id=plan.metadata.id))
        try:
            run = self._started(run, resumed=resume is not None)
            if wall := self._why_not_start(run, resumed=resume is not None):
                return report.ended(RunStatus.FAILED, wall)
            self._carry_out(run, report)
        except Interrupted:  # stopping (SIGTERM, lost lease): the state stays for recovery, holds are for a moment only
            self._let_go_quietly(run)
            raise
        except (Abort, ClusterError) as exc:
            roll_back(run, str(exc))
            report.rolled_back(exc.reason if isinstance(exc, Abort) else AbortReason.CLUSTER_ERROR, str(exc))
        except Exception as exc:  # a bug or an unexpected client failure must not leave nodes fenced
            log.exception("unexpected error while executing", extra={"plan": plan.metadata.id})
            report.rolled_back(AbortReason.UNEXPECTED, f"unexpected {type(exc).__name__}: {exc}")
            roll_back(run, report.reason)
        self._tally(run, report)
        return report

    def _new_report(self, plan: CompactionPlan) -> RunReport:
        return RunReport(
            plan.metadata.id,
            RunStatus.SUCCEEDED,
            len(plan.moves),
            dry_run=self.dry_run,
            steering=self.steering.mechanism.value,
            steering_why=self.steering.why,
            steering_not_in_effect=self.steering.not_in_effect,
        )

    def _refuse_old(self, plan: CompactionPlan, report: RunReport, resume: RunState | None, age: str) -> RunReport:
        """A plan too old to carry out is refused; an interrupted run of one is undone, not carried on."""
        if resume is not None:
            return self.abandon(plan, resume, reason=age, why=AbortReason.PLAN_STALE)
        log.error("plan refused", extra={"plan": plan.metadata.id, "reason": age})
        return report.ended(RunStatus.FAILED, age)

    def _started(self, run: Run, *, resumed: bool) -> Run:
        """The run as it starts: a fresh one cut to its caps with what it changes measured (``_scoped``); a resumed one
        reads where DRA serves GPUs as a fresh one does. Holds in a resumed state get a full steer_timeout from now."""
        run.log.started = run.log.held_since = self.clock.monotonic()
        if not resumed:
            return self._scoped(run)
        run.log.attempted.extend(run.state.inflight)  # evicted (or about to be) before the stop
        run.log.dra_nodes = frozenset(dra_facts(self.client, self.dra_drivers).gpus)
        return run

    def _why_not_start(self, run: Run, *, resumed: bool) -> str:
        """Why a fresh run cannot begin ("" when it can): its cut left nothing, or its first move is walled in."""
        if resumed:
            return ""
        if not run.plan.moves and not run.plan.mig_repartition:
            return f"every node of the plan needs more evictions than {run.log.capped}; nothing done"
        if wall := self._cannot_start(run):
            log.warning("the run cannot start its first move", extra={"reason": wall})
            return f"{wall}; nothing done: no node fenced, no pod evicted"
        return ""

    def _carry_out(self, run: Run, report: RunReport) -> None:
        # interrupted while finishing: every move is done, nodes may be released already
        if run.state.resume is not Resume.FINISH:
            self._move_everything(run)
        report.freed_nodes = self._finish(run)
        if run.state.refused:
            report.ended(
                RunStatus.PARTIAL,
                f"{len(run.state.refused)} move(s) refused at their eviction: " + "; ".join(run.log.notes[:3]),
            )
        if run.log.capped:
            detail = f": {run.log.cap_detail}" if run.log.cap_detail else ""
            why = f"{run.log.capped} reached{detail}; the rest waits for the next run"
            # cut before it began and all of it done: the run did what it was allowed to (issue 45: dashboards read
            # partial as trouble); cut short while it ran, or with a move refused: partial
            whole = run.log.cut_before and not run.state.refused
            report.more_waits = True
            report.ended(RunStatus.SUCCEEDED if whole else RunStatus.PARTIAL, why)

    def _tally(self, run: Run, report: RunReport) -> None:
        report.moves_done = len(run.state.done)
        not_moved = set(run.log.skipped) | set(
            run.state.refused
        )  # gone before their turn, or refused (and what hung on it)
        report.done_pods = [p for p in run.state.done if p not in not_moved]
        report.failed_pods = sorted(set(run.log.attempted) - set(run.state.done))
        report.skipped_moves = run.log.skipped
        report.recuts = dict(run.log.recuts)
        report.devices = dict(run.log.devices)
        self._judge(run, report)

    def _too_old(self, plan: CompactionPlan) -> str:
        """Why ``plan`` is too old to carry out ('' when it is not): the cluster it was computed on is gone."""
        try:
            created = datetime.fromisoformat(plan.metadata.created_at.replace("Z", "+00:00"))
        except ValueError:
            return f"plan {plan.metadata.id}: createdAt {plan.metadata.created_at!r} is not a timestamp; refusing a plan of unknown age"
        age = (self.clock.now() - created).total_seconds()
        limit = self.settings.caps.max_plan_age_seconds
        if age <= limit:
            return ""
        return (
            f"plan {plan.metadata.id} was computed {age:.0f}s ago, more than caps.max_plan_age_seconds ({limit:g}); "
            "plan again from the cluster as it is now"
        )

    def abandon(
        self, plan: CompactionPlan, state: RunState, *, reason: str, why: AbortReason = AbortReason.INTERRUPTED
    ) -> RunReport:
        """Roll back an interrupted run without resuming it: ``reason`` in words, ``why`` in a word."""
        run = self._run(plan, state)
        roll_back(run, reason)
        report = self._new_report(plan).rolled_back(why, reason)
        report.moves_done = len(run.state.done)
        return report

    def _run(self, plan: CompactionPlan, state: RunState) -> Run:
        services = RunServices(
            self.client,
            self.settings,
            self.clock,
            steerer_for(self.steering, self.settings.executor.identity),
            dry_run=self.dry_run,
            progress=self.progress,
            rules=self.rules,
            may_go_on=self.may_go_on,
        )
        return Run(plan, state, services)

    @staticmethod
    def _cannot_start(run: Run) -> str:
        """Why the steering could not start the plan's first move, asked before the run writes anything ("" when it can)."""
        first = next(iter(run.plan.moves), None)
        if first is None:
            return ""
        try:
            run.steerer.preflight(run, first, fencing=[*run.plan.freed_nodes, *run.fences])
        except StopHere as exc:
            return f"before its first move, {exc}"
        return ""

    @staticmethod
    def _move_everything(run: Run) -> None:
        fenced_before = run.state.resume is Resume.FENCES_PLACED
        run.state.phase = Phase.CORDONING
        plan_still_holds(run, fenced=False)
        _save_first(run)
        fence_all(run, fenced_before=fenced_before)
        run.log.first_reads.clear()  # from here on, every read is fresh
        # behind the fences what is seen stays: a plan stale now is rolled back, nothing evicted
        plan_still_holds(run, fenced=True)
        with run.write_ahead() as state:
            state.phase = Phase.EVICTING
        evict_all(run, await_replacement)
        with run.write_ahead() as state:
            state.phase = Phase.FINISHING

    @staticmethod
    def _finish(run: Run) -> list[str]:
        """Every move done (or the run stopped at a budget): the steps that end a run, in order; the nodes freed."""
        run.steerer.release(run)  # resumed after a crash between a bind and its release
        run.log.finishing = True
        unfinished = run.unfinished_sources
        failed = recut_all(run, unfinished)
        place_all_pending(run, unfinished, failed)
        freed, reserved = finish(run, unfinished)
        await_reservations(run, reserved)
        run.report("done")
        return freed

    def _scoped(self, run: Run) -> Run:
        """A plan longer than max_evictions_per_cycle cut by whole nodes; whole-free GPUs measured before anything changes."""
        cap = EvictionCap.of(self.settings.caps)
        if run.plan.held_back:  # the planner already cut the plan to what the run budgets allow
            run.log.capped = run.plan.held_back.partition(" reached")[0]
            run.log.cut_before = True
        plan = cap.one_run(run.plan)
        if plan is not None:
            log.info(
                "per-cycle eviction cap: this run takes whole nodes up to it",
                extra={
                    "cap": cap.most,
                    "moves": len(plan.moves),
                    "of": len(run.plan.moves),
                    "nodes": len(plan.freed_nodes),
                },
            )
            run = self._run(plan, RunState(plan_id=plan.metadata.id))
            run.log.capped, run.log.cut_before = cap.held, True
        world = measure(run, self.dra_drivers, reads=True)
        run.state.free_before = world.whole_free
        # validating and fencing start from these reads instead of making them again
        run.log.first_reads.update(world.reads)
        if run.log.capped:  # the cut plan's net GPUs, counted as the planner counts them
            gpus = world.gpus
            freed_gpus = sum(gpus.get(n, 0) for n in run.plan.freed_nodes) - sum(
                gpus.get(n, 0) for n in run.plan.filled_nodes
            )
            run.plan = run.plan.model_copy(update={"freed_gpus": freed_gpus})
        return run

    def _let_go_quietly(self, run: Run) -> None:
        if not run.steerer.release_on_stop:
            return  # steering entries stay with the state: the next run's recovery resumes the wait, then removes them
        try:
            run.steerer.release(run)
        except Exception as exc:  # recovery releases them from the state and the marks
            log.error("could not release steering while stopping", extra={"nodes": run.state.held, "error": str(exc)})

    def _judge(self, run: Run, report: RunReport) -> None:
        """Measure what the cluster shows now; a run that did not get the planned result is not ``succeeded``."""
        try:
            report.outcome = self._measure(run)
        except ClusterError as exc:
            report.reason = "; ".join(filter(None, [report.reason, f"outcome not measured: {exc}"]))
            if report.status == RunStatus.SUCCEEDED:
                report.status = RunStatus.PARTIAL
            return
        failed_recuts = sorted(n for n, result in run.log.recuts.items() if result != "success")
        if report.status == RunStatus.SUCCEEDED and (not report.outcome.as_planned or failed_recuts):
            report.status = RunStatus.PARTIAL
            report.reason = "; ".join([report.outcome.summary(), *run.log.notes])
        log.info(
            run.said("run outcome", "simulated run outcome (dry run)"),
            extra={"plan": run.plan_id, "status": report.shown_status, **report.outcome.to_dict()},
        )

    def _measure(self, run: Run) -> Outcome:
        world = measure(run, self.dra_drivers)
        outcome = compare(run.state.free_before, world.whole_free, planned=run.plan.freed_gpus)
        outcome.pending_planned = len(run.plan.placed_pending)
        # a run that never reached its end steps placed nothing, even where the scheduler bound a pod on its own
        placed = (
            [p for p in run.plan.placed_pending if world.bound.get(p.pod) == p.to_node] if run.log.finishing else []
        )
        outcome.pending_placed = len(placed)
        outcome.evictions = run.state.evictions
        outcome.replacements_ready = sum(
            1 for m in run.plan.moves if m.pod in run.state.done and m.pod not in run.log.skipped
        )
        outcome.held_node_seconds = run.log.held_seconds
        outcome.holds = run.log.holds
        outcome.notes = list(run.log.notes)
        outcome.simulated = self.dry_run
        return outcome


def _save_first(run: Run) -> None:
    """The first write of a run, the state as it stands (not through ``Run.write_ahead``): a missing state namespace is
    said with the way out, before any change."""
    try:
        run.save()
    except ClusterError as exc:
        if exc.status == 404:
            raise Abort(
                AbortReason.CLUSTER_ERROR,
                f"cannot record the run's state ({exc}); create the state namespace "
                f"(kubectl create namespace {run.settings.executor.state_namespace}) or set executor.state_namespace",
            ) from None
        raise


def why_nothing_to_do(plan: CompactionPlan) -> str:
    """Why a plan moves nothing, in the words of its own explanations (issue 45: "nothing-to-do" used to come without a
    reason when everything was in its cooldown): a budget that held every move back, pods in their cooldown, else
    what keeps the pods in place, most first."""
    if plan.held_back:
        return plan.held_back
    cooling = plan.explanations.get("cooldowns") or {}
    staying = plan.explanations.get("unmovablePods") or {}
    if cooling:
        pod, why = next(iter(sorted(cooling.items())))
        count = sum(staying.get(r.value, 0) for r in (Unmovable.COOLDOWN, Unmovable.NODE_COOLDOWN)) or len(cooling)
        return f"{count} pod(s) in their cooldown ({pod}: {why}); no other move frees a node or places a pod"
    held = "; ".join(f"{count} pod(s) {reason}" for reason, count in list(staying.items())[:3])
    return "no move frees a GPU node or places a pending pod" + (f" (pods that may not move: {held})" if held else "")

"""Subcommands beyond ``report``: plan (and, as they land, apply/run/controller)."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from compactor.errors import CompactorError
from compactor.model.text import listed

log = logging.getLogger("compactor.commands")

if TYPE_CHECKING:
    from compactor.actions.client import ClusterClient
    from compactor.actions.clock import Clock
    from compactor.actions.executor import Progress, RunReport
    from compactor.actions.outcome import Outcome
    from compactor.actions.recovery import RecoveryReport
    from compactor.last_run import RunRecord
    from compactor.model.types import Snapshot, Taint
    from compactor.planner.history import Restraints
    from compactor.planner.plan import CompactionPlan, SteeringNote
    from compactor.settings import Settings


def cmd_plan(args: argparse.Namespace) -> int:
    from compactor.cli import is_live, settings_from_args, source_from_args
    from compactor.metrics.fragmentation import reference_shapes
    from compactor.planner.compose import build_plan
    from compactor.planner.explain import render_plan

    settings = settings_from_args(args)
    overrides = {k: v for k, v in (("time_limit_seconds", args.time_limit), ("max_moves", args.max_moves), ("objective", args.objective),
                                   ("seed", args.seed)) if v is not None}
    if args.seed is not None:
        overrides["deterministic"] = True  # a seed asks for the same plan again
    if args.max_moves is not None and args.objective is None:
        overrides["objective"] = "max-free"  # the freest point within the cap
    planner = settings.planner.model_copy(update=overrides) if overrides else settings.planner
    if args.seed is not None and args.seed < 0:
        raise CompactorError(f"--seed must be >= 0, got {args.seed}")
    if args.max_moves is not None and args.max_moves < 0:
        raise CompactorError(f"--max-moves must be >= 0, got {args.max_moves}")
    if args.time_limit is not None and args.time_limit <= 0:
        raise CompactorError(f"--time-limit must be > 0, got {args.time_limit}")
    if args.write:
        _check_writable(args.write)  # before planning: a plan solved for minutes must not be lost to a typo in the path
    from compactor.sources import check_selection, check_shapes, mig_parted_namespace

    source = source_from_args(args)
    loading = time.monotonic()
    snapshot = source.load(pool_label=settings.metrics.pool_label, mig_config_map=settings.mig.config_map,
                           mig_selector=settings.mig.selector, mig_namespace=mig_parted_namespace(settings, explain=args.explain_mig))
    loaded = time.monotonic() - loading  # reported apart: planner.time_limit_seconds bounds the planning only
    check_shapes(snapshot, settings)
    check_selection(snapshot, settings)
    shapes = reference_shapes(snapshot, configured=settings.metrics.shapes() or None,
                              coverage=settings.metrics.shape_coverage, max_shapes=settings.metrics.max_shapes)
    from compactor.planner.recut import mig_parted_for

    steering = _steering_in(_kube_client(args, dry_run=True), settings) if is_live(args) else None
    with _SolveProgress() as progress:
        plan = build_plan(snapshot, planner, source=source.describe(), now=datetime.now(UTC), shapes=shapes,
                          mig_parted=mig_parted_for(snapshot, settings), fence=_fence_for(steering, settings), load_seconds=loaded,
                          stage=progress.stage, restraints=_restraints(args, settings), budgets=settings.disruption)
    if args.explain_mig:
        advice, unavailable = _mig_advice(snapshot, settings.mig.config_map, settings.mig.operator_namespace)
        plan = plan.model_copy(update={"mig_advice": advice, "warnings": [*plan.warnings, *([unavailable] if unavailable else [])]})
    if steering is not None:
        plan = plan.model_copy(update={"steering": steering})
    if args.output == "html":  # the pictures before and after need the snapshot the plan was made on
        from compactor.html_report import render_plan_html

        text = render_plan_html(plan, snapshot, shapes)
    else:
        text = plan.to_json() if args.output == "json" else render_plan(plan, args.output) + _as_deployed(plan, settings)
    if args.write:
        try:
            with open(args.write, "w", encoding="utf-8") as fh:
                fh.write(plan.to_json())
        except OSError as exc:  # e.g. the disk filled while planning: the plan still goes to stdout
            sys.stdout.write(text)
            raise CompactorError(f"--write {args.write}: cannot write the plan ({exc.strerror}); it was printed above") from None
    sys.stdout.write(text)
    return 0


_MODE_DOES = {"report": "would only measure (mode: report)", "plan": "would dry-run this plan, changing nothing (mode: plan)",
              "apply": "would carry it out (mode: apply)"}


def _as_deployed(plan: CompactionPlan, settings: Settings) -> str:
    """What a cycle with these settings (the deployed ones, given --config) would do of the plan: the mode, and the whole
    nodes ``max_evictions_per_cycle`` lets one cycle take."""
    from compactor.actions.scope import within_cap
    from compactor.windows import window_state

    lines = [f"\nWith these settings a run {_MODE_DOES[settings.mode]}"]
    if settings.disruption.windows and settings.mode == "apply":
        state = window_state(settings.disruption.windows, datetime.now(UTC))
        lines.append(f"; now {state.why}" if state.open else f", but not now: {state.why}")
    cap = settings.executor.max_evictions_per_cycle
    if len(plan.moves) > cap:
        cut = within_cap(plan, cap, {})
        placing = f"placing {len(cut.placed_pending)} pending pod(s) and " if cut.placed_pending else ""
        lines.append(f"; one cycle would run {len(cut.moves)} of {len(plan.moves)} moves (executor.max_evictions_per_cycle {cap}, "
                     f"whole nodes only), {placing}freeing {listed(cut.freed_nodes) or 'no node'}; later cycles re-plan and go on")
    return "".join(lines) + ".\n"


def _check_writable(path: str) -> None:
    """``--write PATH`` names a file that can be created or replaced: its folder exists and is writable, it is no folder."""
    import os

    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise CompactorError(f"--write {path}: is a directory; name a file, e.g. {os.path.join(path, 'plan.json')}")
    if not os.path.isdir(folder):
        raise CompactorError(f"--write {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise CompactorError(f"--write {path}: not writable")


def _mig_advice(snapshot: Snapshot, config_map: str, namespace: str) -> tuple[list[dict[str, Any]], str | None]:
    """The MIG layout advice, or none and why it is unavailable (the plan itself stands: advice is an extra)."""
    from compactor.model.migparted import find_mig_parted, problems
    from compactor.planner.mig_advice import advise

    parted = find_mig_parted(snapshot.config_maps, config_map, namespace=namespace)
    if parted is None:
        where = config_map or f"{namespace}/custom-/default-mig-parted-config"
        why = (f"--explain-mig: MIG advice unavailable: no mig-parted ConfigMap {where} in the snapshot (include it: kubectl get ... "
               "configmaps; only the GPU Operator's namespace, mig.operator_namespace, is read)")
        log.warning(why)
        return [], why
    advice = [pool.to_dict() for pool in advise(snapshot, parted)]
    for config in parted.parsed():
        for problem in problems(config):
            log.warning(problem)
    return advice, None


def _steering_in(client: ClusterClient, settings: Settings) -> SteeringNote:
    """The mechanism a run would steer with in the cluster ``client`` reads (``executor.steering: policy`` without the policy
    says so here instead of failing: a plan is only read)."""
    from compactor.actions.steering.detect import choose
    from compactor.planner.plan import SteeringNote

    try:
        choice = choose(client, settings.executor)
    except CompactorError as exc:
        return SteeringNote(mechanism="policy", why=f"a run would fail before any change: {exc}")
    return SteeringNote(mechanism=choice.mechanism.value, why=choice.why)


def _fence_for(steering: SteeringNote | None, settings: Settings) -> Taint | None:
    """The fence a plan must reckon with under ``steering`` (None: planned without a cluster, as the settings say)."""
    from compactor.actions.steering.detect import offline_mechanism, planning_fence

    mechanism = steering.mechanism if steering is not None else offline_mechanism(settings.executor)
    return planning_fence(mechanism, settings.executor.identity)


def register_all(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from compactor.cli import _add_common_options, _add_source_options

    plan = commands.add_parser("plan", help="compute a compaction plan (dry run: changes nothing)")
    _add_source_options(plan)
    _add_common_options(plan)
    plan.add_argument("--output", "-o", choices=("text", "json", "markdown", "html"), default="text")
    plan.add_argument("--write", metavar="FILE", help="also write the plan as JSON to FILE (for compactor apply)")
    plan.add_argument("--time-limit", type=float, metavar="SECONDS", help="solver time limit (default from config: 10)")
    plan.add_argument("--max-moves", type=int, metavar="N", help="at most N moves: the point of the curve freeing the most within N "
                                                               "(unless --objective says otherwise)")
    plan.add_argument("--explain-mig", action="store_true", help="also say, per MIG pool, which named mig-parted layout would serve "
                                                                 "the demand best (advice: nothing is re-cut)")
    plan.add_argument("--objective", choices=("pending-only", "balanced", "max-free"),
                      help="which point of the trade-off curve to plan (default from config: balanced)")
    plan.add_argument("--seed", type=int, metavar="N", help="CP-SAT seed; implies planner.deterministic: the same snapshot, settings "
                                                             "and seed give the same plan")
    plan.add_argument("--shape", action="append", metavar="RES=QTY,...", help="reference request shape for the figures")
    plan.add_argument("--pool-label", metavar="LABEL", help="node label that groups nodes into pools")
    plan.set_defaults(handler=cmd_plan)
    register_executor_commands(commands)
    from compactor.controller import register as register_controller

    register_controller(commands)
    from compactor.config_command import register as register_config

    register_config(commands)


class _SolveProgress:
    """A log line every few seconds while a plan takes longer than PROGRESS_AFTER seconds: the stage, the time spent and
    the best plan so far, so a large cluster's 10-30 s solve is not silence (one JSON record each with --log-format json)."""

    AFTER = 2.0  # seconds of planning before the first line
    EVERY = 5.0  # seconds between lines within one stage

    def __init__(self) -> None:
        import threading

        self.began = time.monotonic()
        self.name, self.best, self.said = "", "", ""
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._tick, name="plan-progress", daemon=True)

    def __enter__(self) -> _SolveProgress:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.done.set()
        self.thread.join(timeout=1.0)

    def stage(self, name: str, best: str) -> None:
        self.name, self.best = name, best or self.best

    def _tick(self) -> None:
        last = 0.0
        while not self.done.wait(0.5):
            elapsed = time.monotonic() - self.began
            if elapsed < self.AFTER or (self.said == self.name and elapsed - last < self.EVERY):
                continue
            best = f"; best so far: {self.best}" if self.best else ""
            log.info(f"planning: {self.name}, {elapsed:.0f} s{best}")
            self.said, last = self.name, elapsed


_LOGGED_STEPS = ("evicting ", "would evict ")  # each eviction has its own log record: shown once, not twice


class _TerminalProgress:
    """Progress on stderr: one rewritten line on a terminal, plain lines otherwise (without the evictions, which are
    logged); with ``--log-format json`` a debug log record each, so stderr holds only JSON."""

    def __init__(self, log_format: str = "text") -> None:
        self.tty = sys.stderr.isatty() and log_format == "text"
        self.json = log_format == "json"
        self.last = ""

    def __call__(self, progress: Progress) -> None:
        wait = f" | waiting: {progress.waiting}" if progress.waiting else ""
        line = f"[{progress.done}/{progress.total}] {progress.current}{wait}"
        if line == self.last:
            return
        self.last = line
        if self.json:
            log.debug("progress", extra={"done": progress.done, "total": progress.total, "step": progress.current,
                                         "waiting": progress.waiting})
            return
        if not self.tty and progress.current.startswith(_LOGGED_STEPS):
            return
        if self.tty:
            sys.stderr.write("\r\x1b[2K" + line[:200])
            if progress.current == "done":
                sys.stderr.write("\n")
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()


def _executor_for(args: argparse.Namespace, plan: CompactionPlan | None) -> tuple[ClusterClient, Clock, bool]:
    """(client, clock, dry_run) for apply/run: the dry-run client swaps in, the logic stays (a dry run needs its plan here)."""
    from compactor.actions.clock import RealClock, SimulatedClock
    from compactor.actions.dryrun import RecordingClient
    from compactor.cli import is_live, settings_from_args

    live = is_live(args)
    if args.server_dry_run and not live:
        raise CompactorError("--server-dry-run asks a live API server whether each eviction would be admitted: name the cluster "
                             "(--kubeconfig/--context/--in-cluster) instead of --snapshot/--example")
    if args.dry_run or not live:
        if not args.dry_run:
            raise CompactorError("a snapshot cannot be changed: add --dry-run, or name a live cluster (--kubeconfig/--context/--in-cluster)")
        reader = _kube_client(args, dry_run=True) if live else None  # answers the steering probe as a real run's would be
        executor = settings_from_args(args).executor
        admitting = args.server_dry_run or executor.server_dry_run  # the setting: every live dry run asks the API server
        return RecordingClient(_raw_objects(args), plan, admission=reader if admitting else None, probe=reader,
                               namespace=executor.state_namespace), SimulatedClock(), True
    if args.server_dry_run:
        raise CompactorError("--server-dry-run goes with --dry-run")
    return _kube_client(args, dry_run=False), RealClock(), False


def _raw_objects(args: argparse.Namespace) -> list[dict[str, Any]]:
    from compactor.model.load import read_source
    from compactor.sources import example_path

    if args.example:
        return read_source(example_path())
    if args.snapshot:
        return [obj for path in args.snapshot for obj in read_source(path)]
    from compactor.kube.client import load_api_client
    from compactor.kube.read import read_cluster

    return read_cluster(load_api_client(args.kubeconfig, args.context, in_cluster=args.in_cluster))


def _kube_client(args: argparse.Namespace, *, dry_run: bool) -> ClusterClient:
    from compactor.cli import settings_from_args
    from compactor.kube.client import load_api_client
    from compactor.kube.cluster_client import KubeClusterClient

    settings = settings_from_args(args)
    api = load_api_client(args.kubeconfig, args.context, in_cluster=args.in_cluster)
    return KubeClusterClient(api, dry_run_all=dry_run, namespace=settings.executor.state_namespace,
                             write_timeout=settings.leader_election.write_timeout_seconds)


def _print_run(report: RunReport, client: ClusterClient, fmt: str, verbose: bool = False) -> int:
    """The run's report on stdout; a dry run also lists the calls a real run would make and what it cannot know."""
    import json

    from compactor.actions.dryrun import NOT_KNOWN_UNTIL_REAL_RUN, RecordingClient

    calls = client.intended_changes() if isinstance(client, RecordingClient) else None
    if fmt == "json":
        payload = report.to_dict()
        if isinstance(client, RecordingClient) and calls is not None:
            payload["intendedChanges"] = calls
            payload["intendedCalls"] = client.intended_calls()
            payload["notKnownUntilRealRun"] = list(NOT_KNOWN_UNTIL_REAL_RUN)
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    else:
        sys.stdout.write(_run_text(report, calls, verbose))
    return 0 if report.status in ("succeeded", "partial", "nothing-to-do") else 1


_DRY_VERDICTS = {"dry-run": "dry run", "failed": "dry run failed", "nothing-to-do": "nothing to do (dry run)"}


_CALL_KINDS = (  # (what a recorded call starts with or contains, how the summary names it), first match wins
    ("evict ", "evictions (policy/v1 Eviction)"),
    ("taint node/", "node taints and annotations (fences, reservations, releases)"),
    ("annotate node/", "node annotations"),
    ("event ", "events"),
    ("(executor state", "state ConfigMap writes (the executor's bookkeeping)"),
    ("patch pod/", "pod patches (tolerations for placed pending pods)"),
)


def _call_kind(call: str) -> str:
    return next((kind for mark, kind in _CALL_KINDS if call.startswith(mark) or mark in call), " ".join(call.split()[:2]))


def _calls_text(calls: list[str], verbose: bool) -> list[str]:
    """A dry run's calls: counted by kind, the full list with -v (and always in -o json)."""
    if verbose:
        return [f"(dry run) {line}" for line in calls]
    counts = Counter(map(_call_kind, calls))
    lines = [f"a real run would make {len(calls)} call(s) (-v lists each, -o json gives them all):"]
    lines += [f"  {n:5d}  {kind}" for kind, n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))]
    return lines


def _run_text(report: RunReport, calls: list[str] | None, verbose: bool = False) -> str:
    """The text report; a dry run words it as intentions, sums up its calls first and ends with what it cannot know."""
    from compactor.actions.dryrun import NOT_KNOWN_UNTIL_REAL_RUN

    dry = report.dry_run
    lines = _calls_text(calls or [], verbose) if dry and calls else []
    if dry:
        lines.append(f"plan {report.plan_id}: {_DRY_VERDICTS.get(report.shown_status, report.shown_status)}; "
                     f"{report.moves_done}/{report.moves_total} moves simulated")
    else:
        lines.append(f"plan {report.plan_id}: {report.status}; {report.moves_done}/{report.moves_total} moves done")
    if report.steering:
        lines.append(f"steering: {report.steering} ({report.steering_why})")
    if report.freed_nodes:
        lines.append(f"{'would free nodes' if dry else 'freed nodes'}: {listed(report.freed_nodes)}")
    if report.skipped_moves:
        lines.append(f"{'would skip' if dry else 'skipped'} (pod already gone or moved): {listed(report.skipped_moves)}")
    if report.reason:
        lines.append(f"reason: {report.reason}")
    text = "".join(f"{line}\n" for line in lines) + (_outcome_text(report.outcome) if report.outcome is not None else "")
    if dry:
        text += f"dry run: {len(calls or [])} call(s) {'shown' if verbose else 'summed up'} above; nothing was changed\n"
        if report.status != "nothing-to-do":
            text += f"not known until a real run: {'; '.join(NOT_KNOWN_UNTIL_REAL_RUN)}\n"
    return text


def _outcome_text(outcome: Outcome) -> str:
    """The outcome block: ``measured`` on the cluster after a real run, ``simulated`` (never measured) in a dry run."""
    how = "simulated (not measured)" if outcome.simulated else "measured"
    lines = [
        f"{how}: {outcome.freed_gpus:+d} whole-free GPUs (plan: {outcome.planned_freed_gpus:+d}); "
        f"nodes freed: {listed(outcome.freed_nodes) or 'none'}"
        + (f"; nodes taken: {listed(outcome.taken_nodes)}" if outcome.taken_nodes else ""),
        ("simulated: " if outcome.simulated else "")
        + f"pending pods placed as planned: {outcome.pending_placed}/{outcome.pending_planned}; evictions: {outcome.evictions}; "
        f"replacements Ready: {outcome.replacements_ready}; "
        + (f"node holds: {outcome.holds} (how long each lasts is not known until a real run)" if outcome.simulated
           else f"node holds: {outcome.holds}, {outcome.held_node_seconds:.1f} node-seconds"),
        *(f"note: {note}" for note in outcome.notes),
    ]
    return "".join(f"{line}\n" for line in lines)


@contextmanager
def _stoppable(clock: Clock, dry_run: bool) -> Iterator[Clock]:
    """SIGTERM/SIGINT stop a real run at its next wait (a safe point): the state stays, the next run recovers it."""
    import threading

    from compactor.actions.clock import StoppableClock, on_stop_signals

    if dry_run or threading.current_thread() is not threading.main_thread():
        yield clock
        return
    stop = threading.Event()
    with on_stop_signals(stop.set):
        yield StoppableClock(clock, stop)


@contextmanager
def _exclusive(client: ClusterClient, settings: Settings, dry_run: bool) -> Iterator[ClusterClient]:
    """Act only while holding the Lease the controller uses too, every write checked against it first (which narrows,
    not closes, the window for a second actor: see compactor/actions/fencing.py)."""
    from compactor.actions.fencing import FencedClient
    from compactor.controller import identity
    from compactor.kube.cluster_client import KubeClusterClient
    from compactor.kube.lease import LeaderElector, LeaseKeeper, acquire_once

    if dry_run or not isinstance(client, KubeClusterClient):
        yield client
        return
    elector = LeaderElector.configured(client.api_client, settings.executor.state_namespace, identity(), settings.leader_election)
    acquire_once(elector)
    with LeaseKeeper(elector):
        yield FencedClient(client, elector.holds, elector.ref)


def _say_recovered(recovered: RecoveryReport) -> None:
    """What recovery did before this run, on stderr: an interrupted plan's end, nodes released or kept."""
    if recovered.resumed is not None:
        resumed = recovered.resumed
        outcome = f"; {resumed.outcome.summary()}" if resumed.outcome else ""
        log.info(f"recovered plan {resumed.plan_id}: {resumed.status}{outcome}{f' ({resumed.reason})' if resumed.reason else ''}")
    if recovered.discarded:
        log.warning(f"recovery discarded the executor state: {recovered.discarded}")
    if recovered.released or recovered.expired:
        log.info(f"recovery released node(s): {', '.join([*recovered.released, *recovered.expired])}")


EXIT_STOPPED = 143  # 128 + SIGTERM, as a shell reports a process that a TERM stopped


def _stopped(plan_id: str) -> int:
    log.warning(f"stopped at a safe point{f' during plan {plan_id}' if plan_id else ''}; held nodes were released, "
                "the rest (cordons, the state ConfigMap) is resumed or rolled back by the next run's recovery")
    return EXIT_STOPPED


def _recover_and_execute(args: argparse.Namespace, settings: Settings, plan: CompactionPlan | None,
                         make_plan: Callable[[Taint | None], CompactionPlan] | None = None, *, record: RunRecord | None = None,
                         restraints: Restraints | None = None) -> int:
    """Under the Lease and the stop signals: recover (real runs), plan if not given, execute, print. ``restraints``: what
    the history forbids (a plan that undoes a recent move is refused).

    A real ``run --once`` plans only once it holds the Lease and has recovered: on the state it alone changes."""
    from compactor.actions.clock import Interrupted
    from compactor.actions.executor import Executor
    from compactor.actions.memory import reversals
    from compactor.actions.recovery import recover
    from compactor.actions.steering.detect import choose, planning_fence

    live, real_clock, dry_run = _executor_for(args, plan)
    with _stoppable(real_clock, dry_run) as clock, _exclusive(live, settings, dry_run) as client:
        try:
            if not dry_run:
                _say_recovered(recover(client, settings.executor, clock, rules=settings.planner))
            choice = None
            if plan is None:
                if make_plan is None:
                    raise CompactorError("no plan to carry out")
                choice = choose(client, settings.executor)  # the plan leaves in place what this steering cannot place
                plan = make_plan(planning_fence(choice.mechanism, settings.executor.identity))
            if make_plan is not None:  # `run` made the plan itself: say what it is about to do
                log.info(f"plan {plan.metadata.id}: {len(plan.moves)} move(s), frees {listed(plan.freed_nodes) or 'nothing'}")
            executor = Executor(client, settings.executor, clock, dry_run=dry_run, progress=_TerminalProgress(args.log_format), rules=settings.planner,
                                steering=choice)
            if record is not None:
                record.plan = plan
            if not dry_run and (undone := reversals(plan, restraints)):
                raise CompactorError(f"plan {plan.metadata.id} would undo recent moves ({listed(undone, 3)}): refused, to keep "
                                     "workloads from going back and forth (disruption.oscillation_hours)")
            report = executor.execute(plan)
            if record is not None:
                record.report = report
            if not dry_run:
                from compactor.actions.memory import remember_run

                remember_run(client, settings, plan, report, clock.now())
            return _print_run(report, client, args.output, args.verbose)
        except Interrupted:
            return _stopped(plan.metadata.id if plan else "")


def _restraints(args: argparse.Namespace, settings: Settings) -> Restraints | None:
    """What earlier runs' history forbids now (cooldowns, budgets, the circuit breaker), read from a live cluster; None
    for a snapshot file (it holds no history)."""
    from compactor.actions.memory import restraints_now
    from compactor.cli import is_live

    if not is_live(args):
        return None
    return restraints_now(_kube_client(args, dry_run=True), settings, datetime.now(UTC))


def _within_window(args: argparse.Namespace, settings: Settings) -> str | None:
    """Why a run that would act may not act now (outside every disruption window), or None when it may. A dry run
    changes nothing, so it may run at any time."""
    from compactor.windows import window_state

    if args.dry_run:
        return None
    state = window_state(settings.disruption.windows, datetime.now(UTC))
    return None if state.open else state.why


def _within_mode(args: argparse.Namespace, settings: Settings, *, command: str) -> None:
    """The configured mode only ever makes a run safer: plan turns it into a dry run, report (for ``run``) into a report.
    ``apply --plan`` names one plan to carry out, so outside apply mode it is refused rather than quietly simulated."""
    if settings.mode == "apply" or args.dry_run:
        return
    if command == "apply":
        raise CompactorError(f"mode is {settings.mode!r} (config or COMPACTOR_MODE): this installation does not act; add --dry-run "
                             "to see what the plan would do, or set mode: apply")
    if settings.mode == "plan":
        args.dry_run = True
        log.info("mode: plan: a dry run, nothing is changed (set mode: apply to act)")


def cmd_apply(args: argparse.Namespace) -> int:
    from compactor.cli import settings_from_args
    from compactor.planner.plan import load_plan

    settings = settings_from_args(args)
    _within_mode(args, settings, command="apply")
    if (closed := _within_window(args, settings)) is not None:
        raise CompactorError(f"{closed} (disruption.windows); --dry-run shows what the plan would do")
    restraints = None if args.dry_run else _restraints(args, settings)
    if restraints is not None and restraints.paused:
        raise CompactorError(f"{restraints.paused}; --dry-run shows what the plan would do")
    return _recover_and_execute(args, settings, load_plan(args.plan), restraints=restraints)


def _report_only(args: argparse.Namespace, settings: Settings, record: RunRecord | None = None) -> int:
    """``mode: report``: measure and print the figures; nothing is planned or changed."""
    from compactor.cli import source_from_args
    from compactor.metrics.fragmentation import compute_figures, reference_shapes
    from compactor.report import render_report
    from compactor.sources import check_shapes

    snapshot = source_from_args(args).load(pool_label=settings.metrics.pool_label)
    check_shapes(snapshot, settings)
    figures = compute_figures(snapshot, reference_shapes(snapshot, configured=settings.metrics.shapes() or None))
    if record is not None:
        record.saw(snapshot, figures.shapes, figures)
    log.info("mode: report: measured only, nothing planned or changed (set mode: plan or apply)")
    sys.stdout.write(render_report(figures, snapshot, "json" if args.output == "json" else "text"))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from compactor.cli import EXIT_BAD_INPUT, EXIT_FAILED, is_live, settings_from_args
    from compactor.last_run import RunRecord

    if not args.once:
        raise CompactorError("compactor run carries out one cycle and needs --once to say so; for cycles on a schedule run "
                             "`compactor controller --interval SECONDS` (or the CronJob in manifests/)")
    settings = settings_from_args(args)
    record = RunRecord(mode=settings.mode, installation=settings.executor.identity, started=datetime.now(UTC),
                       keep_figures=bool(settings.metrics.pushgateway_url) and is_live(args))
    try:
        code = _run_once(args, settings, record)
    except Exception as exc:  # a failed run is recorded too, then fails as it would have
        record.error = str(exc) or type(exc).__name__
        _leave_record(args, settings, record, EXIT_BAD_INPUT if isinstance(exc, CompactorError) else EXIT_FAILED)
        raise
    _leave_record(args, settings, record, code)
    return code


def _leave_record(args: argparse.Namespace, settings: Settings, record: RunRecord, exit_code: int) -> None:
    """A live run's summary ConfigMap and Event, and the Pushgateway if configured (compactor/last_run.py); never raises.
    Nothing for a snapshot file: there is no cluster to write to."""
    from compactor.cli import is_live, source_from_args
    from compactor.last_run import finish
    from compactor.sources import mig_parted_namespace

    if not is_live(args):
        return
    record.dry_run = bool(args.dry_run)
    try:
        # The run's own bookkeeping, like its log: written through the real client in every mode, dry runs included
        # (never through the recording client), and a failure to write it is a warning that leaves the exit code alone.
        finish(record, settings, exit_code=exit_code, client=lambda: _kube_client(args, dry_run=False),
               reload=lambda: source_from_args(args).load(pool_label=settings.metrics.pool_label, mig_config_map=settings.mig.config_map,
                                                         mig_selector=settings.mig.selector, mig_namespace=mig_parted_namespace(settings)))
    except Exception as exc:
        log.warning(f"could not record the run (the run itself is unaffected): {type(exc).__name__}: {exc}")


def _held(args: argparse.Namespace, record: RunRecord, why: str) -> int:
    """A run that changes nothing on purpose says so on stdout too (``status: held``), as its summary does."""
    import json

    record.held = why
    text = json.dumps({"status": "held", "reason": why, "movesDone": 0}) if args.output == "json" else f"held: {why}; nothing changed"
    sys.stdout.write(text + "\n")
    return 0


def _run_once(args: argparse.Namespace, settings: Settings, record: RunRecord) -> int:
    from compactor.cli import is_live, source_from_args
    from compactor.metrics.fragmentation import reference_shapes
    from compactor.planner.compose import build_plan
    from compactor.sources import check_selection, check_shapes, mig_parted_namespace

    if settings.mode == "report" and not args.dry_run:
        return _report_only(args, settings, record)
    _within_mode(args, settings, command="run")
    if (closed := _within_window(args, settings)) is not None:
        log.info(f"{closed}: this run changes nothing")
        return _held(args, record, closed)
    restraints = _restraints(args, settings)
    if restraints is not None and restraints.paused and not args.dry_run:
        log.warning(f"{restraints.paused}: this run changes nothing")
        return _held(args, record, restraints.paused)
    source = source_from_args(args)
    mig_namespace = mig_parted_namespace(settings)  # a mig.config_map outside the GPU Operator's namespace: refused before anything

    def plan_now(fence: Taint | None) -> CompactionPlan:
        snapshot = source.load(pool_label=settings.metrics.pool_label, mig_config_map=settings.mig.config_map,
                               mig_selector=settings.mig.selector, mig_namespace=mig_namespace)
        check_shapes(snapshot, settings)
        check_selection(snapshot, settings)
        shapes = reference_shapes(snapshot, configured=settings.metrics.shapes() or None)
        record.saw(snapshot, shapes)
        from compactor.planner.recut import mig_parted_for

        with _SolveProgress() as progress:
            return build_plan(snapshot, settings.planner, source=source.describe(), now=datetime.now(UTC), shapes=shapes,
                              mig_parted=mig_parted_for(snapshot, settings), fence=fence, stage=progress.stage, restraints=restraints,
                              budgets=settings.disruption)

    if args.dry_run:  # the dry-run client is made over the plan, so the steering is asked of the cluster (if any) first
        steering = _steering_in(_kube_client(args, dry_run=True), settings) if is_live(args) else None
        return _recover_and_execute(args, settings, plan_now(_fence_for(steering, settings)), plan_now, record=record,
                                    restraints=restraints)
    return _recover_and_execute(args, settings, None, plan_now, record=record, restraints=restraints)


def register_executor_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from compactor.cli import _add_common_options, _add_source_options

    apply = commands.add_parser("apply", help="carry out a plan written by `compactor plan --write`")
    apply.add_argument("--plan", required=True, metavar="FILE", help="plan JSON")
    run = commands.add_parser("run", help="plan and carry out one compaction cycle")
    run.add_argument("--once", action="store_true", help="one cycle, then exit")
    for parser in (apply, run):
        _add_source_options(parser)
        _add_common_options(parser)
        parser.add_argument("--dry-run", action="store_true", help="change nothing; print the calls a real run would make")
        parser.add_argument("--server-dry-run", action="store_true",
                            help="with --dry-run on a live cluster: ask the API server (dryRun=All) whether each eviction would be admitted")
        parser.add_argument("--output", "-o", choices=("text", "json"), default="text")
    run.add_argument("--shape", action="append", metavar="RES=QTY,...", help=argparse.SUPPRESS)
    apply.set_defaults(handler=cmd_apply)
    run.set_defaults(handler=cmd_run)

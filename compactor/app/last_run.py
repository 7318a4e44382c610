"""What ``compactor run --once`` leaves where people and Prometheus can see it, once its pod is gone.

A CronJob's run ends with its pod: nothing scrapes it and its log goes with the Job. So every ``run --once``
against a live cluster, in every mode (report, plan, apply) and however it ended (failed and stopped
included), ends with:

* the ConfigMap ``gpu-compactor-last-run`` in ``executor.state_namespace``, created or replaced, its key
  ``summary.json`` holding ``RunRecord.summary()``: the mode, the plan and its status, the moves, the freed
  GPUs planned and measured, the headline figures before and after (docs/metrics.md);
* one Event on that ConfigMap (``events.run_summary``: reason ``CompactorRunSummary``, Warning when the run
  failed) whose message is the summary in one line, also logged;
* with ``metrics.pushgateway_url``, the metric families the controller exports (``Exporter``: the figures,
  the run, the plan, the cycle) pushed to that Pushgateway, grouped by installation (the command gives the exporter:
  ``compactor.controller.exporter.Exporter``, a ``Pusher`` here). Each push replaces the group, so its counters count
  one run: the CronJob's alerts read the last run's gauges instead (``gpu_compactor_last_run_status``, its end, and the
  end of the last successful run, carried forward from the previous summary's ``lastSucceededAt``).

These are the run's own bookkeeping, like its log lines: they go through the real client even in a dry run
(never the recording one, whose writes are only shown), and they never change how the run ended: an API or
network error is logged as a warning and the exit code stays. A snapshot file has no cluster to write to:
nothing is written nor pushed then.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from compactor.actions.cluster import events
from compactor.actions.port.client import ClusterClient
from compactor.actions.recovery import RecoveryReport
from compactor.actions.run.context import AbortReason
from compactor.actions.services.report import RunReport
from compactor.app.figures import cordoned_nodes, figures_for
from compactor.errors import EXIT_STOPPED, ClusterError
from compactor.metrics.figures_json import headline_dict, headline_of_dict
from compactor.metrics.fragmentation import Figures, ReferenceShape, compute_figures
from compactor.model.types import Snapshot
from compactor.planner.plan import CompactionPlan
from compactor.render.summary import summary_line
from compactor.settings.origins import Settings
from compactor.statuses import CommandStatus, RunStatus

log = logging.getLogger("compactor.last_run")  # the name it had as compactor/last_run.py

LAST_RUN_CONFIGMAP = "gpu-compactor-last-run"
SUMMARY_KEY = "summary.json"
PUSH_JOB = "gpu-compactor"
PUSH_TIMEOUT_SECONDS = 10.0
_WRITE_ATTEMPTS = 2  # a replace that meets another writer's change (409) reads again once
# Every status a run ends with (``RunRecord.status``): the executor's (``RunReport.shown_status``), then measured (report
# mode), held (outside every window, or the circuit breaker open) and stopped (SIGTERM at a safe point: the Job's
# activeDeadlineSeconds, a drained node). The values of gpu_compactor_last_run_status{status}, pushed and exported.
LAST_RUN_STATUSES = (*RunStatus, *CommandStatus)
# Why a run rolled back (``RunReport.abort_reason``): the values of gpu_compactor_rollbacks_total{reason}.
ROLLBACK_REASONS = tuple(AbortReason)
# A run that did what its mode asks and got to its end: partial fell short of its plan, held changed nothing on purpose,
# failed and stopped did not finish. Its end is the summary's lastSucceededAt and
# gpu_compactor_last_run_success_timestamp_seconds.
SUCCESSFUL_STATUSES = frozenset(
    {RunStatus.SUCCEEDED, RunStatus.NOTHING_TO_DO, RunStatus.DRY_RUN, CommandStatus.MEASURED}
)
_ISO = "%Y-%m-%dT%H:%M:%SZ"


@dataclass
class RunRecord:
    """What one ``run --once`` saw and did, filled in as it goes (``commands.execute.cmd_run``)."""

    mode: str
    installation: str
    started: datetime
    keep_figures: bool = False  # the Pushgateway needs the figures themselves, not only the plan's copy of them
    dry_run: bool = False
    plan: CompactionPlan | None = None
    report: RunReport | None = None
    shapes: tuple[ReferenceShape, ...] | None = None
    figures: Figures | None = None  # measured before the run (report mode: all it does)
    fenced: int | None = None  # nodes carrying a fence mark, before the run
    figures_after: Figures | None = None  # measured after a real run that changed something
    fenced_after: int | None = None
    error: str = ""  # why the run stopped on an error (exit 2), empty otherwise
    held: str = ""  # why the run changed nothing on purpose (outside every disruption window, the circuit breaker open)
    recovery: RecoveryReport | None = (
        None  # a run that may not act cleared a dead run's leftovers (``carry_out.clean_up``)
    )
    # When the last successful run before this one ended, as the previous summary says (``finish`` reads it): each run
    # replaces the summary and the Pushgateway's group, so the last success is carried forward from run to run.
    succeeded_before: datetime | None = None

    @property
    def cleaned_up(self) -> str:
        """What the run cleared of a dead run's leftovers, in one line ("" when nothing)."""
        return self.recovery.said() if self.recovery is not None else ""

    def saw(self, snapshot: Snapshot, shapes: tuple[ReferenceShape, ...], figures: Figures | None = None) -> None:
        """The snapshot the run measured or planned on, and its reference shapes (the figures after are measured with them)."""
        self.shapes = shapes
        if figures is None and self.keep_figures:
            figures = compute_figures(snapshot, shapes)
        if figures is not None:
            self.figures, self.fenced = figures, cordoned_nodes(snapshot)

    def measure_after(self, snapshot: Snapshot, settings: Settings) -> None:
        """The figures after the run, measured with the shapes of the figures before (derived as ``report`` derives them
        when the run measured nothing before)."""
        self.figures_after, self.fenced_after = figures_for(snapshot, settings, self.shapes), cordoned_nodes(snapshot)

    def status(self, exit_code: int) -> str:
        """succeeded | partial | failed | nothing-to-do | dry-run (the run's report), measured (report mode), held (outside
        every window, or paused), stopped."""
        if self.error:
            return RunStatus.FAILED
        if self.held:
            return CommandStatus.HELD
        if self.report is not None:
            return self.report.shown_status
        if exit_code == EXIT_STOPPED:
            return CommandStatus.STOPPED
        return CommandStatus.MEASURED if self.plan is None else RunStatus.FAILED

    def failed(self, exit_code: int) -> bool:
        return self.status(exit_code) == RunStatus.FAILED

    def last_success(self, *, ended: datetime, exit_code: int) -> datetime | None:
        """When the last successful run ended: this one if it succeeded (``SUCCESSFUL_STATUSES``), else the one before
        (None when none is known)."""
        return ended if self.status(exit_code) in SUCCESSFUL_STATUSES else self.succeeded_before

    def summary(self, *, ended: datetime, exit_code: int) -> dict[str, Any]:
        """The ``summary.json`` of the ConfigMap (docs/controller.md lists every field)."""
        plan, report = self.plan, self.report
        outcome = report.outcome if report is not None else None
        # a dry run's outcome is simulated: never shown as measured
        measured = outcome is not None and not outcome.simulated
        before = (
            headline_dict(self.figures)
            if self.figures is not None
            else headline_of_dict(plan.before)
            if plan is not None
            else None
        )
        after = headline_dict(self.figures_after) if self.figures_after is not None else None
        if after is None and report is not None and not report.dry_run and report.status == RunStatus.NOTHING_TO_DO:
            after = before  # nothing was changed
        return {
            "mode": self.mode,
            "dryRun": self.dry_run,
            "installation": self.installation,
            "planId": plan.metadata.id if plan is not None else None,
            "status": self.status(exit_code),
            "reason": self.error or self.held or (report.reason if report is not None else ""),
            "cleanedUp": self.cleaned_up,
            "exitCode": exit_code,
            "movesPlanned": len(plan.moves) if plan is not None else None,
            "movesDone": report.moves_done if report is not None else None,
            "freedNodes": list(report.freed_nodes) if report is not None else [],
            "freedGpusPlanned": plan.freed_gpus if plan is not None else None,
            "freedGpusMeasured": outcome.freed_gpus if measured and outcome is not None else None,
            "pendingPodsPlanned": len(plan.placed_pending) if plan is not None else None,
            "pendingPodsPlaced": outcome.pending_placed if measured and outcome is not None else None,
            "steering": report.steering if report is not None else "",
            "before": before,
            "after": after,
            "plannedAfter": headline_of_dict(plan.after) if plan is not None and plan.after else None,
            "startedAt": _iso(self.started),
            "endedAt": _iso(ended),
            "lastSucceededAt": _iso_or_none(self.last_success(ended=ended, exit_code=exit_code)),
        }


class RunRecorder(Protocol):
    """What counts a run's outcome: the controller's exporter, for a cycle's run and for a pushed ``run --once``."""

    def record_run(
        self,
        status: str,
        *,
        evictions: int = 0,
        gained: tuple[int, int] | None = None,
        recuts: tuple[str, ...] = (),
        steering: str = "",
        steering_not_in_effect: bool = False,
        abort_reason: str | None = None,
    ) -> None: ...


def record_report(recorder: RunRecorder, report: RunReport) -> None:
    """``report`` counted as the metrics say a run: its status, evictions, gain, re-cuts, steering, why it rolled back."""
    recorder.record_run(
        report.shown_status,
        evictions=evictions(report),
        gained=gained(report),
        recuts=tuple(report.recuts.values()),
        steering=report.steering,
        steering_not_in_effect=report.steering_not_in_effect,
        abort_reason=report.abort_reason,
    )


def gained(report: RunReport) -> tuple[int, int] | None:
    """(measured, planned) whole-free GPUs of a real run; dry runs measure a world that only pretends to change."""
    if report.dry_run or report.outcome is None:
        return None
    return report.outcome.freed_gpus, report.outcome.planned_freed_gpus


def evictions(report: RunReport) -> int:
    """The evictions a run made (none in a dry run)."""
    return 0 if report.dry_run else max(0, report.moves_done - len(report.skipped_moves))


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime(_ISO)


def _iso_or_none(moment: datetime | None) -> str | None:
    return None if moment is None else _iso(moment)


def _parsed_iso(text: Any) -> datetime | None:
    try:
        return datetime.strptime(text, _ISO).replace(tzinfo=UTC)
    except (TypeError, ValueError):
        return None


def last_success_in(previous: dict[str, Any] | None) -> datetime | None:
    """When the last successful run ended, as the previous run's summary says (None when it does not say)."""
    if previous is None:
        return None
    if "lastSucceededAt" in previous:
        return _parsed_iso(previous["lastSucceededAt"])
    # a summary written before lastSucceededAt existed still tells whether its own run succeeded
    return _parsed_iso(previous.get("endedAt")) if previous.get("status") in SUCCESSFUL_STATUSES else None


def read_previous(client: ClusterClient, namespace: str) -> tuple[bool, dict[str, Any] | None]:
    """(read, summary): the summary the previous run left, None when there is none or it is not a JSON object; ``read`` is
    False when the ConfigMap could not be read (logged: the write after it says whether the API answers)."""
    try:
        data = client.read_state(LAST_RUN_CONFIGMAP)
    except Exception as exc:
        log.info(f"could not read the previous run's summary in configmap {namespace}/{LAST_RUN_CONFIGMAP}: {exc}")
        return False, None
    try:
        previous = json.loads((data or {}).get(SUMMARY_KEY) or "null")
    except ValueError:
        previous = None
    return True, previous if isinstance(previous, dict) else None


def write_summary(
    client: ClusterClient, namespace: str, summary: dict[str, Any], *, failed: bool, read: bool = False
) -> None:
    """Create or replace the ConfigMap, then send the Event on it; either failing is a warning, never raised.

    ``read``: ``client`` has just read the ConfigMap (``read_previous``), so the first write replaces that version."""
    data = {SUMMARY_KEY: json.dumps(summary, indent=2) + "\n"}
    where = f"configmap {namespace}/{LAST_RUN_CONFIGMAP}"
    for attempt in range(1, _WRITE_ATTEMPTS + 1):
        try:
            # its resourceVersion: the write replaces it (PUT), or creates it (POST)
            if attempt > 1 or not read:
                client.read_state(LAST_RUN_CONFIGMAP)
            client.write_state(LAST_RUN_CONFIGMAP, data)
            break
        except ClusterError as exc:
            if exc.status == 409 and attempt < _WRITE_ATTEMPTS:
                continue
            log.warning(f"could not record the run in {where} (the run itself is unaffected): {exc}")
            break
        except Exception as exc:  # the run's bookkeeping never fails the run
            log.warning(
                f"could not record the run in {where} (the run itself is unaffected): {type(exc).__name__}: {exc}"
            )
            break
    event = events.run_summary(namespace, LAST_RUN_CONFIGMAP, summary_line(summary), failed=failed)
    try:
        client.create_event(event.involved, reason=event.reason, message=event.message, type_=event.type)
    except Exception as exc:
        log.warning(f"could not send the {event.reason} Event on {where} (the run itself is unaffected): {exc}")


class Pusher(RunRecorder, Protocol):
    """The metric families of one run, pushed to a Pushgateway (``compactor.controller.exporter.Exporter``)."""

    def set_figures(self, figures: Figures, *, cordoned_nodes: int | None = None) -> None: ...

    def record_plan(self, *, seconds: float, gap: float | None, moves: int) -> None: ...

    def set_leader(self, leader: bool) -> None: ...

    def record_cycle_error(self) -> None: ...

    def record_cycle(self, timestamp: float) -> None: ...

    def record_last_run(self, status: str, *, ended: float, succeeded_at: float | None = None) -> None: ...

    def push(self, url: str, *, job: str, grouping_key: dict[str, str], timeout: float) -> None: ...


def push(url: str, record: RunRecord, *, exit_code: int, ended: datetime, exporter: Pusher) -> None:
    """The metric families the controller exports, for this run, pushed to the Pushgateway at ``url`` through ``exporter``
    (a fresh one: replacing this installation's group); a failure is a warning, never raised."""
    figures = record.figures_after if record.figures_after is not None else record.figures
    if figures is not None:
        fenced = record.fenced_after if record.figures_after is not None else record.fenced
        exporter.set_figures(figures, cordoned_nodes=fenced)
    plan, report = record.plan, record.report
    if plan is not None:
        exporter.record_plan(seconds=plan.solver.plan_seconds, gap=plan.solver.gap, moves=len(plan.moves))
    if report is not None:
        record_report(exporter, report)
        exporter.set_leader(not report.dry_run)  # a real run acted under the Lease
    if record.error:
        exporter.record_cycle_error()
    elif exit_code != EXIT_STOPPED:
        exporter.record_cycle(ended.timestamp())
    # What the CronJob's alerts read (manifests/monitoring): counters pushed by each run count that run only, so increase()
    # sees no series of runs; these gauges say how the last run ended, when, and when the last success ended.
    succeeded = record.last_success(ended=ended, exit_code=exit_code)
    exporter.record_last_run(
        record.status(exit_code),
        ended=ended.timestamp(),
        succeeded_at=None if succeeded is None else succeeded.timestamp(),
    )
    try:
        exporter.push(
            url, job=PUSH_JOB, grouping_key={"installation": record.installation}, timeout=PUSH_TIMEOUT_SECONDS
        )
    except Exception as exc:  # unreachable, refused, a proxy's error page: the run is what it was
        log.warning(f"could not push the run's metrics to the Pushgateway {url} (the run itself is unaffected): {exc}")
    else:
        log.info(f"pushed the run's metrics to the Pushgateway {url}")


def finish(
    record: RunRecord,
    settings: Settings,
    *,
    exit_code: int,
    client: Callable[[], ClusterClient],
    exporter: Callable[[], Pusher],
) -> None:
    """At the end of a live ``run --once``: write the summary and its Event through ``client()`` (a real client, whatever
    the run's mode), push the metrics through ``exporter()`` if configured. The figures after a real run that changed
    something were measured by the run's cycle (``cycle.py``)."""
    ended = datetime.now(UTC)
    namespace = settings.executor.state_namespace
    writer: ClusterClient | None = None
    try:
        writer = client()
    except Exception as exc:
        log.warning(f"could not record the run in configmap {namespace}/{LAST_RUN_CONFIGMAP}: {exc}")
    read = False
    if writer is not None:
        read, previous = read_previous(writer, namespace)
        record.succeeded_before = last_success_in(previous)
    summary = record.summary(ended=ended, exit_code=exit_code)
    failed = record.failed(exit_code)
    line = summary_line(summary)
    if failed:
        log.warning(line)
    else:
        log.info(line)
    if writer is not None:
        try:
            write_summary(writer, namespace, summary, failed=failed, read=read)
        finally:
            close = getattr(writer, "close", None)
            if callable(close):
                close()
    if settings.metrics.pushgateway_url:
        push(settings.metrics.pushgateway_url, record, exit_code=exit_code, ended=ended, exporter=exporter())

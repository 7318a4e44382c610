"""A run's report as the commands print it (a dry run's intended calls summed up, the outcome), a held run, and what a
plan would do with the deployed settings. Text and JSON returned, never printed: the command writes it."""

from __future__ import annotations

import json
from collections import Counter

from compactor.actions.dryrun import NOT_KNOWN_UNTIL_REAL_RUN, RecordingClient, not_known_until_real_run
from compactor.actions.port.client import ClusterClient
from compactor.actions.services.outcome import Outcome
from compactor.actions.services.report import RunReport
from compactor.model.numbers import fmt_change
from compactor.model.shorten import listed
from compactor.planner.plan import CompactionPlan
from compactor.planner.rules.budgets import EvictionCap
from compactor.settings.origins import Settings
from compactor.statuses import FINISHED, CommandStatus, RunStatus


def run_output(report: RunReport, client: ClusterClient, fmt: str, verbose: bool = False) -> tuple[str, int]:
    """The run's report and the command's exit code (0 when the run finished); a dry run also lists the calls a real run
    would make and what it cannot know."""
    calls = client.intended_changes() if isinstance(client, RecordingClient) else None
    code = 0 if report.status in FINISHED else 1
    if fmt != "json":
        unknown = not_known_until_real_run(client) if isinstance(client, RecordingClient) else ()
        return run_text(report, calls, verbose, unknown), code
    payload = report.to_dict()
    if isinstance(client, RecordingClient) and calls is not None:
        payload["intendedChanges"] = calls
        payload["intendedCalls"] = client.intended_calls()
        payload["notKnownUntilRealRun"] = list(not_known_until_real_run(client))
    return json.dumps(payload, indent=2) + "\n", code


def held_text(why: str, fmt: str, cleaned_up: str = "") -> str:
    """A run that changes nothing on purpose says so on stdout too (``status: held``), as its summary does, with what it
    cleared of a dead run's leftovers (``cleaned_up``)."""
    if fmt == "json":
        return json.dumps({"status": CommandStatus.HELD, "reason": why, "movesDone": 0, "cleanedUp": cleaned_up}) + "\n"
    nothing = "no move made" if cleaned_up else "nothing changed"
    return (
        f"held: {why}; {nothing}" + (f"; cleaned up a dead run's leftovers: {cleaned_up}" if cleaned_up else "") + "\n"
    )


_DRY_VERDICTS: dict[str, str] = {
    RunStatus.DRY_RUN: "dry run",
    RunStatus.FAILED: "dry run failed",
    RunStatus.NOTHING_TO_DO: "nothing to do (dry run)",
}


_CALL_KINDS = (  # (what a recorded call starts with or contains, how the summary names it), first match wins
    ("evict ", "evictions (policy/v1 Eviction)"),
    ("taint node/", "node taints and annotations (fences, reservations, releases)"),
    ("annotate node/", "node annotations"),
    ("event ", "events"),
    ("(executor state", "state ConfigMap writes (the executor's bookkeeping)"),
    ("patch pod/", "pod patches (tolerations for placed pending pods)"),
)


def _call_kind(call: str) -> str:
    return next(
        (kind for mark, kind in _CALL_KINDS if call.startswith(mark) or mark in call), " ".join(call.split()[:2])
    )


def calls_text(calls: list[str], verbose: bool) -> list[str]:
    """A dry run's calls: counted by kind, the full list with -v (and always in -o json)."""
    if verbose:
        return [f"(dry run) {line}" for line in calls]
    counts = Counter(map(_call_kind, calls))
    lines = [f"a real run would make {len(calls)} call(s) (-v lists each, -o json gives them all):"]
    lines += [f"  {n:5d}  {kind}" for kind, n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))]
    return lines


def run_text(report: RunReport, calls: list[str] | None, verbose: bool = False, unknown: tuple[str, ...] = ()) -> str:
    """The text report; a dry run words it as intentions, sums up its calls first and ends with what it cannot know."""
    dry = report.dry_run
    lines = calls_text(calls or [], verbose) if dry and calls else []
    if dry:
        lines.append(
            f"plan {report.plan_id}: {_DRY_VERDICTS.get(report.shown_status, report.shown_status)}; "
            f"{report.moves_done}/{report.moves_total} moves simulated"
        )
    else:
        lines.append(f"plan {report.plan_id}: {report.status}; {report.moves_done}/{report.moves_total} moves done")
    if report.steering:
        lines.append(f"steering: {report.steering} ({report.steering_why})")
    if report.freed_nodes:
        lines.append(f"{'would free nodes' if dry else 'freed nodes'}: {listed(report.freed_nodes)}")
    if report.skipped_moves:
        lines.append(
            f"{'would skip' if dry else 'skipped'} (pod already gone or moved): {listed(report.skipped_moves)}"
        )
    if report.reason:
        lines.append(f"reason: {report.reason}")
    lines += [
        f"planned again: an earlier plan went stale before its first eviction ({why})" for why in report.replanned
    ]
    text = "".join(f"{line}\n" for line in lines) + (outcome_text(report.outcome) if report.outcome is not None else "")
    if dry:
        text += (
            f"dry run: {len(calls or [])} call(s) {'shown' if verbose else 'summed up'} above; nothing was changed\n"
        )
        if report.status != RunStatus.NOTHING_TO_DO:
            text += f"not known until a real run: {'; '.join(unknown or NOT_KNOWN_UNTIL_REAL_RUN)}\n"
    return text


def outcome_text(outcome: Outcome) -> str:
    """The outcome block: ``measured`` on the cluster after a real run, ``simulated`` (never measured) in a dry run."""
    how = "simulated (not measured)" if outcome.simulated else "measured"
    lines = [
        f"{how}: {fmt_change(outcome.freed_gpus)} whole-free GPUs (plan: {fmt_change(outcome.planned_freed_gpus)}); "
        f"nodes freed: {listed(outcome.freed_nodes) or 'none'}"
        + (f"; nodes taken: {listed(outcome.taken_nodes)}" if outcome.taken_nodes else ""),
        ("simulated: " if outcome.simulated else "")
        + f"pending pods placed as planned: {outcome.pending_placed}/{outcome.pending_planned}; evictions: {outcome.evictions}; "
        f"replacements Ready: {outcome.replacements_ready}; "
        + (
            f"node holds: {outcome.holds} (how long each lasts is not known until a real run)"
            if outcome.simulated
            else f"node holds: {outcome.holds}, {outcome.held_node_seconds:.1f} node-seconds"
        ),
        *(f"note: {note}" for note in outcome.notes),
    ]
    return "".join(f"{line}\n" for line in lines)


_MODE_DOES = {
    "report": "would only measure (mode: report)",
    "plan": "would dry-run this plan, changing nothing (mode: plan)",
    "apply": "would carry it out (mode: apply)",
}


def as_deployed(plan: CompactionPlan, settings: Settings, window: tuple[bool, str] | None) -> str:
    """What a cycle with these settings (the deployed ones, given --config) would do of the plan: the mode, whether the
    disruption ``window`` (open, why; None when none is configured) lets it act now, and the whole nodes
    ``max_evictions_per_cycle`` lets one cycle take."""
    lines = [f"\nWith these settings a run {_MODE_DOES[settings.mode]}"]
    if window is not None and settings.mode == "apply":
        open_now, why = window
        lines.append(f"; now {why}" if open_now else f", but not now: {why}")
    cap = EvictionCap.of(settings.caps)
    cut = cap.one_run(plan)
    if cut is not None:
        placing = f"placing {len(cut.placed_pending)} pending pod(s) and " if cut.placed_pending else ""
        lines.append(
            f"; one cycle would run {len(cut.moves)} of {len(plan.moves)} moves (caps.max_evictions_per_cycle {cap.most}, "
            f"whole nodes only), {placing}freeing {listed(cut.freed_nodes) or 'no node'}; later cycles re-plan and go on"
        )
    return "".join(lines) + ".\n"

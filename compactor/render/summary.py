"""A ``run --once``'s summary (``app.last_run.RunRecord.summary``) in one line: the message of its Event and its log line.

Apart from the other renderers because it reads the summary's JSON form, the one the ConfigMap holds, not the run's
objects: what the line says is what an operator finds in ``gpu-compactor-last-run``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _share(value: Any) -> str:
    return "-" if value is None else f"{float(value):.1%}"


def _figures_line(before: dict[str, Any], after: dict[str, Any] | None, planned: bool) -> str:
    def pair(key: str, shown: Callable[[Any], str] = str) -> str:
        return shown(before.get(key)) + ("" if after is None else f" -> {shown(after.get(key))}")

    return (
        f"whole-free GPUs {pair('wholeFreeGpus')}, blocked demand {pair('blockedDemandGpuEquivalents', lambda v: f'{v:g}')} "
        f"GPU-equivalents, stranded share {pair('strandedShare', _share)}"
        + (" (after: as planned, not measured)" if planned else "")
    )


def summary_line(summary: dict[str, Any]) -> str:
    """The summary in one line: the Event's message and the log line."""
    dry = bool(summary["dryRun"])
    parts = [
        f"run --once (mode {summary['mode']}{', dry run' if dry else ''}): "
        + (f"plan {summary['planId']} {summary['status']}" if summary["planId"] else str(summary["status"]))
    ]
    if summary["movesDone"] is not None:
        parts.append(f"{summary['movesDone']}/{summary['movesPlanned']} moves {'simulated' if dry else 'done'}")
    elif summary["movesPlanned"] is not None:
        parts.append(f"{summary['movesPlanned']} moves planned")
    if summary["freedGpusMeasured"] is not None:
        parts.append(
            f"{summary['freedGpusMeasured']:+d} whole-free GPUs measured (plan: {summary['freedGpusPlanned']:+d}); "
            f"pending pods placed {summary['pendingPodsPlaced']}/{summary['pendingPodsPlanned']}"
        )
    elif summary["freedGpusPlanned"] is not None:
        parts.append(
            f"the plan frees {summary['freedGpusPlanned']} GPU(s) and places {summary['pendingPodsPlanned']} pending pod(s)"
        )
    before = summary["before"]
    if isinstance(before, dict):
        after, planned = summary["after"], False
        if after is None and summary["plannedAfter"] is not None:
            after, planned = summary["plannedAfter"], True
        parts.append(_figures_line(before, after, planned))
    if summary["reason"]:
        parts.append(f"reason: {summary['reason']}")
    return "; ".join(parts)

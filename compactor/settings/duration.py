"""How long one run may take under the settings: the bound a CronJob's ``activeDeadlineSeconds`` must cover and a
controller cycle is judged stuck against (docs/executor.md, docs/controller.md)."""

from __future__ import annotations

from compactor.settings.load import Settings


def worst_case_run_seconds(settings: Settings, *, pending_pods: int = 1, grace_seconds: float = 30.0) -> float:
    """An upper bound on one ``run --once`` under ``settings``: planning, every eviction the run may start, finishing.

    ``grace_seconds``: the longest ``terminationGracePeriodSeconds`` among movable pods (30 is the API default).
    """
    ex, planner = settings.executor, settings.planner
    # A make-before-break move (opt-in per pod, so possibly any) waits once more: every replica Ready, the old pod gone.
    per_move = (
        ex.eviction_retry_limit * ex.backoff_max_seconds
        + 2 * ex.replacement_timeout_seconds
        + 2 * grace_seconds
        + ex.steer_timeout_seconds
    )
    moves = min(
        ex.max_evictions_per_cycle, planner.max_moves if planner.max_moves is not None else ex.max_evictions_per_cycle
    )
    evicting = moves * per_move if ex.max_run_seconds is None else min(moves * per_move, ex.max_run_seconds + per_move)
    planning = 3 * planner.time_limit_seconds + 120  # solver levels, reading the cluster, recovery
    finishing = pending_pods * ex.steer_timeout_seconds + ex.replacement_timeout_seconds + grace_seconds
    if planner.mig_repartition:  # one re-cut per pending pod at most, each waited for in turn
        finishing += pending_pods * ex.mig_reconfigure_timeout_seconds
    if ex.after_drain == "taint":  # the run waits for its reservations to be used, at most their TTL
        finishing += ex.taint_ttl_seconds + ex.poll_seconds
    return planning + evicting + finishing

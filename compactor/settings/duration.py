"""How long one run may take under the settings: the bound a CronJob's ``activeDeadlineSeconds`` must cover and a
controller cycle is judged stuck against (docs/executor.md, docs/controller.md)."""

from __future__ import annotations

from compactor.settings.origins import Settings


def worst_case_run_seconds(settings: Settings, *, pending_pods: int = 1, grace_seconds: float = 30.0) -> float:
    """An upper bound on one ``run --once`` under ``settings``: planning, every eviction the run may start, finishing.

    ``grace_seconds``: the longest ``terminationGracePeriodSeconds`` among movable pods (30 is the API default).
    """
    ex, caps, steering = settings.executor, settings.caps, settings.steering
    # A make-before-break move (opt-in per pod, so possibly any) waits once more: every replica Ready, the old pod gone.
    per_move = (
        ex.eviction_retry_limit * ex.backoff_max_seconds
        + 2 * ex.replacement_timeout_seconds
        + 2 * grace_seconds
        + steering.steer_timeout_seconds
    )
    moves = min(
        caps.max_evictions_per_cycle, caps.max_moves if caps.max_moves is not None else caps.max_evictions_per_cycle
    )
    evicting = (
        moves * per_move if caps.max_run_seconds is None else min(moves * per_move, caps.max_run_seconds + per_move)
    )
    planning = 3 * settings.solver.time_limit_seconds + 120  # solver levels, reading the cluster, recovery
    finishing = pending_pods * steering.steer_timeout_seconds + ex.replacement_timeout_seconds + grace_seconds
    if settings.mig.repartition:  # one re-cut per pending pod at most, each waited for in turn
        finishing += pending_pods * settings.mig.reconfigure_timeout_seconds
    if ex.after_drain == "taint":  # the run waits for its reservations to be used, at most their TTL
        finishing += ex.taint_ttl_seconds + ex.poll_seconds
    return planning + evicting + finishing

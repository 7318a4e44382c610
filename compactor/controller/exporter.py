"""Prometheus metrics of the controller: the last computed figures and the outcome of every run.

It lives beside the controller loop, not in ``compactor.metrics`` (which stays pure: figures only); ``run --once``
pushes the same families to a Pushgateway (``compactor.last_run``).

The only module that imports ``prometheus_client``. ``Exporter`` is a custom collector:
each scrape yields the series of the *last* ``Figures`` it was given, so a pool or
node that disappeared from the cluster disappears from ``/metrics`` with the next
cycle instead of lingering as a stale series. Counters (runs, rollbacks, evictions,
cycle errors) live across cycles. The registry is injected, so tests (and several
controllers in one process) never share the global one.

Metric names are what ``manifests/monitoring/prometheusrule.yaml`` alerts on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest, push_to_gateway
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from compactor.app.last_run import LAST_RUN_STATUSES, ROLLBACK_REASONS, SUCCESSFUL_STATUSES
from compactor.metrics.figure_types import AggregateFigures, Figures
from compactor.statuses import RunStatus

PREFIX = "gpu_compactor_"
RUN_STATUSES = tuple(RunStatus)  # dry-run: walked a plan, changed nothing
RECUT_RESULTS = ("success", "failed", "timeout")
# compactor.actions.run.steerer.Mechanism, named here to keep metrics pure
STEERING_MECHANISMS = (
    "policy",
    "holds",
    "off",
)


class Exporter(Collector):
    """Collector over the last figures and the counters of the controller; thread-safe.

    Registers itself in ``registry`` (a fresh ``CollectorRegistry`` when none is given).
    """

    def __init__(self, registry: CollectorRegistry | None = None, *, clock: Callable[[], float] = time.time) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=False)
        # Unix seconds, read when a controller's run ends: ``record_run`` is told the status, not the time
        self._clock = clock
        self._lock = threading.Lock()
        self._figures: Figures | None = None
        self._fenced: int | None = None  # nodes carrying a fence mark
        self._runs: dict[str, int] = dict.fromkeys(RUN_STATUSES, 0)
        self._rollbacks: dict[str, int] = dict.fromkeys(ROLLBACK_REASONS, 0)
        self._evictions = 0
        self._cycle_errors = 0
        self._pending_triggers = 0
        # seconds from the cycle a blocked GPU pod started to its binding: a count per bucket, and their sum
        self._bound_after = BoundAfter()
        self._last_cycle: float | None = None
        self._leader = False
        self._gained: tuple[int, int] | None = None
        self._recuts: dict[str, int] = dict.fromkeys(RECUT_RESULTS, 0)
        self._steering: str | None = None
        self._steering_runs: dict[str, int] = dict.fromkeys(STEERING_MECHANISMS, 0)
        self._not_in_effect = False
        self._plan: tuple[float, float | None, int] | None = None
        self._paused_until: float | None = None  # Unix seconds the circuit breaker pauses runs until; 0 when not paused
        self._last_run: tuple[str, float] | None = None  # (status, Unix seconds it ended)
        self._last_success: float | None = None  # Unix seconds the last successful run ended
        self.registry.register(self)

    # ----- updates (from the controller loop) ------------------------------------------

    def set_figures(self, figures: Figures, *, cordoned_nodes: int | None = None) -> None:
        """Replace the figures every per-pool series comes from (pools absent here vanish from /metrics); ``cordoned_nodes``
        (the name callers pass it by): the nodes carrying a fence mark, ``compactor.app.figures.cordoned_nodes``."""
        with self._lock:
            self._figures = figures
            if cordoned_nodes is not None:
                self._fenced = cordoned_nodes

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
    ) -> None:
        """One executor run ended, now, with ``status`` (succeeded | partial | failed | nothing-to-do | dry-run) after
        ``evictions`` evictions; it is also the last run (``record_last_run``) as of the exporter's clock.

        ``gained``: (measured, planned) net whole-free GPUs of the run, when it was measured; ``recuts``: the result of
        each MIG re-cut it attempted (success | failed | timeout); ``steering``: the mechanism in force (policy | holds | off);
        ``steering_not_in_effect``: the policy is installed but runs concluded it does not pin (actions/steering/evidence.py);
        ``abort_reason``: why the run rolled back, when it did (one of ``ROLLBACK_REASONS``: the report's abortReason).
        """
        if status not in RUN_STATUSES:
            raise ValueError(f"unknown run status {status!r}; expected {RUN_STATUSES}")
        if evictions < 0:
            raise ValueError(f"evictions must be >= 0, got {evictions}")
        unknown = sorted(set(recuts) - set(RECUT_RESULTS))
        if unknown:
            raise ValueError(f"unknown re-cut result(s) {unknown}; expected {RECUT_RESULTS}")
        if steering and steering not in STEERING_MECHANISMS:
            raise ValueError(f"unknown steering mechanism {steering!r}; expected {STEERING_MECHANISMS}")
        if abort_reason and abort_reason not in ROLLBACK_REASONS:
            raise ValueError(f"unknown abort reason {abort_reason!r}; expected {ROLLBACK_REASONS}")
        with self._lock:
            if steering:
                self._steering = steering
                self._steering_runs[steering] += 1
                self._not_in_effect = steering_not_in_effect
            self._runs[status] += 1
            if abort_reason:
                self._rollbacks[abort_reason] += 1
            self._evictions += evictions
            if gained is not None:
                self._gained = gained
            for result in recuts:
                self._recuts[result] += 1
        self.record_last_run(status, ended=self._clock())

    def record_last_run(self, status: str, *, ended: float, succeeded_at: float | None = None) -> None:
        """The last run ended at ``ended`` (Unix seconds) with ``status`` (one of ``LAST_RUN_STATUSES``).

        ``succeeded_at``: when the last successful run ended, if it was not this one and is known: ``run --once`` reads it
        from the previous run's summary, since each push to the Pushgateway replaces the one before. A successful run is
        its own last success; otherwise the last success stays as this exporter knew it, unless ``succeeded_at`` says.
        """
        if status not in LAST_RUN_STATUSES:
            raise ValueError(f"unknown run status {status!r}; expected {LAST_RUN_STATUSES}")
        with self._lock:
            self._last_run = (status, ended)
            if status in SUCCESSFUL_STATUSES:
                self._last_success = ended
            elif succeeded_at is not None:
                self._last_success = succeeded_at

    def record_plan(self, *, seconds: float, gap: float | None, moves: int) -> None:
        """The cycle built a plan: ``seconds`` of planning (the plan's solver.planSeconds), the max-free solve's relative
        optimality ``gap`` (solver.gap; None without a proven bound: no series) and the pod ``moves`` it holds."""
        if seconds < 0 or moves < 0:
            raise ValueError(f"seconds and moves must be >= 0, got {seconds} and {moves}")
        with self._lock:
            self._plan = (seconds, gap, moves)

    def set_pause(self, until: float) -> None:
        """The circuit breaker's pause as the cycle read it: until ``until`` (Unix seconds), 0 when runs may act."""
        with self._lock:
            self._paused_until = until

    def record_cycle(self, timestamp: float) -> None:
        """A cycle completed (figures computed, and the run if any ended) at ``timestamp`` (Unix seconds)."""
        with self._lock:
            self._last_cycle = timestamp

    def record_cycle_error(self) -> None:
        """A cycle stopped on an error before it completed (cluster unreachable, bad config, ...)."""
        with self._lock:
            self._cycle_errors += 1

    def record_pending_trigger(self) -> None:
        """A GPU pod blocked long enough started a cycle before the interval was up."""
        with self._lock:
            self._pending_triggers += 1

    def record_pending_bound(self, seconds: float) -> None:
        """A GPU pod that started a cycle was bound ``seconds`` after it did."""
        with self._lock:
            self._bound_after.observe(seconds)

    def set_leader(self, leader: bool) -> None:
        with self._lock:
            self._leader = leader

    @property
    def has_figures(self) -> bool:
        with self._lock:
            return self._figures is not None

    # ----- exposition --------------------------------------------------------------------

    def render(self) -> tuple[bytes, str]:
        """(body, content type) of the registry in the Prometheus text format, for ``/metrics``."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    def push(self, url: str, *, job: str, grouping_key: dict[str, str], timeout: float) -> None:
        """PUT the registry to the Prometheus Pushgateway at ``url`` (``run --once``: a CronJob's pod is gone before any scrape),
        replacing the group ``job`` + ``grouping_key``. Raises ``OSError`` (``URLError``, ``HTTPError``) when it cannot."""
        push_to_gateway(url, job=job, registry=self.registry, grouping_key=grouping_key, timeout=timeout)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            figures, fenced, leader = self._figures, self._fenced, self._leader
            runs, evictions, errors, last = dict(self._runs), self._evictions, self._cycle_errors, self._last_cycle
            triggers, bound_after = self._pending_triggers, self._bound_after.buckets()
            rollbacks = dict(self._rollbacks)
            gained, recuts = self._gained, dict(self._recuts)
            steering, steering_runs, not_in_effect = self._steering, dict(self._steering_runs), self._not_in_effect
            plan, paused_until = self._plan, self._paused_until
            last_run, last_success = self._last_run, self._last_success
        if paused_until is not None:
            yield GaugeMetricFamily(
                PREFIX + "paused_until_timestamp_seconds",
                "Unix time the circuit breaker pauses runs until (disruption.breaker_*); 0 when runs may act.",
                value=paused_until,
            )
        if figures is not None:
            yield from _figure_metrics(figures)
        if fenced is not None:
            # named gpu_compactor_cordoned_nodes until fences became taints (CHANGELOG, Changed)
            yield GaugeMetricFamily(
                PREFIX + "fenced_nodes",
                "Nodes carrying gpu-compactor's fence mark (annotation compactor.io/cordoned-by).",
                value=fenced,
            )
        runs_family = CounterMetricFamily(PREFIX + "runs", "Compaction runs by outcome.", labels=["status"])
        for status in sorted(runs):
            runs_family.add_metric([status], runs[status])
        yield runs_family
        rollbacks_family = CounterMetricFamily(
            PREFIX + "rollbacks",
            "Runs that stopped and rolled back, by why (the run report's abortReason).",
            labels=["reason"],
        )
        for reason in ROLLBACK_REASONS:
            rollbacks_family.add_metric([reason], rollbacks[reason])
        yield rollbacks_family
        yield CounterMetricFamily(
            PREFIX + "evictions", "Pods evicted by gpu-compactor (real runs only).", value=evictions
        )
        recut_family = CounterMetricFamily(
            PREFIX + "mig_reconfigurations",
            "MIG re-cuts gpu-compactor asked mig-manager for, by result.",
            labels=["result"],
        )
        for result in RECUT_RESULTS:
            recut_family.add_metric([result], recuts[result])
        yield recut_family
        yield CounterMetricFamily(
            PREFIX + "cycle_errors", "Cycles that stopped on an error before completing.", value=errors
        )
        yield CounterMetricFamily(
            PREFIX + "pending_triggered_cycles",
            "Cycles started before the interval because a GPU pod had waited --pending-after seconds for a node.",
            value=triggers,
        )
        yield HistogramMetricFamily(
            PREFIX + "pending_trigger_to_bound_seconds",
            "Seconds from the cycle a blocked GPU pod started (the pending trigger) to the pod's binding "
            "(its PodScheduled condition).",
            buckets=bound_after[0],
            sum_value=bound_after[1],
        )
        if gained is not None:
            yield GaugeMetricFamily(
                PREFIX + "last_run_freed_gpus",
                "Net whole-free GPUs the last run gained, measured on the cluster "
                "after it (physical GPUs of GPU nodes running no GPU pod).",
                value=gained[0],
            )
            yield GaugeMetricFamily(
                PREFIX + "last_run_planned_freed_gpus",
                "Net whole-free GPUs the last run's plan promised (freedGpus).",
                value=gained[1],
            )
        if last_run is not None:
            yield from _last_run_metrics(*last_run, last_success)
        if plan is not None:
            yield GaugeMetricFamily(
                PREFIX + "last_plan_seconds",
                "Wall-clock seconds the last plan took (solver.planSeconds; solver.time_limit_seconds bounds it).",
                value=plan[0],
            )
            gap = GaugeMetricFamily(
                PREFIX + "last_plan_gap",
                "Relative optimality gap (0-1) of the last plan's max-free solve "
                "(solver.gap; 0 when proven optimal, no series without a proven bound).",
            )
            if plan[1] is not None:
                gap.add_metric([], plan[1])
            yield gap
            yield GaugeMetricFamily(
                PREFIX + "last_plan_moves", "Pod moves (evictions) the last plan holds.", value=plan[2]
            )
        if last is not None:
            yield GaugeMetricFamily(
                PREFIX + "last_cycle_timestamp_seconds", "Unix time the last cycle completed.", value=last
            )
        yield GaugeMetricFamily(
            PREFIX + "leader",
            "1 when this replica holds the leader lease (runs cycles), else 0.",
            value=1 if leader else 0,
        )
        if steering is not None:
            yield _one_of(
                "steering_mechanism",
                "1 for the steering mechanism the last run used (policy: the "
                "admission policy of manifests/steering; holds: nodes fenced for a moment; off), else 0.",
                "mechanism",
                STEERING_MECHANISMS,
                steering,
            )
            yield GaugeMetricFamily(
                PREFIX + "steering_policy_not_in_effect",
                "1 when the last run found the steering policy installed but concluded from replacements of several "
                "workloads arriving unpinned that it is not in effect (it steers with holds meanwhile), else 0.",
                value=1 if not_in_effect else 0,
            )
        runs_by = CounterMetricFamily(
            PREFIX + "steered_runs", "Runs by the steering mechanism they used.", labels=["mechanism"]
        )
        for name in STEERING_MECHANISMS:
            runs_by.add_metric([name], steering_runs[name])
        yield runs_by


BOUND_AFTER_BUCKETS = (15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)


class BoundAfter:
    """The histogram of seconds from a pending trigger to the pod's binding: cumulative counts per upper bound."""

    def __init__(self) -> None:
        self.counts = [0] * (len(BOUND_AFTER_BUCKETS) + 1)  # the last: above every bound
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        seconds = max(0.0, seconds)
        index = next((i for i, bound in enumerate(BOUND_AFTER_BUCKETS) if seconds <= bound), len(BOUND_AFTER_BUCKETS))
        self.counts[index] += 1
        self.total += seconds

    def buckets(self) -> tuple[list[tuple[str, float]], float]:
        bounds = [str(b) for b in BOUND_AFTER_BUCKETS] + ["+Inf"]
        running, cumulative = 0, []
        for bound, count in zip(bounds, self.counts, strict=True):
            running += count
            cumulative.append((bound, float(running)))
        return cumulative, self.total


def _one_of(name: str, documentation: str, label: str, values: Iterable[str], current: str) -> GaugeMetricFamily:
    """A gauge with one series per value of ``label``: 1 for ``current``, 0 for the others (absent values would read as
    unknown, not as "not this one")."""
    family = GaugeMetricFamily(PREFIX + name, documentation, labels=[label])
    for value in values:
        family.add_metric([value], 1 if value == current else 0)
    return family


def _last_run_metrics(status: str, ended: float, last_success: float | None) -> Iterator[Metric]:
    yield _one_of(
        "last_run_status",
        "1 for the status the last run ended with (succeeded, partial, failed, nothing-to-do, dry-run, held, measured, "
        "stopped), else 0.",
        "status",
        LAST_RUN_STATUSES,
        status,
    )
    yield GaugeMetricFamily(PREFIX + "last_run_timestamp_seconds", "Unix time the last run ended.", value=ended)
    if last_success is not None:  # never known (no success yet, or the previous summary unreadable): no made-up time
        yield GaugeMetricFamily(
            PREFIX + "last_run_success_timestamp_seconds",
            "Unix time the last successful run ended (succeeded, nothing-to-do, dry-run or measured).",
            value=last_success,
        )


def _pool_gauge(name: str, doc: str, pools: tuple[AggregateFigures, ...], attr: str) -> GaugeMetricFamily:
    family = GaugeMetricFamily(PREFIX + name, doc, labels=["pool"])
    for pool in pools:
        value = getattr(pool, attr)
        if value is not None:  # undefined rates (no free GPU, no shape) have no series rather than a made-up 0
            family.add_metric([pool.name], float(value))
    return family


def _figure_metrics(figures: Figures) -> Iterator[Metric]:
    pools = figures.pools
    yield _pool_gauge(
        "fragmentation_rate",
        "Share (0-1) of the pool's free GPU capacity that cannot host the reference shapes.",
        pools,
        "fragmentation_rate",
    )
    cluster = GaugeMetricFamily(
        PREFIX + "cluster_fragmentation_rate",
        "Share (0-1) of the cluster's free GPU capacity that cannot host the reference shapes.",
    )
    if figures.cluster.fragmentation_rate is not None:
        cluster.add_metric([], figures.cluster.fragmentation_rate)
    yield cluster
    yield _pool_gauge(
        "fgd_fragmentation_rate",
        "FGD fragmentation rate (0-1) of the pool, over all reference shapes.",
        pools,
        "fgd_fragmentation_rate",
    )
    yield _pool_gauge(
        "free_gpu_equivalents",
        "Free GPU capacity of the pool, in GPU-equivalents (MIG instances and time-sliced "
        "replicas as fractions of a GPU).",
        pools,
        "free_gpus",
    )
    yield _pool_gauge("whole_free_nodes", "GPU nodes of the pool running no GPU pod.", pools, "whole_free_nodes")
    yield _pool_gauge(
        "whole_free_gpus",
        "GPUs (physical) of the pool's whole-free nodes that are Ready and schedulable: what an "
        "8-GPU pod or a MIG re-cut can use; plans' freedGpus changes it.",
        pools,
        "whole_free_physical_gpus",
    )
    yield _pool_gauge(
        "stranded_gpu_equivalents",
        "Free GPU capacity (GPU-equivalents) of the pool that no GPU request shape in use "
        "can take (per GPU resource, after the shape taking the most fits as often as the node allows).",
        pools,
        "stranded_gpus",
    )
    yield _pool_gauge(
        "stranded_share",
        "Share (0-1) of the pool's free GPU capacity that no GPU request shape in use can take.",
        pools,
        "stranded_share",
    )
    yield _pool_gauge(
        "busy_node_free_gpu_equivalents",
        "Free GPU capacity (GPU-equivalents) of the pool on nodes that also run GPU pods.",
        pools,
        "busy_free_gpus",
    )
    mig = GaugeMetricFamily(
        PREFIX + "mig_idle_instances", "Idle MIG instances of the pool, per profile.", labels=["pool", "profile"]
    )
    for pool in pools:
        for profile, count in sorted(pool.mig_idle.items()):
            mig.add_metric([pool.name, profile], count)
    yield mig
    yield _pool_gauge("mig_idle_rate", "Share (0-1) of the pool's MIG capacity that is idle.", pools, "mig_idle_rate")
    yield GaugeMetricFamily(
        PREFIX + "blocked_pending_pods",
        "Pending GPU pods that fit the free GPU capacity in total but no single eligible node.",
        value=len(figures.blocked_pending),
    )
    yield GaugeMetricFamily(
        PREFIX + "blocked_demand_gpu_equivalents",
        "GPU capacity (GPU-equivalents) the pending GPU pods blocked by fragmentation ask for.",
        value=figures.blocked_demand_gpus,
    )

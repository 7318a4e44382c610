"""Drained: a node counts as freed only once its GPU pods are deleted, not merely terminating (their grace period included).

``finish`` and ``recut`` wait for it before releasing or relabelling a node, and ``reservations`` reads the same pods to
see the one a reserved node was kept for arrive: one check for three steps.
"""

from __future__ import annotations

from functools import partial

from compactor.actions.cluster.live_pods import grace_seconds, requests_gpu
from compactor.actions.port.client import Obj
from compactor.actions.port.objects import PodView
from compactor.actions.run.context import Run
from compactor.model.pod_facts import TERMINATED_PHASES


def await_drained(run: Run, nodes: list[str]) -> dict[str, list[Obj]]:
    """Wait until ``nodes`` hold no GPU pod, at most ``replacement_timeout_seconds`` plus the longest grace period; returns
    the GPU pods each still holds then (none on a drained node), which the caller reports as not freed."""
    deadline: float | None = None
    while True:
        staying = {n: run.read(partial(gpu_pods_holding, run, n)) for n in nodes}
        holding = [n for n, pods in staying.items() if pods]
        if not holding:
            return staying
        if deadline is None:
            grace = max(grace_seconds(p) for pods in staying.values() for p in pods)
            deadline = run.clock.monotonic() + run.settings.executor.replacement_timeout_seconds + grace
        if run.clock.monotonic() >= deadline:
            return staying
        run.report("finishing", waiting=f"evicted pods to terminate on {', '.join(holding[:3])}")
        run.clock.sleep(run.settings.executor.poll_seconds)


def gpu_pods_holding(run: Run, node: str) -> list[Obj]:
    """GPU pods still on ``node``, terminating ones included: they hold the node until deleted."""
    return [
        p for p in run.client.list_pods(node_name=node) if requests_gpu(p) and PodView(p).phase not in TERMINATED_PHASES
    ]

"""The planned pod of a move as the cluster shows it now: the pod a step may still act on, or None.

``evict`` reads it before each eviction (and again after a retry's wait), ``cordon`` when a resumed run finds a fence
lifted; steps do not import each other, so the read lives here.
"""

from __future__ import annotations

from compactor.actions.cluster.live_pods import is_terminating
from compactor.actions.port.client import Obj
from compactor.actions.port.objects import PodView
from compactor.actions.run.context import Run
from compactor.planner.plan import Move


def current_pod(run: Run, move: Move) -> Obj | None:
    """The planned pod as it is now, or None when it is gone, terminating, elsewhere, or another pod under its name."""
    namespace, name = move.pod.split("/", 1)
    pod = run.client.get_pod(namespace, name)
    if pod is None or is_terminating(pod):
        return None
    if PodView(pod).node_name != move.from_node:
        return None  # already elsewhere: nothing to move
    if move.uid and PodView(pod).uid != move.uid:
        return None  # a new pod with the same name (StatefulSet): the planned one is gone
    return pod

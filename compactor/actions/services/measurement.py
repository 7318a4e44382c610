"""Whole-free GPUs as the cluster shows them, measured by the executor as a run begins and again once it is over.

Counted as the planner counts them (``outcome.node_gpus``, ``outcome.pod_holds_node``, DRA devices included), over
only what a run can change where that is known, and read so that the cost follows the plan, not the cluster. The first
measurement also keeps the plan's nodes as read, with their pods: validating and fencing start from them
(``Run.first_reads``) instead of reading them again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from compactor.actions.cluster.live_pods import is_terminating, pod_key
from compactor.actions.cluster.run_cut import measured_nodes
from compactor.actions.port.client import Obj
from compactor.actions.run.context import Run
from compactor.actions.services.outcome import dra_facts, node_gpus, pod_holds_node, whole_free
from compactor.model.dra import DriverMapping


def measure(run: Run, dra_drivers: Sequence[DriverMapping], *, reads: bool = False) -> Measurement:
    """Whole-free GPUs as the cluster shows them now: with exact steering, on the nodes the plan changes (replacements
    land nowhere else), read one by one with their pods, so the cost follows the plan, not the cluster; without, on
    every node and pod, scanned page by page and kept only as ``Measurement`` needs them. ``reads``: the run's start,
    keep the plan's nodes (``measured_nodes``) as read, with their pods (``Run.first_reads``)."""
    dra = dra_facts(run.client, dra_drivers)
    if reads:  # the run's start: which nodes serve GPUs through DRA, for the room checks before each eviction
        run.log.dra_nodes = frozenset(dra.gpus)
    pending = frozenset(p.pod for p in run.plan.placed_pending)
    look = _Look(frozenset(measured_nodes(run.plan)), pending, reads, dra.gpus)
    if not run.steerer.exact:
        return Measurement.of(run.client.scan_nodes(look.node), run.client.scan_pods(look.pod), dra.busy)
    raw = [node for name in sorted(look.nodes) if (node := run.client.get_node(name)) is not None]
    nodes = [look.node(node) for node in raw]
    pods = [
        fact
        for node in raw
        for pod in run.client.list_pods(node_name=node["metadata"]["name"])
        if (fact := look.pod(pod)) is not None
    ]
    return Measurement.of(nodes, pods, dra.busy)


@dataclass(frozen=True)
class _NodeFact:
    name: str
    gpus: int | None  # physical GPUs, of a GPU node (``outcome.node_gpus``)
    raw: Obj | None  # the node as read: one of the plan's, when reads are kept


@dataclass(frozen=True)
class _PodFact:
    node: str  # spec.nodeName ('' when not bound)
    busy: bool  # a bound GPU pod: its node is not whole-free (``outcome.pod_holds_node``)
    pending: str | None  # the key of a placed pending pod of the plan, when it is not terminating
    raw: Obj | None  # the pod as read: one on a node of the plan, when reads are kept


@dataclass(frozen=True)
class _Look:
    """What ``measure`` keeps of each node and pod it reads (``scan_nodes``/``scan_pods`` hand them over page by
    page): whole objects only for the plan's nodes, and of every other only what counting whole-free GPUs asks."""

    nodes: frozenset[str]  # the plan's nodes (measured_nodes)
    pending: frozenset[str]  # the plan's placed pending pods
    reads: bool  # keep the plan's nodes and their pods as read
    dra_gpus: Mapping[str, int]  # node -> GPUs its ResourceSlices publish (``outcome.dra_facts``)

    def node(self, raw: Obj) -> _NodeFact:
        name, gpus = node_gpus(raw, self.dra_gpus)
        return _NodeFact(name, gpus, raw if self.reads and name in self.nodes else None)

    def pod(self, raw: Obj) -> _PodFact | None:
        node, busy = pod_holds_node(raw)
        pending = key if (key := pod_key(raw)) in self.pending and not is_terminating(raw) else None
        kept = raw if self.reads and node in self.nodes else None
        if not busy and pending is None and kept is None:
            return None  # nothing of it counts
        return _PodFact(node, busy, pending, kept)


@dataclass
class Measurement:
    """Whole-free GPUs as ``measure`` measured them, and what the run reads of it."""

    gpus: dict[str, int]  # GPU node -> physical GPUs, every GPU node read
    busy: set[str]  # nodes running a bound GPU pod
    bound: dict[str, str]  # placed pending pod (not terminating) -> the node it is bound to ('' when none)
    reads: dict[str, tuple[Obj, list[Obj]]]  # the plan's nodes as read, with their pods (when kept)

    @classmethod
    def of(cls, nodes: list[_NodeFact], pods: list[_PodFact], claimed: frozenset[str] = frozenset()) -> Measurement:
        """``claimed``: nodes a ResourceClaim holds a device of (busy whatever their pods ask)."""
        reads: dict[str, tuple[Obj, list[Obj]]] = {n.name: (n.raw, []) for n in nodes if n.raw is not None}
        for pod in pods:  # one pass, grouped by node: not a pass over the pods per node
            if pod.raw is not None and pod.node in reads:
                reads[pod.node][1].append(pod.raw)
        return cls(
            gpus={n.name: n.gpus for n in nodes if n.gpus is not None},
            busy={p.node for p in pods if p.busy} | claimed,
            bound={p.pending: p.node for p in pods if p.pending is not None},
            reads=reads,
        )

    @property
    def whole_free(self) -> dict[str, int]:
        """GPU node -> its physical GPUs, for every GPU node that runs no GPU pod (``outcome.whole_free``)."""
        return whole_free(self.gpus, self.busy)

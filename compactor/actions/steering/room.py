"""Room on a target node, and which nodes to hold (fence for a moment) so that kube-scheduler binds a pod only there.

The stock scheduler, with the default profile, sends a replacement to the emptiest
feasible node, not to the planned one. The executor therefore fences, for the few
seconds between an eviction and the replacement's binding, every *other*
schedulable node that could take the replacement; the planned node is then the only
feasible one (see docs/executor.md, "Steering").

Deciding which nodes could take the pod is pure: live objects in, node names out.
The test is deliberately generous, so the set errs towards holding too many nodes,
never too few:

* resources, taints, ``nodeSelector`` and required node affinity are checked as the
  scheduler's filters do (``why_ineligible``); a node that fails one of them can never
  take the pod and needs no hold;
* pod (anti-)affinity and topology spread are *not* used to rule a node out;
* terminating pods are counted as already gone, and so is the pod being moved;
* the node lifecycle controller's own taints (``node.kubernetes.io/*``) and readiness are
  ignored: they follow ``spec.unschedulable`` and the node's conditions with a delay, so
  a node uncordoned a moment ago still carries ``node.kubernetes.io/unschedulable`` and
  becomes feasible the instant the controller removes it (seen on kube-controller-manager
  v1.36: a replacement bound to such a node, which an earlier version left unheld).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from compactor.actions.port.client import Obj
from compactor.model.load import DEFAULT_POOL_LABEL
from compactor.model.parse import parse_node, parse_pod
from compactor.model.resources import Resources, is_gpu_resource
from compactor.model.scheduling import why_ineligible
from compactor.model.types import Node, Pod

SOURCE = "live cluster"
CONTROLLER_TAINT_PREFIX = "node.kubernetes.io/"  # taints the node lifecycle controller adds and removes


@dataclass(frozen=True)
class Room:
    """Whether ``pod`` fits ``node`` right now, and if not, what it lacks (for the log and the abort message)."""

    node: str
    fits: bool
    short: dict[str, int]


def use_of(raw: Obj, *, leaving: Pod) -> tuple[str, Resources] | None:
    """What one pod takes of its node while ``leaving`` moves: its node and requests when it is bound and holds capacity and
    stays (not finished, not terminating, not the mover); None otherwise. All that is kept of each pod of the cluster."""
    pod = parse_pod(raw, source=SOURCE)
    if not pod.is_bound or pod.deletion_timestamp or pod.key == leaving.key:
        return None
    return pod.node_name, pod.requests


def usage(uses: Iterable[tuple[str, Resources] | None]) -> dict[str, Resources]:
    """Requests per node, summed from ``use_of``'s answers."""
    used: dict[str, Resources] = {}
    for use in uses:
        if use is not None:
            node, requests = use
            used[node] = used.get(node, Resources()) + requests
    return used


def _usage(pods: Iterable[Obj], *, leaving: Pod) -> dict[str, Resources]:
    """Requests per node of the bound pods that hold capacity and stay: not finished, not terminating, not the mover."""
    return usage(use_of(raw, leaving=leaving) for raw in pods)


def _nodes(raw_nodes: Iterable[Obj]) -> list[Node]:
    return [parse_node(raw, source=SOURCE, pool_label=DEFAULT_POOL_LABEL, warnings=[]) for raw in raw_nodes]


def _as_soon_to_be(node: Node) -> Node:
    """The node as the scheduler may see it a moment from now: controller taints gone, Ready (cordons stay)."""
    taints = tuple(t for t in node.taints if not t.key.startswith(CONTROLLER_TAINT_PREFIX))
    return replace(node, taints=taints, ready=True)


def _free(node: Node, used: Mapping[str, Resources]) -> Resources:
    return node.allocatable - used.get(node.name, Resources())


@dataclass(frozen=True)
class Hold:
    """What steering ``mover`` onto ``target`` takes: room on the target, and the other nodes to hold meanwhile."""

    room: Room
    rivals: list[str]


def could_take(pod: Pod, node: Node, *, target: str) -> bool:
    """Whether ``node``, not ``target``, could take ``pod`` as the scheduler may see it a moment from now, room aside: a
    node for which this is False is never held, whatever the pods on it."""
    return node.name != target and why_ineligible(pod, _as_soon_to_be(node)) is None


def plan_hold(
    raw_nodes: Sequence[Obj], raw_pods: Sequence[Obj], mover: Obj, *, target: str, dra: Collection[str] = ()
) -> Hold:
    """One pass over the live nodes and pods: ``target``'s room for ``mover`` once terminating pods (and the mover itself)
    are gone (rules other than resources aside), and the schedulable nodes other than ``target`` where ``mover``, or a
    replacement made from the same template, could bind now."""
    pod = parse_pod(mover, source=SOURCE)
    return hold_over(_nodes(raw_nodes), _usage(raw_pods, leaving=pod), pod, target=target, dra=dra)


def hold_over(
    nodes: Iterable[Node], used: Mapping[str, Resources], pod: Pod, *, target: str, dra: Collection[str] = ()
) -> Hold:
    """``plan_hold`` from the nodes parsed and the pods' requests summed per node (``use_of``, ``usage``): the nodes may
    be only ``target`` and those that ``could_take`` the pod, the others change nothing."""
    nodes = list(nodes)
    found = next((n for n in nodes if n.name == target), None)
    free = _free(found, used) if found is not None else Resources()
    asked = _asked_of(pod, found, dra) if found is not None else pod.requests
    short = {r: v - free.get(r, 0) for r, v in asked.items() if v > free.get(r, 0)}
    room = Room(target, found is not None and not short, short if found is not None else {})
    others = sorted(
        node.name
        for node in nodes
        if could_take(pod, node, target=target) and _asked_of(pod, node, dra).fits_in(_free(node, used))
    )
    return Hold(room, others)


def _asked_of(pod: Pod, node: Node, dra: Collection[str]) -> Resources:
    """What of ``pod``'s requests ``node``'s allocatable answers for. On a node in ``dra`` (its GPUs are published in
    ResourceSlices), a GPU resource it does not advertise is served by dynamic resource allocation (a DeviceClass's
    ``extendedResourceName``), from devices no node object shows: the plan judged that room from the slices, and such a
    node that could serve the pod is held."""
    if node.name not in dra:
        return pod.requests
    return Resources(
        {r: v for r, v in pod.requests.items() if not (is_gpu_resource(r) and node.allocatable.get(r, 0) == 0)}
    )


def room_for(
    raw_target: Obj | None, raw_pods: Sequence[Obj], mover: Obj, *, target: str, dra: Collection[str] = ()
) -> Room:
    """Whether ``mover`` fits ``target`` now, from the node and the pods bound to it (terminating ones counted as gone):
    the narrow read the policy mechanism makes per move instead of listing every node and pod."""
    return plan_hold([raw_target] if raw_target is not None else [], raw_pods, mover, target=target, dra=dra).room


def rivals(raw_nodes: Sequence[Obj], raw_pods: Sequence[Obj], mover: Obj, *, target: str) -> list[str]:
    """The nodes to hold while ``mover`` binds on ``target`` (see ``plan_hold``)."""
    return plan_hold(raw_nodes, raw_pods, mover, target=target).rivals


def room_on(raw_nodes: Sequence[Obj], raw_pods: Sequence[Obj], mover: Obj, *, target: str) -> Room:
    """Whether ``target`` has room for ``mover`` now (see ``plan_hold``)."""
    return plan_hold(raw_nodes, raw_pods, mover, target=target).room

"""Re-target: a move whose planned target lost its room to an arrival since the plan was made goes to another node under
the plan's rules (``planner/search/retarget.py``), read from the cluster now, instead of ending the run (issue 42).

Every node and pod is scanned, but only what the rule asks is kept of each (a node parsed, a pod's node, requests and two
flags), so memory follows the nodes, not the pods. The nodes the plan keeps for its own ends are out of reach: those it
frees or drains, the sources of its moves not yet made, the targets of moves in flight (their room is being taken), and
the move's own target.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from compactor.actions.port.client import Obj
from compactor.actions.port.objects import PodView
from compactor.actions.run.context import Run
from compactor.actions.steering.room import SOURCE
from compactor.model.load import DEFAULT_POOL_LABEL
from compactor.model.parse import parse_node, parse_pod
from compactor.model.resources import Resources, is_gpu_resource
from compactor.model.types import Node
from compactor.planner.plan import Move
from compactor.planner.search.retarget import NodeUse, Wanted, assign, why_not_retargeted

log = logging.getLogger("compactor.executor")


@dataclass(frozen=True)
class _Bound:
    node: str
    requests: Resources
    anti_affinity: bool


def another_target(run: Run, move: Move, raw_pod: Obj) -> tuple[str | None, str]:
    """Another node for ``move`` (its pod as read just now), and why none when there is none: the other moves off its
    source still to be made must fit as well (``planner/retarget.assign``), or emptying the source is given up."""
    wanted = [Wanted(parse_pod(raw_pod, source=SOURCE), move.to_node, keep_planned=False)]
    raws = [raw_pod]
    for other in run.plan.moves:
        if other.from_node != move.from_node or other.pod == move.pod or other.pod in run.state.done:
            continue
        if other.pod in run.state.inflight:
            continue  # evicted already: its replacement's room is counted where it is landing
        raw = run.client.get_pod(*other.pod.split("/", 1))
        if raw is None or PodView(raw).node_name != move.from_node:
            continue  # gone or elsewhere: the run will skip it
        wanted.append(Wanted(parse_pod(raw, source=SOURCE), other.to_node))
        raws.append(raw)
    for one, raw in zip(wanted, raws, strict=True):
        if why := why_not_retargeted(one.pod, hard_spread=_hard_spread(raw)):
            return None, f"{one.pod.key}: {why}"
    nodes: list[Node] = run.client.scan_nodes(_node)
    use: dict[str, NodeUse] = {}
    for bound in run.client.scan_pods(lambda raw: _bound(raw, leaving=move.pod)):
        was = use.get(bound.node, NodeUse(Resources(), False, False))
        use[bound.node] = NodeUse(
            was.requests + bound.requests,
            was.runs_gpu_pod or any(is_gpu_resource(r) for r in bound.requests),
            was.anti_affinity or bound.anti_affinity,
        )
    source = next((n for n in nodes if n.name == move.from_node), None)
    pool = source.pool if source is not None and not run.services.rules.movable.cross_pool_moves else ""
    found = assign(wanted, nodes, use, pool=pool, out_of_reach=out_of_reach(run, move))
    if found is None:
        rest = f" and the {len(wanted) - 1} other move(s) off {move.from_node}" if len(wanted) > 1 else ""
        return None, f"no other node may take it{rest} under the plan's rules now"
    return found[0], ""


def out_of_reach(run: Run, move: Move) -> set[str]:
    """The nodes a re-target of ``move`` may not choose: what the plan frees, drains or empties, and where moves in flight
    are landing."""
    plan, state = run.plan, run.state
    return {
        *plan.freed_nodes,
        *run.fences,
        move.to_node,
        *(m.from_node for m in plan.moves if m.pod not in state.done),
        *(flight.target for pod, flight in state.inflight.items() if pod not in state.done),
    }


def _node(raw: Obj) -> Node:
    return parse_node(raw, source=SOURCE, pool_label=DEFAULT_POOL_LABEL, warnings=[])


def _bound(raw: Obj, *, leaving: str) -> _Bound | None:
    view = PodView(raw)
    if not view.node_name or view.terminating or view.key == leaving or view.phase in ("Succeeded", "Failed"):
        return None
    pod = parse_pod(raw, source=SOURCE)
    return _Bound(view.node_name, pod.requests, bool(pod.affinity.anti_affinity_terms))


def _hard_spread(raw: Obj) -> bool:
    constraints = PodView(raw).spec.get("topologySpreadConstraints") or []
    return any(
        c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule" for c in constraints if isinstance(c, dict)
    )

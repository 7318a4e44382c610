"""The optimisation instance, built from a snapshot as plain data (no solver imports).

Identical pods are aggregated into *types* (same requests, placement constraints,
cost and namespace); the model then decides how many pods of each type end on each
node. Types are interchangeable, so any pairing of a type's surplus sources with
its deficit targets is a valid set of moves (see ``solution.py``).

Imports: ``compactor.model``, ``compactor.settings``, eligibility, movability, placeable, history, price; no solver.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from compactor.model.resources import CPU, MEMORY, Resources, is_gpu_resource
from compactor.model.types import Node, Pod, Snapshot
from compactor.planner.rules.eligibility import TargetRules
from compactor.planner.rules.history import Restraints
from compactor.planner.rules.movability import Steerability, Unmovable, movability
from compactor.planner.rules.move_limits import MoveLimits
from compactor.planner.rules.placeable import why_not_placeable
from compactor.planner.rules.price import Pricing
from compactor.settings.bundles import PlannerSettings
from compactor.settings.shape_syntax import parse_shape

# A host port is capacity 1 on every node (kube-scheduler's NodePorts filter), modelled as a resource.
# The host IP is ignored: two pods on one port conflict even on different IPs, which can only make the plan stricter.
HOST_PORT_PREFIX = "hostport.compactor.io/"


def port_requests(pod: Pod) -> Resources:
    """The pod's requests with one unit of each host port it binds."""
    if not pod.host_ports:
        return pod.requests
    return pod.requests + {f"{HOST_PORT_PREFIX}{protocol}-{port}": 1 for protocol, port in pod.host_ports}


@dataclass(frozen=True)
class NodeState:
    index: int
    node: Node
    capacity: dict[str, int]  # max(allocatable, load before): an overcommitted node may not get worse
    fixed: dict[str, int]  # load of pods the plan will not move
    gpus: int  # what freeing the node counts: Ready, schedulable, allocatable GPUs (Node.countable_gpus)
    free_gpus_before: float
    ran_gpu_pods: bool
    can_empty: bool  # a GPU node all of whose GPU pods may move
    is_target_pool: bool  # may receive pods (Ready, schedulable, not excluded)
    spare: float = 0.0  # the smaller of the CPU and memory shares of allocatable left free before the plan


@dataclass
class PodType:
    index: int
    requests: Resources
    representative: Pod
    cost: int
    namespace: str
    uses_gpu: bool
    pending: bool
    weight: int = 0  # pending types: priority weight in objective level 1
    initial: dict[int, list[Pod]] = field(default_factory=dict)  # node index -> movable pods there
    pending_pods: list[Pod] = field(default_factory=list)
    targets: tuple[int, ...] = ()  # nodes that may end up holding pods of this type
    ranked_targets: tuple[int, ...] = ()  # eligible non-current targets, best first
    # current nodes that may keep their pods but receive none (not eligible targets)
    stay_only: frozenset[int] = frozenset()
    items: tuple[tuple[str, int], ...] = field(init=False, repr=False, compare=False)  # requests.items(), for hot loops

    def __post_init__(self) -> None:
        self.items = tuple(self.requests.items())

    @property
    def count(self) -> int:
        return len(self.pending_pods) if self.pending else sum(len(p) for p in self.initial.values())


@dataclass
class Problem:
    snapshot: Snapshot
    settings: PlannerSettings
    nodes: list[NodeState]
    types: list[PodType]
    resources: tuple[str, ...]
    unmovable: dict[str, Unmovable | None]
    target_shapes: tuple[Resources, ...] = ()
    not_placeable: dict[str, str] = field(default_factory=dict)  # pending GPU pod -> why the plan leaves it alone
    rules: TargetRules | None = None
    # constraints.one_eviction_at_a_time: set when a plan needed moves that only fit together
    ordered_moves: bool = False
    gpu_pods_before: tuple[int, ...] = ()  # bound GPU pods per node before the plan (``gpu_pod_counts``), computed once
    # the request shapes a freed node's GPUs are usable for (``usable.usage_shapes``); empty: every freed GPU is usable
    usage_shapes: tuple[tuple[tuple[str, int], ...], ...] = ()

    @property
    def limits(self) -> MoveLimits:
        return MoveLimits.of(self.settings)

    @property
    def empty_before_gpus(self) -> int:
        return sum(n.gpus for n in self.nodes if n.gpus and not n.ran_gpu_pods)


def _type_key(pod: Pod, cost: int, pending: bool, rules: TargetRules) -> tuple[object, ...]:
    return (
        pending,
        port_requests(pod),
        pod.tolerations,
        pod.node_selector,
        pod.affinity,
        cost,
        pod.namespace,
        pod.priority if pending else 0,
        rules.signature(pod),
    )


def _node_loads(snapshot: Snapshot) -> dict[str, dict[str, int]]:
    loads: dict[str, dict[str, int]] = defaultdict(dict)
    for pod in snapshot.pods:
        if pod.is_bound:
            acc = loads[pod.node_name]
            for key, value in port_requests(pod).items():
                acc[key] = acc.get(key, 0) + value
    return loads


def _free_gpus(node: Node, load: Mapping[str, int]) -> float:
    return sum(max(0, node.allocatable.get(r, 0) - load.get(r, 0)) * eq for r, eq in node.gpu.gpu_equivalent)


def holds_gpu_load(load: Mapping[str, int]) -> bool:
    """Does this load include any GPU resource?"""
    return any(is_gpu_resource(r) and v > 0 for r, v in load.items())


def gpu_pod_counts(snapshot: Snapshot) -> list[int]:
    """Bound GPU pods per node, in the snapshot's node order."""
    index = {node.name: i for i, node in enumerate(snapshot.nodes)}
    counts = [0] * len(snapshot.nodes)
    for pod in snapshot.pods:
        if pod.is_bound and requests_gpu(pod.requests):
            counts[index[pod.node_name]] += 1
    return counts


def requests_gpu(requests: Iterable[str]) -> bool:
    """``Pod.uses_gpu`` without building the GPU part (``Resources`` keeps no zero amounts)."""
    return any(is_gpu_resource(r) for r in requests)


def gpu_pods_before(problem: Problem) -> list[int]:
    """``gpu_pod_counts`` of the problem's snapshot (a fresh list: callers may change it)."""
    return list(problem.gpu_pods_before) if problem.gpu_pods_before else gpu_pod_counts(problem.snapshot)


def _priority_weights(pods: Sequence[Pod]) -> dict[int, int]:
    """Higher priority pending pods weigh more: weight = 1 + rank of the priority among pending pods."""
    return {prio: rank + 1 for rank, prio in enumerate(sorted({p.priority for p in pods}))}


def _freeable(snapshot: Snapshot, unmovable: Mapping[str, Unmovable | None]) -> set[str]:
    """GPU nodes all of whose GPU pods may move."""
    blocked = {
        p.node_name
        for p in snapshot.pods
        if p.is_bound and unmovable.get(p.key) is not None and requests_gpu(p.requests)
    }
    return {n.name for n in snapshot.nodes if n.is_gpu_node and n.name not in blocked}


def _placeable(snapshot: Snapshot, settings: PlannerSettings, rules: TargetRules) -> tuple[list[Pod], dict[str, str]]:
    """Pending GPU pods the plan may place (every constraint of theirs is modelled), and why not for the others."""
    if not settings.aims.place_pending:
        return [], {}
    placeable: list[Pod] = []
    excluded: dict[str, str] = {}
    for pod in snapshot.pending_pods():
        if not pod.uses_gpu:
            continue
        why = why_not_placeable(pod, settings, rules.volumes)
        if why is None:
            placeable.append(pod)
        else:
            excluded[pod.key] = why
    return placeable, excluded


def build_problem(
    snapshot: Snapshot,
    settings: PlannerSettings,
    *,
    max_targets: int | None = None,
    steering: Steerability | None = None,
    now: datetime | None = None,
    restraints: Restraints | None = None,
) -> Problem:
    """``steering``: what the run's steering can keep where the plan puts a replacement (``movability.Steerability``);
    ``now``: the plan's time, for the pod age rules (None: they pass); ``restraints``: what earlier runs forbid now (nodes
    in their cooldown neither give nor receive pods)."""
    nodes_by_name = snapshot.node_by_name()
    rules = TargetRules(snapshot, cross_pool=settings.movable.cross_pool_moves)
    unmovable = movability(
        snapshot.pods,
        nodes_by_name,
        snapshot.pdbs,
        settings,
        rules.volumes,
        steering=steering,
        now=now,
        restraints=restraints,
    )
    cooling = set(restraints.nodes) if restraints else set()
    pending, not_placeable = _placeable(snapshot, settings, rules)
    loads = _node_loads(snapshot)
    freeable = _freeable(snapshot, unmovable)
    # Movable pods on every GPU node are variables: moving one off a node that cannot be freed
    # may be what makes room for the pods of a node that can (``restrict`` narrows this at scale).
    sources = {n.name for n in snapshot.nodes if n.is_gpu_node}

    types: dict[tuple[object, ...], PodType] = {}
    fixed: dict[str, dict[str, int]] = {name: dict(load) for name, load in loads.items()}
    index_of = {node.name: i for i, node in enumerate(snapshot.nodes)}
    pricing = Pricing.of(snapshot, settings.aims.move_cost)

    def type_for(pod: Pod, is_pending: bool) -> PodType:
        cost = pricing.cost(pod)
        key = _type_key(pod, cost, is_pending, rules)
        found = types.get(key)
        if found is None:
            found = PodType(
                len(types), port_requests(pod), pod, cost, pod.namespace, requests_gpu(pod.requests), is_pending
            )
            types[key] = found
        return found

    for pod in snapshot.pods:
        if not pod.is_bound or pod.node_name not in sources or unmovable.get(pod.key) is not None:
            continue
        ptype = type_for(pod, False)
        ptype.initial.setdefault(index_of[pod.node_name], []).append(pod)
        acc = fixed[pod.node_name]
        for key, value in ptype.requests.items():
            acc[key] -= value
    weights = _priority_weights(pending)
    for pod in pending:
        ptype = type_for(pod, True)
        ptype.pending_pods.append(pod)
        ptype.weight = weights[pod.priority]

    type_list = list(types.values())
    ports = {r for t in type_list for r in t.requests if r.startswith(HOST_PORT_PREFIX)}
    states = [
        _node_state(i, node, loads.get(node.name, {}), fixed.get(node.name, {}), node.name in freeable, ports)
        for i, node in enumerate(snapshot.nodes)
    ]
    # a cooling node receives nothing
    states = [replace(s, is_target_pool=False) if s.node.name in cooling else s for s in states]
    eligibility = _Eligibility(states, rules)
    for ptype in type_list:
        ptype.targets = _targets(ptype, eligibility, max_targets or settings.solver.max_targets_per_type)
        ptype.stay_only = frozenset(ptype.initial) - eligibility.receivers(ptype)
    resources = tuple(sorted({r for t in type_list for r in t.requests}))
    shapes = tuple(parse_shape(s) for s in settings.aims.target_shapes) if settings.aims.goal == "shapes" else ()
    return Problem(
        snapshot,
        settings,
        states,
        type_list,
        resources,
        unmovable,
        shapes,
        not_placeable,
        rules,
        gpu_pods_before=tuple(gpu_pod_counts(snapshot)),
    )


def _node_state(
    index: int, node: Node, load: Mapping[str, int], fixed: Mapping[str, int], freeable: bool, ports: set[str]
) -> NodeState:
    # Sorted: set order of strings changes with PYTHONHASHSEED, and the models are built in this order (a seed must give
    # the same plan in every process).
    capacity = {r: max(node.allocatable.get(r, 0), load.get(r, 0)) for r in sorted(set(node.allocatable) | set(load))}
    for port in sorted(ports):
        capacity[port] = max(1, load.get(port, 0))
    ran_gpu = holds_gpu_load(load)
    spare = min(
        (1 - load.get(r, 0) / node.allocatable[r] for r in (CPU, MEMORY) if node.allocatable.get(r, 0) > 0),
        default=0.0,
    )
    return NodeState(
        index=index,
        node=node,
        capacity=capacity,
        fixed={k: v for k, v in fixed.items() if v},
        gpus=node.countable_gpus,
        free_gpus_before=_free_gpus(node, load),
        ran_gpu_pods=ran_gpu,
        can_empty=freeable or (node.is_gpu_node and not ran_gpu),
        is_target_pool=node.ready and not node.unschedulable and node.labels.get("compactor.io/exclude") != "true",
        spare=spare,
    )


class _Eligibility:
    """Memoised target rules: many types share one set of placement constraints, and GPU types only
    ever fit nodes that advertise their GPU resources."""

    def __init__(self, states: Sequence[NodeState], rules: TargetRules) -> None:
        self.states = states
        self.rules = rules
        self.by_resource: dict[str, list[NodeState]] = defaultdict(list)
        for state in states:
            for resource, amount in state.capacity.items():
                if amount > 0 and is_gpu_resource(resource):
                    self.by_resource[resource].append(state)
        self.cache: dict[tuple[object, ...], frozenset[int]] = {}
        self.ranked_cache: dict[tuple[object, ...], tuple[int, ...]] = {}
        self.sorted_cache: dict[int, tuple[tuple[int, ...], dict[int, int]]] = {}  # by id of a ranked_cache tuple
        # Every node in each ranking order (see ``ranked``), its position in it, and the room a pod may take on it.
        self.orders = {kind: sorted(range(len(states)), key=lambda i: _rank_key(states[i], kind)) for kind in RANKINGS}
        self.positions = {kind: _positions(order) for kind, order in self.orders.items()}
        self.room = [{r: amount - state.fixed.get(r, 0) for r, amount in state.capacity.items()} for state in states]

    def candidates(self, ptype: PodType) -> Sequence[NodeState]:
        gpu = [r for r in ptype.requests if is_gpu_resource(r)]
        if not gpu:
            return self.states
        return min((self.by_resource.get(r, []) for r in gpu), key=len)

    def receivers(self, ptype: PodType) -> frozenset[int]:
        """Nodes a pod of this type may be moved or placed onto (capacity aside)."""
        pod = ptype.representative
        key = (
            pod.tolerations,
            pod.node_selector,
            pod.affinity,
            ptype.uses_gpu,
            tuple(sorted(r for r in ptype.requests if is_gpu_resource(r))),
            self.rules.signature(pod),
        )
        found = self.cache.get(key)
        if found is None:
            found = frozenset(
                s.index
                for s in self.candidates(ptype)
                if s.is_target_pool
                and (s.node.is_gpu_node or not ptype.uses_gpu)
                and self.rules.why_not(pod, s.node) is None
            )
            self.cache[key] = found
        return found

    def ranked(self, ptype: PodType) -> tuple[int, ...]:
        """The receivers with room for one pod of this type, best first (see ``_targets``); shared by every type with the
        same receivers, requests and pending-ness (thousands of types, a few hundred such keys)."""
        receivers = self.receivers(ptype)
        kind = _ranking(ptype)
        key = (receivers, tuple(sorted(ptype.requests.items())), kind)
        found = self.ranked_cache.get(key)
        if found is None:
            # In ``_rank_key`` order: walked through the whole order when most nodes receive, else sorted by position.
            room, items = self.room, ptype.items
            if 8 * len(receivers) >= len(self.states):
                ranked = [i for i in self.orders[kind] if i in receivers and _fits_room(items, room[i])]
            else:
                ranked = sorted(
                    (i for i in receivers if _fits_room(items, room[i])), key=self.positions[kind].__getitem__
                )
            found = self.ranked_cache[key] = tuple(ranked)
        return found

    def in_order(self, ranked: tuple[int, ...]) -> tuple[tuple[int, ...], dict[int, int]]:
        """``ranked`` (a tuple ``ranked`` returned) sorted by node index, and each node's position in it (shared like it)."""
        found = self.sorted_cache.get(id(ranked))
        if found is None:
            found = self.sorted_cache[id(ranked)] = (tuple(sorted(ranked)), _positions(ranked))
        return found


RANKINGS = (
    "pending",
    "gpu",
    "plain",
)  # how targets are ranked: for pending pods, moved GPU pods, moved pods without GPUs


def _ranking(ptype: PodType) -> str:
    return "pending" if ptype.pending else "gpu" if ptype.uses_gpu else "plain"


def _rank_key(state: NodeState, kind: str) -> tuple[object, ...]:
    """Best target first. A pending pod wants the node that needs the least draining: the most free GPUs. A moved GPU
    pod: best fit (see ``_targets``). A moved pod without GPUs: a node without GPUs, the roomiest first, then the GPU
    node with the fewest free GPUs (its CPU and memory are the least wanted by GPU pods): CPU pods moving between GPU
    nodes only shift the crowding, and pods swapping nodes cannot run one eviction at a time."""
    if kind == "pending":
        return (-state.free_gpus_before, state.node.name)
    if kind == "plain":
        return (state.node.is_gpu_node, state.free_gpus_before, -state.spare, state.node.name)
    return (state.can_empty, not state.ran_gpu_pods, state.free_gpus_before, state.node.name)


def _positions(order: Sequence[int]) -> dict[int, int]:
    return {n: i for i, n in enumerate(order)}


def _fits_room(items: Iterable[tuple[str, int]], room: Mapping[str, int]) -> bool:
    """Could one pod of these requests ever fit, if every movable pod left the node? ``room``: capacity less fixed load."""
    for r, v in items:  # noqa: SIM110 (a hot loop: all() over a generator is about twice as slow)
        if v > room.get(r, 0):
            return False
    return True


def _targets(ptype: PodType, eligibility: _Eligibility, max_targets: int) -> tuple[int, ...]:
    """Nodes this type may end on: its current nodes plus the best eligible ones.

    Preference (best-fit): nodes that will not be freed anyway (they run an
    unmovable GPU pod), then nodes already running GPU pods with the fewest free
    GPUs; empty GPU nodes last, since filling them costs free capacity.
    """
    current = set(ptype.initial)
    ranked = eligibility.ranked(ptype)
    if len(ranked) > max_targets + len(current):
        ptype.ranked_targets = tuple(itertools.islice((i for i in ranked if i not in current), max_targets))
        return tuple(sorted(current | set(ptype.ranked_targets)))
    # Every eligible node is a target (the warm start's wide problem): the shared sorted tuple, plus any current node
    # that is not eligible; thousands of types share one ranking, so this avoids a sort per type.
    ordered, position = eligibility.in_order(ranked)
    ptype.ranked_targets = _without(ranked, sorted(position[n] for n in current if n in position))
    if len(ptype.ranked_targets) > max_targets:
        ptype.ranked_targets = ptype.ranked_targets[:max_targets]
        return tuple(sorted(current | set(ptype.ranked_targets)))
    outside = {n for n in current if n not in position}
    return tuple(sorted((*ordered, *outside))) if outside else ordered


def _without(ranked: tuple[int, ...], cuts: list[int]) -> tuple[int, ...]:
    """``ranked`` less the items at the (ascending) positions ``cuts``."""
    if not cuts:
        return ranked
    parts, start = [], 0
    for cut in cuts:
        parts.append(ranked[start:cut])
        start = cut + 1
    parts.append(ranked[start:])
    return tuple(itertools.chain.from_iterable(parts))


def linked_nodes(problem: Problem, types: Iterable[PodType]) -> list[int]:
    """Node -> a representative of its group: nodes linked by a pod type that starts on or may go to them (union-find)."""
    parent = list(range(len(problem.nodes)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    linked: set[tuple[int, ...]] = set()  # many types share their targets: link each such set once
    for ptype in types:
        if ptype.targets and ptype.targets not in linked:
            linked.add(ptype.targets)
            for other in ptype.targets[1:]:
                parent[find(other)] = find(ptype.targets[0])
        nodes = (*ptype.targets[:1], *ptype.initial)
        for other in nodes[1:]:
            parent[find(other)] = find(nodes[0])
    return [find(n) for n in range(len(problem.nodes))]


def gpu_pools(problem: Problem) -> list[int]:
    """Node -> a representative of its pool: nodes linked by movable GPU pod types. Pending pods may cross pools, so they
    link none (``linked_nodes`` over them would merge every pool they may go to)."""
    return linked_nodes(problem, (t for t in problem.types if t.uses_gpu and not t.pending))


def movable_pods(problem: Problem) -> int:
    return sum(t.count for t in problem.types if not t.pending)


def restrict(
    problem: Problem, sources: set[int], used: dict[int, set[int]] | None = None, max_targets: int | None = None
) -> tuple[Problem, dict[int, int]]:
    """The same instance with only the movable pods on ``sources`` left as variables; with ``max_targets``, each movable
    type keeps that many of its best-ranked targets, plus the nodes ``used`` says a plan moves pods of it to.

    Pods elsewhere become fixed load; a node left with fixed GPU pods can no longer be
    freed. Returns the narrowed problem and the old -> new type index map.
    """
    fixed = [dict(s.fixed) for s in problem.nodes]
    types: list[PodType] = []
    mapping: dict[int, int] = {}
    for ptype in problem.types:
        kept = {n: pods for n, pods in ptype.initial.items() if n in sources}
        for node, pods in ptype.initial.items():
            if node not in sources:
                for r, v in ptype.requests.items():
                    fixed[node][r] = fixed[node].get(r, 0) + v * len(pods)
        if not ptype.pending and not kept:
            continue
        mapping[ptype.index] = len(types)
        types.append(_narrowed(problem, ptype, len(types), kept, (used or {}).get(ptype.index, ()), max_targets))
    states = [
        replace(
            s,
            fixed={k: v for k, v in fixed[s.index].items() if v},
            can_empty=s.can_empty and not holds_gpu_load(fixed[s.index]),
        )
        for s in problem.nodes
    ]
    return replace(problem, nodes=states, types=types), mapping


def _narrowed(
    problem: Problem,
    ptype: PodType,
    index: int,
    kept: dict[int, list[Pod]],
    used: Iterable[int],
    max_targets: int | None,
) -> PodType:
    """``ptype`` as ``restrict`` keeps it: its pods on the sources (``kept``), and where they may go."""
    narrowed = replace(ptype, index=index, initial=kept)
    targets = [n for n in ptype.targets if n in kept or n not in ptype.initial]  # dropped sources receive no more
    ranked: list[int] = []
    used_nodes: set[int] = set()
    if max_targets is not None and not ptype.pending:
        # Keep the best-ranked targets, plus every node the warm start leaves this type on; not a stay-only node
        # whose pods were left out (fixed load now): it would lose its mark and become a receiver.
        allowed = set(targets)
        ranked = list(itertools.islice((n for n in ptype.ranked_targets if n in allowed), max_targets))
        used_nodes = {n for n in used if n in kept or n not in ptype.stay_only}
        targets = sorted(set(ranked) | set(kept) | used_nodes)
    narrowed.targets = tuple(targets)
    narrowed.stay_only = frozenset(n for n in ptype.stay_only if n in kept)
    if max_targets is not None and not ptype.pending and not ptype.uses_gpu:
        # A pod without GPUs arrives only where it ranks (nodes without GPUs first) or the warm start put one: its
        # other homes, GPU nodes, keep their pods but take no more (CPU pods trading GPU nodes only swap the crowding,
        # and a swap cannot run one eviction at a time).
        receiving = set(ranked) | used_nodes
        narrowed.stay_only |= {n for n in kept if n not in receiving and problem.nodes[n].node.is_gpu_node}
    return narrowed

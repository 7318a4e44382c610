"""The partition step: room on partitionable DRA GPUs (dynamic MIG) for pending pods, by moving the pods in its way.

On a partitionable GPU the free counters, not a count of devices, say what fits: a pending ``3g`` needs four aligned
memory slices free on one GPU, and ``1g`` pods scattered across the slots block it while the node shows plenty free. The
CP-SAT model sees such a node as the devices its free counters cut into (``Partitions.decompose``) and keeps the pods
holding partitionable devices in place (``Unmovable.PARTITIONED``); this step, run on the plan's chosen point, works
on the counters themselves:

1. the plan's own placements and moves onto partitionable nodes are replayed as kube-scheduler allocates, first fit in
   the pool's device order; one that would find no device is dropped, said in the notes;
2. each pending pod asking partitionable devices the plan did not place (by priority, then name) goes where first fit
   gives it its devices now; failing that, for one device, to the placement whose blocking pods are fewest (then
   cheapest) to move, when every one of them may move (every rule of ``movability`` but this one) and first fit gives it
   a device on another node with room for it (a replacement is steered by node, so never on its own node, where it
   could take the room back);
3. with the objective ``balanced`` or ``max-free``, whole partitionable nodes are drained: every GPU pod left on one
   moves to a GPU already in use elsewhere where first fit gives it a device, the nodes holding the fewest pods first,
   while the moves' cost per GPU freed stays within ``balanced_moves_per_gpu`` (balanced) and ``max_moves``.

A run makes every move before it places the pods they make room for, and kube-scheduler binds at once a pending pod
that fits now: so a node is opened for one pending pod or receives moved pods, never both, and a drained node neither
receives nor is opened.

Every device named is the one first fit is expected to give (``devices``): the run reads each replacement's claim and
says where the allocator chose otherwise.

Imports: ``compactor.model``, the problem and solution; no solver.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from compactor.model.partitions import Counter, PartitionDevice, Partitions, give_back, take
from compactor.model.resources import is_gpu_resource
from compactor.model.types import Pod
from compactor.planner.cpsat.deadline import Deadline
from compactor.planner.problem import PodType, Problem, port_requests
from compactor.planner.rules.movability import Unmovable
from compactor.planner.rules.price import Pricing
from compactor.planner.solution import ConcreteMove, ConcretePlacement, gpu_pods_after, loads_after


@dataclass
class PartitionStep:
    moves: list[ConcreteMove] = field(default_factory=list)
    placements: list[ConcretePlacement] = field(default_factory=list)
    dropped: set[str] = field(default_factory=set)  # pods of the plan's placements first fit finds no device for
    devices: dict[str, tuple[str, ...]] = field(default_factory=dict)  # pod -> devices first fit is expected to give it
    notes: list[str] = field(default_factory=list)


@dataclass
class _Node:
    """A partitionable node as the step changes it: who holds which device, the counters left, the room left."""

    index: int
    partitions: Partitions
    holders: dict[str, str]  # device -> pod key
    free: dict[Counter, int]
    room: dict[str, int]  # non-GPU resources left after the plan
    whole: int = 0  # GPUs none of whose counters is consumed

    def __post_init__(self) -> None:
        self.count_whole()

    def count_whole(self) -> None:
        self.whole = len(self.partitions.whole_free_sets(self.free))

    def fits_rest(self, pod: Pod) -> bool:
        return all(self.room.get(r, 0) >= v for r, v in pod.requests.items() if not is_gpu_resource(r))

    def add(self, pod: Pod, devices: Sequence[PartitionDevice]) -> None:
        for device in devices:
            self.holders[device.name] = pod.key
            self.free = take(self.free, device)
        self._room(pod, -1)
        self.count_whole()

    def remove(self, pod: Pod) -> None:
        for name in [n for n, holder in self.holders.items() if holder == pod.key]:
            del self.holders[name]
            device = self.partitions.device(name)
            if device is not None:
                self.free = give_back(self.free, device)
        self._room(pod, 1)
        self.count_whole()

    def _room(self, pod: Pod, sign: int) -> None:
        for resource, value in pod.requests.items():
            if not is_gpu_resource(resource):
                self.room[resource] = self.room.get(resource, 0) + sign * value


def asks(pod: Pod) -> dict[str, int]:
    return {r: v for r, v in pod.requests.items() if is_gpu_resource(r) and v > 0}


def plan_partitions(
    problem: Problem,
    moves: Sequence[ConcreteMove],
    placements: Sequence[ConcretePlacement],
    *,
    max_moves: int | None,
    deadline: Deadline | None = None,
) -> PartitionStep:
    """Moves and placements to add to the plan's (and its placements first fit would not honour). ``deadline``: the
    search for moves stops there (the pods not searched for are said in the notes)."""
    step = PartitionStep()
    nodes = _partitionable(problem, moves, placements)
    if not nodes:
        return step
    _replay(problem, nodes, moves, placements, step)
    placed = {p.pod.key for p in placements} - step.dropped
    moved = {m.pod.key for m in moves}
    waiting = [
        (ptype, pod)
        for ptype in problem.types
        if ptype.pending
        for pod in ptype.pending_pods
        if pod.key not in placed and asks(pod)
    ]
    waiting.sort(key=lambda item: (-item[1].priority, item[1].key))
    for ptype, pod in waiting:  # those first fit places now: kube-scheduler binds them before any move is made
        index = _direct(problem, nodes, pod)
        if index is not None:
            _place(nodes[index], ptype, pod, step)
    context = _Search(problem, nodes, {p.key: p for p in problem.snapshot.pods}, moved)
    # nodes pending pods are bound to before any move (the plan's and those first fit places now) are not opened by
    # moves as well; they may receive moved pods (which arrive after them)
    context.bound |= {p.target for p in [*placements, *step.placements] if p.target in nodes}
    placed |= {p.pod.key for p in step.placements}
    searching = [item for item in waiting if item[1].key not in placed]
    for done, (ptype, pod) in enumerate(searching):
        if deadline is not None and deadline.expired():
            step.notes.append(
                f"the time limit stopped the partition step: {len(searching) - done} pending pod(s) not searched for"
            )
            break
        room_for = None if max_moves is None else max_moves - len(moves) - len(step.moves)
        option = _best_option(context, pod, room_for)
        if option is None:
            continue
        target, shifts = option
        _shift(context, shifts, step)
        context.opened.add(target)
        _place(nodes[target], ptype, pod, step)
    settings = problem.settings
    if settings.aims.goal == "free-nodes" and settings.aims.objective != "pending-only":
        _drain(context, step, moves, placements, max_moves, deadline)
    return step


def _shift(search: _Search, shifts: Sequence[Shift], step: PartitionStep) -> None:
    for pod, home, devices in shifts:
        source = next(n for n in search.nodes.values() if pod.key in n.holders.values())
        source.remove(pod)
        search.nodes[home].add(pod, devices)
        search.moved.add(pod.key)
        search.receivers.add(home)
        step.moves.append(ConcreteMove(pod, _moved_type(pod, search.pricing), source.index, home))
        step.devices[pod.key] = tuple(d.name for d in devices)


def _drain(
    search: _Search,
    step: PartitionStep,
    moves: Sequence[ConcreteMove],
    placements: Sequence[ConcretePlacement],
    max_moves: int | None,
    deadline: Deadline | None,
) -> None:
    """Whole partitionable nodes freed: every GPU pod left on one moves to a GPU already in use elsewhere, where first fit
    gives it a device; the nodes holding the fewest pods first, within ``balanced_moves_per_gpu`` (objective
    balanced: the moves' cost per GPU freed, as the curve prices it) and ``max_moves``. A node that received or was
    opened for a pod is not drained, nor drained into."""
    problem, settings = search.problem, search.problem.settings
    after = gpu_pods_after(problem, [*moves, *step.moves], [*placements, *step.placements])
    per_gpu = settings.aims.balanced_moves_per_gpu if settings.aims.objective == "balanced" else math.inf
    order = sorted(
        search.nodes.values(), key=lambda n: (len(set(n.holders.values())), problem.nodes[n.index].node.name)
    )
    for node in order:
        if deadline is not None and deadline.expired():
            step.notes.append("the time limit stopped the partition step before it tried every node to drain")
            return
        holders = sorted(set(node.holders.values()))
        gpus = problem.nodes[node.index].gpus
        room = math.inf if max_moves is None else max_moves - len(moves) - len(step.moves)
        if (
            not holders
            or node.index in search.opened | search.receivers | search.bound
            or after[node.index] != len(holders)  # other GPU pods stay on it
            or len(holders) > room
            or any(search.pods.get(h) is None or h in search.moved for h in holders)
            or any(problem.unmovable.get(h) is not Unmovable.PARTITIONED for h in holders)
        ):
            continue
        cost = sum(search.pricing.cost(search.pods[h]) for h in holders) / settings.aims.move_cost.base
        if cost > per_gpu * gpus:
            continue
        search.drained.add(node.index)
        taken: dict[int, _Node] = {}
        shifts = [_home(search, node.index, search.pods[h], taken, into_used=True) for h in holders]
        if any(shift is None for shift in shifts):
            search.drained.discard(node.index)
            continue
        _shift(search, [s for s in shifts if s is not None], step)


@dataclass
class _Search:
    """What the search for moves reads and keeps: a run makes every move before it places the pods they make room for,
    so a node is opened for one pending pod or receives moved pods, never both (the order would not be first fit's)."""

    problem: Problem
    nodes: dict[int, _Node]
    pods: Mapping[str, Pod]
    moved: set[str]
    opened: set[int] = field(default_factory=set)
    bound: set[int] = field(default_factory=set)  # pending pods bound to them before any move
    receivers: set[int] = field(default_factory=set)
    drained: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.pricing = Pricing.of(self.problem.snapshot, self.problem.settings.aims.move_cost)


def _direct(problem: Problem, nodes: Mapping[int, _Node], pod: Pod) -> int | None:
    for index in sorted(nodes, key=lambda i: problem.nodes[i].node.name):
        node = nodes[index]
        fits = node.fits_rest(pod) and _why_not(problem, pod, index) is None
        if fits and node.partitions.allocate(asks(pod), node.free) is not None:
            return index
    return None


def _place(node: _Node, ptype: PodType, pod: Pod, step: PartitionStep) -> None:
    given = node.partitions.allocate(asks(pod), node.free) or []
    node.add(pod, given)
    step.placements.append(ConcretePlacement(pod, ptype, node.index))
    step.devices[pod.key] = tuple(d.name for d in given)


def _partitionable(
    problem: Problem, moves: Sequence[ConcreteMove], placements: Sequence[ConcretePlacement]
) -> dict[int, _Node]:
    loads = loads_after(problem, list(moves), list(placements))
    found: dict[int, _Node] = {}
    for state in problem.nodes:
        partitions = state.node.partitions
        if partitions is None or not state.is_target_pool:
            continue
        room = {r: v - loads[state.index].get(r, 0) for r, v in state.capacity.items() if not is_gpu_resource(r)}
        found[state.index] = _Node(state.index, partitions, dict(partitions.held), partitions.free(), room)
    return found


def _replay(
    problem: Problem,
    nodes: Mapping[int, _Node],
    moves: Sequence[ConcreteMove],
    placements: Sequence[ConcretePlacement],
    step: PartitionStep,
) -> None:
    """The plan's arrivals on partitionable nodes, allocated first fit in plan order (moves first, as a run makes them)."""
    arrivals = [(m.pod, m.target) for m in moves] + [(p.pod, p.target) for p in placements]
    for pod, index in arrivals:
        node = nodes.get(index)
        if node is None or not asks(pod):
            continue
        given = node.partitions.allocate(asks(pod), node.free)
        if given is None:
            step.dropped.add(pod.key)
            step.notes.append(
                f"{pod.key} left out: first fit finds no partitionable device for it on "
                f"{problem.nodes[index].node.name} once the plan's other pods have theirs"
            )
            continue
        for device in given:
            node.holders[device.name] = pod.key
            node.free = take(node.free, device)
        node.count_whole()  # its room is the plan's already (``loads_after``)
        step.devices[pod.key] = tuple(d.name for d in given)


Shift = tuple[Pod, int, list[PartitionDevice]]
MAX_TARGETS = (
    64  # nodes tried to open for one pending pod  # a blocking pod, the node it goes to, the devices first fit gives it
)


def _best_option(search: _Search, pod: Pod, room_for: int | None) -> tuple[int, list[Shift]] | None:
    """(node, the moves it takes) for the pending pod: the fewest moves (then the cheapest, then the node's name)."""
    problem, wanted = search.problem, asks(pod)
    if sum(wanted.values()) != 1:
        return None  # room for several devices at once is not searched for
    (resource,) = wanted
    best: tuple[tuple[int, int, str], int, list[Shift]] | None = None
    candidates = [
        n
        for i, n in search.nodes.items()
        if i not in search.opened
        and i not in search.bound
        and i not in search.receivers
        and n.fits_rest(pod)
        and _why_not(problem, pod, i) is None
        and any(d.resource == resource for d in n.partitions.devices)
    ]
    # the GPUs with the most counters free first: where the fewest pods are in the way (at most MAX_TARGETS tried)
    candidates.sort(key=lambda n: (-sum(n.free.values()), problem.nodes[n.index].node.name))
    for node in candidates[:MAX_TARGETS]:
        index = node.index
        if best is not None and len(best[2]) == 1:
            break  # one move is the fewest a blocked pod takes
        for device in node.partitions.devices:
            if device.resource != resource:
                continue
            shifts = _clear(search, node, device)
            if shifts is None or (room_for is not None and len(shifts) > room_for):
                continue
            key = (len(shifts), sum(search.pricing.cost(b) for b, _, _ in shifts), problem.nodes[index].node.name)
            if best is None or key < best[0]:
                best = (key, index, shifts)
    return None if best is None else (best[1], best[2])


def _clear(search: _Search, node: _Node, device: PartitionDevice) -> list[Shift] | None:
    """The moves that free ``device``'s counters on ``node``: each pod holding a counter it lacks, to the first node
    (other partitionable nodes, fewest whole-free GPUs first) where it may go and first fit gives it a device."""
    short = {c for c, amount in device.consumes if node.free.get(c, 0) < amount}
    blocking = sorted(
        {
            holder
            for name, holder in node.holders.items()
            if (held := node.partitions.device(name)) is not None and any(c in short for c, _ in held.consumes)
        }
    )
    free = dict(node.free)
    for key in blocking:
        pod = search.pods.get(key)
        if pod is None or key in search.moved or search.problem.unmovable.get(key) is not Unmovable.PARTITIONED:
            return None
        for name in [n for n, holder in node.holders.items() if holder == key]:
            held = node.partitions.device(name)
            free = give_back(free, held) if held is not None else free
    if not device.fits(free):
        return None
    shifts: list[Shift] = []
    taken: dict[int, _Node] = {}  # homes as the shifts so far leave them
    for key in blocking:
        home = _home(search, node.index, search.pods[key], taken)
        if home is None:
            return None
        shifts.append(home)
    return shifts


def _home(
    search: _Search, away_from: int, pod: Pod, taken: dict[int, _Node], *, into_used: bool = False
) -> Shift | None:
    """The node a moved pod goes to (``into_used``: only GPUs some device of which is held already)."""
    problem = search.problem
    candidates = [
        taken.get(i, n)
        for i, n in search.nodes.items()
        if i != away_from
        and i not in search.opened
        and i not in search.drained
        and not (into_used and n.whole == len(n.partitions.gpus))
    ]
    candidates.sort(key=lambda n: (n.whole, problem.nodes[n.index].node.name))
    for node in candidates:
        if not node.fits_rest(pod) or _why_not(problem, pod, node.index) is not None:
            continue
        given = node.partitions.allocate(asks(pod), node.free)
        if given is not None:
            trial = _Node(node.index, node.partitions, dict(node.holders), dict(node.free), dict(node.room))
            trial.add(pod, given)
            taken[node.index] = trial
            return pod, node.index, given
    return None


def _why_not(problem: Problem, pod: Pod, index: int) -> str | None:
    rules = problem.rules
    return rules.why_not(pod, problem.nodes[index].node) if rules is not None else None


def _moved_type(pod: Pod, pricing: Pricing) -> PodType:
    """A type of its own for a pod the CP-SAT model kept in place (it holds a partitionable device)."""
    return PodType(-1, port_requests(pod), pod, pricing.cost(pod), pod.namespace, True, False)

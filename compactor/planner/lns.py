"""Large-neighbourhood search: improve a plan of a big cluster one small CP-SAT model at a time.

At thousands of nodes the whole model is too large to prove (``solver._narrow`` keeps a part of it, chosen once). Here
the incumbent is improved repeatedly: each iteration frees a few dozen nodes ``S`` (a *neighbourhood*), fixes every
other pod where the incumbent put it, solves that sub-problem level by level (``levels.solve_levels``), hinted with the
incumbent, and keeps the result when the whole plan ranks better (``objective.rank``) and stays within the move limits.

What is a variable (pods of one type are interchangeable; the incumbent's counts are split per type):

- every movable pod that started on a node of ``S`` (it may stay home, stay where the incumbent put it, or go to any
  target in the sub-problem's nodes);
- every movable pod the incumbent moved *onto* a node of ``S`` from elsewhere (its home then joins the sub-problem,
  so it may go back): otherwise such pods would be fixed load that keeps the node from being freed;
- pending pods the incumbent placed on ``S`` or left pending (placed on ``S`` or on receivers ``R``).

Everything else is fixed load where the incumbent put it. A node outside ``S`` holding fixed GPU load cannot be freed
(``can_empty`` false), and a node no variable reaches is left out of the model entirely, so its freed status is the
incumbent's: the whole plan's rank is recomputed after lifting the sub-solution back.

Move limits are global: the sub-problem's caps are lowered by what the fixed part spends (maxMoves exactly; per node
and per namespace by the most any of its nodes / namespaces already spends, which is safe but may be stricter);
minGainPerMove is checked on the whole plan only. Shape mode (``target_shapes``) is not searched: its objective is
not ``rank``'s.

Imports: the level solver (CP-SAT only through it), the objective, greedy's loads, the problem, the deadline, the
settings; never ``ortools``.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from compactor.model.resources import CPU
from compactor.planner.deadline import Deadline
from compactor.planner.greedy import prune
from compactor.planner.levels import solve_levels
from compactor.planner.loads import Loads
from compactor.planner.objective import Assignment, Rank, empty_nodes, rank, within_limits
from compactor.planner.problem import NodeState, PodType, Problem, gpu_pools, holds_gpu_load
from compactor.settings import PlannerSettings

MAX_NODES = 16  # nodes in a neighbourhood ``S``
MAX_PODS = 160  # movable pods the neighbourhood's nodes hold or held (the sub-model's size, roughly)
RECEIVERS = 8  # nodes outside ``S`` with spare GPUs that may receive
PLAIN_RECEIVERS = 4  # nodes without GPUs outside ``S`` that may receive CPU pods
SUB_SECONDS = 0.5  # at most this per sub-solve: many small solves beat a few long ones
MIN_SECONDS = 0.05  # less than this left: not worth building a model
MAX_STALL = 300  # iterations in a row without improvement: the neighbourhoods are exhausted (a deterministic clock
#                  spends nothing outside CP-SAT, so tiny models might otherwise loop for long)


@dataclass
class Stats:
    """What a search did (for benchmarks and reports)."""

    iterations: int = 0
    accepted: int = 0
    by_kind: dict[str, list[int]] = field(default_factory=dict)  # neighbourhood kind -> [tried, accepted]


def improve(
    problem: Problem, start: Assignment, deadline: Deadline, *, seed: int = 1, stats: Stats | None = None
) -> Assignment:
    """A plan of ``problem`` at least as good as ``start`` (``objective.rank``), found before ``deadline``.

    ``start`` must be valid; when it breaks a move limit, or in shape mode, it is returned unchanged."""
    stats = stats if stats is not None else Stats()
    if problem.target_shapes or not within_limits(problem, start) or deadline.remaining() < MIN_SECONDS:
        return start
    rng = random.Random(seed)
    current = _Incumbent(problem, start)
    kinds = _Neighbourhoods(problem, rng)
    seen: set[frozenset[int]] = set()
    stall = 0
    while deadline.remaining() >= MIN_SECONDS and not deadline.expired() and stall < MAX_STALL:
        kind, sources = kinds.next(current)
        stall += 1
        if not sources or frozenset(sources) in seen:
            continue
        seen.add(frozenset(sources))
        stats.iterations += 1
        tried = stats.by_kind.setdefault(kind, [0, 0])
        tried[0] += 1
        better = _iterate(problem, current, sources, deadline.until(min(SUB_SECONDS, deadline.remaining())))
        if better is not None:
            current = better
            seen.clear()  # the incumbent changed: every neighbourhood is worth another look
            stall = 0
            stats.accepted += 1
            tried[1] += 1
    return current.assignment


class _Incumbent:
    """The best plan so far and what the neighbourhoods read of it."""

    def __init__(self, problem: Problem, assignment: Assignment) -> None:
        self.problem = problem
        self.assignment = assignment
        self.rank: Rank = rank(problem, assignment)
        self.loads = Loads(problem, assignment)
        self.freed = empty_nodes(problem, assignment)
        self.outs = [0] * len(problem.nodes)  # moves out of each node
        self.pods = [0] * len(problem.nodes)  # movable pods a node holds or held: what putting it in ``S`` costs
        self.left: dict[int, list[int]] = {}  # node -> types some of whose pods left it
        for ptype in problem.types:
            if ptype.pending:
                continue
            final = assignment.counts.get(ptype.index, {})
            for node, count in final.items():
                self.pods[node] += count
            for node, pods in ptype.initial.items():
                out = max(0, len(pods) - final.get(node, 0))
                self.outs[node] += out
                self.pods[node] += out
                if out:
                    self.left.setdefault(node, []).append(ptype.index)


def _iterate(problem: Problem, current: _Incumbent, sources: set[int], deadline: Deadline) -> _Incumbent | None:
    """Solve the neighbourhood ``sources``; the better incumbent, or None."""
    sub = _sub_problem(problem, current, sources)
    if sub is None:
        return None
    if not within_limits(sub.problem, sub.hint):
        return None  # the lowered caps bind the incumbent's own part (per node or namespace): nothing to gain here
    # The levels directly, on one model: ``_solve_once`` would split it into components, each copying every node.
    levels, _ = solve_levels(sub.problem, sub.hint, deadline)
    lifted = sub.lift(levels.best)
    if rank(problem, lifted) <= current.rank:
        return None
    lifted = prune(problem, lifted)  # returns pods the sub-model moved for nothing (only lowers the cost)
    if not within_limits(problem, lifted) or not valid(problem, lifted):
        return None
    return _Incumbent(problem, lifted)


@dataclass
class _Sub:
    """A neighbourhood's sub-problem, its start (the incumbent's part) and how to put a solution of it back."""

    problem: Problem
    hint: Assignment
    whole: Assignment  # the incumbent less the variable part
    back: dict[int, int]  # sub-problem type -> whole problem type

    def lift(self, assignment: Assignment) -> Assignment:
        counts = {t: dict(per) for t, per in self.whole.counts.items()}
        placed = {t: dict(per) for t, per in self.whole.placed.items()}
        for source, target in ((assignment.counts, counts), (assignment.placed, placed)):
            for new, per_node in source.items():
                acc = target.setdefault(self.back[new], {})
                for node, count in per_node.items():
                    acc[node] = acc.get(node, 0) + count
        return Assignment(_nonzero(counts), _nonzero(placed))


def _nonzero(table: dict[int, dict[int, int]]) -> dict[int, dict[int, int]]:
    cleaned = {t: {n: k for n, k in per.items() if k} for t, per in table.items()}
    return {t: per for t, per in cleaned.items() if per}


@dataclass
class _Split:
    """One movable type's incumbent counts split into the variable part (``initial``: where its pods started, ``final``:
    where the incumbent put them) and the fixed rest."""

    initial: dict[int, int]
    final: dict[int, int]


def _split(ptype: PodType, final: dict[int, int], sources: set[int]) -> _Split | None:
    """Which of the type's pods are variables when ``sources`` is the neighbourhood (None: none are).

    Pods on ``sources`` before or after are; movers from ``sources`` fill the arrivals on ``sources`` first, the rest of
    them take arrivals elsewhere, and arrivals on ``sources`` they leave over are pods from outside, whose homes join."""
    initial = {n: len(p) for n, p in ptype.initial.items()}
    if not any(n in sources for n in initial) and not any(n in sources for n in final):
        return None
    var_initial = {n: k for n, k in initial.items() if n in sources}
    var_final = {n: k for n, k in final.items() if n in sources and k}
    moved_out = sum(max(0, k - final.get(n, 0)) for n, k in var_initial.items())
    arrived = sum(max(0, final.get(n, 0) - initial.get(n, 0)) for n in sources if n in final)
    # Movers from ``sources`` not landing on ``sources``: take arrivals elsewhere.
    _take(
        var_final,
        {n: k - initial.get(n, 0) for n, k in final.items() if n not in sources and k > initial.get(n, 0)},
        moved_out - min(moved_out, arrived),
    )
    # Arrivals on ``sources`` from outside: their homes are nodes outside that lost pods.
    _take(
        var_initial,
        {n: k - final.get(n, 0) for n, k in initial.items() if n not in sources and k > final.get(n, 0)},
        arrived - min(moved_out, arrived),
    )
    return _Split(var_initial, var_final)


def _take(acc: dict[int, int], available: dict[int, int], wanted: int) -> None:
    """Add ``wanted`` pods to ``acc`` from ``available`` (node -> pods), in node order (deterministic)."""
    for node in sorted(available):
        if wanted <= 0:
            return
        k = min(wanted, available[node])
        acc[node] = acc.get(node, 0) + k
        wanted -= k


def _sub_problem(problem: Problem, current: _Incumbent, sources: set[int]) -> _Sub | None:
    """The neighbourhood's sub-problem (see the module's docstring)."""
    incumbent = current.assignment
    splits: dict[int, _Split] = {}
    for ptype in problem.types:
        if not ptype.pending:
            found = _split(ptype, incumbent.counts.get(ptype.index, {}), sources)
            if found is not None:
                splits[ptype.index] = found
    if not splits:
        return None
    nodes = set(sources)
    for part in splits.values():
        nodes.update(part.initial)
        nodes.update(part.final)
    receivers = _receivers(problem, current, splits, nodes)
    nodes.update(receivers)
    pending_free = {
        t.index: t.count - sum(k for n, k in incumbent.placed.get(t.index, {}).items() if n not in sources)
        for t in problem.types
        if t.pending
    }
    types, back, hint = _sub_types(problem, incumbent, splits, pending_free, sources, sources | set(receivers))
    whole = _without_variables(incumbent, splits, sources)
    states = _sub_nodes(problem, current, splits, incumbent, sources, nodes)
    settings = _sub_settings(problem, incumbent, splits, types)
    if settings is None:
        return None
    sub = replace(problem, nodes=states, types=types, settings=settings)
    return _Sub(sub, hint, whole, back)


def _sub_types(
    problem: Problem,
    incumbent: Assignment,
    splits: dict[int, _Split],
    pending_free: dict[int, int],
    sources: set[int],
    open_: set[int],
) -> tuple[list[PodType], dict[int, int], Assignment]:
    """The sub-problem's types (movable ones with variable pods, pending ones with pods to place), renumbered, and the
    hint: the incumbent's variable part. ``open_``: the nodes any variable may go to (``S`` and the receivers)."""
    types: list[PodType] = []
    back: dict[int, int] = {}
    hint = Assignment()
    for ptype in problem.types:
        new = len(types)
        if ptype.pending:
            targets = tuple(n for n in ptype.targets if n in open_)
            if not targets or pending_free[ptype.index] <= 0:
                continue
            types.append(
                replace(ptype, index=new, pending_pods=ptype.pending_pods[: pending_free[ptype.index]], targets=targets)
            )
            placed = {n: k for n, k in incumbent.placed.get(ptype.index, {}).items() if n in sources}
            if placed:
                hint.placed[new] = placed
        else:
            part = splits.get(ptype.index)
            if part is None:
                continue
            # A node the type may only stay on receives none: a target only where some of its variable pods started.
            # Its own homes and places in the incumbent, and otherwise only ``S`` and the receivers: a type reaching every
            # node of the sub-problem would make its model grow with the square of the neighbourhood.
            homes = frozenset(part.initial)
            targets = tuple(
                n for n in ptype.targets if n in homes or n in part.final or (n in open_ and n not in ptype.stay_only)
            )
            initial = {n: ptype.initial[n][:k] for n, k in part.initial.items()}
            types.append(replace(ptype, index=new, initial=initial, targets=targets, stay_only=ptype.stay_only & homes))
            hint.counts[new] = dict(part.final)
        back[new] = ptype.index
    return types, back, hint


def _without_variables(incumbent: Assignment, splits: dict[int, _Split], sources: set[int]) -> Assignment:
    """The incumbent less its variable part: the fixed pods, where it put them."""
    counts = {t: dict(per) for t, per in incumbent.counts.items()}
    for t, part in splits.items():
        acc = counts.setdefault(t, {})
        for node, k in part.final.items():
            acc[node] = acc.get(node, 0) - k
    placed = {t: {n: k for n, k in per.items() if n not in sources} for t, per in incumbent.placed.items()}
    return Assignment(_nonzero(counts), _nonzero(placed))


def _sub_nodes(
    problem: Problem,
    current: _Incumbent,
    splits: dict[int, _Split],
    incumbent: Assignment,
    sources: set[int],
    nodes: set[int],
) -> list[NodeState]:
    """Every node, its fixed load the incumbent's less the variables on it; only the sub-problem's nodes may be freed."""
    load = {n: dict(current.loads.load[n]) for n in nodes}
    for t, part in splits.items():
        _subtract(load, problem.types[t], part.final)
    for t, per_node in incumbent.placed.items():
        _subtract(load, problem.types[t], {n: k for n, k in per_node.items() if n in sources})
    states = []
    for state in problem.nodes:
        fixed = load.get(state.index)
        if fixed is None:
            states.append(replace(state, can_empty=False) if state.can_empty else state)
        else:
            fixed = {r: v for r, v in fixed.items() if v}
            states.append(replace(state, fixed=fixed, can_empty=state.can_empty and not holds_gpu_load(fixed)))
    return states


def _subtract(load: dict[int, dict[str, int]], ptype: PodType, per_node: dict[int, int]) -> None:
    for node, k in per_node.items():
        acc = load[node]
        for r, v in ptype.items:
            acc[r] = acc.get(r, 0) - v * k


def _sub_settings(
    problem: Problem, incumbent: Assignment, splits: dict[int, _Split], types: Sequence[PodType]
) -> PlannerSettings | None:
    """The settings with each move cap less what the fixed part spends (None: it spends them all)."""
    cfg = problem.settings
    fixed_total, fixed_node, fixed_namespace = _fixed_moves(problem, incumbent, splits)
    update: dict[str, object] = {
        "min_gain_per_move": 0.0
    }  # checked on the whole plan (it counts freed GPUs everywhere)
    if cfg.max_moves is not None:
        update["max_moves"] = cfg.max_moves - fixed_total
    if cfg.max_moves_per_node is not None:
        homes = {n for t in types if not t.pending for n in t.initial}
        update["max_moves_per_node"] = cfg.max_moves_per_node - max((fixed_node.get(n, 0) for n in homes), default=0)
    if cfg.max_moves_per_namespace is not None:
        spaces = {t.namespace for t in types if not t.pending}
        update["max_moves_per_namespace"] = cfg.max_moves_per_namespace - max(
            (fixed_namespace.get(s, 0) for s in spaces), default=0
        )
    if any(isinstance(v, int) and v < 0 for v in update.values()):
        return None
    return cfg.model_copy(update=update)


def _fixed_moves(
    problem: Problem, incumbent: Assignment, splits: dict[int, _Split]
) -> tuple[int, dict[int, int], dict[str, int]]:
    """Moves of the fixed pods: in total, per source node, per namespace (the incumbent's less the variables')."""
    total, per_node, per_namespace = 0, dict[int, int](), dict[str, int]()
    for ptype in problem.types:
        if ptype.pending:
            continue
        final = incumbent.counts.get(ptype.index, {})
        part = splits.get(ptype.index)
        for node, pods in ptype.initial.items():
            out = max(0, len(pods) - final.get(node, 0))
            if part is not None:  # the variable pods' moves: every one of them that started here and is not here
                out -= max(0, part.initial.get(node, 0) - part.final.get(node, 0))
            if out > 0:
                total += out
                per_node[node] = per_node.get(node, 0) + out
                per_namespace[ptype.namespace] = per_namespace.get(ptype.namespace, 0) + out
    return total, per_node, per_namespace


def _receivers(problem: Problem, current: _Incumbent, splits: dict[int, _Split], taken: set[int]) -> list[int]:
    """Up to ``RECEIVERS`` not-freed nodes with the most spare GPUs among the variable GPU pods' targets, and up to
    ``PLAIN_RECEIVERS`` nodes without GPUs with the most spare CPU among the variable CPU pods' targets (where the room
    a pending pod or a displaced GPU pod needs beside GPUs goes)."""
    gpu_candidates: set[int] = set()
    plain_candidates: set[int] = set()
    for t in splits:
        ptype = problem.types[t]
        found = gpu_candidates if ptype.uses_gpu else plain_candidates
        found.update(n for n in ptype.targets if n not in taken and n not in current.freed and n not in ptype.stay_only)
    nodes, loads = problem.nodes, current.loads
    spare = {n: loads.free_gpus(nodes[n]) for n in gpu_candidates}
    ranked = sorted((n for n in gpu_candidates if spare[n] > 0), key=lambda n: (-spare[n], nodes[n].node.name))
    cpu = {
        n: nodes[n].capacity.get(CPU, 0) - loads.load[n].get(CPU, 0)
        for n in plain_candidates
        if not nodes[n].node.is_gpu_node
    }
    roomy = sorted((n for n, free in cpu.items() if free > 0), key=lambda n: (-cpu[n], nodes[n].node.name))
    return ranked[:RECEIVERS] + roomy[:PLAIN_RECEIVERS]


def valid(problem: Problem, assignment: Assignment) -> bool:
    """Does ``assignment`` keep every rule of the model (not the move limits: ``within_limits``)? Conservation, targets,
    stay-only nodes and capacity per node and resource, computed from scratch (a guard: a bug here costs a plan)."""
    load = [dict(s.fixed) for s in problem.nodes]
    for ptype in problem.types:
        per_node = (assignment.placed if ptype.pending else assignment.counts).get(ptype.index, {})
        if any(k < 0 for k in per_node.values()):
            return False
        if ptype.pending and sum(per_node.values()) > ptype.count:
            return False
        if not ptype.pending and sum(per_node.values()) != ptype.count:
            return False
        targets = set(ptype.targets)
        for node, k in per_node.items():
            if k and (node not in targets or (node in ptype.stay_only and k > len(ptype.initial.get(node, ())))):
                return False
            for r, v in ptype.items:
                load[node][r] = load[node].get(r, 0) + v * k
    return all(
        load[s.index].get(r, 0) <= s.capacity.get(r, 0)
        for s in problem.nodes
        for r in load[s.index]
        if load[s.index][r] > 0
    )


class _Neighbourhoods:
    """The neighbourhood kinds, in turn; each picks its nodes at random (``seed``), within ``MAX_NODES``/``MAX_PODS``."""

    KINDS = ("pool", "near-empty", "one-node", "type", "moves", "pending")

    def __init__(self, problem: Problem, rng: random.Random) -> None:
        self.problem = problem
        self.rng = rng
        self.turn = 0
        # Pools: GPU nodes linked by GPU pod types (CPU pods may go almost anywhere and would link every node).
        group = gpu_pools(problem)
        pools: dict[int, list[int]] = {}
        for state in problem.nodes:
            if state.gpus:
                pools.setdefault(group[state.index], []).append(state.index)
        self.pools = [nodes for nodes in pools.values() if len(nodes) > 1]
        self.gpu_types = [t for t in problem.types if t.uses_gpu and not t.pending and t.count]
        self.pending_types = [t for t in problem.types if t.pending and t.targets]

    def next(self, current: _Incumbent) -> tuple[str, set[int]]:
        kind = self.KINDS[self.turn % len(self.KINDS)]
        self.turn += 1
        pick = {
            "pool": self._pool,
            "near-empty": self._near_empty,
            "one-node": self._one_node,
            "type": self._type,
            "moves": self._moves,
            "pending": self._pending,
        }[kind]
        return kind, pick(current)

    def _fill(self, current: _Incumbent, nodes: Iterable[int], chosen: set[int] | None = None) -> set[int]:
        """``chosen`` plus ``nodes`` in order while the size limits allow."""
        chosen = set() if chosen is None else chosen
        pods = sum(current.pods[n] for n in chosen)
        for node in nodes:
            if len(chosen) >= MAX_NODES:
                break
            if node in chosen or pods + current.pods[node] > MAX_PODS:
                continue
            chosen.add(node)
            pods += current.pods[node]
        return chosen

    def _some_pool(self) -> list[int]:
        """A pool at random, larger pools more often."""
        return self.rng.choices(self.pools, weights=[len(p) for p in self.pools])[0] if self.pools else []

    def _pool(self, current: _Incumbent) -> set[int]:
        """A random sample of one pool."""
        pool = self._some_pool()
        return self._fill(current, self.rng.sample(pool, len(pool)))

    def _near_empty(self, current: _Incumbent) -> set[int]:
        """In one pool: the not-freed nodes nearest to empty (fewest GPU pods), the freed nodes that cost the most moves
        (trading a costly freed node for a cheap one keeps the GPUs and saves moves) and the nodes with the most spare
        GPUs (room for the others' pods, their own pods movable too)."""
        pool, loads, nodes = self._some_pool(), current.loads, self.problem.nodes
        almost = sorted(
            (
                n
                for n in pool
                if nodes[n].can_empty and n not in current.freed and not loads.fixed_gpu[n] and loads.gpu_pods[n]
            ),
            key=lambda n: (loads.gpu_pods[n], self.rng.random()),
        )
        costly = sorted(
            (n for n in pool if n in current.freed and current.outs[n]),
            key=lambda n: (-current.outs[n], self.rng.random()),
        )
        roomy = sorted(
            (n for n in pool if n not in current.freed), key=lambda n: (-loads.free_gpus(nodes[n]), self.rng.random())
        )
        quarter = max(1, MAX_NODES // 4)
        picked = self.rng.sample(almost[: 2 * quarter], min(len(almost), quarter)) + costly[:quarter]
        picked += self.rng.sample(roomy[: 4 * quarter], min(len(roomy), 2 * quarter))
        return self._fill(current, picked)

    def _one_node(self, current: _Incumbent) -> set[int]:
        """One not-freed node with few GPU pods and the nodes of its pool with some spare GPUs, the fullest first: to free
        it, its pods need room that only a repacking of the partly full nodes may make."""
        loads, nodes = current.loads, self.problem.nodes
        pool = self._some_pool()
        almost = sorted(
            (
                n
                for n in pool
                if nodes[n].can_empty and n not in current.freed and not loads.fixed_gpu[n] and loads.gpu_pods[n]
            ),
            key=lambda n: (loads.gpu_pods[n], self.rng.random()),
        )
        if not almost:
            return set()
        node = self.rng.choice(almost[:MAX_NODES])
        spare = {n: loads.free_gpus(nodes[n]) for n in pool if n != node and n not in current.freed}
        partly = sorted((n for n, free in spare.items() if free > 0), key=lambda n: (spare[n] + self.rng.random(), n))
        return self._fill(current, [node, *partly])

    def _type(self, current: _Incumbent) -> set[int]:
        """The nodes one GPU pod type starts on or may reach (a sample of them)."""
        if not self.gpu_types:
            return set()
        ptype = self.rng.choice(self.gpu_types)
        nodes = list(ptype.initial) + self.rng.sample(ptype.targets, len(ptype.targets))
        return self._fill(current, nodes)

    def _pending(self, current: _Incumbent) -> set[int]:
        """Where one pending type was placed, with the nodes of its targets nearest to empty and those with the most spare
        GPUs: a pending pod may cross pools, so the pools' neighbourhoods never hold both its node and a better one."""
        if not self.pending_types:
            return set()
        ptype = self.rng.choice(self.pending_types)
        loads, nodes = current.loads, self.problem.nodes
        placed = sorted(current.assignment.placed.get(ptype.index, {}))
        targets = [n for n in ptype.targets if n not in current.freed]
        by_pods = sorted(targets, key=lambda n: (loads.gpu_pods[n], self.rng.random()))[: MAX_NODES // 4]
        by_room = sorted(targets, key=lambda n: (-loads.free_gpus(nodes[n]), self.rng.random()))[: MAX_NODES // 2]
        return self._fill(current, [*placed, *by_pods, *by_room])

    def _moves(self, current: _Incumbent) -> set[int]:
        """The nodes a few of the incumbent's moves touch: sources, and the nodes their types arrived on."""
        moved = [n for n, k in enumerate(current.outs) if k]
        if not moved:
            return self._near_empty(current)
        chosen: set[int] = set()
        for source in self.rng.sample(moved, min(len(moved), 4)):
            self._fill(current, [source, *self._arrivals(current, source)], chosen)
        return chosen

    def _arrivals(self, current: _Incumbent, source: int) -> list[int]:
        """Nodes where types that left ``source`` gained pods."""
        found: list[int] = []
        for t in current.left.get(source, ()):
            ptype = self.problem.types[t]
            final = current.assignment.counts.get(t, {})
            found.extend(n for n, k in sorted(final.items()) if k > len(ptype.initial.get(n, ())))
        return found

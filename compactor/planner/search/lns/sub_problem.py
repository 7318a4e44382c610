"""A neighbourhood's sub-problem for the large-neighbourhood search (``lns.py``): which of the incumbent's pods become
variables when the nodes ``S`` are freed, the fixed load everything else leaves, the lowered move caps, and how a
solution of the sub-problem is lifted back into a plan of the whole problem.

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
minGainPerMove is checked on the whole plan only.

Separate from the loop because it is the bookkeeping between the whole problem and a small one: the loop only solves
what this builds and ranks what it lifts back.

Imports: the objective's ``Assignment``, the problem, the incumbent, ``compactor.model``, the settings; never
``ortools``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from compactor.model.resources import CPU
from compactor.planner.objective import Assignment
from compactor.planner.problem import NodeState, PodType, Problem, holds_gpu_load
from compactor.planner.search.lns.incumbent import Incumbent
from compactor.settings.bundles import PlannerSettings

RECEIVERS = 8  # nodes outside ``S`` with spare GPUs that may receive
PLAIN_RECEIVERS = 4  # nodes without GPUs outside ``S`` that may receive CPU pods


@dataclass
class SubProblem:
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


def sub_problem(problem: Problem, current: Incumbent, sources: set[int]) -> SubProblem | None:
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
    return SubProblem(sub, hint, whole, back)


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
    current: Incumbent,
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
    fixed_total, fixed_node, fixed_namespace = _fixed_moves(problem, incumbent, splits)
    homes = {n for t in types if not t.pending for n in t.initial}
    spaces = {t.namespace for t in types if not t.pending}
    update = problem.limits.left_after(
        fixed_total,
        max((fixed_node.get(n, 0) for n in homes), default=0),
        max((fixed_namespace.get(s, 0) for s in spaces), default=0),
    )
    return None if update is None else problem.settings.amended(**update)


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


def _receivers(problem: Problem, current: Incumbent, splits: dict[int, _Split], taken: set[int]) -> list[int]:
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

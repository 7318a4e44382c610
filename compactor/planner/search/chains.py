"""Making room on a node: which movable pods leave it so that a pod fits there, and where each goes (chains).

A GPU node crowded by pods without GPUs has its GPUs free in name only: a pending pod asking 8 GPUs and 64 CPUs does
not fit there until CPU pods leave too, and a GPU pod displaced to make room finds free GPUs elsewhere but not the CPU
and memory to go with them. So room is made for every resource a pod asks:

- ``evictions``: the fewest pods to take off a node (GPU pods and pods without GPUs alike) for a pod to fit there:
  a greedy cover of what is missing, the pod covering the most of it first, the cheaper on ties;
- ``relocate``: one pod to a node where it fits (``loads.best_target``), or, when a GPU pod finds free GPUs only on
  nodes short of CPU, memory or pod slots, to such a node after pods without GPUs leave it for nodes where they fit
  (a chain of one hop: ``chain``);
- ``make_room``: both, for every pod the cover takes off the node; all or nothing.

Every step changes an ``Assignment``'s counts through ``Loads`` and returns the moves it made, so a caller can take
them back (``undo``). Used by the greedy warm start (pending pods, drains), the curve's greedy steps and the chain
baseline (``baselines.chain_placement``).

Imports: the problem and the loads only; no solver.
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Mapping, Sequence

from compactor.model.resources import is_gpu_resource
from compactor.planner.problem import PodType, Problem
from compactor.planner.search.loads import Fit, Loads, best_target

Move = tuple[PodType, int, int]  # (type, from node, to node) of one pod
Counts = dict[int, dict[int, int]]

CHAIN_NODES = 8  # GPU nodes tried per displaced GPU pod for a chain: the first few with free GPUs decide


def missing(loads: Loads, node: int, items: Sequence[tuple[str, int]]) -> dict[str, int]:
    """What a pod asking ``items`` lacks on ``node`` now, per resource (empty: it fits)."""
    load, capacity = loads.load[node], loads.capacity[node]
    return {r: need for r, v in items if (need := load.get(r, 0) + v - capacity.get(r, 0)) > 0}


def evictions(
    problem: Problem,
    loads: Loads,
    node: int,
    items: Sequence[tuple[str, int]],
    *,
    gpu_pods: bool = True,
    excluded: Collection[int] = (),
) -> list[int] | None:
    """The movable pods (their types, one entry per pod) to take off ``node`` so a pod asking ``items`` fits: few, by a
    greedy cover of what it lacks, the pod covering the largest share of it first, the cheaper on ties. ``gpu_pods``
    false: pods without GPUs only; no pod of a type in ``excluded``. None: no choice of those pods makes room."""
    lacking = missing(loads, node, items)
    if not lacking:
        return []
    on: dict[int, int] = dict(loads.other_types[node])
    if gpu_pods:
        on.update(loads.gpu_types[node])
    for t in excluded:
        on.pop(t, None)
    if not _coverable(problem, on, lacking):
        return None
    taken: list[int] = []
    while lacking:
        best, best_key = -1, (0.0, 0, 0)
        for t, left in on.items():
            if not left:
                continue
            ptype = problem.types[t]
            share = sum(min(ptype.requests.get(r, 0), need) / need for r, need in lacking.items())
            key = (share, -ptype.cost, -t)
            if share > 0 and key > best_key:
                best, best_key = t, key
        if best < 0:
            return None
        taken.append(best)
        on[best] -= 1
        requests = problem.types[best].requests
        lacking = {r: left for r, need in lacking.items() if (left := need - requests.get(r, 0)) > 0}
    return taken


def _coverable(problem: Problem, on: Mapping[int, int], lacking: Mapping[str, int]) -> bool:
    """Do the pods ``on`` a node hold at least what is lacking, resource by resource?"""
    return all(
        sum(problem.types[t].requests.get(r, 0) * k for t, k in on.items()) >= need for r, need in lacking.items()
    )


def undo(loads: Loads, moves: Sequence[Move], counts: Counts) -> None:
    """Take back ``moves``, last first."""
    for ptype, source, target in reversed(moves):
        loads.move(ptype, target, source, counts)


def relocate(
    problem: Problem,
    loads: Loads,
    counts: Counts,
    ptype: PodType,
    source: int,
    avoid: set[int],
    *,
    chains: bool = True,
    fit: Fit = best_target,
) -> list[Move] | None:
    """Move one pod of ``ptype`` off ``source`` (never onto ``avoid``): where ``fit`` says, or else by a chain; the moves
    made, the pod's own last, or None (nothing changed)."""
    target = fit(loads, ptype, avoid)
    if target is not None:
        loads.move(ptype, source, target, counts)
        return [(ptype, source, target)]
    if not chains or not ptype.uses_gpu:
        return None
    return chain(problem, loads, counts, ptype, source, avoid, fit=fit)


def chain(
    problem: Problem,
    loads: Loads,
    counts: Counts,
    ptype: PodType,
    source: int,
    avoid: set[int],
    *,
    fit: Fit = best_target,
) -> list[Move] | None:
    """Move a GPU pod onto a node that has the GPUs for it but not the CPU, memory or pod slots, after pods without GPUs
    leave that node for nodes where they fit; the moves, or None (nothing changed). Nodes already holding GPU pods, the
    fewest free GPUs first (best fit), at most ``CHAIN_NODES`` tried."""
    gpu_items = tuple((r, v) for r, v in ptype.items if is_gpu_resource(r))
    allowed = loads.target_set(ptype)
    order = loads.order
    tried = 0
    for _, _, node in order[bisect.bisect_left(order, (loads.needs_at_least(ptype) - 1e-9,)) :]:
        if tried >= CHAIN_NODES:
            break
        if node not in allowed or node in avoid or not loads.holds_gpu_pods(node) or missing(loads, node, gpu_items):
            continue
        tried += 1
        moves = make_room(
            problem, loads, counts, ptype.items, node, avoid | {source}, gpu_pods=False, chains=False, fit=fit
        )
        if moves is None:
            continue
        loads.move(ptype, source, node, counts)
        return [*moves, (ptype, source, node)]
    return None


ROOM_TRIES = 4  # covers tried per node: each leaves out the types that found no place in the one before


def make_room(  # noqa: PLR0913
    problem: Problem,
    loads: Loads,
    counts: Counts,
    items: Sequence[tuple[str, int]],
    node: int,
    avoid: set[int],
    *,
    gpu_pods: bool = True,
    chains: bool = True,
    fit: Fit = best_target,
) -> list[Move] | None:
    """Take few movable pods off ``node`` (``evictions``; ``gpu_pods`` false: pods without GPUs only) and relocate each
    (never onto ``avoid`` nor ``node``, by a chain where needed) so that a pod asking ``items`` fits there. When one finds
    no place, a cover without its type is tried (big pods cover the most but fit the fewest holes elsewhere). The moves,
    or None (nothing changed)."""
    avoid = avoid | {node}
    excluded: set[int] = set()
    for _ in range(ROOM_TRIES):
        leaving = evictions(problem, loads, node, items, gpu_pods=gpu_pods, excluded=excluded)
        if leaving is None:
            return None
        done: list[Move] = []
        for t in leaving:
            moved = relocate(problem, loads, counts, problem.types[t], node, avoid, chains=chains, fit=fit)
            if moved is None:
                undo(loads, done, counts)
                excluded.add(t)
                break
            done.extend(moved)
        else:
            return done
    return None

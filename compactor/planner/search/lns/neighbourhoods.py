"""Which nodes the large-neighbourhood search (``lns.py``) frees next: the neighbourhood kinds, taken in turn, each
picking its nodes at random, guided by the incumbent (pools, near-empty nodes, one node and its pool's partly full
ones, a pod type's nodes, the incumbent's moves, a pending type's targets), within a size the sub-model can solve
quickly.

Separate from the loop and the sub-problem because it only chooses nodes: what becomes a variable there is
``lns_sub_problem.py``'s.

Imports: the problem (its GPU pools), the incumbent.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

from compactor.planner.problem import Problem, gpu_pools
from compactor.planner.search.lns.incumbent import Incumbent

MAX_NODES = 16  # nodes in a neighbourhood ``S``
MAX_PODS = 160  # movable pods the neighbourhood's nodes hold or held (the sub-model's size, roughly)


class Neighbourhoods:
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

    def next(self, current: Incumbent) -> tuple[str, set[int]]:
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

    def _fill(self, current: Incumbent, nodes: Iterable[int], chosen: set[int] | None = None) -> set[int]:
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

    def _pool(self, current: Incumbent) -> set[int]:
        """A random sample of one pool."""
        pool = self._some_pool()
        return self._fill(current, self.rng.sample(pool, len(pool)))

    def _near_empty(self, current: Incumbent) -> set[int]:
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

    def _one_node(self, current: Incumbent) -> set[int]:
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

    def _type(self, current: Incumbent) -> set[int]:
        """The nodes one GPU pod type starts on or may reach (a sample of them)."""
        if not self.gpu_types:
            return set()
        ptype = self.rng.choice(self.gpu_types)
        nodes = list(ptype.initial) + self.rng.sample(ptype.targets, len(ptype.targets))
        return self._fill(current, nodes)

    def _pending(self, current: Incumbent) -> set[int]:
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

    def _moves(self, current: Incumbent) -> set[int]:
        """The nodes a few of the incumbent's moves touch: sources, and the nodes their types arrived on."""
        moved = [n for n, k in enumerate(current.outs) if k]
        if not moved:
            return self._near_empty(current)
        chosen: set[int] = set()
        for source in self.rng.sample(moved, min(len(moved), 4)):
            self._fill(current, [source, *self._arrivals(current, source)], chosen)
        return chosen

    def _arrivals(self, current: Incumbent, source: int) -> list[int]:
        """Nodes where types that left ``source`` gained pods."""
        found: list[int] = []
        for t in current.left.get(source, ()):
            ptype = self.problem.types[t]
            final = current.assignment.counts.get(t, {})
            found.extend(n for n, k in sorted(final.items()) if k > len(ptype.initial.get(n, ())))
        return found

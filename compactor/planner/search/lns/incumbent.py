"""The large-neighbourhood search's incumbent: the best plan so far, with the tallies per node its neighbourhoods and
sub-problems read of it (loads, freed nodes, moves out, pods held or left).

Separate from the loop (``lns.py``) so that the neighbourhoods (``lns_neighbourhoods.py``) and the sub-problem
(``lns_sub_problem.py``), which the loop imports, can read it without importing the loop back.

Imports: the objective, greedy's loads, the problem.
"""

from __future__ import annotations

from compactor.planner.objective import Assignment, Rank, empty_nodes, rank
from compactor.planner.problem import Problem
from compactor.planner.search.loads import Loads


class Incumbent:
    """The best plan so far and what the neighbourhoods and the sub-problems read of it."""

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

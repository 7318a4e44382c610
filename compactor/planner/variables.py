"""The CP-SAT decision variables for a ``Problem`` (the only ortools importer besides solver.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from compactor.planner import int64
from compactor.planner.greedy import Assignment
from compactor.planner.problem import Problem


@dataclass
class Variables:
    model: cp_model.CpModel
    final: dict[tuple[int, int], cp_model.IntVar] = field(default_factory=dict)  # (type, node) -> pods ending there
    out: dict[tuple[int, int], cp_model.IntVar] = field(default_factory=dict)  # (type, node) -> pods leaving
    placed: dict[tuple[int, int], cp_model.IntVar] = field(default_factory=dict)  # (pending type, node) -> placed
    empty: dict[int, cp_model.IntVar] = field(default_factory=dict)  # GPU node -> runs no GPU pod after
    headroom: dict[tuple[int, int], cp_model.IntVar] = field(default_factory=dict)  # (shape, node) -> copies that fit
    bounds: dict[int, int] = field(default_factory=dict)  # variable index -> its largest value (reading the proto is slow)

    def new_int_var(self, lower: int, upper: int, name: str) -> cp_model.IntVar:
        var = self.model.new_int_var(lower, upper, name)
        self.bounds[var.index] = upper
        return var

    def new_bool_var(self, name: str) -> cp_model.IntVar:
        var = self.model.new_bool_var(name)
        self.bounds[var.index] = 1
        return var

    def upper(self, var: cp_model.IntVar) -> int:
        """``int64.upper``, from the bounds recorded here when the variable was made here."""
        found = self.bounds.get(var.index)
        return found if found is not None else int64.upper(var)

    def hint(self, problem: Problem, assignment: Assignment, empty_nodes: set[int]) -> None:
        self.model.clear_hints()  # type: ignore[no-untyped-call]
        for (t, n), var in self.final.items():
            self.model.add_hint(var, assignment.counts.get(t, {}).get(n, 0))
        for (t, n), var in self.placed.items():
            self.model.add_hint(var, assignment.placed.get(t, {}).get(n, 0))
        for (t, n), var in self.out.items():
            initial = len(problem.types[t].initial.get(n, ()))
            self.model.add_hint(var, max(0, initial - assignment.counts.get(t, {}).get(n, 0)))
        for n, var in self.empty.items():
            self.model.add_hint(var, 1 if n in empty_nodes else 0)


def make_variables(problem: Problem) -> Variables:
    model = cp_model.CpModel()
    v = Variables(model)
    for ptype in problem.types:
        count = ptype.count
        for node in ptype.targets:
            if ptype.pending:
                v.placed[ptype.index, node] = v.new_int_var(0, count, f"placed_{ptype.index}_{node}")
                continue
            initial = len(ptype.initial.get(node, ()))
            # A current node the type may not be moved to (cordoned, tainted, ...) keeps at most its own pods.
            receives = node not in ptype.stay_only
            v.final[ptype.index, node] = v.new_int_var(0, count if receives else initial, f"final_{ptype.index}_{node}")
            if initial:
                v.out[ptype.index, node] = v.new_int_var(0, initial, f"out_{ptype.index}_{node}")
    for state in problem.nodes:
        if state.gpus and state.can_empty:
            v.empty[state.index] = v.new_bool_var(f"empty_{state.index}")
    return v

"""The CP-SAT decision variables for a ``Problem``: what the levels' and the curve's models are made of.

Imports: the CP-SAT types through ``cpsat`` (never ``ortools`` itself), the problem, the objective's ``Assignment``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from compactor.planner import cpsat
from compactor.planner.cpsat import int64
from compactor.planner.cpsat.deadline import Deadline
from compactor.planner.objective import Assignment
from compactor.planner.problem import Problem

if TYPE_CHECKING:
    from compactor.planner.cpsat import CpModel, IntVar


@dataclass
class Variables:
    model: CpModel
    final: dict[tuple[int, int], IntVar] = field(default_factory=dict)  # (type, node) -> pods ending there
    out: dict[tuple[int, int], IntVar] = field(default_factory=dict)  # (type, node) -> pods leaving
    placed: dict[tuple[int, int], IntVar] = field(default_factory=dict)  # (pending type, node) -> placed
    empty: dict[int, IntVar] = field(default_factory=dict)  # GPU node -> runs no GPU pod after
    headroom: dict[tuple[int, int], IntVar] = field(default_factory=dict)  # (shape, node) -> copies that fit
    # node -> pods without GPUs may arrive (then none of its pods leaves): ``constraints.sinks``
    sink: dict[int, IntVar] = field(default_factory=dict)
    # variable index -> its largest value (reading the proto is slow)
    bounds: dict[int, int] = field(default_factory=dict)
    deadline: Deadline | None = None  # building stops (``OutOfTime``) once it has passed: see ``tick``

    def tick(self) -> None:
        """Called by the builders every type or node: at thousands of nodes building a model takes seconds, and the time
        limit bounds the whole plan."""
        if self.deadline is not None:
            self.deadline.check()

    def new_int_var(self, lower: int, upper: int, name: str) -> IntVar:
        var = self.model.new_int_var(lower, upper, name)
        self.bounds[var.index] = upper
        return var

    def new_bool_var(self, name: str) -> IntVar:
        var = self.model.new_bool_var(name)
        self.bounds[var.index] = 1
        return var

    def upper(self, var: IntVar) -> int:
        """``int64.upper``, from the bounds recorded here when the variable was made here."""
        found = self.bounds.get(var.index)
        return found if found is not None else int64.upper(var)

    def hint(self, problem: Problem, assignment: Assignment, empty_nodes: set[int]) -> None:
        """The assignment as the solver's hint (``cpsat.hint``: in one batch)."""
        counts, placed = assignment.counts, assignment.placed
        indices = [var.index for var in self.final.values()]
        values = [counts.get(t, {}).get(n, 0) for t, n in self.final]
        indices += [var.index for var in self.placed.values()]
        values += [placed.get(t, {}).get(n, 0) for t, n in self.placed]
        indices += [var.index for var in self.out.values()]
        values += [max(0, len(problem.types[t].initial.get(n, ())) - counts.get(t, {}).get(n, 0)) for t, n in self.out]
        indices += [var.index for var in self.empty.values()]
        values += [1 if n in empty_nodes else 0 for n in self.empty]
        if self.sink:
            receiving = plain_arrivals(problem, assignment)
            indices += [var.index for var in self.sink.values()]
            values += [1 if n in receiving else 0 for n in self.sink]
        cpsat.hint(self.model, indices, values)

    def rebind(self, model: CpModel) -> Variables:
        """The same variables in ``model``, a clone of this model (``CpModel.clone``) made before anything was added."""

        def at(var: IntVar) -> IntVar:
            return model.get_int_var_from_proto_index(var.index)

        return Variables(
            model,
            {k: at(v) for k, v in self.final.items()},
            {k: at(v) for k, v in self.out.items()},
            {k: at(v) for k, v in self.placed.items()},
            {k: at(v) for k, v in self.empty.items()},
            {k: at(v) for k, v in self.headroom.items()},
            {k: at(v) for k, v in self.sink.items()},
            dict(self.bounds),
        )


def plain_arrivals(problem: Problem, assignment: Assignment) -> set[int]:
    """Nodes where pods without GPUs arrive under ``assignment``."""
    found: set[int] = set()
    for ptype in problem.types:
        if not ptype.pending and not ptype.uses_gpu:
            for node, count in assignment.counts.get(ptype.index, {}).items():
                if count > len(ptype.initial.get(node, ())):
                    found.add(node)
    return found


def make_variables(problem: Problem, deadline: Deadline | None = None) -> Variables:
    """The variables of a model of ``problem``; with a ``deadline``, ``OutOfTime`` once it passes (here or in a builder)."""
    model = cpsat.new_model()
    v = Variables(model, deadline=deadline)
    for ptype in problem.types:
        v.tick()
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

"""The planner's one door to OR-Tools CP-SAT: the model types, hints, and a solve within a ``Deadline``.

Every CP-SAT model of the planner (the levels, ``levels.py``; the trade-off curve's cost model, ``frontier.py``; the
bounds, ``bound.py`` and ``move_bound.py``; the large-neighbourhood search's sub-models, through the levels) is built
with the types re-exported here and solved by ``solve``, which sets the time limit, the seed and the workers the
deadline asks for, charges the deterministic time spent to it, and names the status as the library does
(``CpSolver.status_name``: OPTIMAL, FEASIBLE, INFEASIBLE, MODEL_INVALID, UNKNOWN). A model is changed only through the
model API (``fix``: ``IntVar.with_domain``), except the solution hint, written to the model in one batch (``hint``).

Imports: ``ortools`` (the only planner module that does) and ``deadline``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

from compactor.planner.cpsat.deadline import Deadline

if TYPE_CHECKING:
    from ortools.sat.python.cp_model import CpModel, CpSolver, IntVar, LinearExpr, LinearExprT

__all__ = [
    "FOUND",
    "OPTIMAL",
    "CpModel",
    "IntVar",
    "LinearExpr",
    "LinearExprT",
    "Solved",
    "fix",
    "hint",
    "new_model",
    "size",
    "solve",
    "total",
    "weighted_sum",
]

# Deterministic runs: a wall-clock safety cap, this many times the deterministic limit (+ WALL_FLOOR s), so that a
# solve cannot run for ever; it must not bind on an ordinary machine, or the plan would depend on the machine's speed:
# a 0.5 s bound's solve at 400 nodes took 8.5-9.1 s of wall clock with the other core busy (10x + 1 s cut it at 6 s,
# and the plan changed between runs). A solve the cap stops is counted (``Deadline.wall_capped``) and the plan says so.
WALL_CAP = 60.0
WALL_FLOOR = 1.0

OPTIMAL = "OPTIMAL"
FOUND = frozenset({OPTIMAL, "FEASIBLE"})  # statuses that come with a solution


@dataclass(frozen=True)
class Solved:
    """A finished solve: its status (the library's name) and what the solver holds."""

    status: str
    solver: CpSolver

    @property
    def found(self) -> bool:
        """A solution came with it (OPTIMAL or FEASIBLE)."""
        return self.status in FOUND

    @property
    def optimal(self) -> bool:
        return self.status == OPTIMAL

    @property
    def infeasible(self) -> bool:
        return self.status == "INFEASIBLE"

    @property
    def objective(self) -> float:
        return float(self.solver.objective_value)

    @property
    def bound(self) -> float:
        """The best proven objective bound (infinite or meaningless when the solve proved nothing)."""
        return float(self.solver.best_objective_bound)

    def value(self, var: IntVar) -> int:
        return int(self.solver.value(var))


def solve(model: CpModel, deadline: Deadline, seconds: float, *, workers: int | None = None) -> Solved:
    """Solve ``model`` within ``seconds`` of ``deadline``'s clock, with its seed and workers (or ``workers``)."""
    solver = _cp_model().CpSolver()
    params = solver.parameters
    params.random_seed = deadline.seed
    params.num_workers = workers or deadline.workers
    if deadline.deterministic:
        params.interleave_search = True
        params.max_deterministic_time = seconds
        params.max_time_in_seconds = WALL_CAP * seconds + WALL_FLOOR
    else:
        params.max_time_in_seconds = seconds
    status = solver.solve(model)
    deadline.spend(solver.deterministic_time)
    if (
        deadline.deterministic
        and solver.wall_time >= params.max_time_in_seconds
        and solver.deterministic_time < seconds
    ):
        deadline.capped_by_wall()
    return Solved(solver.status_name(status), solver)


def hint(model: CpModel, indices: Sequence[int], values: Sequence[int]) -> None:
    """Replace the model's solution hint by ``values`` for the variables of ``indices``, in one batch (``CpModel.add_hint``
    per variable took most of a second at hundreds of thousands of variables)."""
    model.clear_hints()  # type: ignore[no-untyped-call]
    found = model.proto.solution_hint
    found.vars.extend(indices)
    found.values.extend(values)


def fix(var: IntVar, value: int) -> None:
    """Fix ``var`` to ``value`` for the next solves (its domain becomes that one value)."""
    var.with_domain(_cp_model().Domain(value, value))


def _cp_model() -> ModuleType:
    """OR-Tools' CP-SAT module, imported on first use: it takes most of a second (it pulls in pandas), which commands
    that never plan (``report``, ``apply`` of a written plan, the controller between cycles) should not pay."""
    from ortools.sat.python import cp_model  # a heavy optional import, deferred on purpose (see above)

    return cp_model


def new_model() -> CpModel:
    """An empty CP-SAT model."""
    model: CpModel = _cp_model().CpModel()
    return model


def total(terms: Iterable[LinearExprT]) -> LinearExpr:
    """The sum of ``terms``."""
    found: LinearExpr = _cp_model().LinearExpr.sum(list(terms))
    return found


def weighted_sum(terms: Sequence[LinearExprT], coefficients: Sequence[int]) -> LinearExpr:
    """The sum of ``terms`` weighted by ``coefficients``."""
    found: LinearExpr = _cp_model().LinearExpr.weighted_sum(terms, coefficients)
    return found


def size(model: CpModel) -> int:
    """The model's variables."""
    return len(model.proto.variables)

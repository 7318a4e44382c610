"""The planner: a snapshot and settings in, a ``CompactionPlan`` out. Pure apart from the solver's clock.

Layout (the flow of ``compose.compose``, which takes one ``request.PlanRequest`` through named stages: scope, problem,
search (``search``, where the time limit is shared out), decide, document, then the run budgets' cut (``budget_cut``)):

* ``problem``: the snapshot as an optimisation instance (pod types, nodes, targets), with ``movability`` (and
  ``placeable`` for pending pods), ``eligibility``, ``price`` (what a move costs), ``history`` (what earlier runs
  forbid) and ``pins``;
* ``objective``: the objective, stated once (an ``Assignment`` and its terms: pending placed, GPUs freed or shape
  headroom, move cost; ``rank``; the move limits);
* ``greedy``: the warm start; ``deadline``: the time limit (``Deadline``) on one of two clocks;
* ``cpsat``: the one door to OR-Tools CP-SAT (model types, hints, a solve within a deadline, the library's status
  names); ``variables``, ``constraints`` and ``int64`` build the model with it;
* ``levels``: the lexicographic levels (data: one ``Level`` per objective term) solved on one model;
* ``solver``: the search around them (narrowing at scale, components, ``lns``, one eviction at a time), with the
  whole-cluster bounds ``bound`` and ``move_bound``; ``lns`` is the loop, ``lns_neighbourhoods`` which nodes it frees
  next, ``lns_sub_problem`` the small model of them and the lift back, ``lns_incumbent`` the best plan so far;
* ``frontier``: the trade-off curve and the point the policy chooses;
* ``solution``: concrete moves in execution order; ``recut`` and ``mig_advice``: MIG layouts; ``partitions``: moves
  and placements on partitionable DRA devices (dynamic MIG), by first fit on their counters;
* ``budgets``: the run budgets' cut (nodes drained per pool, moves per workload), applied to the chosen point and plan
  by ``budget_cut``; ``pending``: why pods stay pending;
* ``plan``: the plan document's model; ``document``: its parts (moves with reasons, the curve's rows, the solver
  report, why pods stay) built once (its text and markdown rendering is ``compactor.render.plan``); ``baselines``: what it is
  benchmarked against.

The document's figures before and after the plan are ``compactor.app.plan_document``'s. No planner module imports
``compactor.actions``, ``compactor.kube``, ``compactor.app``, ``prometheus_client`` or ``apscheduler``; only ``cpsat``
imports ``ortools``. Each module's docstring says what it imports.
"""

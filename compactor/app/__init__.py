"""The application layer: what the compactor does, once, for every entry point.

The command line (``compactor.cli``, ``compactor.commands``) and the controller (``compactor.controller``) are adapters:
they parse their options into one ``Invocation`` (``invocation.py``: the settings with the command's overrides, the
input, live or dry run), make one call here and render the result. Each use case lives in one place, so ``plan``,
``run --once``, ``report`` and a controller cycle cannot drift apart:

* ``reading.py``: load a snapshot (files, the bundled example, or the live cluster: the one way it is read), the
  dry run's copy of the cluster, the clients a live command talks through;
* ``figures.py``: the reference shapes (``metrics.reference_shapes``, else derived with ``metrics.shape_coverage`` and
  ``max_shapes``) and the fragmentation figures measured with them;
* ``planning.py``: a plan of a snapshot (the checks, the shapes, the MIG layouts, the fence), what the steering and the
  history allow;
* ``cycle.py``: the one pipeline of ``run --once``, ``apply`` and the controller's tick (a dead run's leftovers,
  recover, measure, plan, carry out, measure again), on ``Ports`` each entry point wires: ``once.py`` for the command
  line (the Lease, the stop signals, a recording client for dry runs), ``tick.py`` for the controller (the leader's
  client, the exporter);
* ``carry_out.py``: one plan through the executor, refused when it would undo recent moves, remembered after;
* ``policy.py``: what the mode, the disruption windows and the circuit breaker let a run do now;
* ``last_run.py``: what a ``run --once`` leaves behind (the summary ConfigMap, its Event, the Pushgateway).

Nothing here defines command-line options, prints to the terminal or serves HTTP.
"""

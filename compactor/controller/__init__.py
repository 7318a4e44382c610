"""``compactor controller``: compaction cycles on a schedule, /metrics and /healthz on one HTTP port.

Every replica computes the fragmentation figures each cycle and exports them; only
the holder of the Lease ``gpu-compactor-leader`` (``compactor.kube.lease``) also
recovers, plans and executes. One cycle (``compactor.app.tick.run_cycle``, over ``compactor.app.cycle.cycle``) is the same
sequence as ``compactor run --once``: recover -> snapshot -> figures -> plan -> execute.

Shutdown (SIGTERM/SIGINT): the scheduler stops taking new cycles; a cycle in progress
finishes the API call it is making and stops at its next wait (``Interrupted``), leaving
the executor's state ConfigMap in place, so recovery resumes or rolls the run back on the
next start (or on the next leader). The Lease is released so a standby takes over at once.

* ``loop.py``: the ``Controller`` (the scheduler's cycle and lease jobs, the probes);
* ``http.py``: the HTTP server of /metrics, /healthz and /readyz;
* ``exporter.py``: the Prometheus exporter (the only module that imports ``prometheus_client``).

Its command line (options, wiring) is ``compactor.commands.controller``.
"""

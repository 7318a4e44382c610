"""The executor: carries a plan out on a cluster, and recovers a run a crash interrupted.

Everything here talks to a cluster only through the ``ClusterClient`` port (``port/client.py``): the Kubernetes adapter
(``compactor.kube.cluster_client``), the dry run's recording client (``dryrun/``) and the Lease-fenced wrapper
(``services/fencing.py``) implement it, so a dry run swaps the client, not the logic. A run writes its state before each
change (``cluster/run_state.py``, ``run/``), fences the nodes it frees with its own taint, evicts through the Eviction API
only (never a pod DELETE), steers replacements (``steering/``) and takes its steps one module each (``steps/``).

May import: ``compactor.model``, ``compactor.settings``, the planner's plan document and rules (``compactor.planner``),
the port's own modules. Never ``kubernetes`` (only ``compactor.kube``), ``prometheus_client`` or the entry points.
"""

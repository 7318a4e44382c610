"""The service types entry points name, re-exported so that they import the application layer only.

The controller's loop holds a cluster client and a Lease elector (built by ``wiring.py``), keeps time with the executor's
clocks (a stop or a lost Lease interrupts a cycle at its next wait: ``StoppableClock``, ``Interrupted``) and logs the
executor's ``Progress``; the commands show that progress too. They name these types; they build none of the services.
"""

from __future__ import annotations

from compactor.actions.client import ClusterClient
from compactor.actions.clock import Clock, Interrupted, RealClock, StoppableClock, on_stop_signals
from compactor.actions.executor import Progress
from compactor.kube.lease import LeaderElector

__all__ = [
    "Clock",
    "ClusterClient",
    "Interrupted",
    "LeaderElector",
    "Progress",
    "RealClock",
    "StoppableClock",
    "on_stop_signals",
]

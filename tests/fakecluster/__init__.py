"""A fake cluster that enforces the rules the executor relies on, in simulated time.

``FakeCluster`` implements ``ClusterClient`` over an in-memory store of API-shaped
dicts (``tests/builders.py``) and plays the parts of the cluster that react to the
executor: the eviction subresource (PDB checks, 404/429/500), the disruption
controller (PDB status), ReplicaSet/StatefulSet/Job controllers (replacements, created under each controller's own user,
as kube-controller-manager creates them), a scheduler (cooperative best-fit, spreading like the default profile, or
adversarial) and the kubelet (binding -> Running/Ready).
Time only moves through ``FakeClock.sleep``/``advance``/``settle``; each step runs
``tick()``. Tests can inject failures and crashes and check invariants afterwards.
Nothing here uses real time or unseeded randomness.


The package by concern; everything tests import comes from here (``from tests.fakecluster import FakeCluster, ...``):

* ``cluster.py``: ``FakeCluster``, the ``ClusterClient`` interface over the store, simulated time (``advance``,
  ``settle``, ``tick``), the hooks tests change the world with, and the invariants and views they check;
* ``store.py``: ``ClusterStore``, the in-memory objects and their books (loading, admitting pods, uids and
  resourceVersions);
* ``controllers.py``: the eviction subresource, the ReplicaSet/StatefulSet/Job controllers, the node lifecycle
  controller's cordon taint, the steering admission policy and the disruption controller;
* ``scheduler.py``: the scheduler (``SCHEDULER_MODES``) and the kubelet;
* ``faults.py``: the calls recorded, and the failures and crashes injected into them (``fail_next``, ``crash_after``,
  ``Crash``);
* ``migmanager.py``: ``FakeMigManager``; ``clock.py``: ``FakeClock``; ``objects.py``: what the parts share (``EPOCH``,
  ``Call``, ``Controller``, ``merge_patch``, ``is_fenced``, the objects' helpers).

``FakeCluster`` is one class over those layers (``ClusterStore`` <- ``FaultInjection`` <- ``SchedulerAndKubelet`` <-
``Controllers`` <- ``FakeCluster``): each calls only into the ones below it.
"""

from __future__ import annotations

from compactor.actions.port.client import Obj
from tests.fakecluster.clock import FakeClock
from tests.fakecluster.cluster import CONFIGMAP_LIMIT, FakeCluster
from tests.fakecluster.controllers import (
    DELETION_COST,
    JOB_BACKOFF_LIMIT,
    PDB_BLOCKED,
    PDB_MULTIPLE,
    job_ignores_disruptions,
)
from tests.fakecluster.faults import METHODS, WRITES, Crash, Failure
from tests.fakecluster.migmanager import MIG_CONFIG_LABEL, MIG_STATE_LABEL, FakeMigManager
from tests.fakecluster.objects import (
    CONTROLLER_KINDS,
    EPOCH,
    SOURCE,
    STEERING_CONFIGMAP,
    TERMINAL,
    UNSCHEDULABLE_TAINT,
    Call,
    Controller,
    T,
    is_fenced,
    merge_patch,
)
from tests.fakecluster.scheduler import SCHEDULER_MODES, SchedulerMode, free_gpus
from tests.fakecluster.store import ADMISSION_KINDS

__all__ = [
    "ADMISSION_KINDS",
    "CONFIGMAP_LIMIT",
    "CONTROLLER_KINDS",
    "DELETION_COST",
    "EPOCH",
    "JOB_BACKOFF_LIMIT",
    "METHODS",
    "MIG_CONFIG_LABEL",
    "MIG_STATE_LABEL",
    "PDB_BLOCKED",
    "PDB_MULTIPLE",
    "SCHEDULER_MODES",
    "SOURCE",
    "STEERING_CONFIGMAP",
    "TERMINAL",
    "UNSCHEDULABLE_TAINT",
    "WRITES",
    "Call",
    "Controller",
    "Crash",
    "Failure",
    "FakeClock",
    "FakeCluster",
    "FakeMigManager",
    "Obj",
    "SchedulerMode",
    "T",
    "free_gpus",
    "is_fenced",
    "job_ignores_disruptions",
    "merge_patch",
]

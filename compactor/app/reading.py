"""Reading the cluster: the snapshot a use case works on, the dry run's copy of the cluster (the clients: ``wiring.py``).

There is one way to read a live cluster into a snapshot (``compactor.kube.snapshot``: nodes, pods, PDBs, PersistentVolumes
and claims, the mig-parted ConfigMaps when re-cuts need them), whether ``plan``, ``run``, ``report`` or the controller
reads it. A dry run also needs the objects a real run would read and write (nodes, pods, PDBs) as dicts it can change:
``world_objects`` reads them through the same client a real run would use, so a live dry run of the command line and of
the controller start from the same copy. The planner's volumes are in the snapshot; the executor reads none.
"""

from __future__ import annotations

from compactor.actions.port.client import ClusterClient, Obj
from compactor.app.invocation import Invocation
from compactor.app.sources import example_path, mig_parted_namespace
from compactor.model.load import read_source
from compactor.model.types import Snapshot


def load_snapshot(inv: Invocation, *, mig_namespace: str | None = None) -> Snapshot:
    """The invocation's snapshot, a live cluster's read through the invocation's one connection
    (``Invocation.connection``). ``mig_namespace``: where the mig-parted ConfigMaps are listed
    (``mig_parted_namespace``; None: none is read from a live cluster)."""
    settings, source = inv.settings, inv.input()
    return source.load(
        pool_label=settings.metrics.pool_label,
        mig_config_map=settings.mig.config_map,
        mig_selector=settings.mig.selector,
        mig_namespace=mig_namespace,
        connection=inv.connection if source.live else None,
        dra_drivers=settings.dra.mappings(),
    )


def load_for_planning(inv: Invocation, *, explain_mig: bool = False) -> Snapshot:
    """The snapshot a plan is made on: with the mig-parted ConfigMaps when re-cuts (or ``--explain-mig``) need them."""
    return load_snapshot(inv, mig_namespace=mig_parted_namespace(inv.settings, explain=explain_mig))


def world_of(client: ClusterClient) -> list[Obj]:
    """What a dry run of a live cluster starts from: the nodes, pods and PDBs ``client`` reads, with the ResourceSlices and
    ResourceClaims of GPUs allocated through dynamic resource allocation (owners, autoscalers, the steering policy and
    ConfigMaps are asked of the cluster as the run needs them)."""
    dra = [*client.list_dra("ResourceSlice"), *client.list_dra("ResourceClaim")]
    return [*client.list_nodes(), *client.list_pods(), *client.list_pdbs(), *dra]


def world_objects(inv: Invocation, reader: ClusterClient | None) -> list[Obj]:
    """A dry run's copy of the cluster: every object of the snapshot files (or the example), or what ``reader`` reads of
    a live cluster (``world_of``)."""
    source = inv.input()
    if source.example:
        return read_source(example_path())
    if source.files:
        return [obj for path in source.files for obj in read_source(path)]
    if reader is None:
        raise ValueError("a live dry run reads the cluster through a client")
    return world_of(reader)

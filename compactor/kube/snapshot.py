"""A ``Snapshot`` of the live cluster: connect, read every list page by page, build (the one way the live cluster is read)."""

from __future__ import annotations

from collections.abc import Sequence

from compactor.kube.client import Connection, connect
from compactor.kube.read import DEFAULT_PAGE_SIZE, read_cluster
from compactor.model.dra import DriverMapping
from compactor.model.load import DEFAULT_POOL_LABEL, DRA_DRIVERS, build_snapshot, gc_paused
from compactor.model.types import Snapshot


def snapshot_from_cluster(
    kubeconfig: str | None,
    context: str | None,
    *,
    pool_label: str = DEFAULT_POOL_LABEL,
    page_size: int = DEFAULT_PAGE_SIZE,
    include_config_maps: bool | str = False,
    config_map_selector: str | None = None,
    in_cluster: bool = False,
    dra_drivers: Sequence[DriverMapping] = DRA_DRIVERS,
) -> Snapshot:
    """Nodes, pods, PDBs, PersistentVolumes and claims of the cluster named by ``kubeconfig``/``context`` (or in-cluster),
    read through a connection of its own, closed after the read.

    The snapshot's source is ``cluster <context name>`` or ``cluster in-cluster``;
    ``in_cluster=True`` insists on the pod's service account (``--in-cluster``).
    Raises ``InputError`` for kubeconfig problems and ``ClusterError`` for API failures.
    """
    connection = connect(kubeconfig, context, in_cluster=in_cluster)
    try:
        return snapshot_from_connection(
            connection,
            pool_label=pool_label,
            page_size=page_size,
            include_config_maps=include_config_maps,
            config_map_selector=config_map_selector,
            dra_drivers=dra_drivers,
        )
    finally:
        connection.api_client.close()  # type: ignore[no-untyped-call]


def snapshot_from_connection(
    connection: Connection,
    *,
    pool_label: str = DEFAULT_POOL_LABEL,
    page_size: int = DEFAULT_PAGE_SIZE,
    include_config_maps: bool | str = False,
    config_map_selector: str | None = None,
    dra_drivers: Sequence[DriverMapping] = DRA_DRIVERS,
) -> Snapshot:
    """The snapshot of the cluster ``connection`` talks to (left open: the controller reads through one every cycle).

    The one way the live cluster is read into a ``Snapshot``, whoever reads it (``plan``, ``run``, ``report``, the
    controller): every list page by page, decoded straight into the schema, the volumes and claims included (the planner
    moves a pod with volumes only to nodes their PersistentVolumes' node affinity allows), the mig-parted ConfigMaps
    only as ``include_config_maps`` says."""
    objects = read_cluster(
        connection.api_client,
        page_size=page_size,
        include_config_maps=include_config_maps,
        config_map_selector=config_map_selector,
        decoded=True,
    )
    with gc_paused():
        return build_snapshot(
            objects, source=f"cluster {connection.name}", pool_label=pool_label, dra_drivers=dra_drivers, live=True
        )

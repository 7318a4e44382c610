"""Where a snapshot comes from: files, stdin, the bundled example, or the live API."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from importlib import resources

from compactor.errors import ConfigError, InputError
from compactor.kube import snapshot as live_snapshot
from compactor.kube.client import Connection
from compactor.model.dra import DriverMapping
from compactor.model.guards import offered_gpu_resources, pool_label_is_default, pool_label_unused, unoffered_resources
from compactor.model.load import DRA_DRIVERS, implausible_input, load_files
from compactor.model.types import Snapshot
from compactor.planner.rules.movability import config_reason
from compactor.settings.origins import Settings
from compactor.settings.shape_syntax import parse_shape

EXAMPLE_RESOURCE = "example-cluster.json"


def example_path() -> str:
    return str(resources.files("compactor.data").joinpath(EXAMPLE_RESOURCE))


@dataclass(frozen=True)
class SnapshotSource:
    files: tuple[str, ...] = ()
    example: bool = False
    kubeconfig: str | None = None
    context: str | None = None
    live: bool = False
    in_cluster: bool = False
    allow_empty: bool = False  # accept a snapshot without nodes (otherwise an error: an empty read is never a cluster)

    def describe(self) -> str:
        if self.example:
            return "example cluster"
        if self.files:
            return ", ".join("<stdin>" if f == "-" else f for f in self.files)
        return "cluster (in-cluster)" if self.in_cluster else f"cluster {self.context or 'current context'}"

    def load(
        self,
        *,
        pool_label: str,
        mig_config_map: str = "",
        mig_selector: str | None = None,
        mig_namespace: str | None = None,
        connection: Connection | None = None,
        dra_drivers: Sequence[DriverMapping] = DRA_DRIVERS,
    ) -> Snapshot:
        """The snapshot. From the live API (read through ``connection`` when given, else through a connection of its own)
        it includes the mig-parted ConfigMaps only when ``mig_namespace`` (the GPU Operator's, from
        ``mig_parted_namespace``) is given: ``mig_config_map`` (namespace/name, in that namespace) when set, else those
        matching ``mig_selector`` there; without it no ConfigMap is read at all. A snapshot file keeps whatever
        ConfigMaps it holds: ``find_mig_parted`` only ever uses those of the GPU Operator's namespace."""
        if self.example:
            snapshot = _with_source(
                load_files([example_path()], pool_label=pool_label, dra_drivers=dra_drivers), "example cluster"
            )
        elif self.files:
            snapshot = load_files(list(self.files), pool_label=pool_label, dra_drivers=dra_drivers)
        elif self.live:
            include, selector = mig_parted_listing(mig_config_map, mig_selector, mig_namespace)
            if connection is not None:
                snapshot = live_snapshot.snapshot_from_connection(
                    connection,
                    pool_label=pool_label,
                    include_config_maps=include,
                    config_map_selector=selector,
                    dra_drivers=dra_drivers,
                )
            else:
                snapshot = live_snapshot.snapshot_from_cluster(
                    self.kubeconfig,
                    self.context,
                    pool_label=pool_label,
                    in_cluster=self.in_cluster,
                    include_config_maps=include,
                    config_map_selector=selector,
                    dra_drivers=dra_drivers,
                )
        else:
            raise InputError("no input: give --snapshot FILE, --example, or --kubeconfig/--context/--in-cluster")
        if not snapshot.nodes and not self.allow_empty:
            raise InputError(
                f"no Node objects: read {_contents(snapshot)}; expected `kubectl get nodes,pods,pdb,pv,pvc -A -o json` "
                "output (a failed kubectl prints nothing to the pipe; --allow-empty accepts a snapshot without nodes)",
                source=self.describe(),
            )
        return _pool_label_checked(_implausible_said(snapshot, pool_label), pool_label)


def _implausible_said(snapshot: Snapshot, pool_label: str) -> Snapshot:
    """Input that is almost certainly not what was meant, said where the user meets it (``model.load``)."""
    said = implausible_input(snapshot.nodes, snapshot.pods, pool_label)
    return replace(snapshot, warnings=(*snapshot.warnings, *said)) if said else snapshot


def check_shapes(snapshot: Snapshot, settings: Settings) -> None:
    """Refuse shapes naming a resource no node offers (``nvidia.com/gpuu=1``): they would measure, or aim at, nothing."""
    for key, texts in (
        ("metrics.reference_shapes", settings.metrics.reference_shapes),
        ("aims.target_shapes", settings.aims.target_shapes),
    ):
        for text in texts:
            missing = unoffered_resources(snapshot, [parse_shape(text)])
            if missing:
                raise ConfigError(
                    f"{key} {text!r}: no node offers {', '.join(missing)} (resources nodes offer: "
                    f"{offered_gpu_resources(snapshot)})"
                )


def check_selection(snapshot: Snapshot, settings: Settings) -> None:
    """Refuse a planner selection that keeps every bound GPU pod in place (a namespace typo, a selector nothing carries):
    the plan would silently move nothing. Names the settings that did it and where GPU pods run."""
    planner = settings.for_planner
    gpu_pods = [p for p in snapshot.pods if p.node_name and p.is_bound and p.uses_gpu]
    reasons = Counter(config_reason(p, planner) for p in gpu_pods)
    if not gpu_pods or None in reasons:
        return
    movable = settings.movable
    chosen: dict[str, object] = {
        "movable.namespaces": movable.namespaces,
        "movable.exclude_namespaces": movable.exclude_namespaces,
        "movable.pod_selector": movable.pod_selector,
        "movable.max_priority": movable.max_priority,
    }
    if any(r is not None and r.name == "SCHEDULER" for r in reasons):
        chosen["movable.scheduler_names"] = movable.scheduler_names
    defaults = type(movable)()
    named = ", ".join(
        f"{key} {value!r}"
        for key, value in chosen.items()
        if value not in (None, [], {}) and value != getattr(defaults, key.removeprefix("movable."))
    )
    namespaces = ", ".join(sorted({p.namespace for p in gpu_pods})[:5])
    raise ConfigError(
        f"the planner's selection ({named}) keeps all {len(gpu_pods)} GPU pod(s) in place, so no plan could move "
        f"one; GPU pods run in namespace(s) {namespaces}"
    )


def mig_parted_namespace(settings: Settings, *, explain: bool = False) -> str | None:
    """Where a live read lists the mig-parted ConfigMaps: ``mig.operator_namespace`` when the config is needed
    (``mig.repartition``, or the MIG advice of ``plan --explain-mig``); None (no ConfigMap is read) otherwise.

    Raises ``ConfigError`` (one line) when ``mig.config_map`` names another namespace, needed or not: a mig-parted
    config is trusted only in the GPU Operator's namespace, since any tenant can put mig-manager's label on a
    ConfigMap of their own and have nodes re-cut to layouts mig-manager does not know."""
    mig = settings.mig
    _check_config_map(mig.config_map, mig.operator_namespace)
    return mig.operator_namespace if settings.mig.repartition or explain else None


def mig_parted_listing(config_map: str, selector: str | None, namespace: str | None) -> tuple[str | bool, str | None]:
    """``(include_config_maps, config_map_selector)`` for ``read_cluster``: nothing without ``namespace``; else the one
    ConfigMap ``config_map`` (namespace/name, which must be in ``namespace``) when set, or those of ``namespace``
    matching ``selector``."""
    if namespace is None:
        return False, None
    if config_map:
        _check_config_map(config_map, namespace)
        return config_map, None
    return namespace, selector


def _check_config_map(config_map: str, namespace: str) -> None:
    where = config_map.partition("/")[0]
    if config_map and where != namespace:
        raise ConfigError(
            f"mig.config_map: {config_map} is in namespace {where}, not in the GPU Operator's namespace {namespace} "
            "(mig.operator_namespace), the only one mig-parted configs are read from"
        )


def _contents(snapshot: Snapshot) -> str:
    """What a snapshot holds, for an error about what it lacks: ``3 Pod(s), 1 PodDisruptionBudget(s)`` or ``nothing``."""
    orphans = int(snapshot.extra.get("orphan_pods", 0))
    counts = (
        ("Pod", len(snapshot.pods) + orphans),
        ("PodDisruptionBudget", len(snapshot.pdbs)),
        ("PersistentVolume", len(snapshot.volumes)),
        ("PersistentVolumeClaim", len(snapshot.claims)),
        ("ConfigMap", len(snapshot.config_maps)),
    )
    read = [f"{count} {kind}(s)" for kind, count in counts if count]
    skipped = [
        f"{n} {kind}(s) the model does not use" for kind, n in sorted(snapshot.extra.get("skipped_kinds", {}).items())
    ]
    return ", ".join(read + skipped) or "no Kubernetes objects"


def _pool_label_checked(snapshot: Snapshot, pool_label: str) -> Snapshot:
    """A pool label no GPU node carries merges every GPU model into one pool: refused when someone chose it (a typo), a
    warning on the snapshot when it is the default (a cluster without GPU Feature Discovery really is one pool)."""
    unused = pool_label_unused(snapshot, pool_label)
    if unused is None:
        return snapshot
    if not pool_label_is_default(pool_label):
        raise ConfigError(f"{unused} (set --pool-label or metrics.pool_label to one of them)")
    return replace(snapshot, warnings=(*snapshot.warnings, unused))


def _with_source(snapshot: Snapshot, source: str) -> Snapshot:
    return replace(snapshot, source=source)

"""Where a snapshot comes from: files, stdin, the bundled example, or the live API."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

from compactor.errors import InputError
from compactor.model.load import load_files
from compactor.model.types import Snapshot

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

    def load(self, *, pool_label: str, mig_config_map: str = "", mig_selector: str | None = None) -> Snapshot:
        """The snapshot; from the live API it includes the mig-parted ConfigMap (``namespace/name``, else by ``mig_selector``)."""
        if self.example:
            return _with_source(load_files([example_path()], pool_label=pool_label), "example cluster")
        if self.files:
            snapshot = load_files(list(self.files), pool_label=pool_label)
        elif self.live:
            from compactor.kube.snapshot import snapshot_from_cluster  # the live path needs the API client

            snapshot = snapshot_from_cluster(self.kubeconfig, self.context, pool_label=pool_label, in_cluster=self.in_cluster,
                                             include_config_maps=mig_config_map or mig_selector is not None,
                                             config_map_selector=None if mig_config_map else mig_selector)
        else:
            raise InputError("no input: give --snapshot FILE, --example, or --kubeconfig/--context/--in-cluster")
        if not snapshot.nodes and not self.allow_empty:
            raise InputError(f"no Node objects: read {_contents(snapshot)}; expected `kubectl get nodes,pods,pdb,pv,pvc -A -o json` "
                             "output (a failed kubectl prints nothing to the pipe; --allow-empty accepts a snapshot without nodes)",
                             source=self.describe())
        return snapshot


def _contents(snapshot: Snapshot) -> str:
    """What a snapshot holds, for an error about what it lacks: ``3 Pod(s), 1 PodDisruptionBudget(s)`` or ``nothing``."""
    orphans = int(snapshot.extra.get("orphan_pods", 0))
    counts = (("Pod", len(snapshot.pods) + orphans), ("PodDisruptionBudget", len(snapshot.pdbs)), ("PersistentVolume", len(snapshot.volumes)),
              ("PersistentVolumeClaim", len(snapshot.claims)), ("ConfigMap", len(snapshot.config_maps)))
    read = [f"{count} {kind}(s)" for kind, count in counts if count]
    skipped = [f"{n} {kind}(s) the model does not use" for kind, n in sorted(snapshot.extra.get("skipped_kinds", {}).items())]
    return ", ".join(read + skipped) or "no Kubernetes objects"


def _with_source(snapshot: Snapshot, source: str) -> Snapshot:
    from dataclasses import replace

    return replace(snapshot, source=source)

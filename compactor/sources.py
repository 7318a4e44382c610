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

    def describe(self) -> str:
        if self.example:
            return "example cluster"
        if self.files:
            return ", ".join(self.files)
        return "cluster (in-cluster)" if self.in_cluster else f"cluster {self.context or 'current context'}"

    def load(self, *, pool_label: str, mig_config_map: str = "", mig_selector: str | None = None) -> Snapshot:
        """The snapshot; from the live API it includes the mig-parted ConfigMap (``namespace/name``, else by ``mig_selector``)."""
        if self.example:
            snapshot = load_files([example_path()], pool_label=pool_label)
            return _with_source(snapshot, "example cluster")
        if self.files:
            return load_files(list(self.files), pool_label=pool_label)
        if self.live:
            from compactor.kube.snapshot import snapshot_from_cluster  # the live path needs the API client

            return snapshot_from_cluster(self.kubeconfig, self.context, pool_label=pool_label, in_cluster=self.in_cluster,
                                         include_config_maps=mig_config_map or mig_selector is not None,
                                         config_map_selector=None if mig_config_map else mig_selector)
        raise InputError("no input: give --snapshot FILE, --example, or --kubeconfig/--context/--in-cluster")


def _with_source(snapshot: Snapshot, source: str) -> Snapshot:
    from dataclasses import replace

    return replace(snapshot, source=source)

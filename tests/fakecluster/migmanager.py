"""NVIDIA's mig-manager as the fake cluster plays it (``FakeMigManager``), stepped by ``FakeCluster.tick``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from compactor.actions.port.client import Obj
from compactor.model.resources import is_gpu_resource

if TYPE_CHECKING:
    from tests.fakecluster.cluster import FakeCluster


MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_STATE_LABEL = "nvidia.com/mig.config.state"


@dataclass
class FakeMigManager:
    """NVIDIA's mig-manager as the executor meets it: it watches ``nvidia.com/mig.config`` and reports in
    ``nvidia.com/mig.config.state`` (``pending`` at once, then ``success`` or ``failed``); on success the device
    plugin re-advertises the node's GPU resources as ``layouts[config]`` says, ``allocatable_lag`` seconds later.
    It evicts nothing: a GPU pod still bound to the node when the change is noticed makes the re-cut fail, as
    reconfiguring a GPU in use does. ``outcome``: success | failed | stuck (stays pending for ever)."""

    layouts: dict[str, dict[str, int]]
    takes: float = 30.0
    outcome: str = "success"
    allocatable_lag: float = 0.0
    applied: dict[str, str] = field(default_factory=dict)  # node -> the layout its GPUs have now
    started: dict[str, float] = field(default_factory=dict)  # node -> when the change was noticed
    reconfigured: list[tuple[str, str]] = field(default_factory=list)  # (node, layout) of every finished re-cut

    def watch(self, cluster: FakeCluster) -> None:
        """Start watching: the layouts the nodes carry now are the ones their GPUs have."""
        for name, node in cluster.nodes.items():
            self.applied.setdefault(name, ((node.get("metadata") or {}).get("labels") or {}).get(MIG_CONFIG_LABEL, ""))

    def step(self, cluster: FakeCluster) -> None:
        for name, node in cluster.nodes.items():
            labels = node.setdefault("metadata", {}).setdefault("labels", {})
            wanted = labels.get(MIG_CONFIG_LABEL, "")
            applied = self.applied.setdefault(name, wanted)
            if wanted == applied:
                continue
            if name not in self.started:
                self.started[name] = cluster.time
                labels[MIG_STATE_LABEL] = "failed" if cluster.gpu_pods_bound(name) else "pending"
                cluster.touch_node(name)
            self._progress(cluster, name, node, labels, wanted)

    def _progress(self, cluster: FakeCluster, name: str, node: Obj, labels: dict[str, str], wanted: str) -> None:
        elapsed = cluster.time - self.started[name]
        if labels[MIG_STATE_LABEL] == "failed" or self.outcome == "stuck" or elapsed < self.takes:
            return
        if self.outcome == "failed":
            labels[MIG_STATE_LABEL] = "failed"
            cluster.touch_node(name)
            return
        if labels[MIG_STATE_LABEL] != "success":
            labels[MIG_STATE_LABEL] = "success"
            cluster.touch_node(name)
        if elapsed >= self.takes + self.allocatable_lag:
            status = node.setdefault("status", {})
            for key in ("allocatable", "capacity"):
                kept = {r: v for r, v in (status.get(key) or {}).items() if not is_gpu_resource(r)}
                status[key] = {**kept, **{r: str(v) for r, v in self.layouts[wanted].items()}}
            self.applied[name] = wanted
            del self.started[name]
            self.reconfigured.append((name, wanted))
            cluster.touch_node(name)

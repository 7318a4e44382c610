"""A fragmented cluster on the fake API server, for whole ``compactor`` runs (``main([...])``) over HTTP.

``fragmented(fake_api, tmp_path)`` loads two 8-GPU nodes, each running one replica of a 2-replica ReplicaSet in
namespace ``ml`` under a PDB (one move frees a node: 8 GPUs), makes evictions replace the pod on the other node,
serves Leases (``LeaseStore``), and returns the path of a kubeconfig for the server. ``STATE_NAMESPACE`` is where
the compactor keeps its state, history and run summary. ``run_config(tmp_path, mode, **disruption)`` writes a config
file for such runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from compactor.settings.bundles import RunSettings
from tests.builders import node, pdb, pod
from tests.fakeapi import DisruptionController, FakeApiServer
from tests.scenarios.lease import LeaseStore

STATE_NAMESPACE = RunSettings().executor.state_namespace


def run_config(tmp_path: Path, mode: str = "apply", **disruption: Any) -> str:
    """A config file for whole runs against the fake API server: ``mode``, the ``disruption`` settings given, a 5 s plan
    and executor polls fast enough for a test; its path."""
    path = tmp_path / f"compactor-{mode}.yaml"
    settings = {
        "mode": mode,
        "solver": {"time_limit_seconds": 5},
        "disruption": disruption,
        "executor": {"poll_seconds": 0.05, "backoff_seconds": 0.05, "replacement_timeout_seconds": 20},
        "steering": {"bind_poll_seconds": 0.05},
    }
    path.write_text(yaml.safe_dump(settings), encoding="utf-8")
    return str(path)


def fragmented(fake_api: FakeApiServer, tmp_path: Path) -> str:
    """Two 8-GPU nodes, each running one replica of a 2-replica ReplicaSet (1 GPU each): one move frees a node (8 GPUs).

    An eviction deletes the pod and its ReplicaSet's replacement appears, Ready, on the other node."""
    fake_api.disruption_controller = DisruptionController()
    fake_api.add(
        node("gpu-1", gpus=8),
        node("gpu-2", gpus=8),
        pod("train-a", on="gpu-1", gpus=1, namespace="ml", owner="ReplicaSet/train", labels={"app": "train"}),
        pod("train-b", on="gpu-2", gpus=1, namespace="ml", owner="ReplicaSet/train", labels={"app": "train"}),
        pdb("train", match={"app": "train"}, namespace="ml", max_unavailable=1),
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "train", "namespace": "ml", "uid": "ReplicaSet-train"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "train"}}},
        },
    )

    def replace(server: FakeApiServer, evicted: dict[str, Any]) -> None:
        meta = evicted["metadata"]
        server.delete("Pod", meta["name"], meta["namespace"])
        other = "gpu-2" if evicted["spec"]["nodeName"] == "gpu-1" else "gpu-1"
        server.add(
            pod(
                f"{meta['name']}-new",
                on=other,
                gpus=1,
                namespace="ml",
                owner="ReplicaSet/train",
                labels={"app": "train"},
            )
        )

    fake_api.on_evict = replace
    LeaseStore(fake_api)
    return str(fake_api.write_kubeconfig(tmp_path / "kubeconfig"))

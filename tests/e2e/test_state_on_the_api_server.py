"""The executor's state for a plan of a 5,000-node cluster: the real API server stores it, and it stays under 256 KiB.

The whole plan of such a cluster (2,000 moves, per-node figures before and after) is over 2 MB
of JSON, past the API server's 1 MiB ConfigMap limit; what the executor keeps for recovery
must be written, read back and decoded to the same moves.
"""

from __future__ import annotations

import os

import pytest
from kubernetes import config as k8s_config

from compactor.actions.cluster.run_state import RunState, decode_plan, encode_plan
from compactor.actions.port import annotations as ann
from compactor.kube.cluster_client import KubeClusterClient
from tests.e2e.helpers import NEEDS_CLUSTER, STATE_NAMESPACE
from tests.scenarios.executor import make_plan, synthetic_moves, two_freed_nodes

pytestmark = [
    NEEDS_CLUSTER,
    pytest.mark.e2e,
    pytest.mark.timeout(300),
]


def test_a_5000_node_plans_state_is_written_read_back_and_small(state_namespace: str) -> None:
    plan = make_plan(two_freed_nodes())
    per_node = {
        f"gpu-{i:05d}": {"allocatable": 8, "allocated": 3, "free": 5, "fragmentation": 0.25} for i in range(5000)
    }
    heavy = plan.model_copy(
        update={
            "before": {"nodes": per_node},
            "after": {"nodes": per_node},
            "moves": plan.moves + synthetic_moves(2000),
        }
    )
    assert len(heavy.to_json()) > 2 * 1024 * 1024
    state = RunState(plan_id=heavy.metadata.id, done=[m.pod for m in heavy.moves], updated_at="2026-01-01T00:00:00Z")
    record = state.to_data(encode_plan(heavy))  # the largest it gets: every move done
    api_client = k8s_config.new_client_from_config(config_file=os.environ["KUBECONFIG"], persist_config=False)  # type: ignore[no-untyped-call]
    with KubeClusterClient(api_client, namespace=state_namespace) as client:
        assert client.read_state(ann.STATE_CONFIGMAP) is None
        client.write_state(ann.STATE_CONFIGMAP, record)
        try:
            stored = client.read_state(ann.STATE_CONFIGMAP)
            assert stored == record
            assert sum(len(k) + len(v.encode()) for k, v in stored.items()) < 256 * 1024
            kept = decode_plan(stored["plan"])
            assert [(m.pod, m.to_node, m.uid) for m in kept.moves] == [(m.pod, m.to_node, m.uid) for m in heavy.moves]
        finally:
            client.write_state(ann.STATE_CONFIGMAP, None)
    assert state_namespace == STATE_NAMESPACE

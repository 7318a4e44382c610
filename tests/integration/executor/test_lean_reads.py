"""Pods and nodes read from the API are lean (compactor/kube/lean.py), and lose nothing a decision reads.

A realistic pod (tests/fakeapi/realistic.py: managedFields, last-applied manifest, env, probes,
mounts, container statuses) carrying every field the model and the executor read goes through
the fake API server and back through each read path: the snapshot reader's raw and decoded
lists, and the executor's client (lists by every selector, gets, patch replies). Each copy must
be exactly the stored object less the fields named below, and the model, the schema and the
executor's readers must see it as they see the full object.
"""

from __future__ import annotations

import ast
import copy
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from compactor.actions.cluster.live_pods import (
    controller_uid,
    grace_seconds,
    is_bound,
    is_ready,
    is_terminating,
    pdbs_selecting,
    pod_key,
    requests_gpu,
)
from compactor.actions.cluster.owners import controller_ref
from compactor.actions.services.outcome import physical_gpus, whole_free_gpu_nodes
from compactor.actions.steering.pin import steered_to
from compactor.actions.steering.room import plan_hold
from compactor.kube import lean as lean_module
from compactor.kube.cluster_client import KubeClusterClient
from compactor.kube.read import read_cluster
from compactor.model import schema
from compactor.model.load import DEFAULT_POOL_LABEL, build_snapshot
from compactor.model.parse import parse_node, parse_pod
from tests.builders import A100_80, claim_volume, node, pdb, pod, pvc
from tests.fakeapi import FakeApiServer
from tests.fakeapi.realistic import LAST_APPLIED, dress_node, dress_pod

ROOT = Path(__file__).resolve().parents[3]
NAMESPACE = "ml"

# What a lean read drops, written out here independently of compactor/kube/lean.py: a field added there must be added
# here on purpose, with its reason in lean.py's docstring.
DROPPED_CONTAINER_FIELDS = {
    "env",
    "envFrom",
    "command",
    "args",
    "volumeMounts",
    "volumeDevices",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
}
DROPPED_STATUS_FIELDS = {"state", "lastState", "volumeMounts", "user", "allocatedResourcesStatus"}
DROPPED_NODE_STATUS_FIELDS = {"images"}
EMPTIED_VOLUME_SOURCES = {"configMap", "secret", "downwardAPI", "projected"}


def expected_lean(full: dict[str, Any]) -> dict[str, Any]:
    """``full`` less exactly the dropped fields."""
    obj = copy.deepcopy(full)
    meta = obj.get("metadata") or {}
    meta.pop("managedFields", None)
    (meta.get("annotations") or {}).pop(LAST_APPLIED, None)
    if obj.get("kind") == "Pod":
        for list_name in ("containers", "initContainers", "ephemeralContainers"):
            for container in obj["spec"].get(list_name) or []:
                for name in DROPPED_CONTAINER_FIELDS:
                    container.pop(name, None)
        for list_name in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"):
            for entry in obj["status"].get(list_name) or []:
                for name in DROPPED_STATUS_FIELDS:
                    entry.pop(name, None)
        for volume in obj["spec"].get("volumes") or []:
            for source in EMPTIED_VOLUME_SOURCES & volume.keys():
                volume[source] = {}
    if obj.get("kind") == "Node":
        for name in DROPPED_NODE_STATUS_FIELDS:
            obj["status"].pop(name, None)
    return obj


def without_last_applied(full: dict[str, Any]) -> dict[str, Any]:
    """``full`` less the one dropped field the model keeps a place for (in ``annotations``, which it reads by key)."""
    obj = copy.deepcopy(full)
    (obj["metadata"].get("annotations") or {}).pop(LAST_APPLIED, None)
    return obj


def realistic_pod(name: str, *, on: str | None = "gpu-1") -> dict[str, Any]:
    """A pod setting every field the model or the executor reads, then dressed with a real API server's bulk."""
    not_ready: dict[str, Any] = {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    }
    raw = pod(
        name,
        on=on,
        gpus=2,
        cpu="8",
        memory="64Gi",
        namespace=NAMESPACE,
        owner="ReplicaSet/trainer-7d9f",
        labels={"app": "trainer", "tier": "gpu"},
        annotations={"compactor.io/move-cost": "300", "compactor.io/steered-to": "gpu-1", "team": "vision"},
        priority=1000,
        priority_class="batch-high",
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, not_ready],
        node_selector={"nvidia.com/gpu.product": A100_80},
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}],
                            # what the steering policy adds: the pin, read back by steered_to
                            "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-1"]}],
                        }
                    ]
                }
            }
        },
        anti_affinity=[{"labelSelector": {"matchLabels": {"app": "trainer"}}, "topologyKey": "kubernetes.io/hostname"}],
        volumes=[*claim_volume("data"), {"name": "scratch", "emptyDir": {"sizeLimit": "10Gi"}}],
        spread=[
            {
                "maxSkew": 1,
                "topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "trainer"}},
            }
        ],
        host_ports=[8443],
        scheduler="default-scheduler",
    )
    spec = raw["spec"]
    spec["initContainers"] = [
        {
            "name": "fetch",
            "image": "busybox",
            "resources": {"requests": {"cpu": "16", "memory": "1Gi"}},
            "command": ["sh", "-c", "true"],
            "env": [{"name": "URL", "value": "https://example.com/nvidia.com/gpu"}],
        },
        {
            "name": "proxy",
            "image": "envoy",
            "restartPolicy": "Always",
            "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}},
            "ports": [{"containerPort": 9901, "hostPort": 9901, "protocol": "TCP"}],
            "readinessProbe": {"tcpSocket": {"port": 9901}},
        },
    ]
    spec["ephemeralContainers"] = [
        {"name": "debugger", "image": "busybox", "command": ["sh"], "stdin": True, "tty": True}
    ]
    spec["overhead"] = {"cpu": "250m", "memory": "120Mi"}
    spec["terminationGracePeriodSeconds"] = 45
    spec["resourceClaims"] = [{"name": "nic", "resourceClaimName": "rdma-nic"}]
    raw["status"]["nominatedNodeName"] = "gpu-2"
    raw["status"]["conditions"].append(
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    )
    dress_pod(raw)
    raw["status"]["initContainerStatuses"] = [
        {
            "name": "fetch",
            "ready": False,
            "restartCount": 0,
            "image": "busybox",
            "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
            "lastState": {},
        }
    ]
    raw["status"]["containerStatuses"][0]["allocatedResourcesStatus"] = [
        {"name": "nvidia.com/gpu", "resources": [{"resourceID": "GPU-1"}]}
    ]
    raw["status"]["containerStatuses"][0]["allocatedResources"] = {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "2"}
    return raw


def realistic_node(name: str) -> dict[str, Any]:
    raw = node(
        name, gpus=8, product=A100_80, labels={"zone": "a"}, taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    )
    raw["metadata"]["annotations"] = {
        "compactor.io/held-for": "ml/trainer-0",
        LAST_APPLIED: json.dumps({"kind": "Node"}),
    }
    return dress_node(raw)


@pytest.fixture
def served(fake_api: FakeApiServer) -> FakeApiServer:
    fake_api.add(
        realistic_node("gpu-1"),
        realistic_node("gpu-2"),
        realistic_pod("trainer-0"),
        realistic_pod("trainer-1"),
        realistic_pod("trainer-2", on=None),
        pdb("trainer", match={"app": "trainer"}, namespace=NAMESPACE),
        pvc("data", namespace=NAMESPACE),
    )
    return fake_api


def stored(api: FakeApiServer, obj: dict[str, Any]) -> dict[str, Any]:
    """The object as the server holds it (and sends it): the full one."""
    meta = obj["metadata"]
    found = api.get(obj["kind"], meta["name"], meta.get("namespace"))
    assert found is not None
    return found


def assert_lean(api: FakeApiServer, obj: dict[str, Any]) -> None:
    """``obj`` as read is the stored object less exactly the dropped fields: nothing bulky left, nothing else lost."""
    full = stored(api, obj)
    assert obj == expected_lean(full)
    meta = obj["metadata"]
    assert "managedFields" not in meta and LAST_APPLIED not in (meta.get("annotations") or {})
    if obj["kind"] == "Pod":
        containers = [
            c for k in ("containers", "initContainers", "ephemeralContainers") for c in obj["spec"].get(k) or []
        ]
        assert containers and not any(DROPPED_CONTAINER_FIELDS & c.keys() for c in containers)
        statuses = [s for k in ("containerStatuses", "initContainerStatuses") for s in obj["status"].get(k) or []]
        assert statuses and not any(DROPPED_STATUS_FIELDS & s.keys() for s in statuses)
        kinds = {key: value for v in obj["spec"]["volumes"] for key, value in v.items() if key != "name"}
        assert kinds == {
            "persistentVolumeClaim": {"claimName": "data"},
            "emptyDir": {"sizeLimit": "10Gi"},
            "configMap": {},
            "secret": {},
            "projected": {},
        }
        assert len(json.dumps(obj)) * 3 < len(json.dumps(full)), "a lean pod is a fraction of the full one"
    else:
        assert "images" not in obj["status"]


def client_reads(api: FakeApiServer) -> dict[str, list[dict[str, Any]]]:
    # one object per page: every page is made lean
    client = KubeClusterClient(api.api_client(), namespace="gpu-compactor", page_size=1)
    # first: later reads see it
    patched_pod = client.patch_pod(NAMESPACE, "trainer-0", {"metadata": {"labels": {"patched": "yes"}}})
    patched_node = client.patch_node("gpu-2", {"metadata": {"labels": {"patched": "yes"}}})
    trainer = client.get_pod(NAMESPACE, "trainer-0")
    gpu_1 = client.get_node("gpu-1")
    assert trainer is not None and gpu_1 is not None
    return {
        "list_pods()": client.list_pods(),
        "list_pods(node_name)": client.list_pods(node_name="gpu-1"),
        "list_pods(namespace, label_selector)": client.list_pods(namespace=NAMESPACE, label_selector="app=trainer"),
        "get_pod": [trainer],
        "patch_pod": [patched_pod],
        "list_nodes()": client.list_nodes(),
        "get_node": [gpu_1],
        "patch_node": [patched_node],
    }


def test_the_executors_client_reads_lean_pods_and_nodes_missing_nothing_else(served: FakeApiServer) -> None:
    reads = client_reads(served)
    assert [len(v) for v in reads.values()] == [3, 2, 3, 1, 1, 2, 1, 1]
    for how, objects in reads.items():
        for obj in objects:
            try:
                assert_lean(served, obj)
            except AssertionError as exc:
                raise AssertionError(f"{how}: {obj['metadata']['name']}: {exc}") from None


def test_the_snapshot_reader_reads_lean_dicts_missing_nothing_else(served: FakeApiServer) -> None:
    objects = read_cluster(served.api_client(), page_size=2)
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == ["Node", "Node", "PersistentVolumeClaim", "Pod", "Pod", "Pod", "PodDisruptionBudget"]
    for obj in objects:
        if obj["kind"] in ("Pod", "Node"):
            assert_lean(served, obj)
        else:
            assert obj == stored(served, obj)


def test_the_model_of_a_lean_pod_and_node_is_the_model_of_the_full_ones(served: FakeApiServer) -> None:
    reads = client_reads(served)
    for obj in [*reads["list_pods()"], *reads["get_pod"], *reads["patch_pod"]]:
        full = without_last_applied(stored(served, obj))
        # the schema is the model's whitelist: both decode to the same struct, field for field
        assert msgspec.convert(obj, schema.KubeObject) == msgspec.convert(full, schema.KubeObject)
        assert parse_pod(obj, source="lean") == parse_pod(full, source="lean")
    model = parse_pod(reads["get_pod"][0], source="lean")
    assert (model.tolerations, model.node_selector, model.priority, model.priority_class_name) != ((), (), 0, "")
    assert model.claims == ("data",) and model.local_storage and model.host_ports == (("TCP", 8443), ("TCP", 9901))
    assert (
        model.affinity.required_node_terms
        and model.affinity.anti_affinity_terms
        and model.has_hard_topology_spread
        and model.resource_claims
    )
    assert model.annotations == {
        "compactor.io/move-cost": "300",
        "compactor.io/steered-to": "gpu-1",
        "team": "vision",
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "9090",
    }
    # max(8 + the sidecar's 0.5, the init container's 16 before the sidecar starts) + the overhead's 0.25
    assert model.requests["cpu"] == 16_250 and model.requests["nvidia.com/gpu"] == 2
    for obj in [*reads["list_nodes()"], *reads["get_node"], *reads["patch_node"]]:
        full = without_last_applied(stored(served, obj))
        assert msgspec.convert(obj, schema.KubeObject) == msgspec.convert(full, schema.KubeObject)
        assert parse_node(obj, source="lean", pool_label=DEFAULT_POOL_LABEL, warnings=[]) == parse_node(
            full, source="lean", pool_label=DEFAULT_POOL_LABEL, warnings=[]
        )


def test_a_snapshot_read_live_is_the_snapshot_of_the_full_objects(served: FakeApiServer) -> None:
    full = [
        without_last_applied(o)
        for kind in ("Node", "Pod", "PodDisruptionBudget", "PersistentVolumeClaim")
        for o in served.objects(kind)
    ]
    expected = build_snapshot(full, source="test")
    decoded_pod = next(
        o
        for o in read_cluster(served.api_client(), decoded=True)
        if isinstance(o, schema.KubeObject) and o.kind == "Pod"
    )
    assert decoded_pod.metadata and decoded_pod.spec and decoded_pod.spec.volumes
    # the configMap, secret and token volumes are gone
    assert [v.name for v in decoded_pod.spec.volumes] == [
        "data",
        "scratch",
    ]
    assert decoded_pod.metadata.annotations and LAST_APPLIED not in decoded_pod.metadata.annotations
    for decoded in (False, True):
        snapshot = build_snapshot(read_cluster(served.api_client(), page_size=2, decoded=decoded), source="test")
        assert sorted(snapshot.pods, key=lambda p: p.key) == sorted(expected.pods, key=lambda p: p.key)
        assert sorted(snapshot.nodes, key=lambda n: n.name) == sorted(expected.nodes, key=lambda n: n.name)
        assert snapshot.pdbs == expected.pdbs and snapshot.claims == expected.claims


def test_decoded_pods_share_the_values_they_repeat(served: FakeApiServer) -> None:
    """Each decoded pod would hold its own copy of "ml", "Running", "Ready", "True", "8", ...: one object serves them all."""
    first, second = (
        o
        for o in read_cluster(served.api_client(), decoded=True, page_size=1)
        if isinstance(o, schema.KubeObject) and o.kind == "Pod" and o.spec and o.spec.node_name
    )
    assert first.metadata and second.metadata and first.spec and second.spec and first.status and second.status
    assert first.metadata.namespace is second.metadata.namespace
    assert (
        first.metadata.labels
        and second.metadata.labels
        and first.metadata.labels["app"] is second.metadata.labels["app"]
    )
    assert first.spec.node_name is second.spec.node_name and first.status.phase is second.status.phase
    assert first.status.conditions and second.status.conditions
    assert [(c.type, c.status) for c in first.status.conditions] == [
        (c.type, c.status) for c in second.status.conditions
    ]
    assert all(
        a.type is b.type and a.status is b.status
        for a, b in zip(first.status.conditions, second.status.conditions, strict=True)
    )
    requests = [
        p.spec.containers[0].resources.requests
        for p in (first, second)
        if p.spec and p.spec.containers and p.spec.containers[0].resources
    ]
    assert len(requests) == 2 and requests[0] and requests[1] and requests[0]["cpu"] is requests[1]["cpu"]


def test_the_executors_readers_see_a_lean_pod_as_the_full_one(served: FakeApiServer) -> None:
    reads = client_reads(served)
    pods, nodes = reads["list_pods()"], reads["list_nodes()"]
    full_pods = [stored(served, p) for p in pods]
    full_nodes = [stored(served, n) for n in nodes]
    pdbs = served.objects("PodDisruptionBudget")
    for lean_pod, full_pod in zip(pods, full_pods, strict=True):
        for reader in (
            pod_key,
            controller_uid,
            controller_ref,
            is_terminating,
            is_ready,
            requests_gpu,
            grace_seconds,
            is_bound,
            steered_to,
        ):
            assert reader(lean_pod) == reader(full_pod), reader.__name__
        assert pdbs_selecting(pdbs, lean_pod) == pdbs_selecting(pdbs, full_pod) != []
        for path in (
            ("spec", "tolerations"),
            ("spec", "affinity"),
            ("metadata", "resourceVersion"),
            ("metadata", "uid"),
            ("metadata", "ownerReferences"),
            ("metadata", "labels"),
            ("spec", "nodeName"),
            ("status", "phase"),
        ):
            assert lean_pod[path[0]].get(path[1]) == full_pod[path[0]].get(path[1]), path
    assert grace_seconds(pods[0]) == 45 and steered_to(pods[0]) == "gpu-1"
    for lean_node, full_node in zip(nodes, full_nodes, strict=True):
        assert lean_node["metadata"]["annotations"] == without_last_applied(full_node)["metadata"]["annotations"]
        for path in (
            ("spec", "taints"),
            ("spec", "unschedulable"),
            ("metadata", "labels"),
            ("metadata", "resourceVersion"),
            ("status", "allocatable"),
            ("status", "capacity"),
            ("status", "conditions"),
        ):
            assert lean_node[path[0]].get(path[1]) == full_node[path[0]].get(path[1]), path
    assert physical_gpus(nodes) == physical_gpus(full_nodes)
    assert whole_free_gpu_nodes(nodes, pods) == whole_free_gpu_nodes(full_nodes, full_pods)
    mover = next(p for p in pods if p["metadata"]["name"] == "trainer-0")
    assert plan_hold(nodes, pods, mover, target="gpu-2") == plan_hold(
        full_nodes, full_pods, stored(served, mover), target="gpu-2"
    )


def test_no_dropped_field_is_one_the_schema_reads() -> None:
    """The model reads through compactor/model/schema.py: a field added there that a lean read drops would be lost."""

    def names(struct: type[msgspec.Struct]) -> set[str]:
        return {f.encode_name for f in msgspec.structs.fields(struct)}

    assert not DROPPED_CONTAINER_FIELDS & names(schema.Container)
    assert "managedFields" not in names(schema.ObjectMeta)
    assert not {"containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses", "images"} & names(
        schema.ObjectStatus
    )
    assert set(lean_module.CONTAINER_FIELDS) == DROPPED_CONTAINER_FIELDS
    assert set(lean_module.CONTAINER_STATUS_FIELDS) == DROPPED_STATUS_FIELDS
    assert set(lean_module.NODE_STATUS_FIELDS) == DROPPED_NODE_STATUS_FIELDS
    assert set(lean_module.FILE_VOLUME_SOURCES) == EMPTIED_VOLUME_SOURCES
    assert not EMPTIED_VOLUME_SOURCES & names(schema.Volume), (
        "the model reads a volume source whose contents a lean read drops"
    )


def test_no_module_of_the_compactor_names_a_dropped_field() -> None:
    """The executor and the planner read raw dicts by key: a key naming a dropped field would read nothing, silently."""
    dropped = (
        DROPPED_CONTAINER_FIELDS
        | DROPPED_STATUS_FIELDS
        | DROPPED_NODE_STATUS_FIELDS
        | {"managedFields", LAST_APPLIED, "containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"}
    ) - {"state", "user"}  # words too common to mean a container status's fields
    allowed = {("compactor/cli.py", "command")}  # argparse's subcommand dest, not an object's field
    found = []
    for path in sorted((ROOT / "compactor").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative == "compactor/kube/lean.py":
            continue
        for node_ in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node_, ast.Constant) and node_.value in dropped and (relative, node_.value) not in allowed:
                found.append(f"{relative}:{node_.lineno}: {node_.value!r}")
    assert not found, "compactor/kube/lean.py drops these fields from every pod and node read: " + "; ".join(found)

"""Write ``compactor/data/example-cluster.json``: the bundled example cluster.

The snapshot is a v1 ``List`` shaped exactly as
``kubectl get nodes,pods,poddisruptionbudgets -A -o json`` prints it (plus the
GPU Operator's ``default-mig-parted-config`` ConfigMap). It is modelled on the
source article's deployment case (docs: ``../shared/notes/source-article.md``):
Kubernetes v1.26, A100-SXM4-40GB nodes, NVIDIA device plugin v0.13 with the
``mixed`` MIG strategy, three 32-core CPU nodes, BERT-base on ``mig-1g.5gb``,
ResNet-152 batch on ``mig-2g.10gb``, GPT-2 online on a whole GPU.

It is deliberately fragmented: the three whole-GPU nodes run 3, 2 and 1 GPT-2
replicas (18 free GPUs in total, at most 7 on any node), so the pending
``llm/llama-70b-0`` (8 GPUs) cannot be scheduled until a compaction moves the
lone replica off ``a100-gpu-03``. ``examples/README.md`` has the full layout.

Deterministic: no randomness; names, uids, IPs and hashes derive from the
object names, so rerunning the script reproduces the file byte for byte.

    python examples/make_example_cluster.py [--out PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "compactor" / "data" / "example-cluster.json"

PRODUCT = "NVIDIA-A100-SXM4-40GB"
K8S_VERSION = "v1.26.15"
TRITON = "nvcr.io/nvidia/tritonserver:23.08-py3"
UID_NAMESPACE = uuid.UUID("5b0e9c3e-8a51-4c1d-9d1f-6f1f0c2a7e10")
# Kubernetes' rand.SafeEncodeString alphabet (no vowels, no 0/1/3): pod-template hashes and name suffixes.
SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

NODE_CREATED = "2023-11-06T09:12:44Z"
WORKLOAD_CREATED = "2024-03-11T08:30:00Z"
PODS_STARTED = "2024-03-14T02:17:51Z"
PENDING_CREATED = "2024-03-18T09:41:07Z"

# Per-profile GFD facts for A100-40GB MIG devices: memory (MiB), multiprocessors, GI/CI slices.
MIG_GFD = {
    "1g.5gb": (4864, 14, 1),
    "2g.10gb": (9856, 28, 2),
    "3g.20gb": (19968, 42, 3),
}
MIG_LAYOUTS = {
    "all-disabled": {},
    "all-1g.5gb": {"1g.5gb": 7},
    "all-balanced": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
}

MIG_PARTED_CONFIG = """\
version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false

  all-enabled:
    - devices: all
      mig-enabled: true
      mig-devices: {}

  # A100-40GB, A800-40GB
  all-1g.5gb:
    - device-filter: ["0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"]
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.5gb": 7

  all-2g.10gb:
    - device-filter: ["0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"]
      devices: all
      mig-enabled: true
      mig-devices:
        "2g.10gb": 3

  all-3g.20gb:
    - device-filter: ["0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"]
      devices: all
      mig-enabled: true
      mig-devices:
        "3g.20gb": 2

  all-balanced:
    # A100-40GB, A800-40GB
    - device-filter: ["0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"]
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.5gb": 2
        "2g.10gb": 1
        "3g.20gb": 1
"""


# ---------------------------------------------------------------- identities


def uid(kind: str, name: str) -> str:
    return str(uuid.uuid5(UID_NAMESPACE, f"{kind}/{name}"))


def safe_hash(seed: str, length: int) -> str:
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(SAFE_ALPHABET[b % len(SAFE_ALPHABET)] for b in digest[:length])


def resource_version(seed: str) -> str:
    return str(1_000_000 + int(hashlib.sha256(seed.encode()).hexdigest()[:6], 16))


# ---------------------------------------------------------------- nodes


@dataclass(frozen=True)
class NodeSpec:
    name: str
    index: int
    mig_config: str = ""  # "" = CPU-only node
    cpu: int = 128
    memory_ki: int = 1_056_375_408  # ~1007 GiB (a 1 TiB host as the kubelet reports it)

    @property
    def is_gpu(self) -> bool:
        return bool(self.mig_config)

    @property
    def ip(self) -> str:
        return f"10.0.1.{10 + self.index}"


NODES = (
    NodeSpec("a100-gpu-01", 1, "all-disabled"),
    NodeSpec("a100-gpu-02", 2, "all-disabled"),
    NodeSpec("a100-gpu-03", 3, "all-disabled"),
    NodeSpec("a100-mig1g-01", 4, "all-1g.5gb"),
    NodeSpec("a100-mig1g-02", 5, "all-1g.5gb"),
    NodeSpec("a100-migbal-01", 6, "all-balanced"),
    NodeSpec("a100-migbal-02", 7, "all-balanced"),
    NodeSpec("cpu-01", 8, cpu=32, memory_ki=263_846_900),  # 256 GiB hosts (~251.6 GiB reported)
    NodeSpec("cpu-02", 9, cpu=32, memory_ki=263_846_900),
    NodeSpec("cpu-03", 10, cpu=32, memory_ki=263_846_900),
)


def gpu_resources(spec: NodeSpec) -> dict[str, str]:
    layout = MIG_LAYOUTS[spec.mig_config]
    if not layout:
        return {"nvidia.com/gpu": "8"}
    return {f"nvidia.com/mig-{profile}": str(8 * count) for profile, count in layout.items()}


def gfd_labels(spec: NodeSpec) -> dict[str, str]:
    """GPU Feature Discovery / GPU Operator labels (mixed strategy, see nvidia-mig.md 3.6)."""
    labels = {
        "nvidia.com/cuda.driver.major": "535",
        "nvidia.com/cuda.driver.minor": "161",
        "nvidia.com/cuda.driver.rev": "07",
        "nvidia.com/cuda.runtime.major": "12",
        "nvidia.com/cuda.runtime.minor": "2",
        "nvidia.com/gfd.timestamp": "1710400000",
        "nvidia.com/gpu.compute.major": "8",
        "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.deploy.device-plugin": "true",
        "nvidia.com/gpu.deploy.dcgm-exporter": "true",
        "nvidia.com/gpu.deploy.gpu-feature-discovery": "true",
        "nvidia.com/gpu.deploy.mig-manager": "true",
        "nvidia.com/gpu.family": "ampere",
        "nvidia.com/gpu.machine": "DGXA100-920-23687-2530-000",
        "nvidia.com/gpu.memory": "40960",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": PRODUCT,
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.config": spec.mig_config,
        "nvidia.com/mig.config.state": "success",
        "nvidia.com/mig.strategy": "mixed",
    }
    for profile, count in MIG_LAYOUTS[spec.mig_config].items():
        memory, sms, slices = MIG_GFD[profile]
        prefix = f"nvidia.com/mig-{profile}"
        labels |= {
            f"{prefix}.count": str(8 * count),
            f"{prefix}.memory": str(memory),
            f"{prefix}.multiprocessors": str(sms),
            f"{prefix}.product": f"{PRODUCT}-MIG-{profile}",
            f"{prefix}.replicas": "1",
            f"{prefix}.slices.ci": str(slices),
            f"{prefix}.slices.gi": str(slices),
        }
    return labels


def node_labels(spec: NodeSpec) -> dict[str, str]:
    labels = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": spec.name,
        "kubernetes.io/os": "linux",
    }
    if not spec.is_gpu:
        return labels | {"node-pool": "cpu-micro"}
    mig = spec.mig_config != "all-disabled"
    labels |= {
        "gpu-type": "a100",
        "mig-enabled": "true" if mig else "false",
        "node-pool": "mig-medium" if mig else "gpu-large",
        "feature.node.kubernetes.io/pci-10de.present": "true",
    }
    return labels | gfd_labels(spec)


def node_conditions() -> list[dict[str, str]]:
    rows = (
        ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        ("Ready", "True", "KubeletReady", "kubelet is posting ready status. AppArmor enabled"),
    )
    return [
        {
            "lastHeartbeatTime": "2024-03-18T09:44:02Z",
            "lastTransitionTime": NODE_CREATED,
            "message": message,
            "reason": reason,
            "status": status,
            "type": kind,
        }
        for kind, status, reason, message in rows
    ]


def node_object(spec: NodeSpec) -> dict[str, Any]:
    capacity = {
        "cpu": str(spec.cpu),
        "ephemeral-storage": "1844295220Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": f"{spec.memory_ki}Ki",
        "pods": "110",
    }
    allocatable = capacity | {
        "cpu": f"{spec.cpu * 1000 - 500}m",
        "ephemeral-storage": "1699716487987",
        "memory": f"{spec.memory_ki - 10_485_760}Ki",  # 10 GiB system/kube reserved + eviction threshold
    }
    if spec.is_gpu:
        capacity |= gpu_resources(spec)
        allocatable |= gpu_resources(spec)
    machine_id = hashlib.md5(spec.name.encode()).hexdigest()  # an identifier, not a secret
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "annotations": {
                "kubeadm.alpha.kubernetes.io/cri-socket": "unix:///run/containerd/containerd.sock",
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
            "creationTimestamp": NODE_CREATED,
            "labels": node_labels(spec),
            "name": spec.name,
            "resourceVersion": resource_version(spec.name),
            "uid": uid("Node", spec.name),
        },
        "spec": {"podCIDR": f"10.244.{spec.index}.0/24", "podCIDRs": [f"10.244.{spec.index}.0/24"]},
        "status": {
            "addresses": [{"address": spec.ip, "type": "InternalIP"}, {"address": spec.name, "type": "Hostname"}],
            "allocatable": allocatable,
            "capacity": capacity,
            "conditions": node_conditions(),
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": uid("boot", spec.name),
                "containerRuntimeVersion": "containerd://1.6.28",
                "kernelVersion": "5.15.0-97-generic",
                "kubeProxyVersion": K8S_VERSION,
                "kubeletVersion": K8S_VERSION,
                "machineID": machine_id,
                "operatingSystem": "linux",
                "osImage": "Ubuntu 22.04.4 LTS",
                "systemUUID": uid("system", spec.name),
            },
        },
    }


# ---------------------------------------------------------------- workloads


@dataclass(frozen=True)
class Workload:
    """A Deployment (its ReplicaSet owns the pods) and where its replicas run."""

    name: str
    namespace: str
    image: str
    requests: dict[str, str]
    gpu: dict[str, str]  # extended resources, set as limits (requests default to them)
    placement: tuple[tuple[str, int], ...]  # (node, replicas)
    pdb: tuple[str, int] | None = None  # ("maxUnavailable" | "minAvailable", value)
    node_selector: dict[str, str] | None = None
    a100_affinity: bool = False
    priority_class: str = ""
    port: int = 8000

    @property
    def replicas(self) -> int:
        return sum(count for _, count in self.placement)

    @property
    def replica_set(self) -> str:
        return f"{self.name}-{safe_hash('rs/' + self.namespace + '/' + self.name, 10)}"


WORKLOADS = (
    Workload(
        "gpt2-online",
        "llm",
        TRITON,
        {"cpu": "8", "memory": "32Gi"},
        {"nvidia.com/gpu": "1"},
        (("a100-gpu-01", 3), ("a100-gpu-02", 2), ("a100-gpu-03", 1)),
        pdb=("maxUnavailable", 1),
        a100_affinity=True,
    ),
    Workload(
        "bert-base",
        "nlp",
        TRITON,
        {"cpu": "2", "memory": "8Gi"},
        {"nvidia.com/mig-1g.5gb": "1"},
        (("a100-mig1g-01", 12), ("a100-mig1g-02", 7), ("a100-migbal-01", 4), ("a100-migbal-02", 1)),
        pdb=("maxUnavailable", 1),
        node_selector={"mig-enabled": "true"},
    ),
    Workload(
        "resnet152-batch",
        "vision",
        TRITON,
        {"cpu": "4", "memory": "16Gi"},
        {"nvidia.com/mig-2g.10gb": "1"},
        (("a100-migbal-01", 6), ("a100-migbal-02", 3)),
        pdb=("minAvailable", 8),
        node_selector={"mig-enabled": "true"},
    ),
    Workload(
        "distilbert-cpu",
        "nlp",
        "registry.example.com/nlp/distilbert-onnx-cpu:1.4.2",
        {"cpu": "4", "memory": "8Gi"},
        {},
        (("cpu-01", 3), ("cpu-02", 2), ("cpu-03", 1)),
        pdb=("minAvailable", 5),
        node_selector={"node-pool": "cpu-micro"},
    ),
    Workload(
        "coredns",
        "kube-system",
        "registry.k8s.io/coredns/coredns:v1.9.3",
        {"cpu": "100m", "memory": "70Mi"},
        {},
        (("cpu-01", 1), ("cpu-02", 1)),
        priority_class="system-cluster-critical",
        port=53,
    ),
)

PENDING = Workload(
    "llama-70b",
    "llm",
    "ghcr.io/huggingface/text-generation-inference:1.4.3",
    {"cpu": "48", "memory": "400Gi"},
    {"nvidia.com/gpu": "8"},
    (),
    a100_affinity=True,
)


@dataclass(frozen=True)
class DaemonSet:
    name: str
    namespace: str
    image: str
    requests: dict[str, str]
    gpu_nodes_only: bool
    host_path: str


DAEMONSETS = (
    DaemonSet("kube-proxy", "kube-system", f"registry.k8s.io/kube-proxy:{K8S_VERSION}", {}, False, "/run/xtables.lock"),
    DaemonSet(
        "nvidia-device-plugin-daemonset",
        "gpu-operator",
        "nvcr.io/nvidia/k8s-device-plugin:v0.13.0",
        {},
        True,
        "/var/lib/kubelet/device-plugins",
    ),
    DaemonSet(
        "nvidia-dcgm-exporter",
        "gpu-operator",
        "nvcr.io/nvidia/k8s/dcgm-exporter:3.1.7-3.1.4-ubuntu20.04",
        {"cpu": "100m", "memory": "128Mi"},
        True,
        "/var/lib/kubelet/pod-resources",
    ),
)

A100_AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu-type", "operator": "In", "values": ["a100"]}]}]
        }
    }
}
DEFAULT_TOLERATIONS = [
    {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists", "tolerationSeconds": 300},
    {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 300},
]
PRIORITIES = {"": 0, "system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}


def api_access_volume() -> dict[str, Any]:
    return {
        "name": "kube-api-access",
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"items": [{"key": "ca.crt", "path": "ca.crt"}], "name": "kube-root-ca.crt"}},
            ],
        },
    }


def running_status(pod_name: str, container: str, image: str, node: NodeSpec, ip_index: int) -> dict[str, Any]:
    conditions = [
        {"lastProbeTime": None, "lastTransitionTime": PODS_STARTED, "status": "True", "type": kind}
        for kind in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
    ]
    return {
        "conditions": conditions,
        "containerStatuses": [
            {
                "containerID": "containerd://" + hashlib.sha256(pod_name.encode()).hexdigest(),
                "image": image,
                "imageID": image.split(":")[0] + "@sha256:" + hashlib.sha256(image.encode()).hexdigest(),
                "lastState": {},
                "name": container,
                "ready": True,
                "restartCount": 0,
                "started": True,
                "state": {"running": {"startedAt": PODS_STARTED}},
            }
        ],
        "hostIP": node.ip,
        "phase": "Running",
        "podIP": f"10.244.{node.index}.{ip_index}",
        "podIPs": [{"ip": f"10.244.{node.index}.{ip_index}"}],
        "qosClass": "Burstable",
        "startTime": PODS_STARTED,
    }


def pending_status() -> dict[str, Any]:
    gpu_nodes = sum(1 for n in NODES if n.is_gpu)
    cpu_nodes = len(NODES) - gpu_nodes
    message = (
        f"0/{len(NODES)} nodes are available: {cpu_nodes} node(s) didn't match Pod's node affinity/selector, "
        f"{gpu_nodes} Insufficient nvidia.com/gpu. preemption: 0/{len(NODES)} nodes are available: "
        f"{cpu_nodes} Preemption is not helpful for scheduling, {gpu_nodes} No preemption victims found for incoming pod.."
    )
    return {
        "conditions": [
            {
                "lastProbeTime": None,
                "lastTransitionTime": PENDING_CREATED,
                "message": message,
                "reason": "Unschedulable",
                "status": "False",
                "type": "PodScheduled",
            }
        ],
        "phase": "Pending",
        "qosClass": "Burstable",
    }


def container(name: str, image: str, requests: dict[str, str], gpu: dict[str, str], port: int) -> dict[str, Any]:
    limits = {"memory": requests["memory"]} if "memory" in requests else {}
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = dict(requests)
    if limits or gpu:
        resources["limits"] = limits | gpu
    return {
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "name": name,
        "ports": [{"containerPort": port, "name": "http" if port != 53 else "dns", "protocol": "TCP"}],
        "resources": resources,
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "volumeMounts": [
            {"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "name": "kube-api-access", "readOnly": True}
        ],
    }


def workload_pod(work: Workload, pod_name: str, node: NodeSpec | None, ip_index: int) -> dict[str, Any]:
    template_hash = work.replica_set.rsplit("-", 1)[1]
    spec: dict[str, Any] = {
        "containers": [container("server", work.image, work.requests, work.gpu, work.port)],
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": PRIORITIES[work.priority_class],
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "serviceAccount": "default",
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
        "tolerations": DEFAULT_TOLERATIONS,
        "volumes": [api_access_volume()],
    }
    if node is not None:
        spec["nodeName"] = node.name
    if work.priority_class:
        spec["priorityClassName"] = work.priority_class
    if work.node_selector:
        spec["nodeSelector"] = work.node_selector
    if work.a100_affinity:
        spec["affinity"] = A100_AFFINITY
    created = WORKLOAD_CREATED if node is not None else PENDING_CREATED
    metadata: dict[str, Any] = {"creationTimestamp": created}
    if pod_name.startswith(work.replica_set):
        metadata["generateName"] = f"{work.replica_set}-"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata
        | {
            "labels": {"app": work.name, "pod-template-hash": template_hash},
            "name": pod_name,
            "namespace": work.namespace,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "blockOwnerDeletion": True,
                    "controller": True,
                    "kind": "ReplicaSet",
                    "name": work.replica_set,
                    "uid": uid("ReplicaSet", f"{work.namespace}/{work.replica_set}"),
                }
            ],
            "resourceVersion": resource_version(pod_name),
            "uid": uid("Pod", f"{work.namespace}/{pod_name}"),
        },
        "spec": spec,
        "status": running_status(pod_name, "server", work.image, node, ip_index)
        if node is not None
        else pending_status(),
    }


def daemonset_pod(ds: DaemonSet, node: NodeSpec, ip_index: int) -> dict[str, Any]:
    pod_name = f"{ds.name}-{safe_hash(ds.name + '/' + node.name, 5)}"
    requests = dict(ds.requests)
    spec: dict[str, Any] = {
        "containers": [
            {
                "image": ds.image,
                "imagePullPolicy": "IfNotPresent",
                "name": ds.name.removeprefix("nvidia-").removesuffix("-daemonset"),
                "resources": {"requests": requests} if requests else {},
                "securityContext": {"privileged": True},
                "volumeMounts": [{"mountPath": ds.host_path, "name": "host"}],
            }
        ],
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "hostNetwork": ds.name == "kube-proxy",
        "nodeName": node.name,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": PRIORITIES["system-node-critical"],
        "priorityClassName": "system-node-critical",
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "serviceAccountName": ds.name.removesuffix("-daemonset"),
        "terminationGracePeriodSeconds": 30,
        "tolerations": [{"operator": "Exists"}],
        "volumes": [{"hostPath": {"path": ds.host_path, "type": ""}, "name": "host"}],
    }
    status = running_status(pod_name, spec["containers"][0]["name"], ds.image, node, ip_index)
    if spec["hostNetwork"]:
        status |= {"podIP": node.ip, "podIPs": [{"ip": node.ip}]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "creationTimestamp": NODE_CREATED,
            "generateName": f"{ds.name}-",
            "labels": {
                "app": ds.name,
                "controller-revision-hash": safe_hash("crh/" + ds.name, 10),
                "pod-template-generation": "1",
            },
            "name": pod_name,
            "namespace": ds.namespace,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "blockOwnerDeletion": True,
                    "controller": True,
                    "kind": "DaemonSet",
                    "name": ds.name,
                    "uid": uid("DaemonSet", f"{ds.namespace}/{ds.name}"),
                }
            ],
            "resourceVersion": resource_version(pod_name),
            "uid": uid("Pod", f"{ds.namespace}/{pod_name}"),
        },
        "spec": spec,
        "status": status,
    }


def pdb_object(work: Workload) -> dict[str, Any]:
    assert work.pdb is not None
    kind, value = work.pdb
    expected = work.replicas
    desired = expected - value if kind == "maxUnavailable" else value
    healthy = expected  # every replica is Running and Ready
    allowed = max(0, healthy - desired)
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {
            "creationTimestamp": WORKLOAD_CREATED,
            "generation": 1,
            "name": work.name,
            "namespace": work.namespace,
            "resourceVersion": resource_version("pdb/" + work.name),
            "uid": uid("PodDisruptionBudget", f"{work.namespace}/{work.name}"),
        },
        "spec": {kind: value, "selector": {"matchLabels": {"app": work.name}}},
        "status": {
            "conditions": [
                {
                    "lastTransitionTime": PODS_STARTED,
                    "message": "",
                    "observedGeneration": 1,
                    "reason": "SufficientPods" if allowed else "InsufficientPods",
                    "status": "True" if allowed else "False",
                    "type": "DisruptionAllowed",
                }
            ],
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "disruptionsAllowed": allowed,
            "expectedPods": expected,
            "observedGeneration": 1,
        },
    }


def mig_parted_config_map() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "creationTimestamp": NODE_CREATED,
            "labels": {
                "app.kubernetes.io/component": "nvidia-mig-manager",
                "app.kubernetes.io/managed-by": "gpu-operator",
            },
            "name": "default-mig-parted-config",
            "namespace": "gpu-operator",
            "resourceVersion": resource_version("cm/default-mig-parted-config"),
            "uid": uid("ConfigMap", "gpu-operator/default-mig-parted-config"),
        },
        "data": {"config.yaml": MIG_PARTED_CONFIG},
    }


# ---------------------------------------------------------------- assembly


def all_pods() -> list[dict[str, Any]]:
    nodes = {spec.name: spec for spec in NODES}
    next_ip = {spec.name: 2 for spec in NODES}
    pods: list[dict[str, Any]] = []

    def take_ip(node: str) -> int:
        next_ip[node] += 1
        return next_ip[node] - 1

    for spec in NODES:
        for ds in DAEMONSETS:
            if spec.is_gpu or not ds.gpu_nodes_only:
                pods.append(daemonset_pod(ds, spec, take_ip(spec.name)))
    for work in WORKLOADS:
        replica = 0
        for node_name, count in work.placement:
            for _ in range(count):
                replica += 1
                pod_name = f"{work.replica_set}-{safe_hash(f'{work.name}/{replica}', 5)}"
                pods.append(workload_pod(work, pod_name, nodes[node_name], take_ip(node_name)))
    pods.append(workload_pod(PENDING, "llama-70b-0", None, 0))
    return pods


def build() -> dict[str, Any]:
    items: list[dict[str, Any]] = [node_object(spec) for spec in NODES]
    items += all_pods()
    items += [pdb_object(work) for work in WORKLOADS if work.pdb]
    items.append(mig_parted_config_map())
    return {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"output file (default {DEFAULT_OUT.relative_to(ROOT)})"
    )
    args = parser.parse_args(argv)
    # kubectl indents by 4; 2 keeps the bundled file small, and the objects are the same.
    text = json.dumps(build(), indent=2) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out} ({len(text) / 1024:.0f} KiB)")


if __name__ == "__main__":
    main()

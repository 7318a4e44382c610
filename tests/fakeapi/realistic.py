"""Pods and nodes dressed as a real API server sends them: the bookkeeping no scheduling decision reads.

The builders (``tests/builders.py``, ``benchmarks/generate_cluster.py``) write only what the
model reads, about 1 KB per pod. A pod of a real Deployment, as ``kubectl get -o json`` shows
it, is around 20 KB: ``managedFields`` of several writers, the ``kubectl apply`` copy of the
manifest, an environment of some twenty variables, command line, probes, mounts, the
kubelet's container statuses. ``dress_pod`` and ``dress_node`` add that bulk to an object in
place, changing nothing the model or the executor reads: every addition is either one of the
fields ``compactor.kube.lean`` drops, or a field the model reads but that decides nothing here
(``configMap``/``secret``/projected volumes, a few plain annotations, spec defaults).

Both are fast enough to run on every reply of a 50,000-pod listing (``benchmarks/bench_memory.py``
dresses replies of the fake API server, whose store stays lean): the bulk is built once and
shared, only the parts that name the pod are made per pod.
"""

from __future__ import annotations

from typing import Any

import msgspec

JSON = dict[str, Any]

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
ENV_NAMES = (*(f"APP_SETTING_{i:02d}" for i in range(16)), "POD_NAME", "POD_NAMESPACE", "POD_IP", "NODE_NAME")
_TIME = "2024-03-15T10:00:00Z"


def _env() -> list[JSON]:
    env: list[JSON] = [
        {"name": name, "value": f"value-of-{name.lower().replace('_', '-')}-" + "x" * 24} for name in ENV_NAMES[:16]
    ]
    for name, path in (
        ("POD_NAME", "metadata.name"),
        ("POD_NAMESPACE", "metadata.namespace"),
        ("POD_IP", "status.podIP"),
        ("NODE_NAME", "spec.nodeName"),
    ):
        env.append({"name": name, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": path}}})
    return env


ENV = _env()
ENV_FROM = [{"configMapRef": {"name": "app-settings"}}, {"secretRef": {"name": "app-credentials"}}]
COMMAND = ["/usr/local/bin/python", "-m", "serving.main"]
ARGS = [
    "--port=8080",
    "--metrics-port=9090",
    "--model-dir=/models",
    "--log-level=info",
    "--max-batch-size=32",
    "--config=/etc/app/config.yaml",
    "--cache-dir=/cache",
    "--workers=4",
]
MOUNTS: list[JSON] = [
    {"name": "models", "mountPath": "/models", "readOnly": True},
    {"name": "config", "mountPath": "/etc/app", "readOnly": True},
    {"name": "credentials", "mountPath": "/var/run/secrets/app", "readOnly": True},
    {"name": "cache", "mountPath": "/cache"},
    {"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": True},
]
_HTTP = {"path": "/healthz", "port": 8080, "scheme": "HTTP"}
LIVENESS = {
    "httpGet": _HTTP,
    "initialDelaySeconds": 30,
    "timeoutSeconds": 5,
    "periodSeconds": 10,
    "successThreshold": 1,
    "failureThreshold": 3,
}
READINESS = {
    "httpGet": {**_HTTP, "path": "/ready"},
    "initialDelaySeconds": 5,
    "timeoutSeconds": 3,
    "periodSeconds": 5,
    "successThreshold": 1,
    "failureThreshold": 3,
}
STARTUP = {
    "exec": {"command": ["/bin/sh", "-c", "test -f /tmp/started"]},
    "timeoutSeconds": 1,
    "periodSeconds": 10,
    "successThreshold": 1,
    "failureThreshold": 30,
}
LIFECYCLE = {"preStop": {"exec": {"command": ["/bin/sh", "-c", "sleep 5 && kill -TERM 1"]}}}
# Volumes the model reads but that decide nothing (not emptyDir, hostPath, a claim or ephemeral).
VOLUMES: list[JSON] = [
    {"name": "config", "configMap": {"name": "app-config", "defaultMode": 420}},
    {"name": "credentials", "secret": {"secretName": "app-credentials", "defaultMode": 420}},
    {
        "name": "kube-api-access",
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {
                    "downwardAPI": {
                        "items": [
                            {"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}
                        ]
                    }
                },
            ],
        },
    },
]


def _fields(keys: list[str]) -> JSON:
    return {f"f:{k}": {} for k in keys}


def _container_fields() -> JSON:
    env: JSON = {
        f'k:{{"name":"{name}"}}': {
            ".": {},
            "f:name": {},
            **({"f:value": {}} if i < 16 else {"f:valueFrom": {".": {}, "f:fieldRef": {}}}),
        }
        for i, name in enumerate(ENV_NAMES)
    }
    probe: JSON = {
        ".": {},
        "f:failureThreshold": {},
        "f:httpGet": {".": {}, "f:path": {}, "f:port": {}, "f:scheme": {}},
        "f:initialDelaySeconds": {},
        "f:periodSeconds": {},
        "f:successThreshold": {},
        "f:timeoutSeconds": {},
    }
    mounts: JSON = {
        f'k:{{"mountPath":"{m["mountPath"]}"}}': {".": {}, "f:mountPath": {}, "f:name": {}, "f:readOnly": {}}
        for m in MOUNTS
    }
    return {
        ".": {},
        "f:args": {},
        "f:command": {},
        "f:env": {".": {}, **env},
        "f:envFrom": {},
        "f:image": {},
        "f:imagePullPolicy": {},
        "f:lifecycle": {".": {}, "f:preStop": {".": {}, "f:exec": {".": {}, "f:command": {}}}},
        "f:livenessProbe": probe,
        "f:name": {},
        "f:ports": {
            ".": {},
            'k:{"containerPort":8080,"protocol":"TCP"}': {
                ".": {},
                "f:containerPort": {},
                "f:name": {},
                "f:protocol": {},
            },
        },
        "f:readinessProbe": probe,
        "f:resources": {".": {}, "f:limits": {".": {}}, "f:requests": {".": {}}},
        "f:startupProbe": {
            ".": {},
            "f:exec": {".": {}, "f:command": {}},
            "f:failureThreshold": {},
            "f:periodSeconds": {},
        },
        "f:terminationMessagePath": {},
        "f:terminationMessagePolicy": {},
        "f:volumeMounts": {".": {}, **mounts},
    }


def _managed_fields(container_names: tuple[str, ...]) -> list[JSON]:
    conditions: JSON = {
        f'k:{{"type":"{t}"}}': {
            ".": {},
            "f:lastProbeTime": {},
            "f:lastTransitionTime": {},
            "f:status": {},
            "f:type": {},
        }
        for t in ("ContainersReady", "Initialized", "PodReadyToStartContainers", "Ready", "PodScheduled")
    }
    spec = {
        "f:containers": {f'k:{{"name":"{name}"}}': _container_fields() for name in container_names},
        **_fields(
            [
                "dnsPolicy",
                "enableServiceLinks",
                "priorityClassName",
                "restartPolicy",
                "schedulerName",
                "securityContext",
                "serviceAccount",
                "serviceAccountName",
                "terminationGracePeriodSeconds",
                "tolerations",
            ]
        ),
        "f:volumes": {
            ".": {},
            **{
                f'k:{{"name":"{v["name"]}"}}': {".": {}, "f:name": {}, f"f:{next(k for k in v if k != 'name')}": {}}
                for v in VOLUMES
            },
        },
    }
    return [
        {
            "manager": "kube-controller-manager",
            "operation": "Update",
            "apiVersion": "v1",
            "time": _TIME,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {
                    "f:annotations": {".": {}, "f:prometheus.io/port": {}, "f:prometheus.io/scrape": {}},
                    "f:generateName": {},
                    "f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}},
                    "f:ownerReferences": {".": {}, 'k:{"uid":"0b0f5c57-5b7e-4a7e-9d0c-6f2d1c1e2f3a"}': {}},
                },
                "f:spec": spec,
            },
        },
        {
            "manager": "kube-scheduler",
            "operation": "Update",
            "apiVersion": "v1",
            "time": _TIME,
            "fieldsType": "FieldsV1",
            "subresource": "binding",
            "fieldsV1": {"f:spec": {"f:nodeName": {}}},
        },
        {
            "manager": "kubelet",
            "operation": "Update",
            "apiVersion": "v1",
            "time": _TIME,
            "fieldsType": "FieldsV1",
            "subresource": "status",
            "fieldsV1": {
                "f:status": {
                    "f:conditions": conditions,
                    "f:containerStatuses": {},
                    "f:hostIP": {},
                    "f:hostIPs": {},
                    "f:phase": {},
                    "f:podIP": {},
                    "f:podIPs": {".": {}, 'k:{"ip":"10.1.2.3"}': {".": {}, "f:ip": {}}},
                    "f:startTime": {},
                }
            },
        },
        {
            "manager": "vpa-recommender",
            "operation": "Update",
            "apiVersion": "v1",
            "time": _TIME,
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:annotations": {"f:vpaObservedContainers": {}, "f:vpaUpdates": {}}}},
        },
    ]


_MANAGED: dict[tuple[str, ...], list[JSON]] = {}


def _container_status(name: str, image: str) -> JSON:
    return {
        "name": name,
        "ready": True,
        "restartCount": 1,
        "started": True,
        "image": image,
        "imageID": f"{image.split(':')[0]}@sha256:{'3f' * 32}",
        "containerID": f"containerd://{'a1' * 32}",
        "state": {"running": {"startedAt": _TIME}},
        "lastState": {
            "terminated": {
                "exitCode": 137,
                "reason": "OOMKilled",
                "startedAt": _TIME,
                "finishedAt": _TIME,
                "containerID": f"containerd://{'b2' * 32}",
                "message": "container exceeded its memory limit; last log lines: " + "loading shard ... " * 20,
            }
        },
        "volumeMounts": [
            {
                "name": m["name"],
                "mountPath": m["mountPath"],
                **({"readOnly": True, "recursiveReadOnly": "Disabled"} if m.get("readOnly") else {}),
            }
            for m in MOUNTS
        ],
        "user": {"linux": {"uid": 1000, "gid": 1000, "supplementalGroups": [1000]}},
    }


def _last_applied(pod: JSON) -> str:
    """The manifest as ``kubectl apply`` would have recorded it: the pod's own spec with its bulk."""
    meta = pod.get("metadata") or {}
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace"), "labels": meta.get("labels") or {}},
        "spec": {k: v for k, v in (pod.get("spec") or {}).items() if k != "nodeName"},
    }
    return msgspec.json.encode(manifest).decode()


def dress_pod(pod: JSON) -> JSON:
    """``pod`` (changed in place) with the bulk of a real Deployment pod: about 20 KB of JSON for one container."""
    meta = pod.setdefault("metadata", {})
    spec = pod.setdefault("spec", {})
    status = pod.setdefault("status", {})
    containers = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    names = tuple(str(c.get("name", "")) for c in containers)
    managed = _MANAGED.get(names)
    if managed is None:
        managed = _MANAGED.setdefault(names, _managed_fields(names))
    for container in containers:
        container.update(
            {
                "env": ENV,
                "envFrom": ENV_FROM,
                "command": COMMAND,
                "args": ARGS,
                "volumeMounts": MOUNTS,
                "livenessProbe": LIVENESS,
                "readinessProbe": READINESS,
                "startupProbe": STARTUP,
                "lifecycle": LIFECYCLE,
                "imagePullPolicy": "IfNotPresent",
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
            }
        )
    spec["volumes"] = [*(spec.get("volumes") or []), *VOLUMES]
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("serviceAccountName", "default")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("enableServiceLinks", True)
    meta["annotations"] = {
        **(meta.get("annotations") or {}),
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "9090",
        LAST_APPLIED: _last_applied(pod),
    }
    meta["managedFields"] = managed
    status.setdefault("hostIP", "10.0.12.34")
    status.setdefault("podIP", "10.1.2.3")
    status.setdefault("startTime", _TIME)
    status.setdefault("qosClass", "Burstable")
    status["containerStatuses"] = [
        _container_status(str(c.get("name", "")), str(c.get("image", ""))) for c in containers
    ]
    return pod


_NODE_IMAGES = [
    {
        "names": [
            f"registry.example.com/team-{i:02d}/serving@sha256:{f'{i:02x}' * 32}",
            f"registry.example.com/team-{i:02d}/serving:v{i}.{i % 7}.{i % 3}",
        ],
        "sizeBytes": 1_000_000_000 + i * 7_654_321,
    }
    for i in range(50)
]
_NODE_MANAGED = [
    {
        "manager": "kubelet",
        "operation": "Update",
        "apiVersion": "v1",
        "time": _TIME,
        "fieldsType": "FieldsV1",
        "subresource": "status",
        "fieldsV1": {
            "f:status": {
                "f:allocatable": _fields(["cpu", "memory", "nvidia.com/gpu", "pods", "ephemeral-storage"]),
                "f:capacity": _fields(["cpu", "memory", "nvidia.com/gpu", "pods", "ephemeral-storage"]),
                "f:conditions": {
                    f'k:{{"type":"{t}"}}': {
                        ".": {},
                        "f:lastHeartbeatTime": {},
                        "f:lastTransitionTime": {},
                        "f:message": {},
                        "f:reason": {},
                        "f:status": {},
                        "f:type": {},
                    }
                    for t in ("DiskPressure", "MemoryPressure", "PIDPressure", "Ready")
                },
                "f:images": {},
                "f:nodeInfo": {"f:bootID": {}, "f:kernelVersion": {}},
            }
        },
    },
    {
        "manager": "nfd-master",
        "operation": "Update",
        "apiVersion": "v1",
        "time": _TIME,
        "fieldsType": "FieldsV1",
        "fieldsV1": {
            "f:metadata": {
                "f:annotations": _fields(
                    ["nfd.node.kubernetes.io/feature-labels", "nfd.node.kubernetes.io/extended-resources"]
                ),
                "f:labels": _fields(
                    [
                        f"feature.node.kubernetes.io/cpu-cpuid.{f}"
                        for f in (
                            "ADX",
                            "AESNI",
                            "AVX",
                            "AVX2",
                            "AVX512BW",
                            "AVX512CD",
                            "AVX512DQ",
                            "AVX512F",
                            "FMA3",
                            "SHA",
                            "VAES",
                            "VPCLMULQDQ",
                        )
                    ]
                ),
            }
        },
    },
]


def dress_node(node: JSON) -> JSON:
    """``node`` (changed in place) with the bulk of a real GPU node: cached images, managedFields, a long annotation."""
    meta = node.setdefault("metadata", {})
    status = node.setdefault("status", {})
    meta["managedFields"] = _NODE_MANAGED
    meta["annotations"] = {
        **(meta.get("annotations") or {}),
        "nfd.node.kubernetes.io/feature-labels": ",".join(f"cpu-cpuid.F{i}" for i in range(60)),
        "node.alpha.kubernetes.io/ttl": "0",
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
    }
    status["images"] = _NODE_IMAGES
    status.setdefault("daemonEndpoints", {"kubeletEndpoint": {"Port": 10250}})
    return node

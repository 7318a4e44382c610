"""Helpers for the end-to-end suite: fake GPU capacity, workload objects, waits, the compactor subprocess, a PDB watcher.

Everything here talks to the cluster through the official ``kubernetes`` client and
reads replies as raw JSON dicts (``_preload_content=False``), the shape ``kubectl get
-o json`` prints, so nothing depends on the client's generated model classes.

The suite relies only on what the API server, the scheduler and the controllers
maintain (pod phase, the ``PodScheduled``/``Ready`` conditions, Deployment and PDB
status): no exec, no logs, no container output, so simulated kubelets (kwok) do too.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes.client.exceptions import ApiException

Obj = dict[str, Any]
T = TypeVar("T")

REPO_ROOT = Path(__file__).resolve().parents[2]
# Every end-to-end module: a disposable cluster in KUBECONFIG, else the module does not run.
NEEDS_CLUSTER = pytest.mark.skipif(
    not os.environ.get("KUBECONFIG"),
    reason="end-to-end tests need a disposable cluster: set KUBECONFIG (README: 'End-to-end tests on a real cluster')",
)

GPU = "nvidia.com/gpu"
MIG_1G = "nvidia.com/mig-1g.10gb"
PRODUCT = "NVIDIA-A100-SXM4-80GB"
PAUSE_IMAGE = "registry.k8s.io/pause:3.9"

# Our own mark on the nodes we gave fake GPUs, valued with the run's id: the workload's nodeSelector (so no other
# GPU node in the cluster takes its pods), and how a later run recognises (and cleans up) leftovers of a crashed one.
FAKE_GPU_LABEL = "gpu-compactor-e2e/fake-gpus"
CREATED_LABEL = "gpu-compactor-e2e/created"  # on the namespaces the suite creates
# Where the executor keeps its state ConfigMap (compactor/kube/cluster_client.py DEFAULT_NAMESPACE, annotations.STATE_CONFIGMAP).
STATE_NAMESPACE = "gpu-compactor"
STATE_CONFIGMAP = "gpu-compactor-state"
COMPACTOR_ANNOTATION_PREFIX = "compactor.io/"
COMPACTOR_TAINT_KEY = "compactor.io/reserved"
FENCE_TAINT_PREFIX = "compactor.io/fence-"  # + the installation (compactor.actions.port.annotations.fence_key)


def is_closed(node: Obj) -> bool:
    """Closed to new pods by a compactor's fence taint or a cordon."""
    spec = node.get("spec") or {}
    return bool(spec.get("unschedulable")) or any(
        str(t.get("key", "")).startswith(FENCE_TAINT_PREFIX) for t in spec.get("taints") or []
    )


# Pick these nodes instead of the first two eligible ones (comma-separated). Not COMPACTOR_*: that prefix is the product's settings.
NODES_ENV = "GPU_COMPACTOR_E2E_NODES"

GPU_PREFIX = "nvidia.com/"


# --------------------------------------------------------------------------- the fake GPU nodes


# The mixed node ends with 4 whole GPUs plus one A100-80GB in MIG mode cut into 7 x 1g.10gb (GFD "mixed" strategy); the
# whole node has 4 whole GPUs. The mixed node's whole GPUs are advertised only once the workload runs, so that the
# whole-GPU pods land on the whole node, whatever the scheduler's scoring: a fragmented start, deterministically.
MIXED_NODE_FIRST = {MIG_1G: 7}
MIXED_NODE_LATER = {GPU: 4}
WHOLE_NODE_RESOURCES = {GPU: 4}
FAKE_RESOURCES = sorted({*MIXED_NODE_FIRST, *MIXED_NODE_LATER, *WHOLE_NODE_RESOURCES})


def _gfd_labels(gpus: int, mig: int) -> dict[str, str]:
    """The GPU Feature Discovery labels the compactor reads (docs: shared notes nvidia-mig.md 3.5-3.6)."""
    found = {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": PRODUCT,
        "nvidia.com/gpu.count": str(gpus),
        "nvidia.com/gpu.memory": "81920",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.strategy": "mixed",
    }
    if mig:
        found[f"{MIG_1G}.count"] = str(mig)
        found[f"{MIG_1G}.product"] = f"{PRODUCT}-MIG-1g.10gb"
    return found


MIXED_NODE_LABELS = _gfd_labels(gpus=5, mig=7)  # 4 whole + 1 MIG-enabled GPU
WHOLE_NODE_LABELS = _gfd_labels(gpus=4, mig=0)
FAKE_LABEL_KEYS = sorted({*MIXED_NODE_LABELS, *WHOLE_NODE_LABELS})


# --------------------------------------------------------------------------- what the fixtures hand the test


@dataclass
class Kube:
    api_client: Any
    core: Any
    apps: Any
    policy: Any


@dataclass
class GpuNodes:
    """The two nodes given fake GPUs: ``mixed`` (whole GPUs + MIG slices) and ``whole`` (whole GPUs only)."""

    mixed: str
    whole: str
    run_id: str  # the value of FAKE_GPU_LABEL on both nodes: the workload's nodeSelector
    schedulable_before: set[str] = field(default_factory=set)  # every node that was schedulable when the test began

    @property
    def names(self) -> list[str]:
        return [self.mixed, self.whole]


# --------------------------------------------------------------------------- raw API access


def raw(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Obj:
    """Call a ``kubernetes`` client method and return the reply as a JSON dict."""
    response = call(*args, _preload_content=False, **kwargs)
    try:
        data = response.data
    finally:
        response.release_conn()
    decoded: Obj = json.loads(data)
    return decoded


def api_request(kube: Kube, method: str, path: str, body: Obj | None = None) -> tuple[int, Obj]:
    """A raw request to ``path`` (objects the typed client has no API class for, e.g. admission policies): status and body."""
    headers = {"Accept": "application/json", **({"Content-Type": "application/json"} if body is not None else {})}
    request = kube.api_client.param_serialize(
        method=method, resource_path=path, header_params=headers, body=body, auth_settings=["BearerToken"]
    )
    try:
        response = kube.api_client.call_api(*request)
        text = response.read()
        return int(response.status), json.loads(text or b"{}")
    except ApiException as exc:
        return int(exc.status or 0), json.loads(exc.body or b"{}") if exc.body else {}


def get_or_none(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Obj | None:
    """Like ``raw``, but None on 404."""
    try:
        return raw(call, *args, **kwargs)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def with_retries(
    action: Callable[[], T], *, what: str, attempts: int = 8, statuses: Iterable[int] = (409, 429, 500, 503, 504)
) -> T:
    """Run ``action``, retrying on conflicts and transient server errors with a short backoff."""
    retryable = frozenset(statuses)
    delay = 0.5
    for attempt in range(1, attempts + 1):
        try:
            return action()
        except ApiException as exc:
            if exc.status not in retryable or attempt == attempts:
                raise AssertionError(f"{what}: HTTP {exc.status} {exc.reason}: {_body_message(exc)}") from exc
        time.sleep(delay)
        delay = min(delay * 2, 5.0)
    raise AssertionError(f"{what}: gave up")  # pragma: no cover - the loop returns or raises


def _body_message(exc: ApiException) -> str:
    body = exc.body.decode("utf-8", "replace") if isinstance(exc.body, bytes | bytearray) else str(exc.body or "")
    try:
        return str(json.loads(body).get("message") or body)
    except (ValueError, AttributeError):
        return body


def pointer(name: str) -> str:
    """A map key as one JSON-pointer segment (RFC 6901): ``nvidia.com/gpu`` -> ``nvidia.com~1gpu``."""
    return name.replace("~", "~0").replace("/", "~1")


# --------------------------------------------------------------------------- nodes


def labels(obj: Obj) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def annotations_of(obj: Obj) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


def name_of(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def is_ready_node(node: Obj) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def blocking_taints(node: Obj) -> list[str]:
    return [
        f"{t.get('key')}={t.get('value', '')}:{t.get('effect')}"
        for t in (node.get("spec") or {}).get("taints") or []
        if t.get("effect") in ("NoSchedule", "NoExecute")
    ]


def compactor_marks(node: Obj) -> dict[str, str]:
    return {k: v for k, v in annotations_of(node).items() if k.startswith(COMPACTOR_ANNOTATION_PREFIX)}


def gpu_capacity(node: Obj) -> dict[str, str]:
    status = node.get("status") or {}
    found: dict[str, str] = {}
    for part in ("capacity", "allocatable"):
        for key, value in (status.get(part) or {}).items():
            if key.startswith(GPU_PREFIX):
                found[key] = str(value)
    return found


def why_not_candidate(node: Obj) -> str:
    """Why the suite will not give this node fake GPUs ('' = it may).

    A node carrying ``FAKE_GPU_LABEL`` is a leftover of an interrupted run of this suite: its
    GPU resources and any compactor cordon on it are ours, and are taken back in setup.
    """
    node_labels = labels(node)
    ours = FAKE_GPU_LABEL in node_labels
    marks = compactor_marks(node)
    if "node-role.kubernetes.io/control-plane" in node_labels or "node-role.kubernetes.io/master" in node_labels:
        return "control-plane node"
    if not is_ready_node(node):
        return "not Ready"
    if (node.get("spec") or {}).get("unschedulable") and not (ours and marks.get("compactor.io/cordoned-by")):
        return "cordoned"
    taints = [
        t
        for t in blocking_taints(node)
        if not (ours and (t.startswith(f"{COMPACTOR_TAINT_KEY}=") or t.startswith(FENCE_TAINT_PREFIX)))
    ]
    if taints:
        return f"tainted {', '.join(taints)}"
    if node_labels.get("compactor.io/exclude") == "true":
        return "labelled compactor.io/exclude=true"
    if marks and not ours:
        return f"carries compactor marks {sorted(marks)} (a real compactor is acting on it)"
    if gpu_capacity(node) and not ours:
        return f"already advertises GPU resources {gpu_capacity(node)} (a real GPU node: never overwritten)"
    return ""


def pick_worker_nodes(nodes: list[Obj], wanted: int = 2, names: list[str] | None = None) -> list[Obj]:
    """``wanted`` schedulable worker nodes (sorted by name), or an AssertionError explaining each rejection."""
    by_name = {name_of(n): n for n in nodes}
    reasons = {name: why_not_candidate(node) for name, node in sorted(by_name.items())}
    if names:
        missing = [n for n in names if n not in by_name]
        bad = {n: reasons[n] for n in names if n in by_name and reasons[n]}
        if missing or bad or len(names) < wanted:
            raise AssertionError(
                f"{NODES_ENV}={','.join(names)}: need {wanted} usable nodes; missing {missing}, unusable {bad}"
            )
        return [by_name[n] for n in names[:wanted]]
    chosen = [by_name[name] for name, reason in reasons.items() if not reason][:wanted]
    if len(chosen) < wanted:
        detail = "; ".join(f"{name}: {reason or 'usable'}" for name, reason in reasons.items())
        raise AssertionError(
            f"the end-to-end suite needs {wanted} Ready, schedulable worker nodes without NoSchedule/NoExecute taints "
            f"and without real GPU resources, found {len(chosen)} ({detail}). "
            "Create a kind cluster with two workers: kind create cluster --config tests/e2e/kind-config.yaml"
        )
    return chosen


def advertise(core: Any, node: str, resources: Mapping[str, int]) -> None:
    """Advertise extended resources on a node (kubernetes.io "Advertise Extended Resources for a Node").

    JSON-patch ``/status/capacity/<name>``; ``/status/allocatable`` too, because simulated
    kubelets (kwok) do not derive allocatable from capacity (a real kubelet does, to the same value).
    """
    ops = [
        {"op": "add", "path": f"/status/{part}/{pointer(res)}", "value": str(qty)}
        for part in ("capacity", "allocatable")
        for res, qty in resources.items()
    ]
    with_retries(
        lambda: core.patch_node_status(node, ops, _content_type="application/json-patch+json"),
        what=f"advertising {dict(resources)} on node {node}",
    )


def advertised(core: Any, name: str, resources: Mapping[str, int]) -> Callable[[], tuple[bool, str]]:
    """A ``wait_for`` check: the node shows ``resources`` in both capacity and allocatable."""

    def check() -> tuple[bool, str]:
        status = raw(core.read_node, name).get("status") or {}
        seen = {part: {r: (status.get(part) or {}).get(r) for r in resources} for part in ("capacity", "allocatable")}
        done = all(str(seen[part][r]) == str(q) for part in seen for r, q in resources.items())
        return done, f"node {name}: {seen}"

    return check


def withdraw(core: Any, node: str, resource_names: Iterable[str]) -> None:
    """Remove extended resources from a node's status (only the keys present: a JSON-patch ``remove`` of a missing key fails)."""
    wanted = list(resource_names)

    def attempt() -> None:
        current = get_or_none(core.read_node, node)
        if current is None:
            return
        status = current.get("status") or {}
        ops = [
            {"op": "remove", "path": f"/status/{part}/{pointer(res)}"}
            for part in ("capacity", "allocatable")
            for res in wanted
            if res in (status.get(part) or {})
        ]
        if ops:
            core.patch_node_status(node, ops, _content_type="application/json-patch+json")

    # 422: a key vanished between the read and the patch (a kubelet status update); read again.
    with_retries(attempt, what=f"removing {wanted} from node {node}", statuses=(409, 422, 429, 500, 503, 504))


def set_labels(core: Any, node: str, changes: Mapping[str, str | None]) -> None:
    """Add/replace labels; a None value removes the label."""
    body = {"metadata": {"labels": dict(changes)}}
    with_retries(lambda: core.patch_node(node, body), what=f"labelling node {node}")


def release_compactor_marks(core: Any, node: Obj) -> bool:
    """Undo what an interrupted compactor left on a node it marked: uncordon, drop its annotations and reservation taint."""
    marks = compactor_marks(node)
    if not marks:
        return False
    name = name_of(node)
    spec = node.get("spec") or {}
    body: Obj = {"metadata": {"annotations": dict.fromkeys(marks)}}
    if marks.get("compactor.io/cordoned-by"):
        body["spec"] = {"unschedulable": None}
    taints = spec.get("taints") or []
    kept = [
        t
        for t in taints
        if t.get("key") != COMPACTOR_TAINT_KEY and not str(t.get("key", "")).startswith(FENCE_TAINT_PREFIX)
    ]
    if len(kept) != len(taints):
        body.setdefault("spec", {})["taints"] = kept
    with_retries(
        lambda: core.patch_node(name, body, _content_type="application/merge-patch+json"),
        what=f"releasing compactor marks on node {name}",
    )
    return True


# --------------------------------------------------------------------------- workloads


def deployment(
    name: str,
    *,
    replicas: int,
    resource: str,
    app_label: str,
    extra_labels: Mapping[str, str],
    node_selector: Mapping[str, str],
    amount: int = 1,
    cpu: str = "5m",
    memory: str = "8Mi",
    memory_limit: str = "32Mi",
    spread: bool = True,
) -> Obj:
    """Pause pods asking for ``amount`` of one ``resource`` each, kept to the test's nodes, by default spread by *preferred* anti-affinity.

    Preferred only: the planner does not move pods with required inter-pod (anti-)affinity,
    and the replacement must be allowed to land next to its sibling. The nodeSelector is
    a scheduling predicate the planner honours; every test node matches it. ``spread=False``
    leaves placement to the scheduler profile alone.
    """
    pod_labels = {"app": app_label, **extra_labels}
    spec: Obj = {
        "terminationGracePeriodSeconds": 1,
        "automountServiceAccountToken": False,
        "nodeSelector": dict(node_selector),
        "containers": [
            {
                "name": "pause",
                "image": PAUSE_IMAGE,
                "imagePullPolicy": "IfNotPresent",
                "resources": {
                    "requests": {"cpu": cpu, "memory": memory, resource: str(amount)},
                    "limits": {"memory": memory_limit, resource: str(amount)},
                },
            }
        ],
    }
    if spread:
        spec["affinity"] = {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": {"app": app_label}},
                        },
                    }
                ]
            }
        }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": pod_labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": app_label}},
            "template": {"metadata": {"labels": pod_labels}, "spec": spec},
        },
    }


def pod_disruption_budget(name: str, *, app_label: str) -> Obj:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": app_label}}},
    }


def pod_requests_gpu(pod: Obj) -> bool:
    spec = pod.get("spec") or {}
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = container.get("resources") or {}
        for part in ("requests", "limits"):
            if any(str(k).startswith(GPU_PREFIX) for k in (resources.get(part) or {})):
                return True
    return False


def condition(pod: Obj, kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True" for c in (pod.get("status") or {}).get("conditions") or []
    )


def is_running_ready(pod: Obj) -> bool:
    return (
        (pod.get("status") or {}).get("phase") == "Running"
        and condition(pod, "PodScheduled")
        and condition(pod, "Ready")
    )


def is_terminating(pod: Obj) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def describe_pods(pods: Iterable[Obj]) -> str:
    """One line per pod: name, node, phase, Ready/PodScheduled and the scheduler's reason when unscheduled."""
    lines = []
    for pod in sorted(pods, key=name_of):
        status = pod.get("status") or {}
        conds = {c.get("type"): c for c in status.get("conditions") or []}
        scheduled = conds.get("PodScheduled") or {}
        why = f" ({scheduled.get('reason')}: {scheduled.get('message')})" if scheduled.get("status") == "False" else ""
        lines.append(
            f"  {name_of(pod)} node={(pod.get('spec') or {}).get('nodeName') or '-'} phase={status.get('phase')} "
            f"Ready={(conds.get('Ready') or {}).get('status', '?')} PodScheduled={scheduled.get('status', '?')}"
            f"{' terminating' if is_terminating(pod) else ''}{why}"
        )
    return "\n".join(lines) or "  (no pods)"


def wait_for(check: Callable[[], tuple[bool, str]], *, timeout: float, interval: float = 1.0, what: str) -> str:
    """Poll ``check`` (-> (done, description)) until done; on timeout fail with the last description."""
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        try:
            done, last = check()
        except ApiException as exc:  # a transient API hiccup is not a verdict
            done, last = False, f"API error {exc.status} {exc.reason}"
        if done:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}:\n{last}")
        time.sleep(interval)


# --------------------------------------------------------------------------- the product as a subprocess


@dataclass
class CompactorRun:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def describe(self) -> str:
        return (
            f"$ {' '.join(self.args)}\nexit code {self.returncode} after {self.seconds:.1f}s\n"
            f"--- stdout ---\n{self.stdout[-6000:]}\n--- stderr ---\n{self.stderr[-6000:]}"
        )

    def json(self) -> Obj:
        try:
            decoded: Obj = json.loads(self.stdout)
        except ValueError as exc:
            raise AssertionError(f"compactor printed no JSON on stdout ({exc}):\n{self.describe()}") from None
        return decoded


def kubeconfig_args() -> list[str]:
    """How the subprocess finds the cluster: ``--kubeconfig FILE``, or for a ``KUBECONFIG`` path list, its current context."""
    value = os.environ.get("KUBECONFIG", "")
    paths = [p for p in value.split(os.pathsep) if p]
    if len(paths) == 1:
        return ["--kubeconfig", paths[0]]
    from kubernetes.config import list_kube_config_contexts

    _, current = list_kube_config_contexts(config_file=value)  # type: ignore[no-untyped-call]
    return ["--context", str(current["name"])]


def compactor_command(*args: str) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of ``python -m compactor.cli ARGS``, ``COMPACTOR_*`` settings removed (the config file rules)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPACTOR_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return [sys.executable, "-m", "compactor.cli", *args], env


def start_compactor(*args: str, env: Mapping[str, str] | None = None, log: Path | None = None) -> subprocess.Popen[str]:
    """The compactor as a background process (to signal it), its output captured (``log``: both streams into that file, for
    a long-running process whose pipes nobody reads while it runs); ``env``: variables added."""
    command, environment = compactor_command(*args)
    environment.update(env or {})
    if log is not None:
        with log.open("w", encoding="utf-8") as sink:
            return subprocess.Popen(
                command, cwd=REPO_ROOT, env=environment, stdout=sink, stderr=subprocess.STDOUT, text=True
            )
    return subprocess.Popen(
        command, cwd=REPO_ROOT, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def run_compactor(*args: str, timeout: float) -> CompactorRun:
    """``python -m compactor.cli ARGS`` to its end."""
    command, env = compactor_command(*args)
    started = time.monotonic()
    try:
        done = subprocess.run(
            command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
        raise AssertionError(
            f"$ {' '.join(command)}\ndid not finish within {timeout:g}s\n--- stdout ---\n{out[-6000:]}\n"
            f"--- stderr ---\n{err[-6000:]}"
        ) from None
    return CompactorRun(command, done.returncode, done.stdout, done.stderr, time.monotonic() - started)


# --------------------------------------------------------------------------- watching while the compactor runs


@dataclass
class Watch:
    """What the watcher saw: PDB samples that broke their budget, and when each node was cordoned."""

    samples: int = 0
    violations: list[str] = field(default_factory=list)
    # node -> seconds (since start) it was seen unschedulable
    cordoned: dict[str, list[float]] = field(default_factory=dict)
    # pdb -> (lowest currentHealthy, its desiredHealthy)
    min_healthy: dict[str, tuple[int, int]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


class PdbWatcher(threading.Thread):
    """Polls the namespace's PDBs and the test's nodes every ``interval`` seconds until stopped.

    A violation is any sample with ``status.currentHealthy < status.desiredHealthy`` once the
    disruption controller has observed the PDB (``observedGeneration >= generation``).
    """

    def __init__(self, core: Any, policy: Any, namespace: str, nodes: list[str], *, interval: float = 0.5) -> None:
        super().__init__(name=f"pdb-watcher-{namespace}", daemon=True)
        self.core = core
        self.policy = policy
        self.namespace = namespace
        self.nodes = nodes
        self.interval = interval
        self.result = Watch()
        self._stop_event = threading.Event()
        self._started_at = time.monotonic()

    def run(self) -> None:
        while not self._stop_event.is_set():
            try:
                self._sample()
            except Exception as exc:  # keep watching; a silent watcher would make the assertion vacuous
                if len(self.result.errors) < 20:
                    self.result.errors.append(f"{type(exc).__name__}: {exc}")
            self._stop_event.wait(self.interval)

    def _sample(self) -> None:
        now = round(time.monotonic() - self._started_at, 1)
        pdbs = (
            raw(self.policy.list_namespaced_pod_disruption_budget, self.namespace, _request_timeout=10).get("items")
            or []
        )
        for pdb in pdbs:
            status = pdb.get("status") or {}
            meta = pdb.get("metadata") or {}
            if int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
                continue
            current = int(status.get("currentHealthy") or 0)
            desired = int(status.get("desiredHealthy") or 0)
            name = name_of(pdb)
            lowest = self.result.min_healthy.get(name)
            if lowest is None or current < lowest[0]:
                self.result.min_healthy[name] = (current, desired)
            if current < desired:
                self.result.violations.append(
                    f"t={now}s PDB {name}: currentHealthy={current} < desiredHealthy={desired} "
                    f"(expectedPods={status.get('expectedPods')}, disruptionsAllowed={status.get('disruptionsAllowed')})"
                )
        for name in self.nodes:
            node = raw(self.core.read_node, name, _request_timeout=10)
            if is_closed(node):
                self.result.cordoned.setdefault(name, []).append(now)
        self.result.samples += 1

    def stop(self) -> Watch:
        self._stop_event.set()
        self.join(timeout=30)
        return self.result


def scrape(port: int, path: str = "/metrics") -> tuple[int, str]:
    """A local controller's HTTP endpoint: status and body (0 and the error when it does not answer)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError as exc:
        return 0, str(exc)


def gauge(text: str, name: str) -> float | None:
    """The first sample of metric ``name`` in a /metrics page (None: absent)."""
    line = next(
        (line for line in text.splitlines() if line.startswith(name + " ") or line.startswith(name + "{")), None
    )
    return float(line.rsplit(" ", 1)[1]) if line else None


def free_port() -> int:
    """A local TCP port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])

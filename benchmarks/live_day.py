"""A live day on the real control plane: a busy inference cluster without gpu-compactor, then with its controller
installed as a user would (issue 42, item 6).

    nice -n 5 python benchmarks/live_day.py --quick                                  # 8 nodes, 4 minutes: a smoke run
    nice -n 5 python benchmarks/live_day.py --nodes 32 --minutes 25 --seed 1         # the full day, both phases
    nice -n 5 python benchmarks/live_day.py --phases with --profile bin-packing      # one phase, bin-packing scheduler

Each phase starts its own, fresh realk8s control plane (``/work/shared/realk8s/up.sh``: kube-apiserver,
kube-controller-manager and kube-scheduler v1.36.2) on NON-default ports and state dir (``REALK8S_STATE=/tmp/realk8s-live``,
API 8443, etcd 4379/4380, controller-manager 12257, scheduler 12259), so it never touches the default instance another
developer may be using, and ``--nodes`` fake 8-GPU nodes (``fake_nodes.py --gpus 8 --cpu 64``, H100 GPU Feature
Discovery labels; the fill waits until every node is Ready and untainted), and stops all of it at the end
(try/finally; SIGINT, SIGTERM and SIGHUP included). ``--profile bin-packing`` starts the scheduler with
``SCHED_SCORING=MostAllocated``; the default is the upstream default profile.

The day (namespace ``live-day``), the same in both phases (``--seed``: same objects, same event times):

* the fill: ``--deployments`` Deployments (default two dozen at 32 nodes, scaled with the nodes) of pause pods asking
  for 1, 2 or 4 ``nvidia.com/gpu`` per replica (100m CPU, 128Mi), each with a PodDisruptionBudget ``maxUnavailable: 1``,
  asking together for ``--fill`` (0.8) of the GPUs; created biggest size first, each size once the previous one runs
  (1, 2 and 4 divide 8, so every pod fits whatever the scoring), placed by the real scheduler (nothing writes nodeName).
  kube-scheduler breaks equal scores at random, so the fill can differ a little between phases and runs: the JSON keeps
  its free GPUs per node (``fillNodesByFreeGpus``; with seed 1 at 32 nodes both phases start with 3 whole-free nodes);
* then, for ``--minutes``: every 15-25 s (seeded) one Deployment scaled up or down by 1 or 2 replicas (seeded, within
  [initial - half, initial + half], at least 1), and every 60-120 s a new 8-GPU pod: a 1-replica Deployment
  ``big-NNN`` without a PodDisruptionBudget (a model server asking for a whole node), which lives a seeded 5-15 minutes
  counted from the moment its first pod is bound (then the Deployment is deleted); one never bound stays to the end.
  Arrivals and scale events happen at the same offsets in both phases; only the 8-GPU Deployments' deletions depend on
  when their pod ran.

Phase ``with`` installs gpu-compactor as the README's "Running in the cluster" says, ``kubectl apply -k`` (realk8s's own
kubectl) of ``manifests/namespace``, ``manifests/mode/apply``, ``manifests/base`` (the service account, its RBAC, the
config and steering ConfigMaps: what ``overlays/controller`` adds its Deployment to; that Deployment is not applied,
since no kubelet here can run its image and the fake kubelets would report its pods Running), ``manifests/steering``
and ``manifests/guard`` (``--no-guards`` skips them), then runs ``python -m compactor.cli controller`` on this machine
as its service account: a kubeconfig holding ``kubectl create token gpu-compactor -n gpu-compactor --duration 2h`` with
the admin kubeconfig's server and CA; the config file is the ``compactor.yaml`` of the ConfigMap it installed
(``manifests/base/config.yaml``, ``movable`` as shipped) and ``COMPACTOR_MODE`` comes from the ConfigMap
``gpu-compactor-mode`` (``apply``), as the Deployment's volume and ``envFrom`` give them; the Deployment's flags
(``--config``, ``--log-format json``; leader election on, ``POD_NAME``/``POD_NAMESPACE`` set as its downward API does)
and the controller's defaults (``--interval 600``, pending trigger ``--pending-after 60 --pending-gap 300``) but
``--listen 127.0.0.1:<free port>``. The day starts once its ``/healthz`` answers 200 (its first cycle then runs).

Measured from watches (never sampled) on the namespace's pods and PDBs and on the nodes, over the day (from its first
event to ``--minutes`` later):

* 8-GPU pods: created -> bound seconds (watch arrival times, this machine's clock), p50 / p95 / max over every 8-GPU
  Deployment's first pod, one still waiting at the end counted up to the end; how many never bound; blocked GPU-minutes
  (8 x the minutes each 8-GPU pod waited, replacements of moved ones included);
* the smaller replicas created during the day (scale-ups and replacements): the same waits and blocked GPU-minutes;
* evictions: pods that got a ``DisruptionTarget`` condition (the Eviction API sets it; a scale-down does not), and the
  controller's ``CompactorEvict`` Events; PDB violations: ``currentHealthy < desiredHealthy`` once ``observedGeneration``
  caught up (tests/e2e/watchers.py's rule), as episodes, and those during an eviction in flight of that workload (from
  the eviction to its next replica bound): a scale-up of two replicas that wait for room also dips a PDB, so the first
  count is mostly the generator's own; replicas short after the day (``--settle`` seconds after the controller stopped):
  Pending for room vs missing pods (replicas not restored);
* the cluster: mean GPU allocation, mean whole-free nodes, whole-free nodes at the end (from the pods' bound
  intervals), nodes fenced by gpu-compactor (its ``compactor.io/`` NoSchedule taints: node-seconds, most at once);
* the controller: its log (cycles, runs by status, pending triggers and bindings, stale plans, refused plans, the
  circuit breaker, warnings and errors), its ``/metrics`` at the end (``gpu_compactor_runs_total`` by status, the
  ``gpu_compactor_pending_trigger_to_bound_seconds`` histogram, evictions, rollbacks, ...), its CPU seconds; the
  ``Compactor*`` Events;
* the API server: ``apiserver_request_total`` by verb and resource over the day (its /metrics at the day's start and
  end), all clients together (the fake kubelets' heartbeats, the controllers, the scheduler, this script's watches and
  the controller), and, from an audit log the script turns on in both phases (level Metadata, one line per finished
  request; ``--no-audit`` turns it off), the requests received during the day by client and gpu-compactor's own by verb
  and resource; the machine's load average every 15 s.

Output: one JSON line per phase appended to ``--out`` (default /tmp/gpu-compactor-live-day/results.jsonl), per-phase
logs beside it (realk8s's up/down output, the fake kubelets', the controller's), and a markdown table comparing the
phases, printed. A benchmark: it prints figures and asserts nothing. The wall-clock waits are what it measures, so the
machine's load (printed) matters.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes import watch as k8s_watch
from kubernetes.client.exceptions import ApiException

REPO = Path(__file__).resolve().parents[1]
REALK8S = Path(os.environ.get("REALK8S_DIR", "/work/shared/realk8s"))
# Never the default instance (/tmp/realk8s, 6443, 2379/2380, 10257, 10259): another developer uses it meanwhile.
LIVE_STATE = "/tmp/realk8s-live"
LIVE_PORTS = {
    "APISERVER_PORT": "8443",
    "ETCD_CLIENT_PORT": "4379",
    "ETCD_PEER_PORT": "4380",
    "KCM_PORT": "12257",
    "SCHED_PORT": "12259",
}
DEFAULT_STATE, DEFAULT_PORTS = "/tmp/realk8s", {"6443", "2379", "2380", "10257", "10259"}
NAMESPACE = "live-day"
COMPACTOR_NS = "gpu-compactor"
SERVICE_ACCOUNT = "gpu-compactor"
GPU = "nvidia.com/gpu"
GPUS_PER_NODE = 8
PAUSE = "registry.k8s.io/pause:3.9"
GFD_LABELS = {
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    "nvidia.com/gpu.count": str(GPUS_PER_NODE),
    "nvidia.com/gpu.present": "true",
}
FENCE_PREFIX = "compactor.io/"
INSTALL = ("manifests/namespace", "manifests/mode/apply", "manifests/base", "manifests/steering")
GUARDS = "manifests/guard"
SIZES, SIZE_WEIGHTS = (1, 2, 4), (0.4, 0.35, 0.25)
METRIC = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>[0-9.e+]+)$")
WATCH_SECONDS = 60
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived", "ResponseStarted"],
    "rules": [{"level": "Metadata"}],
}
COMPACTOR_USER = "system:serviceaccount:gpu-compactor:gpu-compactor"


class Stop(Exception):
    """A signal asked the benchmark to stop: the finally blocks tear everything down."""


# --------------------------------------------------------------------------- the day's plan (seeded, phase-independent


@dataclass(frozen=True)
class Small:
    name: str
    gpus: int
    initial: int
    low: int
    high: int


@dataclass(frozen=True)
class Event:
    at: float  # seconds after the day's start
    kind: str  # "scale" | "arrive"
    name: str
    replicas: int = 0  # scale: the new replica count
    life: float = 0.0  # arrive: seconds the 8-GPU pod lives once bound


@dataclass(frozen=True)
class DayPlan:
    smalls: list[Small]
    events: list[Event]

    @property
    def initial_gpus(self) -> int:
        return sum(s.gpus * s.initial for s in self.smalls)


def plan_day(args: argparse.Namespace) -> DayPlan:
    """The workload: the same for a seed and sizes, whatever happens in the cluster (three independent seeded streams)."""
    shapes = random.Random(f"{args.seed}-shapes")
    budget = round(args.fill * args.nodes * GPUS_PER_NODE)
    sizes = [shapes.choices(SIZES, SIZE_WEIGHTS)[0] for _ in range(args.deployments)]
    shares = [shapes.uniform(0.5, 1.5) for _ in sizes]
    replicas = [max(1, round(budget * share / sum(shares) / size)) for size, share in zip(sizes, shares, strict=True)]
    total = sum(r * s for r, s in zip(replicas, sizes, strict=True))
    while total > budget and any(r > 1 for r in replicas):  # trim to the budget, then top it up with what fits
        i = shapes.choice([i for i, r in enumerate(replicas) if r > 1])
        replicas[i] -= 1
        total -= sizes[i]
    while fits := [i for i, s in enumerate(sizes) if total + s <= budget]:
        i = shapes.choice(fits)
        replicas[i] += 1
        total += sizes[i]
    smalls = []
    for i, (size, initial) in enumerate(zip(sizes, replicas, strict=True)):
        half = max(1, initial // 2)
        smalls.append(Small(f"d{i:02d}-{size}gpu", size, initial, max(1, initial - half), initial + half))
    seconds = args.minutes * 60
    events: list[Event] = []
    walk, current = random.Random(f"{args.seed}-scale"), {s.name: s.initial for s in smalls}
    at = walk.uniform(15, 25)
    while at < seconds:
        small = walk.choice(smalls)
        step = walk.choice((-2, -1, 1, 2))
        wanted = min(small.high, max(small.low, current[small.name] + step))
        if wanted == current[small.name]:  # at a bound: go the other way
            wanted = min(small.high, max(small.low, current[small.name] - step))
        if wanted != current[small.name]:
            current[small.name] = wanted
            events.append(Event(round(at, 2), "scale", small.name, replicas=wanted))
        at += walk.uniform(15, 25)
    arrivals = random.Random(f"{args.seed}-arrivals")
    at, n = arrivals.uniform(30, 90), 0
    while at < seconds:
        events.append(Event(round(at, 2), "arrive", f"big-{n:03d}", life=round(arrivals.uniform(300, 900), 1)))
        n += 1
        at += arrivals.uniform(60, 120)
    return DayPlan(smalls, sorted(events, key=lambda e: e.at))


# --------------------------------------------------------------------------- objects


def pod_template(app: str, role: str, gpus: int) -> dict[str, Any]:
    labels = {"app": app, "live-day/role": role}
    resources = {
        "requests": {"cpu": "1" if gpus == GPUS_PER_NODE else "100m", "memory": "128Mi", GPU: str(gpus)},
        "limits": {"memory": "256Mi", GPU: str(gpus)},
    }
    return {
        "metadata": {"labels": labels},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "automountServiceAccountToken": False,
            "containers": [{"name": "server", "image": PAUSE, "resources": resources}],
        },
    }


def deployment(name: str, role: str, gpus: int, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name, "live-day/role": role}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": pod_template(name, role, gpus),
        },
    }


def pdb(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": name}}},
    }


def gpus_of(pod: dict[str, Any]) -> int:
    total = 0
    for container in (pod.get("spec") or {}).get("containers") or []:
        requests = (container.get("resources") or {}).get("requests") or {}
        total += int(requests.get(GPU, 0) or 0)
    return total


def retried(action: Callable[[], Any], what: str, attempts: int = 6) -> Any:
    delay = 0.5
    for attempt in range(1, attempts + 1):
        try:
            return action()
        except ApiException as exc:
            if exc.status not in (409, 429, 500, 502, 503, 504) or attempt == attempts:
                raise RuntimeError(f"{what}: HTTP {exc.status} {exc.reason}") from exc
        except (OSError, ConnectionError) as exc:  # urllib3's errors are OSErrors or wrap them
            if attempt == attempts:
                raise RuntimeError(f"{what}: {exc}") from exc
        time.sleep(delay)
        delay = min(delay * 2, 5)
    return None


def raw(call: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    response = call(*args, _preload_content=False, **kwargs)
    try:
        return dict(json.loads(response.data))
    finally:
        response.release_conn()


# --------------------------------------------------------------------------- watches


class ObjectWatch(threading.Thread):
    """List, then watch from the list's resourceVersion until stopped (resumed after a dropped stream, re-listed after a
    410, both counted). ``handle(kind, obj, now)``: kind LISTED/RELISTED/ADDED/MODIFIED/DELETED; ``listed(items, now)``
    after every (re-)list."""

    def __init__(
        self,
        what: str,
        api: k8s.ApiClient,
        list_call: Callable[..., Any],
        args: tuple[Any, ...],
        handle: Callable[[str, dict[str, Any], float], None],
        listed: Callable[[list[dict[str, Any]], float], None] | None = None,
    ) -> None:
        super().__init__(name=f"watch-{what}", daemon=True)
        self.what, self.api, self.list_call, self.args = what, api, list_call, args
        self.handle, self.listed = handle, listed
        self.resource_version = ""
        self.relists = 0
        self.errors: list[str] = []
        self._stopping = threading.Event()
        self._stream: Any = None

    def start(self) -> None:
        self._relist("LISTED")
        super().start()

    def stop(self) -> None:
        self._stopping.set()
        if self._stream is not None:
            self._stream.stop()
        self.join(timeout=5)

    def run(self) -> None:
        while not self._stopping.is_set():
            try:
                self._watch_once()
            except ApiException as exc:
                if self._stopping.is_set():
                    return
                if exc.status == 410:
                    self.relists += 1
                    self._safe_relist()
                else:
                    self._error(f"HTTP {exc.status} {exc.reason}")
            except (
                KeyError
            ) as exc:  # kubernetes' Watch reads an ERROR event's "raw_object", absent with deserialize=False
                if self._stopping.is_set():
                    return
                self.relists += 1
                self._error(f"an ERROR event (KeyError {exc}): re-listed")
                self._safe_relist()
            except Exception as exc:  # a dropped connection: resume from the last resourceVersion
                if self._stopping.is_set():
                    return
                self._error(f"{type(exc).__name__}: {str(exc)[:160]}")

    def _watch_once(self) -> None:
        self._stream = k8s_watch.Watch()  # type: ignore[no-untyped-call]
        for event in self._stream.stream(
            self.list_call,
            *self.args,
            resource_version=self.resource_version,
            deserialize=False,
            allow_watch_bookmarks=True,
            timeout_seconds=WATCH_SECONDS,
            _request_timeout=WATCH_SECONDS + 15,
        ):
            obj = event.get("object") or {}
            if event.get("type") == "ERROR":  # not reached as of kubernetes 37 (see run), kept for other versions
                raise ApiException(status=int(obj.get("code") or 0), reason=str(obj.get("reason")))
            version = (obj.get("metadata") or {}).get("resourceVersion")
            if version:
                self.resource_version = str(version)
            if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                self.handle(str(event["type"]), obj, time.time())
            if self._stopping.is_set():
                return

    def _safe_relist(self) -> None:
        try:
            self._relist("RELISTED")
        except Exception as exc:
            self._error(f"relist: {type(exc).__name__}: {str(exc)[:160]}")

    def _relist(self, kind: str) -> None:
        listed = raw(self.list_call, *self.args, _request_timeout=60)
        now = time.time()
        items = listed.get("items") or []
        for item in items:
            self.handle(kind, item, now)
        if self.listed is not None:
            self.listed(items, now)
        self.resource_version = str((listed.get("metadata") or {}).get("resourceVersion") or "")

    def _error(self, message: str) -> None:
        if len(self.errors) < 20:
            self.errors.append(message)
        time.sleep(0.5)


@dataclass
class PodLife:
    name: str
    app: str
    role: str  # small | big
    gpus: int
    created: float
    bound: float | None = None
    node: str = ""
    deleted: float | None = None
    evicted: bool = False
    first_of_app: bool = False


@dataclass
class Episode:
    pdb: str
    start: float
    end: float | None = None
    lowest: int = 0
    desired: int = 0


class Tracker:
    """What the watches saw: every pod's life, the PDBs' violation episodes, the nodes' fences."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pods: dict[str, PodLife] = {}  # uid ->
        self.apps_seen: set[str] = set()
        self.episodes: list[Episode] = []
        self.open_episodes: dict[str, Episode] = {}
        self.pdb_events = 0
        self.nodes: set[str] = set()
        self.fenced_since: dict[str, float] = {}
        self.fenced_seconds = 0.0
        self.fenced_peak = 0
        self.fenced_names: set[str] = set()

    # ----- pods

    def on_pod(self, kind: str, pod: dict[str, Any], now: float) -> None:
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        labels = meta.get("labels") or {}
        with self.lock:
            life = self.pods.get(uid)
            if life is None:
                app = str(labels.get("app", ""))
                life = PodLife(
                    name=str(meta.get("name")),
                    app=app,
                    role=str(labels.get("live-day/role", "")),
                    gpus=gpus_of(pod),
                    created=now,
                    first_of_app=app not in self.apps_seen,
                )
                self.apps_seen.add(app)
                self.pods[uid] = life
            node = str((pod.get("spec") or {}).get("nodeName") or "")
            if node and life.bound is None:
                life.bound, life.node = now, node
            conditions = (pod.get("status") or {}).get("conditions") or []
            if any(c.get("type") == "DisruptionTarget" and c.get("status") == "True" for c in conditions):
                life.evicted = True
            if (meta.get("deletionTimestamp") or kind == "DELETED") and life.deleted is None:
                life.deleted = now

    def on_pods_listed(self, items: list[dict[str, Any]], now: float) -> None:
        """After a re-list: the pods gone meanwhile were deleted (at the latest) now."""
        present = {str((i.get("metadata") or {}).get("uid")) for i in items}
        with self.lock:
            for uid, life in self.pods.items():
                if uid not in present and life.deleted is None:
                    life.deleted = now

    def first_bound(self, app: str) -> float | None:
        with self.lock:
            times = [p.bound for p in self.pods.values() if p.app == app and p.bound is not None]
        return min(times) if times else None

    def pods_of(self, apps: Iterable[str]) -> int:
        wanted = set(apps)
        with self.lock:
            return sum(1 for p in self.pods.values() if p.app in wanted and p.deleted is None)

    def bound_of(self, apps: Iterable[str]) -> tuple[int, int]:
        wanted = set(apps)
        with self.lock:
            alive = [p for p in self.pods.values() if p.app in wanted and p.deleted is None]
        return sum(1 for p in alive if p.bound is not None), len(alive)

    # ----- PDBs

    def on_pdb(self, kind: str, obj: dict[str, Any], now: float) -> None:
        status, meta = obj.get("status") or {}, obj.get("metadata") or {}
        name = str(meta.get("name"))
        with self.lock:
            self.pdb_events += 1
            if kind == "DELETED" or int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
                return
            current, desired = int(status.get("currentHealthy") or 0), int(status.get("desiredHealthy") or 0)
            episode = self.open_episodes.get(name)
            if current < desired:
                if episode is None:
                    episode = Episode(name, now, lowest=current, desired=desired)
                    self.open_episodes[name] = episode
                    self.episodes.append(episode)
                episode.lowest, episode.desired = min(episode.lowest, current), max(episode.desired, desired)
            elif episode is not None:
                episode.end = now
                del self.open_episodes[name]

    # ----- nodes

    def on_node(self, kind: str, node: dict[str, Any], now: float) -> None:
        name = str((node.get("metadata") or {}).get("name"))
        spec = node.get("spec") or {}
        fenced = kind != "DELETED" and (
            bool(spec.get("unschedulable"))
            or any(
                str(t.get("key", "")).startswith(FENCE_PREFIX) and t.get("effect") == "NoSchedule"
                for t in spec.get("taints") or []
            )
        )
        with self.lock:
            if kind != "DELETED":
                self.nodes.add(name)
            if fenced and name not in self.fenced_since:
                self.fenced_since[name] = now
                self.fenced_names.add(name)
            elif not fenced and name in self.fenced_since:
                self.fenced_seconds += now - self.fenced_since.pop(name)
            self.fenced_peak = max(self.fenced_peak, len(self.fenced_since))

    def fences_until(self, end: float) -> float:
        with self.lock:
            return self.fenced_seconds + sum(max(0.0, end - since) for since in self.fenced_since.values())


# --------------------------------------------------------------------------- the control plane


def live_env(profile: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SCHED_SCORING", "KUBECONFIG")}
    env.update(LIVE_PORTS, REALK8S_STATE=LIVE_STATE)
    if profile == "bin-packing":
        env["SCHED_SCORING"] = "MostAllocated"
    if env["REALK8S_STATE"] == DEFAULT_STATE or DEFAULT_PORTS & set(LIVE_PORTS.values()):
        raise SystemExit("refusing to touch the default realk8s instance")
    return env


class Realk8s:
    """The phase's own control plane and fake kubelets, started and stopped by this script alone (by PID)."""

    def __init__(self, profile: str, logs: Path, audit: bool) -> None:
        self.env = live_env(profile)
        self.logs = logs
        self.audit_log = logs / "audit.log" if audit else None
        if self.audit_log is not None:  # who sent each request: metadata only, one line per finished request
            policy = logs / "audit-policy.yaml"
            policy.write_text(yaml.safe_dump(AUDIT_POLICY), encoding="utf-8")
            self.audit_log.unlink(missing_ok=True)
            self.env["APISERVER_ARGS"] = " ".join(
                [
                    self.env.get("APISERVER_ARGS", ""),
                    f"--audit-policy-file={policy}",
                    f"--audit-log-path={self.audit_log}",
                ]
            ).strip()
        self.state = Path(LIVE_STATE)
        self.kubeconfig = self.state / "kubeconfig"
        self.kubectl = self.state / "bin" / "kubectl"
        self.nodes: subprocess.Popen[bytes] | None = None
        self.started = False

    def up(self) -> None:
        self._script(
            "down.sh", "down-before.log"
        )  # leftovers of an interrupted run of this script, by its own pidfiles
        self.started = True
        with (self.logs / "up.log").open("wb") as sink:
            done = subprocess.run(
                ["bash", str(REALK8S / "up.sh")], env=self.env, stdout=sink, stderr=subprocess.STDOUT, check=False
            )
        if done.returncode != 0:
            raise RuntimeError(f"up.sh failed (exit {done.returncode}): {(self.logs / 'up.log').read_text()[-2000:]}")
        if not self.kubectl.exists():
            raise RuntimeError(f"no kubectl at {self.kubectl}")

    def start_nodes(self, count: int) -> None:
        labels = [arg for key, value in GFD_LABELS.items() for arg in ("--label", f"{key}={value}")]
        command = [
            sys.executable,
            str(REALK8S / "fake_nodes.py"),
            "--kubeconfig",
            str(self.kubeconfig),
            "--nodes",
            str(count),
            "--gpus",
            str(GPUS_PER_NODE),
            "--cpu",
            "64",
            "--memory",
            "512Gi",
            *labels,
            "--pidfile",
            str(self.state / "run" / "fake-nodes.pid"),
        ]
        with (self.logs / "fake-nodes.log").open("wb") as sink:
            self.nodes = subprocess.Popen(
                command, env=self.env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
            )

    def down(self) -> None:
        if self.nodes is not None and self.nodes.poll() is None:
            stop_process(self.nodes, 20)
        if self.started:
            self._script("down.sh", "down.log")
            self.started = False

    def _script(self, name: str, log: str) -> None:
        with (self.logs / log).open("wb") as sink:
            subprocess.run(
                ["bash", str(REALK8S / name)],
                env=self.env,
                stdout=sink,
                stderr=subprocess.STDOUT,
                check=False,
                timeout=180,
            )

    def kubectl_run(self, *args: str, log: Path | None = None) -> str:
        done = subprocess.run(
            [str(self.kubectl), "--kubeconfig", str(self.kubeconfig), *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        if log is not None:
            with log.open("a", encoding="utf-8") as sink:
                sink.write(f"$ kubectl {' '.join(args)}\n{done.stdout}{done.stderr}\n")
        if done.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} (exit {done.returncode}): {done.stderr[-1500:]}")
        return done.stdout


def stop_process(process: subprocess.Popen[Any], grace: float) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds: this process only (it was started here, in its own session)."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        process.wait(timeout=10)


def wait_until(check: Callable[[], bool], timeout: float, what: str, interval: float = 1.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def schedulable_nodes(core: k8s.CoreV1Api) -> int:
    """Nodes Ready and without a NoSchedule/NoExecute taint. The API server's TaintNodesByCondition admission gives every
    new node ``node.kubernetes.io/not-ready:NoSchedule``, which the node lifecycle controller lifts only seconds after
    the node reports Ready: a fill started on Ready alone lands on the first nodes untainted and leaves others empty."""
    items = raw(core.list_node, _request_timeout=20).get("items") or []
    return sum(
        1
        for n in items
        if any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (n.get("status") or {}).get("conditions") or []
        )
        and not any(t.get("effect") in ("NoSchedule", "NoExecute") for t in (n.get("spec") or {}).get("taints") or [])
    )


def client_of(user: str) -> str:
    if user == COMPACTOR_USER:
        return "gpu-compactor"
    if user == "system:kube-controller-manager" or user.startswith("system:serviceaccount:kube-system:"):
        return "kube-controller-manager"
    if user == "kubernetes-admin":
        return "admin (fake kubelets, this script, kubectl)"
    return user.removeprefix("system:")


def audited(path: Path | None, start: float, end: float) -> dict[str, Any]:
    """The audit log's requests received during the day: by client, and the compactor's own by verb and resource."""
    if path is None or not path.exists():
        return {}
    clients: Counter[str] = Counter()
    compactor: Counter[str] = Counter()
    with path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            try:
                event = json.loads(line)
                received = datetime.fromisoformat(event["requestReceivedTimestamp"]).timestamp()
            except (ValueError, KeyError):
                continue
            if not start <= received <= end:
                continue
            user = str((event.get("user") or {}).get("username", ""))
            clients[client_of(user)] += 1
            if user == COMPACTOR_USER:
                ref = event.get("objectRef") or {}
                what = f"{event.get('verb')} {ref.get('resource') or event.get('requestURI', '')}"
                compactor[what + (f"/{ref['subresource']}" if ref.get("subresource") else "")] += 1
    return {"auditByClient": dict(clients.most_common()), "compactorRequests": dict(compactor.most_common())}


def request_totals(api: k8s.ApiClient) -> Counter[str]:
    """``VERB resource[/subresource]`` -> requests the API server served since it started (its /metrics)."""
    response = api.call_api(*api.param_serialize("GET", "/metrics", auth_settings=["BearerToken"]), _request_timeout=30)
    text = response.read().decode()
    totals: Counter[str] = Counter()
    for line in text.splitlines():
        match = METRIC.match(line)
        if match:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group("labels")))
            key = f"{labels.get('verb', '')} {labels.get('resource', '') or '-'}"
            if labels.get("subresource"):
                key += "/" + labels["subresource"]
            totals[key] += int(float(match.group("value")))
    return totals


# --------------------------------------------------------------------------- gpu-compactor, as a user installs it


@dataclass
class Controller:
    process: subprocess.Popen[bytes]
    port: int
    log: Path
    command: list[str]
    install: list[str]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def scrape(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as reply:
            return int(reply.status), reply.read().decode()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode()
    except OSError as exc:
        return 0, str(exc)


def install_and_start(cluster: Realk8s, core: k8s.CoreV1Api, logs: Path, guards: bool) -> Controller:
    """The README's kubectl apply -k, then the controller as its service account, on this machine."""
    install_log = logs / "install.log"
    paths = [*INSTALL, *([GUARDS] if guards else [])]
    for path in paths:
        cluster.kubectl_run("apply", "-k", path, log=install_log)
    time.sleep(3)  # the admission policies loaded by the API server before the first run looks for them
    config = raw(core.read_namespaced_config_map, "gpu-compactor-config", COMPACTOR_NS)["data"]["compactor.yaml"]
    mode = raw(core.read_namespaced_config_map, "gpu-compactor-mode", COMPACTOR_NS).get("data") or {}
    (logs / "compactor.yaml").write_text(config, encoding="utf-8")
    token = cluster.kubectl_run(
        "create", "token", SERVICE_ACCOUNT, "-n", COMPACTOR_NS, "--duration", "2h", log=None
    ).strip()
    admin = yaml.safe_load(cluster.kubeconfig.read_text(encoding="utf-8"))
    server = admin["clusters"][0]["cluster"]
    user = f"system:serviceaccount:{COMPACTOR_NS}:{SERVICE_ACCOUNT}"
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "realk8s-live", "cluster": server}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [
            {"name": "gpu-compactor", "context": {"cluster": "realk8s-live", "user": user, "namespace": COMPACTOR_NS}}
        ],
        "current-context": "gpu-compactor",
    }
    sa_kubeconfig = logs / "gpu-compactor.kubeconfig"
    sa_kubeconfig.write_text(yaml.safe_dump(kubeconfig), encoding="utf-8")
    sa_kubeconfig.chmod(0o600)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPACTOR_") and k != "KUBECONFIG"}
    env.update({k: str(v) for k, v in mode.items()})  # envFrom: the mode's ConfigMap (COMPACTOR_MODE=apply)
    # the Deployment's downward API: the leader-election identity and the namespace of its Lease
    env.update(POD_NAME="gpu-compactor-live-day-0", POD_NAMESPACE=COMPACTOR_NS, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    command = [
        sys.executable,
        "-m",
        "compactor.cli",
        "controller",
        "--kubeconfig",
        str(sa_kubeconfig),
        "--config",
        str(logs / "compactor.yaml"),
        "--log-format",
        "json",
        "--listen",
        f"127.0.0.1:{port}",
    ]
    log = logs / "controller.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
    controller = Controller(process, port, log, command, [f"kubectl apply -k {p}" for p in paths])

    def healthy() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"the controller exited ({process.returncode}): {log.read_text()[-2000:]}")
        return scrape(port, "/healthz")[0] == 200

    wait_until(healthy, 90, "the controller's /healthz", interval=0.5)
    return controller


def cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def controller_metrics(text: str) -> dict[str, float]:
    found = {}
    for line in text.splitlines():
        if line.startswith("gpu_compactor_") and " " in line:
            name, value = line.rsplit(" ", 1)
            with contextlib.suppress(ValueError):
                found[name] = float(value)
    return found


def read_log(path: Path) -> dict[str, Any]:
    """The controller's JSON log, summed up."""
    statuses: Counter[str] = Counter()
    levels: Counter[str] = Counter()
    notable: Counter[str] = Counter()
    said: dict[str, list[str]] = {
        "pendingTriggers": [],
        "pendingBound": [],
        "plans": [],
        "breaker": [],
        "stale": [],
        "refused": [],
    }
    cycles = runs = unparsed = evicted = 0
    if not path.exists():
        return {"missing": True}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            unparsed += 1
            continue
        message, level = str(entry.get("msg", "")), str(entry.get("level", ""))
        levels[level] += 1
        stamp = str(entry.get("ts", ""))[11:19]
        if message == "cycle done":
            cycles += 1
            if entry.get("status"):
                runs += 1
                statuses[str(entry["status"])] += 1
        elif message.startswith("pending trigger:") and level == "info":
            said["pendingTriggers"].append(f"{stamp} {message}")
        elif message.startswith("pending pod "):
            said["pendingBound"].append(f"{stamp} {message}")
        elif message.startswith("plan ") and "move(s)" in message:
            said["plans"].append(f"{stamp} {message}")
        elif "circuit breaker" in message or "paused" in message:
            said["breaker"].append(f"{stamp} {message}")
        elif "went stale" in message:
            said["stale"].append(f"{stamp} {message}")
        elif message == "evicted":
            evicted += 1
        if "refused" in message or "abort" in message or "rolled back" in message:
            said["refused"].append(f"{stamp} {message} {entry.get('reason', '')}".strip())
        if level in ("warning", "error", "critical") or message in ("plan refused", "run outcome"):
            key = message if message not in ("run outcome", "plan refused") else f"{message}: {entry.get('status')}"
            notable[re.sub(r"\d+(\.\d+)?", "N", key)[:160]] += 1
    return {
        "cycles": cycles,
        "runs": runs,
        "runStatuses": dict(statuses),
        "evicted": evicted,
        "levels": dict(levels),
        "notable": dict(notable.most_common(25)),
        "unparsedLines": unparsed,
        **said,
    }


# --------------------------------------------------------------------------- one phase


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def union_length(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, -math.inf
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def build(apps: k8s.AppsV1Api, policy: k8s.PolicyV1Api, tracker: Tracker, plan: DayPlan, timeout: float) -> dict:
    """The fill: biggest size first, each once the previous ones are bound (or no progress for a minute)."""
    started, stuck = time.monotonic(), []
    for size in sorted(SIZES, reverse=True):
        batch = [s for s in plan.smalls if s.gpus == size]
        for small in batch:
            retried(
                lambda s=small: apps.create_namespaced_deployment(
                    NAMESPACE, deployment(s.name, "small", s.gpus, s.initial)
                ),
                "deployment",
            )
            retried(lambda s=small: policy.create_namespaced_pod_disruption_budget(NAMESPACE, pdb(s.name)), "pdb")
        names = [s.name for s in plan.smalls if s.gpus >= size]
        wanted = sum(s.initial for s in plan.smalls if s.gpus >= size)
        last, progress_at = (-1, -1), time.monotonic()
        while True:
            now = tracker.bound_of(names)
            if now == (wanted, wanted):
                break
            if now != last:
                last, progress_at = now, time.monotonic()
            if time.monotonic() - progress_at > 60 or time.monotonic() - started > timeout:
                stuck.append(f"{size}-GPU sizes: {now[0]} of {wanted} bound")
                break
            time.sleep(1)
    with tracker.lock:  # what the scheduler made of it: free GPUs per node
        used = Counter[str]()
        for p in tracker.pods.values():
            if p.bound is not None and p.deleted is None:
                used[p.node] += p.gpus
        nodes = set(tracker.nodes)
    free = Counter(GPUS_PER_NODE - used[n] for n in nodes)
    return {
        "fillSeconds": round(time.monotonic() - started, 1),
        "fillStuck": stuck,
        "fillNodesByFreeGpus": {str(k): v for k, v in sorted(free.items())},
    }


class Player:
    """Plays the day's events at their offsets, and deletes each 8-GPU Deployment its life after its pod was bound."""

    def __init__(self, apps: k8s.AppsV1Api, tracker: Tracker, plan: DayPlan) -> None:
        self.apps, self.tracker, self.plan = apps, tracker, plan
        self.alive: dict[str, float] = {}  # 8-GPU Deployment -> its life
        self.errors: list[str] = []
        self.late: list[float] = []
        self.done = Counter[str]()

    def play(self, start: float, end: float, stopping: threading.Event) -> None:
        events = list(self.plan.events)
        while not stopping.is_set():
            now = time.time()
            if now >= end:
                break
            while events and start + events[0].at <= now:
                event = events.pop(0)
                self.late.append(now - (start + event.at))
                self._do(event)
            for name, life in list(self.alive.items()):
                bound = self.tracker.first_bound(name)
                if bound is not None and bound + life <= now:
                    self._call(
                        lambda n=name: self.apps.delete_namespaced_deployment(
                            n, NAMESPACE, propagation_policy="Background"
                        ),
                        f"delete {name}",
                    )
                    self.done["deleted"] += 1
                    del self.alive[name]
            next_at = start + events[0].at if events else end
            stopping.wait(max(0.05, min(1.0, next_at - time.time(), end - time.time())))

    def _do(self, event: Event) -> None:
        if event.kind == "scale":
            self._call(
                lambda: self.apps.patch_namespaced_deployment_scale(
                    event.name, NAMESPACE, {"spec": {"replicas": event.replicas}}
                ),
                f"scale {event.name}",
            )
        else:
            body = deployment(event.name, "big", GPUS_PER_NODE, 1)
            self._call(lambda: self.apps.create_namespaced_deployment(NAMESPACE, body), f"create {event.name}")
            self.alive[event.name] = event.life
        self.done[event.kind] += 1

    def _call(self, action: Callable[[], Any], what: str) -> None:
        try:
            retried(action, what)
        except RuntimeError as exc:
            self.errors.append(str(exc)[:200])


def summarize(tracker: Tracker, start: float, end: float, nodes: int) -> dict[str, Any]:
    """The day's figures as of ``end`` (waits of pods still pending counted up to it)."""
    with tracker.lock:
        pods = [p for p in tracker.pods.values() if p.created <= end]
        episodes = list(tracker.episodes)
        node_names = set(tracker.nodes)

    def waited(p: PodLife) -> float:
        began = max(p.created, start)
        stop = min(x for x in (p.bound, p.deleted, end) if x is not None)
        return max(0.0, stop - began)

    in_day = [p for p in pods if p.created >= start or p.bound is None or p.bound >= start]
    big = [p for p in in_day if p.role == "big"]
    arrivals = [p for p in big if p.first_of_app]
    small = [p for p in in_day if p.role == "small" and p.created >= start]
    carried = [p for p in pods if p.role == "small" and p.created < start and (p.bound is None or p.bound > start)]
    day_min = (end - start) / 60
    # evictions, and each workload's evictions in flight: from the eviction to the next replica of it bound
    evicted = [p for p in pods if p.evicted and p.deleted is not None and start <= p.deleted <= end]
    in_flight: dict[str, list[tuple[float, float]]] = {}
    for p in evicted:
        assert p.deleted is not None
        after = [q.bound for q in pods if q.app == p.app and q.bound is not None and q.bound >= p.deleted]
        in_flight.setdefault(p.app, []).append((p.deleted, min(after) if after else end))
    day_episodes = [e for e in episodes if e.start <= end and (e.end is None or e.end >= start)]
    during = [e for e in day_episodes if any(a <= (e.end or end) and e.start <= b for a, b in in_flight.get(e.pdb, []))]
    # the cluster: GPU allocation and whole-free nodes over the day, from the pods' bound intervals
    busy: dict[str, list[tuple[float, float]]] = {}
    allocated = 0.0
    for p in pods:
        if p.bound is None or p.gpus <= 0:
            continue
        a, b = max(p.bound, start), min(p.deleted if p.deleted is not None else end, end)
        if b > a:
            busy.setdefault(p.node, []).append((a, b))
            allocated += p.gpus * (b - a)
    whole_free_seconds = sum((end - start) - union_length(busy.get(n, [])) for n in node_names)
    at_end = {p.node for p in pods if p.bound is not None and p.bound <= end and (p.deleted is None or p.deleted > end)}
    big_waits = [waited(p) for p in arrivals]

    def rounded(value: float | None) -> float | None:
        return None if value is None else round(value, 1)

    return {
        "bigArrived": len(arrivals),
        "bigBound": sum(1 for p in arrivals if p.bound is not None and p.bound <= end),
        "bigNeverBound": sum(1 for p in arrivals if p.bound is None or p.bound > end),
        "bigWaitP50": rounded(percentile(big_waits, 0.5)),
        "bigWaitP95": rounded(percentile(big_waits, 0.95)),
        "bigWaitMax": rounded(max(big_waits, default=None)),
        "bigWaits": [round(w, 1) for w in big_waits],
        "bigBlockedGpuMinutes": round(sum(p.gpus * waited(p) for p in big) / 60, 1),
        "bigPods": len(big),
        "smallCreated": len(small),
        "smallWaitP50": rounded(percentile([waited(p) for p in small], 0.5)),
        "smallWaitP95": rounded(percentile([waited(p) for p in small], 0.95)),
        "smallWaitMax": rounded(max((waited(p) for p in small), default=None)),
        "smallBlockedGpuMinutes": round(sum(p.gpus * waited(p) for p in [*small, *carried]) / 60, 1),
        "smallPendingAtEnd": sum(
            1 for p in [*small, *carried] if (p.bound is None or p.bound > end) and p.deleted is None
        ),
        "smallWithdrawnPending": sum(1 for p in small if p.bound is None and p.deleted is not None),
        "evictions": len(evicted),
        "evictedBig": sum(1 for p in evicted if p.role == "big"),
        "evictedPending": sum(1 for p in evicted if p.bound is None),
        "pdbViolationEpisodes": len(day_episodes),
        "pdbViolationEpisodesDuringEviction": len(during),
        "pdbViolationsDuringEviction": [
            f"{e.pdb} +{e.start - start:.0f}s..{'' if e.end is None else f'+{e.end - start:.0f}s'} "
            f"currentHealthy {e.lowest} < {e.desired}"
            for e in during[:20]
        ],
        "meanGpuAllocation": round(allocated / ((end - start) * nodes * GPUS_PER_NODE), 4),
        "meanWholeFreeNodes": round(whole_free_seconds / (end - start), 2),
        "wholeFreeNodesAtEnd": len(node_names - at_end),
        "dayMinutes": round(day_min, 2),
        "dayStart": datetime.fromtimestamp(start, UTC).isoformat(timespec="seconds"),
        # each 8-GPU arrival, and the smaller replicas that waited over 10 s: when (seconds into the day), how long,
        # where, and whether it replaced a pod of its workload evicted in the 10 s before (a move's replacement)
        "bigTimeline": [
            {"app": p.app, "at": round(p.created - start, 1), "waited": round(waited(p), 1), "node": p.node}
            for p in sorted(arrivals, key=lambda p: p.created)
        ],
        "smallLongWaits": [
            {
                "app": p.app,
                "at": round(p.created - start, 1),
                "waited": round(waited(p), 1),
                "node": p.node,
                "replacement": any(q.app == p.app and q.deleted and 0 <= p.created - q.deleted <= 10 for q in evicted),
            }
            for p in sorted(small, key=lambda p: p.created)
            if waited(p) > 10
        ],
    }


def run_phase(phase: str, args: argparse.Namespace, plan: DayPlan, stopping: threading.Event) -> dict[str, Any]:
    logs = Path(args.out).parent / phase
    logs.mkdir(parents=True, exist_ok=True)
    cluster = Realk8s(args.profile, logs, audit=not args.no_audit)
    controller: Controller | None = None
    watches: list[ObjectWatch] = []
    result: dict[str, Any] = {"phase": phase, "seed": args.seed, "nodes": args.nodes, "profile": args.profile}
    loads: list[float] = []
    try:
        print(f"[{phase}] starting realk8s on :{LIVE_PORTS['APISERVER_PORT']} ({LIVE_STATE})", flush=True)
        cluster.up()
        api = k8s_config.new_client_from_config(config_file=str(cluster.kubeconfig))  # type: ignore[no-untyped-call]
        core, apps, policy = k8s.CoreV1Api(api), k8s.AppsV1Api(api), k8s.PolicyV1Api(api)
        cluster.start_nodes(args.nodes)
        wait_until(lambda: schedulable_nodes(core) >= args.nodes, 180, f"{args.nodes} schedulable nodes", interval=1)
        time.sleep(2)  # the scheduler's informer sees the lifted taints too
        retried(lambda: core.create_namespace({"metadata": {"name": NAMESPACE}}), "namespace")
        tracker = Tracker()

        def client() -> k8s.ApiClient:
            return k8s_config.new_client_from_config(config_file=str(cluster.kubeconfig))  # type: ignore[no-untyped-call]

        watches = [
            ObjectWatch(
                "pods",
                client(),
                k8s.CoreV1Api(client()).list_namespaced_pod,
                (NAMESPACE,),
                tracker.on_pod,
                tracker.on_pods_listed,
            ),
            ObjectWatch(
                "pdbs",
                client(),
                k8s.PolicyV1Api(client()).list_namespaced_pod_disruption_budget,
                (NAMESPACE,),
                tracker.on_pdb,
            ),
            ObjectWatch("nodes", client(), k8s.CoreV1Api(client()).list_node, (), tracker.on_node),
        ]
        for w in watches:
            w.start()
        print(f"[{phase}] filling: {len(plan.smalls)} Deployments, {plan.initial_gpus} GPUs", flush=True)
        result.update(build(apps, policy, tracker, plan, timeout=600))
        if phase == "with":
            print(f"[{phase}] installing gpu-compactor and starting its controller", flush=True)
            controller = install_and_start(cluster, core, logs, guards=not args.no_guards)
            result["install"] = controller.install
            result["controllerCommand"] = " ".join(controller.command)
        requests_before = request_totals(api)
        player = Player(apps, tracker, plan)
        start = time.time()
        end = start + args.minutes * 60
        print(f"[{phase}] the day: {len(plan.events)} events over {args.minutes:g} min", flush=True)

        def sample_load() -> None:
            while not stopping.wait(15) and time.time() < end:
                loads.append(os.getloadavg()[0])

        threading.Thread(target=sample_load, daemon=True).start()
        player.play(start, end, stopping)
        if stopping.is_set():
            raise Stop
        end = min(end, time.time())
        result.update(summarize(tracker, start, end, args.nodes))
        result["fencedNodeSeconds"] = round(tracker.fences_until(end), 1)
        result["fencedPeak"] = tracker.fenced_peak
        result["fencedNodes"] = len(tracker.fenced_names)
        requests = request_totals(api) - requests_before
        result["apiRequests"] = sum(requests.values())
        result["apiRequestsByVerbResource"] = dict(requests.most_common())
        result.update(audited(cluster.audit_log, start, end))
        result["player"] = {
            "events": dict(player.done),
            "errors": player.errors[:10],
            "lateMax": round(max(player.late, default=0.0), 2),
        }
        if controller is not None:
            status, body = scrape(controller.port, "/metrics")
            result["controllerMetrics"] = controller_metrics(body) if status == 200 else {"scrape": status}
            seconds = cpu_seconds(controller.process.pid)
            result["controllerCpuSeconds"] = None if seconds is None else round(seconds, 1)
            stop_process(controller.process, 120)
            result["controllerExit"] = controller.process.returncode
        time.sleep(args.settle)  # replicas restored (or not) once nothing acts any more
        result.update(shortfall(apps, tracker))
        result["compactorEvents"] = compactor_events(core)
        result["watchErrors"] = {w.what: w.errors[:5] for w in watches if w.errors}
        result["watchRelists"] = {w.what: w.relists for w in watches if w.relists}
    finally:
        for w in watches:
            w.stop()
        if controller is not None:
            stop_process(controller.process, 60)
            result["controllerLog"] = read_log(controller.log)
        cluster.down()
        result["loadAvg1Mean"] = round(sum(loads) / len(loads), 2) if loads else None
        result["loadAvg1Max"] = round(max(loads), 2) if loads else None
    return result


def shortfall(apps: k8s.AppsV1Api, tracker: Tracker) -> dict[str, Any]:
    """Deployments' replicas not there after the day: Pending for room, or no pod at all (lost)."""
    items = raw(apps.list_namespaced_deployment, NAMESPACE, _request_timeout=30).get("items") or []
    pending: Counter[str] = Counter()
    missing = 0
    with tracker.lock:
        alive = [p for p in tracker.pods.values() if p.deleted is None]
    for d in items:
        name = d["metadata"]["name"]
        want = int((d.get("spec") or {}).get("replicas") or 0)
        mine = [p for p in alive if p.app == name]
        bound = sum(1 for p in mine if p.bound is not None)
        pending["big" if name.startswith("big-") else "small"] += max(0, min(want, len(mine)) - bound)
        missing += max(0, want - len(mine))
    return {
        "smallPendingAfter": pending["small"],
        "bigPendingAfter": pending["big"],
        "replicasMissingAfter": missing,
    }


def compactor_events(core: k8s.CoreV1Api) -> dict[str, int]:
    items = raw(core.list_event_for_all_namespaces, _request_timeout=60).get("items") or []
    found: Counter[str] = Counter()
    for e in items:
        reason = str(e.get("reason", ""))
        if reason.startswith("Compactor"):
            found[reason] += int(e.get("count") or 1)
    return dict(found)


# --------------------------------------------------------------------------- output


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def table(results: list[dict[str, Any]]) -> str:
    def runs(r: dict[str, Any]) -> str:
        metrics = r.get("controllerMetrics") or {}
        found = {
            re.search(r'status="([^"]+)"', k).group(1): int(v)  # type: ignore[union-attr]
            for k, v in metrics.items()
            if k.startswith("gpu_compactor_runs_total{") and v
        }
        return ", ".join(f"{k} {v}" for k, v in sorted(found.items())) or "-"

    def rounded(value: float | None) -> float | None:
        return None if value is None else round(value, 1)

    def metric(r: dict[str, Any], name: str) -> Any:
        return (r.get("controllerMetrics") or {}).get(name)

    def log(r: dict[str, Any], key: str) -> Any:
        found = (r.get("controllerLog") or {}).get(key)
        return len(found) if isinstance(found, list) else found

    def top(r: dict[str, Any]) -> str:
        by = r.get("apiRequestsByVerbResource") or {}
        return ", ".join(f"{k} {v}" for k, v in list(by.items())[:6])

    def keys(*names: str) -> Callable[[dict[str, Any]], str]:
        return lambda r: " / ".join(cell(r.get(n)) for n in names)

    def said(*names: str) -> Callable[[dict[str, Any]], str]:
        return lambda r: " / ".join(cell(log(r, n)) for n in names)

    histogram = "gpu_compactor_pending_trigger_to_bound_seconds"
    rows: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
        (
            "after the fill: nodes by free GPUs",
            lambda r: ", ".join(f"{k} free: {v}" for k, v in (r.get("fillNodesByFreeGpus") or {}).items()),
        ),
        ("8-GPU pods arrived / bound / never bound", keys("bigArrived", "bigBound", "bigNeverBound")),
        ("8-GPU wait p50 / p95 / max (s; unbound: to the end)", keys("bigWaitP50", "bigWaitP95", "bigWaitMax")),
        ("8-GPU blocked GPU-minutes", keys("bigBlockedGpuMinutes")),
        ("smaller replicas created in the day", keys("smallCreated")),
        ("smaller wait p50 / p95 / max (s)", keys("smallWaitP50", "smallWaitP95", "smallWaitMax")),
        ("smaller blocked GPU-minutes", keys("smallBlockedGpuMinutes")),
        ("smaller pending at the end / deleted while pending", keys("smallPendingAtEnd", "smallWithdrawnPending")),
        ("evictions (DisruptionTarget): all / 8-GPU / pending", keys("evictions", "evictedBig", "evictedPending")),
        ("CompactorEvict Events", lambda r: (r.get("compactorEvents") or {}).get("CompactorEvict", 0)),
        (
            "PDB violation episodes: all / during an eviction",
            keys("pdbViolationEpisodes", "pdbViolationEpisodesDuringEviction"),
        ),
        (
            "after the day + settle: smaller Pending / 8-GPU Pending / replicas missing",
            keys("smallPendingAfter", "bigPendingAfter", "replicasMissingAfter"),
        ),
        ("mean GPU allocation", lambda r: f"{100 * r['meanGpuAllocation']:.1f}%"),
        ("whole-free nodes: mean / at the end", keys("meanWholeFreeNodes", "wholeFreeNodesAtEnd")),
        ("nodes fenced: node-seconds / most at once / nodes", keys("fencedNodeSeconds", "fencedPeak", "fencedNodes")),
        ("controller cycles / runs (log)", said("cycles", "runs")),
        ("gpu_compactor_runs_total by status", runs),
        ("pending triggers / pending pods bound (log)", said("pendingTriggers", "pendingBound")),
        (
            "pending trigger -> bound: count / sum s",
            lambda r: f"{cell(metric(r, histogram + '_count'))} / {cell(rounded(metric(r, histogram + '_sum')))}",
        ),
        (
            "evictions / breaker / stale-plan / refused-or-aborted lines (log)",
            said("evicted", "breaker", "stale", "refused"),
        ),
        ("controller CPU s", keys("controllerCpuSeconds")),
        ("API requests in the day (all clients)", keys("apiRequests")),
        ("top verb/resource", top),
        (
            "requests by client (audit log)",
            lambda r: ", ".join(f"{k} {v}" for k, v in (r.get("auditByClient") or {}).items()),
        ),
        ("gpu-compactor's requests (audit log)", lambda r: sum((r.get("compactorRequests") or {}).values()) or "-"),
        (
            "its top verb/resource",
            lambda r: ", ".join(f"{k} {v}" for k, v in list((r.get("compactorRequests") or {}).items())[:8]) or "-",
        ),
        ("load average (1 min): mean / max", keys("loadAvg1Mean", "loadAvg1Max")),
    ]
    lines = ["| | " + " | ".join(r["phase"] for r in results) + " |", "|---|" + "---:|" * len(results)]
    for title, get in rows:
        values = []
        for r in results:
            try:
                values.append(cell(get(r)))
            except (KeyError, TypeError):
                values.append("-")
        lines.append(f"| {title} | " + " | ".join(values) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=32)
    parser.add_argument("--minutes", type=float, default=25)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", choices=("default", "bin-packing"), default="default")
    parser.add_argument("--deployments", type=int, default=None, help="default: 24 at 32 nodes, scaled with --nodes")
    parser.add_argument(
        "--fill", type=float, default=0.8, help="share of the GPUs the Deployments ask for at the start"
    )
    parser.add_argument("--phases", default="without,with", help="comma-separated: without, with")
    parser.add_argument("--settle", type=float, default=30, help="seconds after the day before counting replicas")
    parser.add_argument("--no-guards", action="store_true", help="do not install manifests/guard")
    parser.add_argument("--no-audit", action="store_true", help="no API server audit log (requests by client)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 8 nodes, 4 minutes")
    parser.add_argument("--out", default="/tmp/gpu-compactor-live-day/results.jsonl")
    args = parser.parse_args()
    if args.quick:
        args.nodes, args.minutes = 8, 4
    if args.deployments is None:
        args.deployments = max(6, round(24 * args.nodes / 32))
    phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    if not phases or set(phases) - {"without", "with"}:
        parser.error("--phases: without, with")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    plan = plan_day(args)
    arrivals = [e for e in plan.events if e.kind == "arrive"]
    print(
        f"seed {args.seed}: {args.nodes} nodes x {GPUS_PER_NODE} GPUs; {len(plan.smalls)} Deployments asking "
        f"{plan.initial_gpus} GPUs ({Counter(s.gpus for s in plan.smalls)} by GPUs per replica); "
        f"{len(plan.events) - len(arrivals)} scale events, {len(arrivals)} 8-GPU arrivals over {args.minutes:g} min",
        flush=True,
    )
    stopping = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        if stopping.is_set():  # a second signal: the teardown under way goes on
            return
        stopping.set()
        raise Stop(f"signal {signum}")

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    results = []
    try:
        for phase in phases:
            result = run_phase(phase, args, plan, stopping)
            with Path(args.out).open("a", encoding="utf-8") as sink:
                sink.write(json.dumps(result) + "\n")
            results.append(result)
            print(f"[{phase}] done: {json.dumps({k: v for k, v in result.items() if not isinstance(v, (dict, list))})}")
    except Stop as exc:
        print(f"stopped ({exc}); everything this script started is stopped", file=sys.stderr)
        return 130
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)  # the phase's finally has run; nothing left to interrupt
    print()
    print(table(results))
    for r in results:
        said = r.get("controllerLog")
        if said:
            print(f"\n[{r['phase']}] controller log: {json.dumps({k: v for k, v in said.items()}, indent=1)[:6000]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

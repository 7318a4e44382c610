"""Fragmented GPU clusters built by the real scheduler: fill a fleet with Deployments, then scale some of them down.

A ``StartingState`` is a seed and a few knobs; ``build(...)`` turns it into live objects:

1. about ``fill`` of the fleet's GPUs is asked for by ``deployments`` Deployments of pause
   pods, each replica asking for 1, 2 or 4 GPUs (seeded) plus 100m CPU / 128Mi, each with
   a PodDisruptionBudget ``maxUnavailable: 1``. Sizes are created biggest first and each
   size waits for the previous one to run, so every pod fits whatever the scheduler's
   scoring (1, 2 and 4 divide 8: the free GPUs of every node stay a multiple of the
   next size). The scheduler alone picks the nodes; nothing here writes ``nodeName``;
2. a seeded half of the Deployments is scaled down to about half its replicas, and the
   test waits until the removed pods are gone and every PDB allows one disruption again;
3. optionally, each Deployment binds a host port of its own (``host_port`` + i: no two of its pods
   share a node, kube-scheduler's NodePorts filter), and ``guard`` (see ``add_guard``) places a pod
   whose required anti-affinity keeps one workload off one node;
4. optionally, ``pending_gpus`` > 0 adds one more Deployment (1 replica asking for that
   many GPUs, no PDB) that must stay Pending: such states fill every GPU first and keep
   one pod on every node through the scale-down (``controller.kubernetes.io/pod-deletion-cost``),
   so no node is whole-free whatever the scheduler profile.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tests.e2e.helpers import (
    GPU,
    Kube,
    Obj,
    deployment,
    describe_pods,
    is_running_ready,
    is_terminating,
    name_of,
    pod_disruption_budget,
    pod_requests_gpu,
    raw,
    wait_for,
    with_retries,
)

FLEET_LABEL = "gpu-compactor-e2e/fleet"  # valued with the test's run id: the workload's nodeSelector
H100_LABELS = {
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    "nvidia.com/gpu.count": "8",
    "nvidia.com/gpu.present": "true",
}
GPU_SIZES = (1, 2, 4)
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
WORKLOAD_LABEL = "gpu-compactor-e2e/workload"
SETTLE_TIMEOUT = 120
HOST_PORT_MAX_REPLICAS = 8  # half the fleet's nodes
GUARD_NAME = "guard"


@dataclass(frozen=True)
class Fleet:
    """The test's GPU nodes: ``len(names)`` nodes with ``gpus_per_node`` GPUs each, all labelled ``FLEET_LABEL=run_id``."""

    run_id: str
    names: list[str]
    gpus_per_node: int

    @property
    def total_gpus(self) -> int:
        return len(self.names) * self.gpus_per_node

    @property
    def selector(self) -> dict[str, str]:
        return {FLEET_LABEL: self.run_id}


@dataclass(frozen=True)
class Workload:
    name: str
    gpus: int  # per replica
    replicas: int  # while filling
    keep: int  # after the scale-down
    host_port: int = 0  # each replica binds this port on its node

    @property
    def gpus_kept(self) -> int:
        return self.gpus * self.keep


@dataclass(frozen=True)
class StartingState:
    seed: int
    fill: float = 0.8
    deployments: int = 9
    pending_gpus: int = 0
    host_port: int = 0
    guard: bool = False  # the test adds a guard pod against one planned move (add_guard)
    # the scale-down keeps a pod on every node that runs one: the ReplicaSets may otherwise empty whole nodes and leave
    # the rest full, which under the bin-packing profile (its random ties) sometimes left nothing to compact
    keep_busy_nodes: bool = False

    @property
    def label(self) -> str:
        extras = [
            f"pending{self.pending_gpus}gpu" if self.pending_gpus else "",
            f"hostport{self.host_port}" if self.host_port else "",
            "guard" if self.guard else "",
        ]
        return "-".join([f"seed{self.seed}", *filter(None, extras)])

    def workloads(self, total_gpus: int) -> list[Workload]:
        """Seeded sizes and replica counts asking for about ``fill`` of ``total_gpus``; a seeded half is later scaled to half."""
        rng = random.Random(self.seed)
        sizes = [rng.choice(GPU_SIZES) for _ in range(self.deployments)]
        scaled = set(rng.sample(range(self.deployments), k=self.deployments // 2))
        left = round(total_gpus * self.fill)
        share = left / self.deployments
        found = []
        for i, size in enumerate(sizes):
            wanted = left // size if i == len(sizes) - 1 else max(2, round(share / size))
            replicas = min(wanted, left // size)
            if replicas < 1:
                continue
            left -= replicas * size
            keep = max(1, replicas // 2) if i in scaled else replicas
            found.append(Workload(f"w{i}-{size}gpu", size, replicas, keep))
        if self.host_port:
            # Every workload binds a port of its own (host_port + i): no two replicas of one workload may share a node, so
            # every move's target must run none of its siblings. Replicas are capped so that each finds a node with the port free.
            found = [
                Workload(
                    w.name,
                    w.gpus,
                    min(w.replicas, HOST_PORT_MAX_REPLICAS),
                    min(w.keep, max(1, min(w.replicas, HOST_PORT_MAX_REPLICAS) // 2))
                    if w.keep != w.replicas
                    else min(w.replicas, HOST_PORT_MAX_REPLICAS),
                    self.host_port + i,
                )
                for i, w in enumerate(found)
            ]
        return found


def build(
    kube: Kube, namespace: str, fleet: Fleet, state: StartingState, *, pending_later: bool = False
) -> list[Workload]:
    """Create ``state`` in ``namespace`` on ``fleet`` and wait until it has settled; returns the Deployments with PDBs.
    ``pending_later``: the nodes are left fragmented for the pending pod, which the caller adds (``add_pending``)."""
    workloads = state.workloads(fleet.total_gpus)
    for size in sorted({w.gpus for w in workloads}, reverse=True):
        for w in workloads:
            if w.gpus == size:
                create_workload(kube, namespace, fleet, w)
        running = {w.name: w.replicas for w in workloads if w.gpus >= size}
        wait_for(
            settled(kube, namespace, running),
            timeout=SETTLE_TIMEOUT,
            interval=1,
            what=f"the {size}-GPU Deployments to run and their PDBs to allow one disruption",
        )
    if state.pending_gpus or state.keep_busy_nodes:
        keep_one_pod_per_node(kube, namespace, fleet, workloads, busy_only=not state.pending_gpus)
    for w in workloads:
        if w.keep != w.replicas:
            scale(kube, namespace, w.name, w.keep)
    wait_for(
        settled(kube, namespace, {w.name: w.keep for w in workloads}),
        timeout=SETTLE_TIMEOUT,
        interval=1,
        what="the scaled-down pods to be gone and every PDB to allow one disruption",
    )
    if state.pending_gpus and not pending_later:
        add_pending(kube, namespace, fleet, state.pending_gpus)
    return workloads


def fleet_deployment(name: str, fleet: Fleet, *, replicas: int, gpus: int, cpu: str = "100m") -> Obj:
    """A Deployment of pause pods kept to the fleet, each asking ``gpus`` GPUs, placed by the scheduler profile alone."""
    return deployment(
        name,
        replicas=replicas,
        resource=GPU,
        amount=gpus,
        cpu=cpu,
        memory="128Mi",
        memory_limit="128Mi",
        spread=False,
        app_label=name,
        extra_labels={WORKLOAD_LABEL: "true"},
        node_selector=fleet.selector,
    )


def create_workload(kube: Kube, namespace: str, fleet: Fleet, w: Workload) -> None:
    pdb = pod_disruption_budget(w.name, app_label=w.name)
    deploy = fleet_deployment(w.name, fleet, replicas=w.replicas, gpus=w.gpus)
    if w.host_port:
        container = deploy["spec"]["template"]["spec"]["containers"][0]
        container["ports"] = [{"containerPort": w.host_port, "hostPort": w.host_port, "protocol": "TCP"}]
    with_retries(
        lambda: kube.policy.create_namespaced_pod_disruption_budget(namespace, pdb),
        what=f"creating PDB {w.name}",
        statuses=(429, 500, 503),
    )
    with_retries(
        lambda: kube.apps.create_namespaced_deployment(namespace, deploy),
        what=f"creating Deployment {w.name}",
        statuses=(429, 500, 503),
    )


def add_guard(kube: Kube, namespace: str, fleet: Fleet, app: str, node: str) -> None:
    """A GPU-less pod on ``node`` (chosen by nodeSelector; the scheduler binds it) whose required anti-affinity keeps
    pods of ``app`` off that node: kube-scheduler refuses them there even though they have no affinity of their own."""
    deploy = deployment(
        GUARD_NAME,
        replicas=1,
        resource=GPU,
        amount=0,
        cpu="10m",
        memory="16Mi",
        memory_limit="32Mi",
        spread=False,
        app_label=GUARD_NAME,
        extra_labels={},
        node_selector={**fleet.selector, "kubernetes.io/hostname": node},
    )
    resources = deploy["spec"]["template"]["spec"]["containers"][0]["resources"]
    for section in resources.values():
        section.pop(GPU)  # no GPU at all (not even 0): a node that runs only the guard is whole-free
    deploy["spec"]["template"]["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    with_retries(
        lambda: kube.apps.create_namespaced_deployment(namespace, deploy),
        what="creating the guard Deployment",
        statuses=(429, 500, 503),
    )

    def running() -> tuple[bool, str]:
        mine = [p for p in pods(kube, namespace) if app_of(p) == GUARD_NAME]
        return any(is_running_ready(p) and node_of(p) == node for p in mine), describe_pods(mine)

    wait_for(running, timeout=60, interval=1, what=f"the guard pod to run on {node}")


def scale(kube: Kube, namespace: str, name: str, replicas: int) -> None:
    with_retries(
        lambda: kube.apps.patch_namespaced_deployment_scale(name, namespace, {"spec": {"replicas": replicas}}),
        what=f"scaling Deployment {name} to {replicas}",
    )


def pending_name(gpus: int) -> str:
    return f"waiting-{gpus}gpu"


def add_pending(kube: Kube, namespace: str, fleet: Fleet, gpus: int, *, cpu: str = "100m") -> None:
    """One replica asking for ``gpus`` GPUs (and ``cpu``) and no PDB; waits until the scheduler has found no node for it."""
    name = pending_name(gpus)
    deploy = fleet_deployment(name, fleet, replicas=1, gpus=gpus, cpu=cpu)
    with_retries(
        lambda: kube.apps.create_namespaced_deployment(namespace, deploy),
        what=f"creating Deployment {name}",
        statuses=(429, 500, 503),
    )
    wait_for(
        unschedulable(kube, namespace, name),
        timeout=60,
        interval=1,
        what=f"the scheduler to leave the {gpus}-GPU pod Pending",
    )


def pods(kube: Kube, namespace: str) -> list[Obj]:
    return raw(kube.core.list_namespaced_pod, namespace).get("items") or []


def app_of(pod: Obj) -> str:
    return str(((pod.get("metadata") or {}).get("labels") or {}).get("app", ""))


def node_of(pod: Obj) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def unschedulable(kube: Kube, namespace: str, app: str) -> Any:
    """A ``wait_for`` check: the app's only pod is unbound and its PodScheduled condition says Unschedulable."""

    def check() -> tuple[bool, str]:
        mine = [p for p in pods(kube, namespace) if app_of(p) == app]
        conditions = [
            c for p in mine for c in (p.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"
        ]
        done = len(mine) == 1 and not node_of(mine[0]) and any(c.get("reason") == "Unschedulable" for c in conditions)
        if mine and node_of(mine[0]):
            raise AssertionError(
                f"the starting state is not fragmented enough: the scheduler bound {name_of(mine[0])} to "
                f"{node_of(mine[0])}\n{describe_pods(pods(kube, namespace))}"
            )
        return done, describe_pods(mine)

    return check


def settled(kube: Kube, namespace: str, expected: Mapping[str, int]) -> Any:
    """A ``wait_for`` check: each named Deployment runs exactly its expected Ready pods, none terminating, its PDB allows 1."""

    def check() -> tuple[bool, str]:
        live = pods(kube, namespace)
        deployments = {name_of(d): d for d in raw(kube.apps.list_namespaced_deployment, namespace).get("items") or []}
        budgets = {
            name_of(p): p for p in raw(kube.policy.list_namespaced_pod_disruption_budget, namespace).get("items") or []
        }
        lines = [
            _settled_line(
                name, want, deployments.get(name) or {}, budgets.get(name) or {}, [p for p in live if app_of(p) == name]
            )
            for name, want in sorted(expected.items())
        ]
        return all(ok for ok, _ in lines), "\n".join(line for _, line in lines) + "\npods:\n" + describe_pods(live)

    return check


def _settled_line(name: str, want: int, deploy: Obj, pdb: Obj, mine: list[Obj]) -> tuple[bool, str]:
    status = deploy.get("status") or {}
    pdb_status = pdb.get("status") or {}
    observed = int(pdb_status.get("observedGeneration") or 0) >= int((pdb.get("metadata") or {}).get("generation") or 1)
    ready = [p for p in mine if is_running_ready(p) and not is_terminating(p)]
    ok = (
        int(status.get("readyReplicas") or 0) == want
        and len(ready) == len(mine) == want
        and observed
        and int(pdb_status.get("expectedPods") or 0) == want
        and int(pdb_status.get("currentHealthy") or 0) == want
        and int(pdb_status.get("disruptionsAllowed") or 0) == 1
    )
    return ok, (
        f"{name}: want {want}, readyReplicas={status.get('readyReplicas')}, {len(ready)}/{len(mine)} pods Ready; PDB "
        f"expectedPods={pdb_status.get('expectedPods')} currentHealthy={pdb_status.get('currentHealthy')} "
        f"disruptionsAllowed={pdb_status.get('disruptionsAllowed')}{'' if observed else ' (not observed yet)'}"
    )


def keep_one_pod_per_node(
    kube: Kube, namespace: str, fleet: Fleet, workloads: list[Workload], *, busy_only: bool = False
) -> None:
    """Give one pod on every node a deletion cost, so the ReplicaSets' scale-down leaves no node empty (``busy_only``:
    every node that runs a pod of a workload that keeps some; the others may end whole-free)."""
    budget = {w.name: w.keep for w in workloads}
    by_node: dict[str, list[Obj]] = {}
    for pod in pods(kube, namespace):
        by_node.setdefault(node_of(pod), []).append(pod)
    for node in fleet.names:
        choices = sorted(
            by_node.get(node, []), key=lambda p: (budget.get(app_of(p), 0) == 0, -budget.get(app_of(p), 0), name_of(p))
        )
        chosen = next((p for p in choices if budget.get(app_of(p), 0) > 0), None)
        if chosen is None and busy_only:
            continue
        if chosen is None:
            raise AssertionError(
                f"node {node} runs no pod that survives the scale-down:\n{describe_pods(by_node.get(node, []))}"
            )
        budget[app_of(chosen)] -= 1
        protect(kube, namespace, name_of(chosen))


def protect(kube: Kube, namespace: str, pod: str) -> None:
    body = {"metadata": {"annotations": {DELETION_COST: "1000"}}}
    with_retries(lambda: kube.core.patch_namespaced_pod(pod, namespace, body), what=f"giving pod {pod} a deletion cost")


def whole_free_gpus(kube: Kube, fleet: Fleet) -> dict[str, int]:
    """Fleet node -> its allocatable GPUs, for every fleet node that runs no unfinished pod asking for a GPU (any namespace)."""
    busy = {
        node_of(p)
        for p in raw(kube.core.list_pod_for_all_namespaces).get("items") or []
        if node_of(p) and pod_requests_gpu(p) and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    }
    found = {}
    for node in raw(kube.core.list_node, label_selector=f"{FLEET_LABEL}={fleet.run_id}").get("items") or []:
        gpus = int(((node.get("status") or {}).get("allocatable") or {}).get(GPU) or 0)
        if gpus and name_of(node) not in busy:
            found[name_of(node)] = gpus
    return found


def whole_again(kube: Kube, namespace: str) -> Any:
    """A ``wait_for`` check: every Deployment has readyReplicas == spec.replicas and as many pods, and no pod is terminating."""

    def check() -> tuple[bool, str]:
        live = pods(kube, namespace)
        lines, done = [], not any(is_terminating(p) for p in live)
        for d in raw(kube.apps.list_namespaced_deployment, namespace).get("items") or []:
            want = int((d.get("spec") or {}).get("replicas") or 0)
            ready = int((d.get("status") or {}).get("readyReplicas") or 0)
            mine = [p for p in live if app_of(p) == name_of(d)]
            done = done and ready == want == len(mine)
            lines.append(f"{name_of(d)}: readyReplicas={ready}/{want}, {len(mine)} pods")
        return done, "\n".join(lines) + "\npods:\n" + describe_pods(live)

    return check

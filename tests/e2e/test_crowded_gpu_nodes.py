"""End to end on a real control plane: GPU nodes crowded by CPU-only pods, and a pending 8-GPU pod (issue [17]).

The cluster (fake kubelets, ``kubelets.py``): 4 GPU nodes of 8 GPUs and 64 CPUs each, and 2 CPU-only nodes of 96 CPUs.
The real scheduler builds the starting state; nothing here writes ``nodeName``:

1. the CPU-only nodes are cordoned, as if they had joined the cluster later;
2. ``train`` (16 replicas of 2 GPUs + 8 CPUs) takes every GPU: 4 replicas on each GPU node, whatever the scoring;
3. ``web`` and ``etl`` (8 replicas of 8 CPUs each) take every CPU left on the GPU nodes: 4 of theirs on each;
4. ``train`` is scaled down to 8, its ReplicaSet keeping 2 replicas on each GPU node (``pod-deletion-cost``);
5. the CPU-only nodes are uncordoned, empty: the room the planner may use;
6. ``waiting-8gpu`` asks for 8 GPUs and 48 CPUs and stays Pending: every GPU node has 4 GPUs and 16 CPUs free.

Neither GPU moves alone nor CPU moves alone make room: the pod fits on a GPU node once its 2 ``train`` replicas go to
other GPU nodes (each has the GPUs and CPUs for two) and at least 2 of its CPU-only pods go to the CPU-only nodes.

Then, restricted to the test's namespace, ``compactor plan --output json`` must place the pending pod with moves that
take both kinds of pods off its node, the CPU-only ones (``gpu: false``) to the CPU-only nodes, and ``compactor run
--once`` (deterministic search: the same plan), with the steering policy installed, must end where that plan says,
checked by ``fleet_runs.Outcome`` from the live cluster and ``RunWatcher``'s watch streams: the pending pod runs on the
node the plan named, only the planned pods were evicted and each replacement runs on its planned node, no PDB dropped
below its desired healthy count, no node is left cordoned, tainted or annotated, every Deployment is whole, the run
succeeded, and the whole-free GPUs gained equal the plan's ``freedGpus``. One JSON results line is printed (``pytest
-s``), also appended to ``$GPU_COMPACTOR_E2E_RESULTS``.
"""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e import fragmentation as frag
from tests.e2e.fleet_runs import (
    PLAN_TIMEOUT,
    Outcome,
    Stopwatch,
    compactor_config,
    pending_pods,
    placed_now,
    publish,
    run_once,
    settle,
)
from tests.e2e.fragmentation import FLEET_LABEL, H100_LABELS, Fleet
from tests.e2e.helpers import (
    GPU,
    NEEDS_CLUSTER,
    Kube,
    Obj,
    deployment,
    describe_pods,
    is_closed,
    kubeconfig_args,
    name_of,
    pod_disruption_budget,
    raw,
    run_compactor,
    wait_for,
    with_retries,
)
from tests.e2e.kubelets import NodeSet, fake_nodes
from tests.e2e.watchers import RunWatcher

pytestmark = [NEEDS_CLUSTER, pytest.mark.e2e, pytest.mark.timeout(600)]

GPU_NODES, GPUS_PER_NODE, CPUS_PER_GPU_NODE = 4, 8, 64
CPU_ONLY_NODES, CPUS_PER_CPU_ONLY_NODE = 2, 96

TRAIN = "train"  # 2 GPUs + 8 CPUs a replica
TRAIN_GPUS, TRAIN_CPUS = 2, 8
TRAIN_FILLING_PER_NODE = GPUS_PER_NODE // TRAIN_GPUS  # 4: every GPU taken (and 32 CPUs)
TRAIN_FILLING = TRAIN_FILLING_PER_NODE * GPU_NODES
TRAIN_KEPT_PER_NODE = 2  # after the scale-down: 4 GPUs and 16 CPUs of each GPU node held by train
TRAIN_KEPT = TRAIN_KEPT_PER_NODE * GPU_NODES
CPU_ONLY_WORKLOADS = ("web", "etl")  # 8 CPUs a replica, no GPU
CPU_ONLY_CPUS = 8
# The 32 CPUs train leaves on every GPU node, taken by 4 CPU-only pods: 8 replicas of each CPU-only Deployment.
CPU_ONLY_PER_GPU_NODE = (CPUS_PER_GPU_NODE - TRAIN_FILLING_PER_NODE * TRAIN_CPUS) // CPU_ONLY_CPUS
CPU_ONLY_REPLICAS = GPU_NODES * CPU_ONLY_PER_GPU_NODE // len(CPU_ONLY_WORKLOADS)
PENDING_GPUS, PENDING_CPUS = 8, 48  # more CPUs than a GPU node has free (16), even with train's replicas gone (32)
MEMORY = "1Gi"  # every pod: memory never decides anything here (512Gi a node)
SETTLE_TIMEOUT = 120


@dataclass(frozen=True)
class CrowdedFleet(Fleet):
    """The GPU nodes (``names``, labelled ``FLEET_LABEL=run_id``) and, with the same label, the CPU-only nodes."""

    cpu_only: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class CrowdedState:
    """This module's starting state, for the results line: every number is fixed above, nothing is drawn at random."""

    label: str = f"crowded-{GPU_NODES}gpu-nodes-{CPU_ONLY_NODES}cpu-only-pending{PENDING_GPUS}gpu{PENDING_CPUS}cpu"
    seed: int | None = None


@pytest.fixture
def gpu_fleet(kube: Kube, tmp_path: Path) -> Iterator[CrowdedFleet]:
    """Overrides conftest's 16-node fleet: this module's GPU and CPU-only nodes, both served until the test ends.

    conftest's ``fleet_namespace`` builds on this fixture, so the namespace (its pods deleted forcibly) goes before the
    nodes do."""
    run_id = f"e2e-{secrets.token_hex(3)}"
    gpu_nodes = NodeSet(
        prefix=f"{run_id}-gpu-",
        count=GPU_NODES,
        gpus=GPUS_PER_NODE,
        cpu=str(CPUS_PER_GPU_NODE),
        memory="512Gi",
        labels={**H100_LABELS, FLEET_LABEL: run_id},
    )
    cpu_only_nodes = NodeSet(
        prefix=f"{run_id}-cpu-",
        count=CPU_ONLY_NODES,
        gpus=0,
        cpu=str(CPUS_PER_CPU_ONLY_NODE),
        memory="384Gi",
        labels={FLEET_LABEL: run_id},
    )
    with (
        fake_nodes(kube.api_client, gpu_nodes, tmp_path / "fake-gpu-nodes.log") as gpu_names,
        fake_nodes(kube.api_client, cpu_only_nodes, tmp_path / "fake-cpu-only-nodes.log") as cpu_only_names,
    ):
        yield CrowdedFleet(run_id=run_id, names=gpu_names, gpus_per_node=GPUS_PER_NODE, cpu_only=cpu_only_names)


def test_cpu_pods_leave_the_gpu_nodes_for_cpu_only_nodes_so_a_pending_8_gpu_pod_runs(
    kube: Kube, gpu_fleet: CrowdedFleet, fleet_namespace: str, steering_policy: str, tmp_path: Path
) -> None:
    clock = Stopwatch()
    namespace = fleet_namespace
    crowd_the_gpu_nodes(kube, namespace, gpu_fleet)
    frag.add_pending(kube, namespace, gpu_fleet, PENDING_GPUS, cpu=str(PENDING_CPUS))
    waiting = pending_pods(kube, namespace)
    assert len(waiting) == 1, f"pending pods before planning: {waiting}"
    config, written = tmp_path / "compactor.yaml", tmp_path / "plan.json"
    config.write_text(yaml.safe_dump(compactor_config(namespace)), encoding="utf-8")
    clock.lap("setup")

    planned = run_compactor(
        "plan",
        *kubeconfig_args(),
        "--config",
        str(config),
        "--output",
        "json",
        "--write",
        str(written),
        timeout=PLAN_TIMEOUT,
    )
    assert planned.returncode == 0, planned.describe()
    plan = planned.json()
    placements = {p["pod"]: p["to"] for p in plan.get("placedPending") or []}
    assert list(placements) == [f"{namespace}/{waiting[0]}"], (
        f"the plan does not place the pending pod {waiting[0]}: placedPending {plan.get('placedPending')}, "
        f"pendingNotPlaced {plan.get('pendingNotPlaced')}, solver {plan.get('solver')}\n{planned.describe()}"
    )
    target = next(iter(placements.values()))
    assert target in gpu_fleet.names, f"the plan puts the 8-GPU pod on {target}, not a GPU node {gpu_fleet.names}"
    cpu_moves = [m for m in plan["moves"] if m.get("gpu") is False]
    gpu_moves = [m for m in plan["moves"] if m.get("gpu") is True]
    # Every GPU node runs train replicas and CPU-only pods that together leave too few GPUs and too few CPUs: making
    # room takes both kinds of moves off the target.
    assert cpu_moves and any(m["from"] == target for m in cpu_moves), (
        f"no CPU-only pod leaves {target} in the plan: moves {_moves(plan)}"
    )
    assert gpu_moves and any(m["from"] == target for m in gpu_moves), (
        f"no GPU pod leaves {target} in the plan: moves {_moves(plan)}"
    )
    # Pods without GPUs belong on the nodes without GPUs (the planner ranks those first for them): the CPUs of a GPU
    # node are what its GPUs' pods need.
    assert all(m["to"] in gpu_fleet.cpu_only for m in cpu_moves), (
        f"CPU-only pods planned onto GPU nodes: moves {_moves(plan)}"
    )
    clock.lap("plan")

    before = frag.whole_free_gpus(kube, gpu_fleet)
    with RunWatcher(kube, namespace) as watcher:
        ran = run_once(config, written)
        clock.lap("run")
        whole = settle(kube, namespace)
    after = frag.whole_free_gpus(kube, gpu_fleet)
    clock.lap("settle")

    outcome = Outcome(
        CrowdedState(),
        plan,
        ran,
        watcher.observed,
        before,
        after,
        placed_now(kube, namespace, waiting),
        clock,
        steering="policy",
        steering_why="",
        tenant=None,
    )
    publish(outcome.results_line())
    planned_pods = sorted(str(m["pod"]).split("/")[1] for m in plan["moves"])
    on_plan, moves = outcome.replacements_on_plan()
    checks = [
        *outcome.checks(kube, gpu_fleet, whole),
        (
            "the pods evicted are the planned ones",
            sorted(watcher.observed.evicted) == planned_pods,
            f"evicted {sorted(watcher.observed.evicted)}, planned {planned_pods}",
        ),
        (
            "every replacement runs on the node its move names (CPU-only pods on the CPU-only nodes)",
            on_plan == moves,
            f"{on_plan} of {moves} do; created while watched {watcher.observed.created}",
        ),
    ]
    failures = [f"- {what}: {detail}" for what, ok, detail in checks if not ok]
    assert not failures, (
        "the cluster did not end where the plan said:\n"
        + "\n".join(failures)
        + f"\n\nplanned moves {_moves(plan)}\n\n{ran.describe()}\n\npods now:\n{describe_pods(frag.pods(kube, namespace))}"
    )


# --------------------------------------------------------------------------- the starting state


def crowd_the_gpu_nodes(kube: Kube, namespace: str, fleet: CrowdedFleet) -> None:
    """Steps 1-5 of the module docstring; checks the layout they were meant to give before handing the cluster over."""
    for node in fleet.cpu_only:
        set_cordon(kube, node, cordoned=True)
    create(kube, namespace, fleet, TRAIN, replicas=TRAIN_FILLING, cpus=TRAIN_CPUS, gpus=TRAIN_GPUS)
    wait_for(
        frag.settled(kube, namespace, {TRAIN: TRAIN_FILLING}),
        timeout=SETTLE_TIMEOUT,
        interval=1,
        what=f"{TRAIN} to take every GPU",
    )
    for name in CPU_ONLY_WORKLOADS:
        create(kube, namespace, fleet, name, replicas=CPU_ONLY_REPLICAS, cpus=CPU_ONLY_CPUS, gpus=0)
    filled = {TRAIN: TRAIN_FILLING, **dict.fromkeys(CPU_ONLY_WORKLOADS, CPU_ONLY_REPLICAS)}
    wait_for(
        frag.settled(kube, namespace, filled),
        timeout=SETTLE_TIMEOUT,
        interval=1,
        what="the CPU-only Deployments to take every CPU left on the GPU nodes",
    )
    keep_train_replicas_on_every_gpu_node(kube, namespace, fleet)
    frag.scale(kube, namespace, TRAIN, TRAIN_KEPT)
    crowded = {TRAIN: TRAIN_KEPT, **dict.fromkeys(CPU_ONLY_WORKLOADS, CPU_ONLY_REPLICAS)}
    wait_for(
        frag.settled(kube, namespace, crowded),
        timeout=SETTLE_TIMEOUT,
        interval=1,
        what=f"{TRAIN}'s scaled-down replicas to be gone and every PDB to allow one disruption",
    )
    for node in fleet.cpu_only:
        set_cordon(kube, node, cordoned=False)
    nodes = {name_of(n): n for n in raw(kube.core.list_node).get("items") or []}
    closed = [name for name in [*fleet.names, *fleet.cpu_only] if is_closed(nodes[name])]
    assert not closed, f"nodes still closed before planning: {closed}"
    assert_crowded(kube, namespace, fleet)


def create(kube: Kube, namespace: str, fleet: Fleet, name: str, *, replicas: int, cpus: int, gpus: int) -> None:
    """A Deployment of pause pods asking for ``cpus`` CPUs and ``gpus`` GPUs each (none at all when 0), with a PDB
    ``maxUnavailable: 1``; placement is left to the scheduler profile (no anti-affinity)."""
    deploy = deployment(
        name,
        replicas=replicas,
        resource=GPU,
        amount=gpus,
        cpu=str(cpus),
        memory=MEMORY,
        memory_limit=MEMORY,
        spread=False,
        app_label=name,
        extra_labels={frag.WORKLOAD_LABEL: "true"},
        node_selector=fleet.selector,
    )
    if not gpus:  # not even "0": a pod without a GPU request is what the planner calls a CPU-only pod
        for section in deploy["spec"]["template"]["spec"]["containers"][0]["resources"].values():
            section.pop(GPU)
    pdb = pod_disruption_budget(name, app_label=name)
    with_retries(
        lambda: kube.policy.create_namespaced_pod_disruption_budget(namespace, pdb),
        what=f"creating PDB {name}",
        statuses=(429, 500, 503),
    )
    with_retries(
        lambda: kube.apps.create_namespaced_deployment(namespace, deploy),
        what=f"creating Deployment {name}",
        statuses=(429, 500, 503),
    )


def set_cordon(kube: Kube, node: str, *, cordoned: bool) -> None:
    body = {"spec": {"unschedulable": True if cordoned else None}}
    with_retries(
        lambda: kube.core.patch_node(node, body, _content_type="application/merge-patch+json"),
        what=f"{'cordoning' if cordoned else 'uncordoning'} node {node}",
    )


def keep_train_replicas_on_every_gpu_node(kube: Kube, namespace: str, fleet: Fleet) -> None:
    """A deletion cost on ``TRAIN_KEPT_PER_NODE`` train replicas of every GPU node: the ReplicaSet's scale-down takes the others."""
    by_node: dict[str, list[str]] = {}
    for pod in frag.pods(kube, namespace):
        if frag.app_of(pod) == TRAIN:
            by_node.setdefault(frag.node_of(pod), []).append(name_of(pod))
    for node in fleet.names:
        mine = sorted(by_node.get(node, []))
        assert len(mine) >= TRAIN_KEPT_PER_NODE, f"node {node} runs {mine} of {TRAIN}, fewer than {TRAIN_KEPT_PER_NODE}"
        for pod in mine[:TRAIN_KEPT_PER_NODE]:
            frag.protect(kube, namespace, pod)


def assert_crowded(kube: Kube, namespace: str, fleet: CrowdedFleet) -> None:
    """Every GPU node runs 2 train replicas and 4 CPU-only pods (4 GPUs, 16 CPUs free); the CPU-only nodes run nothing."""
    layout: dict[str, Counter[str]] = {node: Counter() for node in [*fleet.names, *fleet.cpu_only]}
    for pod in frag.pods(kube, namespace):
        kind = TRAIN if frag.app_of(pod) == TRAIN else "cpu-only"
        layout.setdefault(frag.node_of(pod), Counter())[kind] += 1
    wanted = {
        **{node: Counter({TRAIN: TRAIN_KEPT_PER_NODE, "cpu-only": CPU_ONLY_PER_GPU_NODE}) for node in fleet.names},
        **{node: Counter() for node in fleet.cpu_only},
    }
    assert layout == wanted, (
        f"the scheduler did not crowd the GPU nodes as intended:\n  got    {_layout(layout)}\n  wanted {_layout(wanted)}\n"
        f"{describe_pods(frag.pods(kube, namespace))}"
    )


def _layout(layout: dict[str, Counter[str]]) -> dict[str, dict[str, int]]:
    return {node: dict(sorted(counts.items())) for node, counts in sorted(layout.items())}


def _moves(plan: Obj) -> list[tuple[Any, ...]]:
    return [
        (m.get("pod"), m.get("from"), m.get("to"), "gpu" if m.get("gpu") else "cpu-only")
        for m in plan.get("moves") or []
    ]

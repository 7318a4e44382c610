"""CPU-only pods on GPU nodes (``report --advise``, the pending reasons) on small clusters computed by hand.

Covers: the advice when CPU-only pods hold the CPU a blocked pending GPU pod or stranded GPUs need (counts, CPUs,
memory, pools; DaemonSet pods aside), its absence when GPU pods hold the CPU or nothing is kept out, the measured
effect, the room CPU-only nodes have, the remedy when the pods tolerate the GPU nodes' taint, every report format, and
the reasons the figures and the plan give for a pending pod.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime

from compactor.app.plan_document import build_plan
from compactor.metrics.advice import advise
from compactor.metrics.cpu_pods import CpuPodsOnGpuNodes, cpu_pods_advice
from compactor.metrics.fragmentation import compute_figures
from compactor.model.types import Snapshot
from compactor.planner.request import PlanRequest
from compactor.render.advice import advice_to_dict
from compactor.render.html import render_report_html
from compactor.render.report import render_report
from compactor.settings.bundles import PlannerSettings
from tests.builders import A100_40, H100_80, cluster, node, pod

NOW = datetime(2026, 1, 1, tzinfo=UTC)
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def advice_of(snapshot: Snapshot) -> CpuPodsOnGpuNodes | None:
    return cpu_pods_advice(snapshot, compute_figures(snapshot))


def web_pods_block_a_training_pod() -> Snapshot:
    """``train`` needs 4 GPUs and 40 CPUs. gpu-1 and gpu-2 have 4 GPUs free each, but web pods hold 40 and 20 of their
    CPUs (free: 64 - 8 - 40 - 1 = 15, and 64 - 8 - 20 = 36); the DaemonSet pod belongs there. cpu-1 has room."""
    return cluster(
        node("gpu-1", gpus=8, cpu="64"),
        node("gpu-2", gpus=8, cpu="64", product=H100_80),
        node("cpu-1", cpu="64"),
        pod("a", on="gpu-1", gpus=4, cpu="8"),
        pod("b", on="gpu-2", gpus=4, cpu="8"),
        pod("web-0", on="gpu-1", cpu="20", memory="4Gi"),
        pod("web-1", on="gpu-1", cpu="20", memory="4Gi"),
        pod("web-2", on="gpu-2", cpu="20", memory="4Gi"),
        pod("agent", on="gpu-1", cpu="1", owner="DaemonSet/agent"),
        pod("train", gpus=4, cpu="40"),
    )


def test_cpu_only_pods_holding_what_a_blocked_gpu_pod_needs_are_named_with_their_cpus_and_pools() -> None:
    advice = advice_of(web_pods_block_a_training_pod())
    assert advice is not None
    assert (advice.pods, advice.gpu_nodes, advice.cpu_millicores, advice.memory_bytes) == (3, 2, 60_000, 12 << 30)
    assert [(p.pool, p.pods, p.gpu_nodes, p.cpu_millicores) for p in advice.pools] == [
        (A100_40, 2, 1, 40_000),
        (H100_80, 1, 1, 20_000),
    ]
    assert advice.unblocked_pods == 1
    cause, effect, room, remedy = advice.sentences
    assert cause.startswith("3 CPU-only pods (no GPU request; DaemonSet and static pods aside)")
    assert "on 2 GPU nodes they request 60 CPUs and 12Gi memory" in cause
    assert f"{A100_40}: 2 pods, 40 CPUs on 1 node; {H100_80}: 1 pod, 20 CPUs on 1 node" in cause
    assert "1 of the 1 blocked pending GPU pod would fit" in effect
    assert "blocked demand 4 -> 0 GPU-equivalents" in effect
    assert "pending GPU pods that fit 0 -> 1 of 1" in effect
    assert room == "The 1 CPU-only node has room for all of them now (first fit, largest first)"
    assert "taint the GPU nodes NoSchedule" in remedy and "nvidia.com/gpu=present:NoSchedule" in remedy
    assert "nodeSelector or node affinity" in remedy


def test_the_measured_effect_on_a_cluster_worked_by_hand() -> None:
    # gpu-1: 8 GPUs, 32 CPUs; a (2 GPUs, 8 CPUs) and web (20 CPUs) leave 6 GPUs and 4 CPUs free. The shapes in use,
    # gpu=2 cpu=8 and gpu=4 cpu=16, fit no copy in 4 CPUs: all 6 free GPUs are stranded (share 100%), and the pending
    # gpu=4 cpu=16 pod is blocked (16 CPUs free in total with cpu-1's). Without web: 24 CPUs free, three gpu=2 cpu=8
    # copies take the 6 GPUs (stranded 0) and the pending pod fits. cpu-1 has 16 CPUs: no room for web's 20.
    snapshot = cluster(
        node("gpu-1", gpus=8, cpu="32"),
        node("cpu-1", cpu="16"),
        pod("a", on="gpu-1", gpus=2, cpu="8"),
        pod("web", on="gpu-1", cpu="20"),
        pod("p", gpus=4, cpu="16"),
    )
    advice = advice_of(snapshot)
    assert advice is not None
    b, a = advice.before, advice.after
    assert (b.stranded_gpus, b.free_gpus, b.stranded_share) == (6, 6, 1.0)
    assert (a.stranded_gpus, a.free_gpus, a.stranded_share) == (0, 6, 0.0)
    assert (b.blocked_demand_gpus, a.blocked_demand_gpus, b.pending_fit, a.pending_fit) == (4, 0, 0, 1)
    assert (advice.recovered_gpus, advice.unblocked_pods) == (6, 1)
    assert [(p.stranded_gpus, p.stranded_without_gpus) for p in advice.pools] == [(6, 0)]
    assert (advice.cpu_only_nodes, advice.room_pods, advice.room_cpu_millicores) == (1, 0, 0)
    assert advice.sentences[1] == (
        "Measured with them off the GPU nodes (where they go does not change which GPU pods fit): 1 of the 1 blocked "
        "pending GPU pod would fit, blocked demand 4 -> 0 GPU-equivalents, stranded 6 -> 0 GPU-equivalents (stranded "
        "share 100.0% -> 0.0%), pending GPU pods that fit 0 -> 1 of 1"
    )
    assert advice.sentences[2] == (
        "The 1 CPU-only node has room for 0 of them now (0 of 20 CPUs; first fit, largest first): the rest need about "
        "20 CPUs and 1Gi memory more on CPU-only nodes"
    )


def test_no_advice_when_gpu_pods_hold_the_cpus() -> None:
    # a holds 56 of gpu-1's 64 CPUs; web's 2 CPUs would not let the pending pod (40 CPUs) or a copy of a's shape fit.
    snapshot = cluster(
        node("gpu-1", gpus=8, cpu="64"),
        node("cpu-1", cpu="64"),
        pod("a", on="gpu-1", gpus=4, cpu="56"),
        pod("web", on="gpu-1", cpu="2"),
        pod("train", gpus=4, cpu="40"),
    )
    figures = compute_figures(snapshot)
    assert len(figures.blocked_pending) == 1 and figures.cluster.stranded_gpus == 4  # kept out, but not by web
    assert cpu_pods_advice(snapshot, figures) is None
    assert "CPU-only" not in figures.blocked_pending[0].reason


def test_no_advice_when_nothing_is_kept_out() -> None:
    # web sits on a GPU node, but every GPU is used and nothing is pending.
    snapshot = cluster(node("gpu-1", gpus=8), node("cpu-1"), pod("a", on="gpu-1", gpus=8), pod("web", on="gpu-1"))
    assert advice_of(snapshot) is None
    # Nor when only DaemonSet pods are on the GPU nodes, even if they hold the CPUs.
    daemons = cluster(
        node("gpu-1", gpus=8, cpu="16"),
        node("cpu-1", cpu="64"),
        pod("agent", on="gpu-1", cpu="14", owner="DaemonSet/agent"),
        pod("train", gpus=4, cpu="8"),
    )
    assert advice_of(daemons) is None


def test_pods_that_tolerate_the_gpu_taint_are_told_to_drop_the_toleration() -> None:
    tolerate = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    snapshot = cluster(
        node("gpu-1", gpus=8, cpu="32", taints=[GPU_TAINT]),
        pod("a", on="gpu-1", gpus=2, cpu="8", tolerations=tolerate),
        pod("web", on="gpu-1", cpu="20", tolerations=tolerate),
    )
    advice = advice_of(snapshot)
    assert advice is not None
    assert (advice.tolerated_taint, advice.tolerating_pods) == ("nvidia.com/gpu=present:NoSchedule", 1)
    assert advice.sentences[3].startswith(
        "Remedy: 1 of them tolerates the GPU nodes' taint nvidia.com/gpu=present:NoSchedule: drop that toleration"
    )
    assert advice.sentences[2] == "No Ready, schedulable CPU-only node to take them: add a CPU-only node pool first"


def test_the_advice_does_not_depend_on_the_order_of_pods_or_nodes() -> None:
    snapshot = web_pods_block_a_training_pod()
    shuffled = dataclasses.replace(snapshot, pods=tuple(reversed(snapshot.pods)), nodes=tuple(reversed(snapshot.nodes)))
    assert advice_of(shuffled) == advice_of(snapshot)


# ---------------------------------------------------------------------------
# Every report format


def test_every_report_format_carries_the_cpu_pods_advice() -> None:
    snapshot = web_pods_block_a_training_pod()
    figures = compute_figures(snapshot)
    advice = advise(snapshot, figures)
    assert advice.cpu_pods_on_gpu_nodes is not None
    document = json.loads(render_report(figures, snapshot, "json", advice=advice))["advice"]
    assert document == advice_to_dict(advice)
    cpu_pods = document["cpuPodsOnGpuNodes"]
    assert (cpu_pods["pods"], cpu_pods["cpuMillicores"], cpu_pods["unblockedPods"]) == (3, 60_000, 1)
    assert cpu_pods["pools"][0]["pool"] == A100_40 and cpu_pods["after"]["blockedDemandGpuEquivalents"] == 0
    cause = advice.cpu_pods_on_gpu_nodes.sentences[0]
    text = render_report(figures, snapshot, "text", advice=advice, width=1000)
    markdown = render_report(figures, snapshot, "markdown", advice=advice)
    html = render_report_html(figures, snapshot, advice)
    for page in (text, markdown, html):
        assert "CPU-only pods on GPU nodes" in page and cause in page
        assert "Remedy: taint the GPU nodes NoSchedule" in page
    assert f"| {A100_40} | 1 | 2 | 40 | 8Gi | 0 |" in markdown
    assert "CPU-only pods on GPU nodes" not in render_report(figures, snapshot, "text", width=1000)
    assert json.loads(render_report(figures, snapshot, "json"))["figures"]["blockedDemandGpuEquivalents"] == 4


# ---------------------------------------------------------------------------
# Pending reasons


def test_a_blocked_pending_pods_reason_says_what_cpu_only_pods_hold_on_the_nodes_with_its_gpus() -> None:
    (blocked,) = compute_figures(web_pods_block_a_training_pod()).blocked_pending
    assert blocked.reason == (
        "the nodes with 4 nvidia.com/gpu free lack cpu; CPU-only pods hold 60 cpu on the eligible ones"
    )


def test_a_pod_the_plan_leaves_pending_names_the_cpus_cpu_only_pods_hold_where_its_gpus_are_free() -> None:
    # big needs 8 GPUs and 48 CPUs; gpu-2 has its 8 GPUs free but web holds 40 of the 64 CPUs. No moves allowed.
    snapshot = cluster(
        node("gpu-1", gpus=8, cpu="64"),
        node("gpu-2", gpus=8, cpu="64"),
        pod("a", on="gpu-1", gpus=1, cpu="2"),
        pod("web", on="gpu-2", cpu="40"),
        pod("big", gpus=8, cpu="48"),
    )
    plan = build_plan(
        PlanRequest.of(
            snapshot, PlannerSettings.of(min_replicas=1, time_limit_seconds=5, max_moves=0), source="test", now=NOW
        )
    )
    (note,) = plan.pending_not_placed
    assert note.reason.endswith("; on the 1 with its GPUs free, CPU-only pods hold 40 cpu")
    (blocked,) = plan.before["blockedPending"]
    assert blocked["reason"].endswith("; CPU-only pods hold 40 cpu on the eligible ones")

"""Bounded memory (issue 19): the executor never holds every pod or node of the cluster at once.

As dicts, the 50,000 pods of a large cluster are gigabytes (lean, still about 400 MiB). Without exact steering
(``steering.mechanism: off``: whole-free GPUs measured over the whole cluster) and with holds (every node that could
take each replacement), the executor reads every node and pod page by page (``ClusterClient.scan_nodes`` and
``scan_pods``) and keeps of each only what it counts; whole objects only of the nodes the plan changes, with their pods.
These runs go through a fake cluster that refuses a whole-cluster ``list_pods()`` or ``list_nodes()``, so a return to
holding the whole list fails here, not only in ``benchmarks/bench_memory.py`` (peak RSS at 5,000 nodes and 50,000 pods).
"""

from __future__ import annotations

from typing import Any

from compactor.actions.cluster.run_cut import measured_nodes
from compactor.actions.cluster.run_state import RunState
from compactor.actions.executor import Executor
from tests.builders import node, pod
from tests.fakecluster import FakeCluster
from tests.scenarios.executor import Obj, assert_clean, make_plan, run
from tests.scenarios.steering import (
    UNSTEERED,
    gpu_nodes_of,
    node_drained_for_a_pending_pod,
    spare_node_beside_a_freeable_one,
)


class NoWholeLists(FakeCluster):
    """A fake cluster whose whole-cluster lists fail: every node or every pod must be scanned, not held."""

    def list_nodes(self) -> list[Obj]:
        raise AssertionError(
            "list_nodes(): every node of the cluster held at once; scan_nodes keeps only what is needed"
        )

    def list_pods(
        self, *, node_name: str | None = None, namespace: str | None = None, label_selector: str | None = None
    ) -> list[Obj]:
        if node_name is None and namespace is None and not label_selector:
            raise AssertionError(
                "list_pods(): every pod of the cluster held at once; scan_pods keeps only what is needed"
            )
        return super().list_pods(node_name=node_name, namespace=namespace, label_selector=label_selector)


def whole_lists(c: FakeCluster) -> dict[str, int]:
    """Reads of every node / every pod (a scan is recorded as the list it sends)."""
    counts = {"nodes": 0, "pods": 0}
    for call in c.calls:
        if call.method == "list_nodes":
            counts["nodes"] += 1
        elif call.method == "list_pods" and not any(call.args.values()):
            counts["pods"] += 1
    return counts


def test_without_steering_whole_free_gpus_are_counted_from_scans_before_and_after_the_run() -> None:
    objects = spare_node_beside_a_freeable_one()
    c, plan = NoWholeLists(objects, scheduler="spread"), make_plan(objects)
    report = run(c, plan, UNSTEERED)
    assert gpu_nodes_of(c, "serve") == ["gpu-4", "gpu-4"]  # as test_steering's unsteered run: measured, not assumed
    assert report.status == "partial"
    assert report.reason == "cluster gained 0 whole-free GPU(s) (plan: 8); 0/0 pending pod(s) placed as planned"
    assert (
        report.outcome is not None
        and report.outcome.taken_nodes == ["gpu-4"]
        and report.outcome.freed_nodes == ["gpu-3"]
    )
    assert whole_lists(c) == {"nodes": 2, "pods": 2}  # the run's start and its outcome
    assert_clean(c)


def test_without_steering_a_pending_pod_placed_as_planned_is_counted_from_the_scan() -> None:
    objects = node_drained_for_a_pending_pod()
    c, plan = NoWholeLists(objects), make_plan(objects)
    assert [p.pod for p in plan.placed_pending] == ["default/big"]
    report = run(c, plan, UNSTEERED)
    assert report.outcome is not None and report.outcome.pending_planned == 1
    assert c.pods[("default", "big")]["spec"].get("nodeName") == plan.placed_pending[0].to_node == "gpu-3"
    assert report.status == "succeeded" and report.outcome.pending_placed == 1
    assert_clean(c)


def test_holds_are_chosen_from_scans() -> None:
    objects = spare_node_beside_a_freeable_one()
    c, plan = NoWholeLists(objects, scheduler="spread"), make_plan(objects)
    report = run(c, plan)
    assert report.status == "succeeded", report.reason
    assert gpu_nodes_of(c, "serve") == ["gpu-1", "gpu-1"]
    assert report.outcome is not None and report.outcome.holds == 4  # gpu-2 and gpu-4, for each of 2 moves
    # one scan of each before the run changes anything (can the first move start?), one per move, none for the outcome
    assert whole_lists(c) == {"nodes": 3, "pods": 3}
    assert_clean(c)


def test_a_run_without_steering_keeps_only_the_plans_nodes_and_their_pods_as_read() -> None:
    objects: list[dict[str, Any]] = [
        *spare_node_beside_a_freeable_one(),
        node("cpu-1", gpus=0),
        *(pod(f"web-{i}", on="cpu-1", owner="ReplicaSet/web") for i in range(5)),
    ]
    c, plan = NoWholeLists(objects), make_plan(objects)
    executor = Executor(c, UNSTEERED, c.clock)
    scoped = executor._scoped(executor._run(plan, RunState(plan_id=plan.metadata.id)))
    # the node it frees (gpu-1 runs GPU pods before)
    assert sorted(scoped.log.first_reads) == measured_nodes(plan) == ["gpu-3"]
    for name, (read, pods) in scoped.log.first_reads.items():
        assert read["metadata"]["name"] == name
        assert sorted(p["metadata"]["name"] for p in pods) == sorted(
            p["metadata"]["name"] for p in c.list_pods(node_name=name)
        )
    assert scoped.state.free_before == {"gpu-4": 8}

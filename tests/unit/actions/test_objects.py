"""The typed views of live objects (``compactor/actions/port/objects.py``): what they read of a pod or node as the API sends
it, the API's defaults for what is unset, and the same answers as the planner's model for the facts both ask."""

from __future__ import annotations

import pytest

from compactor.actions.port.objects import NodeView, ObjectView, PodView
from compactor.model.parse import parse_pod
from tests.builders import node, pod


def test_a_pod_view_reads_where_it_runs_and_who_owns_it() -> None:
    view = PodView(pod("serve-1", on="gpu-1", gpus=2, namespace="ml", owner="ReplicaSet/serve", annotations={"a": "b"}))
    assert (view.key, view.node_name, view.phase, view.ready) == ("ml/serve-1", "gpu-1", "Running", True)
    assert view.controller is not None and (view.controller["kind"], view.controller["name"]) == ("ReplicaSet", "serve")
    assert view.labels == {"app": "serve"} and view.annotations == {"a": "b"} and view.uid.startswith("pod-")


def test_what_the_api_leaves_unset_reads_as_its_default() -> None:
    view = PodView({"metadata": None, "spec": {"tolerations": None}, "status": None})
    assert (view.name, view.namespace, view.uid, view.node_name, view.phase) == ("", "default", "", "", "")
    assert view.labels == {} and view.annotations == {} and view.tolerations == [] and view.controller is None
    assert view.resource_version is None and not view.ready and not view.terminating
    assert view.grace_seconds == 30.0  # terminationGracePeriodSeconds' default


@pytest.mark.parametrize(("grace", "seconds"), [(0, 0.0), (5, 5.0), (-1, 30.0), (True, 30.0), ("10", 30.0)])
def test_the_grace_period_is_the_pods_own_when_it_is_a_valid_number(grace: object, seconds: float) -> None:
    assert PodView({"spec": {"terminationGracePeriodSeconds": grace}}).grace_seconds == seconds


def test_the_controller_is_the_owner_marked_controller_not_the_first() -> None:
    owners = [
        {"kind": "ConfigMap", "name": "x", "uid": "1"},
        {"kind": "ReplicaSet", "name": "rs", "uid": "2", "controller": True},
    ]
    assert ObjectView({"metadata": {"ownerReferences": owners}}).controller == owners[1]


@pytest.mark.parametrize(
    "raw",
    [
        pod("running", on="gpu-1"),
        pod("pending"),
        pod("done", on="gpu-1", phase="Succeeded"),
        pod("failed", on="gpu-1", phase="Failed"),
        pod("deleting", on="gpu-1", deleting=True),
        pod("not-ready", on="gpu-1", phase="Pending"),
    ],
    ids=lambda raw: raw["metadata"]["name"],
)
def test_the_view_and_the_planners_model_agree_on_what_a_pod_is_doing(raw: dict[str, object]) -> None:
    model, view = parse_pod(raw, source="test"), PodView(raw)
    assert view.holds_its_node == model.is_bound
    assert view.ready == model.ready
    assert view.terminating == (bool(model.deletion_timestamp) or model.phase in ("Succeeded", "Failed"))


def test_a_node_view_reads_taints_and_the_operators_cordon_bit() -> None:
    raw = node("gpu-1", gpus=8)
    raw["spec"] = {"unschedulable": True, "taints": [{"key": "k", "effect": "NoSchedule"}]}
    view = NodeView(raw)
    assert view.unschedulable and view.taints == [{"key": "k", "effect": "NoSchedule"}] and view.name == "gpu-1"
    assert not NodeView({"spec": None}).unschedulable and NodeView({}).taints == []


def test_a_workloads_replicas_are_zero_when_unset() -> None:
    assert ObjectView({"spec": {"replicas": 3}}).replicas == 3 and ObjectView({"spec": {}}).replicas == 0

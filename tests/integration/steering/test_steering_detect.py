"""Steering detection (``compactor/actions/steering/detect.py``): which mechanism a run steers with, and why. ``auto``
falls back to holds, saying so, when the policy, its binding or its parameter ConfigMap is missing, of another
version or bound elsewhere; ``steering: policy`` insists, and the run changes nothing without it; replacements of two
workloads arriving unpinned conclude the policy not in effect (``steering/evidence.py``) for a day or until an admin
removes the annotation; a pod the policy never pins is not planned, and is no evidence against it.

Against the fake cluster (``tests/fakecluster/``) with the repository's own policy, binding and parameters installed
(``steering_policy``, ``tests/builders.py``). What the policy steerer does once chosen is ``test_steerer_policy.py``.
The scenarios and helpers live in ``tests/scenarios/executor.py`` and ``tests/scenarios/steering.py``.
"""

from __future__ import annotations

import pytest

from compactor.actions.port import annotations as ann
from compactor.actions.steering.detect import choose, steerability_of
from compactor.actions.steering.evidence import EVIDENCE_LASTS
from compactor.actions.steering.pin import NOT_IN_EFFECT
from compactor.errors import CompactorError
from compactor.planner.rules.movability import Unmovable
from tests.builders import node, pod, steering_policy
from tests.builders import pdb as budget
from tests.fakecluster import FakeCluster
from tests.scenarios.executor import SETTINGS, Obj, agents, assert_clean, hand_plan, make_plan, run
from tests.scenarios.steering import (
    PARAMETERS,
    POLICY,
    assert_no_steering_left,
    cordoned_ever,
    gpu_nodes_of,
    spare_node_beside_a_freeable_one,
    two_owners_onto_two_targets,
    with_policy,
)


def test_auto_falls_back_to_holds_when_the_binding_is_missing_and_says_so() -> None:
    objects = spare_node_beside_a_freeable_one()
    c, plan = FakeCluster([*objects, *steering_policy(binding=False)], scheduler="spread"), make_plan(objects)
    report = run(c, plan)
    assert report.status == "succeeded", report.reason
    assert report.steering == "holds"
    assert report.steering_why.startswith(
        "auto: MutatingAdmissionPolicyBinding gpu-compactor-steering is not installed"
    )
    assert gpu_nodes_of(c, "serve") == ["gpu-1", "gpu-1"] and cordoned_ever(c) > {"gpu-3"}  # held instead
    assert_clean(c)


@pytest.mark.parametrize(
    ("objects", "problem"),
    [
        ([], "MutatingAdmissionPolicy gpu-compactor-steering is not installed"),
        (steering_policy(binding=False), "MutatingAdmissionPolicyBinding gpu-compactor-steering is not installed"),
        (
            steering_policy(parameters=False),
            "the parameter configmap gpu-compactor/gpu-compactor-steering does not exist",
        ),
    ],
)
def test_steering_policy_insists_and_the_run_changes_nothing_without_it(objects: list[Obj], problem: str) -> None:
    base = spare_node_beside_a_freeable_one()
    c = FakeCluster([*base, *objects])
    with pytest.raises(CompactorError, match=problem):
        choose(c, POLICY)
    with pytest.raises(CompactorError, match=problem):
        run(c, make_plan(base), POLICY)
    assert c.history == []


def test_a_policy_of_another_version_or_binding_elsewhere_is_not_used() -> None:
    policy, binding, parameters = steering_policy()
    old = {**policy, "metadata": {**policy["metadata"], "annotations": {"compactor.io/steering-policy-version": "0"}}}
    assert "is version 0" in choose(FakeCluster([old, binding, parameters]), SETTINGS).why
    elsewhere = {
        **binding,
        "spec": {**binding["spec"], "paramRef": {**binding["spec"]["paramRef"], "namespace": "other"}},
    }
    why = choose(FakeCluster([policy, elsewhere, parameters]), SETTINGS).why
    assert "does not bind policy gpu-compactor-steering to configmap gpu-compactor/gpu-compactor-steering" in why
    assert choose(FakeCluster([policy, binding, parameters]), SETTINGS.amended(mechanism="off")).mechanism == "off"


def test_the_policy_is_concluded_not_in_effect_from_two_workloads_for_a_day_or_until_an_admin_says() -> None:
    c, plan = with_policy(two_owners_onto_two_targets())
    c._admission = lambda pod, creator: pod  # type: ignore[method-assign]  # installed, found, but never applied
    assert run(c, plan).status == "failed"
    c.settle()
    (left,) = [p for p in ("serve-a", "train-a") if f"default/{p}" not in c.evicted]
    app = left.split("-")[0]
    second = hand_plan([(f"default/{left}", "gpu-3", "gpu-2", f"ReplicaSet/{app}")], freed=["gpu-3"], c=c, plan_id="p2")
    report = run(c, second)
    assert report.status == "failed" and "is not in effect" in report.reason
    concluded = choose(c, SETTINGS, now=c.clock.now())
    assert concluded.mechanism == "holds" and concluded.not_in_effect
    assert "replacements of 2 workload(s) arrived unpinned" in concluded.why and NOT_IN_EFFECT in concluded.why
    with pytest.raises(CompactorError, match="runs found the policy not in effect"):
        choose(c, POLICY, now=c.clock.now())
    idle = run(c, hand_plan([], freed=[], c=c, plan_id="p3"))  # what a run reports, and the exporter exports
    assert idle.steering == "holds" and idle.to_dict()["steering"]["policyNotInEffect"] is True
    # the evidence expires: a day after the last piece the policy is tried again
    assert choose(c, SETTINGS, now=c.clock.now() + EVIDENCE_LASTS).mechanism == "policy"
    # an admin who fixed the cause removes the annotation
    del c.config_maps[PARAMETERS]["metadata"]["annotations"][NOT_IN_EFFECT]
    assert choose(c, SETTINGS, now=c.clock.now()).mechanism == "policy"


def test_a_pod_the_policy_never_pins_is_not_planned_and_its_replacement_is_no_evidence() -> None:
    """Issue [18], finding 3: a Job's pod annotated evict=true switched the policy off for every tenant."""
    objects = [
        node("gpu-1", gpus=8),
        node("gpu-2", gpus=8),
        pod("pin-1", on="gpu-1", gpus=6, owner=None),
        pod(
            "batch-a",
            on="gpu-2",
            gpus=2,
            owner="Job/batch",
            labels={"app": "batch"},
            annotations={"compactor.io/evict": "true"},
        ),
        *agents("gpu-1", "gpu-2"),
        budget("batch", match={"app": "batch"}, min_available=0),  # a Job has no scale: maxUnavailable cannot sync
    ]
    c = FakeCluster([*objects, *steering_policy()], scheduler="spread")
    choice = choose(c, SETTINGS, now=c.clock.now())
    under_policy = make_plan(objects, steering=steerability_of(choice, ann.IDENTITY))
    assert under_policy.moves == [] and Unmovable.NOT_PINNED_OWNER.value in under_policy.explanations["unmovablePods"]
    # a hand-written plan moving it anyway is refused at the eviction, under the policy, and nothing is recorded
    # against the policy (it was never meant to pin that pod)
    forced = hand_plan([("default/batch-a", "gpu-2", "gpu-1", "Job/batch")], freed=["gpu-2"], c=c)
    report = run(c, forced)
    assert report.status == "partial" and c.evicted == []
    assert report.skipped_moves == ["default/batch-a"] and Unmovable.NOT_PINNED_OWNER.value in report.reason
    assert NOT_IN_EFFECT not in (c.config_maps[PARAMETERS]["metadata"].get("annotations") or {})
    assert choose(c, SETTINGS, now=c.clock.now()).why == choice.why
    assert_no_steering_left(c)

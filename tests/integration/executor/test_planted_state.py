"""A planted state record is never acted on (issue 18, item 2), on the fake cluster.

The state ConfigMap is deleted after every run, so its name is free: whoever may create ConfigMaps in the compactor's
namespace could write one holding a make-before-break surge of ``kube-system/coredns`` in phase ``rollingBack``.
Recovery's surge undo then scaled that Deployment down by one per run, no PDB asked (reproduced: 2 -> 1 -> 0). Now a
record that names what its plan does not, or pods outside the planner's scope, is refused, dropped and said; the
nodes are released by their own marks, and the same record in scope is still rolled back as before.
"""

from __future__ import annotations

import json
from typing import Any

from compactor.actions.cluster.run_state import InFlight, Phase, RunState, Surge, encode_plan
from compactor.actions.port import annotations as ann
from compactor.actions.recovery import recover
from compactor.actions.services.surge import SURGE_NOTE, SURGED_BY
from compactor.planner.plan import CompactionPlan, Metadata, Move, SolverReport
from tests.builders import node, pod
from tests.fakecluster import FakeCluster
from tests.scenarios.executor import PLANNER, SETTINGS

Obj = dict[str, Any]


def _deployment(namespace: str, replicas: int) -> list[Obj]:
    """Deployment ``dns`` in ``namespace`` with its ReplicaSet and ``replicas`` pods on ``n1``."""
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "dns", "namespace": namespace, "uid": f"deploy-dns-{namespace}"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "dns"}}},
    }
    replica_set = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": "dns-5d",
            "namespace": namespace,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": "dns",
                    "uid": deployment["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "dns"}}},
    }
    pods = [
        pod(f"dns-{i}", on="n1", namespace=namespace, owner="ReplicaSet/dns-5d", labels={"app": "dns"})
        for i in range(replicas)
    ]
    return [deployment, replica_set, *pods]


def _surge_record(namespace: str, replicas: int) -> dict[str, str]:
    """A record of a surge of ``namespace/dns-0`` being rolled back: recovery's undo scales Deployment dns from
    ``replicas + 1`` to ``replicas`` (so a planted one names today's count less one)."""
    move = Move(pod=f"{namespace}/dns-0", from_node="n1", to_node="n2", owner="ReplicaSet/dns-5d")
    plan = CompactionPlan(
        metadata=Metadata(id="plan-planted00000", created_at="2026-12-04T00:00:00Z", source="nobody"),
        moves=[move],
        solver=SolverReport(status="OPTIMAL", wall_seconds=0.0),
    )
    flight = InFlight(owner="rs-uid", surge=Surge(deployment="dns", replicas=replicas, pod_uid="whatever"))
    state = RunState(plan_id=plan.metadata.id, phase=Phase.ROLLING_BACK, inflight={move.pod: flight})
    return state.to_data(encode_plan(plan))


def _cluster(namespace: str) -> FakeCluster:
    c = FakeCluster([node("n1", cpu="64"), node("n2", cpu="64"), *_deployment(namespace, replicas=2)])
    c.state[ann.STATE_CONFIGMAP] = _surge_record(namespace, replicas=1)
    return c


def _scales(c: FakeCluster) -> list[tuple[int, int]]:
    return [(call.args["expect"], call.args["to"]) for call in c.history if call.method == "scale_deployment"]


def test_a_planted_surge_of_kube_system_is_refused_and_nothing_is_scaled() -> None:
    c = _cluster("kube-system")
    recovered = recover(c, SETTINGS, c.clock, resume=False, rules=PLANNER)
    assert _scales(c) == []  # before: (2, 1), and the next run (1, 0)
    assert c.deployments[("kube-system", "dns")]["spec"]["replicas"] == 2
    assert recovered.resumed is None and recovered.discarded.startswith(
        "refused: pod kube-system/dns-0 is in a namespace"
    )
    assert ann.STATE_CONFIGMAP not in c.state  # dropped: the name is free again, and nothing of it was acted on
    (event,) = [e for e in c.events if e["reason"] == "CompactorStateRefused"]
    assert event["type"] == "Warning" and "kube-system/dns-0" in event["message"]


def test_a_record_naming_pods_its_plan_does_not_move_is_refused() -> None:
    c = _cluster("team")
    data = c.state[ann.STATE_CONFIGMAP]
    data["done"] = '["team/other-pod"]'
    recovered = recover(c, SETTINGS, c.clock, resume=False, rules=PLANNER)
    assert recovered.discarded == "refused: pod team/other-pod is no move of its plan"
    assert _scales(c) == []


def _as_surged(c: FakeCluster, namespace: str) -> None:
    """What a real surge leaves besides its record: the old pod's uid in the record, the surge's mark on the pod."""
    old = c.pod(namespace, "dns-0")
    record = c.state[ann.STATE_CONFIGMAP]
    record["inflight"] = record["inflight"].replace('"whatever"', json.dumps(old["metadata"]["uid"]))
    note = {"plan": "plan-planted00000", "deployment": "dns", "replicas": 1, "deletionCost": None}
    old["metadata"].setdefault("annotations", {})[SURGE_NOTE] = json.dumps(note, separators=(",", ":"))


def test_the_same_record_in_the_planners_scope_with_its_evidence_is_rolled_back_as_before() -> None:
    """A legitimate record: the old pod carries the surge's mark and the uid recorded, and the Deployment owns its
    ReplicaSet. The undo is tested against the replicas it recorded (today's count less one), so it scales back."""
    c = _cluster("team")
    _as_surged(c, "team")
    recovered = recover(c, SETTINGS, c.clock, resume=False, rules=PLANNER)
    assert recovered.resumed is not None and recovered.discarded == ""
    assert _scales(c) == [(2, 1)]


def test_a_record_in_scope_without_the_pods_evidence_scales_nothing() -> None:
    """Issue 43, item 2: a record in the planner's scope whose old pod carries no mark (planted, without the state guard)
    used to scale the Deployment down by one per run, to 1. Now the pod must show the surge; without it, nothing is
    scaled (the Deployment would at worst stay one replica over) and the run says so."""
    c = _cluster("team")
    recovered = recover(c, SETTINGS, c.clock, resume=False, rules=PLANNER)
    assert _scales(c) == [] and c.deployments[("team", "dns")]["spec"]["replicas"] == 2
    assert recovered.resumed is not None


def test_a_record_naming_a_pod_that_does_not_exist_scales_nothing() -> None:
    """The old pod gone: no evidence is left of what the surge did, so nothing is scaled down (it used to be)."""
    c = _cluster("team")
    _as_surged(c, "team")
    del c.pods[("team", "dns-0")]
    recover(c, SETTINGS, c.clock, resume=False, rules=PLANNER)
    assert _scales(c) == [] and c.deployments[("team", "dns")]["spec"]["replicas"] == 2


def test_a_forged_surge_mark_on_a_tenants_own_pod_scales_nothing() -> None:
    """Issue 43, item 3: a pod labelled with this installation's surge mark and an annotation naming Deployment ``dns``
    made every recovery scale that Deployment down by one, to 1: the sweep trusted the annotation. The pod's ReplicaSet
    must be the Deployment's, in the planner's scope; a tenant's bare pod is neither."""
    c = FakeCluster([node("n1", cpu="64"), node("n2", cpu="64"), *_deployment("team", replicas=3)])
    forged = pod("forger", on="n1", namespace="team", owner=None, labels={SURGED_BY: SETTINGS.executor.identity})
    note = {"plan": "plan-forged", "deployment": "dns", "replicas": 2, "deletionCost": None}
    forged["metadata"]["annotations"] = {SURGE_NOTE: json.dumps(note)}
    c.add_pod(forged)
    for _ in range(3):  # every recovery used to take one more replica
        recover(c, SETTINGS, c.clock, resume=False, rules=PLANNER)
    assert _scales(c) == [] and c.deployments[("team", "dns")]["spec"]["replicas"] == 3
    assert SURGE_NOTE in c.pod("team", "forger")["metadata"]["annotations"]  # left as found: not ours to judge

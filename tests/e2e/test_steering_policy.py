"""The steering admission policy on a real kube-apiserver: every shape of existing affinity, and a crash in between.

Four fake GPU nodes; one workload per shape of ``spec.affinity`` a pod may already carry (none;
affinity without nodeAffinity; nodeAffinity with only preferred terms; required terms, two of
them, with matchExpressions; required terms with matchFields; a StatefulSet pod), each of one
pod placed by the real scheduler, and a bystander workload that no plan moves. A plan written by
hand moves each shape's pod to a node the test picks, and ``compactor apply --plan`` carries it
out with ``steering.mechanism: policy``. Each replacement must be bound on its node and carry
exactly the affinity ``compactor.actions.steering.pin.pinned`` computes from the pod it replaces
(the constraint ANDed into every required term, so the Python mirror the fakes use is the real
thing); the bystander's pod, recreated meanwhile, must carry nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from compactor.actions.port.client import EvictionOutcome
from compactor.actions.steering.pin import STEERED_TO, pinned
from compactor.actions.steering.scope import scope_of
from compactor.kube.cluster_client import KubeClusterClient
from compactor.model.parse import parse_pod
from compactor.planner.rules.movability import NamespaceScope, Steerability, Unmovable
from tests.e2e.conftest import _fresh_namespace
from tests.e2e.fragmentation import FLEET_LABEL, H100_LABELS
from tests.e2e.helpers import (
    NEEDS_CLUSTER,
    PAUSE_IMAGE,
    STATE_NAMESPACE,
    Kube,
    Obj,
    api_request,
    compactor_marks,
    get_or_none,
    is_running_ready,
    kubeconfig_args,
    name_of,
    raw,
    run_compactor,
    start_compactor,
    wait_for,
    with_retries,
)
from tests.e2e.kubelets import NodeSet, fake_nodes
from tests.e2e.steering import ADMISSION_PATHS

pytestmark = [NEEDS_CLUSTER, pytest.mark.e2e, pytest.mark.timeout(600)]

NODES = 4
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
SHAPES: dict[str, Obj | None] = {
    "none": None,
    "pod-affinity-only": {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"x": "y"}},
                    },
                }
            ]
        }
    },
    "preferred-only": {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "preference": {
                        "matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]
                    },
                }
            ]
        }
    },
    "required-expressions": {
        "nodeAffinity": {
            REQUIRED: {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]},
                    {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]},
                ]
            }
        }
    },
    "required-fields": {
        "nodeAffinity": {
            REQUIRED: {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["no-such-node"]}]}
                ]
            }
        }
    },
}
STATEFUL = "statefulset"


TERMINATION_DELAY = 20.0  # slow_fleet: seconds a deleted pod keeps its GPUs, as a long grace period would


@contextmanager
def _fleet(kube: Kube, tmp_path: Path, *, termination_delay: float = 0.0) -> Iterator[tuple[str, list[str]]]:
    run_id = f"e2e-{secrets.token_hex(3)}"
    nodes = NodeSet(prefix=f"{run_id}-gpu-", count=NODES, gpus=8, labels={**H100_LABELS, FLEET_LABEL: run_id})
    with fake_nodes(kube.api_client, nodes, tmp_path / "fake-nodes.log", termination_delay=termination_delay) as names:
        yield run_id, names


@pytest.fixture
def small_fleet(kube: Kube, tmp_path: Path) -> Iterator[tuple[str, list[str]]]:
    with _fleet(kube, tmp_path) as fleet:
        yield fleet


@pytest.fixture
def slow_fleet(kube: Kube, tmp_path: Path) -> Iterator[tuple[str, list[str]]]:
    with _fleet(kube, tmp_path, termination_delay=TERMINATION_DELAY) as fleet:
        yield fleet


@pytest.fixture
def shapes_namespace(kube: Kube, small_fleet: tuple[str, list[str]]) -> Iterator[str]:
    with _fresh_namespace(kube, f"compactor-{small_fleet[0]}", force_pods=True) as name:
        yield name


@pytest.fixture
def slow_namespace(kube: Kube, slow_fleet: tuple[str, list[str]]) -> Iterator[str]:
    with _fresh_namespace(kube, f"compactor-{slow_fleet[0]}", force_pods=True) as name:
        yield name


def pod_spec(selector: dict[str, str], affinity: Obj | None) -> Obj:
    spec: Obj = {
        "terminationGracePeriodSeconds": 1,
        "nodeSelector": selector,
        "containers": [
            {
                "name": "pause",
                "image": PAUSE_IMAGE,
                "resources": {"requests": {"cpu": "5m", "nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}},
            }
        ],
    }
    if affinity is not None:
        spec["affinity"] = affinity
    return spec


def create_workloads(kube: Kube, namespace: str, selector: dict[str, str]) -> None:
    for name, affinity in [*SHAPES.items(), ("bystander", None)]:
        body = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec(selector, affinity)},
            },
        }
        with_retries(
            lambda body=body: kube.apps.create_namespaced_deployment(namespace, body),
            what=f"creating deployment {name}",
        )
    body = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": STATEFUL},
        "spec": {
            "replicas": 1,
            "serviceName": STATEFUL,
            "selector": {"matchLabels": {"app": STATEFUL}},
            "template": {"metadata": {"labels": {"app": STATEFUL}}, "spec": pod_spec(selector, None)},
        },
    }
    with_retries(lambda: kube.apps.create_namespaced_stateful_set(namespace, body), what="creating the statefulset")


def pods_by_app(kube: Kube, namespace: str) -> dict[str, list[Obj]]:
    found: dict[str, list[Obj]] = {}
    for pod in raw(kube.core.list_namespaced_pod, namespace).get("items") or []:
        found.setdefault((pod["metadata"].get("labels") or {}).get("app", ""), []).append(pod)
    return found


def running(kube: Kube, namespace: str, apps: list[str]) -> Any:
    def check() -> tuple[bool, str]:
        pods = pods_by_app(kube, namespace)
        live = {
            app: [p for p in pods.get(app, []) if is_running_ready(p) and not p["metadata"].get("deletionTimestamp")]
            for app in apps
        }
        return all(len(v) == 1 for v in live.values()) and all(len(pods.get(a, [])) == 1 for a in apps), str(
            {a: [(name_of(p), (p.get("spec") or {}).get("nodeName")) for p in pods.get(a, [])] for a in apps}
        )

    return check


def hand_plan(moves: list[tuple[Obj, str]], gpus: dict[str, int]) -> Obj:
    """Each (pod, target) as a move; freedNodes/filledNodes/freedGpus as the planner would count them."""
    sources = {p["spec"]["nodeName"] for p, _ in moves}
    after = dict(gpus)
    for p, target in moves:
        after[p["spec"]["nodeName"]] -= 1
        after[target] = after.get(target, 0) + 1
    freed = sorted(n for n in sources if after.get(n, 0) == 0)
    filled = sorted(n for n, count in after.items() if count and not gpus.get(n))
    owner = {
        p["metadata"]["uid"]: next(
            f"{r['kind']}/{r['name']}" for r in p["metadata"]["ownerReferences"] if r.get("controller")
        )
        for p, _ in moves
    }
    return {
        "apiVersion": "compactor/v1alpha1",
        "kind": "CompactionPlan",
        "metadata": {
            "id": f"plan-shapes-{secrets.token_hex(3)}",
            "createdAt": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "source": "test",
        },
        "moves": [
            {
                "pod": f"{p['metadata']['namespace']}/{name_of(p)}",
                "from": p["spec"]["nodeName"],
                "to": target,
                "reason": "shape",
                "uid": p["metadata"]["uid"],
                "owner": owner[p["metadata"]["uid"]],
                "gpu": True,
            }
            for p, target in moves
        ],
        "freedNodes": freed,
        "filledNodes": filled,
        "freedGpus": 8 * (len(freed) - len(filled)),
        "solver": {"status": "OPTIMAL", "wallSeconds": 0.0},
    }


def config_file(tmp_path: Path, namespace: str) -> Path:
    config = tmp_path / "compactor.yaml"
    # one-replica workloads without a PDB on purpose: min_replicas 1 lets them move (the guard has tests of its own)
    config.write_text(
        yaml.safe_dump(
            {
                "movable": {"namespaces": [namespace], "min_replicas": 1},
                "steering": {"mechanism": "policy"},
                "executor": {
                    "poll_seconds": 0.5,
                    "replacement_timeout_seconds": 60,
                    "backoff_seconds": 1,
                    "backoff_max_seconds": 5,
                },
            }
        ),
        encoding="utf-8",
    )
    return config


def test_every_shape_of_existing_affinity_gets_the_constraint_anded_and_lands_on_its_node(
    kube: Kube, small_fleet: tuple[str, list[str]], shapes_namespace: str, steering_policy: str, tmp_path: Path
) -> None:
    run_id, names = small_fleet
    selector = {FLEET_LABEL: run_id}
    create_workloads(kube, shapes_namespace, selector)
    movers = [*SHAPES, STATEFUL]
    wait_for(running(kube, shapes_namespace, [*movers, "bystander"]), timeout=120, what="every workload Running")
    before = pods_by_app(kube, shapes_namespace)
    gpus = {n: 0 for n in names}
    for pods in before.values():
        gpus[pods[0]["spec"]["nodeName"]] += 1
    moves = [
        (before[app][0], next(n for n in [*names[i % NODES :], *names] if n != before[app][0]["spec"]["nodeName"]))
        for i, app in enumerate(movers)
    ]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(hand_plan(moves, gpus)), encoding="utf-8")

    ran = run_compactor(
        "apply",
        "--plan",
        str(plan),
        *kubeconfig_args(),
        "--config",
        str(config_file(tmp_path, shapes_namespace)),
        "--output",
        "json",
        timeout=300,
    )
    report = ran.json()
    assert report["status"] == "succeeded" and report["movesDone"] == len(movers), ran.describe()
    assert report["steering"]["mechanism"] == "policy", ran.describe()

    wait_for(running(kube, shapes_namespace, [*movers, "bystander"]), timeout=60, what="every workload whole again")
    after = pods_by_app(kube, shapes_namespace)
    wrong = []
    for old, target in moves:
        app = old["metadata"]["labels"]["app"]
        new = after[app][0]
        expected = pinned(old, target)["spec"]["affinity"]
        if (
            new["spec"].get("nodeName") != target
            or new["spec"].get("affinity") != expected
            or new["metadata"].get("annotations", {}).get(STEERED_TO) != target
        ):
            wrong.append(
                f"{app}: on {new['spec'].get('nodeName')} (planned {target}), affinity {new['spec'].get('affinity')}, "
                f"expected {expected}, annotations {new['metadata'].get('annotations')}"
            )
    assert not wrong, "\n".join(wrong)

    bystander = after["bystander"][0]
    kube.core.delete_namespaced_pod(name_of(bystander), shapes_namespace)  # its owner recreates it: no entry, so no pin
    wait_for(
        lambda: (
            name_of(pods_by_app(kube, shapes_namespace)["bystander"][0]) != name_of(bystander),
            "not yet recreated",
        ),
        timeout=60,
        what="the bystander's new pod",
    )
    fresh = pods_by_app(kube, shapes_namespace)["bystander"]
    assert all(
        "affinity" not in p["spec"] and STEERED_TO not in (p["metadata"].get("annotations") or {}) for p in fresh
    ), fresh
    assert not (raw(kube.core.read_namespaced_config_map, "gpu-compactor-steering", STATE_NAMESPACE).get("data"))
    assert not [
        n
        for n in raw(kube.core.list_node).get("items") or []
        if compactor_marks(n) or (n.get("spec") or {}).get("unschedulable")
    ]


def test_a_crash_between_writing_an_entry_and_removing_it_is_healed_by_the_next_runs_recovery(
    kube: Kube, slow_fleet: tuple[str, list[str]], slow_namespace: str, steering_policy: str, tmp_path: Path
) -> None:
    """The replacement waits (pinned, Pending) for its target's GPUs, held by a pod that takes 20 s to terminate (counted
    as gone by the room check, as the scheduler will once it is deleted): the run is killed in that window, every time."""
    run_id, names = slow_fleet
    shapes_namespace = slow_namespace
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "slow"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "slow"}},
            "template": {"metadata": {"labels": {"app": "slow"}}, "spec": pod_spec({FLEET_LABEL: run_id}, None)},
        },
    }
    kube.apps.create_namespaced_deployment(shapes_namespace, body)
    wait_for(running(kube, shapes_namespace, ["slow"]), timeout=120, what="the workload Running")
    pod = pods_by_app(kube, shapes_namespace)["slow"][0]
    target = next(n for n in names if n != pod["spec"]["nodeName"])
    blocker = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "blocker", "labels": {"app": "blocker"}},
        "spec": {**pod_spec({"kubernetes.io/hostname": target}, None), "terminationGracePeriodSeconds": 30},
    }
    blocker["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "5m", "nvidia.com/gpu": "8"},
        "limits": {"nvidia.com/gpu": "8"},
    }
    kube.core.create_namespaced_pod(shapes_namespace, blocker)
    wait_for(running(kube, shapes_namespace, ["blocker"]), timeout=60, what="the blocker Running on the target")
    kube.core.delete_namespaced_pod("blocker", shapes_namespace)  # terminating for 20 s, its GPUs held meanwhile
    gpus = {n: int(n == pod["spec"]["nodeName"]) for n in names}
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(hand_plan([(pod, target)], gpus)), encoding="utf-8")
    config = config_file(tmp_path, shapes_namespace)
    command = ("apply", "--plan", str(plan), *kubeconfig_args(), "--config", str(config), "--output", "json")

    first = start_compactor(*command)  # pins, evicts; the pinned replacement waits for the blocker to go

    def entries() -> dict[str, str]:
        return raw(kube.core.read_namespaced_config_map, "gpu-compactor-steering", STATE_NAMESPACE).get("data") or {}

    wait_for(lambda: (bool(entries()), "no entry yet"), timeout=60, interval=0.05, what="the steering entry")
    first.send_signal(signal.SIGKILL)  # dies between writing the entry and removing it, as an OOM kill would
    first.communicate(timeout=30)
    assert entries(), "the killed run's entry should still be there for this test to test anything"

    deadline = time.monotonic() + 120
    while True:  # the killed run's Lease is taken over once it stayed unchanged for a lease duration
        second = run_compactor(*command, timeout=300)
        if (
            second.returncode != 2
            or "another gpu-compactor is acting" not in second.stderr
            or time.monotonic() > deadline
        ):
            break
        time.sleep(5)
    assert second.returncode == 0, second.describe()
    assert "recovered plan" in second.stderr, second.describe()
    assert entries() == {}, f"the entry outlived recovery: {entries()}"
    wait_for(running(kube, shapes_namespace, ["slow"]), timeout=60, what="the workload whole again")
    now = pods_by_app(kube, shapes_namespace)["slow"][0]
    assert now["spec"]["nodeName"] == target, (now["spec"]["nodeName"], target)
    assert get_or_none(kube.core.read_namespaced_config_map, "gpu-compactor-state", STATE_NAMESPACE) is None


def _workload(kind: str, name: str) -> Obj:
    """An empty workload of ``kind`` (a suspended Job, a Deployment of 0 replicas) whose pods would wait for a node that
    does not exist: only their admission matters."""
    template = {"metadata": {"labels": {"app": name}}, "spec": pod_spec({"compactor-e2e/nowhere": "true"}, None)}
    if kind == "Job":
        template["spec"]["restartPolicy"] = "Never"
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name},
            "spec": {"template": template, "suspend": True},
        }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": name}}, "template": template},
    }


class _Workloads:
    """Creates, starts and finds the pods of ``_workload``s through the typed clients."""

    def __init__(self, kube: Kube) -> None:
        self.kube, self.batch = kube, k8s.BatchV1Api(kube.api_client)

    def create(self, namespace: str, kind: str, name: str) -> str:
        """The new workload's controller uid, the one its pods will name: the Job's, or the Deployment's ReplicaSet's."""
        if kind == "Job":
            created = self.batch.create_namespaced_job(namespace, _workload(kind, name))
            return str(created.metadata.uid)
        self.kube.apps.create_namespaced_deployment(namespace, _workload(kind, name))
        wait_for(
            lambda: (bool(self._replica_sets(namespace, name)), "none yet"),
            timeout=60,
            interval=0.2,
            what=f"the ReplicaSet of {name}",
        )
        return str(self._replica_sets(namespace, name)[0]["metadata"]["uid"])

    def start(self, namespace: str, kind: str, name: str) -> None:
        if kind == "Job":
            self.batch.patch_namespaced_job(name, namespace, {"spec": {"suspend": False}})
        else:
            self.kube.apps.patch_namespaced_deployment(name, namespace, {"spec": {"replicas": 1}})

    def first_pod(self, namespace: str, name: str) -> Obj:
        def pods() -> list[Obj]:
            return raw(self.kube.core.list_namespaced_pod, namespace, label_selector=f"app={name}").get("items") or []

        wait_for(lambda: (bool(pods()), "no pod yet"), timeout=60, interval=0.2, what=f"the pod of {namespace}/{name}")
        return pods()[0]

    def _replica_sets(self, namespace: str, name: str) -> list[Obj]:
        return (
            raw(self.kube.apps.list_namespaced_replica_set, namespace, label_selector=f"app={name}").get("items") or []
        )


def test_the_policy_pins_only_the_pods_the_planner_expects_it_to_pin(
    kube: Kube, shapes_namespace: str, steering_policy: str
) -> None:
    """Issue [18], finding 3, on the real API server. With an entry for each, a Deployment's new pod in a namespace the
    shipped binding covers is pinned; a Job's pod (the Job controller is not a creator the policy matches) and a
    Deployment's pod in a namespace the binding leaves out (gpu-compactor, as the shipped planner does) are not. The
    planner's ``Steerability``, from the policy and binding as served, says the same of each pod, so a plan never moves
    a pod whose replacement would come unpinned."""
    cases = [  # (namespace, kind, name, pinned, why the planner keeps it in place)
        (shapes_namespace, "Deployment", "covered", True, None),
        (shapes_namespace, "Job", "batch", False, Unmovable.NOT_PINNED_OWNER),
        (STATE_NAMESPACE, "Deployment", "e2e-excluded", False, Unmovable.OUTSIDE_POLICY),
    ]
    served = [
        api_request(kube, "GET", f"{ADMISSION_PATHS[kind]}/gpu-compactor-steering")[1]
        for kind in ("MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding")
    ]
    scope = scope_of(*served)
    assert isinstance(scope, NamespaceScope), scope
    workloads, entries = _Workloads(kube), {}
    try:
        for namespace, kind, name, _, _ in cases:
            entries[workloads.create(namespace, kind, name)] = "e2e-nowhere"
        kube.core.patch_namespaced_config_map("gpu-compactor-steering", STATE_NAMESPACE, {"data": entries})
        time.sleep(2)  # the admission plugin reads its parameters from an informer
        for namespace, kind, name, _, _ in cases:
            workloads.start(namespace, kind, name)
        found = {}
        for namespace, _, name, _, _ in cases:
            pod = workloads.first_pod(namespace, name)
            pinned_to = (pod["metadata"].get("annotations") or {}).get(STEERED_TO)
            found[name] = (pinned_to == "e2e-nowhere", Steerability(policy=scope).reason(parse_pod(pod, source="e2e")))
        assert found == {name: (pin, why) for _, _, name, pin, why in cases}
    finally:
        kube.core.patch_namespaced_config_map(
            "gpu-compactor-steering", STATE_NAMESPACE, {"data": dict.fromkeys(entries)}
        )
        with contextlib.suppress(ApiException):
            kube.apps.delete_namespaced_deployment("e2e-excluded", STATE_NAMESPACE)


def test_a_pending_pod_bound_since_it_was_read_is_not_evicted_past_its_budget(
    kube: Kube, shapes_namespace: str
) -> None:
    """The API server evicts a phase-Pending pod without asking its PodDisruptionBudget (``canIgnorePDB``), and a pod just
    bound stays Pending while its containers start. ``evict_pending`` sends the resourceVersion it read the pod with:
    once the pod bound since, the eviction answers 409 and the pod stays, although its budget allows no disruption."""
    labels = {"app": "pinned"}
    kube.policy.create_namespaced_pod_disruption_budget(
        shapes_namespace,
        {"metadata": {"name": "pinned"}, "spec": {"maxUnavailable": 0, "selector": {"matchLabels": labels}}},
    )
    body = {
        "metadata": {"name": "pinned", "labels": labels},
        "spec": pod_spec({"compactor-e2e/nowhere": "true"}, None),  # Pending: no node has that label
    }
    kube.core.create_namespaced_pod(shapes_namespace, body)
    read = raw(kube.core.read_namespaced_pod, "pinned", shapes_namespace)
    binding = {"target": {"apiVersion": "v1", "kind": "Node", "name": "e2e-nowhere"}, "metadata": {"name": "pinned"}}
    status, answer = api_request(kube, "POST", f"/api/v1/namespaces/{shapes_namespace}/pods/pinned/binding", binding)
    assert status == 201, answer  # what kube-scheduler does; the pod's phase stays Pending (no kubelet here)
    api_client = k8s_config.new_client_from_config(config_file=os.environ["KUBECONFIG"], persist_config=False)  # type: ignore[no-untyped-call]
    with KubeClusterClient(api_client) as client:
        result = client.evict(
            shapes_namespace,
            "pinned",
            uid=read["metadata"]["uid"],
            resource_version=read["metadata"]["resourceVersion"],
        )
        assert (result.outcome, result.status) == (EvictionOutcome.CONFLICT, 409), result
        now = raw(kube.core.read_namespaced_pod, "pinned", shapes_namespace)
        assert now["spec"]["nodeName"] == "e2e-nowhere" and now["status"]["phase"] == "Pending"
        assert not now["metadata"].get("deletionTimestamp")
        # the same eviction without the precondition: the API server deletes the bound Pending pod, budget or not
        assert client.evict(shapes_namespace, "pinned", dry_run=True).outcome == EvictionOutcome.EVICTED

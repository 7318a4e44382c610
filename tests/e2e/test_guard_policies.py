"""The pod, scale and state guards (manifests/guard) on a real kube-apiserver: what RBAC cannot narrow, the policies do.

The shipped policies and bindings (``pods.yaml``, ``scale.yaml``, ``state.yaml``) are applied as they are (their
usernames, namespace, names, messages and expressions untouched), with a ClusterRole and a Role of this run carrying the
shipped rules of manifests/base/rbac.yaml, bound to the shipped service account and to a bystander account of the same
namespace (same RBAC: only the policies' username tells them apart). Every request goes through the compactor's own
client (``KubeClusterClient``) with ``Impersonate-User``; the pods of this test never bind (a nodeSelector no node has),
so nothing here depends on the scheduler's profile.

* Pods: the patches of a make-before-break move and of its undo, built and sent by the executor's own functions
  (``actions/surge.scale_up``: the surge's mark; ``retire``'s pod-deletion-cost; ``surge.unmark``, which ``undo`` and
  recovery call) and the toleration ``steps/steer.tolerate`` adds to a pending pod placed on a node reserved for it:
  admitted. Anything else (the image, activeDeadlineSeconds, a toleration's tolerationSeconds, a toleration of
  another taint or of every taint, the label a ReplicaSet selects its pods by, another label or annotation, a
  finalizer, the ownerReference): refused with 403 and the policy's message, the pod unchanged, while the same
  request by a cluster admin or by the bystander is admitted (server-side dry runs).
* Deployments' scale subresource: the surge (+1) and its scale-back (-1), by ``KubeClusterClient.scale_deployment``
  (a JSON patch testing spec.replicas): admitted; to or from 0, by two, to 500: refused, the replicas unchanged.
* The compactor's ConfigMaps in its namespace: written by the service account through ``write_state`` (state, history,
  last-run summary) and ``steering.policy.write_entries`` (steering parameters): admitted. Created or replaced by the
  bystander or a cluster admin: refused (the planted state the executor's ``trust.py`` would otherwise have to catch),
  the ConfigMap as it was; deleted by a cluster admin: admitted. The steering parameters created empty by an admin
  (manifests/base) are admitted, an entry added or changed by anyone but the service account refused, one removed
  admitted.

A policy takes about a second to take effect after its creation, and to stop after its deletion: the fixture waits for
both, so no later test (which runs the compactor from the admin's kubeconfig) meets the state guard.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import cast

import pytest
from kubernetes.client.exceptions import ApiException

from compactor.actions.cluster.owners import DELETION_COST, FIRST_TO_GO
from compactor.actions.cluster.run_state import STATE_CONFIGMAP, Surge
from compactor.actions.cluster.state_guard import GuardMismatch, check_state_guard
from compactor.actions.port import annotations as ann
from compactor.actions.run.context import Run
from compactor.actions.services import surge as surge_step
from compactor.actions.services.memory import HISTORY_CONFIGMAP, HISTORY_KEY
from compactor.actions.services.surge import SURGE_NOTE, SURGED_BY
from compactor.actions.steering.policy import write_entries
from compactor.actions.steps import steer
from compactor.app.last_run import LAST_RUN_CONFIGMAP, SUMMARY_KEY
from compactor.errors import ClusterError
from compactor.kube.cluster_client import JSON, MERGE_PATCH, KubeClusterClient
from compactor.planner.plan import Move
from compactor.planner.rules.history import History
from compactor.settings.bundles import RunSettings
from compactor.settings.origins import Settings
from tests.e2e.guards import (
    ACCOUNT_NAMESPACE,
    BASE_RBAC,
    BYSTANDER,
    SERVICE_ACCOUNT,
    compactor_client,
    denied_by,
    documents,
    install,
    message,
    one,
    path,
    rbac_for_both,
    remove,
    shipped,
)
from tests.e2e.helpers import (
    CREATED_LABEL,
    NEEDS_CLUSTER,
    PAUSE_IMAGE,
    Kube,
    Obj,
    api_request,
    get_or_none,
    raw,
    wait_for,
    with_retries,
)

pytestmark = [NEEDS_CLUSTER, pytest.mark.e2e, pytest.mark.timeout(300)]

ACTIVATION_TIMEOUT = 60
SETTINGS: RunSettings = Settings().for_executor
STEERING = SETTINGS.steering.policy_name
assert SETTINGS.executor.state_namespace == ACCOUNT_NAMESPACE, "the state guard matches the service account's namespace"

PODS, SCALE, STATE = shipped("pods.yaml"), shipped("scale.yaml"), shipped("state.yaml")
POD_POLICY, SCALE_POLICY, STATE_POLICY = (one(docs, "ValidatingAdmissionPolicy") for docs in (PODS, SCALE, STATE))
POD_GUARD, SCALE_GUARD, STATE_GUARD = (p["metadata"]["name"] for p in (POD_POLICY, SCALE_POLICY, STATE_POLICY))

POD_SPEC, TOLERATION_LOST = message(POD_POLICY, "spec field"), message(POD_POLICY, "never remove or change")
TOLERATION_FOREIGN = message(POD_POLICY, "add only pod tolerations")
POD_LABELS, POD_ANNOTATIONS = message(POD_POLICY, "pod label"), message(POD_POLICY, "pod annotations")
POD_METADATA = message(POD_POLICY, "metadata")
SCALE_ZERO, SCALE_BY_ONE = message(SCALE_POLICY, "from 0"), message(SCALE_POLICY, "exactly one")
STATE_OWN, STEERING_ENTRIES = message(STATE_POLICY, "last-run"), message(STATE_POLICY, "steering entries")

NOWHERE = {"gpu-compactor-e2e/nowhere": "true"}  # no node has it: every pod here stays Pending, whatever the profile
# An operator's marks on the pods: none of them is the compactor's to change.
FOREIGN_LABEL = ("example.com/team", "vision")
FOREIGN_ANNOTATION = ("example.com/owner", "ml-platform")
FOREIGN_TOLERATION = {"key": "example.com/dedicated", "operator": "Equal", "value": "training", "effect": "NoSchedule"}
GRACE_TOLERATION = {"key": "example.com/flaky", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 600}
OWN_COST = "5"  # the pod's own pod-deletion-cost: restored when a surge is undone
SELECTOR = ("app", "guarded")  # what a ReplicaSet would select the pod by


@dataclass
class Guarded:
    kube: Kube
    namespace: str  # this test's: its pods and Deployments
    owner: Obj  # a ConfigMap of that namespace, the ownerReference of every test pod (the GC leaves them alone)
    compactor: KubeClusterClient  # as the service account
    probe: KubeClusterClient  # as the service account, every write a server-side dry run
    bystander: KubeClusterClient  # another service account, same RBAC, for real
    bystander_probe: KubeClusterClient  # the same, dry runs
    admin: KubeClusterClient  # the kubeconfig's cluster admin, for real
    admin_probe: KubeClusterClient  # the same, dry runs


# --------------------------------------------------------------------------- setting up

# The pod guard's probe: a label, an annotation, a finalizer and a spec field at once (no toleration: a merge patch
# replaces the list, and the API refuses a removed toleration before any policy is asked).
PROBE_PATCH = {
    "metadata": {
        "labels": {"example.com/x": "y"},
        "annotations": {"example.com/x": "y"},
        "finalizers": ["example.com/x"],
    },
    "spec": {"activeDeadlineSeconds": 5},
}


def _active(guarded: Guarded, pod: str, deployment: str) -> Callable[[], tuple[bool, str]]:
    """Each guard refuses what it must (until the bindings of this run are seen, RBAC refuses first). Each probe breaks
    every rule it can at once, so that a policy missing one rule still shows it is active and the tests name the rule."""

    def refused(policy: str, call: Callable[[], object]) -> tuple[bool, str]:
        try:
            call()
        except ClusterError as exc:
            return denied_by(exc, policy), str(exc)
        return False, f"{policy}: admitted"

    def check() -> tuple[bool, str]:
        results = [
            refused(
                POD_GUARD,
                lambda: guarded.probe.patch_pod(guarded.namespace, pod, PROBE_PATCH),
            ),
            refused(SCALE_GUARD, lambda: guarded.probe.scale_deployment(guarded.namespace, deployment, expect=2, to=0)),
            refused(STATE_GUARD, lambda: guarded.bystander_probe.write_state(STATE_CONFIGMAP, {"probe": "1"})),
        ]
        return all(ok for ok, _ in results), "\n".join(text for _, text in results)

    return check


def _inactive(admin_probe: KubeClusterClient) -> Callable[[], tuple[bool, str]]:
    def check() -> tuple[bool, str]:
        try:
            admin_probe.write_state(STATE_CONFIGMAP, {"probe": "1"})
        except ClusterError as exc:
            return False, str(exc)
        return True, "admitted"

    return check


def _owned_configmaps(kube: Kube) -> list[str]:
    names = (STATE_CONFIGMAP, HISTORY_CONFIGMAP, LAST_RUN_CONFIGMAP, STEERING)
    return [n for n in names if get_or_none(kube.core.read_namespaced_config_map, n, ACCOUNT_NAMESPACE) is not None]


def _namespace(kube: Kube, name: str) -> bool:
    """``name`` there (True: created here); one being deleted (by an earlier test) is waited for first."""

    def settled() -> tuple[bool, str]:
        found = get_or_none(kube.core.read_namespace, name)
        return found is None or not found["metadata"].get("deletionTimestamp"), f"namespace {name} terminating"

    wait_for(settled, timeout=180, interval=1, what=f"namespace {name} to be gone or settled")
    if get_or_none(kube.core.read_namespace, name) is not None:
        return False
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {CREATED_LABEL: "true"}}}
    with_retries(lambda: kube.core.create_namespace(body), what=f"creating namespace {name}", statuses=(429, 500, 503))
    return True


def _drop_namespace(kube: Kube, name: str) -> None:
    kube.core.delete_namespace(name, grace_period_seconds=0)
    kube.core.delete_collection_namespaced_pod(name, grace_period_seconds=0)  # unbound: nothing to wait for
    wait_for(
        lambda: (get_or_none(kube.core.read_namespace, name) is None, f"namespace {name} still there"),
        timeout=180,
        interval=1,
        what=f"namespace {name} to go",
    )


def _deployment(guarded: Guarded, name: str, replicas: int) -> None:
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"deployment": name}},
            "template": {
                "metadata": {"labels": {"deployment": name}},
                "spec": {
                    "nodeSelector": NOWHERE,
                    "automountServiceAccountToken": False,
                    "containers": [{"name": "pause", "image": PAUSE_IMAGE}],
                },
            },
        },
    }
    with_retries(
        lambda: guarded.kube.apps.create_namespaced_deployment(guarded.namespace, body), what=f"creating {name}"
    )


@pytest.fixture(scope="module")
def guarded(kube: Kube) -> Iterator[Guarded]:
    run_id = f"e2e-{secrets.token_hex(3)}"
    namespace = f"compactor-{run_id}-guards"
    role = f"gpu-compactor-e2e-guards-{run_id}"
    clients = [
        compactor_client(SERVICE_ACCOUNT),
        compactor_client(SERVICE_ACCOUNT, dry_run=True),
        compactor_client(BYSTANDER),
        compactor_client(BYSTANDER, dry_run=True),
        compactor_client(),
        compactor_client(dry_run=True),
    ]
    installed: list[Obj] = []
    state_namespace_created = test_namespace_created = False
    try:
        state_namespace_created = _namespace(kube, ACCOUNT_NAMESPACE)
        left = _owned_configmaps(kube)
        if left:
            pytest.fail(
                f"{ACCOUNT_NAMESPACE} already holds {', '.join(left)}: gpu-compactor is installed in this cluster, or an "
                f"earlier run was interrupted; this test needs a cluster where it is not (kubectl -n {ACCOUNT_NAMESPACE} "
                f"delete configmap {' '.join(left)})"
            )
        test_namespace_created = _namespace(kube, namespace)
        wait_for(  # a pod is refused until the namespace's default service account exists
            lambda: (get_or_none(kube.core.read_namespaced_service_account, "default", namespace) is not None, ""),
            timeout=60,
            what=f"the default service account of {namespace}",
        )
        owner = raw(
            kube.core.create_namespaced_config_map,
            namespace,
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner"}},
        )
        guarded = Guarded(kube, namespace, owner, *clients)
        for obj in [*rbac_for_both(role), *rbac_for_both(role, namespace=ACCOUNT_NAMESPACE)]:
            if install(kube, obj):
                installed.append(obj)
        for obj in [*PODS, *SCALE, *STATE]:
            if install(kube, obj):
                installed.append(obj)
        probe_pod = _create_pod(guarded)
        _deployment(guarded, "probe", 2)
        wait_for(
            _active(guarded, probe_pod, "probe"),
            timeout=ACTIVATION_TIMEOUT,
            interval=0.5,
            what="the pod, scale and state guards to refuse what they must",
        )
        yield guarded
    finally:
        for obj in reversed(installed):  # bindings before policies, policies before the RBAC
            remove(kube, obj)
        if any(
            o["kind"] == "ValidatingAdmissionPolicyBinding" and o["metadata"]["name"] == STATE_GUARD for o in installed
        ):
            # later tests run the compactor as the cluster admin: the state guard must be gone for them
            wait_for(_inactive(clients[5]), timeout=ACTIVATION_TIMEOUT, interval=0.5, what="the state guard to go")
        if test_namespace_created:
            _drop_namespace(kube, namespace)
        if state_namespace_created:
            _drop_namespace(kube, ACCOUNT_NAMESPACE)
        for client in clients:
            client.close()


# --------------------------------------------------------------------------- pods


def _create_pod(guarded: Guarded) -> str:
    """A pending pod as an operator made it: their label, annotation and tolerations, its own deletion cost, an owner."""
    name = f"guarded-{secrets.token_hex(3)}"
    owner = guarded.owner["metadata"]
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {SELECTOR[0]: SELECTOR[1], FOREIGN_LABEL[0]: FOREIGN_LABEL[1]},
            "annotations": {FOREIGN_ANNOTATION[0]: FOREIGN_ANNOTATION[1], DELETION_COST: OWN_COST},
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": owner["name"], "uid": owner["uid"]}],
        },
        "spec": {
            "nodeSelector": NOWHERE,
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 0,
            "tolerations": [FOREIGN_TOLERATION, GRACE_TOLERATION],
            "containers": [{"name": "pause", "image": PAUSE_IMAGE}],
        },
    }
    with_retries(lambda: guarded.kube.core.create_namespaced_pod(guarded.namespace, body), what=f"creating pod {name}")
    return name


@pytest.fixture
def pod(guarded: Guarded) -> Iterator[str]:
    name = _create_pod(guarded)
    yield name
    guarded.kube.core.delete_namespaced_pod(name, guarded.namespace, grace_period_seconds=0)


def _read_pod(guarded: Guarded, name: str) -> Obj:
    return raw(guarded.kube.core.read_namespaced_pod, name, guarded.namespace)


def _operators_marks_kept(found: Obj) -> None:
    meta = found["metadata"]
    assert (meta.get("labels") or {}).get(FOREIGN_LABEL[0]) == FOREIGN_LABEL[1], meta.get("labels")
    assert (meta.get("labels") or {}).get(SELECTOR[0]) == SELECTOR[1], meta.get("labels")
    assert (meta.get("annotations") or {}).get(FOREIGN_ANNOTATION[0]) == FOREIGN_ANNOTATION[1], meta.get("annotations")
    tolerations = found["spec"].get("tolerations") or []
    assert FOREIGN_TOLERATION in tolerations and GRACE_TOLERATION in tolerations, tolerations
    assert len(meta.get("ownerReferences") or []) == 1 and not meta.get("finalizers"), meta
    assert found["spec"]["containers"][0]["image"] == PAUSE_IMAGE


@dataclass
class _RunView:
    """What the surge and steering steps use of a ``Run``: its client, settings and plan id, its notes. Enough to call
    them on the objects of this test, with no plan to carry out."""

    client: KubeClusterClient
    settings: RunSettings
    plan_id: str = "plan-e2e"
    notes: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        self.notes.append(text)

    def said(self, real: str, dry: str) -> str:
        return real


def _sent(what: str, call: Callable[[], object]) -> object:
    try:
        return call()
    except ClusterError as exc:
        raise AssertionError(f"{what}, sent by {SERVICE_ACCOUNT}, was refused: {exc}") from None


def _replicas(guarded: Guarded, deployment: str) -> int:
    found = raw(guarded.kube.apps.read_namespaced_deployment, deployment, guarded.namespace)
    return int(found["spec"].get("replicas") or 0)


def test_a_make_before_break_move_and_its_undo_are_admitted_for_the_service_account(guarded: Guarded, pod: str) -> None:
    """Every pod patch and scale of a surge, of its scale-back, of an undo and of recovery's undo, as the steps send them."""
    namespace, sa = guarded.namespace, guarded.compactor
    _deployment(guarded, "surged", 2)
    uid = str(_read_pod(guarded, pod)["metadata"]["uid"])
    run = cast(Run, _RunView(sa, SETTINGS))
    move = Move.model_validate({"pod": f"{namespace}/{pod}", "from": "node-a", "to": "node-b"})
    surged = Surge(deployment="surged", replicas=2, pod_uid=uid, deletion_cost=OWN_COST)

    # actions/surge.scale_up: the surge's mark on the old pod (label and note), then one replica more
    _sent("the surge (its mark, then 2 -> 3 replicas)", lambda: surge_step.scale_up(run, move, surged))
    marked = _read_pod(guarded, pod)
    assert marked["metadata"]["labels"][SURGED_BY] == SETTINGS.executor.identity
    assert surge_step.surge_note(marked) == {
        "plan": "plan-e2e",
        "deployment": "surged",
        "replicas": 2,
        "deletionCost": OWN_COST,
    }
    assert _replicas(guarded, "surged") == 3
    # actions/surge.retire: the old pod first to go, then the scale-back
    first_to_go = {"metadata": {"annotations": {DELETION_COST: FIRST_TO_GO}}}
    _sent("the old pod first to go", lambda: sa.patch_pod(namespace, pod, first_to_go))
    assert _sent("the scale-back (3 -> 2)", lambda: sa.scale_deployment(namespace, "surged", expect=3, to=2)) is True
    assert _replicas(guarded, "surged") == 2
    # actions/surge.undo: the pod's own deletion cost back, the marks off
    _sent("the undo's unmark", lambda: surge_step.unmark(sa, namespace, pod, uid, OWN_COST))
    undone = _read_pod(guarded, pod)
    assert undone["metadata"]["annotations"][DELETION_COST] == OWN_COST
    assert SURGED_BY not in undone["metadata"]["labels"] and SURGE_NOTE not in undone["metadata"]["annotations"]
    _operators_marks_kept(undone)

    # recovery's undo of a surge whose state was lost, on a pod the surge recorded no cost of its own for: cost removed
    bare = surged.model_copy(update={"deletion_cost": None})
    _sent("a second surge", lambda: surge_step.scale_up(run, move, bare))
    _sent("the old pod first to go", lambda: sa.patch_pod(namespace, pod, first_to_go))
    assert _sent("recovery's scale-back", lambda: sa.scale_deployment(namespace, "surged", expect=3, to=2)) is True
    _sent("recovery's unmark", lambda: surge_step.unmark(sa, namespace, pod, uid, None))
    recovered = _read_pod(guarded, pod)
    assert DELETION_COST not in recovered["metadata"]["annotations"]
    assert SURGED_BY not in recovered["metadata"]["labels"]
    _operators_marks_kept(recovered)
    assert _replicas(guarded, "surged") == 2


def test_the_toleration_for_a_node_reserved_for_a_pending_pod_is_admitted(guarded: Guarded, pod: str) -> None:
    """steps/steer.tolerate, with the toleration steps/steer.reserve builds: the whole list sent back, plus one."""
    key = f"{guarded.namespace}/{pod}"
    toleration = {
        "key": SETTINGS.executor.taint_key,
        "value": ann.taint_value(key),
        "effect": "NoSchedule",
        "operator": "Equal",
    }
    run = _RunView(guarded.compactor, SETTINGS)
    pending = guarded.compactor.get_pod(guarded.namespace, pod)
    assert pending is not None
    _sent("the toleration", lambda: steer.tolerate(cast(Run, run), pending, toleration))
    assert not run.notes, run.notes
    tolerated = _read_pod(guarded, pod)
    assert toleration in tolerated["spec"]["tolerations"], tolerated["spec"]["tolerations"]
    _operators_marks_kept(tolerated)


def _with_tolerations(*added: Obj, changed: Callable[[Obj], Obj] = lambda t: t) -> Callable[[Obj], Obj]:
    def build(found: Obj) -> Obj:
        return {"spec": {"tolerations": [*(changed(t) for t in found["spec"].get("tolerations") or []), *added]}}

    return build


def _other_image(found: Obj) -> Obj:
    containers = [{**c, "image": "example.com/miner:latest"} for c in found["spec"]["containers"]]
    return {"spec": {"containers": containers}}


def _own_toleration(found: Obj) -> Obj:
    key = f"{found['metadata']['namespace']}/{found['metadata']['name']}"
    return {
        "key": SETTINGS.executor.taint_key,
        "value": ann.taint_value(key),
        "effect": "NoSchedule",
        "operator": "Equal",
    }


def _grace_shortened(t: Obj) -> Obj:
    return {**t, "tolerationSeconds": 0} if t.get("key") == GRACE_TOLERATION["key"] else t


GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}

FORBIDDEN_POD: dict[str, tuple[Callable[[Obj], Obj], str, str]] = {
    # name: (the patch, built from the pod as read; the policy's message; what the message names)
    "image": (_other_image, POD_SPEC, "spec.containers"),
    "active-deadline": (lambda p: {"spec": {"activeDeadlineSeconds": 1}}, POD_SPEC, "spec.activeDeadlineSeconds"),
    # the API itself lets a patch change an existing toleration's tolerationSeconds (0: evicted at once on a taint)
    "toleration-seconds-changed": (
        _with_tolerations(changed=_grace_shortened),
        TOLERATION_LOST,
        f"{GRACE_TOLERATION['key']}:NoExecute",
    ),
    "toleration-of-another-taint": (_with_tolerations(GPU_TOLERATION), TOLERATION_FOREIGN, "nvidia.com/gpu:NoSchedule"),
    "toleration-of-every-taint": (
        _with_tolerations({"operator": "Exists"}),
        TOLERATION_FOREIGN,
        "(every key):(every effect)",
    ),
    "own-key-no-execute-toleration": (
        _with_tolerations(
            {"key": SETTINGS.executor.taint_key, "operator": "Equal", "value": "x", "effect": "NoExecute"}
        ),
        TOLERATION_FOREIGN,
        f"{SETTINGS.executor.taint_key}:NoExecute",
    ),
    "own-key-toleration-of-every-reservation": (
        _with_tolerations({"key": SETTINGS.executor.taint_key, "operator": "Exists", "effect": "NoSchedule"}),
        TOLERATION_FOREIGN,
        f"{SETTINGS.executor.taint_key}:NoSchedule",
    ),
    "own-toleration-with-another": (
        lambda p: _with_tolerations(_own_toleration(p), GPU_TOLERATION)(p),
        TOLERATION_FOREIGN,
        "nvidia.com/gpu:NoSchedule",
    ),
    # a ReplicaSet's selector label changed: the pod leaves its ReplicaSet, which makes another
    "selector-label-changed": (lambda p: {"metadata": {"labels": {SELECTOR[0]: "elsewhere"}}}, POD_LABELS, SELECTOR[0]),
    "foreign-label-added": (
        lambda p: {"metadata": {"labels": {"example.com/new": "x"}}},
        POD_LABELS,
        "example.com/new",
    ),
    "foreign-label-removed": (
        lambda p: {"metadata": {"labels": {FOREIGN_LABEL[0]: None}}},
        POD_LABELS,
        FOREIGN_LABEL[0],
    ),
    "surge-label-with-a-foreign-one": (
        lambda p: {"metadata": {"labels": {SURGED_BY: SETTINGS.executor.identity, "example.com/new": "x"}}},
        POD_LABELS,
        "example.com/new",
    ),
    "foreign-annotation-changed": (
        lambda p: {"metadata": {"annotations": {FOREIGN_ANNOTATION[0]: "me"}}},
        POD_ANNOTATIONS,
        FOREIGN_ANNOTATION[0],
    ),
    "foreign-annotation-removed": (
        lambda p: {"metadata": {"annotations": {FOREIGN_ANNOTATION[0]: None}}},
        POD_ANNOTATIONS,
        FOREIGN_ANNOTATION[0],
    ),
    "deletion-cost-with-a-foreign-annotation": (
        lambda p: {"metadata": {"annotations": {DELETION_COST: FIRST_TO_GO, "example.com/new": "x"}}},
        POD_ANNOTATIONS,
        "example.com/new",
    ),
    "finalizer": (lambda p: {"metadata": {"finalizers": ["example.com/keep"]}}, POD_METADATA, "metadata.finalizers"),
    "owner-reference-dropped": (
        lambda p: {"metadata": {"ownerReferences": None}},
        POD_METADATA,
        "metadata.ownerReferences",
    ),
}


def _what_matters(found: Obj) -> Obj:
    """Everything a forbidden patch could have changed (not the API server's bookkeeping)."""
    meta = found["metadata"]
    kept = ("labels", "annotations", "finalizers", "ownerReferences")
    return {**{k: meta.get(k) for k in kept}, "spec": found["spec"]}


@pytest.mark.parametrize("case", FORBIDDEN_POD, ids=str)
def test_any_other_pod_change_by_the_service_account_is_refused_with_the_policys_message(
    guarded: Guarded, pod: str, case: str
) -> None:
    build, words, names = FORBIDDEN_POD[case]
    before = _read_pod(guarded, pod)
    patch = build(before)
    with pytest.raises(ClusterError) as refused:
        guarded.compactor.patch_pod(guarded.namespace, pod, patch)
    text = str(refused.value)
    assert denied_by(refused.value, POD_GUARD), text
    assert words in text and names in text, f"expected the policy's message {words!r} naming {names!r}: {text}"
    assert _what_matters(_read_pod(guarded, pod)) == _what_matters(before), "a refused patch changed the pod"

    # the same request, for anyone else: admitted (server-side dry runs: the whole admission chain, nothing written)
    for who, client in (("a cluster admin", guarded.admin_probe), (BYSTANDER, guarded.bystander_probe)):
        try:
            client.patch_pod(guarded.namespace, pod, patch)
        except ClusterError as exc:
            raise AssertionError(f"{case} by {who} was refused: {exc}") from None


# --------------------------------------------------------------------------- the scale subresource


def _scale_to(client: KubeClusterClient, namespace: str, deployment: str, replicas: int) -> None:
    """A merge patch of spec.replicas (what ``kubectl scale`` amounts to), as ``client``'s user: what the compactor's own
    JSON patch cannot send from 0 replicas (a Scale of 0 carries no spec.replicas to test)."""
    api = client.api_client
    request = api.param_serialize(
        method="PATCH",
        resource_path=f"/apis/apps/v1/namespaces/{namespace}/deployments/{deployment}/scale",
        query_params=[("dryRun", "All")] if client.dry_run_all else [],
        header_params={"Accept": JSON, "Content-Type": MERGE_PATCH},
        body={"spec": {"replicas": replicas}},
        auth_settings=["BearerToken"],
    )
    try:
        response = api.call_api(*request)
        status, text = int(response.status), response.read()
    except ApiException as exc:
        status, text = int(exc.status or 0), exc.body or b""
    if not 200 <= status < 300:
        body = json.loads(text or b"{}")
        raise ClusterError(f"scaling {deployment} to {replicas}: {body.get('message', text)}", status=status)


def _json_scale(start: int, to: int) -> Callable[[KubeClusterClient, str, str], object]:
    return lambda client, namespace, name: client.scale_deployment(namespace, name, expect=start, to=to)


def _merge_scale(to: int) -> Callable[[KubeClusterClient, str, str], object]:
    return lambda client, namespace, name: _scale_to(client, namespace, name, to)


FORBIDDEN_SCALE: dict[str, tuple[int, Callable[[KubeClusterClient, str, str], object], str, str]] = {
    # name: (replicas to start from; the scale, as the client sends it; the policy's message; what the message names)
    "to-zero": (2, _json_scale(2, 0), SCALE_ZERO, "from 2 to 0 replicas"),
    "down-by-one-to-zero": (1, _json_scale(1, 0), SCALE_ZERO, "from 1 to 0 replicas"),
    "up-by-one-from-zero": (0, _merge_scale(1), SCALE_ZERO, "from 0 to 1 replicas"),
    "up-by-two": (2, _json_scale(2, 4), SCALE_BY_ONE, "from 2 to 4 replicas"),
    "down-by-two": (3, _json_scale(3, 1), SCALE_BY_ONE, "from 3 to 1 replicas"),
    "to-many": (2, _merge_scale(500), SCALE_BY_ONE, "from 2 to 500 replicas"),
}


@pytest.mark.parametrize("case", FORBIDDEN_SCALE, ids=str)
def test_any_other_scale_by_the_service_account_is_refused_with_the_policys_message(
    guarded: Guarded, case: str
) -> None:
    start, scale, words, names = FORBIDDEN_SCALE[case]
    deployment = f"scaled-{case}"
    _deployment(guarded, deployment, start)
    with pytest.raises(ClusterError) as refused:
        scale(guarded.compactor, guarded.namespace, deployment)
    text = str(refused.value)
    assert denied_by(refused.value, SCALE_GUARD), text
    assert words in text and names in text, f"expected the policy's message {words!r} naming {names!r}: {text}"
    assert f"Deployment {guarded.namespace}/{deployment}" in text, text
    assert _replicas(guarded, deployment) == start, "a refused scale changed the Deployment"

    for who, client in (("a cluster admin", guarded.admin_probe), (BYSTANDER, guarded.bystander_probe)):
        try:
            scale(client, guarded.namespace, deployment)
        except ClusterError as exc:
            raise AssertionError(f"{case} by {who} was refused: {exc}") from None


# --------------------------------------------------------------------------- the compactor's ConfigMaps


OWN_CONFIGMAPS = {
    STATE_CONFIGMAP: {"planId": "plan-e2e"},
    HISTORY_CONFIGMAP: {HISTORY_KEY: History().to_json()},
    LAST_RUN_CONFIGMAP: {SUMMARY_KEY: json.dumps({"status": "succeeded"})},
}


def _configmap(guarded: Guarded, name: str) -> Obj | None:
    return get_or_none(guarded.kube.core.read_namespaced_config_map, name, ACCOUNT_NAMESPACE)


def _delete_configmap(guarded: Guarded, name: str) -> int:
    status, _ = api_request(guarded.kube, "DELETE", f"/api/v1/namespaces/{ACCOUNT_NAMESPACE}/configmaps/{name}")
    return status


@pytest.fixture
def no_configmaps(guarded: Guarded) -> Iterator[None]:
    """None of the compactor's ConfigMaps before and after the test (deleted by the cluster admin: always allowed)."""
    for name in (*OWN_CONFIGMAPS, STEERING):
        _delete_configmap(guarded, name)
    yield
    for name in (*OWN_CONFIGMAPS, STEERING):
        _delete_configmap(guarded, name)


def test_the_service_account_writes_its_state_history_and_last_run(guarded: Guarded, no_configmaps: None) -> None:
    """``write_state`` as every writer calls it: read, created (POST), replaced with the version read (PUT); the state is
    deleted by the service account at the end of a run, the others (never deleted by it) by an admin resetting them."""
    sa = guarded.compactor
    for name, data in OWN_CONFIGMAPS.items():
        assert sa.read_state(name) is None
        _sent(f"creating {name}", lambda name=name, data=data: sa.write_state(name, data))
        replaced = {**data, "e2e": "replaced"}
        _sent(f"replacing {name}", lambda name=name, data=replaced: sa.write_state(name, data))
        assert (_configmap(guarded, name) or {}).get("data") == replaced
    _sent(f"deleting {STATE_CONFIGMAP}", lambda: sa.write_state(STATE_CONFIGMAP, None))
    assert _configmap(guarded, STATE_CONFIGMAP) is None
    for name in (HISTORY_CONFIGMAP, LAST_RUN_CONFIGMAP):
        assert _delete_configmap(guarded, name) == 200, f"an admin's deletion of {name} was refused"


def test_a_run_checks_the_state_guard_admits_it_before_it_acts(guarded: Guarded) -> None:
    """Issue 43: the shipped state guard read through the compactor's own client and a real SelfSubjectReview (with
    impersonation, the API server answers the impersonated user): the service account passes; the bystander and the
    kubeconfig's admin, whose every state write the guard refuses, are stopped before anything, both users named."""
    check_state_guard(guarded.compactor, ACCOUNT_NAMESPACE)
    admin = guarded.admin.who_am_i()
    assert admin, "the API server names the kubeconfig's user"
    for client, user in ((guarded.bystander, BYSTANDER), (guarded.admin, admin)):
        with pytest.raises(GuardMismatch) as refused:
            check_state_guard(client, ACCOUNT_NAMESPACE)
        assert f"lets only {SERVICE_ACCOUNT} write the state" in str(refused.value)
        assert f"this run is {user}" in str(refused.value)


PLANTERS = ("bystander", "cluster-admin")  # another service account with the same RBAC; the kubeconfig's admin


@pytest.mark.parametrize("name", OWN_CONFIGMAPS, ids=str)
@pytest.mark.parametrize("who", PLANTERS, ids=str)
def test_a_configmap_of_the_compactor_planted_or_changed_by_anyone_else_is_refused(
    guarded: Guarded, no_configmaps: None, who: str, name: str
) -> None:
    planter = guarded.bystander if who == "bystander" else guarded.admin
    planted = {**OWN_CONFIGMAPS[name], "planted": "true"}
    # each client remembers the version it last read or wrote: none now, so write_state creates (POST)
    assert planter.read_state(name) is None and guarded.compactor.read_state(name) is None
    with pytest.raises(ClusterError) as refused:
        planter.write_state(name, planted)  # a POST: the name is free
    text = str(refused.value)
    assert denied_by(refused.value, STATE_GUARD), text
    assert STATE_OWN in text and f"CREATE of ConfigMap {ACCOUNT_NAMESPACE}/{name} by " in text, text
    assert _configmap(guarded, name) is None, f"{name} was planted"

    # written by the service account, then replaced by the other: refused, the service account's data stays
    _sent(f"creating {name}", lambda: guarded.compactor.write_state(name, OWN_CONFIGMAPS[name]))
    assert planter.read_state(name) == OWN_CONFIGMAPS[name]
    with pytest.raises(ClusterError) as refused:
        planter.write_state(name, planted)  # a PUT with the version just read
    assert denied_by(refused.value, STATE_GUARD), str(refused.value)
    assert f"UPDATE of ConfigMap {ACCOUNT_NAMESPACE}/{name} by " in str(refused.value)
    assert (_configmap(guarded, name) or {}).get("data") == OWN_CONFIGMAPS[name]
    # ... and deleted by a cluster admin: admitted (resetting the state is theirs to do)
    assert _delete_configmap(guarded, name) == 200


def _steering_as_shipped() -> Obj:
    """The parameter ConfigMap as manifests/base/steering.yaml ships it: empty."""
    doc = one(documents(BASE_RBAC.parent / "steering.yaml"), "ConfigMap")
    assert doc["metadata"]["name"] == STEERING and not doc.get("data")
    return doc


def test_steering_entries_are_added_by_the_service_account_alone(guarded: Guarded, no_configmaps: None) -> None:
    kube, sa, owner_uid = guarded.kube, guarded.compactor, "00000000-0000-0000-0000-0000000000e2"
    configmaps = f"/api/v1/namespaces/{ACCOUNT_NAMESPACE}/configmaps"
    shipped_empty = _steering_as_shipped()

    # created by an admin with an entry in it: refused; created empty, as `kubectl apply -k manifests/...` does: admitted
    status, reply = api_request(kube, "POST", configmaps, {**shipped_empty, "data": {owner_uid: "node-x"}})
    assert status == 403 and STEERING_ENTRIES in reply.get("message", "") and owner_uid in reply["message"], reply
    status, reply = api_request(kube, "POST", configmaps, shipped_empty)
    assert status == 201, f"the admin's install of the steering ConfigMap was refused: {reply.get('message')}"

    # the service account pins an owner, as steering.policy.Policy does before an eviction
    _sent("a steering entry", lambda: write_entries(sa, STEERING, {owner_uid: "node-a"}))
    for who, other in (("the bystander", guarded.bystander), ("a cluster admin", guarded.admin)):
        for entries, what in (({owner_uid: "node-z"}, "changed"), ({"another-uid": "node-z"}, "added")):
            with pytest.raises(ClusterError) as refused:
                write_entries(other, STEERING, entries)
            text = str(refused.value)
            assert denied_by(refused.value, STATE_GUARD), f"an entry {what} by {who}: {text}"
            assert STEERING_ENTRIES in text and next(iter(entries)) in text, text
    assert ((_configmap(guarded, STEERING) or {}).get("data") or {}) == {owner_uid: "node-a"}

    # an admin marks it (or lifts the compactor's not-in-effect mark) and removes an entry: admitted, as a deletion is
    mark = {"metadata": {"annotations": {"example.com/reviewed": "yes"}}}
    guarded.admin.patch_config_map(STEERING, mark)
    write_entries(guarded.admin, STEERING, {owner_uid: None})
    assert not (_configmap(guarded, STEERING) or {}).get("data")
    # and the service account's own entries come and go
    _sent("a steering entry", lambda: write_entries(sa, STEERING, {owner_uid: "node-b"}))
    _sent("a steering entry removed", lambda: write_entries(sa, STEERING, {owner_uid: None}))


# --------------------------------------------------------------------------- the policies as the API server sees them


@pytest.mark.parametrize("policy", [POD_GUARD, SCALE_GUARD, STATE_GUARD], ids=str)
def test_the_policy_type_checks_without_warnings(kube: Kube, guarded: Guarded, policy: str) -> None:
    """kube-apiserver checks every expression against the schema of what it matches once the policy is stored."""
    deadline = time.monotonic() + 30
    while True:
        status, found = api_request(kube, "GET", path("ValidatingAdmissionPolicy", policy))
        assert status == 200
        checked = found.get("status") or {}
        if checked.get("observedGeneration") == found["metadata"]["generation"] or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert checked.get("observedGeneration") == found["metadata"]["generation"], checked
    assert not (checked.get("typeChecking") or {}).get("expressionWarnings"), checked
    assert not [c for c in checked.get("conditions") or [] if c.get("status") == "False"], checked

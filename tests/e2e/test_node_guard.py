"""The node guard (manifests/guard) on a real kube-apiserver: gpu-compactor's service account may change only its own node fields.

The shipped policy and binding are applied as they are (their username, messages and expressions
untouched), with a ClusterRole of this run carrying the shipped ClusterRole's rules, bound to the
shipped service account and to a bystander account of the same namespace. One fake node of this
test (a fake kubelet keeps it Ready, so the node lifecycle controller leaves its taints alone)
carries an operator's taint, label and annotation. Then, through the compactor's own client
(``KubeClusterClient``, merge patches guarded by the resourceVersion read, ``patch_fresh``) with
``Impersonate-User`` set to the service account:

* every node patch the executor makes, built by its own functions (``annotations.fence_patch``,
  ``release_patch``, ``reservation_patch``, ``keep_cordoned_patch``, ``migmanager.relabel_patch``,
  ``failed_patch``), is admitted, and leaves the operator's marks as they were;
* every other change (the cordon bit, another spec field, an operator's taint added, changed or
  removed, even inside a fence patch, a compactor.io/ taint with another effect than NoSchedule (a
  NoExecute one would evict every pod of the node, no PodDisruptionBudget asked), an operator's
  label or annotation, the MIG state label, a finalizer, an ownerReference) is refused with 403
  and the policy's own message, and the node is unchanged; the same request is admitted for a cluster admin and for the bystander account
  (server-side dry runs: admission runs in full, nothing is written).

A policy takes about a second to take effect after its creation: the fixture waits until a
forbidden change is refused, as a real client would have to.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial

import pytest

from compactor.actions.cluster import migmanager as mig
from compactor.actions.cluster.patching import patch_fresh
from compactor.actions.port import annotations as ann
from compactor.errors import ClusterError
from compactor.kube.cluster_client import KubeClusterClient
from compactor.settings.origins import Settings
from tests.e2e.guards import (
    BYSTANDER,
    SERVICE_ACCOUNT,
    compactor_client,
    denied_by,
    install,
    message,
    one,
    path,
    rbac_for_both,
    remove,
    shipped,
)
from tests.e2e.helpers import NEEDS_CLUSTER, Kube, Obj, api_request, wait_for
from tests.e2e.kubelets import NodeSet, fake_nodes

pytestmark = [NEEDS_CLUSTER, pytest.mark.e2e, pytest.mark.timeout(300)]

ACTIVATION_TIMEOUT = 60

# An operator's marks on the node: none of them is the compactor's to change.
FOREIGN_TAINT = {"key": "example.com/dedicated", "value": "training", "effect": "NoSchedule"}
FOREIGN_LABEL = ("example.com/team", "vision")
FOREIGN_ANNOTATION = ("example.com/owner", "ml-platform")
SETTINGS = Settings().executor
IDENTITY, RESERVATION_KEY = SETTINGS.identity, SETTINGS.taint_key

SHIPPED = shipped("nodes.yaml")
POLICY = one(SHIPPED, "ValidatingAdmissionPolicy")
POLICY_NAME = POLICY["metadata"]["name"]
SPEC, TAINTS = message(POLICY, "spec field"), message(POLICY, "node taints")
EFFECT = message(POLICY, "effect NoSchedule")
LABELS, ANNOTATIONS = message(POLICY, "node label"), message(POLICY, "node annotations")
METADATA = message(POLICY, "metadata")


# --------------------------------------------------------------------------- the guarded node


@dataclass
class Guarded:
    node: str
    compactor: KubeClusterClient  # as the compactor's service account
    probe: KubeClusterClient  # as the service account, every write a server-side dry run
    bystander: KubeClusterClient  # as another service account with the same RBAC, dry runs
    admin: KubeClusterClient  # the kubeconfig's cluster admin, dry runs
    setter: KubeClusterClient  # the cluster admin, for real: sets the test's starting point


def _denied_by_policy(exc: ClusterError) -> bool:
    return denied_by(exc, POLICY_NAME)


def _policy_active(probe: KubeClusterClient, node: str) -> Callable[[], tuple[bool, str]]:
    def check() -> tuple[bool, str]:
        try:
            probe.patch_node(node, {"spec": {"unschedulable": True}})
        except ClusterError as exc:  # 403 from RBAC first, until the new ClusterRoleBinding is seen; then the policy's
            return _denied_by_policy(exc), str(exc)
        return False, "a cordon by the service account was admitted"

    return check


@pytest.fixture(scope="module")
def guarded(kube: Kube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guarded]:
    run_id = f"e2e-{secrets.token_hex(3)}"
    rbac = rbac_for_both(f"gpu-compactor-e2e-guard-{run_id}")
    nodes = NodeSet(
        prefix=f"{run_id}-guard-",
        count=1,
        gpus=8,
        labels={FOREIGN_LABEL[0]: FOREIGN_LABEL[1], mig.CONFIG_LABEL: "all-disabled"},
    )
    created: list[Obj] = []
    clients = [
        compactor_client(SERVICE_ACCOUNT),
        compactor_client(SERVICE_ACCOUNT, dry_run=True),
        compactor_client(BYSTANDER, dry_run=True),
        compactor_client(dry_run=True),
        compactor_client(),
    ]
    try:
        with fake_nodes(kube.api_client, nodes, tmp_path_factory.mktemp("guard") / "fake-node.log") as (node,):
            for obj in [*rbac, *SHIPPED]:
                if install(kube, obj):
                    created.append(obj)
            guarded = Guarded(node, *clients)
            wait_for(
                _policy_active(guarded.probe, node),
                timeout=ACTIVATION_TIMEOUT,
                interval=0.5,
                what=f"the ValidatingAdmissionPolicy {POLICY_NAME} to refuse a cordon by {SERVICE_ACCOUNT}",
            )
            yield guarded
    finally:
        for obj in reversed(created):  # the binding before the policy, the policy before the RBAC
            remove(kube, obj)
        for client in clients:
            client.close()


@pytest.fixture
def node(guarded: Guarded) -> str:
    """The node as an operator left it: their taint, label and annotation; the MIG layout all-disabled; nothing of ours."""

    def reset(current: Obj) -> Obj:  # also undoes whatever an earlier case got through (a broken policy)
        stale = ("compactor.io/", "example.com/")
        labels = {k: None for k in mig.labels(current) if k.startswith(stale)}
        annotations = {k: None for k in ann.node_annotations(current) if k.startswith(stale)}
        return {
            "metadata": {
                "labels": {
                    **labels,
                    FOREIGN_LABEL[0]: FOREIGN_LABEL[1],
                    mig.CONFIG_LABEL: "all-disabled",
                    mig.STATE_LABEL: "success",
                },
                "annotations": {**annotations, FOREIGN_ANNOTATION[0]: FOREIGN_ANNOTATION[1]},
                "finalizers": None,
                "ownerReferences": None,
            },
            "spec": {"taints": [FOREIGN_TAINT], "unschedulable": None, "providerID": None},
        }

    patch_fresh(guarded.setter, guarded.node, reset)
    return guarded.node


def _read(guarded: Guarded) -> Obj:
    found = guarded.setter.get_node(guarded.node)
    assert found is not None, f"node {guarded.node} is gone"
    return found


def _operators_marks_kept(node: Obj) -> None:
    taints = (node.get("spec") or {}).get("taints") or []
    assert [t for t in taints if t["key"] == FOREIGN_TAINT["key"]] == [FOREIGN_TAINT], taints
    assert (node["metadata"].get("labels") or {}).get(FOREIGN_LABEL[0]) == FOREIGN_LABEL[1]
    assert ann.node_annotations(node).get(FOREIGN_ANNOTATION[0]) == FOREIGN_ANNOTATION[1]
    assert not (node.get("spec") or {}).get("unschedulable")


def _keys(node: Obj) -> list[str]:
    return [str(t["key"]) for t in (node.get("spec") or {}).get("taints") or []]


def _stamp(offset: float = 0.0) -> str:
    return datetime.fromtimestamp(time.time() + offset, UTC).isoformat().replace("+00:00", "Z")


# --------------------------------------------------------------------------- what the executor writes: admitted


def test_every_node_patch_the_executor_makes_is_admitted_for_its_service_account(guarded: Guarded, node: str) -> None:
    sa = guarded.compactor
    fence = ann.fence_key(IDENTITY)
    release = partial(ann.release_patch, identity=IDENTITY, reservation_key=RESERVATION_KEY)

    def send(build: Callable[[Obj], Obj | None], what: str) -> Obj:
        try:
            result = patch_fresh(sa, node, build)
        except ClusterError as exc:
            raise AssertionError(f"{what}, sent by {SERVICE_ACCOUNT}, was refused: {exc}") from None
        assert result is not None, f"{what}: the builder declined (the node is not in the state this step expects)"
        _operators_marks_kept(result)
        return result

    # a run: fence (steps/cordon.py), MIG re-cut (steps/recut.py), a failed re-cut, keepCordoned, release (recovery too)
    fenced = send(partial(ann.fence_patch, identity=IDENTITY, plan_id="plan-e2e", at=_stamp()), "the fence")
    assert ann.has_fence(fenced, IDENTITY) and ann.node_annotations(fenced)[ann.CORDONED_BY] == IDENTITY
    relabelled = send(lambda n: mig.relabel_patch("all-1g.10gb", {"nvidia.com/mig-1g.10gb": 7}), "the MIG re-cut label")
    assert mig.labels(relabelled)[mig.CONFIG_LABEL] == "all-1g.10gb" and ann.MIG_EXPECTED in ann.node_annotations(
        relabelled
    )
    send(lambda n: mig.failed_patch("mig-manager reported failed"), "the failed re-cut marks")
    send(lambda n: ann.keep_cordoned_patch(), "after_drain: keepCordoned")
    released = send(release, "the release")
    assert fence not in _keys(released) and not any(
        k.startswith("compactor.io/") for k in ann.node_annotations(released)
    )

    # a hold (steering by holds): the fence with held-for, released by the same function
    held = send(
        partial(ann.fence_patch, identity=IDENTITY, plan_id="plan-e2e", at=_stamp(), held_for="ml/train-0"), "a hold"
    )
    assert ann.is_held(held, IDENTITY)
    send(release, "the release of a hold")

    # a pending pod placed on a node drained for it: the fence swapped for the reservation, then released
    send(partial(ann.fence_patch, identity=IDENTITY, plan_id="plan-e2e", at=_stamp()), "the fence")
    reserved = send(
        partial(ann.reservation_patch, identity=IDENTITY, key=RESERVATION_KEY, pod="ml/pending-0", until=_stamp(300)),
        "the reservation for a pending pod",
    )
    assert fence not in _keys(reserved) and RESERVATION_KEY in _keys(reserved)
    assert RESERVATION_KEY not in _keys(send(release, "the release of a reservation"))

    # after_drain: taint (the freed node reserved at the end of the run), lifted at its TTL by release_patch
    send(partial(ann.fence_patch, identity=IDENTITY, plan_id="plan-e2e", at=_stamp()), "the fence")
    assert RESERVATION_KEY in _keys(
        send(
            partial(
                ann.reservation_patch,
                identity=IDENTITY,
                key=RESERVATION_KEY,
                pod="",
                until=_stamp(600),
                after_drain=True,
            ),
            "after_drain: taint",
        )
    )
    send(release, "the reservation lifted")

    # another installation's fence (compactor.io/fence-<installation>) and release
    other = "team-b"
    send(partial(ann.fence_patch, identity=other, plan_id="plan-b", at=_stamp()), "another installation's fence")
    assert ann.fence_key(other) not in _keys(
        send(
            partial(ann.release_patch, identity=other, reservation_key=RESERVATION_KEY),
            "another installation's release",
        )
    )

    # a node whose only taint is ours: the release drops spec.taints altogether (taints: null)
    patch_fresh(guarded.setter, node, lambda n: {"spec": {"taints": None}})
    fenced = sa.patch_node(node, ann.fence_patch(_read(guarded), IDENTITY, "plan-e2e", _stamp()))
    assert _keys(fenced) == [fence]
    last = ann.release_patch(fenced, IDENTITY, RESERVATION_KEY)
    assert last is not None and last["spec"] == {"taints": None}
    assert not sa.patch_node(node, last).get("spec", {}).get("taints")


# --------------------------------------------------------------------------- anything else: refused, for the service account only


def _without_foreign(node: Obj) -> list[Obj]:
    return [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("key") != FOREIGN_TAINT["key"]]


def _with_taints(taints: list[Obj]) -> Obj:
    return {"spec": {"taints": taints}}


def _fence_dropping_foreign(node: Obj) -> Obj:
    patch = ann.fence_patch(node, IDENTITY, "plan-e2e", _stamp())
    patch["spec"]["taints"] = [t for t in patch["spec"]["taints"] if t["key"] != FOREIGN_TAINT["key"]]
    return patch


def _changed_foreign(node: Obj) -> Obj:
    taints = [
        {**t, "value": "inference"} if t.get("key") == FOREIGN_TAINT["key"] else t
        for t in (node.get("spec") or {}).get("taints") or []
    ]
    return _with_taints(taints)


def _fence_with_effect(effect: str) -> Callable[[Obj], Obj]:
    """The executor's own fence patch, its fence taint given ``effect`` instead of NoSchedule."""

    def build(node: Obj) -> Obj:
        patch = ann.fence_patch(node, IDENTITY, "plan-e2e", _stamp())
        fence = ann.fence_key(IDENTITY)
        patch["spec"]["taints"] = [{**t, "effect": effect} if t["key"] == fence else t for t in patch["spec"]["taints"]]
        return patch

    return build


def _with_reservation(effect: str) -> Callable[[Obj], Obj]:
    def build(node: Obj) -> Obj:
        taint = {"key": RESERVATION_KEY, "value": "any", "effect": effect}
        return _with_taints([*((node.get("spec") or {}).get("taints") or []), taint])

    return build


FORBIDDEN: dict[str, tuple[Callable[[Obj], Obj], str, str]] = {
    # name: (the patch, built from the node as read; the policy's message; what the message names)
    "cordon": (lambda n: {"spec": {"unschedulable": True}}, SPEC, "spec.unschedulable"),
    "provider-id": (lambda n: {"spec": {"providerID": "fake://stolen"}}, SPEC, "spec.providerID"),
    "foreign-taint-removed": (
        lambda n: _with_taints(_without_foreign(n)),
        TAINTS,
        f"were [{FOREIGN_TAINT['key']}], now []",
    ),
    "foreign-taint-added": (
        lambda n: _with_taints(
            [*((n.get("spec") or {}).get("taints") or []), {"key": "example.com/x", "effect": "NoSchedule"}]
        ),
        TAINTS,
        "example.com/x",
    ),
    "foreign-taint-changed": (_changed_foreign, TAINTS, FOREIGN_TAINT["key"]),
    "fence-dropping-a-foreign-taint": (_fence_dropping_foreign, TAINTS, f"were [{FOREIGN_TAINT['key']}], now []"),
    # the compactor's own taints, with an effect that is not a fence: NoExecute evicts every pod at once, no PDB asked
    "fence-as-no-execute": (_fence_with_effect("NoExecute"), EFFECT, f"{ann.fence_key(IDENTITY)}:NoExecute"),
    "reservation-as-no-execute": (_with_reservation("NoExecute"), EFFECT, f"{RESERVATION_KEY}:NoExecute"),
    "fence-as-prefer-no-schedule": (
        _fence_with_effect("PreferNoSchedule"),
        EFFECT,
        f"{ann.fence_key(IDENTITY)}:PreferNoSchedule",
    ),
    "foreign-label-changed": (
        lambda n: {"metadata": {"labels": {FOREIGN_LABEL[0]: "speech"}}},
        LABELS,
        FOREIGN_LABEL[0],
    ),
    "foreign-label-added": (lambda n: {"metadata": {"labels": {"example.com/new": "x"}}}, LABELS, "example.com/new"),
    "foreign-label-removed": (lambda n: {"metadata": {"labels": {FOREIGN_LABEL[0]: None}}}, LABELS, FOREIGN_LABEL[0]),
    "mig-state-label": (lambda n: {"metadata": {"labels": {mig.STATE_LABEL: "pending"}}}, LABELS, mig.STATE_LABEL),
    "foreign-annotation-changed": (
        lambda n: {"metadata": {"annotations": {FOREIGN_ANNOTATION[0]: "me"}}},
        ANNOTATIONS,
        FOREIGN_ANNOTATION[0],
    ),
    "foreign-annotation-added": (
        lambda n: {"metadata": {"annotations": {"example.com/new": "x"}}},
        ANNOTATIONS,
        "example.com/new",
    ),
    "foreign-annotation-removed": (
        lambda n: {"metadata": {"annotations": {FOREIGN_ANNOTATION[0]: None}}},
        ANNOTATIONS,
        FOREIGN_ANNOTATION[0],
    ),
    "compactor-mark-with-a-foreign-annotation": (
        lambda n: {"metadata": {"annotations": {ann.CORDONED_BY: IDENTITY, "example.com/new": "x"}}},
        ANNOTATIONS,
        "example.com/new",
    ),
    "finalizer": (lambda n: {"metadata": {"finalizers": ["example.com/keep"]}}, METADATA, "metadata.finalizers"),
    "owner-reference": (
        lambda n: {
            "metadata": {
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Namespace",
                        "name": "default",
                        "uid": "00000000-0000-0000-0000-000000000000",
                    }
                ]
            }
        },
        METADATA,
        "metadata.ownerReferences",
    ),
}


def _what_matters(node: Obj) -> Obj:
    """Everything a forbidden patch could have changed (not the API server's bookkeeping nor the kubelet's status)."""
    meta = node["metadata"]
    annotations = {
        k: v for k, v in (meta.get("annotations") or {}).items() if k != "node.alpha.kubernetes.io/ttl"
    }  # the TTL controller's
    return {
        "labels": meta.get("labels"),
        "annotations": annotations,
        "finalizers": meta.get("finalizers"),
        "ownerReferences": meta.get("ownerReferences"),
        "spec": node.get("spec"),
    }


@pytest.mark.parametrize("case", FORBIDDEN, ids=str)
def test_any_other_node_change_by_the_service_account_is_refused_with_the_policys_message(
    guarded: Guarded, node: str, case: str
) -> None:
    build, message, names = FORBIDDEN[case]
    before = _read(guarded)
    with pytest.raises(ClusterError) as refused:
        patch_fresh(guarded.compactor, node, build)
    text = str(refused.value)
    assert _denied_by_policy(refused.value), text
    assert message in text and names in text, f"expected the policy's message {message!r} naming {names!r}: {text}"
    assert _what_matters(_read(guarded)) == _what_matters(before), "a refused patch changed the node"

    # the same request, for anyone else: admitted (server-side dry runs: the whole admission chain, nothing written)
    for who, client in (("a cluster admin", guarded.admin), (BYSTANDER, guarded.bystander)):
        try:
            patch_fresh(client, node, build)
        except ClusterError as exc:
            raise AssertionError(f"{case} by {who} was refused: {exc}") from None


def test_the_policy_type_checks_against_the_node_schema(kube: Kube, guarded: Guarded) -> None:
    """kube-apiserver checks every expression against the Node schema once the policy is stored: no warning."""
    status, found = api_request(kube, "GET", path("ValidatingAdmissionPolicy", POLICY_NAME))
    assert status == 200
    checked = found.get("status") or {}
    assert checked.get("observedGeneration") == found["metadata"]["generation"], checked
    assert not (checked.get("typeChecking") or {}).get("expressionWarnings"), checked
    assert not [c for c in checked.get("conditions") or [] if c.get("status") == "False"], checked

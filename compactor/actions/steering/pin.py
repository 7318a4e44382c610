"""What the steering admission policy (``manifests/steering/policy.yaml``) does to a pod, in Python.

The policy runs inside kube-apiserver; this is the same rule over plain dicts, for the dry run's
simulated replacements and the test fakes, so that they meet pods shaped as a real cluster makes
them. ``tests/e2e/test_steering_policy.py`` creates pods of every affinity shape on a real
kube-apiserver and checks that it and ``pinned`` agree.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

from compactor.actions.port.client import Obj
from compactor.actions.port.objects import ObjectView
from compactor.actions.steering.evidence import NOT_IN_EFFECT
from compactor.planner.rules.pins import STEERED_TO

__all__ = ["NOT_IN_EFFECT", "STEERED_TO", "creator_of", "pin_for", "pinned", "steered_to"]

POLICY_VERSION_ANNOTATION = "compactor.io/steering-policy-version"
POLICY_VERSION = "1"  # the policy's shape this code expects (detect.py refuses another)
# Users that create pods for a workload controller (kube-controller-manager with and without
# --use-service-account-credentials): the policy's `creators` condition.
CONTROLLER_USERS = (
    "system:serviceaccount:kube-system:replicaset-controller",
    "system:serviceaccount:kube-system:statefulset-controller",
    "system:kube-controller-manager",
)
# Who creates the pods of each kind of controller in a cluster whose kube-controller-manager runs with
# --use-service-account-credentials (kubeadm's and most distributions' default): one service account per controller.
_CREATORS = {
    "ReplicaSet": CONTROLLER_USERS[0],
    "StatefulSet": CONTROLLER_USERS[1],
    "Job": "system:serviceaccount:kube-system:job-controller",
    "DaemonSet": "system:serviceaccount:kube-system:daemon-set-controller",
}


def creator_of(pod: Obj) -> str:
    """The user that creates ``pod`` again once it is evicted: its controller's (an operator's own service account for a
    kind kube-controller-manager does not run)."""
    controller = ObjectView(pod).controller
    kind = str(controller.get("kind") or "") if controller else ""
    return _CREATORS.get(kind, f"system:serviceaccount:operators:{kind.lower() or 'nobody'}-controller")


def pin_for(pod: Obj, params: Mapping[str, str], creator: str) -> str | None:
    """The node the policy pins ``pod`` to when ``creator`` creates it with these parameters, or None (left as it is)."""
    if creator not in CONTROLLER_USERS:
        return None
    controller = ObjectView(pod).controller
    return params[str(controller["uid"])] if controller and controller.get("uid") in params else None


def pinned(pod: Obj, node: str) -> Obj:
    """``pod`` as the policy admits it: ``metadata.name In [node]`` ANDed into every required node selector term (or the
    only term when it has none) and annotated ``compactor.io/steered-to: node``."""
    result = copy.deepcopy(pod)
    field = {"key": "metadata.name", "operator": "In", "values": [node]}
    spec = result.setdefault("spec", {})
    node_affinity = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [{"matchFields": [field]}]
        }
    else:
        for term in required.get("nodeSelectorTerms") or []:
            term.setdefault("matchFields", []).append(dict(field))
    result.setdefault("metadata", {}).setdefault("annotations", {})[STEERED_TO] = node
    return result


def steered_to(pod: Obj) -> str:
    """The node the policy pinned ``pod`` to, "" when it did not: read from the required node affinity it added
    (``metadata.name In [node]`` in every required term), which is immutable once the pod exists. The annotation
    ``compactor.io/steered-to`` beside it is for people: the pod's owner may remove it (issue 43), so it decides nothing
    here."""
    affinity = ObjectView(pod).spec.get("affinity") or {}
    required = ((affinity.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")) or {}
    common: set[str] | None = None
    for term in required.get("nodeSelectorTerms") or []:
        named = {
            str(field["values"][0])
            for field in (term or {}).get("matchFields") or []
            if field.get("key") == "metadata.name"
            and field.get("operator") == "In"
            and len(field.get("values") or []) == 1
        }
        common = named if common is None else common & named
    return next(iter(common)) if common is not None and len(common) == 1 else ""

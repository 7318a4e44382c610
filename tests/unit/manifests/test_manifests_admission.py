"""The admission policies shipped: manifests/steering (the MutatingAdmissionPolicy that pins a replacement, and its
parameter ConfigMap) and manifests/guard (the ValidatingAdmissionPolicies that hold the service account to the
node, pod and scale fields a move writes, and keep everyone else from writing the compactor's ConfigMaps).

tests/e2e/test_node_guard.py, test_guard_policies.py and test_steering_policy.py send the same to a real
kube-apiserver.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from compactor.actions.cluster.migmanager import CONFIG_LABEL as MIG_CONFIG_LABEL
from compactor.actions.cluster.owners import DELETION_COST
from compactor.actions.port.annotations import FENCE_TAINT_PREFIX, OUR_ANNOTATIONS, STATE_CONFIGMAP
from compactor.actions.services.memory import HISTORY_CONFIGMAP
from compactor.actions.services.surge import SURGE_NOTE, SURGED_BY
from compactor.actions.steering.pin import CONTROLLER_USERS, POLICY_VERSION, POLICY_VERSION_ANNOTATION
from compactor.app.last_run import LAST_RUN_CONFIGMAP
from compactor.metrics.fill_first import FILL_FIRST_LABEL
from compactor.settings.origins import Settings
from tests.manifests import BASE, GUARD, NAMESPACE, STEERING, mounted_settings, one_object


def test_the_steering_policy_reads_the_parameter_configmap_the_compactor_writes() -> None:
    defaults = Settings()
    name, namespace = defaults.steering.policy_name, defaults.executor.state_namespace
    policy = one_object(STEERING, "MutatingAdmissionPolicy", name)
    binding = one_object(STEERING, "MutatingAdmissionPolicyBinding", name)
    parameters = one_object(BASE, "ConfigMap", name)
    assert parameters["metadata"]["namespace"] == namespace and not parameters.get("data")
    assert binding["spec"]["policyName"] == name
    assert binding["spec"]["paramRef"] == {"name": name, "namespace": namespace, "parameterNotFoundAction": "Allow"}
    assert policy["metadata"]["annotations"][POLICY_VERSION_ANNOTATION] == POLICY_VERSION  # what detect.py insists on
    spec = policy["spec"]
    assert spec["paramKind"] == {"apiVersion": "v1", "kind": "ConfigMap"} and spec["failurePolicy"] == "Ignore"
    assert spec["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
    ]
    creators = next(c["expression"] for c in spec["matchConditions"] if c["name"] == "creators")
    assert re.findall(r"'([^']+)'", creators) == list(CONTROLLER_USERS)  # the pin's Python mirror admits the same users


def test_the_node_guard_holds_the_service_account_to_the_node_fields_the_executor_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """manifests/guard: node UPDATEs by the base's service account only, denied (403) unless they change nothing but taints
    and annotations under compactor.io/ and the MIG config label, which cover every key the executor writes on a node.
    tests/e2e/test_node_guard.py sends each of its node patches, and each forbidden change, to a real kube-apiserver."""
    name = "gpu-compactor-node-guard"
    spec = one_object(GUARD, "ValidatingAdmissionPolicy", name)["spec"]
    assert one_object(GUARD, "ValidatingAdmissionPolicyBinding", name)["spec"] == {
        "policyName": name,
        "validationActions": ["Deny"],
    }
    account = one_object(BASE, "ServiceAccount")["metadata"]
    assert [c["expression"] for c in spec["matchConditions"]] == [
        f"request.userInfo.username == 'system:serviceaccount:{account['namespace']}:{account['name']}'"
    ]
    assert spec["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["nodes"]}
    ]
    assert spec["failurePolicy"] == "Fail" and "paramKind" not in spec
    owned = "compactor.io/"
    variables = {v["name"]: v["expression"] for v in spec["variables"]}
    owned_labels = f"!(k in ['{MIG_CONFIG_LABEL}', '{FILL_FIRST_LABEL}'])"  # a re-cut; prevention's tiers
    assert variables["labels"].count(owned_labels) == 2  # changed or added, and removed
    assert variables["annotations"].count(f"!k.startsWith('{owned}')") == 2
    assert all(f"!t.key.startsWith('{owned}')" in variables[v] for v in ("oldTaints", "newTaints"))
    settings = mounted_settings(tmp_path, monkeypatch).executor
    for key in (settings.taint_key, FENCE_TAINT_PREFIX, *OUR_ANNOTATIONS):
        assert key.startswith(owned), f"{key}: the executor writes it on nodes, the guard refuses it (outside {owned})"
    # its own taints only as fences: a NoExecute one would evict every pod of the node, no PodDisruptionBudget asked
    assert "variables.ownTaints.all(t, t.effect == 'NoSchedule')" in [v["expression"] for v in spec["validations"]]
    for validation in spec["validations"]:
        assert validation["reason"] == "Forbidden"
        assert validation["messageExpression"].startswith(f"'{validation['message']}; "), (
            "the message, then what was changed"
        )


def _guard(name: str) -> dict[str, Any]:
    """The spec of the guard policy ``name``, checked for what every guard shares: bound with Deny, no parameters,
    failurePolicy Fail (an expression that fails to evaluate denies), each message first in its messageExpression."""
    spec: dict[str, Any] = one_object(GUARD, "ValidatingAdmissionPolicy", name)["spec"]
    assert one_object(GUARD, "ValidatingAdmissionPolicyBinding", name)["spec"] == {
        "policyName": name,
        "validationActions": ["Deny"],
    }
    assert spec["failurePolicy"] == "Fail" and "paramKind" not in spec
    for validation in spec["validations"]:
        assert validation["reason"] == "Forbidden"
        assert validation["messageExpression"].startswith(f"'{validation['message']}; "), validation["message"]
    return spec


def test_the_pod_and_scale_guards_hold_the_service_account_to_what_a_move_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """manifests/guard: pod UPDATEs and Deployment scales by the base's service account only; the keys they let it write
    are the ones compactor/actions/services/surge.py and steps/steer.py write. tests/e2e/test_guard_policies.py sends every such
    patch, and each forbidden change, to a real kube-apiserver."""
    account = one_object(BASE, "ServiceAccount")["metadata"]
    itself = [f"request.userInfo.username == 'system:serviceaccount:{account['namespace']}:{account['name']}'"]
    pods = _guard("gpu-compactor-pod-guard")
    assert [c["expression"] for c in pods["matchConditions"]] == itself
    assert pods["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods"]}
    ]
    variables = {v["name"]: v["expression"] for v in pods["variables"]}
    assert variables["labels"].count(f"k != '{SURGED_BY}'") == 2  # changed or added, and removed
    owned = "compactor.io/"
    assert variables["annotations"].count(f"!k.startsWith('{owned}')") == 2
    assert variables["annotations"].count(f"k != '{DELETION_COST}'") == 2
    assert SURGE_NOTE.startswith(owned), f"{SURGE_NOTE}: written on pods, refused by the pod guard"
    settings = mounted_settings(tmp_path, monkeypatch).executor
    assert settings.taint_key.startswith(owned), "the toleration of the reservation taint would be refused"
    assert f"t.key.startsWith('{owned}')" in variables["foreignTolerations"]

    scale = _guard("gpu-compactor-scale-guard")
    assert [c["expression"] for c in scale["matchConditions"]] == itself
    assert scale["matchConstraints"]["resourceRules"] == [
        {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["deployments/scale"]}
    ]


def test_the_state_guard_keeps_everyone_else_from_writing_the_compactors_configmaps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """manifests/guard/state.yaml: CREATE and UPDATE (never DELETE) of exactly the ConfigMaps the code writes, in the
    base's namespace, by anyone but the base's service account."""
    settings = mounted_settings(tmp_path, monkeypatch)
    account = one_object(BASE, "ServiceAccount")["metadata"]
    assert settings.executor.state_namespace == account["namespace"] == NAMESPACE
    spec = _guard("gpu-compactor-state-guard")
    (rule,) = spec["matchConstraints"]["resourceRules"]
    assert (rule["apiGroups"], rule["resources"], rule["operations"]) == ([""], ["configmaps"], ["CREATE", "UPDATE"])
    assert sorted(rule["resourceNames"]) == sorted(
        [STATE_CONFIGMAP, HISTORY_CONFIGMAP, LAST_RUN_CONFIGMAP, settings.steering.policy_name]
    )
    assert [c["expression"] for c in spec["matchConditions"]] == [
        f"request.namespace == '{NAMESPACE}'",
        f"request.userInfo.username != 'system:serviceaccount:{account['namespace']}:{account['name']}'",
    ]
    variables = {v["name"]: v["expression"] for v in spec["variables"]}
    assert variables["steering"] == f"object.metadata.name == '{settings.steering.policy_name}'"
    assert one_object(BASE, "ConfigMap", settings.steering.policy_name).get("data") in (None, {}), (
        "the admin creates the steering ConfigMap: the guard admits it only empty"
    )

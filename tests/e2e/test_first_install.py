"""The README's install commands, applied in the order it gives them, with ``kubectl apply -k``, on a cluster without
gpu-compactor (issue [18]: "each README command works in order on an empty cluster").

The commands are read from the README's "Running in the cluster" section itself (its ``sh`` blocks and the commands it
names in the text), so a README that reorders or renames them is tested as written. What the README assumes is there
already is made first, as a cluster would have it: the GPU Operator's namespace (``manifests/gpu-operator``: "once the
operator is installed") and the Prometheus Operator's two CRDs (``manifests/monitoring``: "for the Prometheus
Operator"). The images stay the README's placeholder: nothing here needs a compactor pod to run (the CronJob's first
run is 30 minutes away; the controller's pod never binds, the cluster has no node for it).

Afterwards the cluster is left as found: every object the commands made is deleted but the steering policy and its
binding, which the suite keeps installed (``tests/e2e/steering.py``: deleted and made again, a policy can stay inert on
kube-apiserver v1.36.2), and the state guard is waited out, so later tests can write state from the admin's kubeconfig.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import _delete_namespace, _not_terminating
from tests.e2e.helpers import NEEDS_CLUSTER, STATE_NAMESPACE, Kube, api_request, get_or_none, raw, wait_for

pytestmark = [NEEDS_CLUSTER, pytest.mark.e2e, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
COMMAND = re.compile(r"kubectl (?:apply|delete) -k manifests/[\w/-]+")
KEPT = "manifests/steering"  # left installed, as the suite keeps it
OPERATOR_NAMESPACE = "gpu-operator"
CRDS = {"servicemonitors": "ServiceMonitor", "prometheusrules": "PrometheusRule"}
STATE_GUARD_PROBE = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gpu-compactor-state"}}


def readme_commands() -> list[str]:
    """Every ``kubectl apply|delete -k manifests/...`` of the README's "Running in the cluster", in reading order."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Running in the cluster\n", 1)[1].split("\n## ", 1)[0]
    return COMMAND.findall(section)


def kubectl() -> str:
    """kubectl on PATH, or the one beside realk8s's kubeconfig (../shared/realk8s keeps its binaries there)."""
    beside = Path(os.environ["KUBECONFIG"]).parent / "bin" / "kubectl"
    found = os.environ.get("KUBECTL") or shutil.which("kubectl") or (str(beside) if beside.exists() else None)
    if found is None:
        pytest.fail("kubectl not found: put it on PATH or set KUBECTL (the README's commands are kubectl's)")
    return found


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [kubectl(), *args], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False, env=os.environ.copy()
    )
    if check:
        assert result.returncode == 0, f"kubectl {' '.join(args)} (exit {result.returncode}):\n{result.stderr}"
    return result


def crd(plural: str, kind: str) -> dict[str, object]:
    """A CRD of the Prometheus Operator's group taking any spec, as far as this test needs one."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.monitoring.coreos.com"},
        "spec": {
            "group": "monitoring.coreos.com",
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
            ],
        },
    }


@pytest.fixture
def empty_cluster(kube: Kube) -> Iterator[list[str]]:
    """A cluster without gpu-compactor but with what the README assumes; yields the commands to run, then cleans up."""
    wait_for(
        _not_terminating(kube, STATE_NAMESPACE), timeout=120, interval=1, what=f"namespace {STATE_NAMESPACE} to go"
    )
    if get_or_none(kube.core.read_namespace, STATE_NAMESPACE) is not None:
        pytest.fail(f"namespace {STATE_NAMESPACE} exists: this test installs gpu-compactor on a cluster without it")
    made_crds = []
    for plural, kind in CRDS.items():
        path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{plural}.monitoring.coreos.com"
        if api_request(kube, "GET", path)[0] == 404:
            status, _ = api_request(
                kube, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd(plural, kind)
            )
            assert status == 201, status
            made_crds.append(path)
    made_operator = get_or_none(kube.core.read_namespace, OPERATOR_NAMESPACE) is None
    if made_operator:
        kube.core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OPERATOR_NAMESPACE}})
    for path in made_crds:  # served once Established
        wait_for(lambda path=path: _established(kube, path), timeout=60, interval=0.5, what=f"{path} established")
    commands = readme_commands()
    try:
        yield commands
    finally:
        applied = {c.split()[-1] for c in commands if " apply " in c} - {KEPT}
        guard = "manifests/guard"
        if guard in applied:
            run("delete", "-k", guard, "--ignore-not-found", check=False)
            _wait_state_guard_gone(kube)
        for path in sorted(applied - {guard}):
            run("delete", "-k", path, "--ignore-not-found", "--wait=false", check=False)
        _delete_namespace(kube, STATE_NAMESPACE)
        if made_operator:
            _delete_namespace(kube, OPERATOR_NAMESPACE)
        for path in made_crds:
            api_request(kube, "DELETE", path)


def _established(kube: Kube, path: str) -> tuple[bool, str]:
    conditions = (api_request(kube, "GET", path)[1].get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions), str(conditions)


def _wait_state_guard_gone(kube: Kube) -> None:
    """Until an admin may create the compactor's state again (a server-side dry run), as later tests do."""

    def admitted() -> tuple[bool, str]:
        status, body = api_request(
            kube, "POST", f"/api/v1/namespaces/{STATE_NAMESPACE}/configmaps?dryRun=All", STATE_GUARD_PROBE
        )
        return status in (201, 404), f"HTTP {status}: {body.get('message', '')}"

    wait_for(admitted, timeout=60, interval=0.5, what="the state guard gone")


def test_the_readme_install_commands_work_in_order_on_a_cluster_without_gpu_compactor(
    kube: Kube, empty_cluster: list[str]
) -> None:
    commands = empty_cluster
    assert commands[:3] == [
        "kubectl apply -k manifests/namespace",
        "kubectl apply -k manifests/mode/report",
        "kubectl apply -k manifests/overlays/cronjob",
    ], commands
    assert {"kubectl apply -k manifests/steering", "kubectl apply -k manifests/guard"} <= set(commands), commands
    for command in commands:
        verb, path = command.split()[1], command.split()[-1]
        run(verb, "-k", path)
        if path.startswith("manifests/mode/"):
            mode = path.rsplit("/", 1)[1]
            present = get_or_none(kube.core.read_namespaced_config_map, "gpu-compactor-mode", STATE_NAMESPACE)
            assert (present is not None) == (verb == "apply"), (command, present)
            if present is not None:
                assert present["data"]["COMPACTOR_MODE"] == mode, present
        if path.startswith("manifests/overlays/"):  # issue 43: the default install is guarded
            for guard in ("node", "pod", "scale", "state"):
                policy = (
                    f"/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/gpu-compactor-{guard}-guard"
                )
                assert api_request(kube, "GET", policy)[0] == 200, (command, guard)
        # deleting a mode, as the README says, leaves the namespace and what lives in it
        namespace = get_or_none(kube.core.read_namespace, STATE_NAMESPACE)
        assert namespace is not None and namespace["status"]["phase"] == "Active", (command, namespace)

    assert get_or_none(kube.core.read_namespaced_config_map, "gpu-compactor-config", STATE_NAMESPACE) is not None
    assert get_or_none(kube.core.read_namespaced_config_map, "gpu-compactor-steering", STATE_NAMESPACE) is not None
    assert api_request(kube, "GET", f"/apis/batch/v1/namespaces/{STATE_NAMESPACE}/cronjobs/gpu-compactor")[0] == 200
    assert raw(kube.apps.read_namespaced_deployment, "gpu-compactor", STATE_NAMESPACE)["metadata"]["name"]
    for plural in CRDS:
        listed = api_request(kube, "GET", f"/apis/monitoring.coreos.com/v1/namespaces/{STATE_NAMESPACE}/{plural}")[1]
        assert [i["metadata"]["name"] for i in listed.get("items") or []] == ["gpu-compactor"], listed

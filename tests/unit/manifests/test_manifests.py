"""The deploy files as kustomize builds them: manifests/ (a kustomize base, the cronjob and controller overlays,
monitoring, steering, guard, gpu-operator, the modes), and the install commands the docs give.

Covers: every kustomization resolves (each resource exists, parses, is listed once and names its
kind and namespace; when kubectl is installed, ``kubectl kustomize`` builds the same objects); each
overlay installs the base and sets the image its workloads name; the docs install with ``-k``; a first install
only plans, each mode's kustomization sets its mode, the README creates the namespace before anything in it.

The rest of manifests/ by concern: RBAC (``test_manifests_rbac.py``, over the requests
``tests/kube_requests.py`` finds in compactor/kube, itself checked by ``test_request_finder.py``), the admission
policies (``test_manifests_admission.py``), the workloads, their config and image
(``test_manifests_workloads.py``), the alerts (``test_alert_rules.py``) and the dashboard (``test_dashboard.py``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from compactor.settings.origins import load_settings
from tests.manifests import (
    BASE,
    CONTROLLER,
    CRONJOB,
    GPU_OPERATOR,
    GUARD,
    KUSTOMIZATIONS,
    MANIFESTS,
    MODES,
    MONITORING,
    NAMESPACE,
    NAMESPACE_ONLY,
    OPERATOR_NAMESPACE_NAME,
    OVERLAYS,
    PREVENTION,
    ROOT,
    STEERING,
    WORKLOADS,
    Doc,
    containers_of,
    kustomize_build,
    mounted_settings,
    object_key,
    one_object,
    pod_spec,
    read_kustomization,
    resolve_kustomization,
    shown,
)

CLUSTER_SCOPED = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
}
# The name the workloads give their image, and the placeholder each overlay's `images:` entry turns it into.
IMAGE = "gpu-compactor"
IMAGE_PLACEHOLDER = {"name": IMAGE, "newName": "REGISTRY/gpu-compactor", "newTag": "TAG"}
KUBECTL = os.environ.get("KUBECTL") or shutil.which("kubectl")


def _kubectl_kustomize(directory: Path) -> list[Doc]:
    assert KUBECTL is not None
    built = subprocess.run(
        [KUBECTL, "kustomize", str(directory)], capture_output=True, text=True, timeout=120, check=False
    )
    assert built.returncode == 0, f"kubectl kustomize {shown(directory)}: {built.stderr.strip()}"
    return [doc for doc in yaml.safe_load_all(built.stdout) if doc is not None]


@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=lambda d: str(d.relative_to(MANIFESTS)))
def test_each_kustomization_resolves_to_objects_that_name_their_kind_and_namespace(directory: Path) -> None:
    namespace = OPERATOR_NAMESPACE_NAME if directory == GPU_OPERATOR else NAMESPACE
    for path, doc in resolve_kustomization(directory):
        where = f"{shown(path)}: {doc.get('kind')} {doc.get('metadata', {}).get('name')}"
        assert doc.get("apiVersion") and doc.get("kind") and doc.get("metadata", {}).get("name"), where
        if doc["kind"] not in CLUSTER_SCOPED:
            assert doc["metadata"].get("namespace") == namespace, f"{where}: not in namespace {namespace}"
    if KUBECTL is not None:  # the real build agrees with the resolution every other test reads
        built = _kubectl_kustomize(directory)
        assert sorted(json.dumps(doc, sort_keys=True) for doc in built) == sorted(
            json.dumps(doc, sort_keys=True) for doc in kustomize_build(directory)
        )
        if any(doc["kind"] == "Namespace" for doc in built):
            assert built[0]["kind"] == "Namespace", "kubectl apply -k would create objects before their namespace"


def test_every_yaml_file_under_manifests_is_part_of_a_kustomization() -> None:
    listed = {path for directory in KUSTOMIZATIONS for path, _ in resolve_kustomization(directory)}
    files = {p for p in MANIFESTS.rglob("*") if p.suffix in (".yaml", ".yml") and p.name != "kustomization.yaml"}
    assert files == listed, f"not in any kustomization: {sorted(map(shown, files - listed))}"


@pytest.mark.parametrize("overlay", OVERLAYS, ids=lambda d: d.name)
def test_the_namespace_comes_first_so_apply_creates_it_before_its_objects(overlay: Path) -> None:
    assert read_kustomization(overlay)["resources"][0] == "../../base"
    assert kustomize_build(overlay)[0]["kind"] == "Namespace"


def test_the_overlays_install_the_base_the_guards_and_either_the_cronjob_or_the_controller() -> None:
    base = {object_key(doc) for doc in kustomize_build(BASE)}
    cronjob = {object_key(doc) for doc in kustomize_build(CRONJOB)}
    controller = {object_key(doc) for doc in kustomize_build(CONTROLLER)}
    assert base <= cronjob and base <= controller
    guards = {object_key(doc) for doc in kustomize_build(GUARD)}
    assert {kind for kind, _, _ in guards} == {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
    assert len(guards) == 8, "the node, pod, scale and state guards, each a policy and its binding"
    assert cronjob - base == guards | {("CronJob", NAMESPACE, "gpu-compactor")}
    assert controller - base == guards | {
        ("Deployment", NAMESPACE, "gpu-compactor"),
        ("Service", NAMESPACE, "gpu-compactor-metrics"),
        ("NetworkPolicy", NAMESPACE, "gpu-compactor-metrics"),
    }
    assert {kind for kind, _, _ in base} == {
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ConfigMap",
    }


@pytest.mark.parametrize("overlay", OVERLAYS, ids=lambda d: d.name)
def test_the_overlay_sets_the_image_its_workloads_name(overlay: Path) -> None:
    assert read_kustomization(overlay)["images"] == [IMAGE_PLACEHOLDER]
    written = {
        container["image"]
        for _, doc in resolve_kustomization(overlay)
        if doc["kind"] in WORKLOADS
        for container in containers_of(doc)
    }
    assert written == {IMAGE}, f"the workloads name {written}; the images: entry replaces {IMAGE}"
    built = {
        container["image"]
        for doc in kustomize_build(overlay)
        if doc["kind"] in WORKLOADS
        for container in containers_of(doc)
    }
    assert built == {f"{IMAGE_PLACEHOLDER['newName']}:{IMAGE_PLACEHOLDER['newTag']}"}


@pytest.mark.parametrize("directory", [BASE, MONITORING], ids=lambda d: d.name)
def test_the_base_and_monitoring_run_no_image_of_their_own(directory: Path) -> None:
    assert "images" not in read_kustomization(directory)
    assert not [doc for doc in kustomize_build(directory) if doc["kind"] in WORKLOADS]


# ----- the docs' install commands ---------------------------------------------------------------------


def _install_texts() -> dict[Path, str]:
    files = [
        ROOT / "README.md",
        *sorted((ROOT / "docs").glob("*.md")),
        ROOT / "examples" / "README.md",
        ROOT / "Dockerfile",
        *sorted(MANIFESTS.rglob("*.yaml")),
    ]
    return {path: path.read_text(encoding="utf-8") for path in files}


def test_the_docs_install_with_kustomizations_that_exist() -> None:
    applied: set[Path] = set()
    for path, text in _install_texts().items():
        assert not re.search(r"kubectl apply -f\s+\S*manifests", text), (
            f"{shown(path)} still installs with kubectl apply -f"
        )
        for target in re.findall(r"kubectl apply -k\s+([\w./-]+)", text):
            directory = (ROOT / target).resolve()
            assert directory in KUSTOMIZATIONS, f"{shown(path)}: kubectl apply -k {target}: not a kustomization"
            applied.add(directory)
        for name in re.findall(r"kustomize edit set image ([\w./-]+)=", text):
            assert name == IMAGE, (
                f"{shown(path)}: kustomize edit set image {name}=...: the workloads name their image {IMAGE}"
            )
    assert applied == {
        NAMESPACE_ONLY,
        CRONJOB,
        CONTROLLER,
        MONITORING,
        STEERING,
        PREVENTION,
        GPU_OPERATOR,
        GUARD,
        *MODES,
    }
    readme = _install_texts()[ROOT / "README.md"]
    for step in (
        "docker build -t REGISTRY/gpu-compactor:TAG .",
        "docker push REGISTRY/gpu-compactor:TAG",
        f"kustomize edit set image {IMAGE}=REGISTRY/gpu-compactor:TAG",
    ):
        assert step in readme, f"README.md does not say {step}"


def test_the_examples_readme_points_only_inside_the_repository() -> None:
    readme = ROOT / "examples" / "README.md"
    text = readme.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)", text) + re.findall(r"`(\.\./[^`\s]+)`", text)
    for target in targets:
        if re.match(r"[a-z]+://", target):
            continue
        resolved = (readme.parent / target).resolve()
        assert resolved.is_relative_to(ROOT) and resolved.exists(), (
            f"examples/README.md points at {target}, not a file of the repository"
        )


# ----- a first install that cannot hurt (issue 14, item 4) --------------------------------------------


def test_the_shipped_config_plans_without_acting_and_each_mode_kustomization_sets_its_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert mounted_settings(tmp_path, monkeypatch).mode == "plan"
    for directory in MODES:
        (config_map,) = [doc for doc in kustomize_build(directory) if doc["kind"] == "ConfigMap"]
        assert (config_map["metadata"]["name"], config_map["metadata"]["namespace"]) == (
            "gpu-compactor-mode",
            NAMESPACE,
        )
        monkeypatch.setenv("COMPACTOR_MODE", config_map["data"]["COMPACTOR_MODE"])
        path = tmp_path / "compactor.yaml"
        assert load_settings(str(path)).mode == directory.name  # the environment overrides the mounted file's plan


def test_both_workloads_read_the_mode_and_run_without_it(tmp_path: Path) -> None:
    for overlay, kind in ((CRONJOB, "CronJob"), (CONTROLLER, "Deployment")):
        (container,) = pod_spec(one_object(overlay, kind))["containers"]
        assert {"configMapRef": {"name": "gpu-compactor-mode", "optional": True}} in container["envFrom"], overlay


def readme_apply_commands() -> list[Path]:
    """The kustomizations the README applies with `kubectl apply -k`, in the order it lists them."""
    readme = (ROOT / "README.md").read_text()
    return [ROOT / found for found in re.findall(r"kubectl apply -k (manifests/[\w/-]+)", readme)]


def test_the_readme_creates_the_namespace_before_anything_in_it() -> None:
    """Issue 18: the first install applied a mode before the overlay that brought the namespace, and
    `kubectl apply -k manifests/mode/report` failed on an empty cluster ("namespaces gpu-compactor not found")."""
    created: set[str] = set()
    for kustomization in readme_apply_commands():
        built = kustomize_build(kustomization)
        created |= {doc["metadata"]["name"] for doc in built if doc["kind"] == "Namespace"}
        used = {doc["metadata"].get("namespace") for doc in built} & {NAMESPACE}
        assert used <= created, f"{kustomization.relative_to(ROOT)} needs namespace {NAMESPACE} before it exists"
    assert NAMESPACE in created


@pytest.mark.parametrize("mode", MODES, ids=lambda path: path.name)
def test_deleting_a_mode_leaves_the_namespace_and_its_state(mode: Path) -> None:
    """`kubectl delete -k manifests/mode/apply` (going back to the default mode) deletes what the mode holds:
    were the namespace among it, the history, the runs' results and the workloads would go with it."""
    assert [doc["kind"] for doc in kustomize_build(mode)] == ["ConfigMap"]


def test_only_prometheus_reaches_the_controller_and_only_on_its_metrics_port() -> None:
    """/metrics has no authentication of its own: the controller overlay's NetworkPolicy isolates its pods for ingress
    and admits the monitoring namespace on the metrics port alone (the kubelet's probes come from the node, which a
    NetworkPolicy always admits)."""
    built = kustomize_build(CONTROLLER)
    (policy,) = [d for d in built if d["kind"] == "NetworkPolicy"]
    (deployment,) = [d for d in built if d["kind"] == "Deployment"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    selector = policy["spec"]["podSelector"]["matchLabels"]
    assert selector.items() <= pod_labels.items(), "it selects the controller's pods"
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    assert rule["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    ports = [p["name"] for c in deployment["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])]
    assert rule["ports"] == [{"port": "http-metrics", "protocol": "TCP"}] and ports == ["http-metrics"]

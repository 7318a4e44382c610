"""The deploy files: manifests/ (RBAC, CronJob, controller Deployment, monitoring), config/compactor.yaml, the Dockerfile.

Covers: every YAML document parses and names its kind; RBAC grants no pod delete and
no wildcard, and does grant what the executor calls; the CronJob and the Deployment
command lines are accepted by ``compactor``'s own argument parser; the mounted config
and the example config load; the example config lists every setting at its default;
the Service, probes and alerts line up with the container and the metric names.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from compactor.cli import build_parser
from compactor.kube.cluster_client import DEFAULT_TIMEOUT
from compactor.settings import Settings, load_settings, worst_case_run_seconds

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
NAMESPACE = "gpu-compactor"
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
METRICS = ("gpu_compactor_fragmentation_rate", "gpu_compactor_blocked_pending_pods", "gpu_compactor_runs_total",
           "gpu_compactor_cordoned_nodes")

Doc = dict[str, Any]


def _files() -> list[Path]:
    return sorted(p for p in MANIFESTS.rglob("*") if p.suffix in (".yaml", ".yml"))


def _documents() -> list[tuple[Path, Doc]]:
    found = []
    for path in _files():
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if doc is not None:
                found.append((path, doc))
    return found


def _one(kind: str, name: str = "gpu-compactor") -> Doc:
    matches = [doc for _, doc in _documents() if doc.get("kind") == kind and doc["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected one {kind} {name} in manifests/, found {len(matches)}"
    return matches[0]


def _pod_spec(workload: Doc) -> Doc:
    if workload["kind"] == "CronJob":
        spec: Doc = workload["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    else:
        spec = workload["spec"]["template"]["spec"]
    return spec


def _argv(workload: Doc) -> list[str]:
    """The compactor arguments of the workload's container (the image's ENTRYPOINT is ``compactor``)."""
    (container,) = _pod_spec(workload)["containers"]
    command = list(container.get("command") or [])
    if command:
        assert command[0] == "compactor", f"{workload['kind']}: command {command} does not run compactor"
        command = command[1:]
    return [*command, *(container.get("args") or [])]


def test_every_manifest_parses_and_names_its_kind_and_namespace() -> None:
    assert _files(), "manifests/ holds no YAML"
    for path, doc in _documents():
        where = f"{path.relative_to(ROOT)}: {doc.get('kind')} {doc.get('metadata', {}).get('name')}"
        assert doc.get("apiVersion") and doc.get("kind") and doc.get("metadata", {}).get("name"), where
        if doc["kind"] not in CLUSTER_SCOPED:
            assert doc["metadata"].get("namespace") == NAMESPACE, f"{where}: not in namespace {NAMESPACE}"


def test_the_namespace_sorts_first_so_a_plain_apply_creates_it_before_its_objects() -> None:
    top = sorted(p for p in MANIFESTS.glob("*.yaml"))
    first = list(yaml.safe_load_all(top[0].read_text(encoding="utf-8")))
    assert [d["kind"] for d in first if d] == ["Namespace"], f"{top[0].name} should hold only the Namespace"


def _rules(kind: str) -> list[Doc]:
    rules: list[Doc] = _one(kind)["rules"]
    return rules


@pytest.mark.parametrize("kind", ["ClusterRole", "Role"])
def test_rbac_grants_no_wildcards(kind: str) -> None:
    for rule in _rules(kind):
        assert "*" not in rule.get("verbs", []), f"{kind}: wildcard verb in {rule}"
        assert "*" not in rule.get("resources", []), f"{kind}: wildcard resource in {rule}"
        assert "*" not in rule.get("apiGroups", []), f"{kind}: wildcard API group in {rule}"


def test_no_role_can_delete_pods() -> None:
    for _, doc in _documents():
        if doc["kind"] not in ("ClusterRole", "Role"):
            continue
        for rule in doc["rules"]:
            if "" in rule.get("apiGroups", []) and "pods" in rule.get("resources", []):
                assert not {"delete", "deletecollection"} & set(rule["verbs"]), f"{doc['kind']} may delete pods: {rule}"


def _granted(kind: str, group: str, resource: str) -> set[str]:
    return {verb for rule in _rules(kind) if group in rule["apiGroups"] and resource in rule["resources"] for verb in rule["verbs"]}


@pytest.mark.parametrize(
    ("kind", "group", "resource", "verbs"),
    [
        pytest.param("ClusterRole", "", "nodes", {"get", "list", "watch", "patch"}, id="nodes"),
        pytest.param("ClusterRole", "", "pods", {"get", "list", "watch"}, id="pods"),
        pytest.param("ClusterRole", "", "pods/eviction", {"create"}, id="evictions"),
        pytest.param("ClusterRole", "policy", "poddisruptionbudgets", {"get", "list", "watch"}, id="pdbs"),
        pytest.param("ClusterRole", "", "configmaps", {"get", "list", "watch"}, id="mig-parted-configmaps"),
        pytest.param("ClusterRole", "", "events", {"create"}, id="core-events"),
        pytest.param("ClusterRole", "events.k8s.io", "events", {"create"}, id="events-k8s-io"),
        pytest.param("Role", "", "configmaps", {"get", "create", "update", "delete"}, id="state-configmap"),
        pytest.param("Role", "coordination.k8s.io", "leases", {"get", "create", "update"}, id="leader-election"),
    ],
)
def test_rbac_grants_exactly_what_the_compactor_calls(kind: str, group: str, resource: str, verbs: set[str]) -> None:
    assert _granted(kind, group, resource) == verbs


def test_the_roles_are_bound_to_the_service_account() -> None:
    account = _one("ServiceAccount")["metadata"]
    for binding, role in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        doc = _one(binding)
        assert doc["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": role, "name": "gpu-compactor"}
        assert doc["subjects"] == [{"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}]
    for kind in ("CronJob", "Deployment"):
        assert _pod_spec(_one(kind))["serviceAccountName"] == account["name"]


def test_the_cronjob_runs_one_cycle_in_cluster_and_never_overlaps() -> None:
    cronjob = _one("CronJob")
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"
    args = build_parser().parse_args(_argv(cronjob))
    assert (args.command, args.once, args.in_cluster, args.dry_run) == ("run", True, True, False)
    assert args.config == "/etc/gpu-compactor/compactor.yaml"


def test_the_deployment_command_is_accepted_by_the_cli() -> None:
    deployment = _one("Deployment")
    argv = _argv(deployment)
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"compactor rejects the Deployment's command line {argv} (exit {exc.code})")
    assert args.command == "controller"
    assert args.in_cluster is True
    assert args.config == "/etc/gpu-compactor/compactor.yaml"


def test_the_controller_runs_two_replicas_probed_on_healthz() -> None:
    deployment = _one("Deployment")
    assert deployment["spec"]["replicas"] == 2
    (container,) = _pod_spec(deployment)["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http-metrics": 8080}
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "http-metrics"}, probe


@pytest.mark.parametrize("kind", ["CronJob", "Deployment"])
def test_pods_run_as_non_root_on_a_read_only_root_filesystem(kind: str) -> None:
    spec = _pod_spec(_one(kind))
    (container,) = spec["containers"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] != 0
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert container["image"] == "ghcr.io/example/gpu-compactor:0.1.0"
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts == {"config": "/etc/gpu-compactor", "tmp": "/tmp"}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["config"]["configMap"]["name"] == "gpu-compactor-config"


def _mounted_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The settings every gpu-compactor pod loads from the ConfigMap in manifests/."""
    _clear_compactor_env(monkeypatch)
    config_map = _one("ConfigMap", "gpu-compactor-config")
    path = tmp_path / "compactor.yaml"
    path.write_text(config_map["data"]["compactor.yaml"], encoding="utf-8")
    return load_settings(str(path))


def test_the_mounted_config_loads_and_keeps_the_compactor_from_moving_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _mounted_settings(tmp_path, monkeypatch)
    assert {"kube-system", NAMESPACE} <= set(settings.planner.exclude_namespaces)


def test_the_cronjob_deadline_covers_the_longest_run_its_config_allows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _mounted_settings(tmp_path, monkeypatch)
    job = _one("CronJob")["spec"]["jobTemplate"]["spec"]
    assert settings.executor.max_run_seconds is not None  # without a budget, 20 moves x 990 s could run for hours
    assert worst_case_run_seconds(settings) <= job["activeDeadlineSeconds"]
    assert worst_case_run_seconds(Settings()) > job["activeDeadlineSeconds"]  # the bound does bind: defaults would not fit
    # SIGTERM stops at the next wait; an API call in flight may take its whole timeout first
    assert _pod_spec(_one("CronJob"))["terminationGracePeriodSeconds"] >= DEFAULT_TIMEOUT + 10


def test_the_metrics_service_selects_the_controller_pods() -> None:
    service = _one("Service", "gpu-compactor-metrics")
    labels = _one("Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert service["spec"]["ports"] == [{"name": "http-metrics", "port": 8080, "targetPort": "http-metrics", "protocol": "TCP"}]


def test_the_alerts_use_the_exported_metric_names() -> None:
    rule = _one("PrometheusRule")
    alerts = {r["alert"]: r["expr"] for group in rule["spec"]["groups"] for r in group["rules"]}
    assert len(alerts) == 6
    exprs = " ".join(alerts.values())
    for metric in METRICS:
        assert metric in exprs, f"no alert on {metric}"
    assert 'gpu_compactor_runs_total{status="failed"}' in exprs
    assert "gpu_compactor_last_run_planned_freed_gpus) - max(gpu_compactor_last_run_freed_gpus" in alerts["GpuCompactorRunFellShort"]
    assert "by (pool)" in alerts["GpuFragmentationHigh"]
    assert 'gpu_compactor_mig_reconfigurations_total{result!="success"}' in alerts["GpuCompactorMigRecutFailed"]


def _clear_compactor_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("COMPACTOR_"):
            monkeypatch.delenv(key)


def test_the_example_config_loads() -> None:
    load_settings(str(ROOT / "config" / "compactor.yaml"))


def test_the_example_config_lists_every_setting_at_its_default(monkeypatch: pytest.MonkeyPatch) -> None:
    _clear_compactor_env(monkeypatch)
    written = _flatten(yaml.safe_load((ROOT / "config" / "compactor.yaml").read_text(encoding="utf-8")))
    defaults = _flatten(Settings().model_dump())
    assert sorted(written) == sorted(defaults), (
        f"config/compactor.yaml lacks {sorted(defaults.keys() - written.keys())}, "
        f"has unknown {sorted(written.keys() - defaults.keys())}")
    differing = {k: {"written": v, "default": defaults[k]} for k, v in written.items() if v != defaults[k]}
    assert not differing, f"config/compactor.yaml shows values other than the defaults: {differing}"


def _groups(model: type[BaseModel], prefix: str = "") -> set[str]:
    """Dotted paths of the nested settings groups (``planner``, ``planner.move_cost``, ...)."""
    found: set[str] = set()
    for name, info in model.model_fields.items():
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
            found |= {prefix + name} | _groups(info.annotation, f"{prefix}{name}.")
    return found


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"planner": {"workers": 2}}`` -> ``{"planner.workers": 2}``; dict-valued fields (pod_selector) stay whole."""
    flat: dict[str, Any] = {}
    groups = _groups(Settings)
    for key, value in tree.items():
        path = prefix + key
        if path in groups and isinstance(value, dict):
            flat.update(_flatten(value, path + "."))
        else:
            flat[path] = value
    return flat


def test_the_dockerfile_installs_the_package_and_runs_compactor_as_a_non_root_user() -> None:
    lines = [line.strip() for line in (ROOT / "Dockerfile").read_text(encoding="utf-8").splitlines()]
    assert "FROM python:3.11-slim" in lines
    assert any(line.startswith("RUN pip install") and line.endswith(" .") for line in lines)
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users and not users[-1].startswith(("0", "root")), f"USER {users}"
    assert 'ENTRYPOINT ["compactor"]' in lines

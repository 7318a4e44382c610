"""The workloads the overlays ship (the CronJob, the controller's Deployment and its metrics Service), the config
they mount, the example config and the image they run.

Covers: the CronJob and the Deployment command lines are accepted by ``compactor``'s own argument parser; the
pods run as non-root on a read-only root filesystem; the controller's probes and Service line up with its
container and the ServiceMonitor; the CronJob's deadline covers the longest run its config allows; the mounted
config and the example config load; the example config lists every setting at its default; the Dockerfile
installs the package and runs ``compactor`` as a non-root user.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from compactor.cli import build_parser
from compactor.kube.cluster_client import DEFAULT_TIMEOUT
from compactor.settings.duration import worst_case_run_seconds
from compactor.settings.origins import Settings, load_settings
from tests.manifests import (
    CONTROLLER,
    CRONJOB,
    MONITORING,
    NAMESPACE,
    ROOT,
    clear_compactor_env,
    compactor_args,
    mounted_settings,
    one_object,
    pod_spec,
)

# ----- the workloads --------------------------------------------------------------------------


def test_the_cronjob_runs_one_cycle_in_cluster_and_never_overlaps() -> None:
    cronjob = one_object(CRONJOB, "CronJob")
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"
    args = build_parser().parse_args(compactor_args(cronjob))
    assert (args.command, args.once, args.in_cluster, args.dry_run) == ("run", True, True, False)
    assert args.config == "/etc/gpu-compactor/compactor.yaml"


def test_the_deployment_command_is_accepted_by_the_cli() -> None:
    deployment = one_object(CONTROLLER, "Deployment")
    argv = compactor_args(deployment)
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"compactor rejects the Deployment's command line {argv} (exit {exc.code})")
    assert args.command == "controller"
    assert args.in_cluster is True
    assert args.config == "/etc/gpu-compactor/compactor.yaml"


def test_the_controller_runs_two_replicas_live_on_healthz_and_ready_on_readyz() -> None:
    deployment = one_object(CONTROLLER, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    (container,) = pod_spec(deployment)["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http-metrics": 8080}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http-metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http-metrics"}


@pytest.mark.parametrize(
    ("overlay", "kind"), [(CRONJOB, "CronJob"), (CONTROLLER, "Deployment")], ids=["CronJob", "Deployment"]
)
def test_pods_run_as_non_root_on_a_read_only_root_filesystem(overlay: Path, kind: str) -> None:
    spec = pod_spec(one_object(overlay, kind))
    (container,) = spec["containers"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] != 0
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts == {"config": "/etc/gpu-compactor", "tmp": "/tmp"}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["config"]["configMap"]["name"] == "gpu-compactor-config"


def test_the_mounted_config_loads_and_keeps_the_compactor_from_moving_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = mounted_settings(tmp_path, monkeypatch)
    assert {"kube-system", NAMESPACE} <= set(settings.movable.exclude_namespaces)


def test_the_cronjob_deadline_covers_the_longest_run_its_config_allows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = mounted_settings(tmp_path, monkeypatch)
    cronjob = one_object(CRONJOB, "CronJob")
    job = cronjob["spec"]["jobTemplate"]["spec"]
    assert settings.caps.max_run_seconds is not None  # without a budget, 20 moves x 1,590 s could run for hours
    assert worst_case_run_seconds(settings) <= job["activeDeadlineSeconds"]
    # the bound does bind: defaults would not fit
    assert worst_case_run_seconds(Settings()) > job["activeDeadlineSeconds"]
    # SIGTERM stops at the next wait; an API call in flight may take its whole timeout first
    assert pod_spec(cronjob)["terminationGracePeriodSeconds"] >= DEFAULT_TIMEOUT + 10


def test_the_metrics_service_selects_the_controller_pods() -> None:
    service = one_object(CONTROLLER, "Service", "gpu-compactor-metrics")
    labels = one_object(CONTROLLER, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert service["spec"]["ports"] == [
        {"name": "http-metrics", "port": 8080, "targetPort": "http-metrics", "protocol": "TCP"}
    ]
    monitor = one_object(MONITORING, "ServiceMonitor")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert [endpoint["port"] for endpoint in monitor["spec"]["endpoints"]] == ["http-metrics"]


# ----- config and image ----------------------------------------------------------------------------


def test_the_example_config_loads() -> None:
    load_settings(str(ROOT / "config" / "compactor.yaml"))


def test_the_example_config_lists_every_setting_at_its_default(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_compactor_env(monkeypatch)
    written = _flatten(yaml.safe_load((ROOT / "config" / "compactor.yaml").read_text(encoding="utf-8")))
    defaults = _flatten(Settings().model_dump())
    assert sorted(written) == sorted(defaults), (
        f"config/compactor.yaml lacks {sorted(defaults.keys() - written.keys())}, "
        f"has unknown {sorted(written.keys() - defaults.keys())}"
    )
    differing = {k: {"written": v, "default": defaults[k]} for k, v in written.items() if v != defaults[k]}
    assert not differing, f"config/compactor.yaml shows values other than the defaults: {differing}"


def _groups(model: type[BaseModel], prefix: str = "") -> set[str]:
    """Dotted paths of the nested settings groups (``solver``, ``aims.move_cost``, ...)."""
    found: set[str] = set()
    for name, info in model.model_fields.items():
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
            found |= {prefix + name} | _groups(info.annotation, f"{prefix}{name}.")
    return found


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"solver": {"workers": 2}}`` -> ``{"solver.workers": 2}``; dict-valued fields (pod_selector) stay whole."""
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

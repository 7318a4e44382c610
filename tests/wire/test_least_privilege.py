"""Least privilege, verified on the wire: what gpu-compactor sends is what its RBAC allows, and no more is read.

* The requests the real clients send (``KubeClusterClient``, ``LeaderElector``, ``read_cluster``) through the
  code paths that use the state ConfigMap, the steering parameters and the Lease are recorded by the fake API
  server and each one is authorized against the shipped RBAC (manifests/base and manifests/gpu-operator, bound
  to the service account; tests/rbac.py) with Kubernetes' own rules: verb from the method, namespace, and ``resourceNames``
  matched against the name in the URL (none for a create). tests/unit/manifests/test_manifests_rbac.py checks the same rules
  against the requests found in the source; this checks the names.
* The mig-parted configs come only from the GPU Operator's namespace (``mig.operator_namespace``): a ConfigMap
  with mig-manager's label (or name) in a tenant's namespace is never listed live and never used from a snapshot;
  without ``mig.repartition`` (or ``plan --explain-mig``) a live read lists no ConfigMap at all; a
  ``mig.config_map`` in another namespace is refused (exit 2, one line).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from compactor.actions.cluster.state_guard import check_state_guard
from compactor.actions.port.annotations import STATE_CONFIGMAP
from compactor.actions.port.client import ObjectRef
from compactor.actions.recovery import recover
from compactor.actions.services.memory import HISTORY_CONFIGMAP
from compactor.actions.steering.detect import policy_problem
from compactor.actions.steering.policy import write_entries
from compactor.app.last_run import LAST_RUN_CONFIGMAP
from compactor.app.sources import SnapshotSource, mig_parted_listing, mig_parted_namespace
from compactor.cli import main
from compactor.clock import RealClock
from compactor.errors import ConfigError
from compactor.kube.cluster_client import KubeClusterClient
from compactor.kube.lease import LEASE_NAME, LeaderElector, LeaseKeeper, acquire_once
from compactor.kube.read import read_cluster
from compactor.model.load import load_files
from compactor.model.migparted import find_mig_parted
from compactor.model.types import ConfigMap
from compactor.settings.bundles import RunSettings
from compactor.settings.mig import MigSettings
from compactor.settings.origins import Settings
from compactor.settings.steering import SteeringSettings
from tests.builders import as_list, job, node, pod, steering_policy
from tests.fakeapi import FakeApiServer, RecordedRequest
from tests.rbac import Attributes, allowed, attributes, denied
from tests.scenarios.lease import LeaseStore
from tests.scenarios.mig import LAYOUTS, objects

Doc = dict[str, Any]
GUARD = Path(__file__).resolve().parents[2] / "manifests" / "guard"


def shipped_guard(file: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((GUARD / file).read_text(encoding="utf-8")) if d]


NAMESPACE = RunSettings().executor.state_namespace  # the compactor's own (executor.state_namespace)
OPERATOR = MigSettings().operator_namespace  # the GPU Operator's (mig.operator_namespace)
# mig-manager's label, which anyone may set
MIG_LABEL = dict(part.split("=", 1) for part in MigSettings().selector.split(","))
TENANT = "tenant"
# A tenant's ConfigMap dressed as the operator's own: mig-manager's label and the name that would replace every other config.
TENANT_LAYOUTS = 'version: v1\nmig-configs:\n  tenant-layout:\n    - devices: all\n      mig-enabled: true\n      mig-devices: {"7g.80gb": 1}\n'


@pytest.fixture(autouse=True)
def _no_ambient_kubeconfig(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for key in [k for k in os.environ if k.startswith("COMPACTOR_")]:
        monkeypatch.delenv(key)


# --------------------------------------------------------------------------- RBAC, as the API server evaluates it


def test_the_evaluator_follows_resource_names_namespaces_and_create() -> None:
    steering = SteeringSettings().policy_name
    assert allowed(Attributes("update", "", "configmaps", NAMESPACE, STATE_CONFIGMAP))
    assert allowed(Attributes("create", "", "configmaps", NAMESPACE, ""))
    assert allowed(Attributes("patch", "", "configmaps", NAMESPACE, steering))
    assert allowed(Attributes("list", "", "configmaps", OPERATOR, ""))
    assert allowed(Attributes("create", "coordination.k8s.io", "leases", NAMESPACE, ""))
    # what this change took away: any other ConfigMap or Lease of the namespace, the steering one replaced, any tenant's
    # the settings: mounted, never read
    assert not allowed(Attributes("get", "", "configmaps", NAMESPACE, "gpu-compactor-config"))
    assert not allowed(Attributes("update", "", "configmaps", NAMESPACE, "someone-elses"))
    assert not allowed(Attributes("delete", "", "configmaps", NAMESPACE, steering))
    assert not allowed(Attributes("update", "", "configmaps", NAMESPACE, steering))
    assert not allowed(Attributes("patch", "", "configmaps", NAMESPACE, STATE_CONFIGMAP))
    assert not allowed(Attributes("update", "coordination.k8s.io", "leases", NAMESPACE, "another-lease"))
    assert not allowed(Attributes("list", "", "configmaps", "", ""))  # across namespaces
    assert not allowed(Attributes("list", "", "configmaps", TENANT, ""))
    assert not allowed(Attributes("get", "", "configmaps", OPERATOR, "default-mig-parted-config"))  # listed, never got
    assert not allowed(Attributes("list", "", "configmaps", NAMESPACE, ""))


def test_the_last_run_summary_is_read_and_replaced_by_name_and_never_deleted() -> None:
    """``run --once`` leaves its summary in gpu-compactor-last-run (compactor/last_run.py): GET, then PUT or the POST above;
    tests/integration/app/test_last_run.py authorizes every request of whole runs that write it."""
    assert allowed(Attributes("get", "", "configmaps", NAMESPACE, LAST_RUN_CONFIGMAP))
    assert allowed(Attributes("update", "", "configmaps", NAMESPACE, LAST_RUN_CONFIGMAP))
    assert not allowed(Attributes("delete", "", "configmaps", NAMESPACE, LAST_RUN_CONFIGMAP))
    assert not allowed(Attributes("patch", "", "configmaps", NAMESPACE, LAST_RUN_CONFIGMAP))
    # the history of moves (cooldowns, budgets, the circuit breaker): read and replaced by name, never deleted
    assert allowed(Attributes("get", "", "configmaps", NAMESPACE, HISTORY_CONFIGMAP))
    assert allowed(Attributes("update", "", "configmaps", NAMESPACE, HISTORY_CONFIGMAP))
    assert not allowed(Attributes("delete", "", "configmaps", NAMESPACE, HISTORY_CONFIGMAP))
    assert not allowed(Attributes("update", "", "configmaps", TENANT, LAST_RUN_CONFIGMAP))  # its own namespace only


# --------------------------------------------------------------------------- the state ConfigMap, the steering parameters, the Lease


def test_every_request_on_the_state_the_steering_parameters_and_the_lease_is_allowed(fake_api: FakeApiServer) -> None:
    """Run the code paths that touch them, through the real clients, and authorize every request sent."""
    fake_api.add(node("n1", gpus=8), pod("train", on="n1", gpus=1, namespace="ml"), *steering_policy())
    fake_api.add(job("batch", backoff_limit=2, failed=1, namespace="ml"))
    LeaseStore(fake_api)
    settings = RunSettings()
    client = KubeClusterClient(fake_api.api_client(), namespace=NAMESPACE)
    fake_api.clear_requests()

    # the Lease: created, renewed, released (acquire_once + LeaseKeeper, as `run --once` holds it), then taken again
    elector = LeaderElector(fake_api.api_client(), NAMESPACE, "pod-a", lease_seconds=3)
    acquire_once(elector)
    with LeaseKeeper(elector):
        assert elector.try_acquire_or_renew(datetime.now(UTC))
    assert LeaderElector(fake_api.api_client(), NAMESPACE, "pod-b").try_acquire_or_renew(datetime.now(UTC))

    # the state ConfigMap as a run keeps it: absent, created, replaced, read, deleted; recovery reads and deletes a stale one
    recover(client, settings, RealClock())
    client.write_state(STATE_CONFIGMAP, {"status": "running"})
    client.write_state(STATE_CONFIGMAP, {"status": "done"})
    assert client.read_state(STATE_CONFIGMAP) == {"status": "done"}
    client.write_state(STATE_CONFIGMAP, None)
    client.write_state(STATE_CONFIGMAP, {"stale": "no plan"})
    recover(KubeClusterClient(fake_api.api_client(), namespace=NAMESPACE), settings, RealClock())

    # the steering parameters: the policy detected, an entry pinned and removed
    assert policy_problem(client, settings) == ""
    write_entries(client, settings.steering.policy_name, {"ml.app": "n1"})
    write_entries(client, settings.steering.policy_name, {"ml.app": None})

    # the rest of what a run sends: the state guard read (installed, so who the client is asked too)
    fake_api.add(*[d for d in shipped_guard("state.yaml") if d["kind"] == "ValidatingAdmissionPolicy"])
    fake_api.username = f"system:serviceaccount:{NAMESPACE}:gpu-compactor"  # the run is its service account
    check_state_guard(client, NAMESPACE)
    client.get_node("n1")
    client.patch_node("n1", {"spec": {"unschedulable": True}})
    client.list_pods(node_name="n1")
    client.list_pods(namespace="ml", label_selector="app=app")
    client.get_pod("ml", "train")
    client.get_owner("ml", "ReplicaSet", "app")
    batch = client.get_owner("ml", "Job", "batch")  # read before a Job's pod is evicted: its backoffLimit
    assert batch is not None and (batch["spec"]["backoffLimit"], batch["status"]["failed"]) == (2, 1)
    client.list_pdbs()
    client.create_event(ObjectRef("Node", "n1"), reason="Cordoned", message="for a move")
    client.evict("ml", "train")

    sent = fake_api.requests
    assert not denied(sent), denied(sent)
    seen = {(a.resource, a.verb, a.name) for a in map(attributes, sent) if a.resource in ("configmaps", "leases")}
    assert seen == {
        ("configmaps", "get", STATE_CONFIGMAP),
        ("configmaps", "create", ""),
        ("configmaps", "update", STATE_CONFIGMAP),
        ("configmaps", "delete", STATE_CONFIGMAP),
        ("configmaps", "get", settings.steering.policy_name),
        ("configmaps", "patch", settings.steering.policy_name),
        ("leases", "get", LEASE_NAME),
        ("leases", "create", ""),
        ("leases", "update", LEASE_NAME),
    }
    assert all(a.namespace == NAMESPACE for a in map(attributes, sent) if a.resource in ("configmaps", "leases"))


# --------------------------------------------------------------------------- the mig-parted configs: the GPU Operator's namespace only


def _mig_config_map(namespace: str, name: str, body: str, labels: dict[str, str] | None = None) -> Doc:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "data": {"config.yaml": body},
    }


def _world() -> list[Doc]:
    """Two MIG nodes cut 1g.10gb, pending 3g.40gb pods, the operator's layouts, and a tenant's labelled look-alike."""
    operator = _mig_config_map(OPERATOR, "default-mig-parted-config", LAYOUTS, dict(MIG_LABEL))
    tenant = _mig_config_map(TENANT, "custom-mig-parted-config", TENANT_LAYOUTS, dict(MIG_LABEL))
    return [
        *[o for o in objects() if o["kind"] != "ConfigMap"],
        operator,
        tenant,
        _mig_config_map(TENANT, "unrelated", "x: 1", {"app": "web"}),
    ]


def _config_map_lists(api: FakeApiServer) -> list[RecordedRequest]:
    return [r for r in api.requests if r.method == "GET" and r.path.endswith("/configmaps")]


@pytest.fixture
def cluster(fake_api: FakeApiServer, tmp_path: Path) -> Iterator[str]:
    """The kubeconfig of a fake API server holding ``_world()``."""
    fake_api.add(*_world())
    yield str(fake_api.write_kubeconfig(tmp_path / "kubeconfig"))


def _config(tmp_path: Path, **groups: dict[str, Any]) -> str:
    path = tmp_path / "compactor.yaml"
    path.write_text(yaml.safe_dump(groups), encoding="utf-8")
    return str(path)


def test_a_live_read_lists_the_operators_namespace_only_and_a_tenants_labelled_configmap_is_never_read(
    fake_api: FakeApiServer, cluster: str
) -> None:
    settings = Settings(mig=MigSettings(repartition=True))
    fake_api.clear_requests()
    snapshot = SnapshotSource(kubeconfig=cluster, live=True).load(
        pool_label=settings.metrics.pool_label,
        mig_config_map=settings.mig.config_map,
        mig_selector=settings.mig.selector,
        mig_namespace=mig_parted_namespace(settings),
    )
    assert [(cm.namespace, cm.name) for cm in snapshot.config_maps] == [(OPERATOR, "default-mig-parted-config")]
    (listed,) = _config_map_lists(fake_api)
    assert (
        listed.path == f"/api/v1/namespaces/{OPERATOR}/configmaps"
        and listed.param("labelSelector") == settings.mig.selector
    )
    assert not denied(fake_api.requests), denied(fake_api.requests)

    fake_api.clear_requests()  # one ConfigMap by name (mig.config_map): a list narrowed to it, in the operator's namespace
    include, selector = mig_parted_listing(f"{OPERATOR}/default-mig-parted-config", settings.mig.selector, OPERATOR)
    read_cluster(fake_api.api_client(), include_config_maps=include, config_map_selector=selector)
    (listed,) = _config_map_lists(fake_api)
    assert listed.path == f"/api/v1/namespaces/{OPERATOR}/configmaps"
    assert listed.param("fieldSelector") == "metadata.name=default-mig-parted-config" and not denied([listed])


def test_without_mig_repartition_a_live_read_lists_no_configmap_at_all(
    fake_api: FakeApiServer, cluster: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = Settings()
    assert not settings.mig.repartition and mig_parted_namespace(settings) is None
    # as the controller reads
    assert mig_parted_listing(settings.mig.config_map, settings.mig.selector, None) == (
        False,
        None,
    )
    fake_api.clear_requests()
    snapshot = SnapshotSource(kubeconfig=cluster, live=True).load(
        pool_label=settings.metrics.pool_label,
        mig_config_map=settings.mig.config_map,
        mig_selector=settings.mig.selector,
        mig_namespace=mig_parted_namespace(settings),
    )
    assert snapshot.config_maps == () and snapshot.nodes
    assert not _config_map_lists(fake_api)

    for argv in (
        ["plan", "--kubeconfig", cluster, "--time-limit", "5", "--output", "json"],  # the defaults: no re-cuts
        ["report", "--kubeconfig", cluster],
    ):  # the figures never need the layouts
        fake_api.clear_requests()
        assert main(argv) == 0, capsys.readouterr().err
        assert not _config_map_lists(fake_api), [r.path for r in _config_map_lists(fake_api)]
        assert not denied(fake_api.requests), denied(fake_api.requests)
    capsys.readouterr()


def test_plan_explain_mig_live_reads_the_operators_layouts_not_the_tenants(
    fake_api: FakeApiServer, cluster: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_api.clear_requests()
    assert main(["plan", "--kubeconfig", cluster, "--explain-mig", "--time-limit", "5", "--output", "json"]) == 0, (
        capsys.readouterr().err
    )
    advice = json.loads(capsys.readouterr().out)["migAdvice"]
    layouts = {option["config"] for pool in advice for option in pool["layouts"]}
    assert "all-3g.40gb" in layouts and "tenant-layout" not in layouts
    assert [r.path for r in _config_map_lists(fake_api)] == [f"/api/v1/namespaces/{OPERATOR}/configmaps"]
    assert not denied(fake_api.requests), denied(fake_api.requests)


def test_a_tenants_labelled_configmap_in_a_snapshot_is_never_used(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = tmp_path / "cluster.json"
    snapshot.write_text(json.dumps(as_list(*_world())), encoding="utf-8")
    config_maps = load_files([str(snapshot)]).config_maps
    assert {(cm.namespace, cm.name) for cm in config_maps} >= {
        (TENANT, "custom-mig-parted-config"),
        (OPERATOR, "default-mig-parted-config"),
    }
    parted = find_mig_parted(config_maps, namespace=OPERATOR)
    # not the tenant's "custom" one
    assert parted is not None and parted.source == f"{OPERATOR}/default-mig-parted-config"

    config = _config(tmp_path, mig={"repartition": True}, solver={"time_limit_seconds": 5})
    assert main(["plan", "--snapshot", str(snapshot), "--config", config, "--explain-mig", "--output", "json"]) == 0, (
        capsys.readouterr().err
    )
    plan = json.loads(capsys.readouterr().out)
    assert {option["config"] for pool in plan["migAdvice"] for option in pool["layouts"]} >= {"all-3g.40gb"}
    assert "tenant-layout" not in json.dumps(plan)
    assert [recut["to"] for recut in plan["migRepartition"]] == ["all-3g.40gb"]

    only_tenant = tmp_path / "tenant-only.json"  # the tenant's alone: no layouts at all, not the tenant's
    only_tenant.write_text(
        json.dumps(as_list(*[o for o in _world() if o["metadata"].get("namespace") != OPERATOR])), encoding="utf-8"
    )
    assert main(["plan", "--snapshot", str(only_tenant), "--explain-mig", "--time-limit", "5", "--output", "json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["migAdvice"] == []
    said = [line for line in captured.err.strip().splitlines() if "no --config" not in line]  # that one is issue 45's
    assert "no mig-parted ConfigMap" in captured.err and len(said) == 1


def test_find_mig_parted_ignores_every_configmap_outside_the_namespace() -> None:
    body = "version: v1\nmig-configs:\n  all-disabled:\n    - devices: all\n      mig-enabled: false\n"
    maps = [
        ConfigMap(TENANT, "custom-mig-parted-config", {"config.yaml": body}, dict(MIG_LABEL)),
        ConfigMap(TENANT, "n1-mig-config", {"config.yaml": body}, {"nvidia.com/node-name": "n1"}),
        ConfigMap(TENANT, "default-mig-parted-config", {"config.yaml": body}),
    ]
    assert find_mig_parted(maps, namespace=OPERATOR) is None
    assert find_mig_parted(maps, f"{TENANT}/custom-mig-parted-config", namespace=OPERATOR) is None
    operator = ConfigMap(OPERATOR, "default-mig-parted-config", {"config.yaml": body})
    found = find_mig_parted([*maps, operator], namespace=OPERATOR)
    assert found is not None and found.source == f"{OPERATOR}/default-mig-parted-config" and not found.per_node


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "--example"],
        ["run", "--once", "--example", "--dry-run"],
        ["controller", "--kubeconfig", "/nonexistent/kubeconfig", "--report-only"],
    ],
    ids=["plan", "run", "controller"],
)
@pytest.mark.parametrize("repartition", [True, False], ids=["repartition", "advice-only"])
def test_a_mig_config_map_outside_the_operators_namespace_is_refused(
    argv: list[str], repartition: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, mig={"repartition": repartition, "config_map": f"{TENANT}/x"})
    assert main([*argv, "--config", config]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(
        f"compactor: error: mig.config_map: {TENANT}/x is in namespace {TENANT}, not in the GPU Operator's namespace "
        f"{OPERATOR} (mig.operator_namespace)"
    ), err


def test_the_operators_namespace_is_a_setting(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = Settings(
        mig=MigSettings(repartition=True, config_map="nvidia/layouts", operator_namespace="nvidia"),
    )
    assert mig_parted_namespace(settings) == "nvidia"
    assert mig_parted_listing(settings.mig.config_map, settings.mig.selector, "nvidia") == ("nvidia/layouts", None)
    with pytest.raises(
        ConfigError, match=r"^mig\.config_map: nvidia/layouts is in namespace nvidia, not .* gpu-operator"
    ):
        mig_parted_listing("nvidia/layouts", None, OPERATOR)
    assert mig_parted_namespace(Settings(), explain=True) == OPERATOR  # plan --explain-mig needs the layouts

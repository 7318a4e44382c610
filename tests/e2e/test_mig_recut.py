"""End to end on a real control plane: a pool cut into the wrong MIG sizes is re-cut for the pods that wait.

Two fake A100-80GB nodes (one GPU each) are cut ``all-1g.10gb`` (7 slices); a Deployment of four 1g.10gb pods
runs on them (the real scheduler places them) under a PDB; two 3g.40gb pods wait, since no node offers that slice.
``compactor run --once`` with ``mig.repartition`` must free one node (moving its 1g.10gb pods to the other,
through the Eviction API), relabel it ``nvidia.com/mig.config=all-3g.40gb``, wait for the fake mig-manager
(``migmanager.py``) to report ``success`` with the new slices in allocatable, and let the two pods run there, with
every displaced pod Ready elsewhere and nothing of the compactor's left on the nodes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.e2e import fragmentation as frag
from tests.e2e.fragmentation import Fleet
from tests.e2e.helpers import (
    NEEDS_CLUSTER,
    STATE_CONFIGMAP,
    STATE_NAMESPACE,
    Kube,
    Obj,
    compactor_marks,
    deployment,
    describe_pods,
    get_or_none,
    is_running_ready,
    kubeconfig_args,
    labels,
    pod_disruption_budget,
    raw,
    run_compactor,
    wait_for,
    with_retries,
)
from tests.e2e.migmanager import CONFIG_LABEL, FakeMigManager, running

pytestmark = [
    NEEDS_CLUSTER,
    pytest.mark.e2e,
    pytest.mark.timeout(600),
]

SMALL, BIG = "nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"
LAYOUTS = {"all-1g.10gb": {SMALL: 7}, "all-3g.40gb": {BIG: 2}}
MIG_PARTED = """version: v1
mig-configs:
  all-1g.10gb:
    - device-filter: ["0x20B210DE", "0x20B510DE"]
      devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
  all-3g.40gb:
    - device-filter: ["0x20B210DE", "0x20B510DE"]
      devices: all
      mig-enabled: true
      mig-devices: {"3g.40gb": 2}
"""


def config(namespace: str) -> dict[str, object]:
    return {
        "movable": {"namespaces": [namespace]},
        "solver": {"time_limit_seconds": 20},
        "mig": {
            "repartition": True,
            "config_map": f"{namespace}/mig-layouts",
            "operator_namespace": namespace,  # the test's namespace plays the GPU Operator's
            "reconfigure_timeout_seconds": 120,
        },
        "executor": {
            "poll_seconds": 0.5,
            "replacement_timeout_seconds": 120,
            "backoff_seconds": 1,
            "backoff_max_seconds": 5,
        },
    }


def test_pending_3g_pods_run_on_a_node_re_cut_from_1g_slices(
    kube: Kube, mig_fleet: Fleet, mig_namespace: str, steering_policy: str, tmp_path: Path
) -> None:
    ns = mig_namespace
    _create_layouts(kube, ns)
    small = _mig_deployment("small", 4, SMALL, mig_fleet)
    with_retries(
        lambda: kube.policy.create_namespaced_pod_disruption_budget(
            ns, pod_disruption_budget("small", app_label="small")
        ),
        what="creating PDB small",
    )
    with_retries(lambda: kube.apps.create_namespaced_deployment(ns, small), what="creating Deployment small")
    wait_for(
        frag.settled(kube, ns, {"small": 4}),
        timeout=120,
        interval=1,
        what="the 1g.10gb pods to run and their PDB to allow one",
    )
    big = _mig_deployment("big", 2, BIG, mig_fleet)
    with_retries(lambda: kube.apps.create_namespaced_deployment(ns, big), what="creating Deployment big")
    wait_for(
        lambda: _pending(kube, ns, "big", 2),
        timeout=60,
        interval=1,
        what="the scheduler to leave both 3g.40gb pods Pending",
    )
    settings = tmp_path / "compactor.yaml"
    settings.write_text(yaml.safe_dump(config(ns)), encoding="utf-8")

    planned = run_compactor("plan", *kubeconfig_args(), "--config", str(settings), "--output", "json", timeout=180)
    assert planned.returncode == 0, planned.describe()
    plan = planned.json()
    (recut,) = plan["migRepartition"]
    assert (recut["from"], recut["to"]) == ("all-1g.10gb", "all-3g.40gb"), planned.describe()
    assert sorted(p["to"] for p in plan["placedPending"]) == [recut["node"]] * 2, planned.describe()

    with running(FakeMigManager(kube, mig_fleet.names, LAYOUTS)) as manager:
        ran = run_compactor(
            "run", "--once", *kubeconfig_args(), "--config", str(settings), "--output", "json", timeout=420
        )
        report = ran.json()
        where = set(
            wait_for(
                lambda: _running(kube, ns, "big", 2),
                timeout=120,
                interval=1,
                what="both 3g.40gb pods Running and Ready",
            ).split(",")
        )
    assert report["status"] == "succeeded", ran.describe()
    target = report["migRecuts"] and next(iter(report["migRecuts"]))
    assert report["migRecuts"] == {target: "success"}, ran.describe()
    assert [(node, layout) for node, layout, result in manager.done if result == "success"] == [
        (target, "all-3g.40gb")
    ], manager.done
    assert where == {target}, describe_pods(frag.pods(kube, ns))
    wait_for(
        frag.settled(kube, ns, {"small": 4}), timeout=120, interval=1, what="every displaced 1g.10gb pod Ready again"
    )
    assert all(frag.node_of(p) != target for p in frag.pods(kube, ns) if frag.app_of(p) == "small")
    for name in mig_fleet.names:
        node = raw(kube.core.read_node, name)
        assert not compactor_marks(node) and not (node.get("spec") or {}).get("unschedulable"), node["metadata"]
    assert labels(raw(kube.core.read_node, target))[CONFIG_LABEL] == "all-3g.40gb"
    assert get_or_none(kube.core.read_namespaced_config_map, STATE_CONFIGMAP, STATE_NAMESPACE) is None


def test_two_whole_free_nodes_are_re_cut_side_by_side_in_one_run(
    kube: Kube, mig_fleet: Fleet, mig_namespace: str, steering_policy: str, tmp_path: Path
) -> None:
    """Both nodes idle in 1g slices, four 3g.40gb pods pending (two per re-cut node): one run relabels both nodes
    before mig-manager has finished either (it takes 15 s a node), and all four pods run."""
    ns = mig_namespace
    _create_layouts(kube, ns)
    big = _mig_deployment("big", 4, BIG, mig_fleet)
    with_retries(lambda: kube.apps.create_namespaced_deployment(ns, big), what="creating Deployment big")
    wait_for(
        lambda: _pending(kube, ns, "big", 4), timeout=60, interval=1, what="the scheduler to leave four 3g pods Pending"
    )
    settings = tmp_path / "compactor.yaml"
    settings.write_text(yaml.safe_dump(config(ns)), encoding="utf-8")
    with running(FakeMigManager(kube, mig_fleet.names, LAYOUTS, takes=15)) as manager:
        ran = run_compactor(
            "run", "--once", *kubeconfig_args(), "--config", str(settings), "--output", "json", timeout=420
        )
        report = ran.json()
        wait_for(
            lambda: _running(kube, ns, "big", 4),
            timeout=120,
            interval=1,
            what="all four 3g.40gb pods Running and Ready",
        )
    assert report["status"] == "succeeded", ran.describe()
    assert report["migRecuts"] == dict.fromkeys(mig_fleet.names, "success"), ran.describe()
    assert sorted(node for node, _, result in manager.done if result == "success") == sorted(mig_fleet.names)
    first, second = sorted(manager.noticed[name] for name in mig_fleet.names)
    assert second - first < manager.takes, manager.noticed  # the second relabelled before the first was done
    for name in mig_fleet.names:
        node = raw(kube.core.read_node, name)
        assert not compactor_marks(node) and not (node.get("spec") or {}).get("unschedulable"), node["metadata"]
        assert labels(node)[CONFIG_LABEL] == "all-3g.40gb"


def _pending(kube: Kube, ns: str, app: str, count: int) -> tuple[bool, str]:
    mine = [p for p in frag.pods(kube, ns) if frag.app_of(p) == app]
    return len(mine) == count and not any(frag.node_of(p) for p in mine), describe_pods(mine)


def _running(kube: Kube, ns: str, app: str, count: int) -> tuple[bool, str]:
    """(``count`` pods of ``app`` Running and Ready, their nodes joined by commas)."""
    running_on = [frag.node_of(p) for p in frag.pods(kube, ns) if frag.app_of(p) == app and is_running_ready(p)]
    return len(running_on) == count, ",".join(running_on)


def _create_layouts(kube: Kube, ns: str) -> None:
    """The mig-parted ConfigMap of ``MIG_PARTED``, in the test's namespace (playing the GPU Operator's)."""
    layouts = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "mig-layouts"},
        "data": {"config.yaml": MIG_PARTED},
    }
    with_retries(lambda: kube.core.create_namespaced_config_map(ns, layouts), what="creating the mig-parted ConfigMap")


def _mig_deployment(name: str, replicas: int, resource: str, fleet: Fleet) -> Obj:
    """A Deployment of ``replicas`` pods asking one ``resource`` slice, on the fleet's MIG nodes, packed (no spread)."""
    return deployment(
        name,
        replicas=replicas,
        resource=resource,
        app_label=name,
        extra_labels={},
        node_selector=fleet.selector,
        spread=False,
        cpu="100m",
        memory="64Mi",
        memory_limit="64Mi",
    )

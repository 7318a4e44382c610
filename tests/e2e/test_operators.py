"""End to end on a real control plane: what operators and other installations do during a run is theirs (issue [12]).

* An operator's ``kubectl cordon`` of a node the plan frees, and an owner's ``safe-to-evict=false`` on a planned pod,
  both made between ``compactor plan --write`` and ``compactor apply --plan``: the cordon is still there after the run,
  the opted-out pod was never evicted (same uid), and nothing of the compactor is left on any node.
* A 2-second API outage (a proxy that cuts and refuses connections) during the first eviction: nothing left fenced.
* Two installations (another ``installation`` and ``state_namespace``): the second's fence on a node survives the
  first one's whole run, recovery included.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from tests.e2e import fragmentation as frag
from tests.e2e.faults import FlakyProxy, upstream_of
from tests.e2e.fleet_runs import PLAN_TIMEOUT, RUN_TIMEOUT, STATES, compactor_config, settle
from tests.e2e.fragmentation import Fleet
from tests.e2e.helpers import (
    NEEDS_CLUSTER,
    STATE_CONFIGMAP,
    STATE_NAMESPACE,
    Kube,
    compactor_marks,
    free_port,
    gauge,
    get_or_none,
    kubeconfig_args,
    name_of,
    raw,
    run_compactor,
    scrape,
    start_compactor,
    wait_for,
)

pytestmark = [NEEDS_CLUSTER, pytest.mark.e2e, pytest.mark.timeout(900)]
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
MERGE_PATCH = "application/merge-patch+json"  # lists replaced whole (a strategic merge would merge taints by key)


def _plan(
    kube: Kube, namespace: str, fleet: Fleet, tmp_path: Path, **groups: dict[str, Any]
) -> tuple[Path, Path, dict[str, Any]]:
    frag.build(kube, namespace, fleet, STATES[1])
    config, written = tmp_path / "compactor.yaml", tmp_path / "plan.json"
    settings = compactor_config(namespace)
    for group, values in groups.items():  # settings by group, laid over compactor_config's
        settings.setdefault(group, {}).update(values)
    config.write_text(yaml.safe_dump(settings), encoding="utf-8")
    planned = run_compactor(
        "plan",
        *kubeconfig_args(),
        "--config",
        str(config),
        "--output",
        "json",
        "--write",
        str(written),
        timeout=PLAN_TIMEOUT,
    )
    assert planned.returncode == 0, planned.describe()
    plan = planned.json()
    assert plan.get("moves") and plan.get("freedNodes"), (
        f"the starting state gave the planner nothing to do:\n{planned.describe()}"
    )
    return config, written, plan


def _apply(config: Path, written: Path) -> dict[str, Any]:
    ran = run_compactor(
        "apply",
        "--plan",
        str(written),
        *kubeconfig_args(),
        "--config",
        str(config),
        "--output",
        "json",
        timeout=RUN_TIMEOUT,
    )
    assert ran.returncode in (0, 1), ran.describe()
    return ran.json()


def _node(kube: Kube, name: str) -> dict[str, Any]:
    return raw(kube.core.read_node, name)


def _compactor_taints(node: dict[str, Any]) -> list[str]:
    return [
        str(t.get("key"))
        for t in (node.get("spec") or {}).get("taints") or []
        if str(t.get("key", "")).startswith("compactor.io/")
    ]


def test_an_operators_cordon_and_an_opt_out_made_after_planning_are_respected(
    kube: Kube, gpu_fleet: Fleet, fleet_namespace: str, steering_policy: str, tmp_path: Path
) -> None:
    config, written, plan = _plan(kube, fleet_namespace, gpu_fleet, tmp_path)
    cordoned = plan["freedNodes"][0]
    # kubectl cordon, as an operator would for maintenance
    kube.core.patch_node(cordoned, {"spec": {"unschedulable": True}})
    # a move off another node when the plan has one; a plan that frees one node gets its last move opted out instead
    opted = next((m for m in plan["moves"] if m["from"] != cordoned), plan["moves"][-1])
    namespace, name = opted["pod"].split("/", 1)
    kube.core.patch_namespaced_pod(name, namespace, {"metadata": {"annotations": {SAFE_TO_EVICT: "false"}}})
    try:
        report = _apply(config, written)
        settle(kube, fleet_namespace)
        pod = raw(kube.core.read_namespaced_pod, name, namespace)
        assert pod["metadata"]["uid"] == opted["uid"], (
            f"{opted['pod']} was annotated safe-to-evict=false and still evicted"
        )
        assert report["status"] == "partial" and f"not moved {opted['pod']}" in report["reason"], report
        assert _node(kube, cordoned)["spec"].get("unschedulable") is True, (
            f"the operator's cordon of {cordoned} was undone"
        )
        left = {
            name_of(n): (compactor_marks(n), _compactor_taints(n))
            for n in raw(kube.core.list_node).get("items") or []
            if compactor_marks(n) or _compactor_taints(n)
        }
        assert left == {}, f"the run left compactor marks or fences: {left}"
    finally:
        kube.core.patch_node(cordoned, {"spec": {"unschedulable": None}}, _content_type=MERGE_PATCH)


def test_a_second_installation_never_releases_the_first_ones_fence(
    kube: Kube, gpu_fleet: Fleet, fleet_namespace: str, steering_policy: str, tmp_path: Path
) -> None:
    # the other installation keeps the node it freed fenced (after_drain keepCordoned), in a namespace of its own
    other_ns = f"{fleet_namespace}-other"
    kube.core.create_namespace({"metadata": {"name": other_ns}})
    try:
        config, written, plan = _plan(
            kube,
            fleet_namespace,
            gpu_fleet,
            tmp_path,
            executor={"state_namespace": other_ns, "installation": "other", "after_drain": "keepCordoned"},
            steering={"policy_name": "absent-steering-policy", "mechanism": "holds"},
        )
        report = _apply(config, written)
        kept = [n for n in plan["freedNodes"] if "compactor.io/fence-other" in _compactor_taints(_node(kube, n))]
        assert kept, f"the other installation kept no node fenced: {report}"
        # this installation's run (its recovery first) in the default namespace: the other's fence is not ours
        mine = tmp_path / "mine.yaml"
        mine.write_text(yaml.safe_dump(compactor_config(fleet_namespace)), encoding="utf-8")
        ran = run_compactor(
            "run", "--once", *kubeconfig_args(), "--config", str(mine), "--output", "json", timeout=RUN_TIMEOUT
        )
        assert ran.returncode in (0, 1), ran.describe()
        for name in kept:
            node = _node(kube, name)
            assert "compactor.io/fence-other" in _compactor_taints(node), (
                f"{name}: the other installation's fence was released"
            )
            assert compactor_marks(node).get("compactor.io/cordoned-by") == "other", compactor_marks(node)
    finally:
        for node in (
            raw(kube.core.list_node).get("items") or []
        ):  # the other installation's keepCordoned fences go with the test
            taints = (node.get("spec") or {}).get("taints") or []
            kept_taints = [t for t in taints if t.get("key") != "compactor.io/fence-other"]
            if len(kept_taints) != len(taints):
                kube.core.patch_node(
                    name_of(node),
                    {
                        "spec": {"taints": kept_taints or None},
                        "metadata": {"annotations": dict.fromkeys(compactor_marks(node))},
                    },
                    _content_type=MERGE_PATCH,
                )
        kube.core.delete_namespace(other_ns)


def test_a_two_second_api_outage_mid_run_ends_with_nothing_left_fenced(
    kube: Kube, gpu_fleet: Fleet, fleet_namespace: str, steering_policy: str, tmp_path: Path
) -> None:
    """The compactor reaches the API server through a proxy; as its first eviction is under way, the proxy cuts every
    connection and refuses new ones for 2 s. Whatever the run then decides (carry on, or roll back), it must end with
    no fence, no mark and no state left."""
    config, written, _plan_made = _plan(kube, fleet_namespace, gpu_fleet, tmp_path)
    kubeconfig = Path(os.environ["KUBECONFIG"])
    proxy = FlakyProxy(upstream_of(kubeconfig))
    try:
        through = proxy.kubeconfig(kubeconfig, tmp_path / "through-proxy")
        run = start_compactor(
            "apply", "--plan", str(written), "--kubeconfig", str(through), "--config", str(config), "--output", "json"
        )

        def phase() -> str | None:
            state = get_or_none(kube.core.read_namespaced_config_map, STATE_CONFIGMAP, STATE_NAMESPACE) or {}
            return (state.get("data") or {}).get("phase")

        wait_for(
            lambda: (phase() == "evicting", f"phase {phase()}"),
            timeout=120,
            interval=0.05,
            what="the run to start evicting",
        )
        proxy.outage(2.0)
        out, err = run.communicate(timeout=RUN_TIMEOUT)
        assert run.returncode in (0, 1), f"exit {run.returncode}\n{out}\n{err}"
        assert "cannot reach the Kubernetes API" in err, (
            f"the run never met the outage, so this tests nothing:\n{err[-3000:]}"
        )
        settle(kube, fleet_namespace)
        left = {
            name_of(n): (compactor_marks(n), _compactor_taints(n))
            for n in raw(kube.core.list_node).get("items") or []
            if compactor_marks(n) or _compactor_taints(n)
        }
        assert left == {}, f"the outage left fences or marks behind: {left}\n{err[-3000:]}"
        assert get_or_none(kube.core.read_namespaced_config_map, STATE_CONFIGMAP, STATE_NAMESPACE) is None, err[-3000:]
    finally:
        proxy.close()


def test_two_controller_replicas_one_acts_both_export_and_the_lease_moves_within_seconds_on_sigterm(
    kube: Kube, gpu_fleet: Fleet, fleet_namespace: str, steering_policy: str, tmp_path: Path
) -> None:
    """The Deployment mode: two ``compactor controller`` replicas with leader election on the same cluster, each through a
    proxy of its own; once the leader has handed over, the survivor's API server stops answering: it fails /readyz, not
    /healthz (a brownout reaches every replica at once, and restarting them all cures nothing)."""
    config, _written, _plan_made = _plan(kube, fleet_namespace, gpu_fleet, tmp_path)
    ports = [free_port(), free_port()]
    logs = [tmp_path / f"replica-{i}.log" for i in range(2)]
    kubeconfig = Path(os.environ["KUBECONFIG"])
    proxies = [FlakyProxy(upstream_of(kubeconfig)) for _ in range(2)]  # each replica's own path to the API server
    replicas = [
        start_compactor(
            "controller",
            "--kubeconfig",
            str(proxy.kubeconfig(kubeconfig, tmp_path / f"kubeconfig-{i}")),
            "--config",
            str(config),
            "--interval",
            "5",
            "--stale-after",
            "30",
            "--listen",
            f"127.0.0.1:{port}",
            env={"POD_NAME": f"replica-{i}"},
            log=logs[i],
        )
        for i, (port, proxy) in enumerate(zip(ports, proxies, strict=True))
    ]
    try:

        def leaders() -> tuple[list[float | None], str]:
            seen = [gauge(scrape(port)[1], "gpu_compactor_leader") for port in ports]
            return seen, f"leader gauges {seen}"

        wait_for(
            lambda: (sorted(g if g is not None else -1.0 for g in leaders()[0]) == [0.0, 1.0], leaders()[1]),
            timeout=90,
            interval=0.5,
            what="exactly one replica to lead",
        )

        def figures() -> tuple[bool, str]:
            found = [gauge(scrape(port)[1], "gpu_compactor_blocked_pending_pods") for port in ports]
            return all(f is not None for f in found), f"figures exported: {found}"

        wait_for(figures, timeout=120, interval=1, what="both replicas to export the figures")
        leader = leaders()[0].index(1.0)
        leases = k8s.CoordinationV1Api(kube.api_client)

        def holder() -> str | None:
            return raw(leases.read_namespaced_lease, "gpu-compactor-leader", STATE_NAMESPACE)["spec"].get(
                "holderIdentity"
            )

        assert holder() == f"replica-{leader}"
        wait_for(
            lambda: (_acted(kube, fleet_namespace), "no eviction yet"),
            timeout=120,
            interval=1,
            what="the leader to act",
        )
        assert "evicted pod=" in logs[leader].read_text(), "the leader's log shows its evictions"
        assert "evicted pod=" not in logs[1 - leader].read_text(), (
            f"the follower acted:\n{logs[1 - leader].read_text()[-3000:]}"
        )
        replicas[leader].send_signal(signal.SIGTERM)
        stopped = time.monotonic()
        wait_for(
            lambda: (holder() == f"replica-{1 - leader}", f"holder {holder()}"),
            timeout=30,
            interval=0.2,
            what="the other replica to take the Lease",
        )
        handover = time.monotonic() - stopped
        assert handover < 15, f"the Lease moved only after {handover:.1f}s"
        replicas[leader].wait(timeout=120)
        assert replicas[leader].returncode in (0, 143), (
            f"exit {replicas[leader].returncode}:\n{logs[leader].read_text()[-3000:]}"
        )
        survivor = 1 - leader
        status, body = scrape(ports[survivor], "/healthz")
        assert status == 200, body
        # the API server stops answering the survivor: its cycles and Lease renewals hang, and /readyz must say so while
        # /healthz (the process's own liveness) stays up
        proxies[survivor].stall()
        stalled = time.monotonic()
        wait_for(
            lambda: (scrape(ports[survivor], "/readyz")[0] == 503, str(scrape(ports[survivor], "/readyz"))),
            timeout=120,
            interval=1,
            what="/readyz to fail while Lease renewals stop",
        )
        status, body = scrape(ports[survivor], "/readyz")
        assert "Lease" in body, body
        assert time.monotonic() - stalled < 90, "a readiness probe would have waited too long"
        assert scrape(ports[survivor], "/healthz") == (200, "ok\n")  # not restarted for the API server's outage
        proxies[survivor].resume()
        wait_for(
            lambda: (scrape(ports[survivor], "/readyz")[0] == 200, str(scrape(ports[survivor], "/readyz"))),
            timeout=120,
            interval=1,
            what="/readyz to recover once the API server answers again",
        )
    finally:
        for proxy in proxies:
            proxy.resume()
        for replica in replicas:
            if replica.poll() is None:
                replica.send_signal(signal.SIGTERM)
        for replica in replicas:
            with contextlib.suppress(Exception):
                replica.wait(timeout=120)
        for proxy in proxies:
            proxy.close()


def _acted(kube: Kube, namespace: str) -> bool:
    """A ``CompactorEvict`` Event on a pod of the test's namespace (the Events of other tests' namespaces do not count)."""
    items = raw(kube.core.list_namespaced_event, namespace).get("items") or []
    return any(e.get("reason") == "CompactorEvict" for e in items)

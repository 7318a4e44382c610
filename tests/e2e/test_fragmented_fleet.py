"""End to end on a real control plane: does ``compactor run --once`` leave the cluster where ``compactor plan`` says?

Each test gets 16 fake H100 nodes (8 GPUs each, served by the in-process fake kubelet in ``kubelets.py``), and the
real scheduler fragments them (``fragmentation.py``): Deployments fill about 80% of the
GPUs, then some are scaled down to about half. One state also waits with an 8-GPU pod
that no node can take. Then, restricted to the test's namespace:

1. ``compactor plan --output json``: the promise (``freedGpus``, ``moves``, ``placedPending``);
2. the whole-free GPUs are measured on the live cluster;
3. ``compactor run --once`` (or, for two states, ``compactor apply --plan`` of the written plan) runs while
   ``RunWatcher`` watches (not samples) the PDBs, the pods and the nodes; then the test waits until every
   Deployment is whole again.

The checks, all from the live cluster and the watch streams: the net whole-free GPUs
gained equal the plan's ``freedGpus``; the pending pods placed equal the plan's, each on
the node named by the plan the run carried out (``compactor run`` plans afresh; with
``solver.deterministic`` it plans the same as ``compactor plan`` did, and ``RunWatcher``
reads the plan it carried out from the executor's state); the pods evicted equal the planned moves; no PDB ever dropped below its
desired healthy count; no node is left cordoned, tainted or annotated ``compactor.io/*``;
every Deployment is whole; the run reports ``succeeded``. Every check is evaluated and
all failures are reported together.

Each state prints one JSON line (``pytest -s``), also appended to ``$GPU_COMPACTOR_E2E_RESULTS``.
The harness (the states, ``plan_and_carry_out``, the checks) is in ``fleet_runs.py``, shared with other e2e modules.
"""

from __future__ import annotations

import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from kubernetes import client as k8s

from compactor.errors import EXIT_STOPPED
from tests.e2e import fragmentation as frag
from tests.e2e.fleet_runs import (
    RUN_TIMEOUT,
    STATES,
    apply,
    compactor_config,
    leftovers,
    plan_and_carry_out,
    run_once,
    settle,
)
from tests.e2e.fragmentation import Fleet, StartingState
from tests.e2e.helpers import (
    NEEDS_CLUSTER,
    STATE_CONFIGMAP,
    STATE_NAMESPACE,
    Kube,
    compactor_marks,
    get_or_none,
    kubeconfig_args,
    name_of,
    raw,
    run_compactor,
    start_compactor,
    wait_for,
)
from tests.e2e.watchers import RunWatcher

pytestmark = [
    NEEDS_CLUSTER,
    pytest.mark.e2e,
    pytest.mark.timeout(900),
]


@pytest.mark.parametrize("state", STATES, ids=lambda s: s.label)
def test_run_once_ends_where_the_plan_says(
    state: StartingState,
    kube: Kube,
    gpu_fleet: Fleet,
    fleet_namespace: str,
    steering_policy: str,
    tenant_namespace: str,
    tmp_path: Path,
) -> None:
    """With the steering policy installed, as the shipped manifests install it, and another team creating pods meanwhile."""
    plan_and_carry_out(
        state,
        kube,
        gpu_fleet,
        fleet_namespace,
        tmp_path,
        run_once,
        steering="policy",
        tenant_namespace=tenant_namespace,
    )


@pytest.mark.parametrize("state", [STATES[0], STATES[-1]], ids=lambda s: s.label)
def test_apply_carries_out_the_written_plan(
    state: StartingState, kube: Kube, gpu_fleet: Fleet, fleet_namespace: str, steering_policy: str, tmp_path: Path
) -> None:
    """The README's way to run exactly the plan one read: `plan --write`, then `apply --plan` on the live cluster."""
    plan_and_carry_out(state, kube, gpu_fleet, fleet_namespace, tmp_path, apply, steering="policy")


def test_without_the_policy_a_run_falls_back_to_holds_says_so_and_still_ends_where_the_plan_says(
    kube: Kube, gpu_fleet: Fleet, fleet_namespace: str, without_steering_policy: str, tmp_path: Path
) -> None:
    plan_and_carry_out(
        STATES[0],
        kube,
        gpu_fleet,
        fleet_namespace,
        tmp_path,
        run_once,
        steering="holds",
        overrides={"steering": {"policy_name": without_steering_policy}},
        steering_why="is not installed",
    )


def test_concurrent_moves_of_different_owners_end_where_the_plan_says(
    kube: Kube, gpu_fleet: Fleet, fleet_namespace: str, steering_policy: str, tmp_path: Path
) -> None:
    """caps.max_concurrent_evictions 4 with the policy: owners move side by side, each replacement pinned to its node."""
    plan_and_carry_out(
        STATES[1],
        kube,
        gpu_fleet,
        fleet_namespace,
        tmp_path,
        run_once,
        steering="policy",
        overrides={"caps": {"max_concurrent_evictions": 4}},
    )


def test_two_runs_started_together_exactly_one_acts(
    kube: Kube, gpu_fleet: Fleet, fleet_namespace: str, steering_policy: str, tmp_path: Path
) -> None:
    frag.build(kube, fleet_namespace, gpu_fleet, StartingState(seed=19))
    config = tmp_path / "compactor.yaml"
    config.write_text(yaml.safe_dump(compactor_config(fleet_namespace)), encoding="utf-8")
    before = frag.whole_free_gpus(kube, gpu_fleet)
    command = ("run", "--once", *kubeconfig_args(), "--config", str(config), "--output", "json")
    with RunWatcher(kube, fleet_namespace) as watcher, ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(lambda _: run_compactor(*command, timeout=RUN_TIMEOUT), range(2)))
        whole = settle(kube, fleet_namespace)
    described = "\n\n".join(r.describe() for r in runs)
    acted = [r for r in runs if r.returncode == 0 and r.json()["movesTotal"] > 0]
    assert len(acted) == 1, described
    (other,) = [r for r in runs if r is not acted[0]]
    # the other met the Lease held (exit 2), or, when the first was done before it asked, found nothing left to do
    refused = other.returncode == 2 and "another gpu-compactor is acting" in other.stderr
    came_after = other.returncode == 0 and other.json()["status"] == "nothing-to-do"
    assert refused or came_after, described
    report = acted[0].json()
    assert report["status"] == "succeeded" and report["movesTotal"] > 0, described
    observed = watcher.observed
    # nobody evicted twice
    assert len(observed.evicted) == report["movesTotal"], f"evicted {sorted(observed.evicted)}\n{described}"
    gain = sum(frag.whole_free_gpus(kube, gpu_fleet).values()) - sum(before.values())
    assert gain == report["outcome"]["plannedFreedGpus"] == report["outcome"]["freedGpus"], described
    assert not observed.pdb_violations and not observed.errors and not observed.gaps, observed.pdb_violations[:5]
    assert whole[0], whole[1][-2000:]
    assert not leftovers(kube, gpu_fleet, observed)
    leases = k8s.CoordinationV1Api(kube.api_client)
    lease = get_or_none(leases.read_namespaced_lease, "gpu-compactor-leader", STATE_NAMESPACE)
    assert lease is None or not (lease.get("spec") or {}).get("holderIdentity"), f"the lease was not released: {lease}"


def test_sigterm_stops_a_run_at_a_safe_point_and_the_next_run_finishes_it(
    kube: Kube, gpu_fleet: Fleet, fleet_namespace: str, steering_policy: str, tmp_path: Path
) -> None:
    frag.build(kube, fleet_namespace, gpu_fleet, StartingState(seed=42))
    config = tmp_path / "compactor.yaml"
    config.write_text(yaml.safe_dump(compactor_config(fleet_namespace)), encoding="utf-8")
    before = frag.whole_free_gpus(kube, gpu_fleet)
    command = ("run", "--once", *kubeconfig_args(), "--config", str(config), "--output", "json")
    with RunWatcher(kube, fleet_namespace) as watcher:
        first = start_compactor(*command)
        wait_for(
            lambda: (bool(watcher.observed.evicted), "no eviction yet"),
            timeout=120,
            interval=0.2,
            what="the first eviction",
        )
        stopped_at = time.monotonic()
        first.send_signal(signal.SIGTERM)
        out, err = first.communicate(timeout=60)
        stop_seconds = time.monotonic() - stopped_at
        assert first.returncode == EXIT_STOPPED and "stopped at a safe point" in err, (
            f"exit {first.returncode}\n{out}\n{err}"
        )
        assert stop_seconds < 35, f"took {stop_seconds:.1f}s to stop"  # the CronJob's grace period is 60 s
        interrupted = get_or_none(kube.core.read_namespaced_config_map, STATE_CONFIGMAP, STATE_NAMESPACE)
        assert interrupted is not None, "the interrupted run must leave its state for recovery"
        held = [
            name_of(n)
            for n in raw(kube.core.list_node).get("items") or []
            if "compactor.io/held-for" in compactor_marks(n)
        ]
        assert not held, f"nodes still held after the stop: {held}"
        lease = get_or_none(
            k8s.CoordinationV1Api(kube.api_client).read_namespaced_lease, "gpu-compactor-leader", STATE_NAMESPACE
        )
        assert lease is not None and not (lease.get("spec") or {}).get("holderIdentity"), (
            f"the lease was not released: {lease}"
        )

        second = run_compactor(*command, timeout=RUN_TIMEOUT)
        whole = settle(kube, fleet_namespace)
    assert second.returncode == 0, second.describe()
    resumed = next((line for line in second.stderr.splitlines() if "recovered plan " in line), "")
    assert ": succeeded; cluster gained" in resumed, second.describe()
    observed = watcher.observed
    assert not observed.pdb_violations and not observed.errors and not observed.gaps, observed.pdb_violations[:5]
    assert whole[0], whole[1][-2000:]
    assert not leftovers(kube, gpu_fleet, observed)
    gained = sum(frag.whole_free_gpus(kube, gpu_fleet).values()) - sum(before.values())
    planned = int((observed.run_plan or {}).get("freedGpus") or 0)
    assert gained >= planned > 0, f"gained {gained}, the interrupted plan promised {planned}\n{second.describe()}"

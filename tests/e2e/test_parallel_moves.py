"""End to end on a real control plane: moves of different workloads in flight together, under their budgets (issue 42,
item 2).

A fleet fragmented by the real scheduler is planned with ``caps.max_concurrent_evictions`` 4 and the steering policy.
Before the plan is applied, the workload of its last move gets a PodDisruptionBudget that allows no disruption at all
(``minAvailable`` its replicas), as its owner might during a rollout of their own. The run then:

* has at least two moves in flight at once (the executor's state records them side by side);
* never takes any workload below its budget (every PDB event watched: ``currentHealthy >= desiredHealthy``);
* evicts no pod of the blocked workload: its move waits for the budget (``replacement_timeout_seconds``, 20 s here),
  then is refused with what hung on it, and the other moves go on; the run ends ``partial``, naming the budget;
* leaves no fence, steering entry or state behind, and every Deployment whole.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

from tests.e2e import fragmentation as frag
from tests.e2e.fleet_runs import PLAN_TIMEOUT, app_by_pod, apply, compactor_config, leftovers, settle
from tests.e2e.fragmentation import Fleet, StartingState
from tests.e2e.helpers import NEEDS_CLUSTER, Kube, kubeconfig_args, raw, run_compactor, wait_for, with_retries
from tests.e2e.watchers import RunWatcher

pytestmark = [NEEDS_CLUSTER, pytest.mark.e2e, pytest.mark.timeout(900)]
PDB_WAIT = 20  # executor.replacement_timeout_seconds: how long a move waits for its budget before it is refused
# Every GPU taken, an 8-GPU pod waiting: a plan that moves four workloads or more under either scheduler profile (probed on
# realk8s v1.36.2: STATES[1] moves two under bin-packing, STATES[3] two under the default profile).
STATE = StartingState(seed=17, fill=1.0, pending_gpus=8)


def _block_budget(kube: Kube, namespace: str, app: str) -> None:
    """``app``'s budget allows nothing: ``minAvailable`` its replicas, until the disruption controller says 0."""
    replicas = int(raw(kube.apps.read_namespaced_deployment, app, namespace)["spec"]["replicas"])
    patch = {"spec": {"maxUnavailable": None, "minAvailable": replicas}}
    with_retries(
        lambda: kube.policy.patch_namespaced_pod_disruption_budget(app, namespace, patch),
        what=f"blocking PDB {app}",
        statuses=(429, 500, 503),
    )

    def blocked() -> tuple[bool, str]:
        pdb = raw(kube.policy.read_namespaced_pod_disruption_budget, app, namespace)
        status, generation = pdb.get("status") or {}, int(pdb["metadata"].get("generation") or 0)
        observed = int(status.get("observedGeneration") or 0) >= generation
        return observed and int(status.get("disruptionsAllowed", 1)) == 0, str(status)

    wait_for(blocked, timeout=60, interval=0.5, what=f"PDB {app} to allow no disruption")


def test_moves_of_different_workloads_go_side_by_side_and_a_budget_at_zero_refuses_only_its_own(
    kube: Kube, gpu_fleet: Fleet, fleet_namespace: str, steering_policy: str, tmp_path: Path
) -> None:
    frag.build(kube, fleet_namespace, gpu_fleet, STATE)
    settings = compactor_config(fleet_namespace)
    settings["caps"] = {"max_concurrent_evictions": 4}
    settings["executor"]["replacement_timeout_seconds"] = PDB_WAIT
    config, written = tmp_path / "compactor.yaml", tmp_path / "plan.json"
    config.write_text(yaml.safe_dump(settings), encoding="utf-8")
    # the freest plan within 8 moves: the balanced point may empty one node only, whose pods the real scheduler's ties
    # sometimes leave to two workloads (1 run in 4 on the default profile); freeing more involves more of them
    planned = run_compactor(
        "plan", *kubeconfig_args(), "--config", str(config), "--output", "json", "--write", str(written),
        "--objective", "max-free", "--max-moves", "8", timeout=PLAN_TIMEOUT,
    )  # fmt: skip
    assert planned.returncode == 0, planned.describe()
    plan = planned.json()
    apps = app_by_pod(kube, fleet_namespace)  # pod name -> its Deployment (the app label), before any pod moves
    owners = [apps[str(m["pod"]).split("/", 1)[1]] for m in plan["moves"]]
    assert len(set(owners)) >= 3, f"the plan moves too few workloads to test anything: {owners}"
    blocked = owners[-1]
    others = [o for o in owners if o != blocked]
    assert Counter(others).most_common(1)[0][1] < len(others), f"no two other workloads to move side by side: {owners}"
    _block_budget(kube, fleet_namespace, blocked)
    before = {p["metadata"]["uid"] for p in frag.pods(kube, fleet_namespace) if frag.app_of(p) == blocked}

    with RunWatcher(kube, fleet_namespace) as watcher:
        ran = apply(config, written)
        whole = settle(kube, fleet_namespace)
    observed = watcher.observed
    report = ran.json()
    described = ran.describe()
    assert report["status"] == "partial", described
    assert f"PodDisruptionBudget {fleet_namespace}/{blocked} allowed no disruption for {PDB_WAIT}s" in report["reason"]
    evicted_apps = {apps.get(pod, "?") for pod in observed.evicted}
    assert blocked not in evicted_apps and len(evicted_apps) >= 2, (sorted(evicted_apps), described)
    after = {p["metadata"]["uid"] for p in frag.pods(kube, fleet_namespace) if frag.app_of(p) == blocked}
    assert after == before, f"the blocked workload's pods changed: {sorted(before ^ after)}"
    assert observed.max_in_flight >= 2, f"never two moves in flight at once ({observed.max_in_flight})\n{described}"
    assert not observed.pdb_violations and not observed.errors and not observed.gaps, observed.pdb_violations[:5]
    assert whole[0], whole[1][-2000:]
    assert not leftovers(kube, gpu_fleet, observed)

"""End to end on a real control plane: disruption controls across runs (issue [15]).

* A ``run --once`` outside its disruption window changes nothing: the same pods (uids) on the same nodes, no eviction,
  no node cordoned, tainted or annotated, no executor state and no ``gpu-compactor-history`` written; it says when the
  window opens. ``compactor plan`` on the same config still shows the plan (a dry run may run at any time) and says a
  run would not act now.
* Two consecutive runs with ``disruption.workload_cooldown_minutes``: run 1 moves some workloads (its
  ``gpu-compactor-history`` and the evictions seen say which). Then other Deployments are scaled down (the real
  ReplicaSets pick the pods by ``pod-deletion-cost``) until a node runs only unpinned pods of one of those workloads,
  with room for them elsewhere, and only that workload may move (``movable.pod_selector``): a plan without the cooldown
  moves its pods again (checked, or the test proves nothing). With the cooldown, the plan moves nothing and says why,
  pod by pod (``explanations.cooldowns``), and run 2 evicts no pod of any workload run 1 moved.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import yaml

from tests.e2e import fragmentation as frag
from tests.e2e.fleet_runs import PLAN_TIMEOUT, RUN_TIMEOUT, STATES, compactor_config, settle
from tests.e2e.fragmentation import Fleet
from tests.e2e.helpers import (
    COMPACTOR_ANNOTATION_PREFIX,
    GPU,
    NEEDS_CLUSTER,
    STATE_CONFIGMAP,
    STATE_NAMESPACE,
    CompactorRun,
    Kube,
    Obj,
    annotations_of,
    compactor_marks,
    describe_pods,
    get_or_none,
    kubeconfig_args,
    name_of,
    raw,
    run_compactor,
    wait_for,
    with_retries,
)
from tests.e2e.watchers import RunWatcher

pytestmark = [NEEDS_CLUSTER, pytest.mark.e2e, pytest.mark.timeout(900)]

# The run's memory (compactor/actions/services/memory.py HISTORY_CONFIGMAP, HISTORY_KEY), in the state namespace; documented in
# config/compactor.yaml under disruption:.
HISTORY_CONFIGMAP = "gpu-compactor-history"
HISTORY_KEY = "history.json"
COOLDOWN_MINUTES = 30
# compactor/actions/steering/pin.py: the node the steering policy pinned a pod to
STEERED_TO = "compactor.io/steered-to"
BALANCED_MOVES_PER_GPU = 0.5  # aims.balanced_moves_per_gpu: a node is freed only while it costs at most this per GPU


# --------------------------------------------------------------------------- helpers


def _write_config(
    path: Path, namespace: str, *, disruption: dict[str, Any], movable: dict[str, Any] | None = None
) -> Path:
    settings = compactor_config(namespace)
    settings["movable"].update(movable or {})
    settings["disruption"] = disruption
    path.write_text(yaml.safe_dump(settings), encoding="utf-8")
    return path


def _plan(config: Path, *, output: str = "json") -> CompactorRun:
    planned = run_compactor(
        "plan", *kubeconfig_args(), "--config", str(config), "--output", output, timeout=PLAN_TIMEOUT
    )
    assert planned.returncode == 0, planned.describe()
    return planned


def _run_once(config: Path) -> CompactorRun:
    return run_compactor(
        "run", "--once", *kubeconfig_args(), "--config", str(config), "--output", "json", timeout=RUN_TIMEOUT
    )


def _placement(kube: Kube, namespace: str) -> dict[str, tuple[str, str]]:
    """uid -> (pod name, node) of every pod of the namespace."""
    return {str(p["metadata"]["uid"]): (name_of(p), frag.node_of(p)) for p in frag.pods(kube, namespace)}


def _workload_of(pod: Obj) -> str:
    """namespace/Kind/name of the pod's controller, as the compactor's history keys it (planner/rules/history.py workload_key)."""
    meta = pod.get("metadata") or {}
    owner = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), None)
    return f"{meta.get('namespace')}/{owner['kind']}/{owner['name']}" if owner else ""


def _move_workload(move: Obj) -> str:
    """A plan move's workload: its pod's namespace and its ``owner`` (Kind/name of the controller)."""
    return f"{str(move['pod']).split('/', 1)[0]}/{move.get('owner', '')}" if move.get("owner") else ""


def _history(kube: Kube) -> Obj | None:
    return get_or_none(kube.core.read_namespaced_config_map, HISTORY_CONFIGMAP, STATE_NAMESPACE)


def _node_leftovers(kube: Kube, fleet: Fleet) -> dict[str, Any]:
    """Fleet nodes cordoned, tainted compactor.io/* or annotated compactor.io/*."""
    found: dict[str, Any] = {}
    for node in raw(kube.core.list_node).get("items") or []:
        name = name_of(node)
        if name not in fleet.names:
            continue
        spec = node.get("spec") or {}
        taints = [t for t in spec.get("taints") or [] if str(t.get("key", "")).startswith(COMPACTOR_ANNOTATION_PREFIX)]
        if spec.get("unschedulable") or taints or compactor_marks(node):
            found[name] = {"unschedulable": spec.get("unschedulable"), "taints": taints, "marks": compactor_marks(node)}
    return found


def _closed_window(now: datetime) -> tuple[str, str]:
    """A daily UTC window that opens about 12 hours from ``now`` (closed for the whole test: it lasts 30 minutes) and the
    ISO time of its next opening, as ``compactor.app.windows`` prints it."""
    opens = (now + timedelta(hours=12)).replace(second=0, microsecond=0)
    return f"{opens.minute} {opens.hour} * * *", opens.astimezone(ZoneInfo("UTC")).isoformat()


# --------------------------------------------------------------------------- 1. disruption windows


def test_a_run_outside_its_disruption_window_changes_nothing_and_says_when_it_opens(
    kube: Kube, gpu_fleet: Fleet, fleet_namespace: str, steering_policy: str, tmp_path: Path
) -> None:
    frag.build(kube, fleet_namespace, gpu_fleet, STATES[0])
    schedule, opens_at = _closed_window(datetime.now(UTC))
    window = {"schedule": schedule, "duration_minutes": 30, "timezone": "UTC"}
    config = _write_config(tmp_path / "compactor.yaml", fleet_namespace, disruption={"windows": [window]})
    next_opening = f"outside the disruption windows: the next opens at {opens_at} ('{schedule}' in UTC, for 30 min)"

    # A dry run may run at any time: `compactor plan` shows the plan, and says that a run would not carry it out now.
    plan = _plan(config).json()
    assert plan.get("moves"), (
        f"the starting state gave the planner nothing to do, so a closed window proves nothing:\n{json.dumps(plan)[:3000]}"
    )
    text = _plan(config, output="text")
    assert f"With these settings a run would carry it out (mode: apply), but not now: {next_opening}." in text.stdout, (
        text.describe()
    )

    before = _placement(kube, fleet_namespace)
    history_before = _history(kube)
    with RunWatcher(kube, fleet_namespace) as watcher:
        ran = _run_once(config)
    observed = watcher.observed
    after = _placement(kube, fleet_namespace)

    # compactor/commands/execute.py _run_once: outside every window it logs "<why>: this run changes nothing", prints a report
    # of status "held" naming the window, and exits 0.
    assert ran.returncode == 0, ran.describe()
    assert f"{next_opening}: this run changes nothing" in ran.stderr, ran.describe()
    report = ran.json()
    assert (report["status"], report["movesDone"]) == ("held", 0) and next_opening in report["reason"], ran.describe()
    assert after == before, (
        f"the pods changed outside the window:\nbefore {sorted(before.values())}\nafter {sorted(after.values())}\n"
        f"{ran.describe()}"
    )
    assert not observed.evicted and not observed.created, (
        f"evicted {observed.evicted}, created {observed.created}\n{ran.describe()}"
    )
    assert not observed.cordon_seconds, f"nodes closed during the run: {observed.cordon_seconds}\n{ran.describe()}"
    assert not observed.run_plan, f"the run wrote executor state: {observed.run_plan.get('metadata')}\n{ran.describe()}"
    assert not observed.errors and not observed.gaps, observed.errors + observed.gaps
    assert _node_leftovers(kube, gpu_fleet) == {}, ran.describe()
    assert get_or_none(kube.core.read_namespaced_config_map, STATE_CONFIGMAP, STATE_NAMESPACE) is None, ran.describe()
    history_after = _history(kube)
    assert (history_after or {}).get("data") == (history_before or {}).get("data"), (
        f"configmap {STATE_NAMESPACE}/{HISTORY_CONFIGMAP} was written by a run outside its window: {history_after}"
    )
    if history_before is None:
        assert history_after is None, (
            f"configmap {STATE_NAMESPACE}/{HISTORY_CONFIGMAP} created outside the window: {history_after}"
        )
    print(
        f"\nE2E-WINDOW {json.dumps({'planMoves': len(plan['moves']), 'schedule': schedule, 'runSeconds': round(ran.seconds, 1)})}"
    )


# --------------------------------------------------------------------------- 2. workload cooldown


def _gpus(pod: Obj) -> int:
    containers = (pod.get("spec") or {}).get("containers") or []
    return sum(int(((c.get("resources") or {}).get("requests") or {}).get(GPU) or 0) for c in containers)


def _refragment_around(kube: Kube, namespace: str, fleet: Fleet, workloads: set[str]) -> tuple[str, str, list[str]]:
    """Pick one of ``workloads`` (its ``app``) and a node ``drain`` running few of its pods, and scale other Deployments
    down (their ReplicaSets pick the pods by ``pod-deletion-cost``) so that ``drain`` runs that workload's pods only and
    other busy nodes have room for them: freeing ``drain`` then takes moving them. Returns (app, drain, the pods removed)."""
    live = [p for p in frag.pods(kube, namespace) if frag.node_of(p)]
    on: dict[str, list[Obj]] = {n: [p for p in live if frag.node_of(p) == n] for n in fleet.names}
    free = {n: fleet.gpus_per_node - sum(_gpus(p) for p in pods) for n, pods in on.items()}
    # Only the fleet's Deployments, each under its PDB, are scaled down and settled; the pending pod's Deployment (a
    # starting state with ``pending_gpus``) has no PDB and stays as it is.
    guarded = {name_of(b) for b in raw(kube.policy.list_namespaced_pod_disruption_budget, namespace).get("items") or []}
    replicas = {
        name_of(d): int((d.get("spec") or {}).get("replicas") or 0)
        for d in raw(kube.apps.list_namespaced_deployment, namespace).get("items") or []
        if name_of(d) in guarded
    }

    def removable(
        victims: list[Obj],
    ) -> bool:  # every Deployment keeps a replica (a PDB over no pod allows no disruption)
        counts = Counter(frag.app_of(v) for v in victims)
        return all(app in replicas and replicas[app] - n >= 1 for app, n in counts.items())

    apps = sorted({frag.app_of(p) for p in live if _workload_of(p) in workloads})
    candidates = sorted(
        ((app, node) for app in apps for node in fleet.names if any(frag.app_of(p) == app for p in on[node])),
        key=lambda c: (_cost([p for p in on[c[1]] if frag.app_of(p) == c[0]]), c),
    )
    for app, drain in candidates:
        movers = [p for p in on[drain] if frag.app_of(p) == app]
        victims = [p for p in on[drain] if frag.app_of(p) != app]
        busy = {n: free[n] for n in fleet.names if n != drain and on[n]}
        if any(
            _pinned(p) for p in movers
        ):  # the steering policy pinned run 1's replacements to their nodes: see _pinned
            continue
        if _cost(movers) > BALANCED_MOVES_PER_GPU * fleet.gpus_per_node or not removable(
            victims
        ):  # not worth freeing drain
            continue
        for node in sorted(busy, key=lambda n: (-busy[n], n)):  # make room where there is most already
            others = sorted((p for p in on[node] if frag.app_of(p) != app), key=lambda p: (-_gpus(p), name_of(p)))
            while (
                _room(busy, victims, _gpus(movers[0])) < len(movers)
                and len(others) > 1
                and removable([*victims, others[0]])
            ):
                victims.append(others.pop(0))  # never the node's last pod: it stays busy, so a move there frees drain
        if _room(busy, victims, _gpus(movers[0])) >= len(movers):
            _remove(kube, namespace, victims, replicas)
            return app, drain, sorted(name_of(p) for p in victims)
    raise AssertionError(
        f"no node can be left running only pods of one of {sorted(workloads)} with room for them elsewhere:\n"
        f"{describe_pods(live)}"
    )


def _pinned(pod: Obj) -> bool:
    """A replacement the steering policy pinned to its node: it keeps the required node affinity the policy added (and
    ``compactor.io/steered-to``), so the planner never moves it again, cooldown or not; only its siblings test the cooldown."""
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    return bool(affinity.get("requiredDuringSchedulingIgnoredDuringExecution")) or STEERED_TO in annotations_of(pod)


def _cost(pods: list[Obj]) -> float:
    """What moving ``pods`` costs the planner, in moves (aims.move_cost defaults: half a move plus half a move per GPU)."""
    return sum(0.5 + 0.5 * _gpus(p) for p in pods)


def _room(free: dict[str, int], victims: list[Obj], size: int) -> int:
    """How many pods of ``size`` GPUs the nodes of ``free`` (node -> free GPUs) take once ``victims`` are gone."""
    freed = Counter[str]()
    for victim in victims:
        freed[frag.node_of(victim)] += _gpus(victim)
    return sum((gpus + freed[node]) // size for node, gpus in free.items())


def _remove(kube: Kube, namespace: str, victims: list[Obj], replicas: dict[str, int]) -> None:
    """Scale each victim's Deployment down by its victims, which go first (the lowest ``pod-deletion-cost``)."""
    body = {"metadata": {"annotations": {frag.DELETION_COST: "-1000"}}}
    for name in sorted(name_of(v) for v in victims):
        with_retries(
            partial(kube.core.patch_namespaced_pod, name, namespace, body),
            what=f"giving pod {name} the lowest deletion cost",
        )
    wanted = dict(replicas)
    for app, n in Counter(frag.app_of(v) for v in victims).items():
        wanted[app] -= n
        frag.scale(kube, namespace, app, wanted[app])
    gone = {name_of(v) for v in victims}

    def victims_gone() -> tuple[bool, str]:
        now = frag.pods(kube, namespace)
        return not gone & {name_of(p) for p in now}, describe_pods(now)

    wait_for(victims_gone, timeout=frag.SETTLE_TIMEOUT, interval=1, what=f"the scaled-down pods {sorted(gone)} to go")
    wait_for(
        frag.settled(kube, namespace, wanted),
        timeout=frag.SETTLE_TIMEOUT,
        interval=1,
        what="every Deployment to run its replicas and every PDB to allow one disruption",
    )


def test_a_second_run_within_the_workload_cooldown_moves_no_workload_the_first_run_moved(
    kube: Kube, gpu_fleet: Fleet, fleet_namespace: str, steering_policy: str, tmp_path: Path
) -> None:
    # The state with a pending 8-GPU pod: every node keeps a pod through the scale-down, so run 1 moves several workloads
    # under either scheduler profile (seed 7 alone leaves the bin-packing profile one move, too few to refragment around).
    frag.build(kube, fleet_namespace, gpu_fleet, STATES[3])
    cooled = {"workload_cooldown_minutes": COOLDOWN_MINUTES, "node_cooldown_minutes": 0}
    config = _write_config(tmp_path / "compactor.yaml", fleet_namespace, disruption=cooled)
    assert _plan(config).json().get("moves"), "the starting state gave the planner nothing to do"

    # Run 1 moves some workloads; its history (and the evictions seen) say which.
    started = datetime.now(UTC)
    with RunWatcher(kube, fleet_namespace) as watcher:
        first = _run_once(config)
        whole = settle(kube, fleet_namespace)
    assert first.returncode == 0, first.describe()
    assert whole[0], whole[1][-3000:]
    first_report = first.json()
    assert first_report["status"] == "succeeded" and first_report["movesDone"] > 0, first.describe()
    history = _history(kube)
    assert history is not None, f"run 1 wrote no configmap {STATE_NAMESPACE}/{HISTORY_CONFIGMAP}\n{first.describe()}"
    records = json.loads(history["data"][HISTORY_KEY])["moves"]
    ours = [
        r
        for r in records
        if str(r["pod"]).startswith(f"{fleet_namespace}/") and datetime.fromisoformat(r["at"]) >= started
    ]
    moved = {str(r["pod"]).split("/", 1)[1]: str(r["workload"]) for r in ours if r["outcome"] == "moved"}
    evicted = watcher.observed.evicted
    assert set(moved) == set(evicted) and len(moved) == first_report["movesDone"], (
        f"history {ours}\nevicted {sorted(evicted)}\n{first.describe()}"
    )
    workloads = set(moved.values())
    in_cooldown = {
        str(r["workload"])
        for r in records
        if r["outcome"] == "moved"  # ours, and any other a history kept in the last 30 min
        and datetime.now(UTC) - datetime.fromisoformat(r["at"]) < timedelta(minutes=COOLDOWN_MINUTES - 5)
    }
    assert workloads == {f"{fleet_namespace}/ReplicaSet/{watcher.observed.owners[pod]}" for pod in evicted}, (
        workloads,
        watcher.observed.owners,
    )

    # Fragmented again: a node runs only pods of one of those workloads (``app``), with room for them elsewhere, and from
    # here on only that workload may move (movable.pod_selector). Without the cooldown, the plan WOULD move its pods again
    # to free that node (else this test proves nothing); with it, nothing may move.
    app, drain, removed = _refragment_around(kube, fleet_namespace, gpu_fleet, workloads)
    selected = {"pod_selector": {"app": app}}
    config = _write_config(tmp_path / "second.yaml", fleet_namespace, disruption=cooled, movable=selected)
    without = _write_config(
        tmp_path / "without-cooldown.yaml",
        fleet_namespace,
        movable=selected,
        disruption={"workload_cooldown_minutes": 0, "node_cooldown_minutes": 0},
    )
    uncooled = _plan(without).json()
    again = [m for m in uncooled.get("moves") or [] if _move_workload(m) in workloads]
    assert again, (
        f"without the cooldown the plan does not move {app} (moved by run 1; {drain} runs only its pods), so the cooldown is not tested "
        f"(removed {removed}); plan moves {uncooled.get('moves')}, frees {uncooled.get('freedNodes')}; unmovable "
        f"{(uncooled.get('explanations') or {}).get('unmovablePods')}; warnings {uncooled.get('warnings')}; solver {uncooled.get('solver')}\n"
        f"{describe_pods(frag.pods(kube, fleet_namespace))}"
    )

    # With it, the plan keeps them where they are and says why, pod by pod.
    cooling = {name_of(p): p for p in frag.pods(kube, fleet_namespace) if _workload_of(p) in workloads}
    selectable = {
        name: pod for name, pod in cooling.items() if frag.app_of(pod) == app
    }  # the others stay for pod_selector
    second_plan = _plan(config).json()
    assert not second_plan.get("moves"), (
        f"only {app} may move, and it is in its cooldown; the plan moves {second_plan['moves']}"
    )
    explanations = second_plan.get("explanations") or {}
    cooldowns: dict[str, str] = explanations.get("cooldowns") or {}
    keys = {f"{fleet_namespace}/{name}": _workload_of(pod) for name, pod in selectable.items()}
    counted = {
        reason: n
        for reason, n in (explanations.get("unmovablePods") or {}).items()
        if "workload_cooldown_minutes" in reason
    }
    assert list(counted.values()) == [len(selectable)], (
        f"explanations.unmovablePods {explanations.get('unmovablePods')}; {len(selectable)} pods of {app}, in its cooldown"
    )
    assert cooldowns and set(cooldowns) <= set(keys), (
        f"explanations.cooldowns {sorted(cooldowns)}; cooling pods {sorted(keys)}"
    )
    wrong = {
        pod: note
        for pod, note in cooldowns.items()
        if not re.fullmatch(
            rf"its workload {re.escape(keys[pod])} moved \d+ min ago; cooldown {COOLDOWN_MINUTES} min", note
        )
    }
    assert not wrong, f"explanations.cooldowns does not say the workload and its cooldown: {wrong}"
    # The notes are a sample of the first pods by name (compose.UNMOVABLE_SAMPLE); within it, every pod the plan without
    # the cooldown moves has its note.
    sampled = sorted(keys)[: len(cooldowns)]
    assert sorted(cooldowns) == sampled, f"explanations.cooldowns {sorted(cooldowns)}; first cooling pods {sampled}"
    unexplained = [m["pod"] for m in again if m["pod"] <= sampled[-1] and m["pod"] not in cooldowns]
    assert not unexplained, f"pods held by the cooldown without a note: {unexplained}; notes {cooldowns}"
    assert any(
        f"in their cooldown: {len(in_cooldown)} workload(s), 0 node(s)" in w for w in second_plan.get("warnings") or []
    ), second_plan.get("warnings")

    # Run 2 with the cooldown: no pod of a run-1 workload is evicted (same uids on the same nodes).
    before_second = {str(p["metadata"]["uid"]): (name, frag.node_of(p)) for name, p in cooling.items()}
    with RunWatcher(kube, fleet_namespace) as watcher:
        second = _run_once(config)
        whole = settle(kube, fleet_namespace)
    assert second.returncode == 0, second.describe()
    assert whole[0], whole[1][-3000:]
    after_second = {uid: where for uid, where in _placement(kube, fleet_namespace).items() if uid in before_second}
    assert after_second == before_second, (
        f"run 2 moved pods of workloads in their cooldown: before {sorted(before_second.values())}, "
        f"after {sorted(after_second.values())}\n{second.describe()}"
    )
    hit = sorted(set(watcher.observed.evicted) & set(cooling))
    assert not hit, f"run 2 evicted {hit}, of workloads run 1 moved\n{second.describe()}"
    report = second.json()
    assert report["status"] == "nothing-to-do" and report["movesTotal"] == 0, second.describe()
    assert not watcher.observed.evicted and not watcher.observed.run_plan, (
        watcher.observed.evicted,
        watcher.observed.run_plan,
    )
    assert _node_leftovers(kube, gpu_fleet) == {}, second.describe()
    summary = {
        "run1Moved": len(moved),
        "workloads": len(workloads),
        "app": app,
        "drain": drain,
        "removed": len(removed),
        "wouldMoveAgain": len(again),
        "cooling": len(selectable),
        "notes": len(cooldowns),
        "run2": report["status"],
    }
    print(f"\nE2E-COOLDOWN {json.dumps(summary)}")

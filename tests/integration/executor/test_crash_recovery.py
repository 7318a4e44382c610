"""Crash safety: kill the executor at every write it makes, then recover, and check nothing was left broken.

For each scenario the executor's writes (state ConfigMap, node patches, evictions,
events) are counted on an undisturbed run; then, for every k = 1..N and both sides of
the write, a fresh cluster crashes at the k-th write (``Crash`` is a BaseException, as a
killed process would be: no ``except`` in the executor sees it). ``recover`` then runs
with a fresh executor, the world settles, and the invariants must hold:

* no node cordoned or marked by the executor, no state ConfigMap (no active plan left);
* no PDB ever violated, no pod lost;
* the recovered run reports succeeded or failed, never an exception;
* every eviction (before or after the crash) happened with all the plan's nodes cordoned
  and every controller whole (one eviction at a time);
* a plan the executor had decided to abort is rolled back by recovery, never resumed;
* with GPUs through DRA (``dra-one-freed``, issue 43): no device held by two claims, every pod's claims allocated on
  its own node, no claim left of a pod that is gone.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest

from compactor.actions.port import annotations as ann
from compactor.actions.recovery import recover
from compactor.actions.services.fencing import FencedClient, LeadershipLost
from compactor.planner.plan import CompactionPlan
from compactor.settings.bundles import RunSettings
from tests.builders import pdb, pod
from tests.dra_builders import DRIVER, device_class, dra_node, dra_pod, gpu_claim
from tests.fakecluster import Crash, FakeCluster
from tests.scenarios.executor import (
    SETTINGS,
    assert_clean,
    in_flight,
    intercept_evictions,
    make_plan,
    one_freed_node,
    owner_of,
    run,
    two_freed_nodes,
)

Obj = dict[str, Any]
When = Literal["before", "after"]


@dataclass
class Scenario:
    """A scenario: objects, how to build its fake cluster, and what to do to it before the run."""

    objects: Callable[[], list[Obj]]
    scheduler: str = "cooperative"
    prepare: Callable[[FakeCluster], None] = lambda _c: None
    outcome: str = "succeeded"  # of the undisturbed run
    settings: RunSettings = SETTINGS


def refuse(pod_name: str) -> Callable[[FakeCluster], None]:
    """Every eviction of ``pod_name`` is refused with 403 (say, an admission webhook): the run aborts there, every time."""

    def prepare(c: FakeCluster) -> None:
        def before(_namespace: str, name: str) -> None:
            if name == pod_name:
                c.fail_next("evict", 403)

        intercept_evictions(c, before)

    return prepare


def dra_one_freed_node() -> list[Obj]:
    """Three nodes whose GPUs are DRA devices (a ResourceSlice of 8 each, no GPU in their allocatable). gpu-1 and gpu-2
    hold a bare pod on a named claim of 4 devices; gpu-3 runs two pods of two ReplicaSets, each on a claim of 2 devices
    made from the template ``gpus`` (owned by its pod, as the resourceclaim controller makes it). The plan frees gpu-3:
    each replacement gets a new claim from the template, allocated on the node it binds to (fakecluster/dra.py)."""
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "gpus", "namespace": "default"},
        "spec": {
            "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": DRIVER, "count": 2}}]}}
        },
    }
    objects: list[Obj] = [device_class(), template]
    for name in ("gpu-1", "gpu-2", "gpu-3"):
        objects += dra_node(name)
    for n, name in ((1, "gpu-1"), (2, "gpu-2")):
        objects += [
            dra_pod(f"pin-{n}", shared=f"pin-{n}", on=name, owner=None),
            gpu_claim(f"pin-{n}", devices=[(name, f"gpu-{i}") for i in range(4)], for_pods=[f"pin-{n}"]),
        ]
    for i, app in enumerate(("train", "serve")):
        made = dra_pod(f"{app}-a", claim=f"{app}-a-gpus", on="gpu-3", owner=f"ReplicaSet/{app}", labels={"app": app})
        claim = gpu_claim(f"{app}-a-gpus", devices=[("gpu-3", f"gpu-{2 * i}"), ("gpu-3", f"gpu-{2 * i + 1}")])
        claim["metadata"]["ownerReferences"] = [{"kind": "Pod", "name": f"{app}-a", "uid": made["metadata"]["uid"]}]
        claim["status"]["reservedFor"] = [{"resource": "pods", "name": f"{app}-a", "uid": made["metadata"]["uid"]}]
        objects += [made, claim, pdb(app, match={"app": app}, max_unavailable=1)]
    return objects


SCENARIOS = {
    # GPUs through dynamic resource allocation: each replacement's claim made and allocated where it binds
    "dra-one-freed": Scenario(dra_one_freed_node),
    "two-freed": Scenario(two_freed_nodes),
    # two evictions in flight at once (of different owners): a crash can leave both unconfirmed
    "two-freed-width-2": Scenario(two_freed_nodes, settings=SETTINGS.amended(max_concurrent_evictions=2)),
    "one-freed": Scenario(one_freed_node),
    # aborts after one move (the 2nd eviction is refused) and rolls back: crashes land in the rollback too
    "refused-2nd": Scenario(two_freed_nodes, prepare=refuse("train-a"), outcome="failed"),
    # aborts on the first replacement (stays Pending past the timeout) and rolls back
    "stuck-pending": Scenario(one_freed_node, scheduler="never", outcome="failed"),
}


@dataclass
class World:
    cluster: FakeCluster
    plan: CompactionPlan
    settings: RunSettings
    at_eviction: list[dict[str, Any]] = field(default_factory=list)


def world(name: str) -> World:
    scenario = SCENARIOS[name]
    objects = scenario.objects()
    w = World(FakeCluster(objects, scheduler=scenario.scheduler), make_plan(objects), scenario.settings)
    scenario.prepare(w.cluster)
    c = w.cluster
    intercept_evictions(
        c,
        lambda ns, pod_name: w.at_eviction.append(
            {
                "pod": f"{ns}/{pod_name}",
                "uncordoned": [n for n in w.plan.freed_nodes if not c.is_fenced(n)],
                "in_flight": in_flight(c),
                "owner": owner_of(c, ns, pod_name) if (ns, pod_name) in c.pods else "",
            }
        ),
    )
    return w


def baseline(name: str) -> list[str]:
    """The write methods of an undisturbed run, in order."""
    w = world(name)
    report = run(w.cluster, w.plan, w.settings)
    assert report.status == SCENARIOS[name].outcome, report.reason
    return [call.method for call in w.cluster.history]


BASELINES = {name: baseline(name) for name in SCENARIOS}
CASES = [
    pytest.param(name, k, when, id=f"{name}-{k}-{when}-{method}")
    for name, methods in BASELINES.items()
    for k, method in enumerate(methods, 1)
    for when in ("before", "after")
]


@functools.cache
def first_rollback_write(name: str) -> int:
    """1-based index of the first write of the rollback in an undisturbed run of an aborting scenario."""
    w = world(name)
    run(w.cluster, w.plan, w.settings)
    return next(
        i
        for i, call in enumerate(w.cluster.history, 1)
        if (call.method == "write_state" and call.args["data"] and call.args["data"].get("phase") == "rollingBack")
        or (
            call.method == "patch_node"
            and call.args["patch"]["metadata"]["annotations"].get(ann.CORDONED_BY, "") is None
        )
    )


def crash_at(name: str, k: int, when: When) -> World:
    w = world(name)
    w.cluster.crash_after(k, when=when)
    with pytest.raises(Crash) as crashed:
        run(w.cluster, w.plan, w.settings)
    assert crashed.value.method == BASELINES[name][k - 1] and crashed.value.when == when
    return w


def check_invariants(w: World) -> None:
    c = w.cluster
    c.scheduler = "cooperative"  # a scheduler that never binds would keep replacements Pending: not lost, just waiting
    assert_clean(c)
    width = w.settings.caps.max_concurrent_evictions
    for eviction in w.at_eviction:
        assert eviction["uncordoned"] == [], f"evicted {eviction['pod']} while {eviction['uncordoned']} was schedulable"
        if width == 1:
            assert eviction["in_flight"] == set(), (
                f"evicted {eviction['pod']} while {eviction['in_flight']} was not whole"
            )
        else:
            assert eviction["owner"] not in eviction["in_flight"] and len(eviction["in_flight"]) < width, eviction
    assert len(c.evicted) == len(set(c.evicted)), "a pod was evicted twice"
    check_devices(c)


def check_devices(c: FakeCluster) -> None:
    """DRA: no device held by two claims; every bound pod's claims allocated on its own node's pool, none left behind by
    a pod that is gone."""
    claims = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in c.dra if o["kind"] == "ResourceClaim"}
    held = [
        (r["pool"], r["device"])
        for o in claims.values()
        for r in (((o.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
    ]
    assert len(held) == len(set(held)), f"a device allocated twice: {sorted(held)}"
    for (namespace, name), raw in c.pods.items():
        node = raw["spec"].get("nodeName")
        for status in (raw.get("status") or {}).get("resourceClaimStatuses") or []:
            claim = claims[(namespace, status["resourceClaimName"])]
            pools = {r["pool"] for r in claim["status"]["allocation"]["devices"]["results"]}
            assert pools == {node}, f"{namespace}/{name} runs on {node}, its claim is allocated on {pools}"
    uids = {raw["metadata"]["uid"] for raw in c.pods.values()}
    orphans = [
        name
        for (_, name), o in claims.items()
        if any(
            ref.get("kind") == "Pod" and ref.get("uid") not in uids
            for ref in o["metadata"].get("ownerReferences") or []
        )
    ]
    assert not orphans, f"claims of pods that are gone: {orphans}"


def check_outcome(w: World, status: str) -> None:
    """A succeeded run freed its nodes; a failed one moved at most what it reported."""
    if status == "succeeded":
        for name in w.plan.freed_nodes:
            assert w.cluster.node_gpu_pods(name) == []


@pytest.mark.parametrize(("name", "k", "when"), CASES)
def test_crash_at_every_write_then_recover(name: str, k: int, when: When) -> None:
    w = crash_at(name, k, when)
    evicted_before_recovery = len(w.cluster.evicted)
    recovered = recover(w.cluster, w.settings, w.cluster.clock)
    if recovered.resumed is not None:
        assert recovered.resumed.status in ("succeeded", "failed")
        check_outcome(w, recovered.resumed.status)
    rollback = first_rollback_write(name) if SCENARIOS[name].outcome == "failed" else None
    if rollback is not None and (k > rollback or (k == rollback and when == "after")):
        # the crash hit the rollback: recovery finishes rolling back, it does not start the aborted plan again
        assert len(w.cluster.evicted) == evicted_before_recovery
        assert recovered.resumed is None or recovered.resumed.reason.startswith("interrupted while rolling back: ")
    check_invariants(w)


def test_every_write_of_every_scenario_is_covered() -> None:
    for name, methods in BASELINES.items():
        assert {"write_state", "patch_node", "evict", "create_event"} <= set(methods), name
        w = world(name)
        w.cluster.crash_after(len(methods) + 1)
        run(w.cluster, w.plan, w.settings)  # one more than the baseline: never fires, the run is deterministic
        assert [call.method for call in w.cluster.history] == methods


def test_the_aborting_scenarios_do_abort_and_roll_back() -> None:
    for name in ("refused-2nd", "stuck-pending"):
        w = world(name)
        report = run(w.cluster, w.plan)
        assert report.status == "failed", name
        assert first_rollback_write(name) < len(BASELINES[name])
        check_invariants(w)


@pytest.mark.parametrize("k", range(1, len(BASELINES["one-freed"]) + 1))
def test_a_second_crash_during_recovery_is_recovered_too(k: int) -> None:
    w = crash_at("one-freed", k, "after")
    for j in (1, 2):  # recovery itself dies at its first write, then at its second
        w.cluster.crash_after(j, when="after")
        with contextlib.suppress(Crash):
            recover(w.cluster, SETTINGS, w.cluster.clock)
    recovered = recover(w.cluster, SETTINGS, w.cluster.clock)
    if recovered.resumed is not None:
        assert recovered.resumed.status in ("succeeded", "failed")
    check_invariants(w)


def test_a_crash_between_the_write_ahead_and_the_cordon_still_cordons_on_resume() -> None:
    """The state lists gpu-2 as cordoned before the patch is sent; the crash leaves it schedulable."""
    methods = BASELINES["two-freed"]
    k = methods.index("patch_node") + 1
    w = crash_at("two-freed", k, "before")
    assert w.cluster.cordoned_nodes() == [] and "gpu-2" in w.cluster.state[ann.STATE_CONFIGMAP]["cordoned"]
    recovered = recover(w.cluster, SETTINGS, w.cluster.clock)
    assert recovered.resumed is not None and recovered.resumed.status == "succeeded"
    assert w.at_eviction and all(e["uncordoned"] == [] for e in w.at_eviction)
    check_invariants(w)


def test_a_crash_mid_eviction_waits_for_that_replacement_before_the_next() -> None:
    """Crash right after the first eviction: the resumed run must not evict again until that owner is whole."""
    methods = BASELINES["one-freed"]
    k = methods.index("evict") + 1
    w = crash_at("one-freed", k, "after")
    assert len(w.cluster.evicted) == 1
    recovered = recover(w.cluster, SETTINGS, w.cluster.clock)
    assert recovered.resumed is not None and recovered.resumed.status == "succeeded"
    check_invariants(w)


def test_without_resume_recovery_rolls_back() -> None:
    methods = BASELINES["two-freed"]
    k = methods.index("evict") + 1
    w = crash_at("two-freed", k, "after")
    recovered = recover(w.cluster, SETTINGS, w.cluster.clock, resume=False)
    assert (
        recovered.resumed is not None
        and recovered.resumed.status == "failed"
        and recovered.resumed.reason == "resume disabled"
    )
    assert len(w.cluster.evicted) == 1
    check_invariants(w)


def test_orphan_marks_without_a_plan_are_released() -> None:
    w = world("two-freed")
    c = w.cluster
    c.patch_node("gpu-2", ann.fence_patch(c.nodes["gpu-2"], ann.IDENTITY, "plan-gone", "2026-01-01T00:00:00Z"))
    c.nodes["gpu-3"]["spec"]["unschedulable"] = True  # an operator's cordon: not ours, not touched
    recovered = recover(c, SETTINGS, c.clock)
    assert recovered.released == ["gpu-2"] and recovered.resumed is None
    assert [(e["reason"], e["involved"].name) for e in c.events] == [("CompactorUncordon", "gpu-2")]
    assert "plan-gone" in c.events[0]["message"]
    assert_clean(c, still_cordoned=("gpu-3",))


def test_unreadable_state_is_dropped() -> None:
    w = world("two-freed")
    c = w.cluster
    c.write_state(ann.STATE_CONFIGMAP, {"phase": "evicting"})  # no plan in it
    recovered = recover(c, SETTINGS, c.clock)
    assert recovered.resumed is None and c.state == {}


def test_a_crash_in_the_rollback_is_finished_by_recovery_not_resumed() -> None:
    name = "stuck-pending"
    k = first_rollback_write(name) + 1  # the rollback's state is written; crash as the first node is uncordoned
    w = crash_at(name, k, "before")
    state = w.cluster.state[ann.STATE_CONFIGMAP]
    assert state["phase"] == "rollingBack" and "not bound within steer_timeout_seconds" in state["reason"]
    recovered = recover(w.cluster, SETTINGS, w.cluster.clock)
    assert recovered.resumed is not None and recovered.resumed.status == "failed"
    assert recovered.resumed.reason.startswith("interrupted while rolling back: the replacement of default/")
    assert len(w.cluster.evicted) == 1  # the one eviction before the abort, none after
    check_invariants(w)


def test_a_crash_while_finishing_does_not_undo_a_completed_plan() -> None:
    """Crash after gpu-2 was released; a GPU pod lands on it meanwhile. Recovery finishes gpu-3 and reports success."""
    methods = BASELINES["two-freed"]
    first_uncordon = len(methods) - 4  # ... patch gpu-2, event, patch gpu-3, event, clear state
    assert methods[first_uncordon - 1] == "patch_node"
    w = crash_at("two-freed", first_uncordon, "after")
    c = w.cluster
    assert c.cordoned_nodes() == ["gpu-3"] and c.state[ann.STATE_CONFIGMAP]["phase"] == "finishing"
    c.add_pod(pod("newcomer", on="gpu-2", gpus=1, owner="ReplicaSet/newcomer", labels={"app": "newcomer"}))
    recovered = recover(c, SETTINGS, c.clock)
    assert recovered.resumed is not None
    # honest about the result: gpu-2 was freed, then taken by the newcomer, so the cluster gained 8 GPUs, not 16
    assert recovered.resumed.status == "partial", recovered.resumed.reason
    assert recovered.resumed.reason.startswith("cluster gained 8 whole-free GPU(s) (plan: 16)")
    assert recovered.resumed.freed_nodes == ["gpu-3"]  # gpu-2 has been given back (and used) already
    assert [e["reason"] for e in c.events].count("CompactorAbort") == 0
    # gpu-2 was released before the crash (its event died with the process): neither cordoned again nor patched again
    assert [call.args["name"] for call in c.history[first_uncordon - 1 :] if call.method == "patch_node"] == [
        "gpu-2",
        "gpu-3",
    ]
    assert [e["involved"].name for e in c.events if e["reason"] in ("CompactorUncordon", "CompactorCordon")][-1:] == [
        "gpu-3"
    ]
    check_invariants(w)


def _after_drain_writes(mode: str) -> list[str]:
    w = world("one-freed")
    assert run(w.cluster, w.plan, SETTINGS.amended(after_drain=mode)).status == "succeeded"
    return [call.method for call in w.cluster.history]


AFTER_DRAIN_CASES = [
    pytest.param(mode, k, when, id=f"{mode}-{k}-{when}-{method}")
    for mode in ("keepCordoned", "taint")
    for k, method in enumerate(_after_drain_writes(mode), 1)
    for when in ("before", "after")
]


@pytest.mark.parametrize(("mode", "k", "when"), AFTER_DRAIN_CASES)
def test_crashes_with_after_drain_modes_leave_only_deliberate_marks(mode: str, k: int, when: When) -> None:
    """With keepCordoned/taint, a finished plan deliberately leaves marks; no crash may leave any other kind."""
    settings = SETTINGS.amended(after_drain=mode)
    w = world("one-freed")
    c = w.cluster
    c.crash_after(k, when=when)
    with pytest.raises(Crash):
        run(c, w.plan, settings)
    recovered = recover(c, settings, c.clock)
    assert recovered.resumed is None or recovered.resumed.status in ("succeeded", "failed")
    c.settle()
    assert c.state == {} and c.lost_pods() == []
    c.assert_no_pdb_violation()
    for node_name, node_obj in c.nodes.items():
        assert not node_obj["spec"].get("unschedulable"), node_name  # the cordon bit is never the compactor's
        if ann.is_ours(node_obj, ann.IDENTITY):  # only a finished plan's deliberate after-drain marks may remain
            assert ann.node_annotations(node_obj).get(ann.AFTER_DRAIN) == mode, node_name
            assert node_name in w.plan.freed_nodes and c.node_gpu_pods(node_name) == []
            assert c.is_fenced(node_name) is (mode == "keepCordoned")
        else:
            assert not node_obj["spec"].get("taints"), node_name
    again = recover(c, settings, c.clock)  # a later restart keeps them, and changes nothing
    assert not again.changed and sorted(again.kept) == sorted(
        n for n, o in c.nodes.items() if ann.is_ours(o, ann.IDENTITY)
    )


def test_a_rollback_after_the_lease_is_lost_ends_at_once_instead_of_retrying_each_release() -> None:
    """Issue 18, item 7: after losing the Lease, each release of a rollback was refused here but retried as if the API
    server browned out, for release_deadline_seconds (120) per node, while the fences stayed anyway. A write refused for
    want of the Lease cannot succeed by waiting: the rollback ends now, the fences and state left to the Lease's holder."""
    w = crash_at("two-freed", BASELINES["two-freed"].index("evict") + 1, "after")
    fenced = w.cluster.cordoned_nodes()
    assert fenced, "the crashed run left no fence to release"
    started = w.cluster.clock.monotonic()
    lost = FencedClient(w.cluster, lambda: False, "gpu-compactor/gpu-compactor-leader")
    with contextlib.suppress(LeadershipLost):
        recover(lost, SETTINGS, w.cluster.clock, resume=False)
    assert w.cluster.clock.monotonic() - started < SETTINGS.executor.release_deadline_seconds
    assert w.cluster.cordoned_nodes() == fenced  # nothing written without the Lease


def test_a_resumed_run_stops_at_the_end_of_its_disruption_window_as_a_fresh_run_does() -> None:
    """Issue 43, item 6: recovery resumed an interrupted run without asking the window before each eviction, and evicted
    past its end (seen: evictions 12 s and 18 s after a window that closed at 9 s). Asked now: the resumed run stops
    before its next eviction, what it did stands, and the rest waits for the next run."""
    w = crash_at("two-freed", BASELINES["two-freed"].index("evict") + 1, "after")
    c = w.cluster
    evicted_before = len(c.evicted)
    closed_at = c.clock.monotonic()
    recovered = recover(
        c,
        SETTINGS,
        c.clock,
        may_go_on=lambda: "the end of the disruption window" if c.clock.monotonic() >= closed_at else "",
    )
    assert recovered.resumed is not None and recovered.resumed.status == "partial", recovered.resumed
    assert "the end of the disruption window" in recovered.resumed.reason
    assert len(c.evicted) == evicted_before  # nothing evicted once the window had closed
    c.settle()
    assert c.lost_pods() == [] and c.state == {}
    c.assert_no_pdb_violation()

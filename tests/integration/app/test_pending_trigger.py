"""The controller's pending trigger on the fake cluster: an 8-GPU pod kube-scheduler finds no node for starts a cycle a
minute later, not at the next interval (an hour here), and that cycle places it; once per pod, never on a follower, never
for a controller that only reports (issue 21: the pending-driven path)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from compactor.actions.services.memory import HISTORY_CONFIGMAP, HISTORY_KEY
from compactor.app.pending import blocked_gpu_pods
from compactor.kube.lease import LeaderElector
from compactor.planner.rules.history import History
from tests.fakeapi import FakeApiServer
from tests.fakecluster import FakeCluster
from tests.scenarios.controller import make_controller, sample, wait_for
from tests.scenarios.lease import NS, LeaseStore
from tests.scenarios.steering import node_drained_for_a_pending_pod

BIG = "default/big"


def test_a_gpu_pod_blocked_for_a_minute_starts_the_cycle_that_places_it() -> None:
    c = FakeCluster(node_drained_for_a_pending_pod())
    controller = make_controller(c)
    try:
        c.advance(5)  # kube-scheduler tried: no node has 8 free GPUs
        assert controller.check_pending() == [], "waited 4 s, not a minute"
        c.advance(60)
        assert [b.key for b in controller.check_pending()] == [BIG]
        assert [call.method for call in c.calls].count("list_pending_pods") == 2  # one narrow list per round
        assert controller.check_pending() == [], "once per pod"
        assert sample(controller.exporter, "gpu_compactor_pending_triggered_cycles_total") == 1
        report = controller.tick()  # the cycle it started
        assert report is not None and report.run is not None and report.run.status == "succeeded"
        c.settle()
        assert c.pods[("default", "big")]["spec"].get("nodeName") == "gpu-3"
        assert controller.check_pending() == []
    finally:
        controller.server.stop()


def test_the_scheduler_runs_the_cycle_at_once_not_at_the_interval() -> None:
    c = FakeCluster(node_drained_for_a_pending_pod())
    controller = make_controller(c, pending_gap=0)  # interval: an hour
    controller.start()
    try:
        wait_for(lambda: controller.cycles >= 1)  # the first cycle runs at start
        c.scheduler = "never"  # from here the scheduler finds nothing: a pod created now stays blocked
        blocked = c.pods[("default", "pin-1")]  # any pod: make one more GPU pod wait, as a new replica would
        waiting = {**blocked, "metadata": {**blocked["metadata"], "name": "late", "uid": "late-uid"}}
        waiting["spec"] = {k: v for k, v in blocked["spec"].items() if k != "nodeName"}
        waiting["status"] = {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "lastTransitionTime": c.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ"),
                }
            ],
        }
        c.pods[("default", "late")] = waiting
        c.clock.sleep(61)
        assert [b.key for b in controller.check_pending()] == ["default/late"]
        wait_for(lambda: controller.cycles >= 2, timeout=30)  # not an hour
    finally:
        controller.stop()


def test_a_follower_and_a_report_only_controller_never_trigger(fake_api: FakeApiServer) -> None:
    c = FakeCluster(node_drained_for_a_pending_pod())
    c.advance(70)
    reporting = make_controller(c, report_only=True)
    assert reporting.pending is None and reporting.check_pending() == []
    reporting.server.stop()
    LeaseStore(fake_api)
    other = LeaderElector(fake_api.api_client(), NS, "pod-other")
    assert other.try_acquire_or_renew(datetime.now(UTC))
    follower = make_controller(c, elector=LeaderElector(fake_api.api_client(), NS, "pod-ours"))
    try:
        follower.tick()  # a follower's cycle: figures only
        assert follower.check_pending() == []
        assert not [call for call in c.calls if call.method == "list_pending_pods"], "a follower does not even look"
    finally:
        follower.server.stop()


def test_a_failed_list_is_a_warning_and_the_next_round_triggers() -> None:
    c = FakeCluster(node_drained_for_a_pending_pod())
    c.advance(70)
    controller = make_controller(c)
    try:
        c.fail_next("list_pending_pods", 503)
        assert controller.check_pending() == []
        assert [b.key for b in controller.check_pending()] == [BIG]
    finally:
        controller.server.stop()


def test_pending_after_zero_turns_the_trigger_off() -> None:
    c = FakeCluster(node_drained_for_a_pending_pod())
    c.advance(70)
    controller = make_controller(c, pending_after=0)
    assert controller.pending is None and controller.check_pending() == []
    controller.server.stop()


def test_while_the_breaker_holds_every_cycle_no_blocked_pod_starts_one() -> None:
    """Issue 42: with the circuit breaker open, the trigger used to start a cycle per blocked pod, each held and changing
    nothing. The cycle that read the pause tells the trigger, which waits it out, then fires as before."""
    c = FakeCluster(node_drained_for_a_pending_pod())
    until = c.clock.now() + timedelta(minutes=30)
    paused = History(paused_until=until, pause_reason="5 of the last 10 moves failed")
    c.state[HISTORY_CONFIGMAP] = {HISTORY_KEY: paused.to_json()}
    controller = make_controller(c)
    try:
        report = controller.tick()  # the interval's cycle: held by the breaker
        assert report is not None and report.run is None and report.paused_until == until
        looked_by_the_cycle = len(c.calls)  # the cycle's recovery reads pending pods (stuck pins): not the trigger
        c.advance(70)
        assert controller.check_pending() == []
        trigger_calls = c.calls[looked_by_the_cycle:]
        assert not [call for call in trigger_calls if call.method == "list_pending_pods"], (
            "not even a look while paused"
        )
        c.advance(31 * 60)
        assert [b.key for b in controller.check_pending()] == [BIG]
    finally:
        controller.server.stop()


def test_the_gap_counts_from_the_end_of_the_last_cycle_not_its_start() -> None:
    """Issue 43, item 10: counted from a cycle's start, a long cycle left no gap at all: the next triggered cycle
    followed it at once. Counted from its end, the gap is the rest the cluster gets between cycles."""
    c = FakeCluster(node_drained_for_a_pending_pod())
    controller = make_controller(c, pending_after=5, pending_gap=20)
    try:
        started = c.clock.monotonic()
        assert controller.tick() is not None  # the cycle that drains gpu-3 for big and places it
        took = c.clock.monotonic() - started
        assert took > 10, f"the cycle took {took:.0f} s: too short to tell the two readings of the gap apart"
        late = _blocked_copy(c, "pin-1", "late")
        c.advance(10)  # waited 10 s (>= 5), 10 s after the cycle ended, more than 20 s after it began
        assert [b.key for b in blocked_gpu_pods([late], c.clock.now(), ["default-scheduler"])] == ["default/late"]
        assert controller.check_pending() == []
        c.advance(11)
        assert [b.key for b in controller.check_pending()] == ["default/late"]
    finally:
        controller.server.stop()


def _blocked_copy(c: FakeCluster, like: str, name: str) -> dict[str, object]:
    """A copy of pod ``like``, unbound, that the scheduler found no node for just now (as kube-scheduler records it)."""
    model = c.pods[("default", like)]
    waiting = {**model, "metadata": {**model["metadata"], "name": name, "uid": f"{name}-uid"}}
    waiting["spec"] = {k: v for k, v in model["spec"].items() if k != "nodeName"}
    waiting["status"] = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "lastTransitionTime": c.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        ],
    }
    c.pods[("default", name)] = waiting
    c.scheduler = "never"  # nothing binds it meanwhile
    return waiting

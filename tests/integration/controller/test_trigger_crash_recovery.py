"""Issue 43: a cycle the pending trigger started, killed at every write it makes, then the controller restarted.

The cluster: a node drained for a blocked GPU pod (``node_drained_for_a_pending_pod``). The pending trigger sees the pod
waiting past ``--pending-after`` and starts a cycle, which moves the node's pods off and places the pending pod there.
For every write k of that undisturbed cycle, before and after it takes effect, a fresh cluster's cycle crashes there
(``Crash``: a BaseException, as a killed process; no ``except`` sees it); a new controller (the restarted pod) then
runs its first cycle, which recovers first. Then nothing of ours is left (no fence, mark or state), no PDB was broken,
no pod lost, and the pending pod runs."""

from __future__ import annotations

import pytest

from compactor.controller.loop import Controller
from tests.fakecluster import Crash, FakeCluster
from tests.scenarios.controller import make_controller
from tests.scenarios.executor import assert_clean
from tests.scenarios.steering import node_drained_for_a_pending_pod

WAITED = 70  # seconds the pod has waited when the trigger looks: past the default --pending-after (60)


def triggered_cycle() -> tuple[FakeCluster, Controller]:
    """A cluster whose blocked pod has waited, and a controller whose trigger has just fired for it."""
    c = FakeCluster(node_drained_for_a_pending_pod())
    c.advance(WAITED)
    controller = make_controller(c)
    assert [b.key for b in controller.check_pending()], "the trigger fires for the blocked pod"
    return c, controller


def pending_pod_runs(c: FakeCluster) -> bool:
    return bool(c.pod("default", "big")["spec"].get("nodeName"))


def undisturbed_writes() -> list[str]:
    c, controller = triggered_cycle()
    try:
        report = controller.tick()
    finally:
        controller.server.stop()
    assert report is not None and report.run is not None, report
    assert pending_pod_runs(c), "the undisturbed cycle places the pending pod on the node it drained"
    return [call.method for call in c.history]


WRITES = undisturbed_writes()
CASES = [
    pytest.param(k, when, id=f"{k}-{when}-{method}")
    for k, method in enumerate(WRITES, 1)
    for when in ("before", "after")
]


@pytest.mark.parametrize(("k", "when"), CASES)
def test_a_triggered_cycle_killed_at_any_write_is_recovered_by_the_restarted_controller(k: int, when: str) -> None:
    c, controller = triggered_cycle()
    c.crash_after(k, when=when)  # type: ignore[arg-type]
    try:
        with pytest.raises(Crash) as crashed:
            controller.tick()
    finally:
        controller.server.stop()
    assert crashed.value.method == WRITES[k - 1]
    restarted = make_controller(c)
    try:
        restarted.tick()  # its first cycle: recovery, then a plan of its own if one is still needed
        c.settle()
        if not pending_pod_runs(c):
            c.advance(WAITED)
            restarted.check_pending()
            restarted.tick()
    finally:
        restarted.server.stop()
    assert_clean(c)
    assert pending_pod_runs(c), "the blocked pod still waits"


def test_every_kind_of_write_of_the_triggered_cycle_is_covered() -> None:
    assert {"write_state", "patch_node", "evict"} <= set(WRITES), WRITES

"""The reservations step (``compactor/actions/steps/reservations.py``, ``after_drain: taint``): the same run lifts
a reservation as soon as a pod tolerating it is bound there; a run stopped while it waits leaves its reservations
to recovery, at their TTL.

The reservation itself, and its lifting at the TTL within one run, is ``test_step_finish.py``.

Against the fake cluster (``tests/fakecluster/``) in simulated time: each scenario is planned by the real
planner, or by hand (``hand_plan``), and carried out by ``Executor`` through the ``ClusterClient`` interface. The
scenarios and helpers (``setup``, ``run``, ``assert_clean``, ...) live in ``tests/scenarios/executor.py``.
"""

from __future__ import annotations

import threading

import pytest

from compactor.actions.executor import Executor
from compactor.actions.port import annotations as ann
from compactor.actions.recovery import recover
from compactor.clock import Interrupted, StoppableClock
from tests.builders import pod
from tests.scenarios.executor import SETTINGS, Obj, assert_clean, events, involved, run, setup


def test_a_reservation_is_lifted_as_soon_as_a_pod_tolerating_it_is_bound_there() -> None:
    c, plan = setup()
    settings = SETTINGS.amended(after_drain="taint", taint_ttl_seconds=600)
    real_patch = c.patch_node
    trainer = pod(
        "trainer",
        gpus=8,
        owner="ReplicaSet/trainer",
        labels={"app": "trainer"},
        tolerations=[{"key": "compactor.io/reserved", "operator": "Exists", "effect": "NoSchedule"}],
    )
    trainer["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "gpu-3"}

    def reserving(name: str, patch: Obj) -> Obj:
        out = real_patch(name, patch)
        if name == "gpu-3" and (patch.get("metadata") or {}).get("annotations", {}).get(ann.AFTER_DRAIN) == "taint":
            c.add_pod(trainer)  # the job the node was kept for arrives
        return out

    c.patch_node = reserving  # type: ignore[method-assign]
    run(c, plan, settings)
    lifted = {involved(e): e["message"] for e in events(c, "CompactorReservationLifted")}
    assert "default/trainer is bound there" in lifted["Node/gpu-3"] and "600s are over" in lifted["Node/gpu-2"]
    assert c.pod("default", "trainer")["spec"]["nodeName"] == "gpu-3"
    assert_clean(c)


def test_a_run_stopped_while_reservations_wait_leaves_them_to_recovery_at_their_ttl() -> None:
    c, plan = setup()
    settings = SETTINGS.amended(after_drain="taint", taint_ttl_seconds=300)
    stop = threading.Event()
    real_patch = c.patch_node

    def stopping(name: str, patch: Obj) -> Obj:
        out = real_patch(name, patch)
        if name == "gpu-3" and (patch.get("metadata") or {}).get("annotations", {}).get(ann.AFTER_DRAIN) == "taint":
            stop.set()  # SIGTERM while the run waits for its reservations to be used
        return out

    c.patch_node = stopping  # type: ignore[method-assign]
    with pytest.raises(Interrupted):
        Executor(c, settings, StoppableClock(c.clock, stop)).execute(plan)
    assert c.state == {}, "every move was done: the state is gone, the reservations are accounted for by their marks"
    early = recover(c, settings, c.clock)
    assert early.kept == ["gpu-2", "gpu-3"] and early.expired == []
    c.advance(301)
    late = recover(c, settings, c.clock)
    assert late.expired == ["gpu-2", "gpu-3"]
    assert [involved(e) for e in events(c, "CompactorReservationExpired")] == ["Node/gpu-2", "Node/gpu-3"]
    assert_clean(c)

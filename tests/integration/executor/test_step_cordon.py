"""The fence step (``compactor/actions/steps/cordon.py``): every node the plan frees fenced and marked before the
first eviction, the state written before each fence, an operator's cordon left theirs, and a fence an operator
lifted while the run was stopped not placed again on resume.

Against the fake cluster (``tests/fakecluster/``) in simulated time: each scenario is planned by the real
planner, or by hand (``hand_plan``), and carried out by ``Executor`` through the ``ClusterClient`` interface. The
scenarios and helpers (``setup``, ``run``, ``assert_clean``, ...) live in ``tests/scenarios/executor.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from compactor.actions.port import annotations as ann
from compactor.actions.recovery import recover
from tests.fakecluster import Crash, FakeCluster
from tests.scenarios.executor import (
    PLAN_ID,
    SETTINGS,
    adds_fence,
    assert_clean,
    intercept_evictions,
    marks,
    run,
    setup,
    writes,
)


def test_every_freed_node_is_cordoned_and_marked_before_the_first_eviction() -> None:
    c, plan = setup()
    seen: list[dict[str, Any]] = []
    intercept_evictions(c, lambda _ns, _name: seen.append({n: (c.is_fenced(n), marks(c, n)) for n in plan.freed_nodes}))
    assert run(c, plan).status == "succeeded"
    assert len(seen) == 4
    for name in plan.freed_nodes:
        unschedulable, node_marks = seen[0][name]
        assert unschedulable is True
        assert node_marks == {
            ann.CORDONED_BY: "gpu-compactor",
            ann.PLAN_ID: PLAN_ID,
            ann.CORDONED_AT: "2026-01-01T00:00:00Z",
        }
    first_evict = c.history.index(writes(c, "evict")[0])
    cordons = [i for i, call in enumerate(c.history) if call.method == "patch_node" and adds_fence(call.args["patch"])]
    assert [c.history[i].args["name"] for i in cordons] == plan.freed_nodes and max(cordons) < first_evict


def test_the_state_is_written_before_each_cordon() -> None:
    c, plan = setup()
    run(c, plan)
    for name in plan.freed_nodes:
        cordon = next(
            i for i, call in enumerate(c.history) if call.method == "patch_node" and call.args["name"] == name
        )
        ahead = [call for call in c.history[:cordon] if call.method == "write_state"]
        assert ahead and name in ahead[-1].args["data"]["cordoned"] and ahead[-1].args["data"]["planId"] == PLAN_ID


@pytest.mark.parametrize("abort", [False, True], ids=["succeeded", "rolled-back"])
def test_a_node_cordoned_before_the_run_is_never_uncordoned(abort: bool) -> None:
    c, plan = setup()
    c.nodes["gpu-3"]["spec"]["unschedulable"] = True  # an operator's cordon, no marks of ours
    if abort:
        c.fail_next("evict", 403)
    report = run(c, plan)
    # gpu-3 is emptied as planned, but an operator's cordon keeps every pod off it: the cluster shows 8 usable
    # whole-free GPUs of the 16 planned, and the run says so (a freed node counts only when schedulable).
    assert report.status == ("failed" if abort else "partial")
    if not abort:
        assert report.outcome is not None and (report.outcome.freed_gpus, report.outcome.planned_freed_gpus) == (8, 16)
    assert c.operator_cordons() == ["gpu-3"] and marks(c, "gpu-3") == {}  # the fence went, the operator's cordon stayed
    assert not any("unschedulable" in (call.args["patch"].get("spec") or {}) for call in writes(c, "patch_node"))
    assert_clean(c, still_cordoned=("gpu-3",))


def test_a_resumed_run_does_not_fence_again_a_node_whose_fence_an_operator_lifted_while_it_was_stopped() -> None:
    c, plan = setup()
    first = plan.moves[0]

    def die(
        namespace: str, name: str
    ) -> None:  # the process dies as its first eviction goes out: every fence is placed
        raise Crash("evict", "before")

    intercept_evictions(c, die)
    with pytest.raises(Crash):
        run(c, plan)
    assert sorted(n for n in c.nodes if c.is_fenced(n)) == ["gpu-2", "gpu-3"]
    lifted = first.from_node  # the operator needs that node open: kubectl taint node gpu-2 compactor.io/fence-...-
    c.nodes[lifted]["spec"]["taints"] = [
        t for t in c.nodes[lifted]["spec"]["taints"] if not t["key"].startswith("compactor.io/fence-")
    ]
    c.touch_node(lifted)
    c.evict = FakeCluster.evict.__get__(c)  # type: ignore[method-assign]  # the process is back
    recovered = recover(c, SETTINGS, c.clock)
    assert recovered.resumed is not None and recovered.resumed.status == "partial", recovered.resumed
    assert f"the fence on {lifted} was lifted by someone else" in recovered.resumed.reason
    assert not c.is_fenced(lifted), "fenced again after an operator lifted the fence"
    assert not [
        call
        for call in c.history
        if call.method == "evict"
        and call.args["name"] in {m.pod.split("/")[1] for m in plan.moves if m.from_node == lifted}
    ], "a pod of the node left open was evicted"
    assert c.cordoned_nodes() == [] and c.state == {}

"""Steering by holds (``compactor/actions/steering/holds.py``, ``HoldSteerer``): a refused eviction lets go of its
holds while it waits to retry, and takes them again, read afresh, before the retry.

More of steering by holds: ``test_steering.py`` (a spreading scheduler steered to the planned node, which nodes
are held and for how long) and ``test_holds_limit.py`` (``caps.max_holds_per_move``). Steering by admission
policy is ``test_steerer_policy.py``.

Against the fake cluster (``tests/fakecluster/``) in simulated time: each scenario is planned by the real
planner, or by hand (``hand_plan``), and carried out by ``Executor`` through the ``ClusterClient`` interface. The
scenarios and helpers (``setup``, ``run``, ``assert_clean``, ...) live in ``tests/scenarios/executor.py``.
"""

from __future__ import annotations

from compactor.actions.port import annotations as ann
from tests.fakecluster import FakeCluster
from tests.scenarios.executor import assert_clean, evict_calls, make_plan, run
from tests.scenarios.steering import spare_node_beside_a_freeable_one


def test_a_refused_eviction_lets_go_of_its_holds_while_it_waits_to_retry() -> None:
    """Issue 18: a PDB's 429 retried with every rival node still held kept them fenced through the backoff (62 s
    reproduced). The holds go before each wait and are taken again, read afresh, before the retry."""
    objects = spare_node_beside_a_freeable_one()  # gpu-2 and gpu-4 could take serve-a too: held while it moves
    c, plan = FakeCluster(objects), make_plan(objects)
    first = plan.moves[0].pod
    held_while_sleeping: list[tuple[float, list[str]]] = []
    sleep = c.clock.sleep

    def watched(seconds: float) -> None:
        held = sorted(n for n, obj in c.nodes.items() if (obj["metadata"].get("annotations") or {}).get(ann.HELD_FOR))
        held_while_sleeping.append((c.clock.monotonic(), held))
        sleep(seconds)

    c.clock.sleep = watched  # type: ignore[method-assign]
    c.fail_next("evict", 429, times=2)
    assert run(c, plan).status == "succeeded"
    attempts = [call.time for call in evict_calls(c, first)]
    assert len(attempts) == 3
    backoffs = [held for at, held in held_while_sleeping if attempts[0] <= at < attempts[-1]]
    assert backoffs and all(held == [] for held in backoffs), held_while_sleeping
    holds_made = [
        call
        for call in c.history
        if call.method == "patch_node" and call.args["patch"]["metadata"]["annotations"].get(ann.HELD_FOR) == first
    ]
    assert len({call.time for call in holds_made}) == 3  # made afresh before each of the three attempts
    assert_clean(c)

"""Which part of a plan one run takes under max_evictions_per_cycle: whole source nodes, in plan order."""

from __future__ import annotations

from compactor.planner.plan import CompactionPlan
from compactor.planner.rules.budgets import EvictionCap, within_cap
from compactor.settings.caps import CapsSettings

GPUS = {"gpu-1": 8, "gpu-2": 8, "gpu-3": 8, "gpu-4": 4, "spare": 8}


def plan(
    moves: list[tuple[str, str, str]],
    *,
    freed: list[str],
    filled: tuple[str, ...] = (),
    pending: tuple[tuple[str, str], ...] = (),
) -> CompactionPlan:
    return CompactionPlan.model_validate(
        {
            "metadata": {"id": "plan-scope", "createdAt": "2026-01-01T00:00:00Z", "source": "test"},
            "moves": [{"pod": key, "from": src, "to": dst, "reason": "test"} for key, src, dst in moves],
            "placedPending": [{"pod": key, "to": dst} for key, dst in pending],
            "freedNodes": freed,
            "filledNodes": list(filled),
            "freedGpus": 0,
            "solver": {"status": "OPTIMAL", "wallSeconds": 0.0},
        }
    )


def test_whole_nodes_in_plan_order_up_to_the_cap_skipping_one_that_does_not_fit() -> None:
    full = plan(
        [
            ("ml/a", "gpu-2", "gpu-1"),
            ("ml/b", "gpu-3", "gpu-1"),
            ("ml/c", "gpu-3", "gpu-1"),
            ("ml/d", "gpu-4", "spare"),
        ],
        freed=["gpu-2", "gpu-3", "gpu-4"],
        filled=("spare",),
    )
    scoped = within_cap(full, 2, GPUS)
    assert [m.pod for m in scoped.moves] == ["ml/a", "ml/d"]  # gpu-3 needs 2 more: skipped, gpu-4's single move fits
    assert scoped.freed_nodes == ["gpu-2", "gpu-4"] and scoped.filled_nodes == ["spare"]
    assert scoped.freed_gpus == 8 + 4 - 8  # spare was GPU-free and now runs a GPU pod


def test_a_pending_pod_comes_along_only_when_its_node_is_drained_in_this_run() -> None:
    full = plan(
        [("ml/a", "gpu-2", "gpu-1"), ("ml/b", "gpu-3", "gpu-1"), ("ml/c", "gpu-3", "gpu-1")],
        freed=["gpu-2"],
        pending=(("ml/big", "gpu-3"), ("ml/small", "gpu-1")),
    )
    scoped = within_cap(full, 1, GPUS)
    assert [p.pod for p in scoped.placed_pending] == ["ml/small"]  # gpu-1 is drained by nobody: it fits as it is
    assert within_cap(full, 3, GPUS).placed_pending == full.placed_pending


def test_nothing_fits_when_every_node_needs_more_than_the_cap() -> None:
    full = plan([("ml/a", "gpu-2", "gpu-1"), ("ml/b", "gpu-2", "gpu-1")], freed=["gpu-2"])
    scoped = within_cap(full, 1, GPUS)
    assert (scoped.moves, scoped.freed_nodes, scoped.freed_gpus) == ([], [], 0)


def test_the_eviction_cap_takes_a_plan_within_it_whole_and_cuts_a_longer_one_by_whole_nodes() -> None:
    full = plan(
        [("ml/a", "gpu-2", "gpu-1"), ("ml/b", "gpu-3", "gpu-1"), ("ml/c", "gpu-3", "gpu-1")],
        freed=["gpu-2", "gpu-3"],
    )
    assert EvictionCap.of(CapsSettings(max_evictions_per_cycle=3)).one_run(full) is None
    cap = EvictionCap.of(CapsSettings(max_evictions_per_cycle=2))
    cut = cap.one_run(full)
    assert cut is not None and [m.pod for m in cut.moves] == ["ml/a"]  # gpu-3's two moves would pass it
    assert cap.held == "max_evictions_per_cycle (2)" and cap.holds_back(3) and not cap.holds_back(2)

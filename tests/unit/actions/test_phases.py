"""The run's phases as data (``PHASES`` in compactor/actions/cluster/run_state.py): the executor and recovery both read how a run
found in a phase carries on, so every phase must say it, and only a run that was rolling back is never resumed."""

from __future__ import annotations

from compactor.actions.cluster.run_state import PHASES, Phase, Resume, RunState


def test_every_phase_says_how_a_run_found_in_it_carries_on_in_the_order_a_run_goes_through_them() -> None:
    assert list(PHASES) == list(Phase)
    assert [phase for phase, resume in PHASES.items() if resume is Resume.ROLL_BACK] == [Phase.ROLLING_BACK]


def test_a_run_stopped_while_evicting_had_placed_every_fence_and_one_stopped_while_finishing_has_no_move_left() -> None:
    assert RunState(plan_id="p").resume is Resume.FROM_THE_START  # a new run
    assert RunState(plan_id="p", phase=Phase.EVICTING).resume is Resume.FENCES_PLACED
    assert RunState(plan_id="p", phase=Phase.FINISHING).resume is Resume.FINISH

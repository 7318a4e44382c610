"""The settings are laid out by the operator's questions (issue 20, item 4): one group per question, none over 12
fields, each module under 200 lines; the planner and the executor read bundles of those groups; every key of the layout
before 0.2 has one new home, and changes to a group are checked as the YAML is."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from compactor.settings.bundles import PlannerSettings, RunSettings
from compactor.settings.caps import CapsSettings
from compactor.settings.origins import Settings
from compactor.settings.relocated import RELOCATED
from compactor.settings.solving import SolverSettings

SETTINGS_DIR = Path(__file__).resolve().parents[3] / "compactor" / "settings"


def _groups() -> dict[str, type[BaseModel]]:
    return {name: info.annotation for name, info in Settings.model_fields.items() if name != "mode"}  # type: ignore[misc]


def test_no_group_has_more_than_12_fields_and_no_settings_module_200_lines() -> None:
    sizes = {name: len(group.model_fields) for name, group in _groups().items()}
    assert max(sizes.values()) <= 12, sizes
    long = {path.name: n for path in SETTINGS_DIR.glob("*.py") if (n := len(path.read_text().splitlines())) >= 200}
    assert long == {}


def test_the_bundles_hold_whole_groups_of_the_document_and_no_field_name_twice() -> None:
    for bundle in (PlannerSettings, RunSettings):
        names = [field for info in bundle.model_fields.values() for field in info.annotation.model_fields]  # type: ignore[union-attr]
        assert len(names) == len(set(names)), bundle
        for group, info in bundle.model_fields.items():
            assert Settings.model_fields[group].annotation is info.annotation
    settings = Settings(caps=CapsSettings(max_moves=3), solver=SolverSettings(seed=9))
    assert (settings.for_planner.caps.max_moves, settings.for_planner.solver.seed) == (3, 9)
    assert settings.for_executor.caps is settings.caps and settings.for_executor.executor is settings.executor


def test_every_old_key_has_exactly_one_new_home_that_exists() -> None:
    homes = list(RELOCATED.values())
    assert len(homes) == len(set(homes))
    for new in homes:
        group, field = new.split(".")
        assert field in _groups()[group].model_fields, new


def test_the_old_layout_passed_in_lands_where_the_new_one_would() -> None:
    old = Settings(
        planner={"max_moves": 4, "mode": "shapes", "target_shapes": ["nvidia.com/gpu=8"]},
        executor={"steering": "off", "taint_key": "x.io/y"},
    )  # type: ignore[call-arg]
    new = Settings(
        caps={"max_moves": 4},
        aims={"goal": "shapes", "target_shapes": ["nvidia.com/gpu=8"]},
        steering={"mechanism": "off"},
        executor={"taint_key": "x.io/y"},
    )
    assert old == new


def test_a_change_to_a_group_is_validated_and_an_unknown_key_refused() -> None:
    planner = PlannerSettings.of(max_moves=3, seed=2, repartition=True)
    assert (planner.caps.max_moves, planner.solver.seed, planner.mig.repartition) == (3, 2, True)
    with pytest.raises(ValidationError):
        planner.amended(max_moves=-1)
    with pytest.raises(TypeError, match="PlannerSettings has no setting 'max_movez'"):
        planner.amended(max_movez=1)
    with pytest.raises(TypeError, match="SolverSettings has no setting 'time_limit'"):
        SolverSettings().model_copy(update={"time_limit": 1})  # pydantic would set it, unread
    with pytest.raises(ValidationError):
        SolverSettings().amended(workers=0)
    assert RunSettings.of(mechanism="holds", poll_seconds=0.5).steering.mechanism == "holds"

"""``compactor config validate`` / ``show``: an operator checks a ConfigMap before applying it (issue 14, item 4)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.command_line import compactor, one_line_error

ROOT = Path(__file__).resolve().parents[3]


def test_the_shipped_configmap_and_the_reference_config_validate() -> None:
    result = compactor("config", "validate", str(ROOT / "manifests" / "base" / "config.yaml"))
    assert result.returncode == 0, result.stderr
    assert "config.yaml: valid; mode plan; " in result.stdout and "caps.max_moves" in result.stdout
    result = compactor("config", "validate", str(ROOT / "config" / "compactor.yaml"))
    assert result.stdout.endswith("valid; mode apply; 0 setting(s) differ from the defaults\n")
    # issue 45: named as every other command names its config
    flag = compactor("config", "validate", "--config", str(ROOT / "manifests" / "base" / "config.yaml"))
    assert flag.returncode == 0 and "config.yaml: valid; mode plan; " in flag.stdout, flag.stderr
    # "null" in a variable is no cap, as in YAML
    uncapped = compactor("config", "show", "-o", "json", env={"COMPACTOR_CAPS__MAX_RUN_SECONDS": "null"})
    assert json.loads(uncapped.stdout)["caps"]["max_run_seconds"] is None, uncapped.stderr
    assert one_line_error(compactor("config", "validate")) == (
        "compactor: error: config validate: name one file, as FILE or --config FILE"
    )


def test_a_bad_key_exits_2_naming_the_key_in_a_plain_file_and_inside_a_configmap(tmp_path: Path) -> None:
    plain = tmp_path / "settings.yaml"
    plain.write_text("caps:\n  max_movez: 3\n", encoding="utf-8")
    assert one_line_error(compactor("config", "validate", str(plain))) == (
        f"compactor: error: {plain}: caps.max_movez: Extra inputs are not permitted; did you mean caps.max_moves?"
    )
    config_map = tmp_path / "cm.yaml"
    config_map.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: gpu-compactor-config}\ndata:\n"
        "  compactor.yaml: |\n    mode: applied\n",
        encoding="utf-8",
    )
    line = one_line_error(compactor("config", "validate", str(config_map)))
    assert line.startswith(f"compactor: error: {config_map}: ConfigMap data.compactor.yaml: mode: Input should be "), (
        line
    )
    config_map.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\ndata: {}\n", encoding="utf-8")
    assert one_line_error(compactor("config", "validate", str(config_map))) == (
        f"compactor: error: {config_map}: ConfigMap other: data.compactor.yaml: missing (the key gpu-compactor mounts)"
    )


def test_show_prints_the_settings_after_the_file_and_the_environment() -> None:
    result = compactor(
        "config",
        "show",
        "--config",
        str(ROOT / "manifests" / "base" / "config.yaml"),
        "-o",
        "json",
        env={"COMPACTOR_SOLVER__TIME_LIMIT_SECONDS": "7"},
    )
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert (shown["mode"], shown["caps"]["max_moves"], shown["solver"]["time_limit_seconds"]) == ("plan", 20, 7.0)
    assert "planner" not in shown and result.stderr == ""
    assert compactor("config", "show", env={"COMPACTOR_MODE": "report"}).stdout.startswith("mode: report\n")


OLD_LAYOUT = """\
planner:
  max_moves: 3
  mode: shapes
  target_shapes: ["nvidia.com/gpu=8"]
  mig_repartition: true
executor:
  steering: holds
  taint_key: example.com/reserved
disruption:
  max_draining_per_pool: "10%"
  breaker_failures: 2
"""


def test_the_layout_before_0_2_is_read_at_its_new_places_and_each_old_key_is_named_with_its_new_one(
    tmp_path: Path,
) -> None:
    old = tmp_path / "old.yaml"
    old.write_text(OLD_LAYOUT, encoding="utf-8")
    result = compactor("config", "validate", str(old))
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        f"{old}: valid; mode apply; 8 setting(s) differ from the defaults: aims.goal, aims.target_shapes, "
        "caps.max_draining_per_pool, caps.max_moves, disruption.breaker_failures, executor.taint_key, "
        "mig.repartition, steering.mechanism\n"
    )
    warned = result.stderr.splitlines()
    assert warned[0] == (
        f"compactor: warning: {old}: planner.mode is now aims.goal: the old name is read until the next release "
        "(CHANGELOG, 0.2)"
    )
    assert sorted(w.removeprefix(f"compactor: warning: {old}: ").split(":")[0] for w in warned) == [
        "disruption.max_draining_per_pool is now caps.max_draining_per_pool",
        "executor.steering is now steering.mechanism",
        "planner.max_moves is now caps.max_moves",
        "planner.mig_repartition is now mig.repartition",
        "planner.mode is now aims.goal",
        "planner.target_shapes is now aims.target_shapes",
    ]
    shown = json.loads(compactor("config", "show", "--config", str(old), "-o", "json").stdout)
    assert (shown["caps"]["max_moves"], shown["steering"]["mechanism"], shown["executor"]["taint_key"]) == (
        3,
        "holds",
        "example.com/reserved",
    )


def test_an_old_key_that_fails_is_named_as_written_and_where_it_lives_now(tmp_path: Path) -> None:
    config = tmp_path / "settings.yaml"
    config.write_text("planner:\n  max_moves: -1\n", encoding="utf-8")
    assert one_line_error(compactor("config", "validate", str(config))) == (
        f"compactor: error: {config}: planner.max_moves (now caps.max_moves): Input should be greater than or "
        "equal to 0"
    )
    config.write_text("planner:\n  max_moves: 3\ncaps:\n  max_moves: 4\n", encoding="utf-8")
    assert one_line_error(compactor("config", "validate", str(config))) == (
        f"compactor: error: {config}: planner.max_moves and caps.max_moves are both given: planner.max_moves is the "
        "old name of caps.max_moves; keep one"
    )
    config.write_text("planner:\n  max_movs: 3\n", encoding="utf-8")
    assert one_line_error(compactor("config", "validate", str(config))) == (
        f"compactor: error: {config}: planner.max_movs names no setting; did you mean planner.max_moves "
        "(now caps.max_moves)?"
    )


def test_old_environment_variables_are_read_where_their_settings_live_now() -> None:
    result = compactor(
        "config",
        "show",
        "-o",
        "json",
        env={"COMPACTOR_PLANNER__TIME_LIMIT_SECONDS": "7", "COMPACTOR_EXECUTOR__STEERING": "off"},
    )
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert (shown["solver"]["time_limit_seconds"], shown["steering"]["mechanism"]) == (7.0, "off")
    assert (
        "compactor: warning: environment: COMPACTOR_PLANNER__TIME_LIMIT_SECONDS is now "
        "COMPACTOR_SOLVER__TIME_LIMIT_SECONDS: the old name is read until the next release"
    ) in result.stderr
    # an old name and its new one together: which was meant? (the environment over the file, as ever)
    both = {"COMPACTOR_PLANNER__SEED": "3", "COMPACTOR_SOLVER__SEED": "4"}
    assert one_line_error(compactor("config", "show", env=both)) == (
        "compactor: error: environment: planner.seed and solver.seed are both given: planner.seed is the old name of "
        "solver.seed; keep one"
    )
    # an old variable overrides the file's key at its new place, as it overrode the old one
    shown = compactor(
        "config",
        "show",
        "--config",
        str(ROOT / "manifests/base/config.yaml"),
        "-o",
        "json",
        env={"COMPACTOR_PLANNER__MAX_MOVES": "5"},
    )
    assert json.loads(shown.stdout)["caps"]["max_moves"] == 5 and "COMPACTOR_PLANNER__MAX_MOVES is now" in (
        shown.stderr
    )
    group = compactor("config", "show", "-o", "json", env={"COMPACTOR_PLANNER": '{"max_moves": 5}'})
    assert json.loads(group.stdout)["caps"]["max_moves"] == 5
    # issue 43: the notice names what was set (the group's JSON), not a variable nobody set
    assert 'COMPACTOR_PLANNER\'s "max_moves" is now COMPACTOR_CAPS__MAX_MOVES' in group.stderr
    assert "COMPACTOR_PLANNER__MAX_MOVES" not in group.stderr
    # a key that moved out of a group still read, given in that group's JSON: moved, and said so
    executor = compactor("config", "show", "-o", "json", env={"COMPACTOR_EXECUTOR": '{"max_run_seconds": 300}'})
    assert json.loads(executor.stdout)["caps"]["max_run_seconds"] == 300
    assert 'COMPACTOR_EXECUTOR\'s "max_run_seconds" is now COMPACTOR_CAPS__MAX_RUN_SECONDS' in executor.stderr
    assert one_line_error(compactor("config", "show", env={"COMPACTOR_PLANNER__TIME_LIMT_SECONDS": "7"})) == (
        "compactor: error: environment: COMPACTOR_PLANNER__TIME_LIMT_SECONDS names no setting; did you mean "
        "COMPACTOR_SOLVER__TIME_LIMIT_SECONDS?"
    )


def test_plan_previews_with_the_deployed_configmap_and_says_what_one_cycle_would_run() -> None:
    deployed = compactor(
        "plan",
        "--example",
        "--config",
        str(ROOT / "manifests" / "base" / "config.yaml"),
        env={"COMPACTOR_PLANNER__TIME_LIMIT_SECONDS": "5"},
    )
    assert deployed.returncode == 0, deployed.stderr
    assert deployed.stdout.endswith(
        "With these settings a run would dry-run this plan, changing nothing (mode: plan).\n"
    )
    capped = compactor(
        "plan",
        "--example",
        env={"COMPACTOR_PLANNER__TIME_LIMIT_SECONDS": "5", "COMPACTOR_EXECUTOR__MAX_EVICTIONS_PER_CYCLE": "2"},
    )
    # one plan, one story (issue 17): the plan is the curve's best point one cycle can run whole (placing the pending pod
    # takes 1 move; freeing a100-gpu-02 too takes 3, over the cap), and its header says which budget held the rest back
    assert "  1 move(s); frees 0 node(s)" in capped.stdout
    assert (
        "budget: max_evictions_per_cycle (2) reached by the balanced point (10 moves, 16 usable GPUs): this plan is the "
        "best point one run can carry out whole (1 move(s)); the rest waits for a later run"
    ) in capped.stdout

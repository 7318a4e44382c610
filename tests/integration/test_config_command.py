"""``compactor config validate`` / ``show``: an operator checks a ConfigMap before applying it (issue 14, item 4)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.command_line import compactor, one_line_error

ROOT = Path(__file__).resolve().parents[2]


def test_the_shipped_configmap_and_the_reference_config_validate() -> None:
    result = compactor("config", "validate", str(ROOT / "manifests" / "base" / "config.yaml"))
    assert result.returncode == 0, result.stderr
    assert "config.yaml: valid; mode plan; " in result.stdout and "planner.max_moves" in result.stdout
    result = compactor("config", "validate", str(ROOT / "config" / "compactor.yaml"))
    assert result.stdout.endswith("valid; mode apply; 0 setting(s) differ from the defaults\n")


def test_a_bad_key_exits_2_naming_the_key_in_a_plain_file_and_inside_a_configmap(tmp_path: Path) -> None:
    plain = tmp_path / "settings.yaml"
    plain.write_text("planner:\n  max_movez: 3\n", encoding="utf-8")
    assert one_line_error(compactor("config", "validate", str(plain))) == (
        f"compactor: error: {plain}: planner.max_movez: Extra inputs are not permitted"
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
        env={"COMPACTOR_PLANNER__TIME_LIMIT_SECONDS": "7"},
    )
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert (shown["mode"], shown["planner"]["max_moves"], shown["planner"]["time_limit_seconds"]) == ("plan", 20, 7.0)
    assert compactor("config", "show", env={"COMPACTOR_MODE": "report"}).stdout.startswith("mode: report\n")


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

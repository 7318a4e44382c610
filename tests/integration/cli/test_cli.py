"""The ``compactor`` command as a user runs it: a subprocess, real exit codes, real output.

Covers the README's first command (``plan --example``), ``report``, a dry-run ``apply`` of a
written plan, and bad input: one line on stderr naming file/object/field, exit 2, no traceback.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from compactor.app.sources import example_path
from compactor.commands.progress import SolveProgress as _SolveProgress
from compactor.model.load import load_files
from compactor.planner.plan import CompactionPlan
from compactor.settings.bundles import PlannerSettings
from tests.command_line import assert_one_line_error, compactor
from tests.plancheck import check_plan


def test_the_readme_main_job_plans_the_example_and_the_plan_is_valid() -> None:
    result = compactor("plan", "--example", "--output", "json", "--time-limit", "5")
    assert result.returncode == 0, result.stderr
    plan = CompactionPlan.model_validate(json.loads(result.stdout))
    assert plan.freed_gpus >= 8
    assert [p.pod for p in plan.placed_pending] == ["llm/llama-70b-0"]
    assert check_plan(load_files([example_path()]), plan, PlannerSettings.of()) == []


def test_the_examples_default_plan_places_its_pending_pod_with_few_moves_and_shows_the_curve() -> None:
    """Issues [7] and [15]: balanced (the default) takes the cheap whole-GPU node and the MIG node its seven 1g slices free
    (0.56 moves each: a slice restarts an eighth of a GPU), not 22 evictions; every point of the curve is on show."""
    result = compactor("plan", "--example", "--output", "json", "--time-limit", "5")
    plan = CompactionPlan.model_validate(json.loads(result.stdout))
    assert plan.objective == "balanced" and len(plan.moves) == 10 and plan.freed_gpus == 16
    assert plan.freed_nodes == ["a100-gpu-02", "a100-mig1g-02"]
    assert [(p.freed_nodes, p.freed_gpus, p.moves, p.cost, p.status, p.chosen) for p in plan.frontier] == [
        (0, 0, 1, 1, "OPTIMAL", False),
        (1, 8, 3, 3, "OPTIMAL", False),
        (2, 16, 10, 6.92, "OPTIMAL", True),
        (3, 24, 22, 13.64, "OPTIMAL", False),
    ]
    assert sorted({m.cost for m in plan.moves}) == [0.56, 1.0]
    text = compactor("plan", "--example", "--time-limit", "5").stdout
    assert "Trade-off curve (objective balanced" in text
    assert "a move costs 0.5 + 0.5 x GPU-equivalents restarted" in text
    assert "* 2 node(s) freed            10     +7    6.92" in text
    assert "a100-mig1g-02 -> a100-mig1g-01  (0.56 moves; already runs GPU pods" in text
    markdown = compactor("plan", "--example", "--time-limit", "5", "--output", "markdown").stdout
    assert "| **2 node(s) freed** | **10** | **+7** | **6.92** |" in markdown


def test_each_objective_and_max_moves_pick_their_point_of_the_curve() -> None:
    def moves(*args: str) -> tuple[int, int, int]:
        plan = CompactionPlan.model_validate(
            json.loads(compactor("plan", "--example", "--output", "json", "--time-limit", "5", *args).stdout)
        )
        assert check_plan(load_files([example_path()]), plan, PlannerSettings.of()) == []
        return len(plan.moves), plan.freed_gpus, len(plan.placed_pending)

    assert moves("--objective", "pending-only") == (1, 0, 1)
    assert moves("--objective", "max-free") == (22, 24, 1)
    assert moves("--max-moves", "12") == (10, 16, 1)  # the freest point within 12 moves
    assert moves("--max-moves", "9", "--objective", "balanced") == (3, 8, 1)


def test_the_text_plan_explains_each_move_and_shows_before_and_after() -> None:
    result = compactor("plan", "--example", "--time-limit", "5")
    assert result.returncode == 0, result.stderr
    assert "Moves, in execution order:" in result.stdout
    assert result.stdout.count("why: ") >= 1
    assert "before" in result.stdout and "after" in result.stdout


def test_report_on_the_example_names_the_blocked_pending_pod() -> None:
    result = compactor("report", "--example")
    assert result.returncode == 0, result.stderr
    assert "Fragmentation rate" in result.stdout
    assert "llm/llama-70b-0" in result.stdout


def test_report_reads_a_snapshot_from_stdin_as_json() -> None:
    snapshot = Path(example_path()).read_text(encoding="utf-8")
    result = compactor("report", "--snapshot", "-", "--output", "json", stdin=snapshot)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["kind"] == "FragmentationReport"
    assert document["figures"]["cluster"]["nodeCount"] == 10


def test_a_missing_snapshot_is_one_line_naming_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    assert_one_line_error(compactor("report", "--snapshot", str(missing)), str(missing), "no such file")


def test_a_bad_quantity_names_file_object_and_field(tmp_path: Path) -> None:
    raw = json.loads(Path(example_path()).read_text(encoding="utf-8"))
    node = next(item for item in raw["items"] if item["kind"] == "Node")
    node["status"]["allocatable"]["cpu"] = "12x"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(raw), encoding="utf-8")
    name = node["metadata"]["name"]
    assert_one_line_error(compactor("plan", "--snapshot", str(bad)), str(bad), f"Node {name}", "status.allocatable.cpu")


def test_a_contradictory_config_is_one_line_naming_the_field(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("planner:\n  max_moves: -1\n", encoding="utf-8")
    assert_one_line_error(compactor("plan", "--example", "--config", str(config)), "caps.max_moves")


def test_a_written_plan_applies_in_a_dry_run_without_touching_the_snapshot(tmp_path: Path) -> None:
    plan_file = tmp_path / "plan.json"
    written = compactor("plan", "--example", "--write", str(plan_file), "--time-limit", "5")
    assert written.returncode == 0, written.stderr
    before = Path(example_path()).read_bytes()
    result = compactor("apply", "--plan", str(plan_file), "--example", "--dry-run", "--output", "json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    plan = json.loads(plan_file.read_text(encoding="utf-8"))
    assert report["status"] == "dry-run"  # not "succeeded": nothing ran
    assert report["dryRun"] is True and report["outcome"]["simulated"] is True
    assert report["movesDone"] == len(plan["moves"])
    assert sorted(report["freedNodes"]) == sorted(plan["freedNodes"])
    evictions = [line for line in report["intendedChanges"] if line.startswith("evict ")]
    assert evictions == [f"evict pod/{m['pod']} (policy/v1 Eviction)" for m in plan["moves"]]
    assert [c["object"] for c in report["intendedCalls"] if c["call"] == "evict"] == [
        f"pod/{m['pod']}" for m in plan["moves"]
    ]
    assert len(report["intendedCalls"]) == len(report["intendedChanges"])
    assert any("kube-scheduler" in line for line in report["notKnownUntilRealRun"])
    assert Path(example_path()).read_bytes() == before


def test_apply_refuses_to_change_a_snapshot_without_dry_run(tmp_path: Path) -> None:
    plan_file = tmp_path / "plan.json"
    assert compactor("plan", "--example", "--write", str(plan_file), "--time-limit", "5").returncode == 0
    assert_one_line_error(compactor("apply", "--plan", str(plan_file), "--example"), "--dry-run")


def test_pods_tolerating_every_taint_stay_in_a_plan_made_without_a_cluster_unless_the_steering_policy_is_configured(
    tmp_path: Path,
) -> None:
    raw = json.loads(Path(example_path()).read_text(encoding="utf-8"))
    for item in raw["items"]:
        if item["kind"] == "Pod" and item["spec"].get("nodeName"):
            item["spec"]["tolerations"] = [{"operator": "Exists"}]  # as many GPU jobs are written
    snapshot = tmp_path / "tolerant.json"
    snapshot.write_text(json.dumps(raw), encoding="utf-8")
    auto = json.loads(compactor("plan", "--snapshot", str(snapshot), "--output", "json", "--time-limit", "5").stdout)
    assert auto["moves"] == [] and auto["freedNodes"] == []
    assert any("tolerates the compactor's fence taint" in reason for reason in auto["explanations"]["unmovablePods"]), (
        auto["explanations"]
    )
    assert "planned as for holds" in auto["steering"]["why"]
    config = tmp_path / "policy.yaml"
    config.write_text("executor:\n  steering: policy\n", encoding="utf-8")
    pinned = json.loads(
        compactor(
            "plan", "--snapshot", str(snapshot), "--config", str(config), "--output", "json", "--time-limit", "5"
        ).stdout
    )
    assert pinned["moves"] and pinned["freedNodes"], "with the steering policy, tolerating pods move like any other"


def test_a_long_plan_logs_its_stage_and_best_so_far_every_few_seconds(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("INFO", logger="compactor.commands"), _SolveProgress() as progress:
        progress.AFTER, progress.EVERY = 0.0, 60.0  # at once, then only on a new stage
        progress.stage("searching", "")
        time.sleep(0.8)
        progress.stage("writing the plan", "8 GPUs freed, 2 moves")
        time.sleep(0.8)
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("planning: ")]
    assert [m.split(",")[0] for m in said] == ["planning: searching", "planning: writing the plan"]
    assert said[-1].endswith("; best so far: 8 GPUs freed, 2 moves")


def test_a_curve_that_is_the_max_free_plan_alone_names_its_point_by_the_nodes_it_frees() -> None:
    """Issue 45, item 3: at 5,000 nodes the time limit left no time for the curve, and its one point, the max-free plan
    freeing 8,664 GPUs, was labelled "place pending pods". It is labelled by what it frees."""
    from compactor.render.plan import curve_rows

    result = compactor("plan", "--example", "--output", "json", "--time-limit", "5")
    plan = CompactionPlan.model_validate(json.loads(result.stdout))
    alone = plan.model_copy(update={"frontier": [p.model_copy(update={"chosen": True}) for p in plan.frontier[-1:]]})
    (row,) = curve_rows(alone)
    assert row[:2] == ("*", "3 node(s) freed")
    first = curve_rows(plan)[0]
    assert first[1] == "place pending pods"  # a curve's first point that frees nothing says what it does


def test_a_search_that_built_no_model_claims_no_status_or_gap() -> None:
    """Issue 45, item 3: at 5,000 nodes the time limit went on building the problem and the greedy warm start, and the
    header still said "the search for the most GPUs: FEASIBLE in 4.99s" beside a note that no model was built. It says
    the plan is greedy's, in text and HTML; a search that ran keeps its status and gap."""
    from compactor.render.html.plan import solver_list
    from compactor.render.plan import render_plan

    result = compactor("plan", "--example", "--output", "json", "--time-limit", "5")
    plan = CompactionPlan.model_validate(json.loads(result.stdout))
    levels = [{**level, "status": "UNKNOWN", "bound": None} for level in plan.solver.levels]
    unbuilt = plan.model_copy(
        update={"solver": plan.solver.model_copy(update={"variables": 0, "levels": levels, "status": "FEASIBLE"})}
    )
    said = "the search for the most GPUs: no CP-SAT model in the time limit, the greedy warm start's plan (unproven)"
    assert said in render_plan(unbuilt, "text", 1000)
    assert "FEASIBLE in" not in render_plan(unbuilt, "text", 1000)
    assert "no CP-SAT model in the time limit" in solver_list(unbuilt)
    assert "the search for the most GPUs: OPTIMAL in " in render_plan(plan, "text", 1000)


def test_a_point_with_no_proven_bound_claims_none() -> None:
    """Issue 45, item 3: "no plan freeing 0 node(s) costs less than 0 moves, it costs 10 (gap 100.0%)" presented a bound
    of 0 as a proof. A point whose bound is 0 says it has none; a point with a bound keeps its gap."""
    from compactor.render.plan import point_quality

    result = compactor("plan", "--example", "--output", "json", "--time-limit", "5")
    plan = CompactionPlan.model_validate(json.loads(result.stdout))

    def chosen_with(bound: float) -> CompactionPlan:
        frontier = [
            p.model_copy(update={"status": "FEASIBLE", "bound": bound}) if p.chosen else p for p in plan.frontier
        ]
        return plan.model_copy(update={"frontier": frontier})

    assert point_quality(chosen_with(0)) == (
        "this plan: FEASIBLE, not proven (time limit: no lower bound on its cost of 6.92 moves)"
    )
    assert point_quality(chosen_with(5)).endswith("costs less than 5 moves, it costs 6.92 (gap 27.7%)")

"""Every entry point measures and plans one cluster alike: ``plan``, ``run --once --dry-run``, ``report`` and one controller
cycle, on the bundled example with settings whose shape derivation is not the default (``metrics.shape_coverage`` and
``metrics.max_shapes``), give the same figures and the same plan.

Each once derived its reference shapes itself, and ``run --once`` did so without the configured coverage and cap: its
figures (the plan's ``before`` and ``after``), and what depends on the shapes (the MIG rebalancing), differed from
``plan``'s on the same cluster. The plan a run carries out is caught on its way into the executor, so the run's output
format need not show it.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from compactor.actions.dryrun import RecordingClient
from compactor.actions.executor import Executor
from compactor.actions.services.report import RunReport
from compactor.app.invocation import Invocation
from compactor.app.reading import load_for_planning
from compactor.app.sources import SnapshotSource, example_path
from compactor.app.tick import run_cycle
from compactor.cli import main
from compactor.clock import SimulatedClock
from compactor.controller.exporter import Exporter
from compactor.metrics.figures_json import figures_to_dict
from compactor.model.load import read_source
from compactor.planner.plan import CompactionPlan
from compactor.settings.origins import load_settings

# Not the defaults (0.95 and 20): the example's GPU pods ask for several shapes, so the derived shapes differ.
METRICS = {"shape_coverage": 0.5, "max_shapes": 1}


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    for key in [k for k in os.environ if k.startswith("COMPACTOR_")]:
        monkeypatch.delenv(key)
    path = tmp_path / "compactor.yaml"
    path.write_text(
        yaml.safe_dump({"metrics": METRICS, "solver": {"deterministic": True, "seed": 3, "time_limit_seconds": 20}}),
        encoding="utf-8",
    )
    return str(path)


@pytest.fixture
def executed(monkeypatch: pytest.MonkeyPatch) -> list[CompactionPlan]:
    """The plans handed to the executor, in order."""
    plans: list[CompactionPlan] = []
    execute = Executor.execute

    def recorded(self: Executor, plan: CompactionPlan, **kwargs: Any) -> RunReport:
        plans.append(plan)
        return execute(self, plan, **kwargs)

    monkeypatch.setattr(Executor, "execute", recorded)
    return plans


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict[str, Any]:
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    document: dict[str, Any] = json.loads(captured.out)
    return document


def _plan_facts(plan: dict[str, Any]) -> dict[str, Any]:
    """What a plan does and what it measures; not when or from what it was made (id, time, source, timings)."""
    return {
        "moves": [(m["pod"], m["from"], m["to"]) for m in plan["moves"]],
        "placedPending": [(p["pod"], p["to"]) for p in plan["placedPending"]],
        "freedNodes": plan["freedNodes"],
        "freedGpus": plan["freedGpus"],
        "migRepartition": plan["migRepartition"],
        "shapes": [s["label"] for s in plan["before"]["shapes"]],
        "before": plan["before"],
        "after": plan["after"],
    }


def test_plan_run_report_and_a_controller_cycle_measure_and_plan_the_same(
    config: str, executed: list[CompactionPlan], capsys: pytest.CaptureFixture[str]
) -> None:
    settings = load_settings(config)
    planned = _plan_facts(_json(capsys, ["plan", "--example", "--config", config, "--output", "json"]))
    # the settings were applied: one shape, not the default's several
    assert len(planned["shapes"]) == METRICS["max_shapes"]
    assert planned["moves"], "the example needs moves, or agreeing plans would prove nothing"

    report = _json(capsys, ["report", "--example", "--config", config, "--output", "json"])
    assert report["figures"] == planned["before"], "report and plan measure the same cluster differently"

    run = _json(capsys, ["run", "--once", "--example", "--dry-run", "--config", config, "--output", "json"])
    assert run["dryRun"] and len(executed) == 1
    ran = _plan_facts(json.loads(executed[0].to_json()))
    assert ran["shapes"] == planned["shapes"], "run --once derived other reference shapes than plan"
    assert ran == planned, "run --once planned otherwise than plan"
    assert run["freedNodes"] == planned["freedNodes"]

    invocation = Invocation(command="controller", settings=settings, source=SnapshotSource(example=True))
    cycle = run_cycle(
        lambda: load_for_planning(invocation),
        RecordingClient(read_source(example_path())),
        settings,
        SimulatedClock(datetime.now(UTC)),
        Exporter(CollectorRegistry(auto_describe=False)),
        execute=True,
        dry_run=True,
    )
    assert cycle.figures is not None and cycle.plan is not None and len(executed) == 2
    assert json.loads(json.dumps(figures_to_dict(cycle.figures))) == report["figures"], (
        "a controller cycle measures otherwise"
    )
    assert _plan_facts(json.loads(cycle.plan.to_json())) == planned, "a controller cycle planned otherwise than plan"
    assert executed[1] is cycle.plan


@pytest.mark.parametrize("server_dry_run", [True, False], ids=["setting-on", "setting-off"])
def test_a_dry_run_cycle_asks_the_api_server_as_the_command_line_does(config: str, server_dry_run: bool) -> None:
    """``executor.server_dry_run`` makes every dry run of a live cluster ask about each eviction (dryRun=All): ``run --once
    --dry-run`` (tests/wire/test_server_dry_run.py) and the controller's dry-run cycles alike."""
    settings = load_settings(config)
    settings = settings.model_copy(update={"executor": settings.executor.amended(server_dry_run=server_dry_run)})
    cluster = RecordingClient(read_source(example_path()))  # the "live" cluster the cycle reads and would ask
    invocation = Invocation(command="controller", settings=settings, source=SnapshotSource(example=True))
    cycle = run_cycle(
        lambda: load_for_planning(invocation),
        cluster,
        settings,
        SimulatedClock(datetime.now(UTC)),
        Exporter(CollectorRegistry(auto_describe=False)),
        execute=True,
        dry_run=True,
    )
    assert cycle.run is not None and cycle.run.dry_run and cycle.plan is not None and cycle.plan.moves
    asked = [call for call in cluster.calls if call.method == "evict"]
    assert len(asked) == (len(cycle.plan.moves) if server_dry_run else 0)

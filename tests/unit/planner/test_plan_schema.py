"""The published schema of the plan document (issue 12): docs/plan-schema.json and docs/plan.md.

The committed schema is what the model generates now, every plan the tool writes validates against it, documents
the model refuses fail it too, and every field it names is documented in docs/plan.md.
"""

from __future__ import annotations

import copy
import json
import logging
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema
import pydantic
import pytest

from compactor.app.plan_document import build_plan
from compactor.cli import main
from compactor.model.migparted import parse_mig_parted
from compactor.planner.plan import CompactionPlan, plan_json_schema
from compactor.planner.request import PlanRequest
from compactor.settings.bundles import PlannerSettings
from tests.builders import cluster, node, pod

ROOT = Path(__file__).resolve().parents[3]
SCHEMA_FILE = ROOT / "docs" / "plan-schema.json"
PLAN_DOC = ROOT / "docs" / "plan.md"
REGENERATE = ".venv/bin/python -m compactor.planner.plan > docs/plan-schema.json"
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def committed_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    return schema


def validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(committed_schema())


def schema_errors(document: Any) -> list[str]:
    return [
        f"{'/'.join(str(p) for p in e.absolute_path) or '(top)'}: {e.message}"
        for e in validator().iter_errors(document)
    ]


# ---------------------------------------------------------------- (a) the committed schema is current


def test_the_committed_schema_is_what_the_model_generates() -> None:
    assert committed_schema() == plan_json_schema(), (
        f"docs/plan-schema.json is stale: regenerate it with `{REGENERATE}`"
    )


def test_the_schema_is_a_valid_draft_2020_12_schema_that_refuses_unknown_keys() -> None:
    schema = committed_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] and schema["title"]
    jsonschema.Draft202012Validator.check_schema(schema)
    objects = [schema, *schema["$defs"].values()]
    assert all(o.get("additionalProperties") is False for o in objects), (
        "every model forbids extra keys; the schema should too"
    )


def test_the_schema_describes_every_field() -> None:
    missing = [path for path, prop in schema_properties(committed_schema()) if not prop.get("description")]
    assert missing == [], f"give these fields a description= in compactor/planner/plan.py, then `{REGENERATE}`"


# ---------------------------------------------------------------- (b) every plan the tool writes validates


@pytest.fixture
def compactor_logger() -> Iterator[None]:
    """``main`` points the ``compactor`` logger at this test's stderr and stops its propagation: put it back after."""
    logger = logging.getLogger("compactor")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--objective", "max-free"],
        ["--objective", "pending-only"],
        ["--max-moves", "0"],
        ["--explain-mig"],
    ],
    ids=["balanced", "max-free", "pending-only", "max-moves-0", "explain-mig"],
)
def test_plans_written_by_the_cli_validate(
    args: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path, compactor_logger: None
) -> None:
    written = tmp_path / "plan.json"
    code = main(["plan", "--example", "--output", "json", "--time-limit", "5", "--write", str(written), *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    document = json.loads(out)
    assert schema_errors(document) == []
    assert schema_errors(json.loads(written.read_text(encoding="utf-8"))) == []
    if "--explain-mig" in args:
        assert document["migAdvice"], "the example should carry MIG advice"
    if "--max-moves" in args:
        assert document["moves"] == []


def gpu_cluster_plan(*objects: dict[str, Any], **settings: Any) -> CompactionPlan:
    config = PlannerSettings.of(min_replicas=1, **{"time_limit_seconds": 5, "workers": 2, **settings})
    return build_plan(PlanRequest.of(cluster(*objects), config, source="test", now=NOW, plan_id="plan-schema"))


def two_half_full_nodes() -> list[dict[str, Any]]:
    return [
        node("gpu-1", gpus=8),
        node("gpu-2", gpus=8),
        pod("a", gpus=2, on="gpu-1", owner="ReplicaSet/a"),
        pod("b", gpus=2, on="gpu-2", owner="ReplicaSet/b"),
    ]


# A re-cut (tests/integration/executor/test_step_recut.py): b runs one movable 1g.10gb pod that a can take; two pending 3g.40gb pods
# fit only on b re-cut to all-3g.40gb.
MIG_FILTER = '["0x20B210DE"]'
MIG_LAYOUTS = "version: v1\nmig-configs:\n" + "".join(
    f"  {name}:\n    - device-filter: {MIG_FILTER}\n      devices: all\n      mig-enabled: true\n      mig-devices: {{{body}}}\n"
    for name, body in (("all-1g.10gb", '"1g.10gb": 7'), ("all-3g.40gb", '"3g.40gb": 2'))
)


def mig_node(name: str) -> dict[str, Any]:
    return node(
        name,
        mig={"1g.10gb": 14},
        physical_gpus=2,
        product="NVIDIA-A100-SXM4-80GB",
        labels={
            "nvidia.com/mig.config": "all-1g.10gb",
            "nvidia.com/mig.config.state": "success",
            "nvidia.com/mig.capable": "true",
        },
    )


def recut_plan() -> CompactionPlan:
    objects = [
        mig_node("a"),
        mig_node("b"),
        pod("small-a", on="a", mig="1g.10gb", owner=None),
        pod("small-b", on="b", mig="1g.10gb", owner="ReplicaSet/small"),
        pod("wait-0", mig="3g.40gb", owner=None),
        pod("wait-1", mig="3g.40gb", owner=None),
    ]
    settings = PlannerSettings.of(min_replicas=1, time_limit_seconds=5, workers=2, repartition=True)
    return build_plan(
        PlanRequest.of(
            cluster(*objects),
            settings,
            source="test",
            now=NOW,
            plan_id="plan-recut",
            mig_parted=parse_mig_parted(MIG_LAYOUTS, source="gpu-operator/default-mig-parted-config"),
        )
    )


def built_plans() -> Iterator[tuple[str, CompactionPlan, Any]]:
    """(name, plan, what it must show) for plans covering the optional parts of the document."""
    plan = gpu_cluster_plan(*two_half_full_nodes())
    yield "frees a node", plan, plan.freed_nodes and plan.moves and plan.frontier
    plan = gpu_cluster_plan(*two_half_full_nodes(), pod("huge", gpus=16, owner="Job/huge"))
    yield "a pod stays pending", plan, plan.pending_not_placed
    plan = gpu_cluster_plan(
        node("gpu-1", gpus=8), node("gpu-2", gpus=8), pod("a", gpus=6, on="gpu-1"), pod("new", gpus=4, owner="Job/new")
    )
    yield "a pending pod fills a free node", plan, plan.placed_pending and plan.filled_nodes
    plan = gpu_cluster_plan(node("gpu-1", gpus=8), pod("ds", gpus=1, on="gpu-1", owner="DaemonSet/ds"))
    yield "nothing to plan", plan, plan.solver.note and plan.explanations.get("unmovablePods")
    plan = gpu_cluster_plan(*two_half_full_nodes(), goal="shapes", target_shapes=["nvidia.com/gpu=4"])
    yield "shape mode", plan, plan.objective == "shapes" and plan.balanced_moves_per_gpu is None
    plan = recut_plan()
    yield "MIG re-cut", plan, plan.mig_repartition and plan.placed_pending


def test_plans_built_for_test_clusters_validate_and_read_back() -> None:
    for name, plan, shows in built_plans():
        assert shows, f"{name}: the cluster no longer produces the plan this case is for"
        document = json.loads(plan.to_json())
        assert schema_errors(document) == [], name
        assert CompactionPlan.model_validate(document) == plan, name


# ---------------------------------------------------------------- (c) what the model refuses, the schema refuses


def example_plan_document() -> dict[str, Any]:
    plan = gpu_cluster_plan(*two_half_full_nodes())
    document: dict[str, Any] = json.loads(plan.to_json())
    assert document["moves"] and schema_errors(document) == []
    return document


def broken(document: dict[str, Any], how: str) -> dict[str, Any]:
    bad = copy.deepcopy(document)
    if how == "move from is an integer":
        bad["moves"][0]["from"] = 1
    elif how == "unknown top-level key":
        bad["status"] = "done"
    elif how == "unknown key in a move":
        bad["moves"][0]["node"] = "gpu-1"
    elif how == "no metadata":
        del bad["metadata"]
    elif how == "another apiVersion":
        bad["apiVersion"] = "compactor/v1"
    elif how == "freedGpus is a string":
        bad["freedGpus"] = "8"
    return bad


@pytest.mark.parametrize(
    "how",
    ["move from is an integer", "unknown top-level key", "unknown key in a move", "no metadata", "another apiVersion"],
)
def test_a_malformed_plan_fails_the_schema_as_it_fails_the_model(how: str) -> None:
    bad = broken(example_plan_document(), how)
    assert schema_errors(bad), f"the schema accepts a plan with {how}"
    with pytest.raises(pydantic.ValidationError):
        CompactionPlan.model_validate(bad)


def test_the_schema_is_stricter_than_the_loader_about_numbers_written_as_strings() -> None:
    # pydantic's lax mode reads "8" as 8; the schema, the contract for other programs, wants the number compactor writes.
    bad = broken(example_plan_document(), "freedGpus is a string")
    assert schema_errors(bad) == ["freedGpus: '8' is not of type 'integer'"]
    assert CompactionPlan.model_validate(bad).freed_gpus == 8


# ---------------------------------------------------------------- (d) every field is documented


def schema_properties(schema: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(JSON path, property schema) for every property, nested objects and array items followed: ``moves[].from``."""
    defs = schema.get("$defs", {})

    def model(node: dict[str, Any]) -> dict[str, Any] | None:
        if "$ref" in node:
            resolved: dict[str, Any] = defs[node["$ref"].rsplit("/", 1)[-1]]
            return resolved
        return node if "properties" in node else None

    def walk(node: dict[str, Any], prefix: str) -> Iterator[tuple[str, dict[str, Any]]]:
        for key, prop in node.get("properties", {}).items():
            path = prefix + key
            yield path, prop
            inner = model(prop)
            if inner is not None:
                yield from walk(inner, path + ".")
            elif prop.get("type") == "array" and (items := model(prop.get("items", {}))) is not None:
                yield from walk(items, path + "[].")

    return list(walk(schema, ""))


def documented_fields() -> dict[str, str]:
    """JSON path -> its row, from the field table of docs/plan.md (rows whose first cell is a `code` path)."""
    text = PLAN_DOC.read_text(encoding="utf-8")
    section = text.split("## Fields", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        match = re.match(r"\|\s*`([^`]+)`\s*\|", line)
        if match:
            rows[match.group(1)] = line
    return rows


def test_every_field_of_the_schema_has_a_row_in_docs_plan_md() -> None:
    documented = documented_fields()
    paths = [path for path, _ in schema_properties(committed_schema())]
    assert "moves[].from" in paths and "solver.wallSeconds" in paths and "frontier[].freedGpus" in paths
    missing = [p for p in paths if p not in documented]
    assert missing == [], f"document these fields in the table under '## Fields' of docs/plan.md: {missing}"
    stale = [p for p in documented if p not in paths]
    assert stale == [], f"docs/plan.md documents fields the plan no longer has: {stale}"
    cells = {p: [c.strip() for c in re.split(r"(?<!\\)\|", row.strip())[1:-1]] for p, row in documented.items()}
    unfilled = [p for p, row in cells.items() if len(row) != 4 or not all(row)]
    assert unfilled == [], f"each row needs path, type, unit and meaning: {unfilled}"

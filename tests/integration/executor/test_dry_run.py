"""Dry run and real run side by side: one executor, one plan, two clients, the same intended calls.

The real run goes to the fake cluster (``FakeCluster``, which evicts, reschedules and
starts pods in simulated time); the dry run goes to ``RecordingClient`` over a copy of
the same raw objects (in ``SimulatedClock`` time, where replacements appear at once).
Both must make the same sequence of writes (cordon/uncordon patches, evictions, events,
state writes), and the dry run must leave the objects it was given untouched.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

import pytest

from compactor.actions.dryrun import RecordingClient
from compactor.actions.dryrun.calls import RecordedCall
from compactor.actions.executor import Executor
from compactor.actions.port import annotations as ann
from compactor.actions.services.report import RunReport
from compactor.clock import SimulatedClock
from compactor.planner.plan import CompactionPlan
from compactor.settings.bundles import RunSettings
from tests.fakecluster import EPOCH, Call, FakeCluster, is_fenced
from tests.scenarios.executor import SETTINGS, make_plan, one_freed_node, two_freed_nodes

Obj = dict[str, Any]
Step = tuple[Any, ...]


def _normal_message(message: str) -> str:
    return re.sub(r"until \d{4}-\d\d-\d\dT[\d:.]+Z", "until <now+ttl>", message)


def _normal_patch(patch: Obj) -> Obj:
    """The patch with times blanked (the reservation deadline, a hold's cordon time): real time passed waiting for pods."""
    patch = copy.deepcopy(patch)
    # the fake API's versions; a snapshot's nodes carry their own
    (patch.get("metadata") or {}).pop("resourceVersion", None)
    annotations = (patch.get("metadata") or {}).get("annotations") or {}
    if annotations.get(ann.RESERVED_UNTIL):
        annotations[ann.RESERVED_UNTIL] = "<now+ttl>"
    if annotations.get(ann.HELD_FOR):
        annotations[ann.CORDONED_AT] = "<now>"
    return patch


def real_steps(history: list[Call]) -> list[Step]:
    steps: list[Step] = []
    for call in history:
        a = call.args
        if call.method == "patch_node":
            steps.append(("patch_node", a["name"], _normal_patch(a["patch"])))
        elif call.method == "evict":
            assert a["dry_run"] is False
            steps.append(("evict", f"{a['namespace']}/{a['name']}"))
        elif call.method == "create_event":
            ref = a["involved"]
            steps.append(
                (
                    "event",
                    f"{ref.kind}/{ref.namespace}/{ref.name}",
                    a["reason"],
                    _normal_message(a["message"]),
                    a["type_"],
                )
            )
        elif call.method == "write_state":
            steps.append(("write_state", a["name"], a["data"] is None))
    return steps


def dry_steps(calls: list[RecordedCall]) -> list[Step]:
    steps: list[Step] = []
    for call in calls:
        a = call.args
        if call.method == "patch_node":
            steps.append(("patch_node", a["name"], _normal_patch(a["patch"])))
        elif call.method == "evict":
            steps.append(("evict", f"{a['namespace']}/{a['name']}"))
        elif call.method == "create_event":
            ref = a["involved"]
            steps.append(
                (
                    "event",
                    f"{ref.kind}/{ref.namespace}/{ref.name}",
                    a["reason"],
                    _normal_message(a["message"]),
                    a["type"],
                )
            )
        elif call.method == "write_state":
            steps.append(("write_state", a["name"], a["cleared"]))
    return steps


def side_by_side(
    objects: list[Obj],
    plan: CompactionPlan,
    settings: RunSettings = SETTINGS,
    *,
    real_world: Callable[[FakeCluster], None] = lambda _c: None,
) -> tuple[RunReport, FakeCluster, RunReport, RecordingClient]:
    fake = FakeCluster(objects)
    real_world(fake)
    real = Executor(fake, settings, fake.clock).execute(plan)
    recording = RecordingClient(objects, plan)
    dry = Executor(recording, settings, SimulatedClock(EPOCH), dry_run=True).execute(plan)
    return real, fake, dry, recording


def without_pod(objects: list[Obj], name: str) -> list[Obj]:
    return [o for o in objects if not (o["kind"] == "Pod" and o["metadata"]["name"] == name)]


def with_budget(objects: list[Obj], name: str, allowed: int) -> list[Obj]:
    objects = copy.deepcopy(objects)
    for o in objects:
        if o["kind"] == "PodDisruptionBudget" and o["metadata"]["name"] == name:
            o["status"]["disruptionsAllowed"] = allowed
    return objects


@pytest.mark.parametrize("after_drain", ["uncordon", "keepCordoned", "taint"])
@pytest.mark.parametrize("scenario", [two_freed_nodes, one_freed_node])
def test_real_and_dry_runs_make_the_same_calls(scenario: Callable[[], list[Obj]], after_drain: str) -> None:
    objects = scenario()
    plan = make_plan(objects)
    settings = SETTINGS.amended(after_drain=after_drain)
    real, fake, dry, recording = side_by_side(objects, plan, settings)
    assert real.status == dry.status == "succeeded"
    assert (dry.moves_done, dry.freed_nodes, dry.dry_run, real.dry_run) == (
        real.moves_done,
        real.freed_nodes,
        True,
        False,
    )
    steps = real_steps(fake.history)
    assert dry_steps(recording.calls) == steps
    # and the sequence is the whole story: cordons, then one eviction per move, then the after-drain patches
    evictions = [s[1] for s in steps if s[0] == "evict"]
    assert evictions == [m.pod for m in plan.moves]
    patches = [(s[1], s[2]) for s in steps if s[0] == "patch_node"]
    lifts = plan.freed_nodes if after_drain == "taint" else []  # the same run lifts each reservation at its TTL
    assert [name for name, _ in patches if name in plan.freed_nodes] == plan.freed_nodes * 2 + lifts
    holds = [name for name, patch in patches if patch["metadata"]["annotations"].get(ann.HELD_FOR)]
    releases = [
        name
        for name, patch in patches
        if name not in plan.freed_nodes and not patch["metadata"]["annotations"].get(ann.HELD_FOR)
    ]
    assert sorted(holds) == sorted(releases)  # every node held while a replacement bound was released again
    if scenario is one_freed_node:  # gpu-1 and gpu-2 can both take gpu-3's pods: the one not planned is held
        assert holds


def test_a_plan_whose_budget_refuses_moves_makes_the_same_calls_in_both() -> None:
    """The serve PDB allows no disruption in both worlds: both wait the timeout out, refuse the serve moves (and what hung
    on them) alike, and carry out the rest alike."""
    objects = two_freed_nodes()
    plan = make_plan(objects)
    real, fake, dry, recording = side_by_side(
        with_budget(objects, "serve", 0), plan, real_world=lambda c: c.set_pdb_allowed("default", "serve", 0)
    )
    assert real.status == "partial" and dry.status == "partial" and real.reason == dry.reason
    assert "PodDisruptionBudget default/serve allowed no disruption" in real.reason
    assert real.skipped_moves == dry.skipped_moves
    steps = real_steps(fake.history)
    assert dry_steps(recording.calls) == steps
    evicted = [s[1] for s in steps if s[0] == "evict"]
    assert not [pod for pod in evicted if "serve" in pod]


def test_a_skipped_move_is_skipped_in_both() -> None:
    objects = two_freed_nodes()
    plan = make_plan(objects)
    real, fake, dry, recording = side_by_side(without_pod(objects, "train-a"), plan)  # gone since the plan was made
    assert real.status == dry.status == "succeeded"
    assert real.skipped_moves == dry.skipped_moves == ["default/train-a"]
    assert dry_steps(recording.calls) == real_steps(fake.history)
    assert "default/train-a" not in [s[1] for s in real_steps(fake.history) if s[0] == "evict"]


def test_the_dry_run_changes_nothing_it_was_given() -> None:
    objects = two_freed_nodes()
    plan = make_plan(objects)
    given = copy.deepcopy(objects)
    plan_before = plan.model_dump()
    recording = RecordingClient(objects, plan)
    report = Executor(
        recording, SETTINGS.amended(after_drain="keepCordoned"), SimulatedClock(EPOCH), dry_run=True
    ).execute(plan)
    assert report.status == "succeeded" and report.dry_run
    assert objects == given and plan.model_dump() == plan_before
    # ... while its own copy did change, so the comparison above is not vacuous
    assert is_fenced(recording.nodes["gpu-2"])
    assert "default/serve-a" not in recording.pods
    assert {p["spec"]["nodeName"] for p in recording.pods.values() if "-dryrun-" in p["metadata"]["name"]} == {"gpu-1"}


def test_intended_changes_say_every_write_the_state_included_one_line_each() -> None:
    objects = one_freed_node()
    plan = make_plan(objects)
    recording = RecordingClient(objects, plan)
    Executor(recording, SETTINGS, SimulatedClock(EPOCH), dry_run=True).execute(plan)
    lines = recording.intended_changes()
    assert len(lines) == len(recording.calls) == len(recording.intended_calls())
    assert [line for line in lines if line.startswith("evict ")] == [
        f"evict pod/{m.pod} (policy/v1 Eviction)" for m in plan.moves
    ]
    state = f"configmap/gpu-compactor/{ann.STATE_CONFIGMAP}"
    assert lines[0] == f"create {state} (executor state, phase cordoning)"
    assert lines[-1] == f"delete {state} (executor state)"
    assert (
        sum(line.startswith(f"replace {state} ") for line in lines)
        == len([c for c in recording.calls if c.method == "write_state"]) - 2
    )
    fence = next(line for line in lines if line.startswith("taint node/gpu-3 compactor.io/fence-"))
    assert fence.startswith(
        f"taint node/gpu-3 compactor.io/fence-gpu-compactor={plan.metadata.id}:NoSchedule + annotate node/gpu-3 "
        f"compactor.io/cordoned-by=gpu-compactor compactor.io/plan-id={plan.metadata.id} compactor.io/cordoned-at="
    ), fence
    assert lines[lines.index(fence) + 1] == (
        f"event Normal CompactorCordon node/gpu-3: fenced by gpu-compactor "
        f"(taint compactor.io/fence-gpu-compactor:NoSchedule) for plan {plan.metadata.id}"
    )
    for line in lines:
        assert "None" not in line and "{'" not in line and "//" not in line and "resourceVersion" not in line, line


def test_server_side_admission_answers_for_real_and_changes_nothing() -> None:
    objects = two_freed_nodes()
    plan = make_plan(objects)
    api = FakeCluster(objects)  # stands in for the live API server, asked with dryRun=All
    before = copy.deepcopy((api.nodes, api.pods, api.pdbs))
    recording = RecordingClient(objects, plan, admission=api)
    report = Executor(recording, SETTINGS, SimulatedClock(EPOCH), dry_run=True).execute(plan)
    assert report.status == "succeeded"
    assert [(c.method, c.args["dry_run"]) for c in api.history] == [("evict", True)] * 4
    assert (api.nodes, api.pods, api.pdbs) == before and api.evicted == [] and api.state == {}


def test_server_side_admission_refusing_makes_the_dry_run_fail_like_the_real_one() -> None:
    objects = two_freed_nodes()
    plan = make_plan(objects)
    api = FakeCluster(objects)
    api.set_pdb_allowed("default", "serve", 0)  # the snapshot says 1, the live budget says 0
    recording = RecordingClient(objects, plan, admission=api)
    report = Executor(recording, SETTINGS, SimulatedClock(EPOCH), dry_run=True).execute(plan)
    assert report.status == "failed" and "429" in report.reason and plan.moves[0].pod in report.reason
    assert [(c.method, c.args["dry_run"]) for c in api.history] == [("evict", True)] * (
        1 + SETTINGS.executor.eviction_retry_limit
    )
    assert api.evicted == [] and api.state == {} and api.cordoned_nodes() == []
    assert not is_fenced(recording.nodes["gpu-2"])  # rolled back in the dry world too

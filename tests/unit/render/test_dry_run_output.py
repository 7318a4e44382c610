"""Issue [12]: a dry run reads like kubectl, says nothing happened that did not, and ends with what it cannot know.

Unit tests of the call formatter (``compactor.actions.dryrun.describe``) for each kind of
write the executor makes, then ``compactor apply --example --dry-run`` as a user runs it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from compactor.actions.cluster import migmanager as mig
from compactor.actions.dryrun import NOT_KNOWN_UNTIL_REAL_RUN, RecordingClient
from compactor.actions.dryrun.calls import describe, describe_node_patch
from compactor.actions.port import annotations as ann
from compactor.actions.port.client import EvictionOutcome, EvictionResult, ObjectRef
from compactor.actions.services.outcome import Outcome
from compactor.cli import main
from compactor.render.run import outcome_text as _outcome_text

Obj = dict[str, Any]
PLAN_ID = "plan-1"
AT = "2026-01-02T03:04:05Z"
RESERVED = "compactor.io/reserved"  # RunSettings.taint_key


FENCE = ann.fence_key(ann.IDENTITY)


def gpu_node(
    name: str = "gpu-1", *, fenced: bool = False, taints: list[Obj] | None = None, labels: dict[str, str] | None = None
) -> Obj:
    annotations = {ann.CORDONED_BY: ann.IDENTITY, ann.PLAN_ID: PLAN_ID, ann.CORDONED_AT: AT} if fenced else {}
    spec: Obj = {}
    all_taints = [*(taints or []), *([{"key": FENCE, "value": PLAN_ID, "effect": "NoSchedule"}] if fenced else [])]
    if all_taints:
        spec["taints"] = all_taints
    return {
        "kind": "Node",
        "metadata": {"name": name, "resourceVersion": "42", "labels": labels or {}, "annotations": annotations},
        "spec": spec,
        "status": {"allocatable": {"nvidia.com/gpu": "8"}},
    }


def a_pod(namespace: str = "nlp", name: str = "bert-0", node: str = "gpu-1") -> Obj:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": "u-1"},
        "spec": {"nodeName": node},
        "status": {"phase": "Running"},
    }


def last_line(client: RecordingClient) -> str:
    return client.intended_changes()[-1]


def with_version(patch: Obj) -> Obj:
    """As ``patch_fresh`` sends it: the read's resourceVersion as a precondition (plumbing, never shown)."""
    return {**patch, "metadata": {**(patch.get("metadata") or {}), "resourceVersion": "42"}}


# ----- node patches -------------------------------------------------------------------


def test_a_fence_reads_as_taint_and_annotate_in_one_line() -> None:
    node = gpu_node()
    client = RecordingClient([node])
    client.patch_node("gpu-1", with_version(ann.fence_patch(node, ann.IDENTITY, PLAN_ID, AT)))
    assert client.intended_changes() == [
        f"taint node/gpu-1 {FENCE}={PLAN_ID}:NoSchedule + annotate node/gpu-1 compactor.io/cordoned-by=gpu-compactor "
        f"compactor.io/plan-id={PLAN_ID} compactor.io/cordoned-at={AT}"
    ]


def test_a_release_removes_only_the_fence_and_the_marks_the_node_carries_as_kubectl_annotate_removes() -> None:
    other = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    node = gpu_node(fenced=True, taints=[other])
    client = RecordingClient([node])
    release = ann.release_patch(node, ann.IDENTITY, RESERVED)
    assert release is not None
    client.patch_node("gpu-1", with_version(release))
    assert last_line(client) == (
        f"taint node/gpu-1 {FENCE}:NoSchedule- + "
        "annotate node/gpu-1 compactor.io/cordoned-by- compactor.io/plan-id- compactor.io/cordoned-at-"
    )
    # without the node as it was, every removal the patch asks for is said
    alone = describe_node_patch("gpu-1", release)
    assert alone.startswith(
        "taint node/gpu-1 (taints replaced by: nvidia.com/gpu=present:NoSchedule) + "
        "annotate node/gpu-1 compactor.io/cordoned-by- "
    )
    assert describe_node_patch("gpu-1", {"spec": {"taints": None}}) == "taint node/gpu-1 (all taints removed)"
    assert all(f"{key}-" in alone for key in ann.OUR_ANNOTATIONS)


def test_taints_read_as_kubectl_taint_adds_and_removes_them() -> None:
    other = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    client = RecordingClient([gpu_node(fenced=True, taints=[other])])
    reservation = {"key": RESERVED, "value": "llm.llama-70b-0", "effect": "NoSchedule"}
    client.patch_node(
        "gpu-1",
        with_version(
            {
                "metadata": {"annotations": {ann.AFTER_DRAIN: "taint", ann.RESERVED_FOR: "llm/llama-70b-0"}},
                "spec": {"taints": [other, reservation]},
            }
        ),
    )
    assert last_line(client) == (
        f"taint node/gpu-1 {RESERVED}=llm.llama-70b-0:NoSchedule "
        f"{FENCE}:NoSchedule- + annotate node/gpu-1 compactor.io/after-drain=taint "
        "compactor.io/reserved-for=llm/llama-70b-0"
    )
    client.patch_node("gpu-1", {"spec": {"taints": [other]}})  # the reservation lifted, a value-less taint added
    assert last_line(client) == f"taint node/gpu-1 {RESERVED}:NoSchedule-"
    client.patch_node("gpu-1", {"spec": {"taints": [other, {"key": "maintenance", "effect": "NoExecute"}]}})
    assert last_line(client) == "taint node/gpu-1 maintenance:NoExecute"
    client.patch_node("gpu-1", {"spec": {"taints": None}})
    assert last_line(client) == "taint node/gpu-1 nvidia.com/gpu:NoSchedule- maintenance:NoExecute-"


def test_a_mig_recut_reads_as_kubectl_label_with_its_annotation_quoted_for_a_shell() -> None:
    client = RecordingClient([gpu_node(fenced=True, labels={mig.CONFIG_LABEL: "all-disabled"})])
    client.patch_node("gpu-1", with_version(mig.relabel_patch("all-1g.5gb", {"nvidia.com/mig-1g.5gb": 56})))
    assert last_line(client) == (
        "label node/gpu-1 nvidia.com/mig.config=all-1g.5gb + "
        """annotate node/gpu-1 compactor.io/mig-expected='{"nvidia.com/mig-1g.5gb":56}'"""
    )
    client.patch_node("gpu-1", {"metadata": {"labels": {mig.CONFIG_LABEL: None, "absent": None}}})
    assert last_line(client) == "label node/gpu-1 nvidia.com/mig.config-"
    failed = describe_node_patch("gpu-1", mig.failed_patch("mig-manager reports failed"))
    assert (
        failed
        == "annotate node/gpu-1 compactor.io/after-drain=keepCordoned compactor.io/mig-recut-failed='mig-manager reports failed'"
    )


def test_a_patch_that_changes_nothing_says_so() -> None:
    assert describe_node_patch("gpu-1", {"metadata": {"resourceVersion": "7"}}) == "patch node/gpu-1 (no change)"


# ----- evictions, events, the state ConfigMap --------------------------------------------


def test_an_eviction_reads_as_the_policy_v1_eviction_it_posts() -> None:
    client = RecordingClient([gpu_node(), a_pod()])
    assert client.evict("nlp", "bert-0", uid="u-1").outcome == EvictionOutcome.EVICTED
    assert last_line(client) == "evict pod/nlp/bert-0 (policy/v1 Eviction)"
    # already gone in the dry world: the answer is said
    assert client.evict("nlp", "bert-0").outcome == EvictionOutcome.GONE
    assert last_line(client) == "evict pod/nlp/bert-0 (policy/v1 Eviction) -> gone (404): not found"


class Admission:
    """Stands in for the API server asked with dryRun=All."""

    def __init__(self, answer: EvictionResult) -> None:
        self.answer = answer

    def evict(
        self, namespace: str, name: str, *, uid: str = "", resource_version: str = "", dry_run: bool = False
    ) -> EvictionResult:
        assert dry_run
        return self.answer


def test_a_server_dry_run_eviction_says_what_the_api_server_answered() -> None:
    refused = EvictionResult(
        EvictionOutcome.BLOCKED, 429, "Cannot evict pod as it would violate the pod's disruption budget."
    )
    client = RecordingClient([gpu_node(), a_pod()], admission=Admission(refused))  # type: ignore[arg-type]
    client.evict("nlp", "bert-0")
    assert last_line(client) == (
        "evict pod/nlp/bert-0 (policy/v1 Eviction) -> blocked (429): "
        "Cannot evict pod as it would violate the pod's disruption budget."
    )
    client = RecordingClient([gpu_node(), a_pod()], admission=Admission(EvictionResult(EvictionOutcome.EVICTED, 201)))  # type: ignore[arg-type]
    client.evict("nlp", "bert-0")
    assert last_line(client) == "evict pod/nlp/bert-0 (policy/v1 Eviction): admitted by the API server (dryRun=All)"


def test_events_read_type_reason_object_and_message() -> None:
    client = RecordingClient([gpu_node(), a_pod()])
    client.create_event(
        ObjectRef("Node", "gpu-1"), reason="CompactorCordon", message=f"fenced by gpu-compactor for plan {PLAN_ID}"
    )
    client.create_event(
        ObjectRef("Pod", "bert-0", "nlp"), reason="CompactorAbort", message="plan aborted", type_="Warning"
    )
    assert client.intended_changes() == [
        f"event Normal CompactorCordon node/gpu-1: fenced by gpu-compactor for plan {PLAN_ID}",
        "event Warning CompactorAbort pod/nlp/bert-0: plan aborted",
    ]


def test_the_state_configmap_reads_as_create_replace_delete_in_its_namespace() -> None:
    client = RecordingClient([gpu_node()], namespace="ops")
    client.write_state(ann.STATE_CONFIGMAP, {"planId": PLAN_ID, "phase": "cordoning"})
    client.write_state(ann.STATE_CONFIGMAP, {"planId": PLAN_ID, "phase": "evicting"})
    client.write_state(ann.STATE_CONFIGMAP, None)
    assert client.intended_changes() == [
        f"create configmap/ops/{ann.STATE_CONFIGMAP} (executor state, phase cordoning)",
        f"replace configmap/ops/{ann.STATE_CONFIGMAP} (executor state, phase evicting)",
        f"delete configmap/ops/{ann.STATE_CONFIGMAP} (executor state)",
    ]
    assert RecordingClient([]).namespace == "gpu-compactor"  # the executor's default state namespace


def test_intended_calls_are_json_with_the_merge_patch_but_not_its_precondition() -> None:
    client = RecordingClient([gpu_node(), a_pod()])
    fence = ann.fence_patch(gpu_node(), ann.IDENTITY, PLAN_ID, AT)
    client.patch_node("gpu-1", with_version(fence))
    client.evict("nlp", "bert-0")
    client.create_event(ObjectRef("Node", "gpu-1"), reason="CompactorCordon", message="m")
    client.write_state(ann.STATE_CONFIGMAP, {"phase": "cordoning"})
    calls = json.loads(json.dumps(client.intended_calls()))
    assert calls == [
        {"call": "patch", "object": "node/gpu-1", "mergePatch": fence},
        {"call": "evict", "object": "pod/nlp/bert-0", "answer": {"outcome": "evicted", "status": 201, "message": ""}},
        {
            "call": "create",
            "object": "event",
            "involvedObject": "node/gpu-1",
            "type": "Normal",
            "reason": "CompactorCordon",
            "message": "m",
        },
        {"call": "create", "object": f"configmap/gpu-compactor/{ann.STATE_CONFIGMAP}", "phase": "cordoning"},
    ]


def test_no_line_of_any_kind_carries_a_python_repr() -> None:
    node = gpu_node(fenced=True)
    client = RecordingClient([node, a_pod()])
    client.patch_node("gpu-1", with_version(ann.release_patch(node, ann.IDENTITY, RESERVED) or {}))
    client.patch_node(
        "gpu-1", with_version(ann.fence_patch(gpu_node(), ann.IDENTITY, PLAN_ID, AT, held_for="nlp/bert-0"))
    )
    client.evict("nlp", "bert-0")
    client.create_event(ObjectRef("Node", "gpu-1"), reason="R", message="m")
    client.write_state(ann.STATE_CONFIGMAP, None)
    for call in client.calls:
        line = describe(call)
        assert (
            "None" not in line and "{'" not in line and "//" not in line and "True" not in line and "42" not in line
        ), line


# ----- the outcome block ------------------------------------------------------------------


def test_a_dry_runs_outcome_is_labelled_simulated_a_real_runs_measured() -> None:
    simulated = _outcome_text(Outcome(8, 8, freed_nodes=["gpu-2"], simulated=True))
    assert simulated.startswith(
        "simulated (not measured): +8 whole-free GPUs (plan: +8); nodes freed: gpu-2\nsimulated: pending pods"
    )
    assert "measured:" not in simulated.replace("(not measured):", "")
    assert _outcome_text(Outcome(8, 8, freed_nodes=["gpu-2"])).startswith("measured: +8 whole-free GPUs")
    assert Outcome(8, 0, simulated=True).summary().startswith("simulated: the cluster would gain 0 whole-free GPU(s)")
    assert Outcome(8, 0, simulated=True).to_dict()["simulated"] is True


# ----- compactor apply --dry-run, as a user runs it ------------------------------------


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("plan") / "plan.json"
    assert main(["plan", "--example", "--output", "json", "--write", str(path), "--time-limit", "5"]) == 0
    return path


def test_apply_dry_run_reads_like_kubectl_and_says_what_it_cannot_know(
    plan_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    plan = json.loads(plan_file.read_text(encoding="utf-8"))
    # -v: every call, one line each
    assert main(["apply", "--plan", str(plan_file), "--example", "--dry-run", "-v"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    calls = [line for line in lines if line.startswith("(dry run) ")]
    summary = lines[len(calls) :]
    assert calls and lines[: len(calls)] == calls  # every intended call first, one line each, then the summary
    # fenced
    assert any(line.startswith("(dry run) taint node/") and ":NoSchedule + annotate" in line for line in calls)
    # released
    assert any(line.startswith("(dry run) taint node/") and ":NoSchedule- + annotate" in line for line in calls)
    assert not any(" cordon node/" in line or "uncordon" in line for line in calls)
    assert [line for line in calls if line.startswith("(dry run) evict ")] == [
        f"(dry run) evict pod/{m['pod']} (policy/v1 Eviction)" for m in plan["moves"]
    ]
    assert any(line.startswith("(dry run) event Normal CompactorCordon node/") for line in calls)
    assert any(line.startswith("(dry run) create configmap/gpu-compactor/") for line in calls)
    for text in ("None", "{'", "//", "succeeded", "resourceVersion"):
        assert text not in out, text
    assert (
        summary[0]
        == f"plan {plan['metadata']['id']}: dry run; {len(plan['moves'])}/{len(plan['moves'])} moves simulated"
    )
    assert any(line.startswith("simulated (not measured): +16 whole-free GPUs") for line in summary)
    assert not any(line.startswith("measured:") for line in summary)
    assert summary[-2] == f"dry run: {len(calls)} call(s) shown above; nothing was changed"
    assert summary[-1] == f"not known until a real run: {'; '.join(NOT_KNOWN_UNTIL_REAL_RUN)}"
    assert "where kube-scheduler binds each replacement" in summary[-1] and "--server-dry-run" in summary[-1]
    # stderr: intentions, never a claim that something happened
    assert "evicted pod=" not in err and "] evicting " not in err and "] moved " not in err and "succeeded" not in err
    assert f"would evict (dry run) pod={plan['moves'][0]['pod']} node={plan['moves'][0]['from']}" in err
    assert f"would move {plan['moves'][0]['pod']}" in err


def test_apply_dry_run_json_is_honest_too(plan_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["apply", "--plan", str(plan_file), "--example", "--dry-run", "--output", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["status"] == "dry-run" and report["dryRun"] is True and report["outcome"]["simulated"] is True
    assert len(report["intendedChanges"]) == len(report["intendedCalls"])
    assert report["notKnownUntilRealRun"] == list(NOT_KNOWN_UNTIL_REAL_RUN)
    assert not any("None" in line or "//" in line for line in report["intendedChanges"])


def test_a_dry_run_the_executor_aborts_says_so_and_exits_non_zero(
    plan_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = json.loads(plan_file.read_text(encoding="utf-8"))
    plan["freedNodes"] = ["no-such-node", *plan["freedNodes"]]  # validation against the snapshot refuses it
    stale = tmp_path / "stale.json"
    stale.write_text(json.dumps(plan), encoding="utf-8")
    capsys.readouterr()
    assert main(["apply", "--plan", str(stale), "--example", "--dry-run", "-v"]) == 1
    out = capsys.readouterr().out
    assert f"plan {plan['metadata']['id']}: dry run failed; 0/{len(plan['moves'])} moves simulated" in out
    assert "reason: plan is stale: node no-such-node no longer exists" in out
    assert "(dry run) event Warning CompactorAbort node/no-such-node: " in out
    assert "(dry run) evict " not in out and "succeeded" not in out and "None" not in out
    assert main(["apply", "--plan", str(stale), "--example", "--dry-run", "--output", "json"]) == 1
    assert json.loads(capsys.readouterr().out)["status"] == "failed"


def test_a_dry_runs_progress_says_intentions() -> None:
    from compactor.actions.run.context import intention

    assert intention("evicting nlp/bert-0 from gpu-1") == "would evict nlp/bert-0 from gpu-1"
    assert intention("moved nlp/bert-0") == "would move nlp/bert-0"
    assert intention("placing pending llm/llama-0") == "would place pending llm/llama-0"
    assert intention("re-cutting gpu-2") == "would re-cut gpu-2"
    assert intention("finishing") == "would finish"
    assert intention("done") == "done"  # the progress display ends its line on it
    assert intention("something new") == "(dry run) something new"


def test_without_v_a_dry_run_sums_up_its_calls_by_kind_and_prints_each_eviction_once(
    plan_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    moves = len(json.loads(plan_file.read_text(encoding="utf-8"))["moves"])
    assert main(["apply", "--plan", str(plan_file), "--example", "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert "(dry run) " not in out  # no call listed one by one
    head = out.splitlines()[0]
    total = int(head.removeprefix("a real run would make ").split(" ")[0])
    counts = {line[9:]: int(line[:7]) for line in out.splitlines()[1:] if line[:7].strip().isdigit()}
    assert head == f"a real run would make {total} call(s) (-v lists each, -o json gives them all):"
    assert sum(counts.values()) == total and counts["evictions (policy/v1 Eviction)"] == moves
    assert counts["state ConfigMap writes (the executor's bookkeeping)"] > 0
    assert f"dry run: {total} call(s) summed up above; nothing was changed" in out
    assert sum(line.startswith("info: would evict") for line in err.splitlines()) == moves
    # once each: the log line, no progress line too
    assert not any("] would evict" in line for line in err.splitlines())

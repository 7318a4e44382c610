"""A new user's first hour (issue [9]): input that is not a cluster fails loudly, one GPU vocabulary, plans that say why.

Each test runs the command as a user would (a subprocess) and checks the exit code and what it prints.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from compactor.app.sources import example_path
from tests.command_line import compactor, one_line_error

EXAMPLE = json.loads(Path(example_path()).read_text(encoding="utf-8"))


def write_list(path: Path, items: list[dict[str, Any]]) -> str:
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}), encoding="utf-8")
    return str(path)


def of_kind(*kinds: str) -> list[dict[str, Any]]:
    return [item for item in EXAMPLE["items"] if item["kind"] in kinds]


# ------------------------------------------------------------------ no silent success on input that is not a cluster


def test_an_empty_file_an_empty_list_and_empty_stdin_are_errors_naming_what_was_read(tmp_path: Path) -> None:
    empty = tmp_path / "e.json"
    empty.write_text("", encoding="utf-8")
    line = one_line_error(compactor("report", "--snapshot", str(empty)))
    assert (
        line.startswith(f"compactor: error: {empty}: no Node objects: read no Kubernetes objects")
        and "--allow-empty" in line
    )
    line = one_line_error(compactor("report", "--snapshot", write_list(tmp_path / "l.json", [])))
    assert "l.json: no Node objects: read no Kubernetes objects" in line
    # `kubectl get ... | compactor` after kubectl failed
    line = one_line_error(compactor("plan", "--snapshot", "-", stdin=""))
    assert "<stdin>: no Node objects" in line
    services = write_list(
        tmp_path / "s.json", [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "d"}}]
    )
    assert "no Node objects: read 1 Service(s) the model does not use;" in one_line_error(
        compactor("report", "--snapshot", services)
    )


def test_a_pods_only_file_says_what_it_holds_and_allow_empty_accepts_it(tmp_path: Path) -> None:
    pods = write_list(tmp_path / "pods.json", of_kind("Pod", "PodDisruptionBudget"))
    line = one_line_error(compactor("report", "--snapshot", pods))
    assert "no Node objects: read 72 Pod(s), 4 PodDisruptionBudget(s);" in line
    accepted = compactor("report", "--snapshot", pods, "--allow-empty", "--output", "json")
    assert accepted.returncode == 0, accepted.stderr
    assert json.loads(accepted.stdout)["figures"]["cluster"]["nodeCount"] == 0


def test_the_same_pods_given_twice_is_an_error_naming_the_first_duplicate(tmp_path: Path) -> None:
    nodes = write_list(tmp_path / "nodes.json", of_kind("Node"))
    pods = write_list(tmp_path / "pods.json", of_kind("Pod"))
    first_pod = of_kind("Pod")[0]["metadata"]
    line = one_line_error(compactor("report", "--snapshot", nodes, pods, pods))
    assert line == (
        f"compactor: error: {pods}: Pod {first_pod['namespace']}/{first_pod['name']}: metadata.name: "
        f"duplicate object (already read from {pods}): give each object once"
    )


def test_two_objects_with_one_uid_are_an_error(tmp_path: Path) -> None:
    items = of_kind("Node", "Pod")
    twin = json.loads(json.dumps(of_kind("Pod")[0]))
    twin["metadata"]["name"] += "-copy"
    line = one_line_error(compactor("report", "--snapshot", write_list(tmp_path / "c.json", [*items, twin])))
    assert f"metadata.uid: duplicate uid {twin['metadata']['uid']}" in line


def test_pods_on_nodes_missing_from_the_snapshot_are_said_first_and_the_plan_frees_no_node(tmp_path: Path) -> None:
    items = [i for i in of_kind("Node", "Pod", "PodDisruptionBudget") if i["metadata"]["name"] != "cpu-03"]
    partial = write_list(tmp_path / "partial.json", items)
    report = compactor("report", "--snapshot", partial)
    assert report.returncode == 0, report.stderr
    assert report.stdout.index("bound to nodes not in the snapshot") < report.stdout.index("\nCluster\n")
    text = compactor("plan", "--snapshot", partial, "--objective", "max-free", "--time-limit", "5").stdout
    assert text.startswith("warning: ") and "bound to nodes not in the snapshot" in text.splitlines()[0]
    assert "warning: freeing no node: the snapshot is not one consistent read" in text
    plan = json.loads(
        compactor(
            "plan", "--snapshot", partial, "--objective", "max-free", "--output", "json", "--time-limit", "5"
        ).stdout
    )
    assert plan["freedNodes"] == [] and plan["freedGpus"] <= 0 and len(plan["warnings"]) == 2
    complete = json.loads(
        compactor("plan", "--example", "--objective", "max-free", "--output", "json", "--time-limit", "5").stdout
    )
    assert complete["freedNodes"] and complete["warnings"] == []  # the control: the full snapshot frees nodes


def test_an_environment_variable_naming_no_setting_is_an_error_with_the_closest_key() -> None:
    line = one_line_error(compactor("plan", "--example", env={"COMPACTOR_PLANER__MAX_MOVES": "2"}))
    assert line == (
        "compactor: error: environment: COMPACTOR_PLANER__MAX_MOVES names no setting; "
        "did you mean COMPACTOR_CAPS__MAX_MOVES?"
    )
    assert "COMPACTOR_<GROUP>__<FIELD>" in one_line_error(
        compactor("report", "--example", env={"COMPACTOR_NOTHING": "1"})
    )
    honoured = compactor("plan", "--example", "--output", "json", env={"COMPACTOR_CAPS__MAX_MOVES": "1"})
    assert honoured.returncode == 0 and len(json.loads(honoured.stdout)["moves"]) <= 1


def test_unknown_resources_and_fractional_extended_resources_are_refused_as_shapes() -> None:
    assert "unknown resource 'gpu'" in one_line_error(compactor("report", "--example", "--shape", "gpu=1"))
    line = one_line_error(compactor("report", "--example", "--shape", "nvidia.com/gpu=0.5"))
    assert "nvidia.com/gpu=0.5: an extended resource is requested in whole units" in line
    # A resource no node offers measures nothing: a typo (nvidia.com/gpuu) must not pass as a shape (issue 14).
    line = one_line_error(compactor("report", "--example", "--shape", "example.com/fpga=1"))
    assert "metrics.reference_shapes 'example.com/fpga=1': no node offers example.com/fpga" in line
    cpu_only = compactor("report", "--example", "--shape", "cpu=8")
    assert cpu_only.returncode == 0
    assert "no configured reference shape requests a GPU" in cpu_only.stdout and "no GPU pods" not in cpu_only.stdout


def test_server_dry_run_without_a_live_cluster_is_refused(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    assert compactor("plan", "--example", "--write", str(plan), "--time-limit", "5").returncode == 0
    line = one_line_error(compactor("apply", "--plan", str(plan), "--example", "--dry-run", "--server-dry-run"))
    assert "--server-dry-run asks a live API server" in line
    assert "--server-dry-run asks" in one_line_error(
        compactor("run", "--once", "--example", "--dry-run", "--server-dry-run")
    )


def test_a_plan_file_holding_a_number_as_a_string_is_refused_as_its_schema_says(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    assert compactor("plan", "--example", "--write", str(plan), "--time-limit", "5").returncode == 0
    document = json.loads(plan.read_text(encoding="utf-8"))
    assert compactor("apply", "--plan", str(plan), "--example", "--dry-run").returncode == 0  # as written: accepted
    document["freedGpus"] = str(document["freedGpus"])  # a hand edit: "8", where the schema says integer
    plan.write_text(json.dumps(document), encoding="utf-8")
    line = one_line_error(compactor("apply", "--plan", str(plan), "--example", "--dry-run"))
    assert line.startswith(f"compactor: error: {plan}: CompactionPlan {document['metadata']['id']}: freedGpus: "), line
    assert "valid integer" in line


# ------------------------------------------------------------------ one vocabulary for GPUs


def test_the_report_names_physical_gpus_and_gpu_equivalents_apart() -> None:
    text = compactor("report", "--example").stdout
    assert "GPUs (physical)                     56 devices on 7 nodes" in text
    assert "GPU capacity (GPU-equivalents)      54 allocatable" in text
    assert not re.search(r"\d GPUs\b(?! \(physical)", text)  # every GPU count says its unit
    figures = json.loads(compactor("report", "--example", "--output", "json").stdout)["figures"]["cluster"]
    assert (figures["physicalGpus"], figures["allocatableGpuEquivalents"]) == (56, 54.0)
    assert not {
        key for key in figures if key.endswith("Gpus") and not key.endswith("PhysicalGpus") and key != "physicalGpus"
    }


def test_the_plan_says_physical_gpus_and_gpu_equivalents_and_tracks_free_capacity_move_by_move() -> None:
    text = compactor("plan", "--example", "--objective", "max-free", "--time-limit", "5").stdout
    assert "frees 3 node(s): net 24 whole-free GPU(s) (physical)" in text
    assert re.search(r"whole-free GPUs \(physical\) +0 +24\n", text)
    assert re.search(r"whole-free GPU capacity \(GPU-equivalents\) +0\.00 +22\.00\n", text)
    onto_gpu_01 = re.findall(
        r"-> a100-gpu-01 +\(1 move; already runs GPU pods, ([\d.]+) GPU-equivalents free before this move\)", text
    )
    assert [float(f) for f in onto_gpu_01] == [5.0, 4.0, 3.0]  # each move finds the capacity the earlier ones left


# ------------------------------------------------------------------ plans that say why not


def test_max_moves_zero_says_moves_are_capped_and_why_the_pending_pod_waits() -> None:
    text = compactor("plan", "--example", "--max-moves", "0").stdout
    assert "note: moves capped at 0 (--max-moves / caps.max_moves)" in text
    assert "found no move that frees usable GPU capacity" not in text
    assert "llm/llama-70b-0: room could be made on a100-gpu-01" in text and "but moves are capped at 0" in text


# ------------------------------------------------------------------ help that explains


def test_each_command_help_has_a_description_and_two_examples_that_parse() -> None:
    import shlex

    from compactor.cli import COMMAND_HELP, build_parser

    parser = build_parser()
    assert set(COMMAND_HELP) == {"report", "plan", "apply", "run", "controller", "config", "breaker"}
    for name, (description, examples) in COMMAND_HELP.items():
        shown = compactor(name, "--help").stdout
        assert description.split(":")[0] in " ".join(shown.split()), name
        assert shown.rstrip().endswith(examples[-1]) and len(examples) == 2
        for example in examples:
            words = shlex.split(example.split("| ")[-1])
            assert words[:2] == ["compactor", name]
            assert parser.parse_args(words[1:]).handler is not None  # every flag in the example exists


def test_run_without_once_explains_itself() -> None:
    line = one_line_error(compactor("run", "--example"))
    assert "needs --once" in line and "compactor controller --interval SECONDS" in line


# ------------------------------------------------------------------ plans that do not match the cluster (issue 14, item 3)


def _example_plan(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    plan = tmp_path / "plan.json"
    assert compactor("plan", "--example", "--write", str(plan), "--time-limit", "5").returncode == 0
    return plan, json.loads(plan.read_text(encoding="utf-8"))


def test_a_plan_made_for_another_cluster_says_so_and_changes_nothing(tmp_path: Path) -> None:
    plan, document = _example_plan(tmp_path)
    other = write_list(
        tmp_path / "other.json",
        [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": "elsewhere-1", "uid": "n-1"},
                "status": {
                    "allocatable": {"cpu": "8", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "8"},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        ],
    )
    result = compactor("apply", "--plan", str(plan), "--snapshot", other, "--dry-run", "--allow-empty")
    out = result.stdout + result.stderr
    assert result.returncode != 0
    assert (
        f"plan {document['metadata']['id']} was made for another cluster (example cluster): none of its 5 node(s) exist here "
        "(a100-gpu-01, a100-gpu-02, a100-gpu-03, ...)"
    ) in out
    assert "stale" not in out
    assert "cordon" not in out.lower() and "taint" not in out.lower()  # nothing fenced before it said so


def test_a_hand_edited_move_is_named_as_not_matching_the_cluster_before_anything_is_fenced(tmp_path: Path) -> None:
    plan, document = _example_plan(tmp_path)
    move = next(m for m in document["moves"] if m["from"] in document["freedNodes"])
    others = sorted({m["to"] for m in document["moves"]} - {move["from"]})
    move["from"] = others[0]  # the pod stays where it is; the plan now says it leaves another node
    plan.write_text(json.dumps(document), encoding="utf-8")
    result = compactor("apply", "--plan", str(plan), "--example", "--dry-run")
    out = result.stdout + result.stderr
    assert result.returncode != 0
    assert f"(the plan moves {move['pod']} from {others[0]}: the plan does not match the cluster)" in out
    assert "patch node" not in out and "taint" not in out.lower()


def test_a_selection_that_keeps_every_gpu_pod_in_place_is_refused_naming_the_setting() -> None:
    line = one_line_error(compactor("plan", "--example", env={"COMPACTOR_MOVABLE__NAMESPACES": '["lmm"]'}))
    assert line == (
        "compactor: error: the planner's selection (movable.namespaces ['lmm']) keeps all 39 GPU pod(s) in place, so no "
        "plan could move one; GPU pods run in namespace(s) llm, nlp, vision"
    )
    line = one_line_error(compactor("plan", "--example", env={"COMPACTOR_MOVABLE__POD_SELECTOR": '{"tier": "batch"}'}))
    assert "movable.pod_selector {'tier': 'batch'}" in line
    # a selection that keeps some GPU pods movable is a choice, not a mistake
    assert (
        compactor("plan", "--example", "--time-limit", "5", env={"COMPACTOR_MOVABLE__NAMESPACES": '["llm"]'}).returncode
        == 0
    )


# ------------------------------------------------------------------ the mode: a first install that cannot hurt (issue 14, item 4)


def test_report_mode_measures_only_and_plan_mode_dry_runs(tmp_path: Path) -> None:
    report = compactor("run", "--once", "--example", env={"COMPACTOR_MODE": "report"})
    assert report.returncode == 0, report.stderr
    assert report.stdout.startswith("GPU fragmentation report: example cluster")
    assert "mode: report: measured only" in report.stderr and "evict" not in report.stdout + report.stderr
    planned = compactor(
        "run", "--once", "--example", env={"COMPACTOR_MODE": "plan", "COMPACTOR_SOLVER__TIME_LIMIT_SECONDS": "5"}
    )
    assert planned.returncode == 0, planned.stderr
    assert "mode: plan: a dry run, nothing is changed" in planned.stderr
    assert "dry run:" in planned.stdout and "nothing was changed" in planned.stdout


def test_apply_refuses_to_act_outside_apply_mode_and_a_dry_run_stays_allowed(tmp_path: Path) -> None:
    plan, _ = _example_plan(tmp_path)
    line = one_line_error(compactor("apply", "--plan", str(plan), "--context", "prod", env={"COMPACTOR_MODE": "plan"}))
    assert line == (
        "compactor: error: mode is 'plan' (config or COMPACTOR_MODE): this installation does not act; add --dry-run to see "
        "what the plan would do, or set mode: apply"
    )
    assert (
        compactor("apply", "--plan", str(plan), "--example", "--dry-run", env={"COMPACTOR_MODE": "report"}).returncode
        == 0
    )


# ------------------------------------------------------------------ output people read (issue 14, item 5)


def test_a_directory_as_config_is_one_line_naming_it(tmp_path: Path) -> None:
    assert one_line_error(compactor("plan", "--example", "--config", str(tmp_path))) == (
        f"compactor: error: {tmp_path}: cannot read: [Errno 21] Is a directory: '{tmp_path}'"
    )


def test_log_format_json_puts_only_json_on_stderr(tmp_path: Path) -> None:
    plan, _ = _example_plan(tmp_path)
    quick = {"COMPACTOR_SOLVER__TIME_LIMIT_SECONDS": "5"}
    for args in (
        ("plan", "--example"),
        ("apply", "--plan", str(plan), "--example", "--dry-run"),
        ("run", "--once", "--example", "--dry-run"),
        ("run", "--once", "--example"),
    ):
        result = compactor(*args, "--log-format", "json", "-v", env={**quick, "COMPACTOR_MODE": "plan"})
        assert result.returncode == 0, (args, result.stderr)
        records = [json.loads(line) for line in result.stderr.splitlines()]  # every line one JSON object, or this fails
        assert records or args[0] == "plan", args
    run = compactor("run", "--once", "--example", "--log-format", "json", "-v", env={**quick, "COMPACTOR_MODE": "plan"})
    assert any(json.loads(line)["msg"].startswith("mode: plan: a dry run") for line in run.stderr.splitlines())


def test_a_long_list_of_nodes_ends_with_a_count_instead_of_running_on(tmp_path: Path) -> None:
    from compactor.planner.plan import load_plan
    from compactor.render.plan import render_plan

    plan, _ = _example_plan(tmp_path)
    many = load_plan(str(plan)).model_copy(update={"freed_nodes": [f"gpu-{i:05d}" for i in range(130)]})
    line = next(line for line in render_plan(many, "text").splitlines() if line.startswith("Nodes freed: "))
    assert line.endswith(", gpu-00009, ... and 120 more (-o json lists all)") and len(line) < 200


def test_kubeconfig_alone_names_the_cluster_as_it_does_for_kubectl(fake_api: Any, tmp_path: Path) -> None:
    """Issue 45, item 1: ``KUBECONFIG=... compactor report`` said "no input"; kubectl users expect it to be read. Now it is,
    said on stderr; an input named on the command line still wins over it, never "choose one input"."""
    from tests.builders import node, pod

    fake_api.add(node("gpu-1", gpus=8), pod("train", on="gpu-1", gpus=2, owner="ReplicaSet/train"))
    kubeconfig = str(fake_api.write_kubeconfig(tmp_path / "kubeconfig"))
    live = compactor("report", "--output", "json", env={"KUBECONFIG": kubeconfig})
    assert live.returncode == 0, live.stderr
    report = json.loads(live.stdout)
    assert report["figures"]["cluster"]["allocatable"]["nvidia.com/gpu"] == 8
    assert report["metadata"]["source"] != "example cluster"
    assert f"reading the cluster of $KUBECONFIG ({kubeconfig}" in live.stderr
    example = compactor("report", "--example", "--output", "json", env={"KUBECONFIG": kubeconfig})
    assert example.returncode == 0 and "$KUBECONFIG" not in example.stderr, example.stderr
    unset = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    nothing = subprocess.run(
        [sys.executable, "-m", "compactor.cli", "report"], capture_output=True, text=True, env=unset, timeout=60
    )
    assert nothing.returncode == 2 and "(or set $KUBECONFIG)" in nothing.stderr


def _gpu_node(name: str, gpus: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels},
        "status": {
            "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": gpus},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def test_input_that_is_almost_certainly_wrong_is_said(tmp_path: Path) -> None:
    """Issue 45, item 9: nodes without a single pod, 100,000 GPUs on one node, GFD's count below the allocatable and a
    GPU node without its pool label all passed without a word. Each is a warning now; the report still runs."""
    product = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    nodes_only = write_list(
        tmp_path / "nodes.json",
        [
            _gpu_node("huge", "100000", **product),
            _gpu_node("miscounted", "8", **product, **{"nvidia.com/gpu.count": "4"}),
            _gpu_node("anonymous", "8"),
        ],
    )
    result = compactor("report", "--snapshot", nodes_only, "--output", "json")
    assert result.returncode == 0, result.stderr
    said = "\n".join(json.loads(result.stdout)["metadata"]["warnings"])
    assert "3 node(s) and no pod: every GPU counts as free" in said
    assert "huge: 100000 physical GPUs on one node (no server holds more than 16)" in said
    assert (
        "miscounted: 8 GPUs allocatable (nvidia.com/gpu / 1 replica(s)) but GFD's nvidia.com/gpu.count says 4" in said
    )
    assert "1 GPU node(s) without the nvidia.com/gpu.product label (anonymous)" in said
    example = json.loads(compactor("report", "--example", "--output", "json").stdout)["metadata"]["warnings"]
    assert not [w for w in example if "no pod" in w or "without the" in w], example


def test_report_and_plan_name_a_live_cluster_alike(fake_api: Any, tmp_path: Path) -> None:
    """Issue 45: `report` titled a live cluster by its context's name, `plan` by "current context"."""
    from tests.builders import node

    fake_api.add(node("gpu-1", gpus=8))
    kubeconfig = str(fake_api.write_kubeconfig(tmp_path / "kubeconfig"))
    report = json.loads(compactor("report", "--kubeconfig", kubeconfig, "--output", "json").stdout)
    plan = compactor("plan", "--kubeconfig", kubeconfig, "--time-limit", "2", "--output", "json")
    assert report["metadata"]["source"] == json.loads(plan.stdout)["metadata"]["source"] != "cluster current context"


def test_a_snapshot_dry_run_says_what_the_snapshot_lacks_and_runs_with_it(tmp_path: Path) -> None:
    """Issue 45, item 5: the README's snapshot dry run said "install the steering policy" of a cluster whose snapshot
    simply did not carry it, and simulated nothing. It now says what to add to the kubectl get; with the policy, its
    binding and the steering ConfigMap in the snapshot, the moves are simulated as the cluster would steer them."""
    from tests.builders import node, pdb, pod, steering_policy

    objects = [
        node("gpu-1", gpus=8),
        node("gpu-2", gpus=8),
        pod("pinned", on="gpu-1", gpus=4, owner=None),
        pod("serve-a", on="gpu-2", gpus=1, owner="ReplicaSet/serve", labels={"app": "serve"}),
        pod("serve-b", on="gpu-2", gpus=1, owner="ReplicaSet/serve", labels={"app": "serve"}),
        pdb("serve", match={"app": "serve"}, allowed=1),
    ]
    bare = write_list(tmp_path / "bare.json", objects)
    plan = tmp_path / "plan.json"
    made = compactor("plan", "--snapshot", bare, "--time-limit", "2", "--output", "json", "--write", str(plan))
    assert made.returncode == 0 and json.loads(plan.read_text())["moves"], made.stderr
    without = compactor("apply", "--plan", str(plan), "--snapshot", bare, "--dry-run")
    assert "this snapshot carries no MutatingAdmissionPolicy gpu-compactor-steering" in without.stdout, without.stdout
    assert "install it with" not in without.stdout
    carried = write_list(tmp_path / "carried.json", [*objects, *steering_policy()])
    steered = compactor("apply", "--plan", str(plan), "--snapshot", carried, "--dry-run")
    assert steered.returncode == 0 and "steering: policy" in steered.stdout, steered.stdout + steered.stderr
    assert "2/2 moves simulated" in steered.stdout


def test_a_plan_without_config_says_in_one_line_that_the_defaults_are_not_the_shipped_config() -> None:
    """Issue 45, item 10: the bare CLI's defaults are not the shipped config's; a command that does not act says how
    many settings differ and where they are named (a run that acts lists them: test_cleanup_first), after its output,
    so an error stays one line; with the shipped config, or a difference set through the environment, it says less."""
    planned = compactor("plan", "--example")
    assert planned.returncode == 0
    assert planned.stderr.splitlines()[-1] == (
        "info: no --config: the built-in defaults, which differ from the shipped config in 13 setting(s) "
        "(`compactor config validate manifests/base/config.yaml` names them)"
    )
    closer = compactor("plan", "--example", env={"COMPACTOR_MODE": "plan"})
    assert "in 12 setting(s)" in closer.stderr, closer.stderr
    shipped = compactor("plan", "--example", "--config", "manifests/base/config.yaml")
    assert shipped.returncode == 0 and "no --config" not in shipped.stderr
    refused = compactor("plan", "--example", "--max-moves", "-1")
    assert one_line_error(refused) == "compactor: error: --max-moves must be >= 0, got -1"


def test_the_packaged_shipped_config_is_the_manifests_config_map_verbatim() -> None:
    import yaml

    from compactor.settings.shipped import SHIPPED_FILE

    manifest = yaml.safe_load(Path("manifests/base/config.yaml").read_text(encoding="utf-8"))
    packaged = (Path("compactor/data") / SHIPPED_FILE).read_text(encoding="utf-8")
    assert manifest["data"]["compactor.yaml"] == packaged


def test_a_plan_fits_the_terminal_it_is_read_in_without_cutting_a_word() -> None:
    """Issue 45, item 8: ``plan`` never wrapped (the example's widest line 222 characters). Now it fits ``$COLUMNS`` (a
    pipe: 100), a move's details continuing under its pod, and says every word the wide plan says."""
    piped = compactor("plan", "--example", "--time-limit", "5", env={"COLUMNS": ""}).stdout  # no terminal: 100
    wide = compactor("plan", "--example", "--time-limit", "5", env={"COLUMNS": "400"}).stdout
    narrow = compactor("plan", "--example", "--time-limit", "5", env={"COLUMNS": "72"}).stdout
    assert max(map(len, wide.splitlines())) > 200
    assert max(map(len, narrow.splitlines())) <= 72
    assert max(map(len, piped.splitlines())) <= 100

    def words(text: str) -> list[str]:  # the timings and the plan's id and date aside: they change from run to run
        return sorted(w for w in text.split() if not re.fullmatch(r"\(?\+?[\d.]+s,?\)?|plan-\w+|\(?\d{4}-\S+", w))

    assert words(narrow) == words(wide)
    first_move = narrow.splitlines().index(next(line for line in narrow.splitlines() if line.startswith("     1. ")))
    continuation = narrow.splitlines()[first_move + 1]
    assert continuation.startswith(" " * 8) and not continuation.startswith(" " * 9)  # under the pod's name

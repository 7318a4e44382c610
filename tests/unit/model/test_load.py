"""Loading snapshots from ``kubectl get ... -o json|yaml`` output, and rejecting bad input in one line.

Covers: a JSON List, an ``-o yaml`` List, multi-document YAML, several files, standard
input via ``-``, typed lists (PodList items without ``kind``), ConfigMaps, unknown kinds
skipped with a warning, pods bound to nodes outside the snapshot (counted, warned,
excluded), which pods use capacity and which are pending demand; and bad input
(malformed JSON/YAML, missing allocatable, invalid or negative quantities, duplicate
nodes, missing files, directories, non-object documents, wrongly shaped sections),
each an ``InputError`` whose message is one line naming the file, object and field.
"""

from __future__ import annotations

import gc
import io
import json
import weakref
from pathlib import Path
from typing import Any

import pytest
import yaml

from compactor.errors import InputError
from compactor.model.load import _decode_typed as decode_typed
from compactor.model.load import build_snapshot, gc_paused, load_files, read_source
from compactor.model.types import Pod
from tests.builders import as_list, cluster, node, pdb, pod

GI = 1 << 30


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def small_cluster() -> list[dict[str, Any]]:
    return [
        node("gpu-1", gpus=8),
        node("cpu-1"),
        pod("train-0", on="gpu-1", gpus=4, namespace="ml"),
        pod("web-0", on="cpu-1"),
        pod("waiting", gpus=1),
        pdb("train", match={"app": "app"}, namespace="ml"),
    ]


def summary(snap: Any) -> tuple[list[str], list[str], list[str]]:
    return sorted(n.name for n in snap.nodes), sorted(p.key for p in snap.pods), sorted(p.key for p in snap.pdbs)


EXPECTED = (["cpu-1", "gpu-1"], ["default/waiting", "default/web-0", "ml/train-0"], ["ml/train"])


def load_error(tmp_path: Path, name: str, text: str) -> InputError:
    path = write(tmp_path, name, text)
    with pytest.raises(InputError) as caught:
        load_files([path])
    message = str(caught.value)
    assert "\n" not in message, message
    assert message.startswith(f"{path}: "), message
    return caught.value


# --- formats ---------------------------------------------------------------------------------------------------


def test_a_json_list_loads_every_object(tmp_path: Path) -> None:
    path = write(tmp_path, "snap.json", json.dumps(as_list(*small_cluster()), indent=2))
    snap = load_files([path])
    assert summary(snap) == EXPECTED
    assert snap.source == path
    assert snap.warnings == ()


def test_a_kubectl_yaml_list_loads_like_the_json_one(tmp_path: Path) -> None:
    path = write(tmp_path, "snap.yaml", yaml.safe_dump(as_list(*small_cluster())))
    assert summary(load_files([path])) == EXPECTED


def test_multi_document_yaml_loads_each_document_and_skips_empty_ones(tmp_path: Path) -> None:
    text = "---\n" + yaml.safe_dump_all(small_cluster()) + "---\n...\n"
    path = write(tmp_path, "snap.yaml", text)
    assert summary(load_files([path])) == EXPECTED


def test_a_top_level_json_array_of_objects_loads(tmp_path: Path) -> None:
    path = write(tmp_path, "snap.json", json.dumps(small_cluster()))
    assert summary(load_files([path])) == EXPECTED


def test_several_files_combine_into_one_snapshot(tmp_path: Path) -> None:
    objects = small_cluster()
    nodes = write(tmp_path, "nodes.json", json.dumps(as_list(*objects[:2])))
    rest = write(tmp_path, "rest.yaml", yaml.safe_dump_all(objects[2:]))
    snap = load_files([nodes, rest])
    assert summary(snap) == EXPECTED
    assert snap.source == f"{nodes}, {rest}"


def test_a_dash_reads_standard_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(as_list(*small_cluster()))))
    assert summary(load_files(["-"])) == EXPECTED


def test_standard_input_can_be_passed_as_text_and_is_named_stdin_in_errors() -> None:
    assert summary(load_files(["-"], stdin_text=yaml.safe_dump(as_list(*small_cluster())))) == EXPECTED
    with pytest.raises(InputError, match=r"^<stdin>: malformed JSON at line 1 column 2"):
        load_files(["-"], stdin_text="{oops")


def test_typed_lists_give_their_items_the_kind(tmp_path: Path) -> None:
    pods = [pod("a", on="n1"), pod("b")]
    nodes = [node("n1")]
    for item in (*pods, *nodes):
        del item["kind"]
    text = json.dumps({"apiVersion": "v1", "kind": "PodList", "items": pods}) + "\n"
    path = write(tmp_path, "pods.json", text)
    more = write(tmp_path, "nodes.yaml", yaml.safe_dump({"apiVersion": "v1", "kind": "NodeList", "items": nodes}))
    snap = load_files([path, more])
    assert sorted(p.key for p in snap.pods) == ["default/a", "default/b"]
    assert [n.name for n in snap.nodes] == ["n1"]
    assert snap.warnings == ()


def test_items_of_a_plain_list_without_a_kind_are_skipped_with_a_warning() -> None:
    item = pod("a")
    del item["kind"]
    snap = build_snapshot(read_source("-", stdin_text=json.dumps(as_list(item))), source="<stdin>")
    assert snap.pods == ()
    assert snap.warnings == ("<stdin>: object without kind: skipped 1 object(s) of a kind the model does not use",)


def test_config_maps_are_kept_with_their_data() -> None:
    config = {
        "kind": "ConfigMap",
        "metadata": {"name": "mig-parted", "namespace": "gpu-operator"},
        "data": {"config.yaml": "version: v1\n"},
    }
    snap = cluster(config)
    (kept,) = snap.config_maps
    assert (kept.namespace, kept.name, kept.data) == ("gpu-operator", "mig-parted", {"config.yaml": "version: v1\n"})


def test_unknown_kinds_are_skipped_with_one_warning_per_kind() -> None:
    service = {"kind": "Service", "metadata": {"name": "s"}}
    objects = [
        node("n1"),
        service,
        dict(service),
        {"kind": "Deployment", "metadata": {"name": "d"}},
        {"metadata": {"name": "x"}},
    ]
    snap = cluster(*objects)
    assert [n.name for n in snap.nodes] == ["n1"]
    assert snap.warnings == (
        "test: Deployment: skipped 1 object(s) of a kind the model does not use",
        "test: Service: skipped 2 object(s) of a kind the model does not use",
        "test: object without kind: skipped 1 object(s) of a kind the model does not use",
    )


def test_pods_bound_to_nodes_outside_the_snapshot_are_counted_warned_and_left_out() -> None:
    snap = cluster(node("n1"), pod("here", on="n1"), pod("lost-1", on="gone"), pod("lost-2", on="gone"), pod("waiting"))
    assert sorted(p.name for p in snap.pods) == ["here", "waiting"]
    assert snap.extra["orphan_pods"] == 2
    assert snap.warnings == (
        "2 pod(s) bound to nodes not in the snapshot, not counted (default/lost-1 -> gone, default/lost-2 -> gone)",
    )


def test_finished_pods_on_unknown_nodes_are_not_orphans() -> None:
    snap = cluster(node("n1"), pod("done", on="gone", phase="Succeeded"))
    assert snap.extra["orphan_pods"] == 0
    assert snap.warnings == ()


# --- pod usage rules -------------------------------------------------------------------------------------------


def loaded_pod(raw: dict[str, Any]) -> Pod:
    (only,) = cluster(node("n1"), raw).pods
    return only


@pytest.mark.parametrize(
    ("raw", "bound", "pending"),
    [
        pytest.param(pod("p", on="n1"), True, False, id="running-on-a-node"),
        pytest.param(pod("p", on="n1", phase="Pending"), True, False, id="bound-but-not-started"),
        pytest.param(pod("p", on="n1", phase="Unknown"), True, False, id="unknown-phase-keeps-its-place"),
        pytest.param(pod("p", on="n1", deleting=True), True, False, id="terminating-still-uses-capacity"),
        pytest.param(pod("p", on="n1", phase="Succeeded"), False, False, id="succeeded-frees-capacity"),
        pytest.param(pod("p", on="n1", phase="Failed"), False, False, id="failed-frees-capacity"),
        pytest.param(pod("p"), False, True, id="unbound-pending-is-demand"),
        pytest.param(pod("p", phase="Failed"), False, False, id="unbound-failed-is-not-demand"),
    ],
)
def test_which_pods_use_capacity_and_which_wait_for_it(raw: dict[str, Any], bound: bool, pending: bool) -> None:
    loaded = loaded_pod(raw)
    assert (loaded.is_bound, loaded.is_pending_demand) == (bound, pending)


def test_a_pod_held_by_a_scheduling_gate_is_not_demand_yet() -> None:
    raw = pod("gated")
    raw["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    loaded = loaded_pod(raw)
    assert loaded.scheduling_gates == ("example.com/quota",)
    assert not loaded.is_pending_demand


def test_snapshot_splits_bound_and_pending_pods() -> None:
    snap = cluster(node("n1"), pod("a", on="n1"), pod("b", on="n1", phase="Succeeded"), pod("c"))
    assert [p.name for p in snap.bound_pods()] == ["a"]
    assert [p.name for p in snap.pending_pods()] == ["c"]


def test_a_pod_without_namespace_lands_in_default_and_a_node_keeps_its_resources() -> None:
    raw = pod("p", on="n1")
    del raw["metadata"]["namespace"]
    snap = cluster(node("n1", cpu="96", memory="1Ti"), raw)
    assert snap.pods[0].key == "default/p"
    assert snap.nodes[0].allocatable["cpu"] == 96000
    assert snap.nodes[0].allocatable["memory"] == 1 << 40


# --- bad input -------------------------------------------------------------------------------------------------


def test_malformed_json_names_the_file_and_position(tmp_path: Path) -> None:
    error = load_error(tmp_path, "bad.json", '{"kind": "List",\n "items": [,]}')
    message = str(error)
    assert "bad.json: malformed JSON at line 2 column 12: " in message
    assert "\n" not in message


def test_malformed_yaml_names_the_file_and_position(tmp_path: Path) -> None:
    error = load_error(tmp_path, "bad.yaml", "kind: List\nitems:\n  - kind: Node\n   metadata: [\n")
    assert "malformed YAML at line 4" in str(error)


def test_a_node_without_allocatable_is_named_with_the_field(tmp_path: Path) -> None:
    raw = node("gpu-1", gpus=8)
    del raw["status"]["allocatable"]
    error = load_error(tmp_path, "snap.json", json.dumps(as_list(raw)))
    assert (error.obj, error.field) == ("Node gpu-1", "status.allocatable")
    assert str(error).startswith(f"{tmp_path / 'snap.json'}: Node gpu-1: status.allocatable: missing")


def test_an_invalid_quantity_names_pod_container_and_resource(tmp_path: Path) -> None:
    error = load_error(
        tmp_path, "snap.yaml", yaml.safe_dump(as_list(node("n1"), pod("train-0", namespace="ml", cpu="2 cores")))
    )
    assert (
        str(error)
        == f"{tmp_path / 'snap.yaml'}: Pod ml/train-0: spec.containers[0].resources.requests.cpu: invalid quantity '2 cores'"
    )


def test_a_negative_quantity_is_rejected_with_its_field(tmp_path: Path) -> None:
    error = load_error(tmp_path, "snap.json", json.dumps(as_list(pod("p", namespace="ml", memory="-1Gi"))))
    assert (error.obj, error.field) == ("Pod ml/p", "spec.containers[0].resources.requests.memory")
    assert "negative quantity" in error.message


def test_an_invalid_node_quantity_names_the_allocatable_field(tmp_path: Path) -> None:
    error = load_error(tmp_path, "snap.json", json.dumps(as_list(node("gpu-1", extra={"nvidia.com/gpu": "eight"}))))
    assert (error.obj, error.field) == ("Node gpu-1", "status.allocatable.nvidia.com/gpu")


def test_duplicate_node_names_are_rejected_naming_the_second_file(tmp_path: Path) -> None:
    first = write(tmp_path, "a.json", json.dumps(as_list(node("gpu-1"))))
    second = write(tmp_path, "b.json", json.dumps(as_list(node("gpu-1"))))
    with pytest.raises(InputError) as caught:
        load_files([first, second])
    assert (
        str(caught.value)
        == f"{second}: Node gpu-1: metadata.name: duplicate object (already read from {first}): give each object once"
    )


def test_a_missing_file_is_an_input_error(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.json")
    with pytest.raises(InputError) as caught:
        load_files([missing])
    assert str(caught.value) == f"{missing}: no such file"


def test_a_directory_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        load_files([str(tmp_path)])
    assert str(caught.value) == f"{tmp_path}: is a directory, expected a file"


def test_a_file_that_is_not_utf8_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "utf16.json"
    path.write_bytes('{"kind": "List"}'.encode("utf-16"))
    with pytest.raises(InputError, match=r"cannot read"):
        load_files([str(path)])


@pytest.mark.parametrize(
    ("text", "where", "what"),
    [
        pytest.param("hello\n", "document 1", "str", id="scalar-document"),
        pytest.param(
            "kind: Node\nmetadata: {name: a}\nstatus: {allocatable: {}}\n---\n42\n",
            "document 2",
            "int",
            id="second-document",
        ),
        pytest.param(
            '{"kind": "List", "items": [{"kind": "ConfigMap", "metadata": {"name": "c"}}, "oops"]}',
            "List items[1]",
            "str",
            id="list-item",
        ),
        pytest.param("[1]", "document 1[0]", "int", id="array-item"),
    ],
)
def test_a_document_that_is_not_an_object_is_named(tmp_path: Path, text: str, where: str, what: str) -> None:
    error = load_error(tmp_path, "snap.yaml", text)
    assert error.obj == where
    assert error.message == f"expected a Kubernetes object or List, got {what}"


def test_list_items_that_are_not_a_list_are_an_input_error(tmp_path: Path) -> None:
    error = load_error(tmp_path, "snap.json", '{"kind": "PodList", "items": {"a": 1}}')
    assert (error.obj, error.field) == ("PodList", "items")


@pytest.mark.parametrize(
    ("mutate", "obj", "field"),
    [
        pytest.param(lambda raw: raw.update(metadata=["x"]), "Pod <unnamed>", "metadata", id="pod-metadata-list"),
        pytest.param(lambda raw: raw.update(spec="x"), "Pod default/p", "spec", id="pod-spec-string"),
        pytest.param(
            lambda raw: raw["spec"].update(containers={"main": {}}),
            "Pod default/p",
            "spec.containers",
            id="containers-map",
        ),
        pytest.param(
            lambda raw: raw["spec"].update(tolerations=["x"]),
            "Pod default/p",
            "spec.tolerations[0]",
            id="toleration-string",
        ),
        pytest.param(
            lambda raw: raw["spec"].update(affinity={"nodeAffinity": ["x"]}),
            "Pod default/p",
            "spec.affinity.nodeAffinity",
            id="node-affinity-list",
        ),
        pytest.param(
            lambda raw: raw["spec"].update(
                affinity={
                    "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": ["x"]}}
                }
            ),
            "Pod default/p",
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]",
            id="term-string",
        ),
        pytest.param(
            lambda raw: raw["spec"].update(priority="high"), "Pod default/p", "spec.priority", id="priority-string"
        ),
        pytest.param(
            lambda raw: raw["metadata"].update(labels=["a"]), "Pod default/p", "metadata.labels", id="labels-list"
        ),
        pytest.param(
            lambda raw: raw["metadata"].update(ownerReferences=["rs"]),
            "Pod default/p",
            "metadata.ownerReferences[0]",
            id="owner-string",
        ),
    ],
)
def test_wrongly_shaped_pod_sections_are_input_errors(tmp_path: Path, mutate: Any, obj: str, field: str) -> None:
    raw = pod("p")
    mutate(raw)
    error = load_error(tmp_path, "snap.json", json.dumps(as_list(raw)))
    assert (error.obj, error.field) == (obj, field)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        pytest.param(lambda raw: raw.update(status=[]), "status", id="status-list"),
        pytest.param(
            lambda raw: raw["spec"].update(taints=["gpu=true:NoSchedule"]), "spec.taints[0]", id="taint-string"
        ),
        pytest.param(
            lambda raw: raw["spec"].update(unschedulable="false"), "spec.unschedulable", id="unschedulable-string"
        ),
        pytest.param(
            lambda raw: raw["status"].update(allocatable=["cpu"]), "status.allocatable", id="allocatable-list"
        ),
    ],
)
def test_wrongly_shaped_node_sections_are_input_errors(tmp_path: Path, mutate: Any, field: str) -> None:
    raw = node("gpu-1")
    mutate(raw)
    error = load_error(tmp_path, "snap.json", json.dumps(as_list(raw)))
    assert (error.obj, error.field) == ("Node gpu-1", field)


def test_an_error_message_stays_on_one_line_even_when_a_name_has_a_line_break() -> None:
    raw = pod("two\nlines", cpu="x")
    with pytest.raises(InputError) as caught:
        cluster(raw)
    assert (
        str(caught.value)
        == "test: Pod default/two\\nlines: spec.containers[0].resources.requests.cpu: invalid quantity 'x'"
    )


def test_loaded_requests_match_what_the_builders_asked_for() -> None:
    snap = cluster(node("n1"), pod("p", on="n1", cpu="500m", memory="2Gi", gpus=1))
    assert snap.pods[0].requests == {"cpu": 500, "memory": 2 * GI, "nvidia.com/gpu": 1, "pods": 1}


# --- one schema, two decoders ----------------------------------------------------------------------------------
# A JSON List is decoded straight into the schema in one pass; YAML, the live API and
# anything the one pass cannot take go object by object from dicts. Both must agree.


def rich_cluster() -> list[dict[str, Any]]:
    sidecar = pod(
        "serve-0",
        on="gpu-1",
        gpus=1,
        namespace="ml",
        priority=100,
        priority_class="high",
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        node_selector={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"},
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a", "b"]}]}
                    ]
                }
            },
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "kubernetes.io/hostname"}]
            },
        },
        volumes=[{"name": "cache", "emptyDir": {}}],
        spread=[{"maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}],
        deleting=True,
    )
    sidecar["spec"]["initContainers"] = [
        {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "250m"}}},
        {"name": "warmup", "resources": {"limits": {"memory": "8Gi"}}},
    ]
    sidecar["spec"]["overhead"] = {"cpu": "100m"}
    sidecar["spec"]["schedulingGates"] = []
    return [
        node("gpu-1", gpus=8, taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]),
        node("mig-1", mig={"3g.20gb": 2, "1g.5gb": 2}),
        node("cpu-1", unschedulable=True, ready=False),
        sidecar,
        pod("train-0", on="mig-1", mig="3g.20gb", namespace="ml"),
        pod("waiting", gpus=8, phase="Pending"),
        pdb("serve", match={"app": "app"}, namespace="ml", min_available="50%"),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "mig-parted", "namespace": "gpu-operator"},
            "data": {"config.yaml": "x"},
        },
    ]


def test_the_one_pass_json_decoder_and_the_dict_path_build_the_same_snapshot(tmp_path: Path) -> None:
    objects = rich_cluster()
    assert decode_typed(json.dumps(as_list(*objects))) is not None  # the fast path is taken, not silently skipped
    typed = load_files([write(tmp_path, "snap.json", json.dumps(as_list(*objects)))])
    from_yaml = load_files([write(tmp_path, "snap.yaml", yaml.safe_dump(as_list(*objects)))])
    from_dicts = build_snapshot(objects, source="dicts")
    for other in (from_yaml, from_dicts):
        assert typed.pods == other.pods
        assert typed.nodes == other.nodes
        assert [n.labels for n in typed.nodes] == [n.labels for n in other.nodes]
        assert typed.pdbs == other.pdbs
        assert typed.config_maps == other.config_maps
    serve = next(p for p in typed.pods if p.name == "serve-0")
    assert serve.requests == {"cpu": 1350, "memory": 8 * GI, "nvidia.com/gpu": 1, "pods": 1}
    assert (serve.local_storage, serve.has_hard_topology_spread, serve.affinity.has_required_pod_anti_affinity) == (
        True,
        True,
        True,
    )
    assert serve.deletion_timestamp and serve.created is not None and serve.created.tzinfo is not None


def test_an_unknown_kind_whose_fields_clash_with_the_schema_is_still_only_skipped(tmp_path: Path) -> None:
    widget = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"priority": "very high", "containers": "none"},
        "status": {"phase": {"nested": True}},
    }
    path = write(tmp_path, "snap.json", json.dumps(as_list(*small_cluster(), widget)))
    snap = load_files([path])
    assert summary(snap) == EXPECTED
    assert snap.warnings == (f"{path}: Widget: skipped 1 object(s) of a kind the model does not use",)


def test_a_list_nested_in_a_list_loads_its_items(tmp_path: Path) -> None:
    inner = as_list(node("gpu-2", gpus=4))
    snap = load_files([write(tmp_path, "snap.json", json.dumps(as_list(node("gpu-1", gpus=8), inner)))])
    assert sorted(n.name for n in snap.nodes) == ["gpu-1", "gpu-2"]


def test_a_single_object_file_loads(tmp_path: Path) -> None:
    """``kubectl get node gpu-1 -o json`` prints the object itself, not a List."""
    snap = load_files([write(tmp_path, "node.json", json.dumps(node("gpu-1", gpus=8)))])
    assert [(n.name, n.gpu.physical_gpus) for n in snap.nodes] == [("gpu-1", 8)]


def test_explicit_nulls_read_as_absent_fields_as_the_api_server_decodes_them(tmp_path: Path) -> None:
    raw = pod("p", on="n1", tolerations=[{"key": None, "operator": "Exists", "value": None, "effect": None}])
    raw["metadata"].update(labels=None, annotations=None, ownerReferences=None)
    raw["spec"].update(
        nodeSelector=None, affinity=None, volumes=None, initContainers=None, priority=None, schedulingGates=None
    )
    raw["spec"]["containers"][0]["resources"]["limits"] = None
    loaded = load_files([write(tmp_path, "snap.json", json.dumps(as_list(node("n1"), raw)))]).pods[0]
    assert (loaded.labels, loaded.owners, loaded.priority, loaded.node_selector) == ({}, (), 0, ())
    assert [(t.key, t.operator, t.effect) for t in loaded.tolerations] == [("", "Exists", "")]
    assert loaded.requests == {"cpu": 1000, "memory": GI, "pods": 1}


@pytest.mark.parametrize("name", ["snap.json", "snap.yaml"])
def test_label_values_must_be_strings_as_the_api_requires(tmp_path: Path, name: str) -> None:
    raw = node("gpu-1", gpus=8, labels={"nvidia.com/gpu.count": 8})  # type: ignore[dict-item]
    text = json.dumps(as_list(raw)) if name.endswith(".json") else yaml.safe_dump(as_list(raw))
    error = load_error(tmp_path, name, text)
    assert (error.obj, error.field, error.message) == ("Node gpu-1", "metadata.labels", "expected str, got int")


def test_a_bad_field_deep_in_a_json_list_is_named_by_object_and_path(tmp_path: Path) -> None:
    bad = pod("train-3", namespace="ml", on="gpu-1")
    bad["spec"]["nodeName"] = 3
    error = load_error(
        tmp_path, "snap.json", json.dumps(as_list(node("gpu-1"), *[pod(f"ok-{i}", on="gpu-1") for i in range(5)], bad))
    )
    assert str(error) == f"{tmp_path / 'snap.json'}: Pod ml/train-3: spec.nodeName: expected str, got int"


def test_a_negative_pdb_status_count_is_rejected(tmp_path: Path) -> None:
    raw = pdb("serve", match={"app": "a"})
    raw["status"]["disruptionsAllowed"] = -1
    error = load_error(tmp_path, "snap.json", json.dumps(as_list(raw)))
    assert (error.obj, error.field) == ("PodDisruptionBudget default/serve", "status.disruptionsAllowed")
    assert error.message == "expected int >= 0"


def test_loaded_pods_are_immutable_and_hashable() -> None:
    snap = cluster(node("n1"), pod("p", on="n1"), pod("q", on="n1"))
    with pytest.raises(AttributeError):
        snap.pods[0].node_name = "elsewhere"  # type: ignore[misc]
    assert len({*snap.pods, *cluster(node("n1"), pod("p", on="n1")).pods}) == 3  # same name, new uid: another pod


def test_nodes_sharing_a_gpu_picture_each_get_their_own_warning() -> None:
    snap = cluster(node("a", mig={"9g.99gb": 1}), node("b", mig={"9g.99gb": 1}))
    assert snap.nodes[0].gpu == snap.nodes[1].gpu
    assert sorted(w.split(":")[1].strip() for w in snap.warnings if "unknown MIG profile" in w) == ["Node a", "Node b"]


def test_a_later_snapshot_build_collects_cyclic_garbage_an_earlier_freeze_kept() -> None:
    """The controller builds a snapshot every cycle: frozen cycles must not pile up for ever."""

    class Cycle:
        me: Any = None

    garbage = Cycle()
    garbage.me = garbage
    alive = weakref.ref(garbage)
    with gc_paused():
        pass  # a snapshot build: freezes everything alive, the cycle included
    del garbage
    gc.collect()
    assert alive() is not None  # frozen: ordinary collections do not see it
    with gc_paused():
        pass  # the next build unfreezes and collects first
    assert alive() is None
    gc.unfreeze()

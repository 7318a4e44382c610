"""The deploy manifests (manifests/) as tests read them: the kustomization directories and what ``kubectl kustomize`` builds.

``kustomize_build(directory)`` resolves a kustomization in-process (its resources, following bases, then ``images:``),
for the fields this repository's kustomizations use (``KUSTOMIZATION_FIELDS``); ``one_object(directory, kind, name)``
is the single object of that kind and name it builds; ``pod_spec``, ``containers_of`` and ``compactor_args`` read a
workload (CronJob or Deployment); ``mounted_settings`` loads the settings the base's ConfigMap mounts into every pod.
The directories: ``BASE``, ``CRONJOB``, ``CONTROLLER``, ``MONITORING``, ``STEERING``, ``GUARD``, ``GPU_OPERATOR``,
``MODES`` (and ``KUSTOMIZATIONS``, all of them); ``NAMESPACE`` is the one the manifests install into.
"""

from __future__ import annotations

import copy
import functools
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from compactor.settings.origins import Settings, load_settings

ROOT = Path(__file__).resolve().parents[1]
MANIFESTS = ROOT / "manifests"
BASE = MANIFESTS / "base"
CRONJOB = MANIFESTS / "overlays" / "cronjob"
CONTROLLER = MANIFESTS / "overlays" / "controller"
MONITORING = MANIFESTS / "monitoring"
STEERING = MANIFESTS / "steering"
# optional: the fill-first MutatingAdmissionPolicy, for steering.fill_first's labels (prevention)
PREVENTION = MANIFESTS / "prevention"
# optional: the ValidatingAdmissionPolicy that holds the service account to the node fields it owns
GUARD = MANIFESTS / "guard"
# optional: the Role that lists the mig-parted configs in the GPU Operator's namespace
GPU_OPERATOR = MANIFESTS / "gpu-operator"
OVERLAYS = (CRONJOB, CONTROLLER)
MODES = tuple(MANIFESTS / "mode" / mode for mode in ("report", "plan", "apply"))  # the ConfigMap setting COMPACTOR_MODE
NAMESPACE_ONLY = MANIFESTS / "namespace"
KUSTOMIZATIONS = (BASE, NAMESPACE_ONLY, *OVERLAYS, MONITORING, STEERING, PREVENTION, GPU_OPERATOR, GUARD, *MODES)
NAMESPACE = "gpu-compactor"
OPERATOR_NAMESPACE_NAME = Settings().mig.operator_namespace  # where the GPU Operator's mig-parted configs are read

WORKLOADS = {"CronJob", "Deployment"}
# What resolve_kustomization understands of a kustomization; anything else (patches, labels, ...) must be taught to it first,
# or the objects checked here would differ from what `kubectl apply -k` creates.
KUSTOMIZATION_FIELDS = {"apiVersion", "kind", "resources", "images"}

Doc = dict[str, Any]


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT))


# ----- kustomize ----------------------------------------------------------------------------


def read_kustomization(directory: Path) -> Doc:
    path = directory / "kustomization.yaml"
    assert path.is_file(), f"{shown(directory)} has no kustomization.yaml"
    kustomization: Doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert (kustomization.get("apiVersion"), kustomization.get("kind")) == (
        "kustomize.config.k8s.io/v1beta1",
        "Kustomization",
    ), shown(path)
    unknown = set(kustomization) - KUSTOMIZATION_FIELDS
    assert not unknown, f"{shown(path)}: {sorted(unknown)}: this test resolves only {sorted(KUSTOMIZATION_FIELDS)}"
    return kustomization


def object_key(doc: Doc) -> tuple[str, str, str]:
    metadata = doc.get("metadata") or {}
    return str(doc.get("kind")), str(metadata.get("namespace", "")), str(metadata.get("name"))


@functools.cache
def resolve_kustomization(directory: Path) -> tuple[tuple[Path, Doc], ...]:
    """The objects a kustomization lists (following its bases), each with its file, before the images are set."""
    resources = read_kustomization(directory).get("resources") or []
    assert resources, f"{shown(directory)}: the kustomization lists no resources"
    listed_twice = sorted(entry for entry, count in Counter(resources).items() if count > 1)
    assert not listed_twice, f"{shown(directory)}: listed twice: {listed_twice}"
    found: list[tuple[Path, Doc]] = []
    for entry in resources:
        target = (directory / entry).resolve()
        assert target.exists(), f"{shown(directory)}: resource {entry} does not exist"
        assert target.is_relative_to(MANIFESTS), f"{shown(directory)}: resource {entry} is outside manifests/"
        if target.is_dir():
            found.extend(resolve_kustomization(target))
            continue
        documents = [doc for doc in yaml.safe_load_all(target.read_text(encoding="utf-8")) if doc is not None]
        assert documents, f"{shown(target)} holds no YAML document"
        for doc in documents:
            assert isinstance(doc, dict), f"{shown(target)}: a document is not a mapping"
            found.append((target, doc))
    objects = Counter(object_key(doc) for _, doc in found)
    twice = sorted(key for key, count in objects.items() if count > 1)
    assert not twice, f"{shown(directory)}: objects listed twice: {twice}"
    return tuple(found)


def containers_of(workload: Doc) -> list[Doc]:
    spec = pod_spec(workload)
    containers: list[Doc] = [*spec.get("initContainers", []), *spec["containers"]]
    return containers


def image_name(image: str) -> str:
    """``registry/name:tag@digest`` -> ``registry/name`` (a ':' after the last '/' starts the tag)."""
    image = image.split("@", 1)[0]
    head, _, last = image.rpartition("/")
    return f"{head}/{last.split(':', 1)[0]}" if head else last.split(":", 1)[0]


@functools.cache
def kustomize_build(directory: Path) -> tuple[Doc, ...]:
    """What ``kubectl kustomize DIRECTORY`` prints, for the fields this repository's kustomizations use."""
    documents = [copy.deepcopy(doc) for _, doc in resolve_kustomization(directory)]
    for entry in read_kustomization(directory).get("images") or []:
        for doc in documents:
            if doc["kind"] not in WORKLOADS:
                continue
            for container in containers_of(doc):
                if image_name(container["image"]) == entry["name"]:
                    container["image"] = f"{entry.get('newName', entry['name'])}:{entry['newTag']}"
    return tuple(documents)


def one_object(directory: Path, kind: str, name: str = "gpu-compactor") -> Doc:
    matches = [doc for doc in kustomize_build(directory) if doc["kind"] == kind and doc["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected one {kind} {name} in {shown(directory)}, found {len(matches)}"
    return matches[0]


def pod_spec(workload: Doc) -> Doc:
    if workload["kind"] == "CronJob":
        spec: Doc = workload["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    else:
        spec = workload["spec"]["template"]["spec"]
    return spec


def compactor_args(workload: Doc) -> list[str]:
    """The compactor arguments of the workload's container (the image's ENTRYPOINT is ``compactor``)."""
    (container,) = pod_spec(workload)["containers"]
    command = list(container.get("command") or [])
    if command:
        assert command[0] == "compactor", f"{workload['kind']}: command {command} does not run compactor"
        command = command[1:]
    return [*command, *(container.get("args") or [])]


def mounted_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The settings every gpu-compactor pod loads from the ConfigMap in the base."""
    clear_compactor_env(monkeypatch)
    config_map = one_object(BASE, "ConfigMap", "gpu-compactor-config")
    path = tmp_path / "compactor.yaml"
    path.write_text(config_map["data"]["compactor.yaml"], encoding="utf-8")
    return load_settings(str(path))


def clear_compactor_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("COMPACTOR_"):
            monkeypatch.delenv(key)

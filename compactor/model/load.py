"""Build a ``Snapshot`` from ``kubectl get nodes,pods,poddisruptionbudgets -A -o json|yaml`` output."""

from __future__ import annotations

import gc
import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import msgspec
import yaml

from compactor.errors import InputError
from compactor.model.dra import DRA_KINDS, NVIDIA, DriverMapping
from compactor.model.dra.apply import apply
from compactor.model.dra.inventory import read_inventory
from compactor.model.parse import (
    UNLABELLED_GPU_POOL,
    RawObject,
    parse_claim,
    parse_config_map,
    parse_node,
    parse_pdb,
    parse_persistent_volume,
    parse_pod,
)
from compactor.model.schema import KubeList, KubeObject
from compactor.model.types import Claim, ConfigMap, Node, Pdb, PersistentVolume, Pod, Snapshot
from compactor.model.yamlsafe import YamlRefused, describe_yaml_error, load_yaml_documents

DEFAULT_POOL_LABEL = "nvidia.com/gpu.product"
_LIST_KINDS = {
    "List",
    "NodeList",
    "PodList",
    "PodDisruptionBudgetList",
    "ConfigMapList",
    "PersistentVolumeList",
    "PersistentVolumeClaimList",
    "DeviceClassList",
    "ResourceSliceList",
    "ResourceClaimList",
}
_LIST_DECODER = msgspec.json.Decoder(KubeList)
DRA_DRIVERS = (NVIDIA,)  # what each DRA driver's device attributes mean (compactor.model.dra.DriverMapping)
NESTED_TOO_DEEPLY = "JSON nested too deeply to read"


def _looks_like_json(text: str | bytes) -> bool:
    first = text.lstrip()[:1]
    return first in ("{", "[") if isinstance(text, str) else first in (b"{", b"[")


def _decode(text: str, source: str) -> list[Any]:
    """Parse JSON, or YAML (one or more documents)."""
    if _looks_like_json(text):
        return [_decode_json(text, source)]
    try:
        return [doc for doc in load_yaml_documents(text) if doc is not None]
    except YamlRefused as exc:
        raise InputError(str(exc), source=source) from None
    except yaml.YAMLError as exc:
        raise InputError(describe_yaml_error(exc), source=source) from None


def _decode_json(text: str, source: str) -> Any:
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        pass  # the standard library says where: line and column
    except RecursionError:
        raise InputError(NESTED_TOO_DEEPLY, source=source) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", source=source) from None
    except RecursionError:
        raise InputError(NESTED_TOO_DEEPLY, source=source) from None
    except ValueError as exc:  # an integer of more digits than Python converts (4,300)
        raise InputError(f"unreadable JSON: {exc}", source=source) from None


def _decode_typed(content: str | bytes) -> list[KubeObject] | None:
    """The common case in one typed pass: a JSON List (or one object) that fits the schema.

    ``None`` when it does not (bad input, a nested List, an unknown kind whose
    fields clash with the schema): the caller then goes object by object, which
    skips unknown kinds and names the object and field at fault.
    """
    try:
        document = _LIST_DECODER.decode(content)
    except (msgspec.MsgspecError, RecursionError):
        return None
    if document.items is None:
        return [] if document.kind in _LIST_KINDS else [document]
    if document.kind is not None and document.kind not in _LIST_KINDS:
        return None
    item_kind = (document.kind or "List").removesuffix("List")
    for item in document.items:
        if item.kind is None and item_kind:
            item.kind = item_kind
        elif item.kind in _LIST_KINDS:
            return None
    return document.items


def _flatten(documents: Iterable[Any], source: str, where: str = "") -> Iterable[dict[str, Any]]:
    """Objects out of documents, Lists and typed Lists; a bad entry is named ``document 2``, ``List items[3]``, ..."""
    for index, doc in enumerate(documents):
        here = f"{where}[{index}]" if where else f"document {index + 1}"
        if isinstance(doc, list):
            yield from _flatten(doc, source, here)
            continue
        if not isinstance(doc, dict):
            raise InputError(f"expected a Kubernetes object or List, got {type(doc).__name__}", source=source, obj=here)
        if doc.get("kind") in _LIST_KINDS or ("items" in doc and "kind" not in doc):
            kind = str(doc.get("kind") or "List")
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise InputError(f"expected a list, got {type(items).__name__}", source=source, obj=kind, field="items")
            item_kind = kind.removesuffix("List")
            typed = [
                {**item, "kind": item_kind} if isinstance(item, dict) and "kind" not in item and item_kind else item
                for item in items
            ]
            yield from _flatten(typed, source, f"{kind} items")
            continue
        yield doc


def _read(path: str, stdin_text: str | None) -> tuple[str | bytes, str]:
    """(content, source name) of a file, or of standard input for ``-``."""
    if path == "-":
        return (stdin_text if stdin_text is not None else sys.stdin.read()), "<stdin>"
    try:
        return Path(path).read_bytes(), path
    except FileNotFoundError:
        raise InputError("no such file", source=path) from None
    except IsADirectoryError:
        raise InputError("is a directory, expected a file", source=path) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc}", source=path) from None


def _as_text(content: str | bytes, source: str) -> str:
    if isinstance(content, str):
        return content
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"cannot read: {exc}", source=source) from None


def _dicts(content: str | bytes, source: str) -> list[dict[str, Any]]:
    return list(_flatten(_decode(_as_text(content, source), source), source))


def read_source(path: str, stdin_text: str | None = None) -> list[dict[str, Any]]:
    """Raw objects (dicts, tagged with ``__source__``) from one file (``-`` = standard input)."""
    content, source = _read(path, stdin_text)
    return [dict(obj, __source__=source) for obj in _dicts(content, source)]


def _read_objects(path: str, stdin_text: str | None) -> tuple[str, Sequence[RawObject]]:
    """(source name, objects) of one file: typed in one pass when it can be, else as dicts."""
    content, source = _read(path, stdin_text)
    typed = _decode_typed(content) if _looks_like_json(content) else None
    return source, typed if typed is not None else _dicts(content, source)


def build_snapshot(
    objects: Iterable[RawObject],
    *,
    source: str,
    pool_label: str = DEFAULT_POOL_LABEL,
    dra_drivers: Sequence[DriverMapping] = DRA_DRIVERS,
    live: bool = False,
) -> Snapshot:
    """Objects (dicts, each optionally tagged with ``__source__``, or decoded) -> an immutable snapshot with warnings.
    ``live``: read from a cluster, where a DRA object that cannot be decoded is left out with a warning (a file's is
    an error naming it)."""
    pairs = ((_origin(raw, source), raw) for raw in objects)
    return _assemble(pairs, source=source, pool_label=pool_label, dra_drivers=dra_drivers, live=live)


def _origin(raw: RawObject, default: str) -> str:
    return str(raw.get("__source__", default)) if isinstance(raw, dict) else default


class _Identities:
    """Every object once: a second object of the same kind and namespace/name, or with the same uid, is an error.

    The same file given twice, or two overlapping reads, would otherwise count every pod twice."""

    def __init__(self) -> None:
        self.origins: dict[tuple[str, str], str] = {}
        self.uids: dict[str, str] = {}

    def add(self, kind: str, key: str, uid: str, origin: str) -> None:
        name = f"{kind} {key}"
        first = self.origins.get((kind, key))
        if first is not None:
            raise InputError(
                f"duplicate object (already read from {first}): give each object once",
                source=origin,
                obj=name,
                field="metadata.name",
            )
        self.origins[(kind, key)] = origin
        if uid:
            other = self.uids.setdefault(uid, name)
            if other != name:
                raise InputError(
                    f"duplicate uid {uid}: {other} has it too", source=origin, obj=name, field="metadata.uid"
                )


def _assemble(
    objects: Iterable[tuple[str, RawObject]],
    *,
    source: str,
    pool_label: str,
    dra_drivers: Sequence[DriverMapping] = DRA_DRIVERS,
    live: bool = False,
) -> Snapshot:
    warnings: list[str] = []
    seen = _Identities()
    nodes: dict[str, Node] = {}
    pods: list[Pod] = []
    pdbs: list[Pdb] = []
    config_maps: list[ConfigMap] = []
    volumes: list[PersistentVolume] = []
    claims: list[Claim] = []
    dra: list[tuple[str, RawObject]] = []  # DeviceClasses, ResourceSlices, ResourceClaims: read once nodes are known
    skipped: dict[str, int] = {}  # "origin: kind" -> objects
    skipped_kinds: dict[str, int] = {}
    for origin, raw in objects:
        kind = raw.kind if isinstance(raw, KubeObject) else raw.get("kind")
        if kind == "Pod":
            pod = parse_pod(raw, source=origin)
            seen.add("Pod", pod.key, pod.uid, origin)
            pods.append(pod)
        elif kind == "Node":
            node = parse_node(raw, source=origin, pool_label=pool_label, warnings=warnings)
            seen.add("Node", node.name, node.uid, origin)
            nodes[node.name] = node
        elif kind == "PodDisruptionBudget":
            pdb = parse_pdb(raw, source=origin)
            seen.add("PodDisruptionBudget", pdb.key, "", origin)
            pdbs.append(pdb)
        elif kind == "ConfigMap":
            config_map = parse_config_map(raw, source=origin)
            seen.add("ConfigMap", f"{config_map.namespace}/{config_map.name}", "", origin)
            config_maps.append(config_map)
        elif kind == "PersistentVolume":
            volume = parse_persistent_volume(raw, source=origin)
            seen.add("PersistentVolume", volume.name, "", origin)
            volumes.append(volume)
        elif kind == "PersistentVolumeClaim":
            claim = parse_claim(raw, source=origin)
            seen.add("PersistentVolumeClaim", claim.key, "", origin)
            claims.append(claim)
        elif kind in DRA_KINDS:
            dra.append((origin, raw))
        else:
            unused = str(kind or "object without kind")
            skipped[f"{origin}: {unused}"] = skipped.get(f"{origin}: {unused}", 0) + 1
            skipped_kinds[unused] = skipped_kinds.get(unused, 0) + 1
    warnings.extend(
        f"{label}: skipped {n} object(s) of a kind the model does not use" for label, n in sorted(skipped.items())
    )

    if dra:
        inventory = read_inventory(dra, nodes, dra_drivers, warnings, skip_undecodable=live)
        pods = apply(nodes, pods, inventory, dra_drivers, pool_label=pool_label, warnings=warnings)
    orphans = [p for p in pods if p.node_name and p.node_name not in nodes and p.is_bound]
    if orphans:
        sample = ", ".join(f"{p.key} -> {p.node_name}" for p in orphans[:3]) + (", ..." if len(orphans) > 3 else "")
        warnings.append(f"{len(orphans)} pod(s) bound to nodes not in the snapshot, not counted ({sample})")
    orphan_ids = {id(p) for p in orphans}
    return Snapshot(
        nodes=tuple(nodes.values()),
        pods=tuple(p for p in pods if id(p) not in orphan_ids) if orphans else tuple(pods),
        pdbs=tuple(pdbs),
        config_maps=tuple(config_maps),
        volumes=tuple(volumes),
        claims=tuple(claims),
        source=source,
        warnings=tuple(warnings),
        extra={"orphan_pods": len(orphans), "skipped_kinds": skipped_kinds},
    )


def load_files(
    paths: Sequence[str],
    *,
    pool_label: str = DEFAULT_POOL_LABEL,
    stdin_text: str | None = None,
    dra_drivers: Sequence[DriverMapping] = DRA_DRIVERS,
) -> Snapshot:
    with gc_paused():
        batches = [_read_objects(path, stdin_text) for path in paths]
        pairs = ((origin, raw) for origin, objects in batches for raw in objects)
        return _assemble(pairs, source=", ".join(paths), pool_label=pool_label, dra_drivers=dra_drivers)


class gc_paused:
    """Pause the cyclic garbage collector while building a snapshot.

    Decoded JSON and snapshot objects hold no reference cycles, yet every container
    allocation counts towards a collection: on a 50,000-pod snapshot the collector
    alone costs more than the parsing. The objects are frozen afterwards so later
    collections skip them too.

    A long-running process (the controller) builds a snapshot every cycle: what an
    earlier build froze is unfrozen and collected first, so cyclic garbage that
    happened to be alive at an earlier freeze is not kept for ever.
    """

    froze_before = False

    def __enter__(self) -> None:
        self.was_enabled = gc.isenabled()
        if gc_paused.froze_before:
            gc.unfreeze()
            if self.was_enabled:
                gc.collect()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.was_enabled:
            gc.enable()
        gc.freeze()
        gc_paused.froze_before = True


def implausible_input(nodes: Sequence[Node], pods: Sequence[Pod], pool_label: str) -> list[str]:
    """Input that is almost certainly not what was meant, said (issue 45): nodes without a single pod (`kubectl get nodes`
    alone reports every GPU whole-free), and GPU nodes without the label that names their pool."""
    said = []
    if nodes and not pods:
        said.append(
            f"{len(nodes)} node(s) and no pod: every GPU counts as free (was the snapshot `kubectl get nodes` alone? "
            "expected `kubectl get nodes,pods,pdb,pv,pvc -A -o json`)"
        )
    gpu_nodes = [n for n in nodes if n.gpu.physical_gpus > 0]
    unlabelled = sorted(n.name for n in gpu_nodes if not n.labels.get(pool_label))
    if unlabelled and len(unlabelled) < len(gpu_nodes):  # none labelled at all: the pool-label check says so
        sample = ", ".join(unlabelled[:3]) + (", ..." if len(unlabelled) > 3 else "")
        said.append(
            f"{len(unlabelled)} GPU node(s) without the {pool_label} label ({sample}): pooled together as "
            f"{UNLABELLED_GPU_POOL!r}, whatever their GPUs (GPU Feature Discovery sets it; or set metrics.pool_label)"
        )
    return said

"""Build a ``Snapshot`` from ``kubectl get nodes,pods,poddisruptionbudgets -A -o json|yaml`` output."""

from __future__ import annotations

import gc
import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import orjson
import yaml

from compactor.errors import InputError
from compactor.model.parse import object_name, parse_config_map, parse_node, parse_pdb, parse_pod
from compactor.model.types import ConfigMap, Node, Pdb, Pod, Snapshot

DEFAULT_POOL_LABEL = "nvidia.com/gpu.product"
_LIST_KINDS = {"List", "NodeList", "PodList", "PodDisruptionBudgetList", "ConfigMapList"}
_KNOWN_KINDS = {"Node", "Pod", "PodDisruptionBudget", "ConfigMap"}


def _decode(text: str, source: str) -> list[Any]:
    """Parse JSON, or YAML (one or more documents)."""
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            return [orjson.loads(text)]
        except json.JSONDecodeError as exc:  # orjson's error subclasses it, with line and column
            raise InputError(f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", source=source) from None
    try:
        return [doc for doc in yaml.load_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if doc is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"malformed YAML{where}: {problem}", source=source) from None


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
            typed = [{**item, "kind": item_kind} if isinstance(item, dict) and "kind" not in item and item_kind else item for item in items]
            yield from _flatten(typed, source, f"{kind} items")
            continue
        yield doc


def read_source(path: str, stdin_text: str | None = None) -> list[dict[str, Any]]:
    """Raw objects from one file (``-`` = standard input)."""
    if path == "-":
        text = stdin_text if stdin_text is not None else sys.stdin.read()
        source = "<stdin>"
    else:
        source = path
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise InputError("no such file", source=path) from None
        except IsADirectoryError:
            raise InputError("is a directory, expected a file", source=path) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read: {exc}", source=path) from None
    return [dict(obj, __source__=source) for obj in _flatten(_decode(text, source), source)]


def build_snapshot(
    objects: Sequence[dict[str, Any]],
    *,
    source: str,
    pool_label: str = DEFAULT_POOL_LABEL,
) -> Snapshot:
    """Objects (each optionally tagged with ``__source__``) -> an immutable snapshot with warnings."""
    warnings: list[str] = []
    nodes: dict[str, Node] = {}
    pods: list[Pod] = []
    pdbs: list[Pdb] = []
    config_maps: list[ConfigMap] = []
    skipped: dict[str, int] = {}
    for raw in objects:
        origin = str(raw.get("__source__", source))
        kind = raw.get("kind")
        if kind == "Node":
            node = parse_node(raw, source=origin, pool_label=pool_label, warnings=warnings)
            if node.name in nodes:
                raise InputError("duplicate node name", source=origin, obj=object_name(raw), field="metadata.name")
            nodes[node.name] = node
        elif kind == "Pod":
            pods.append(parse_pod(raw, source=origin))
        elif kind == "PodDisruptionBudget":
            pdbs.append(parse_pdb(raw, source=origin))
        elif kind == "ConfigMap":
            config_maps.append(parse_config_map(raw, source=origin))
        else:
            label = f"{origin}: {kind or 'object without kind'}"
            skipped[label] = skipped.get(label, 0) + 1
    warnings.extend(f"{label}: skipped {n} object(s) of a kind the model does not use" for label, n in sorted(skipped.items()))

    orphans = [p for p in pods if p.is_bound and p.node_name not in nodes]
    if orphans:
        sample = ", ".join(f"{p.key} -> {p.node_name}" for p in orphans[:3]) + (", ..." if len(orphans) > 3 else "")
        warnings.append(f"{len(orphans)} pod(s) bound to nodes not in the snapshot, not counted ({sample})")
    orphan_ids = {id(p) for p in orphans}
    return Snapshot(
        nodes=tuple(nodes.values()),
        pods=tuple(p for p in pods if id(p) not in orphan_ids),
        pdbs=tuple(pdbs),
        config_maps=tuple(config_maps),
        source=source,
        warnings=tuple(warnings),
        extra={"orphan_pods": len(orphans)},
    )


def load_files(paths: Sequence[str], *, pool_label: str = DEFAULT_POOL_LABEL, stdin_text: str | None = None) -> Snapshot:
    with gc_paused():
        objects: list[dict[str, Any]] = []
        for path in paths:
            objects.extend(read_source(path, stdin_text))
        return build_snapshot(objects, source=", ".join(paths), pool_label=pool_label)


class gc_paused:
    """Pause the cyclic garbage collector while building a snapshot.

    Decoded JSON and snapshot objects hold no reference cycles, yet every container
    allocation counts towards a collection: on a 50,000-pod snapshot the collector
    alone costs more than the parsing. The objects are frozen afterwards so later
    collections skip them too.
    """

    def __enter__(self) -> None:
        self.was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.was_enabled:
            gc.enable()
        gc.freeze()

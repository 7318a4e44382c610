"""NVIDIA mig-parted configurations: what each named layout (``nvidia.com/mig.config=<name>``) gives a node.

The GPU Operator's mig-manager reads ``config.yaml`` from a ConfigMap (``version: v1``,
``mig-configs: {name: [{devices, mig-enabled, mig-devices, device-filter}]}``). Each
entry selects GPUs by index (``devices: all`` or a list) and by PCI device id
(``device-filter``, e.g. ``0x20B010DE``; empty = any GPU) and cuts each selected GPU
into ``mig-devices`` (profile -> count per GPU), or leaves MIG off (whole GPUs).

Nodes do not label their PCI ids; the GPU model comes from the product label
(``catalog.model_for_product``) and an entry applies when its filter names a PCI id of
that model. A GPU matched by two entries takes the first (a config normally lists one
entry per model). Whether a layout fits one GPU is decided with the placement rules
(valid starts, disjoint memory slices, at most one ``+me`` instance), not by slice sums.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import yaml

from compactor.errors import InputError
from compactor.model.catalog import MODELS, GpuModel, MigProfile, model_for_product, resource_for_profile
from compactor.model.dra import DEVICE_PLUGIN_LABEL, DRA_LABEL_PREFIX
from compactor.model.gpu import MIG_CAPABLE_LABEL, MIG_CONFIG_LABEL, derive_gpu_info
from compactor.model.resources import GPU, Resources, is_gpu_resource, is_mig_resource
from compactor.model.types import ConfigMap, Node
from compactor.model.yamlsafe import YamlRefused, load_yaml

DEFAULT_CONFIG_MAPS = ("default-mig-parted-config", "custom-mig-parted-config")
# Recent mig-managers generate one config per node from NVML: ConfigMap <node>-mig-config, labelled with the node's name.
NODE_NAME_LABEL = "nvidia.com/node-name"
NODE_CONFIG_SUFFIX = "-mig-config"
CONFIG_KEY = "config.yaml"
_PCI_ID = re.compile(r"0x[0-9A-F]{8}")

# PCI device ids per model, as mig-parted's default config groups them (comments name the boards).
PCI_IDS: dict[str, frozenset[str]] = {
    "A100-40GB": frozenset({"0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"}),
    "A100-80GB": frozenset({"0x20B210DE", "0x20B510DE", "0x20F310DE", "0x20F510DE"}),
    "H100-80GB": frozenset({"0x233010DE", "0x233110DE", "0x232210DE"}),
    "H100-94GB": frozenset({"0x232110DE"}),
    "H100-96GB": frozenset({"0x234210DE", "0x233D10DE", "0x20B610DE", "0x232910DE"}),
    "H200-141GB": frozenset({"0x233510DE", "0x233B10DE"}),
    "A30-24GB": frozenset({"0x20B710DE"}),
}


@dataclass(frozen=True, slots=True)
class DeviceEntry:
    devices: tuple[int, ...] | None  # None = all
    mig_enabled: bool
    mig_devices: tuple[tuple[str, int], ...]
    device_filter: frozenset[str]
    field: str  # where it is written, for errors: mig-configs.<name>[i]

    def applies_to(self, model: GpuModel) -> bool:
        return not self.device_filter or bool(self.device_filter & PCI_IDS.get(model.name, frozenset()))


@dataclass(frozen=True)
class MigParted:
    """A parsed mig-parted ``config.yaml``: config name -> its device entries."""

    source: str  # ConfigMap namespace/name (or a file)
    configs: Mapping[str, tuple[DeviceEntry, ...]]

    def capacity(self, name: str, node: Node) -> dict[str, int] | None:
        """Allocatable GPU resources ``node`` would advertise under config ``name`` (mixed strategy), or None when
        the config does not exist or no entry of it applies to the node's GPUs (mig-manager would fail)."""
        model = model_for_product(node.gpu.product.removesuffix("-SHARED").split("-MIG-")[0])
        entries = self.configs.get(name)
        if model is None or entries is None or node.gpu.physical_gpus <= 0:
            return None
        found: dict[str, int] = {}
        covered = 0
        for index in range(node.gpu.physical_gpus):
            entry = next(
                (e for e in entries if e.applies_to(model) and (e.devices is None or index in e.devices)), None
            )
            if entry is None:
                continue
            covered += 1
            if not entry.mig_enabled:
                found[GPU] = found.get(GPU, 0) + 1
                continue
            for profile, count in entry.mig_devices:
                resource = resource_for_profile(profile)
                found[resource] = found.get(resource, 0) + count
        return found if covered else None

    def applicable(self, node: Node) -> list[str]:
        """Config names that configure at least one GPU of ``node``, each with layouts mig-manager can create on it."""
        model = model_for_product(node.gpu.product.removesuffix("-SHARED").split("-MIG-")[0])
        return [
            name
            for name in self.configs
            if self.capacity(name, node) is not None
            and model is not None
            and not any(
                e.mig_enabled and e.applies_to(model) and layout_problem(model, e.mig_devices)
                for e in self.configs[name]
            )
        ]


def is_mig_capable(node: Node) -> bool:
    """GFD says the GPUs can be cut, or the node advertises MIG slices already; never a node whose GPUs a DRA driver
    publishes: mig-manager's relabel is for device-plugin nodes, and NVIDIA's DRA driver destroys partitions it did not
    create (docs/dra.md)."""
    if any(key.startswith(DRA_LABEL_PREFIX) and key != DEVICE_PLUGIN_LABEL for key in node.labels):
        return False
    return node.labels.get(MIG_CAPABLE_LABEL) == "true" or any(is_mig_resource(r) for r in node.allocatable)


def recut_node(node: Node, allocatable: Mapping[str, int], to_config: str | None = None) -> Node:
    """``node`` with its GPU resources replaced by a layout's (mig-manager replaces them all), labelled with it when given."""
    resources = {r: v for r, v in node.allocatable.items() if not is_gpu_resource(r)} | dict(allocatable)
    labels = {**node.labels, MIG_CONFIG_LABEL: to_config} if to_config is not None else node.labels
    gpu, _ = derive_gpu_info(labels, resources)
    return replace(node, labels=labels, allocatable=Resources(resources), gpu=gpu)


def parse_mig_parted(text: str, *, source: str) -> MigParted:
    """``config.yaml`` of a mig-parted ConfigMap; ``InputError`` names the ConfigMap and the field."""
    obj = f"ConfigMap {source}"
    try:
        raw = load_yaml(text)
    except YamlRefused as exc:
        raise InputError(f"{CONFIG_KEY}: {exc}", source=source, obj=obj) from None
    except yaml.YAMLError as exc:
        raise InputError(
            f"malformed YAML in {CONFIG_KEY}: {str(exc).splitlines()[0]}", source=source, obj=obj
        ) from None
    if not isinstance(raw, dict):
        raise InputError("expected a mapping with version and mig-configs", source=source, obj=obj, field=CONFIG_KEY)
    if str(raw.get("version", "")) != "v1":
        raise InputError(
            f"unsupported version {raw.get('version')!r} (expected v1)", source=source, obj=obj, field="version"
        )
    configs = raw.get("mig-configs")
    if not isinstance(configs, dict):
        raise InputError("missing or not a mapping", source=source, obj=obj, field="mig-configs")
    parsed: dict[str, tuple[DeviceEntry, ...]] = {}
    for name, entries in configs.items():
        where = f"mig-configs.{name}"
        if not isinstance(entries, list) or not entries:
            raise InputError("expected a non-empty list of device entries", source=source, obj=obj, field=where)
        parsed[str(name)] = tuple(
            _entry(entry, f"{where}[{i}]", source=source, obj=obj) for i, entry in enumerate(entries)
        )
    return MigParted(source=source, configs=parsed)


def _entry(raw: Any, field: str, *, source: str, obj: str) -> DeviceEntry:
    def bad(message: str, sub: str = "") -> InputError:
        return InputError(message, source=source, obj=obj, field=f"{field}.{sub}" if sub else field)

    if not isinstance(raw, dict):
        raise bad("expected a mapping")
    unknown = sorted(set(raw) - {"devices", "mig-enabled", "mig-devices", "device-filter"})
    if unknown:
        raise bad(f"unknown key(s) {', '.join(unknown)}")
    devices = raw.get("devices", "all")
    if devices == "all":
        chosen = None
    elif isinstance(devices, list) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in devices):
        chosen = tuple(devices)
    else:
        raise bad(f"expected 'all' or a list of GPU indices, got {devices!r}", "devices")
    enabled = raw.get("mig-enabled")
    if not isinstance(enabled, bool):
        raise bad(f"expected true or false, got {enabled!r}", "mig-enabled")
    mig_devices = raw.get("mig-devices") or {}
    if not isinstance(mig_devices, dict) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in mig_devices.values()
    ):
        raise bad("expected profile: count (counts are whole numbers >= 0)", "mig-devices")
    if mig_devices and not enabled:
        raise bad("mig-devices given with mig-enabled: false", "mig-devices")
    filters = raw.get("device-filter") or []
    filters = [filters] if isinstance(filters, str) else filters
    normalised = [str(f).upper().replace("0X", "0x") for f in filters]
    wrong = [f for f in normalised if not _PCI_ID.fullmatch(f)]
    if wrong:
        raise bad(f"not a PCI device id (0x followed by 8 hex digits): {', '.join(wrong)}", "device-filter")
    return DeviceEntry(
        chosen, enabled, tuple(sorted((str(k), v) for k, v in mig_devices.items() if v)), frozenset(normalised), field
    )


def layout_problem(model: GpuModel, mig_devices: Sequence[tuple[str, int]]) -> str | None:
    """Why these instances cannot all be created on one GPU of ``model``, or None when a placement exists."""
    wanted: list[MigProfile] = []
    for name, count in mig_devices:
        profile = model.profile(name)
        if profile is None:
            return f"profile {name} does not exist on {model.name}"
        if count > profile.max_instances:
            return f"{count} x {name} exceeds its {profile.max_instances} per GPU on {model.name}"
        wanted += [profile] * count
    if sum(1 for p in wanted if p.name.endswith("+me")) > 1:
        return "more than one +me instance on one GPU"
    if sum(p.compute_slices for p in wanted) > model.compute_slices:
        return (
            f"needs {sum(p.compute_slices for p in wanted)} compute slices, a {model.name} has {model.compute_slices}"
        )
    wanted.sort(key=lambda p: (-p.memory_slices, len(p.starts)))
    if not _place(wanted, 0, [False] * model.memory_slots):
        return f"no placement of {', '.join(f'{c} x {n}' for n, c in mig_devices)} fits the {model.memory_slots} memory slices of a {model.name}"
    return None


def _place(profiles: list[MigProfile], i: int, used: list[bool]) -> bool:
    """Backtracking over valid starts on the memory-slice axis (instances may not overlap)."""
    if i == len(profiles):
        return True
    profile = profiles[i]
    for start in profile.starts:
        span = range(start, start + profile.memory_slices)
        if span.stop <= len(used) and not any(used[s] for s in span):
            for s in span:
                used[s] = True
            if _place(profiles, i + 1, used):
                return True
            for s in span:
                used[s] = False
    return False


def problems(parted: MigParted) -> list[str]:
    """Every entry that mig-manager would reject on the GPUs it selects: ``ConfigMap <ref>: <field>: why``."""
    found = []
    for entries in parted.configs.values():
        for entry in entries:
            where = f"ConfigMap {parted.source}: {entry.field}"
            if not entry.mig_enabled:
                continue
            if entry.device_filter:
                models = [m for m in MODELS if entry.applies_to(m)]
                if not models:
                    found.append(f"{where}.device-filter: names no GPU model the planner knows")
            else:  # any GPU: judge it on the models that have all its profiles
                models = [m for m in MODELS if all(m.profile(p) for p, _ in entry.mig_devices)]
                if not models:
                    unknown = sorted(p for p, _ in entry.mig_devices if not any(m.profile(p) for m in MODELS))
                    found.append(
                        f"{where}.mig-devices: profile(s) {', '.join(unknown) or 'in this mix'} exist on no one GPU model"
                    )
            found += [f"{where}.mig-devices: {why}" for m in models if (why := layout_problem(m, entry.mig_devices))]
    return found


class Layouts(Protocol):
    """What the planner asks of mig-parted configs: the layouts a node may take, and what each gives it."""

    def capacity(self, name: str, node: Node) -> dict[str, int] | None: ...

    def applicable(self, node: Node) -> list[str]: ...


@dataclass(frozen=True)
class MigLayouts:
    """The config each node's mig-manager reads: a node's generated one (``<node>-mig-config``), else the shared one."""

    shared: MigParted | None
    per_node: Mapping[str, MigParted]

    def for_node(self, node: Node) -> MigParted | None:
        return self.per_node.get(node.name, self.shared)

    def capacity(self, name: str, node: Node) -> dict[str, int] | None:
        parted = self.for_node(node)
        return parted.capacity(name, node) if parted is not None else None

    def applicable(self, node: Node) -> list[str]:
        parted = self.for_node(node)
        return parted.applicable(node) if parted is not None else []

    def parsed(self) -> list[MigParted]:
        """Every config read: the shared one first, then the generated per-node ones."""
        return [*([self.shared] if self.shared else []), *self.per_node.values()]

    @property
    def source(self) -> str:
        return ", ".join(p.source for p in self.parsed())


def find_mig_parted(
    config_maps: Sequence[ConfigMap], ref: str = "", *, namespace: str | None = None
) -> MigLayouts | None:
    """The mig-parted configs among the snapshot's ConfigMaps, as mig-manager picks them: ``ref`` (namespace/name)
    when given; else the GPU Operator's ``custom-mig-parted-config`` (it replaces generated configs); else each node's
    generated ``<node>-mig-config`` where there is one, and ``default-mig-parted-config`` for the others.

    ``namespace``: the GPU Operator's (``mig.operator_namespace``): a ConfigMap anywhere else is never used, whatever
    its name or labels (a snapshot of all namespaces holds the tenants' too, and any tenant can name or label a
    ConfigMap of their own like mig-manager's); None: every one of ``config_maps`` (a caller that chose them itself).
    Raises ``InputError`` when one does not parse."""
    if namespace is not None:
        config_maps = [cm for cm in config_maps if cm.namespace == namespace]
    if ref:
        chosen = next((cm for cm in config_maps if f"{cm.namespace}/{cm.name}" == ref), None)
        return MigLayouts(_parse(chosen), {}) if chosen is not None else None
    custom = next((cm for cm in config_maps if cm.name == DEFAULT_CONFIG_MAPS[1]), None)
    if custom is not None:
        return MigLayouts(_parse(custom), {})
    per_node = {node: _parse(cm) for cm in config_maps if (node := _generated_for(cm))}
    default = next((cm for cm in config_maps if cm.name == DEFAULT_CONFIG_MAPS[0]), None)
    if default is None and not per_node:
        return None
    return MigLayouts(_parse(default) if default is not None else None, per_node)


def _generated_for(cm: ConfigMap) -> str:
    """The node a generated per-node config belongs to ("" when ``cm`` is not one)."""
    node = cm.labels.get(NODE_NAME_LABEL, "")
    return node if node and cm.name == f"{node}{NODE_CONFIG_SUFFIX}" and CONFIG_KEY in cm.data else ""


def _parse(cm: ConfigMap) -> MigParted:
    key = f"{cm.namespace}/{cm.name}"
    if CONFIG_KEY not in cm.data:
        raise InputError(f"has no {CONFIG_KEY} key", source=key, obj=f"ConfigMap {key}", field="data")
    return parse_mig_parted(cm.data[CONFIG_KEY], source=key)

"""mig-parted configurations: parsing with errors that name the ConfigMap and field, layouts judged by placement,
and the capacity a named config gives a node of each GPU model."""

from __future__ import annotations

import pytest

from compactor.app.sources import example_path
from compactor.errors import InputError
from compactor.model.catalog import MODELS, model_for_product
from compactor.model.load import load_files
from compactor.model.migparted import PCI_IDS, find_mig_parted, layout_problem, parse_mig_parted, problems
from compactor.model.types import ConfigMap
from tests.builders import A100_40, A100_80, H100_80, cluster, node
from tests.mig_geometry import reference_geometry

SOURCE = "gpu-operator/default-mig-parted-config"
PRODUCTS = {  # GFD product label -> catalog model
    A100_40: "A100-40GB",
    A100_80: "A100-80GB",
    H100_80: "H100-80GB",
    "NVIDIA-H100-NVL": "H100-94GB",
    "NVIDIA-GH200-480GB": "H100-96GB",
    "NVIDIA-H200": "H200-141GB",
    "NVIDIA-A30": "A30-24GB",
}


def config(body: str) -> str:
    return "version: v1\nmig-configs:\n" + body


def test_the_operators_default_config_in_the_example_parses_and_is_valid() -> None:
    parted = find_mig_parted(load_files([example_path()]).config_maps)
    assert parted is not None and parted.source == SOURCE
    (shared,) = parted.parsed()
    assert list(shared.configs) == [
        "all-disabled",
        "all-enabled",
        "all-1g.5gb",
        "all-2g.10gb",
        "all-3g.20gb",
        "all-balanced",
    ]
    assert problems(shared) == []


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        (
            "  x:\n    - devices: all\n      mig-enabled: true\n      mig-devices: {1g.5gb: 7}\n      extra: 1\n",
            "mig-configs.x[0]",
            "unknown key",
        ),
        (
            "  x:\n    - devices: all\n      mig-enabled: false\n      mig-devices: {1g.5gb: 7}\n",
            "mig-configs.x[0].mig-devices",
            "mig-enabled: false",
        ),
        (
            "  x:\n    - devices: all\n      mig-enabled: true\n      device-filter: [20B010DE]\n",
            "mig-configs.x[0].device-filter",
            "PCI device id",
        ),
        ("  x:\n    - devices: [0, one]\n      mig-enabled: true\n", "mig-configs.x[0].devices", "GPU indices"),
        ("  x:\n    - devices: all\n      mig-enabled: yes please\n", "mig-configs.x[0].mig-enabled", "true or false"),
        ("  x: []\n", "mig-configs.x", "non-empty list"),
    ],
)
def test_a_bad_entry_is_one_error_naming_configmap_and_field(body: str, field: str, message: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_mig_parted(config(body), source=SOURCE)
    text = str(caught.value)
    assert f"ConfigMap {SOURCE}" in text and field in text and message in text, text


def test_version_and_yaml_errors_name_the_configmap() -> None:
    for text, expected in (
        ("version: v2\nmig-configs: {}\n", "unsupported version"),
        ("version: v1\nmig-configs: [\n", "malformed YAML"),
    ):
        with pytest.raises(InputError, match=expected):
            parse_mig_parted(text, source=SOURCE)


def test_layouts_mig_manager_would_reject_are_named_with_config_and_device() -> None:
    parted = parse_mig_parted(
        config(
            '  wrong-size:\n    - device-filter: ["0x20B010DE"]\n      devices: all\n      mig-enabled: true\n      mig-devices: {"3g.40gb": 2}\n'
            '  too-much:\n    - device-filter: ["0x20B010DE"]\n      devices: all\n      mig-enabled: true\n      mig-devices: {"4g.20gb": 1, "3g.20gb": 2}\n'
            '  two-me:\n    - devices: all\n      mig-enabled: true\n      mig-devices: {"1g.5gb+me": 2}\n'
            '  fine:\n    - device-filter: ["0x20B010DE"]\n      devices: all\n      mig-enabled: true\n      mig-devices: {"4g.20gb": 1, "3g.20gb": 1}\n'
            '  nobody:\n    - device-filter: ["0x12345678"]\n      devices: all\n      mig-enabled: true\n      mig-devices: {"1g.5gb": 1}\n'
        ),
        source=SOURCE,
    )
    found = problems(parted)
    assert (
        f"ConfigMap {SOURCE}: mig-configs.wrong-size[0].mig-devices: profile 3g.40gb does not exist on A100-40GB"
        in found
    )
    assert any(p.startswith(f"ConfigMap {SOURCE}: mig-configs.too-much[0].mig-devices: ") for p in found)
    assert any("mig-configs.two-me[0].mig-devices" in p for p in found)
    assert f"ConfigMap {SOURCE}: mig-configs.nobody[0].device-filter: names no GPU model the planner knows" in found
    assert not any("mig-configs.fine" in p for p in found)
    (a100,) = cluster(node("n", gpus=2, product=A100_40)).nodes
    assert parted.applicable(a100) == ["fine"]  # a layout mig-manager would reject is never a re-cut target


def test_placement_decides_not_slice_sums() -> None:
    a30 = model_for_product("NVIDIA-A30")
    assert a30 is not None
    # 2 + 1 + 1 memory slices of 4 and 4 compute slices fit; a second 2g.12gb+me does not (one +me per GPU) ...
    assert layout_problem(a30, [("2g.12gb", 1), ("1g.6gb", 2)]) is None
    assert layout_problem(a30, [("2g.12gb+me", 1), ("1g.6gb+me", 1)]) == "more than one +me instance on one GPU"
    # ... and a 4g.24gb only starts at 0, so nothing else fits beside it.
    assert layout_problem(a30, [("4g.24gb", 1), ("1g.6gb", 1)]) is not None


@pytest.mark.parametrize("model_name", [m.name for m in MODELS])
def test_each_profiles_maximum_fits_one_gpu_and_one_more_does_not(model_name: str) -> None:
    """Against the geometry of ../shared/data/nvidia-mig/mig-geometry.json (or its copy in tests/mig_geometry.py)."""
    model = next(m for m in MODELS if m.name == model_name)
    reference = reference_geometry().get(model_name)
    for profile in model.profiles:
        maximum = reference[2][profile.name][2] if reference else profile.max_instances
        assert layout_problem(model, [(profile.name, maximum)]) is None, profile.name
        assert layout_problem(model, [(profile.name, maximum + 1)]) is not None, profile.name


@pytest.mark.parametrize(("product", "model_name"), list(PRODUCTS.items()))
def test_capacity_of_a_named_config_is_count_times_gpus_of_the_matching_model(product: str, model_name: str) -> None:
    model = next(m for m in MODELS if m.name == model_name)
    half = next(p for p in model.profiles if p.max_instances == 2)  # the 3g (A30: 2g) profile
    smallest = next(p for p in model.profiles if p.max_instances == max(q.max_instances for q in model.profiles))
    ids = ", ".join(f'"{i}"' for i in sorted(PCI_IDS[model_name]))
    parted = parse_mig_parted(
        config(
            f'  halves:\n    - device-filter: [{ids}]\n      devices: all\n      mig-enabled: true\n      mig-devices: {{"{half.name}": 2}}\n'
            f"  split:\n    - device-filter: [{ids}]\n      devices: [0, 1]\n      mig-enabled: true\n"
            f'      mig-devices: {{"{smallest.name}": {smallest.max_instances}}}\n'
            f"    - device-filter: [{ids}]\n      devices: all\n      mig-enabled: false\n"
            '  elsewhere:\n    - device-filter: ["0x12345678"]\n      devices: all\n      mig-enabled: false\n'
        ),
        source=SOURCE,
    )
    snapshot = cluster(node("n", gpus=4, product=product))
    (gpu_node,) = snapshot.nodes
    resource = "nvidia.com/mig-" + half.name
    assert parted.capacity("halves", gpu_node) == {resource: 8}
    assert parted.capacity("split", gpu_node) == {
        "nvidia.com/mig-" + smallest.name.replace("+", "."): 2 * smallest.max_instances,
        "nvidia.com/gpu": 2,
    }
    assert parted.capacity("elsewhere", gpu_node) is None  # no entry applies: mig-manager would fail
    assert parted.capacity("missing", gpu_node) is None
    assert parted.applicable(gpu_node) == ["halves", "split"]
    assert problems(parted) == []


def test_the_configmap_is_found_by_reference_or_as_the_operators_own() -> None:
    body = config("  all-disabled:\n    - devices: all\n      mig-enabled: false\n")
    maps = [
        ConfigMap("gpu-operator", "default-mig-parted-config", {"config.yaml": body}),
        ConfigMap("gpu-operator", "custom-mig-parted-config", {"config.yaml": body}),
        ConfigMap("mine", "layouts", {"config.yaml": body}),
        ConfigMap("mine", "empty", {}),
    ]
    assert find_mig_parted(maps) is not None and find_mig_parted(maps).source == "gpu-operator/custom-mig-parted-config"  # type: ignore[union-attr]
    assert find_mig_parted(maps, "mine/layouts").source == "mine/layouts"  # type: ignore[union-attr]
    assert find_mig_parted(maps, "mine/absent") is None
    with pytest.raises(InputError, match=r"has no config\.yaml key"):
        find_mig_parted(maps, "mine/empty")


def test_each_node_reads_its_generated_config_unless_a_custom_one_replaces_them() -> None:
    """mig-manager (GPU Operator >= v26.3) writes ConfigMap <node>-mig-config, labelled nvidia.com/node-name, from NVML;
    a custom config replaces the generated ones; nodes without one read default-mig-parted-config."""

    def body(name: str) -> str:
        return config(f'  {name}:\n    - devices: all\n      mig-enabled: true\n      mig-devices: {{"1g.10gb": 7}}\n')

    generated = ConfigMap(
        "gpu-operator", "n1-mig-config", {"config.yaml": body("generated")}, {"nvidia.com/node-name": "n1"}
    )
    default = ConfigMap("gpu-operator", "default-mig-parted-config", {"config.yaml": body("shared")})
    custom = ConfigMap("gpu-operator", "custom-mig-parted-config", {"config.yaml": body("custom")})
    stray = ConfigMap(
        "gpu-operator", "n2-mig-config", {"config.yaml": body("stray")}, {"nvidia.com/node-name": "someone-else"}
    )
    n1, n2 = cluster(node("n1", gpus=1, product=A100_80), node("n2", gpus=1, product=A100_80)).nodes
    layouts = find_mig_parted([generated, default, stray])
    assert layouts is not None
    assert (layouts.applicable(n1), layouts.applicable(n2)) == (["generated"], ["shared"])
    assert (
        layouts.capacity("generated", n1) == {"nvidia.com/mig-1g.10gb": 7} and layouts.capacity("generated", n2) is None
    )
    layouts = find_mig_parted([generated, default, custom])
    assert layouts is not None and (layouts.applicable(n1), layouts.applicable(n2)) == (["custom"], ["custom"])
    only_generated = find_mig_parted([generated])
    assert (
        only_generated is not None
        and only_generated.applicable(n2) == []
        and only_generated.applicable(n1) == ["generated"]
    )

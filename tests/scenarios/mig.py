"""A MIG pool and the GPU Operator's mig-parted layouts, for MIG advice and re-cuts.

``objects()``: two A100-80GB nodes ``a`` and ``b`` (2 GPUs each) cut all-1g.10gb (``sliced``), four 1g.10gb pods
on ``a``, three pending 3g.40gb pods of one Job, and the GPU Operator's ``config_map()`` holding ``LAYOUTS``
(all-1g.10gb, all-3g.40gb, all-balanced, for the A100-80GB device ids in ``FILTER``).
"""

from __future__ import annotations

from typing import Any

from tests.builders import A100_80, node, pod

FILTER = '["0x20B210DE", "0x20B510DE"]'
LAYOUTS = "version: v1\nmig-configs:\n" + "".join(
    f"  {name}:\n    - device-filter: {FILTER}\n      devices: all\n      mig-enabled: true\n      mig-devices: {{{body}}}\n"
    for name, body in (
        ("all-1g.10gb", '"1g.10gb": 7'),
        ("all-3g.40gb", '"3g.40gb": 2'),
        ("all-balanced", '"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1'),
    )
)


def config_map() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "default-mig-parted-config", "namespace": "gpu-operator"},
        "data": {"config.yaml": LAYOUTS},
    }


def sliced(name: str) -> dict[str, Any]:
    """An A100-80GB node, 2 GPUs, cut into 1g.10gb slices."""
    return node(
        name,
        mig={"1g.10gb": 14},
        physical_gpus=2,
        product=A100_80,
        labels={"nvidia.com/mig.config": "all-1g.10gb", "nvidia.com/mig.capable": "true"},
    )


def objects() -> list[dict[str, Any]]:
    return [
        sliced("a"),
        sliced("b"),
        *[pod(f"small-{i}", on="a", mig="1g.10gb") for i in range(4)],
        pod("wait-0", mig="3g.40gb", owner="Job/w"),
        pod("wait-1", mig="3g.40gb", owner="Job/w"),
        pod("wait-2", mig="3g.40gb", owner="Job/w"),
        config_map(),
    ]

"""Small clusters of several GPU pools, for the figures, the exporter and the dashboards.

``small_cluster()``: an A100-40GB pool (a-1 half used by two 2-GPU pods, a-2 whole free, MIG node m-1 with one of its
two 3g.20gb instances idle) and, unless ``with_h100=False``, an H100-80GB pool (h-1, 1 of 8 GPUs used).
"""

from __future__ import annotations

from typing import Any

from tests.builders import A100_40, H100_80, node, pod

Obj = dict[str, Any]


def small_cluster(*, with_h100: bool = True) -> list[Obj]:
    """A100 pool: a-1 half used (2 pods of 2 GPUs), a-2 whole free, MIG node m-1 (one of two 3g.20gb instances idle);
    H100 pool (unless ``with_h100`` is False): h-1 with 1 of 8 GPUs used."""
    objects = [
        node("a-1", gpus=8, product=A100_40),
        node("a-2", gpus=8, product=A100_40),
        node("m-1", mig={"3g.20gb": 2}, product=A100_40),
        pod("train-0", on="a-1", gpus=2),
        pod("train-1", on="a-1", gpus=2),
        pod("infer-0", on="m-1", mig="3g.20gb", cpu="4", memory="16Gi"),
    ]
    if with_h100:
        objects += [node("h-1", gpus=8, product=H100_80), pod("big-0", on="h-1", gpus=1)]
    return objects

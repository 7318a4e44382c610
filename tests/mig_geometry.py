"""The MIG geometry NVIDIA documents per GPU model, the reference the catalog (compactor/model/catalog.py) is checked against.

``reference_geometry()`` reads ../shared/data/nvidia-mig/mig-geometry.json when it is beside the checkout, otherwise
returns ``WRITTEN_GEOMETRY``, the same values written here: per model (memory slots, compute slices, per profile
(compute slices, memory slices, max instances, placement starts, GiB as nvidia-smi shows it or None, verified)).
"""

from __future__ import annotations

import json
from pathlib import Path

# (memory_slots, compute_slices, {profile: (compute, memory, max_instances, starts, GiB or None, verified)}),
# copied from ../shared/data/nvidia-mig/mig-geometry.json for checkouts without that directory.
WRITTEN_GEOMETRY: dict[str, tuple[int, int, dict[str, tuple[int, int, int, tuple[int, ...], float | None, bool]]]] = {
    "A100-40GB": (
        8,
        7,
        {
            "1g.5gb": (1, 1, 7, (0, 1, 2, 3, 4, 5, 6), 4.75, True),
            "1g.5gb+me": (1, 1, 1, (0, 1, 2, 3, 4, 5, 6), 4.75, True),
            "1g.10gb": (1, 2, 4, (0, 2, 4, 6), 9.62, True),
            "2g.10gb": (2, 2, 3, (0, 2, 4), 9.62, True),
            "3g.20gb": (3, 4, 2, (0, 4), 19.5, True),
            "4g.20gb": (4, 4, 1, (0,), 19.5, True),
            "7g.40gb": (7, 8, 1, (0,), 39.25, True),
        },
    ),
    "A100-80GB": (
        8,
        7,
        {
            "1g.10gb": (1, 1, 7, (0, 1, 2, 3, 4, 5, 6), 9.5, True),
            "1g.10gb+me": (1, 1, 1, (0, 1, 2, 3, 4, 5, 6), 9.5, True),
            "1g.20gb": (1, 2, 4, (0, 2, 4, 6), 19.5, False),
            "2g.20gb": (2, 2, 3, (0, 2, 4), 19.5, True),
            "3g.40gb": (3, 4, 2, (0, 4), 39.25, True),
            "4g.40gb": (4, 4, 1, (0,), 39.25, True),
            "7g.80gb": (7, 8, 1, (0,), 78.75, True),
        },
    ),
    "A30-24GB": (
        4,
        4,
        {
            "1g.6gb": (1, 1, 4, (0, 1, 2, 3), 5.81, True),
            "1g.6gb+me": (1, 1, 1, (0, 1, 2, 3), 5.81, True),
            "2g.12gb": (2, 2, 2, (0, 2), 11.69, True),
            "2g.12gb+me": (2, 2, 1, (0, 2), 11.69, True),
            "4g.24gb": (4, 4, 1, (0,), 23.44, True),
        },
    ),
    "H100-80GB": (
        8,
        7,
        {
            "1g.10gb": (1, 1, 7, (0, 1, 2, 3, 4, 5, 6), 9.75, True),
            "1g.10gb+me": (1, 1, 1, (0, 1, 2, 3, 4, 5, 6), 9.75, True),
            "1g.20gb": (1, 2, 4, (0, 2, 4, 6), 19.62, True),
            "2g.20gb": (2, 2, 3, (0, 2, 4), 19.62, True),
            "3g.40gb": (3, 4, 2, (0, 4), 39.5, True),
            "4g.40gb": (4, 4, 1, (0,), 39.5, True),
            "7g.80gb": (7, 8, 1, (0,), 79.25, True),
        },
    ),
    "H200-141GB": (
        8,
        7,
        {
            "1g.18gb": (1, 1, 7, (0, 1, 2, 3, 4, 5, 6), 16.0, False),
            "1g.18gb+me": (1, 1, 1, (0, 1, 2, 3, 4, 5, 6), 16.0, False),
            "1g.35gb": (1, 2, 4, (0, 2, 4, 6), None, False),
            "2g.35gb": (2, 2, 3, (0, 2, 4), 32.5, False),
            "3g.71gb": (3, 4, 2, (0, 4), None, False),
            "4g.71gb": (4, 4, 1, (0,), None, False),
            "7g.141gb": (7, 8, 1, (0,), 140.0, False),
        },
    ),
}

SHARED_GEOMETRY = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "nvidia-mig" / "mig-geometry.json"


def reference_geometry() -> dict[
    str, tuple[int, int, dict[str, tuple[int, int, int, tuple[int, ...], float | None, bool]]]
]:
    """The shared fixture when it is beside the checkout, otherwise the values written above."""
    if not SHARED_GEOMETRY.is_file():
        return WRITTEN_GEOMETRY
    data = json.loads(SHARED_GEOMETRY.read_text(encoding="utf-8"))
    out = {}
    for model in WRITTEN_GEOMETRY:
        entry = data[model]
        profiles = {}
        for p in entry["profiles"]:
            assert all(place["size"] == p["memory_slices"] for place in p["placements"])
            starts = tuple(place["start"] for place in p["placements"])
            gib, verified = p.get("memory_gib_nvidia_smi"), p["status"] == "verified"
            profiles[p["profile"]] = (
                p["compute_slices"],
                p["memory_slices"],
                p["max_instances"],
                starts,
                gib,
                verified,
            )
        out[model] = (entry["memory_slots"], entry["compute_slices"], profiles)
    return out

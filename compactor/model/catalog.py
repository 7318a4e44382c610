"""Built-in catalog of NVIDIA MIG profiles per GPU model.

Sources (NVIDIA documentation):
- MIG User Guide, "Supported MIG Profiles":
  https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html
  (A100-40GB, A100-80GB, A30, H100-80GB, H100-94GB, H100-96GB, H200-141GB tables:
  instances per GPU, fraction of memory and of SMs).
- NVML ``nvmlGpuInstancePlacement_t`` / ``nvmlDeviceGetGpuInstancePossiblePlacements_v2``:
  a placement is ``{start}:size`` on the memory-slice axis; instances may not overlap.
- ``nvidia-smi mig -lgip`` / ``-lgipp`` outputs for memory (GiB) and valid starts.
H200 and H100-96GB (GH200) placements are not published as ``-lgipp`` output; they
are taken equal to H100-80GB (identical memory fractions) and marked ``verified=False``.

Only geometry lives here (compute slices, memory slices, instance limit, valid
starts); the controller should prefer what NVML reports on the node at runtime.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class MigProfile:
    name: str  # e.g. "3g.40gb", "1g.10gb+me"
    compute_slices: int
    memory_slices: int
    max_instances: int
    starts: tuple[int, ...]
    memory_gib: float
    verified: bool = True


@dataclass(frozen=True, slots=True)
class GpuModel:
    name: str
    memory_slots: int
    compute_slices: int
    profiles: tuple[MigProfile, ...]

    def profile(self, name: str) -> MigProfile | None:
        for candidate in self.profiles:
            if candidate.name == name:
                return candidate
        return None

    def fraction(self, profile: MigProfile) -> float:
        """Share of the physical GPU an instance occupies, on the memory-slice (placement) axis."""
        return profile.memory_slices / self.memory_slots


def _seven_slice_family(  # noqa: PLR0913
    name: str,
    small: str,
    double: str,
    two: str,
    three: str,
    four: str,
    full: str,
    gib: tuple[float, float, float, float],
    verified_placements: bool = True,
) -> GpuModel:
    """A100/H100/H200 share one geometry: 8 memory slots, 7 compute slices."""
    g1, g2, g4, g8 = gib
    v = verified_placements
    return GpuModel(
        name=name,
        memory_slots=8,
        compute_slices=7,
        profiles=(
            MigProfile(small, 1, 1, 7, (0, 1, 2, 3, 4, 5, 6), g1, v),
            MigProfile(small + "+me", 1, 1, 1, (0, 1, 2, 3, 4, 5, 6), g1, v),
            MigProfile(double, 1, 2, 4, (0, 2, 4, 6), g2, False if name == "A100-80GB" else v),
            MigProfile(two, 2, 2, 3, (0, 2, 4), g2, v),
            MigProfile(three, 3, 4, 2, (0, 4), g4, v),
            MigProfile(four, 4, 4, 1, (0,), g4, v),
            MigProfile(full, 7, 8, 1, (0,), g8, v),
        ),
    )


A100_40GB = _seven_slice_family(
    "A100-40GB",
    "1g.5gb",
    "1g.10gb",
    "2g.10gb",
    "3g.20gb",
    "4g.20gb",
    "7g.40gb",
    (4.75, 9.62, 19.5, 39.25),
)
A100_80GB = _seven_slice_family(
    "A100-80GB",
    "1g.10gb",
    "1g.20gb",
    "2g.20gb",
    "3g.40gb",
    "4g.40gb",
    "7g.80gb",
    (9.5, 19.5, 39.25, 78.75),
)
H100_80GB = _seven_slice_family(
    "H100-80GB",
    "1g.10gb",
    "1g.20gb",
    "2g.20gb",
    "3g.40gb",
    "4g.40gb",
    "7g.80gb",
    (9.75, 19.62, 39.5, 79.25),
)
H100_94GB = _seven_slice_family(
    "H100-94GB",
    "1g.12gb",
    "1g.24gb",
    "2g.24gb",
    "3g.47gb",
    "4g.47gb",
    "7g.94gb",
    (11.0, 22.0, 44.0, 88.0),
)
H200_141GB = _seven_slice_family(
    "H200-141GB",
    "1g.18gb",
    "1g.35gb",
    "2g.35gb",
    "3g.71gb",
    "4g.71gb",
    "7g.141gb",
    (16.0, 32.5, 65.0, 140.0),
    verified_placements=False,
)
A30_24GB = GpuModel(
    name="A30-24GB",
    memory_slots=4,
    compute_slices=4,
    profiles=(
        MigProfile("1g.6gb", 1, 1, 4, (0, 1, 2, 3), 5.81),
        MigProfile("1g.6gb+me", 1, 1, 1, (0, 1, 2, 3), 5.81),
        MigProfile("2g.12gb", 2, 2, 2, (0, 2), 11.69),
        MigProfile("2g.12gb+me", 2, 2, 1, (0, 2), 11.69),
        MigProfile("4g.24gb", 4, 4, 1, (0,), 23.44),
    ),
)

# H100 on GH200 (and H20 96GB): MIG user guide "H100-96GB" table; placements assumed equal to H100-80GB.
H100_96GB = _seven_slice_family(
    "H100-96GB",
    "1g.12gb",
    "1g.24gb",
    "2g.24gb",
    "3g.48gb",
    "4g.48gb",
    "7g.96gb",
    (11.0, 22.0, 44.0, 88.0),
    verified_placements=False,
)

MODELS: tuple[GpuModel, ...] = (A100_40GB, A100_80GB, H100_80GB, H100_94GB, H100_96GB, H200_141GB, A30_24GB)


def model_for_product(product: str) -> GpuModel | None:
    """Map a GFD ``nvidia.com/gpu.product`` value (e.g. ``NVIDIA-A100-SXM4-80GB``) to a model.

    Matches whole dash-separated tokens, so ``GH200`` is not taken for ``H200`` nor
    ``RTX-A3000`` for ``A30``. Unknown products return None; the profiles the node
    advertises then decide (``resolve_profiles``).
    """
    tokens = set(product.upper().replace(" ", "-").replace("_", "-").split("-"))
    if "A30" in tokens:
        return A30_24GB
    if "GH200" in tokens:
        # GH200 480GB carries an H100 96GB; the 144GB HBM3e part has other profiles.
        return None if any(t.startswith("144G") for t in tokens) else H100_96GB
    if "H200" in tokens or ("H20" in tokens and "3E" in tokens):
        return H200_141GB
    if "H100" in tokens:
        if "NVL" in tokens or "94GB" in tokens:
            return H100_94GB
        return H100_96GB if "96GB" in tokens else H100_80GB
    if "A100" in tokens:
        return A100_80GB if "80GB" in tokens else A100_40GB
    return None


def profile_from_resource(resource: str) -> str:
    """``nvidia.com/mig-1g.10gb.me`` -> ``1g.10gb+me`` (the device plugin maps ``+`` to ``.``)."""
    name = resource.removeprefix("nvidia.com/mig-")
    if name.endswith(".me"):
        name = name[: -len(".me")] + "+me"
    return name


def resource_for_profile(profile: str) -> str:
    return "nvidia.com/mig-" + profile.replace("+", ".")


def resolve_profiles(product: str, profiles: list[str]) -> tuple[GpuModel | None, dict[str, MigProfile]]:
    """Find the GPU model for a node and the catalog entry of each profile it advertises.

    The product label decides; without it, the first model that knows every profile
    (``1g.10gb`` means one memory slice on 80GB parts but two on A100-40GB, so order
    matters: 80GB parts are listed after A100-40GB but win when another profile
    points at them).
    """
    model = model_for_product(product)
    if model is None and profiles:
        # The model that knows the most of the advertised profiles; one unknown profile
        # must not make the known ones unknown too.
        known = {m.name: sum(1 for p in profiles if m.profile(p)) for m in MODELS}
        best = max(known.values())
        candidates = [m for m in MODELS if best and known[m.name] == best]
        preferred = [m for m in candidates if m.name != "A100-40GB"] or candidates
        model = preferred[0] if preferred else None
    if model is None:
        return None, {}
    found = {p: prof for p in profiles if (prof := model.profile(p)) is not None}
    return model, found

"""Immutable resource vectors in scheduler units (see ``quantity``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

GPU = "nvidia.com/gpu"
GPU_SHARED = "nvidia.com/gpu.shared"
MIG_PREFIX = "nvidia.com/mig-"
CPU = "cpu"
MEMORY = "memory"
PODS = "pods"


def is_mig_resource(name: str) -> bool:
    return name.startswith(MIG_PREFIX)


def is_gpu_resource(name: str) -> bool:
    """Whole, shared or MIG GPU devices advertised by the NVIDIA device plugin."""
    return name in (GPU, GPU_SHARED) or name.startswith(MIG_PREFIX)


class Resources(Mapping[str, int]):
    """A read-only ``resource -> amount`` map; zero entries are dropped so equal vectors compare equal."""

    __slots__ = ("_hash", "_items")

    def __init__(self, items: Mapping[str, int] | Iterable[tuple[str, int]] = ()) -> None:
        pairs = items.items() if isinstance(items, Mapping) else items
        self._items: dict[str, int] = {k: v for k, v in pairs if v}
        self._hash: int | None = None

    def __getitem__(self, key: str) -> int:
        return self._items[key]

    def get(self, key: str, default: int = 0) -> int:  # type: ignore[override]
        return self._items.get(key, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._items.items()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Resources):
            return self._items == other._items
        if isinstance(other, Mapping):
            return self._items == {k: v for k, v in other.items() if v}
        return NotImplemented

    def __repr__(self) -> str:
        return f"Resources({self._items!r})"

    def __add__(self, other: Mapping[str, int]) -> Resources:
        merged = dict(self._items)
        for key, value in other.items():
            merged[key] = merged.get(key, 0) + value
        return Resources(merged)

    def __sub__(self, other: Mapping[str, int]) -> Resources:
        merged = dict(self._items)
        for key, value in other.items():
            merged[key] = merged.get(key, 0) - value
        return Resources(merged)

    def scaled(self, factor: int) -> Resources:
        return Resources({k: v * factor for k, v in self._items.items()})

    def fits_in(self, free: Mapping[str, int]) -> bool:
        """True when every requested amount is available in ``free``."""
        return all(value <= free.get(key, 0) for key, value in self._items.items())

    def gpu_part(self) -> Resources:
        return Resources({k: v for k, v in self._items.items() if is_gpu_resource(k)})

    def as_dict(self) -> dict[str, int]:
        return dict(self._items)


EMPTY = Resources()


def total(vectors: Iterable[Mapping[str, int]]) -> Resources:
    acc: dict[str, int] = {}
    for vector in vectors:
        for key, value in vector.items():
            acc[key] = acc.get(key, 0) + value
    return Resources(acc)


def elementwise_max(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    merged = dict(a)
    for key, value in b.items():
        if value > merged.get(key, 0):
            merged[key] = value
    return merged

"""How a request shape is written (``nvidia.com/gpu=4,cpu=8,memory=32Gi``): the unit of the shapes the plan aims at
(``aims.target_shapes``) and of the shapes the figures are measured against (``metrics.reference_shapes``)."""

from __future__ import annotations

from compactor.model.quantity import parse_quantity, to_scheduler_units
from compactor.model.resources import Resources


def parse_shape(text: str) -> Resources:
    """``nvidia.com/gpu=4,cpu=8,memory=32Gi`` -> a request vector."""
    amounts: dict[str, int] = {}
    for part in text.replace(" ", ",").split(","):
        if not part:
            continue
        name, sep, value = part.partition("=")
        if not sep or not name:
            raise ValueError(f"expected resource=quantity, got {part!r}")
        _check_resource(name, value)
        amounts[name] = to_scheduler_units(name, value)
    if not amounts:
        raise ValueError("empty shape")
    return Resources(amounts)


_NATIVE_RESOURCES = ("cpu", "memory", "ephemeral-storage")


def _check_resource(name: str, value: str) -> None:
    """A name a pod may request, and for extended resources (``nvidia.com/gpu``) a whole number, as the API server requires."""
    if name in _NATIVE_RESOURCES or name.startswith("hugepages-"):
        return
    if "/" not in name or name.startswith(("kubernetes.io/", "requests.")):
        raise ValueError(
            f"unknown resource {name!r}: expected cpu, memory, ephemeral-storage, hugepages-<size> or an extended "
            "resource such as nvidia.com/gpu or nvidia.com/mig-1g.5gb"
        )
    amount = parse_quantity(value)
    if amount != int(amount):
        raise ValueError(
            f"{name}={value}: an extended resource is requested in whole units (a GPU is not shared by fractions)"
        )


def check_shapes(value: list[str]) -> list[str]:
    """Every shape string parses (the error names the bad entry)."""
    for text in value:
        parse_shape(text)
    return value

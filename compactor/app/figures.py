"""The figures use case: the reference shapes of a snapshot and the fragmentation figures measured with them.

Every entry point (``report``, ``plan``, ``run --once``, a controller cycle, the summary a run leaves) derives its
shapes here, so the same snapshot and settings give the same shapes, hence the same figures and the same plan:
``metrics.reference_shapes`` when set, else the workload's own requests, most frequent first, until they cover
``metrics.shape_coverage`` of the GPU pods, at most ``metrics.max_shapes`` of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from compactor.actions.port import annotations as ann
from compactor.app.sources import check_shapes
from compactor.metrics.fragmentation import Figures, ReferenceShape, compute_figures, reference_shapes
from compactor.model.types import Snapshot
from compactor.settings.origins import Settings


def shapes_for(snapshot: Snapshot, settings: Settings) -> tuple[ReferenceShape, ...]:
    """The reference shapes of ``snapshot`` under ``settings`` (see the module docstring)."""
    return reference_shapes(
        snapshot,
        configured=settings.metrics.shapes() or None,
        coverage=settings.metrics.shape_coverage,
        max_shapes=settings.metrics.max_shapes,
    )


def figures_for(snapshot: Snapshot, settings: Settings, shapes: tuple[ReferenceShape, ...] | None = None) -> Figures:
    """The figures of ``snapshot``, measured with ``shapes`` (those of ``shapes_for`` when None)."""
    return compute_figures(snapshot, shapes if shapes is not None else shapes_for(snapshot, settings))


def cordoned_nodes(snapshot: Snapshot) -> int:
    """Nodes carrying the compactor's fence mark (``compactor.io/cordoned-by``: the key kept from when fences were
    cordons); gpu_compactor_fenced_nodes."""
    return sum(1 for node in snapshot.nodes if ann.CORDONED_BY in node.annotations)


@dataclass(frozen=True)
class Measured:
    snapshot: Snapshot
    figures: Figures


def measure(snapshot: Snapshot, settings: Settings) -> Measured:
    """The figures of a loaded snapshot, its configured shapes checked against what its nodes offer first."""
    check_shapes(snapshot, settings)
    return Measured(snapshot, figures_for(snapshot, settings))

"""``compactor report --advise``: the command-line glue around ``advise``.

The advice itself is ``compactor.metrics.advice`` (pure); the report words it as a section of its own
(``compactor.render.report.advice_section``, with the report's ``Section``/``Table`` types, so text and markdown carry the same
facts); this module reads the command's options.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from compactor.errors import CompactorError
from compactor.metrics.advice import DEFAULT_PER_SHAPE, DEFAULT_TOP, Advice, advise

if TYPE_CHECKING:
    from compactor.metrics.fragmentation import Figures
    from compactor.model.types import Snapshot
    from compactor.settings import Settings


def advice_from_args(
    args: argparse.Namespace, snapshot: Snapshot, figures: Figures, settings: Settings
) -> Advice | None:
    """The advice ``--advise`` asks for (None without it); ``--advise-top N`` measures the roundings of N shapes."""
    top = getattr(args, "advise_top", None)
    if not getattr(args, "advise", False):
        if top is not None:
            raise CompactorError("--advise-top goes with --advise")
        return None
    if top is not None and top < 1:
        raise CompactorError(f"--advise-top must be >= 1, got {top}")
    return advise(
        snapshot,
        figures,
        coverage=settings.metrics.shape_coverage,
        max_shapes=settings.metrics.max_shapes,
        top=DEFAULT_TOP if top is None else top,
        per_shape=DEFAULT_PER_SHAPE,
    )

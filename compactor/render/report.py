"""Render fragmentation figures for people (text, markdown) and for programs (JSON).

The content is built once as sections of tables and notes (``report_sections``), then written out in the requested
format (``text``, ``markdown``), so the text and markdown reports always carry the same facts; the JSON is a versioned
envelope around the figures' own JSON form. Pure: returns a string, writes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from compactor.metrics.advice import Advice
from compactor.metrics.figure_types import Figures
from compactor.metrics.figures_json import figures_to_dict
from compactor.model.types import Snapshot
from compactor.render.advice import advice_to_dict
from compactor.render.content import Section
from compactor.render.markdown import render_markdown
from compactor.render.report_sections import report_sections
from compactor.render.text import render_text, report_width

API_VERSION = "compactor/v1alpha1"
KIND = "FragmentationReport"
FORMATS = ("text", "markdown", "json")


def report_document(figures: Figures, snapshot: Snapshot, advice: Advice | None = None) -> dict[str, object]:
    """The JSON report: a versioned envelope around ``figures_to_dict``."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"source": snapshot.source, "warnings": list(snapshot.warnings)},
        "figures": figures_to_dict(figures),
        **({"advice": advice_to_dict(advice)} if advice is not None else {}),
    }


def render_report(
    figures: Figures, snapshot: Snapshot, fmt: str, advice: Advice | None = None, width: int | None = None
) -> str:
    """``fmt`` is text, markdown or json; ``advice`` (``report --advise``) adds its section and the JSON key ``advice``;
    text fits ``width`` columns (default ``report_width()``)."""
    if fmt == "json":
        return json.dumps(report_document(figures, snapshot, advice), indent=2) + "\n"
    writers: dict[str, Callable[[str, Sequence[Section]], str]] = {
        "text": lambda title, sections: render_text(title, sections, width or report_width()),
        "markdown": render_markdown,
    }
    if fmt not in writers:
        raise ValueError(f"unknown report format {fmt!r}; expected one of {', '.join(FORMATS)}")
    title = f"GPU fragmentation report: {snapshot.source}" if snapshot.source else "GPU fragmentation report"
    return writers[fmt](title, report_sections(figures, snapshot, advice))

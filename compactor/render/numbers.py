"""How the renderers write numbers: one function per kind of number, so a figure reads the same in the text, markdown
and HTML reports, the plan and the run's report.

Apart from the renderers it serves because those kinds recur in all of them; a format that belongs to one place only
(the SVG's coordinates, a table's column alignment) stays where it is used. CPU and memory amounts are written by
``compactor.metrics.cpu_pods`` (``cpus``, ``memory``), whose own sentences use them too.
"""

from __future__ import annotations


def fmt_gpus(value: float) -> str:
    """GPU-equivalents with up to 2 decimals: ``3``, ``3.5``, ``0.13``."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def fmt_gpus_aligned(value: float) -> str:
    """GPU-equivalents with exactly 2 decimals (``3.50``): a column of them lines up on the point."""
    return f"{value:.2f}"


def fmt_pct(value: float | None, decimals: int = 1) -> str:
    """A share as a percentage: ``47.6%``; ``n/a`` when it is undefined (a share of nothing)."""
    return "n/a" if value is None else f"{100 * value:.{decimals}f}%"


def fmt_moves(value: float) -> str:
    """A cost or bound in moves (one eviction costs about 1): ``3``, ``6.92``, without trailing zeros."""
    return f"{value:g}"


def fmt_change(value: int) -> str:
    """A count's change, signed even when none: ``+2``, ``-1``, ``+0``."""
    return f"{value:+d}"


def fmt_seconds(value: float) -> str:
    """A duration of the planner's, to the hundredth: ``0.39s``."""
    return f"{value:.2f}s"

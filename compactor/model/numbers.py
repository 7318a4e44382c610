"""How every number is written: one function per kind of number, so a figure reads the same in the text, markdown
and HTML reports, the plan, the run's report and the sentences the figures say of themselves (``compactor.metrics``:
advice, CPU pods on GPU nodes, what changed).

A format that belongs to one place only (the SVG's coordinates, a table's column alignment) stays where it is used.
Pure, like the rest of ``compactor.model``: the figures (``metrics``) and the renderers (``render``) both use it.
"""

from __future__ import annotations


def fmt_gpus(value: float) -> str:
    """GPU-equivalents with up to 2 decimals: ``3``, ``3.5``, ``0.13``."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def fmt_gpus_exact(value: float) -> str:
    """GPU-equivalents with up to 3 decimals, so eighths of a GPU (MIG slices) print exactly: ``3``, ``0.5``, ``0.625``."""
    text = f"{value:.3f}".rstrip("0").rstrip(".")
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


def fmt_cpus(millicores: int) -> str:
    """``63,728`` CPUs, ``2.5`` CPUs."""
    return f"{millicores // 1000:,}" if millicores % 1000 == 0 or millicores >= 100_000 else f"{millicores / 1000:,.1f}"


def fmt_memory(amount: int) -> str:
    """``172.6Ti``, ``512Gi``, ``300Mi``: binary units, one decimal at most."""
    for suffix, factor in (("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20)):
        if amount >= factor:
            return f"{amount / factor:.1f}".removesuffix(".0") + suffix
    return f"{amount}B"

"""Text helpers shared by the reports: long lists shortened with a count, so no line runs to a thousand characters."""

from __future__ import annotations

from collections.abc import Sequence

LIST_LIMIT = 10  # names shown before "and N more"


def listed(items: Sequence[str], limit: int = LIST_LIMIT, *, more: str = "-o json lists all") -> str:
    """``a, b, c`` or, past ``limit`` items, ``a, b, ... and 12 more (-o json lists all)``."""
    if len(items) <= limit:
        return ", ".join(items)
    return f"{', '.join(items[:limit])}, ... and {len(items) - limit} more ({more})"

"""Report sections written as plain text for a terminal: titles underlined, tables fitted to the width.

Apart from the markdown writer and the sections themselves: fitting columns to a width is the one hard part of text
output, and neither of those needs it.
"""

from __future__ import annotations

import math
import shutil
import textwrap
from collections.abc import Sequence

from compactor.render.content import Section, Table

DEFAULT_WIDTH = 100  # when neither $COLUMNS nor a terminal says
MIN_COLUMN = 10  # a column is never squeezed below this many characters


def report_width() -> int:
    """$COLUMNS, else the terminal's width, else DEFAULT_WIDTH (a pipe, a file, CI)."""
    return max(40, shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns)


def _fitted_widths(widths: list[int], right: frozenset[int], room: int) -> list[int]:
    """Column widths summing to at most ``room`` where they can: text columns give way in proportion to what they have
    above MIN_COLUMN, then the first column (what a row is about) if it must; numbers never do."""
    fitted = list(widths)
    for flexible in ([i for i in range(1, len(fitted)) if i not in right], [0] if 0 not in right else []):
        excess = sum(fitted) - room
        slack = sum(max(0, fitted[i] - MIN_COLUMN) for i in flexible)
        if excess <= 0 or slack <= 0:
            continue
        for i in flexible:
            fitted[i] -= min(max(0, fitted[i] - MIN_COLUMN), math.ceil(excess * max(0, fitted[i] - MIN_COLUMN) / slack))
    return fitted


def _wrapped_row(
    cells: Sequence[str], widths: Sequence[int], right: frozenset[int], *, clip: bool = False
) -> list[str]:
    """One table row as text lines: each text cell wraps within its column (a header clips to three lines)."""
    parts = [[v] if i in right and not clip else textwrap.wrap(v, widths[i]) or [""] for i, v in enumerate(cells)]
    if clip:
        parts = [p[:3] for p in parts]
    last = len(cells) - 1
    lines = []
    for depth in range(max(map(len, parts))):
        words = [p[depth] if depth < len(p) else "" for p in parts]
        line = "".join(
            (w.rjust(widths[i]) if i in right else w.ljust(widths[i])) + "  " for i, w in enumerate(words[:last])
        )
        lines.append(("  " + line + (words[last].rjust(widths[last]) if last in right else words[last])).rstrip())
    return lines


def _text_table(table: Table, width: int = DEFAULT_WIDTH) -> list[str]:
    """The table within ``width`` columns where it can be: headers wrap over up to three lines and text cells wrap in
    their column (the widest give way first); the first column and numbers keep their width."""
    headers = table.headers if table.show_headers else ()
    natural = [
        max([len(row[i]) for row in table.rows] + [max(map(len, h.split()), default=0) for h in headers[i : i + 1]])
        for i in range(len(table.headers))
    ]
    spare = width - 2 - 2 * (len(natural) - 1) - sum(natural)
    for i, header in enumerate(headers):  # a header wider than its values takes what is left, on one line
        grow = min(max(0, len(header) - natural[i]), max(0, spare))
        natural[i] += grow
        spare -= grow
    widths = _fitted_widths(natural, table.right, width - 2 - 2 * (len(natural) - 1))
    out = _wrapped_row(headers, widths, table.right, clip=True) if headers else []
    if headers:
        out.append("  " + "  ".join("-" * w for w in widths))
    for row in table.rows:
        out += _wrapped_row(row, widths, table.right)
    return out


def render_text(title: str, sections: Sequence[Section], width: int = DEFAULT_WIDTH) -> str:
    out = [title, "=" * len(title)]
    for section in sections:
        out += ["", section.title, "-" * len(section.title)]
        for block in section.blocks:
            out += (
                _text_table(block, width)
                if isinstance(block, Table)
                else textwrap.wrap(block, width, initial_indent="  ", subsequent_indent="    ") or [""]
            )
    return "\n".join(out) + "\n"

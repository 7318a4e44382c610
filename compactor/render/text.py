"""Report sections written as plain text for a terminal: titles underlined, tables fitted to the width.

Apart from the markdown writer and the sections themselves: fitting columns to a width is the one hard part of text
output, and neither of those needs it.
"""

from __future__ import annotations

import math
import re
import shutil
import textwrap
from collections.abc import Sequence

from compactor.render.content import Section, Table

DEFAULT_WIDTH = 100  # when neither $COLUMNS nor a terminal says
MIN_COLUMN = 8  # a column is never squeezed below this many characters (nor below its longest word)


def report_width() -> int:
    """$COLUMNS, else the terminal's width, else DEFAULT_WIDTH (a pipe, a file, CI)."""
    return max(40, shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns)


def _fitted_widths(widths: list[int], right: frozenset[int], room: int, floors: Sequence[int]) -> list[int]:
    """Column widths summing to at most ``room`` where they can: text columns give way in proportion to what they have
    above their floor (MIN_COLUMN, or the column's longest word: a word is never cut), then the first column (what a row
    is about) if it must; numbers never do."""
    fitted = list(widths)
    floor = [min(w, max(MIN_COLUMN, f)) for w, f in zip(fitted, floors, strict=True)]
    for flexible in ([i for i in range(1, len(fitted)) if i not in right], [0] if 0 not in right else []):
        excess = sum(fitted) - room
        slack = sum(max(0, fitted[i] - floor[i]) for i in flexible)
        if excess <= 0 or slack <= 0:
            continue
        for i in flexible:
            fitted[i] -= min(max(0, fitted[i] - floor[i]), math.ceil(excess * max(0, fitted[i] - floor[i]) / slack))
    return fitted


def wrap(
    text: str, width: int, *, hyphens: bool = False, initial_indent: str = "", subsequent_indent: str = ""
) -> list[str]:
    """``text`` in lines of at most ``width`` where its words allow: broken between words only (a resource name, a
    node name or a path is never cut in two; a word longer than the line stands alone on it); with ``hyphens``, after
    a hyphen too (a header's English words: "Whole-" / "free")."""
    return textwrap.wrap(
        text,
        width,
        break_long_words=False,
        break_on_hyphens=hyphens,
        initial_indent=initial_indent,
        subsequent_indent=subsequent_indent,
    )


def _header_words(header: str) -> list[str]:
    """What a header may wrap to: its words, a compound split after its hyphens ("Whole-" / "free", "(GPU-" / "eq.)")."""
    return [part for word in header.split() for part in re.findall(r"[^-]+-?|-", word)]


def fitted(lines: Sequence[str], width: int) -> list[str]:
    """Lines of at most ``width`` where their words allow, each too long one wrapped under its own indent (a numbered
    line's continuation under its text, others two columns further in): for output written line by line, as a plan
    is."""
    out: list[str] = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        lead = line[: len(line) - len(line.lstrip())]
        numbered = re.match(r"\s*\d+\.\s+", line)
        hang = " " * (numbered.end() if numbered else len(lead) + 2)
        out += wrap(line.strip(), width, initial_indent=lead, subsequent_indent=hang) or [line]
    return out


def _wrapped_row(
    cells: Sequence[str], widths: Sequence[int], right: frozenset[int], *, clip: bool = False
) -> list[str]:
    """One table row as text lines: each text cell wraps within its column (a header clips to three lines)."""
    parts = [[v] if i in right and not clip else wrap(v, widths[i], hyphens=clip) or [""] for i, v in enumerate(cells)]
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
        max(
            [len(row[i]) for row in table.rows]
            + [max(map(len, _header_words(h)), default=0) for h in headers[i : i + 1]]
        )
        for i in range(len(table.headers))
    ]
    spare = width - 2 - 2 * (len(natural) - 1) - sum(natural)
    for i, header in enumerate(headers):  # a header wider than its values takes what is left, on one line
        grow = min(max(0, len(header) - natural[i]), max(0, spare))
        natural[i] += grow
        spare -= grow
    longest_word = [max((len(w) for row in table.rows for w in row[i].split()), default=0) for i in range(len(natural))]
    widths = _fitted_widths(natural, table.right, width - 2 - 2 * (len(natural) - 1), longest_word)
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
                else wrap(block, width, initial_indent="  ", subsequent_indent="    ") or [""]
            )
    return "\n".join(out) + "\n"

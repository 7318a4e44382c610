"""What a report says, before it is written out: sections of tables and notes.

Apart from the writers (``text``, ``markdown``, the HTML page) and from what fills them (``report_sections``,
``advice``) so that each of those imports these types alone, and every format carries the same facts.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Table:
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    right: frozenset[int] = frozenset()  # columns aligned right (numbers)
    show_headers: bool = True  # False: a key/value list in text form


@dataclass(frozen=True)
class Section:
    title: str
    blocks: tuple[Table | str, ...] = field(default=())

"""Report sections written as markdown: a heading per section, a pipe table per table.

Apart from the text writer because it needs none of its width fitting: a markdown viewer wraps the table itself.
"""

from __future__ import annotations

from collections.abc import Sequence

from compactor.render.content import Section, Table


def _md_cell(value: str) -> str:
    return value.replace("|", "\\|")


def _md_table(table: Table) -> list[str]:
    align = ["---:" if i in table.right else "---" for i in range(len(table.headers))]
    rows = [table.headers, tuple(align), *table.rows]
    return ["| " + " | ".join(_md_cell(v) if r != 1 else v for v in row) + " |" for r, row in enumerate(rows)]


def render_markdown(title: str, sections: Sequence[Section]) -> str:
    out = [f"# {title}"]
    for section in sections:
        out += ["", f"## {section.title}", ""]
        for block in section.blocks:
            out += _md_table(block) if isinstance(block, Table) else [_md_cell(block)]
    return "\n".join(out) + "\n"

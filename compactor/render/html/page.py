"""The HTML page's skeleton and building blocks: the head with its stylesheet and Content-Security-Policy, escaping,
tables, lists, cards and report sections.

Apart from what fills the page (``occupancy``, ``curve``, ``plan``, the package's ``__init__``) because all of them build on
these and the stylesheet holds every class they use: the page's look is decided here once.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

from compactor.render.content import Section, Table

LONG_LIST = 20  # rows beyond which a list folds into <details>: the ticket stays short, nothing is left out
CELLS_PER_ROW = 8  # one row per 8-GPU board; MIG slices of one profile wrap after 8

# .u .m .p .s .f .w: the cell classes of ``occupancy`` (one letter each: a big picture has tens of thousands).
_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2430;margin:1.5em auto;max-width:1280px;padding:0 1em}
h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.2em;margin:1.6em 0 .4em;border-bottom:1px solid #d0d7de}h3{font-size:1em;margin:1em 0 .3em}
.meta{color:#57606a}.warn{background:#fff4e5;border-left:4px solid #e0a526;padding:.4em .8em;margin:.6em 0}
.cards{display:flex;flex-wrap:wrap;gap:.8em;margin:.8em 0}
.card{border:1px solid #d0d7de;border-radius:6px;padding:.5em .9em;min-width:12em}
.card .v{font-size:1.6em;font-weight:600}.card .l{color:#57606a;font-size:.85em}
table{border-collapse:collapse;margin:.4em 0}th,td{border:1px solid #d0d7de;padding:.2em .5em;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.r{text-align:right}tr.why th{background:#eef3fb;font-weight:normal}
details{margin:.4em 0}summary{cursor:pointer;color:#0a5ac2}
.legend{display:flex;flex-wrap:wrap;gap:1em;margin:.4em 0}.legend b{display:inline-block;width:10px;height:10px;margin-right:.3em;vertical-align:-1px}
.nodes{display:flex;flex-wrap:wrap;gap:3px;align-items:flex-start}
.node{display:flex;flex-direction:column;gap:2px;padding:2px;border:1px solid #aeb6bf;border-radius:2px}
.node.freed{border-color:#1f7a33;box-shadow:0 0 0 1px #1f7a33}.node.filled{border-color:#7b3fa0}.node.off{border-style:dashed;opacity:.55}
.res{display:grid;grid-template-columns:repeat(8,6px);gap:1px}.res i{display:block;width:6px;height:6px}
.node .n{font-size:8px;line-height:1.15;color:#57606a;width:55px;max-height:2.3em;overflow:hidden;word-break:break-all}
.terms{display:grid;grid-template-columns:max-content 1fr;gap:.1em .8em;margin:.2em 0 .6em;color:#57606a;font-size:.9em}
.terms dt{font-weight:600}.terms dd{margin:0}
.u{background:#4a6fa5}.m{background:#e0a526}.p{background:#7b3fa0}.s{background:#d9534f}.f{background:#dde3ea}.w{background:#2ea44f}
svg text{font-size:11px;fill:#1d2430}svg .axis{stroke:#57606a}svg .line{fill:none;stroke:#4a6fa5;stroke-width:1.5}
svg .pt{fill:#4a6fa5}svg .chosen{fill:#2ea44f;stroke:#1d2430;stroke-width:1.5}
"""

# Nothing but the inline style may load: a pod name that smuggled markup past the escaping still could not fetch anything.
_CSP = "default-src 'none'; style-src 'unsafe-inline'"


def esc(value: object) -> str:
    """Any value as HTML text, quotes too: everything from the cluster (names, reasons) passes here."""
    return html.escape(str(value), quote=True)


def page(title: str, body: Iterable[str]) -> str:
    head = (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{esc(title)}</title>'
        f"<style>{_CSS}</style></head><body>\n"
    )
    return head + "\n".join(body) + "\n</body></html>\n"


def table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], right: Iterable[int] = (), *, show_headers: bool = True
) -> str:
    """A table of escaped cells; more than LONG_LIST rows fold into <details>."""
    right = frozenset(right)
    head = "<tr>" + "".join(f"<th>{esc(h)}</th>" for h in headers) + "</tr>" if show_headers else ""
    body = "".join(
        "<tr>"
        + "".join(f'<td class="r">{esc(c)}</td>' if i in right else f"<td>{esc(c)}</td>" for i, c in enumerate(row))
        + "</tr>"
        for row in rows
    )
    return folded(f"<table>{head}{body}</table>", len(rows), "rows")


def folded(content: str, count: int, noun: str) -> str:
    return f"<details><summary>{count} {esc(noun)}</summary>{content}</details>" if count > LONG_LIST else content


def item_list(items: Sequence[str], noun: str) -> str:
    return folded("<ul>" + "".join(f"<li>{esc(item)}</li>" for item in items) + "</ul>", len(items), noun)


def warning_paragraphs(warnings: Sequence[str]) -> str:
    return "".join(f'<p class="warn">{esc(w)}</p>' for w in warnings)


def cards(shown: Sequence[tuple[str, str, str]]) -> str:
    """(label, value, detail) per card: the headline figures, big."""
    return (
        '<div class="cards">'
        + "".join(
            f'<div class="card"><div class="l">{esc(label)}</div><div class="v">{esc(value)}</div><div class="l">{esc(detail)}</div></div>'
            for label, value, detail in shown
        )
        + "</div>"
    )


def report_section(section: Section) -> str:
    """One of the report's sections (``report_sections``), generically: tables as tables, notes as paragraphs."""
    out = [f"<h2>{esc(section.title)}</h2>"]
    for block in section.blocks:
        if isinstance(block, Table):
            out.append(table(block.headers, block.rows, block.right, show_headers=block.show_headers))
        else:
            out.append(f"<p>{esc(block)}</p>")
    return "\n".join(out)

"""The trait tables of ``js/PROTOCOL.md`` as :mod:`.codegen` writes them: regenerated between the file's ``traits``
markers and padded as prettier pads a Markdown table, so that the file passes ``prettier --check`` as written."""

from __future__ import annotations

import itertools
import re
import unicodedata

from .protocol import markdown_tables

__all__ = ["protocol_md"]


def protocol_md(current: str) -> str:
    """``js/PROTOCOL.md`` with its trait tables (between its ``traits`` markers) regenerated."""
    begin = current.index("<!-- traits: begin")
    begin = current.index("\n", begin) + 1
    end = current.index("<!-- traits: end -->")
    return current[:begin] + "\n" + _padded(markdown_tables()) + "\n\n" + current[end:]


def _width(text: str) -> int:
    """A cell's width as prettier measures it: wide East Asian characters 2, combining marks 0, others 1."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _padded(markdown: str) -> str:
    """``markdown`` with each table's columns padded to their widest cell and its rule drawn to match, as prettier
    writes it, so that the generated file passes ``prettier --check`` as written (no formatter afterwards)."""
    out: list[str] = []
    for is_table, group in itertools.groupby(markdown.split("\n"), key=lambda line: line.startswith("|")):
        lines = list(group)
        if not is_table:
            out += lines
            continue
        rows = [[c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]] for line in lines]
        widths = [max(3, *(_width(row[i]) for j, row in enumerate(rows) if j != 1)) for i in range(len(rows[0]))]
        rows[1] = ["-" * w for w in widths]
        out += ["| " + " | ".join(c + " " * (w - _width(c)) for c, w in zip(row, widths)) + " |" for row in rows]
    return "\n".join(out)

"""What the bokeh figures of :mod:`.plots` share: their sizes (:data:`OUTPUT_WIDTH`), tools, colours of the two
methods, and how token labels are measured.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LABEL_CHAR_PX", "METHOD_COLORS", "OUTPUT_WIDTH", "TOOLS", "as_records"]

METHOD_COLORS = {"attention": "#d95f02", "hidden": "#1b9e77"}
TOOLS = "pan,wheel_zoom,box_zoom,reset,save"
OUTPUT_WIDTH = 840  # px: the widest figure, or row of figures, that a notebook output area shows uncut
LABEL_CHAR_PX = 7.0  # generous mean advance of an 8pt sans-serif character (Liberation Sans: at most 7)


def as_records(rows: Any) -> list[dict]:
    """``rows`` (a DataFrame, or an iterable of mappings) as a list of dicts."""
    if hasattr(rows, "to_dict"):
        return rows.to_dict("records")
    return [dict(r) for r in rows]

"""Stage 7, the export: one standalone HTML file of a widget's current state, opening offline with nothing but a
browser.

Two views: ``"widget"`` (the default, :mod:`.widget_view`) inlines the widget's own front end and its synced state,
so the linked views keep working without a kernel; ``"bokeh"`` (:mod:`.bokeh_view`) draws the grid, the scatter
of the current frame and the KL curve as bokeh figures with bokeh's scripts inlined. After the figures in the
pipeline (it draws with them); :meth:`HeadSNE.save_html <headsne_widget.HeadSNE.save_html>` calls :func:`save_html`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from bokeh.io import save
from bokeh.resources import INLINE

from .bokeh_view import widget_layout
from .widget_view import offline_info, widget_html, widget_title

__all__ = ["VIEWS", "offline_info", "save_html", "widget_html", "widget_layout", "widget_title"]

VIEWS = ("widget", "bokeh")


def save_html(widget: Any, path: str | os.PathLike, *, view: str = "widget") -> Path:
    """Write the widget's current state to ``path`` as one standalone, offline HTML file; returns the path.

    ``view="widget"``: the widget's own front end and state, inlined (linked views keep working);
    ``view="bokeh"``: bokeh figures of the grid, the current frame and the KL curve, bokeh's JS inlined.
    Tokens travel as escaped JSON and are drawn as text.
    """
    if view not in VIEWS:
        raise ValueError(f"view must be one of {', '.join(map(repr, VIEWS))}, got {view!r}")
    path = Path(path).expanduser()  # "~/map.html" is the user's home, as a shell would read it
    if not path.parent.is_dir():
        raise FileNotFoundError(f"the folder {str(path.parent)!r} does not exist")
    if view == "bokeh":
        save(widget_layout(widget), filename=path, resources=INLINE, title=widget_title(widget))
    else:
        path.write_text(widget_html(widget), encoding="utf-8")
    return path

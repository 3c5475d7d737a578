"""One standalone HTML file of a widget's current state, opening offline with nothing but a browser.

Two views: ``"widget"`` (the default) inlines the widget's own front end (the esbuild bundle) and its
synced state, so the linked views (grid, scatter, text, hover, selection, search, replay) keep working without
a kernel. The page says it is static ("static export of layer 3 head 8", js/static-page.js): a click on a head
whose map the export holds (the exported head, and every finished head of the atlas's layer) shows that map;
any other head is refused with a word why, and what needs Python (a new run, the atlas) is off. ``"bokeh"``
draws the grid, the scatter of the current frame and the KL curve as bokeh figures with bokeh's scripts
inlined.
"""

from __future__ import annotations

import base64
import html
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
from bokeh.io import save
from bokeh.layouts import column, row
from bokeh.models import Div, LayoutDOM
from bokeh.resources import INLINE

from ..affinity.sources import source
from . import plots

__all__ = ["VIEWS", "offline_info", "save_html", "widget_html", "widget_layout", "widget_title"]

VIEWS = ("widget", "bokeh")


def widget_title(widget: Any) -> str:
    """ "<model> - layer L, head H, <mode> mode": what the page and its <title> are called."""
    model = getattr(widget, "model_name", "") or getattr(widget.extraction, "model_name", "model")
    src = source(widget.mode)
    where = f"layer {widget.layer}, head {widget.head}" if src.per_head else f"layer {widget.layer}"
    return f"{model} - {where}, {src.name} mode ({src.title})"


def _kl_history(widget: Any) -> tuple[np.ndarray, np.ndarray]:
    """(iterations, KLs) of the current run: ``kl_history`` against ``kl_iterations`` (or 1, 2, ... if absent)."""
    history = getattr(widget, "kl_history", None)
    kls = np.asarray([] if history is None else history, dtype=np.float64).ravel()
    iterations = getattr(widget, "kl_iterations", None)
    if iterations is None or len(iterations) != kls.size:
        iterations = np.arange(1, kls.size + 1)
    return np.asarray(iterations, dtype=np.float64), kls


def _status_line(widget: Any) -> str:
    parts = [f"{len(widget.extraction.tokens)} tokens"]
    iteration = getattr(widget, "iteration", None)
    if iteration is not None:
        parts.append(f"iteration {iteration}")
    kl = getattr(widget, "kl", None)
    if kl is not None and np.isfinite(kl):
        parts.append(f"KL(P || Q) = {kl:.4f}")
    if source(widget.mode).uses_perplexity:
        parts.append(f"perplexity {getattr(widget, 'perplexity', 20.0):g}")
    return " | ".join(parts)


def widget_layout(widget: Any) -> LayoutDOM:
    """The bokeh layout of a :class:`~headsne_widget.HeadSNE`'s current state (what :func:`save_html` writes)."""
    ex = widget.extraction
    if ex is None:
        raise ValueError("the widget holds no extraction yet: give it a text first")
    header = column(
        Div(text=widget_title(widget), render_as_text=True, styles={"font-size": "16px", "font-weight": "bold"}),
        Div(text=_status_line(widget), render_as_text=True),
    )
    grid = plots.max_attention(ex)
    if source(widget.mode).per_head:  # outline the selected head's row
        n = len(ex.tokens)
        grid.children[widget.layer].rect(
            x=(n - 1) / 2, y=widget.head, width=n, height=1, fill_alpha=0.0, line_color="red", line_width=2
        )

    Y = getattr(widget, "embedding", None)
    if Y is None:
        scatter = Div(text="No t-SNE frame yet: the run has not produced one.", render_as_text=True)
    else:
        Y = np.asarray(Y, dtype=np.float64)
        kept = list(widget.kept) if getattr(widget, "kept", None) else list(range(len(Y)))
        tokens = [ex.tokens[i] for i in kept]
        quantile_k = widget.quantile_k if getattr(widget, "quantile", False) else None
        scatter = plots.embedding(
            tokens,
            Y,
            quantile_k=quantile_k,
            color=np.asarray(kept, dtype=np.float64),
            title="t-SNE of the tokens (colour: position in the text)",
        )
    iterations, kls = _kl_history(widget)
    curve = plots.kl_curve(iterations, kls) if kls.size else Div(text="No KL values recorded yet.", render_as_text=True)
    return column(header, row(column(scatter, curve), grid))


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


# Not synced into the page: the bundle itself (inlined once, as a module) and ipywidgets' layout models.
_SKIPPED = {"_esm", "_css", "layout", "_dom_classes", "tabbable", "tooltip"}

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{css}</style></head>
<body style="margin:16px"><div id="headsne-root"></div>
<script type="application/json" id="headsne-state">{state}</script>
<script type="module">
// The saved state, its arrays as DataViews, and the widget's bundle: its renderStatic answers for the kernel
// where the page can (js/static-page.js) and says the page is static.
const payload = JSON.parse(document.getElementById("headsne-state").textContent);
const state = payload.state;
const bytes = (b64) => Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
payload.buffer_paths.forEach((path, i) => {{
  let obj = state;
  for (const key of path.slice(0, -1)) obj = obj[key];
  obj[path[path.length - 1]] = new DataView(bytes(payload.buffers[i]).buffer);
}});
const source = new TextDecoder().decode(bytes(payload.esm));
const url = URL.createObjectURL(new Blob([source], {{ type: "text/javascript" }}));
const mod = await import(url);
mod.renderStatic({{ state, offline: payload.offline, el: document.getElementById("headsne-root") }});
document.body.dataset.rendered = "true";
</script></body></html>
"""


def offline_info(model: Any) -> dict[str, Any]:
    """What a saved page holds besides the state: its label, the heads it has a map of (the exported one, and in
    attention mode every finished head of the atlas's layer) and the token of each row of the atlas's maps."""
    if not source(model.mode).per_head:
        return {"label": f"static export of the {source(model.mode).label(model.layer, 0)}", "heads": [],
                "atlas_kept": None}  # fmt: skip
    heads = [[model.layer, model.head]]
    atlas_kept = None
    if model.atlas is not None and model.atlas_layer is not None:
        heads += [[model.atlas_layer, h] for h in model.atlas_heads if [model.atlas_layer, h] != heads[0]]
        m, n = model.atlas.shape[1], len(model.tokens)
        if m == len(model.kept):
            atlas_kept = list(model.kept)
        else:  # the atlas ran with the other exclude_special: all tokens, or the non-special ones
            atlas_kept = list(range(n)) if m == n else [i for i in range(n) if not model.special[i]]
    label = f"static export of layer {model.layer} head {model.head}"
    return {"label": label, "heads": heads, "atlas_kept": atlas_kept}


def widget_html(widget: Any) -> str:
    """The page of :func:`save_html`'s ``"widget"`` view: the bundle and the synced state, inlined."""
    from ipywidgets.widgets.widget import _remove_buffers

    model = widget.widget  # the synced model the HeadSNE owns
    esm, css = str(model._esm), str(model._css)
    if "npm run build" in esm and "is missing" in esm:
        raise RuntimeError("the widget's front end is not built (npm run build): nothing to inline")
    state, paths, buffers = _remove_buffers({k: v for k, v in model.get_state().items() if k not in _SKIPPED})
    payload = {
        "state": state,
        "buffer_paths": paths,
        "buffers": [base64.b64encode(bytes(b)).decode("ascii") for b in buffers],
        "esm": base64.b64encode(esm.encode("utf-8")).decode("ascii"),
        "offline": offline_info(model),
    }
    # "<" escaped inside JSON: no token or name can close the script element or open a tag
    data = json.dumps(payload, ensure_ascii=False).replace("<", "\\u003c").replace("&", "\\u0026")
    return _PAGE.format(title=html.escape(widget_title(widget)), css=css.replace("</", "<\\/"), state=data)

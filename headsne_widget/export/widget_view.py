"""The export's ``"widget"`` view: the widget's own front end (the esbuild bundle) and its synced state inlined in
one page, so that the linked views (grid, scatter, text, hover, selection, search, replay) keep working without a
kernel. The page says it is static ("static export of layer 3 head 8", js/model/static-page.js): a click on a head
whose map the export holds (the exported head, and every finished head of the atlas's layer) shows that map; any
other head is refused with a word why, and what needs Python (a new run, the atlas) is off. A page shows one layer:
a view of another layer than the map's (the head atlas or the decomposition of the layer shown before the last layer
change) is left out of it, and its label says so (issue 52: a layer 1 map beside a layer 2 atlas).
"""

from __future__ import annotations

import base64
import html
import json
from typing import Any

from ..affinity.sources import source

__all__ = ["LAYER_VIEWS", "left_out", "offline_info", "page_state", "widget_html", "widget_title"]

#: the views that belong to one layer: each one's name, the trait naming its layer and the traits that hold it
LAYER_VIEWS = (
    ("head atlas", "atlas_layer", ("atlas", "atlas_kl", "atlas_heads", "atlas_layer", "atlas_state", "atlas_n_iter",
                                   "atlas_seed")),
    ("decomposition", "decomposition_layer", ("decomposition_terms", "decomposition_heads", "decomposition_layer",
                                              "decomposition_state")),
)  # fmt: skip


def widget_title(widget: Any) -> str:
    """ "<model> - layer L, head H, <mode> mode": what the page and its <title> are called."""
    model = getattr(widget, "model_name", "") or getattr(widget.extraction, "model_name", "model")
    src = source(widget.mode)
    where = f"layer {widget.layer}, head {widget.head}" if src.per_head else f"layer {widget.layer}"
    return f"{model} - {where}, {src.name} mode ({src.title})"


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


def left_out(model: Any) -> list[tuple[str, int, tuple[str, ...]]]:
    """The views of :data:`LAYER_VIEWS` that show another layer than the map's: (name, their layer, their traits)."""
    out: list[tuple[str, int, tuple[str, ...]]] = []
    for name, layer_trait, traits in LAYER_VIEWS:
        layer = getattr(model, layer_trait)
        if layer is not None and layer != model.layer:
            out.append((name, int(layer), traits))
    return out


def page_state(model: Any) -> dict[str, Any]:
    """The synced state a saved page starts from (JSON-ready, arrays as bytes): the model's, without what is not
    synced into the page and with each view of another layer (:func:`left_out`) back to its empty value."""
    state = {k: v for k, v in model.get_state().items() if k not in _SKIPPED}
    for _, _, traits in left_out(model):
        for name in traits:
            to_json = model.trait_metadata(name, "to_json", model._trait_to_json)
            state[name] = to_json(model.trait_defaults(name), model)
    return state


def offline_info(model: Any) -> dict[str, Any]:
    """What a saved page holds besides the state: its label (what it shows, and the views of another layer left out
    of it), the heads it has a map of (the exported one, and in attention mode every finished head of the atlas's
    layer when it is the map's) and the token of each row of the atlas's maps."""
    dropped = left_out(model)
    gone = "".join(f"; the {name} of layer {layer} left out: not the map's layer" for name, layer, _ in dropped)
    if not source(model.mode).per_head:
        return {"label": f"static export of the {source(model.mode).label(model.layer, 0)}{gone}", "heads": [],
                "atlas_kept": None}  # fmt: skip
    heads = [[model.layer, model.head]]
    atlas_kept = None
    if model.atlas is not None and model.atlas_layer == model.layer:
        heads += [[model.atlas_layer, h] for h in model.atlas_heads if [model.atlas_layer, h] != heads[0]]
        m, n = model.atlas.shape[1], len(model.tokens)
        if m == len(model.kept):
            atlas_kept = list(model.kept)
        else:  # the atlas ran with the other exclude_special: all tokens, or the non-special ones
            atlas_kept = list(range(n)) if m == n else [i for i in range(n) if not model.special[i]]
    label = f"static export of layer {model.layer} head {model.head}{gone}"
    return {"label": label, "heads": heads, "atlas_kept": atlas_kept}


def widget_html(widget: Any) -> str:
    """The page of :func:`save_html`'s ``"widget"`` view: the bundle and the synced state, inlined."""
    from ipywidgets.widgets.widget import _remove_buffers

    model = widget.widget  # the synced model the HeadSNE owns
    esm, css = str(model._esm), str(model._css)
    if "npm run build" in esm and "is missing" in esm:
        raise RuntimeError("the widget's front end is not built (npm run build): nothing to inline")
    state, paths, buffers = _remove_buffers(page_state(model))
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

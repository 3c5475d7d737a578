"""The synced state of the widget: the Python half of the model that ``js/widget.js`` renders.

``HeadSNEModel`` holds only the traits of ``js/PROTOCOL.md`` (one name per trait, same defaults); run
control lives in :class:`headsne_widget.headsne.HeadSNE`, which subclasses it. Arrays are wire dicts
made by :func:`headsne_widget.serialization.array_to_wire`, so that they travel as binary buffers.
Static bounds (``min=``) are part of the traits; bounds that depend on the data (the layer and head
ranges) are checked by ``HeadSNE``.
"""

from __future__ import annotations

from pathlib import Path

import anywidget
import traitlets as t

_STATIC = Path(__file__).parent / "static"
_ESM_PATH = _STATIC / "widget.js"
_CSS_PATH = _STATIC / "widget.css"

# Shown instead of the widget when the esbuild bundle is missing (a source checkout that skipped the
# build hook): a clear message in the output cell beats an import error or an empty output.
_MISSING_BUNDLE_ESM = """
export default {
  render({ el }) {
    const p = document.createElement("pre");
    p.textContent = "headsne-widget: the front end is not built (headsne_widget/static/widget.js is " +
      "missing). Run `npm install && npm run build` in the repository, or reinstall the package.";
    el.appendChild(p);
  },
};
"""


class HeadSNEModel(anywidget.AnyWidget):
    """The widget's synced traits (see ``js/PROTOCOL.md``); no behaviour of its own."""

    _esm = _ESM_PATH if _ESM_PATH.is_file() else _MISSING_BUNDLE_ESM
    _css = _CSS_PATH if _CSS_PATH.is_file() else ""

    # data, set once per text (Python -> JS)
    text = t.Unicode("").tag(sync=True)
    tokens = t.List(t.Unicode()).tag(sync=True)
    offsets = t.List(t.Any()).tag(sync=True)  # [start, end] or None per token
    special = t.List(t.Bool()).tag(sync=True)
    model_name = t.Unicode("").tag(sync=True)
    n_layers = t.Int(0).tag(sync=True)
    n_heads = t.Int(0).tag(sync=True)
    max_attention = t.Dict(default_value=None, allow_none=True).tag(sync=True)  # float32 (L, H, n)

    # selection and parameters (both ways)
    layer = t.Int(0, min=0).tag(sync=True)
    head = t.Int(0, min=0).tag(sync=True)
    mode = t.Enum(("attention", "hidden"), default_value="attention").tag(sync=True)
    perplexity = t.Float(20.0).tag(sync=True)
    # None = "auto"; HeadSNE stores "auto" as None, so the browser sees a number or null
    learning_rate = t.Union([t.Float(), t.Enum(("auto",))], default_value=None, allow_none=True).tag(sync=True)
    n_iter = t.Int(1000, min=1).tag(sync=True)
    early_exaggeration = t.Float(12.0, min=1.0).tag(sync=True)
    exaggeration_iters = t.Int(250, min=0).tag(sync=True)
    seed = t.Int(0, min=0).tag(sync=True)
    restarts = t.Int(1, min=1).tag(sync=True)
    exclude_special = t.Bool(False).tag(sync=True)
    quantile = t.Bool(False).tag(sync=True)
    quantile_k = t.Int(100, min=2).tag(sync=True)
    speed = t.Float(250.0, min=0.0).tag(sync=True)
    edge_k = t.Int(5, min=1).tag(sync=True)

    # run state (Python -> JS)
    frame = t.Dict(default_value=None, allow_none=True).tag(sync=True)  # float32 (m, 2)
    kept = t.List(t.Int()).tag(sync=True)
    iteration = t.Int(0).tag(sync=True)
    kl = t.Float(None, allow_none=True).tag(sync=True)
    run_id = t.Int(0).tag(sync=True)
    status = t.Unicode("").tag(sync=True)
    state = t.Enum(("idle", "running", "paused", "done", "error"), default_value="idle").tag(sync=True)
    edges = t.Dict(default_value=None, allow_none=True).tag(sync=True)  # {"indices": int32, "weights": float32}

"""Bokeh figures of the thesis: max-attention grids (Fig. 13), token maps (Fig. 8-10), KL box plots (Fig. 12,
15) and standard deviations (Fig. 16); of the term shares of a decomposition (Mickus et al. 2022, Fig. 3a); and of
which head tracks which relation (Clark et al. 2019, Table 1).

Every function returns a bokeh layout that shows inline in a notebook (after ``bokeh.io.output_notebook()``)
and saves with ``bokeh.io.save``. Tokens reach the page only as data: tick labels and text glyphs are drawn
on the canvas and tooltips use plain ``@field`` formatting, which bokeh escapes, so a token is never HTML.
Each data source carries a ``name`` (``"max_attention_<layer>"``, ``"embedding"``, ``"boxes"``, ...) so that
it can be found with ``layout.select(name=...)``.

Sizes fit a notebook's output area: no figure, and no row of figures, is wider than ``OUTPUT_WIDTH`` px
(JupyterLab's output area is 848 px wide in a 1280 px wide window with the file browser open), and
the token labels of a token map are kept inside its plot frame by widening the axis ranges.
The figures live by family (:mod:`.token_plots`, :mod:`.study_plots`, :mod:`.head_plots`, :mod:`.syntax_plots`,
their shared sizes and colours in :mod:`.plot_style`); this module names them all, as ``headsne_widget.plots``.
"""

from __future__ import annotations

from .head_plots import corpus_heads, head_map
from .plot_style import METHOD_COLORS, OUTPUT_WIDTH
from .study_plots import TERM_COLORS, box_stats, compare_models, kl_by_layer, kl_curve, robustness, term_shares
from .syntax_plots import relation_heads_map
from .token_plots import embedding, max_attention

__all__ = [
    "METHOD_COLORS", "OUTPUT_WIDTH", "TERM_COLORS",
    "box_stats", "compare_models", "corpus_heads", "embedding", "head_map", "kl_by_layer", "kl_curve", "max_attention",
    "relation_heads_map", "robustness", "term_shares",
]  # fmt: skip

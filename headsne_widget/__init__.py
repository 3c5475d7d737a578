"""headsne-widget: look inside a transformer with layer-wise maximum attention and attention-head t-SNE.

The public names are imported lazily, so that ``from headsne_widget import tsne`` does not pay for
transformers and ``import headsne_widget`` stays fast. Data flows one way:
model -> arrays (:mod:`.capture`) -> P (:mod:`.affinity`) -> frames (:mod:`.embedding`) -> browser (:mod:`.widget`)
-> studies (:mod:`.studies`) -> bokeh figures (:mod:`.figures`) -> HTML pages (:mod:`.export`), and the
``headsne-demo`` command (:mod:`.cli`); each stage imports only from the stages before it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import sys
from typing import TYPE_CHECKING, Any

if "torch" not in sys.modules:  # (libgomp reads it once, as torch is imported: _parallel.torch_threads_sleep)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = importlib.metadata.version("headsne-widget")  # the one place: pyproject.toml

# public name -> submodule that defines it (one concept, one named place)
_EXPORTS = {
    "extract": "capture.extraction",
    "decompose": "capture.decompose",
    "score_attribution": "capture.attribution",
    "key_attribution": "capture.attribution",
    "head_composition": "capture.composition",
    "Extraction": "capture.extraction",
    "load_model": "capture.extraction",
    "max_attention": "capture.maximum_attention",
    "head_scores": "capture.scores",
    "induction_scores": "capture.induction",
    "attention_affinities": "affinity.affinities",
    "gaussian_affinities": "affinity.affinities",
    "selection_affinities": "affinity.selection",
    "Selection": "affinity.selection",
    "tsne": "embedding.tsne",
    "tsne_frames": "embedding.tsne",
    "kl_divergence": "embedding.tsne",
    "TSNEResult": "embedding.tsne",
    "Frame": "embedding.tsne",
    "quantile_rescale": "embedding.rescaling",
    "align": "embedding.alignment",
    "HeadSNE": "widget.headsne",
    "word_contexts": "studies.contexts",
    "term_shares": "studies.term_shares",
    "compare_models": "studies.term_shares",
    "parse": "syntax.parses",
    "relation_heads": "studies.syntax",
    "relation_probe": "studies.syntax",
    "tree_probe": "studies.syntax",
}
# modules reachable as attributes (``headsne_widget.plots``): the name -> where it lives
_SUBMODULES = {
    "analyses": "studies.analyses",
    "plots": "figures.plots",
    "export": "export",
    "texts": "texts",
}

__all__ = sorted(_EXPORTS) + sorted(_SUBMODULES)

if TYPE_CHECKING:  # what the lazy names are, for type checkers and IDEs (tests/test_package.py: one list)
    from .affinity.affinities import attention_affinities as attention_affinities
    from .affinity.affinities import gaussian_affinities as gaussian_affinities
    from .affinity.selection import Selection as Selection
    from .affinity.selection import selection_affinities as selection_affinities
    from .capture.attribution import key_attribution as key_attribution
    from .capture.attribution import score_attribution as score_attribution
    from .capture.composition import head_composition as head_composition
    from .capture.decompose import decompose as decompose
    from .capture.extraction import Extraction as Extraction
    from .capture.extraction import extract as extract
    from .capture.extraction import load_model as load_model
    from .capture.induction import induction_scores as induction_scores
    from .capture.maximum_attention import max_attention as max_attention
    from .capture.scores import head_scores as head_scores
    from .embedding.alignment import align as align
    from .embedding.rescaling import quantile_rescale as quantile_rescale
    from .embedding.tsne import Frame as Frame
    from .embedding.tsne import TSNEResult as TSNEResult
    from .embedding.tsne import kl_divergence as kl_divergence
    from .embedding.tsne import tsne as tsne
    from .embedding.tsne import tsne_frames as tsne_frames
    from .studies.contexts import word_contexts as word_contexts
    from .studies.syntax import relation_heads as relation_heads
    from .studies.syntax import relation_probe as relation_probe
    from .studies.syntax import tree_probe as tree_probe
    from .studies.term_shares import compare_models as compare_models
    from .studies.term_shares import term_shares as term_shares
    from .syntax.parses import parse as parse
    from .widget.headsne import HeadSNE as HeadSNE


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f".{_SUBMODULES[name]}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__

"""headsne-widget: look inside a transformer with layer-wise maximum attention and attention-head t-SNE.

The public names are imported lazily, so that ``from headsne_widget import tsne`` does not pay for
transformers and ``import headsne_widget`` stays fast. Data flows one way:
model -> arrays (:mod:`.extraction`) -> P (:mod:`.affinities`) -> frames (:mod:`.t_sne`) -> browser (:mod:`.widget`).
"""

from __future__ import annotations

import importlib
import importlib.metadata
from typing import Any

__version__ = importlib.metadata.version("headsne-widget")  # the one place: pyproject.toml

# public name -> submodule that defines it (one concept, one named place)
_EXPORTS = {
    "extract": "extraction",
    "Extraction": "extraction",
    "max_attention": "maximum_attention",
    "attention_affinities": "affinities",
    "gaussian_affinities": "affinities",
    "tsne": "t_sne",
    "tsne_frames": "t_sne",
    "kl_divergence": "t_sne",
    "TSNEResult": "t_sne",
    "Frame": "t_sne",
    "quantile_rescale": "rescaling",
    "align": "alignment",
    "selection_affinities": "selection",
    "Selection": "selection",
    "RunController": "run_control",
    "HeadSNE": "headsne",
}
_SUBMODULES = {"analyses", "plots", "export", "studies", "texts"}

__all__ = sorted(_EXPORTS) + sorted(_SUBMODULES)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__

"""A checked selection: what P is built from, validated once at the public boundary.

:func:`checked_spec` is the one place that checks a selection's mode, layer, head, perplexity and mass, with one
meaning each (an index is 0-based and never negative, a number is never a bool). Everything it returns is
trusted by the P builder (:mod:`.builder`) and the sources (:mod:`.sources`), as scikit-learn's inner calls
trust ``_validate_params``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from .._checks import DEFAULT_MASS, check_index, check_mass, number
from .sources import source
from .sources.base import Spec

if TYPE_CHECKING:
    from ..capture.extraction import Extraction

__all__ = [
    "DEFAULT_MASS",
    "MAX_PERPLEXITY",
    "MIN_TOKENS",
    "check_mass",
    "check_perplexity",
    "checked_spec",
    "kept_count",
]

#: the least number of tokens t-SNE can place
MIN_TOKENS = 4
#: the largest perplexity taken anywhere (the function API and the widget): the effective neighbours of a point,
#: beyond any text a t-SNE maps (openTSNE lowers one above (m - 1) / 3 as this package does)
MAX_PERPLEXITY = 1e4


def check_perplexity(perplexity: Any) -> float:
    """``perplexity`` as a float in (0, MAX_PERPLEXITY]: the one bound, the widget's trait's too."""
    value = number(perplexity, "perplexity", "the effective number of neighbours")
    if not (math.isfinite(value) and 0 < value <= MAX_PERPLEXITY):
        raise ValueError(f"perplexity must be a finite number in (0, {MAX_PERPLEXITY:g}], got {perplexity!r}")
    return value


def kept_count(ex: Extraction, exclude_special: bool) -> int:
    """How many tokens a selection keeps: all, or all but the special ones."""
    return int(ex.n_tokens - (np.count_nonzero(ex.special) if exclude_special else 0))


def checked_spec(
    ex: Extraction, mode: Any, layer: Any, head: Any = 0, *, exclude_special: Any = False, perplexity: Any = 20.0,
    mass: Any = DEFAULT_MASS,
) -> Spec:  # fmt: skip
    """The checked :class:`Spec` of a selection of ``ex``, else a TypeError or ValueError naming what to pass."""
    src = source(mode)
    layer = check_index(layer, ex.n_layers, "layer", "layers")
    head = check_index(head, ex.n_heads, "head", "heads per layer") if src.per_head else 0
    if not isinstance(exclude_special, (bool, np.bool_)):
        raise TypeError(f"exclude_special must be True or False, got {exclude_special!r}")
    exclude = np.asarray(ex.special, dtype=bool) if exclude_special else np.zeros(ex.n_tokens, dtype=bool)
    kept = np.flatnonzero(~exclude).astype(np.int64)
    if len(kept) < MIN_TOKENS:
        excluded = f" ({ex.n_tokens - len(kept)} special tokens excluded)" if exclude_special else ""
        raise ValueError(f"only {len(kept)} tokens are kept{excluded}; t-SNE needs at least {MIN_TOKENS}")
    if src.max_tokens is not None and len(kept) > src.max_tokens:
        raise ValueError(
            f"{src.name} mode takes at most {src.max_tokens} tokens, this selection keeps {len(kept)} "
            f"({src.too_many}); use attention mode, or max_tokens= when extracting"
        )
    return Spec(src, layer, head, exclude, kept, check_perplexity(perplexity), check_mass(mass))

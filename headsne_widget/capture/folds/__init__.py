"""What the capture folds from the attention chunk by chunk: the interface (:mod:`.base`) and the registered folds.

A new fold is one module here with a :class:`Fold` subclass, and its class added to :data:`FOLDS`; its result lands
in ``ex.folded[name]`` (or the :class:`~..extracted.Extraction` keyword of its name).
"""

from __future__ import annotations

from .base import Fold, Folds, LayerShape
from .grid import MaxAttentionGrid
from .head_scores import HeadScores
from .rows import KeptRows, KeptRowStore

__all__ = ["FOLDS", "Fold", "Folds", "HeadScores", "KeptRowStore", "KeptRows", "LayerShape", "MaxAttentionGrid"]

#: the folds every capture runs, in this order
FOLDS: tuple[type[Fold], ...] = (MaxAttentionGrid, HeadScores, KeptRows)

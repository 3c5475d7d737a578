"""The fold interface: a quantity reduced from every layer's attention, chunk by chunk, during the capture.

The capture (:mod:`..attention`) computes each layer's attention in query chunks and never holds a head's n x n;
anything wanted from the whole of it (the maximum-attention grid, the head scores, ...) must be folded from the
chunks as they pass. A :class:`Fold` says how: :meth:`Fold.start` as a layer begins, :meth:`Fold.chunk` for each of
its chunks in query order, :meth:`Fold.end_layer` after its last chunk (the layer's result) and :meth:`Fold.finish`
with every layer's result after the pass (what the fold adds to the extraction, under :attr:`Fold.name`).
:class:`Folds` feeds one forward pass's folds in turn; the registered ones are :data:`..folds.FOLDS`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from ..scores import chunk_rows

__all__ = ["Fold", "Folds", "LayerShape"]


@dataclass(frozen=True)
class LayerShape:
    """What a fold knows of a layer before its first chunk: its index (0-based, in call order = layer order), its
    query heads, its tokens and the device its chunks live on."""

    index: int
    n_heads: int
    n_tokens: int
    device: torch.device


class Fold(ABC):
    """One quantity folded over the capture's chunks; an instance serves one forward pass.

    ``name`` is where the result goes: the :class:`~..extracted.Extraction` keyword of that name when it has one
    (``max_attention``, ``head_stats``), else ``ex.folded[name]``.
    """

    name: ClassVar[str]

    @abstractmethod
    def start(self, layer: LayerShape) -> None:
        """A layer begins: set up its running state."""

    @abstractmethod
    def chunk(self, rows: slice, keys: slice, weights: torch.Tensor) -> None:
        """Fold one chunk: float32 ``weights`` ``(H, r, k)`` of the query rows ``rows`` over the keys ``keys`` (every
        weight outside ``keys`` is 0), on the layer's device. Chunks come in query order, on one thread."""

    @abstractmethod
    def end_layer(self) -> Any:
        """The layer's result, after its last chunk (kept for :meth:`finish`)."""

    @abstractmethod
    def finish(self, layers: list[Any]) -> Any:
        """What the fold adds to the extraction, from every layer's :meth:`end_layer` in layer order."""


class Folds:
    """The folds of one forward pass, made from their classes and fed in turn (the capture's one loop over them)."""

    def __init__(self, classes: Iterable[type[Fold]]) -> None:
        self.folds = [cls() for cls in classes]
        names = [fold.name for fold in self.folds]
        if len(set(names)) != len(names):
            raise ValueError(f"two folds give the same result name: {names}")
        self.layers: list[list[Any]] = [[] for _ in self.folds]

    def __bool__(self) -> bool:
        return bool(self.folds)

    def start(self, layer: LayerShape) -> None:
        for fold in self.folds:
            fold.start(layer)

    def chunk(self, rows: slice, keys: slice, weights: torch.Tensor) -> None:
        for fold in self.folds:
            fold.chunk(rows, keys, weights)

    def end_layer(self) -> None:
        for fold, kept in zip(self.folds, self.layers):
            kept.append(fold.end_layer())

    @torch.inference_mode()
    def feed_dense(self, attentions: np.ndarray) -> None:
        """Feed every layer of a dense float32 ``(L, H, n, n)`` array (the eager path's), in query chunks of at most
        32 MiB (:func:`..scores.chunk_rows`, as :func:`..scores.statistics` reads one: the same sums), each chunk
        copied as float32, never a layer."""
        for index, heads in enumerate(attentions):
            h, n, _ = heads.shape
            self.start(LayerShape(index, h, n, torch.device("cpu")))
            for rows in chunk_rows(h, n):
                self.chunk(rows, slice(0, n), torch.from_numpy(np.array(heads[:, rows], dtype=np.float32)))
            self.end_layer()

    def finish(self) -> dict[str, Any]:
        """Every fold's result by its name."""
        return {fold.name: fold.finish(kept) for fold, kept in zip(self.folds, self.layers)}

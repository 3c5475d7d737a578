"""Where a head's n x n attention comes from: recomputed from the captured layers, or a dense array.

Every array handed out is read-only: a caller who writes into ``ex.attention(l, h)`` would otherwise change
what later calls (and P, and the partners) see. Recomputed heads are kept in a least-recently-used cache
within :func:`dense_budget_bytes` (:data:`DENSE_BUDGET_BYTES`, or the memory budget where that is smaller); a
cached array is never written again, only dropped. Code that wants a head in an array of its own (the widget, in
arrays it leases) calls ``head_into``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..budget import memory_budget_bytes, within_budget
from ..errors import MemoryBudgetError
from .layers import LayerAttention
from .maximum_attention import max_attention
from .sparse import sparse_from_dense

if TYPE_CHECKING:
    from scipy.sparse import csr_array

__all__ = [
    "DENSE_BUDGET_BYTES", "CapturedAttention", "DenseAttention", "NoAttention", "check_budget", "dense_budget_bytes",
    "fits_budget", "read_only",
]  # fmt: skip

# Largest dense float32 array handed out at once: every head's n x n (``Extraction.attentions``), every layer's
# hidden states, and the cache of recomputed heads. 512 MiB holds a 24-layer x 16-head model at 512 tokens.
DENSE_BUDGET_BYTES = 512 * 2**20


def read_only(a: np.ndarray) -> np.ndarray:
    """``a`` itself, made read-only (for arrays this package owns; a view of a caller's array otherwise)."""
    a.flags.writeable = False
    return a


class _HeadCache:
    """Recomputed read-only arrays keyed by (layer, head or None for all), least recently used out first."""

    def __init__(self) -> None:
        self.items: OrderedDict[tuple, np.ndarray] = OrderedDict()

    def get(self, key: tuple) -> np.ndarray | None:
        if key in self.items:
            self.items.move_to_end(key)
            return self.items[key]
        return None

    def put(self, key: tuple, value: np.ndarray) -> None:
        if not fits_budget(value.shape):
            return
        self.items[key] = read_only(value)
        ceiling = dense_budget_bytes()
        while sum(v.nbytes for v in self.items.values()) > ceiling:
            self.items.popitem(last=False)


class CapturedAttention:
    """Every layer's captured attention: single heads recomputed on demand, the dense array within the budget."""

    def __init__(self, layers: list[LayerAttention]) -> None:
        self.layers = layers
        self._cache = _HeadCache()
        self._dense: np.ndarray | None = None
        self._lock = threading.Lock()

    @property
    def shape(self) -> tuple[int, int, int, int]:
        first = self.layers[0]
        return (len(self.layers), first.n_heads, first.n_tokens, first.n_tokens)

    @property
    def kv_groups(self) -> int:
        return self.layers[0].kv_groups

    @property
    def nbytes(self) -> int:
        """Bytes kept (queries and keys of every layer)."""
        return sum(layer.nbytes for layer in self.layers)

    def _cached(self, layer: int, head: int) -> np.ndarray | None:
        if self._dense is not None:
            return self._dense[layer, head]
        whole = self._cache.get((layer, None))
        return whole[head] if whole is not None else self._cache.get((layer, head))

    def head(self, layer: int, head: int) -> np.ndarray:
        """float32 (n, n), read-only; the first call for a layer recomputes all its heads when they fit the budget. A
        head beyond the memory budget (``budget.memory_budget_bytes``: 16 GiB at 65536 tokens) is refused before it is
        allocated (``MemoryBudgetError``)."""
        with self._lock:
            cached = self._cached(layer, head)
            if cached is not None:
                return cached
            _, H, n, _ = self.shape
            if fits_budget((H, n, n)):
                whole = self.layers[layer].heads()
                self._cache.put((layer, None), whole)
                return whole[head]
            within_budget(
                4 * n * n,
                f"layer {layer} head {head}'s attention: {n} x {n} float32 weights",
                f"ex.sparse_attention({layer}, {head}) (the keys that hold most of each row), a shorter text",
            )
            single = self.layers[layer].heads(head)[0]
            self._cache.put((layer, head), single)
            return read_only(single)

    def head_into(self, layer: int, head: int, out: np.ndarray) -> np.ndarray:
        """Head ``head`` of ``layer`` written into ``out`` (C-contiguous float32 (n, n)); a copy when cached."""
        with self._lock:
            cached = self._cached(layer, head)
            if cached is not None:
                np.copyto(out, cached)
                return out
        self.layers[layer].heads(head, out=out[None])
        return out

    def sparse(
        self,
        layer: int,
        head: int,
        mass: float,
        progress: Callable[[float], None] | None = None,
        *,
        max_keys: int | None = None,
        max_entries: int | None = None,
    ) -> csr_array:
        """The head's rows kept for ``mass`` (:mod:`.sparse`, with its bounds): from its dense array when one is
        cached, else computed chunk by chunk (:meth:`LayerAttention.sparse`, never n x n); the values are
        :meth:`head`'s."""
        with self._lock:
            cached = self._cached(layer, head)
        label = f"layer {layer} head {head}"
        if cached is not None:
            return sparse_from_dense(cached, mass, max_keys=max_keys, max_entries=max_entries, label=label)
        return self.layers[layer].sparse(head, mass, progress, max_keys=max_keys, max_entries=max_entries, label=label)

    def prefetch(self, check: Callable[[], None] | None = None) -> None:
        """Recompute every layer's heads into the cache when all of them fit the budget together, so that a head
        click finds its attention ready (at 512 tokens a layer takes 10-20 ms, and 70-145 ms of a click in the
        live kernel under load). ``check()`` runs between layers (a cancel point)."""
        n_layers, n_heads, n, _ = self.shape
        if not fits_budget((n_layers, n_heads, n, n)):
            return
        for layer in range(n_layers):
            if check is not None:
                check()
            self.head(layer, 0)

    def dense(self) -> np.ndarray:
        """float32 (L, H, n, n) of every head, read-only, within the budget, else MemoryBudgetError."""
        with self._lock:
            if self._dense is None:
                check_budget(self.shape, "every head's attention", "ex.attention(layer, head)")
                self._dense = read_only(np.stack([layer.heads() for layer in self.layers]))
                self._cache.items.clear()
            return self._dense


class DenseAttention:
    """Attention given as a dense (L, H, n, n) array (the eager path, or an array a caller substituted), kept
    as a read-only copy of its own."""

    def __init__(self, attentions: np.ndarray, kv_groups: int = 1) -> None:
        self.attentions = read_only(np.array(attentions, dtype=np.float32))
        if self.attentions.ndim != 4 or self.attentions.shape[-1] != self.attentions.shape[-2]:
            raise ValueError(f"attentions must have shape (L, H, n, n), got {self.attentions.shape}")
        self.kv_groups = kv_groups

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return tuple(self.attentions.shape)  # type: ignore[return-value]

    @property
    def nbytes(self) -> int:
        return int(self.attentions.nbytes)

    def head(self, layer: int, head: int) -> np.ndarray:
        return self.attentions[layer, head]

    def head_into(self, layer: int, head: int, out: np.ndarray) -> np.ndarray:
        np.copyto(out, self.attentions[layer, head])
        return out

    def sparse(
        self,
        layer: int,
        head: int,
        mass: float,
        progress: Callable[[float], None] | None = None,
        *,
        max_keys: int | None = None,
        max_entries: int | None = None,
    ) -> csr_array:
        label = f"layer {layer} head {head}"
        return sparse_from_dense(
            self.attentions[layer, head], mass, max_keys=max_keys, max_entries=max_entries, label=label
        )

    def prefetch(self, check: Callable[[], None] | None = None) -> None:
        """Nothing to do: every head is already there."""

    def dense(self) -> np.ndarray:
        return self.attentions

    def grid(self) -> np.ndarray:
        return read_only(max_attention(self.attentions))


class NoAttention:
    """No attention between the points (``shape`` (L, H, n, n) all the same): the occurrences of a word across
    texts (``capture.occurrences``), whose grid is each head's attention to the word in its own text. Every head
    asked for raises ``ValueError(reason)``."""

    kv_groups = 1
    nbytes = 0

    def __init__(self, shape: tuple[int, ...], reason: str) -> None:
        self.shape = (*shape, shape[-1])
        self.reason = reason

    def head(self, layer: int, head: int) -> np.ndarray:
        raise ValueError(self.reason)

    def head_into(self, layer: int, head: int, out: np.ndarray) -> np.ndarray:
        raise ValueError(self.reason)

    def sparse(self, layer: int, head: int, mass: float, progress: Callable[[float], None] | None = None, *,
               max_keys: int | None = None, max_entries: int | None = None) -> csr_array:  # fmt: skip
        raise ValueError(self.reason)

    def prefetch(self, check: Callable[[], None] | None = None) -> None:
        """Nothing to fetch."""

    def dense(self) -> np.ndarray:
        raise ValueError(self.reason)


def dense_budget_bytes() -> int:
    """The most bytes of dense float32 arrays held at once: DENSE_BUDGET_BYTES (read at call time, so it can be
    changed), or the memory budget (``budget.memory_budget_bytes``, ``set_memory_budget``) where that is smaller."""
    return min(DENSE_BUDGET_BYTES, memory_budget_bytes())


def fits_budget(shape: tuple[int, ...]) -> bool:
    """Whether a float32 array of ``shape`` fits :func:`dense_budget_bytes`."""
    return 4 * int(np.prod(shape)) <= dense_budget_bytes()


def check_budget(shape: tuple[int, ...], what: str, instead: str) -> None:
    """MemoryBudgetError when a float32 array of ``shape`` exceeds :func:`dense_budget_bytes`, naming the bounded
    accessor."""
    needed = 4 * int(np.prod(shape))
    within_budget(needed, f"{what} as one float32 array {tuple(shape)} would", instead)
    if needed > DENSE_BUDGET_BYTES:
        raise MemoryBudgetError(
            f"{what} as one float32 array {tuple(shape)} takes {needed / 2**20:.0f} MiB, above "
            f"the {DENSE_BUDGET_BYTES / 2**20:.0f} MiB budget (headsne_widget.capture.sources.DENSE_BUDGET_BYTES); "
            f"use {instead} instead",
            needed_bytes=needed,
        )

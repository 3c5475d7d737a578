"""What one text run through a model holds (:class:`Extraction`): tokens, the maximum-attention grid, every
head's attention on demand (dense, or sparse rows for long texts) and every layer's hidden states.

:mod:`.extraction` runs the model and builds one; this module is only what it hands back, so that code that
reads an extraction (the widget, the studies) does not need the pipeline that makes it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .._checks import DEFAULT_MASS, check_index, check_mass
from ..budget import memory_budget_bytes
from .scores import HeadStatistics
from .sources import CapturedAttention, DenseAttention, NoAttention, check_budget, read_only
from .sparse import check_limits

if TYPE_CHECKING:
    from scipy.sparse import csr_array

__all__ = ["Extraction", "HiddenStates"]

#: bytes a kept entry of one head's rows costs while :meth:`Extraction.sparse_attention` gathers them: its float32
#: value and int32 column, twice (the chunks, then the CSR they are joined into)
ROW_ENTRY_BYTES = 16


class HiddenStates:
    """Every layer's hidden states ``(L + 1, n, d)``, kept on the CPU in the model's dtype (bf16 stays bf16).

    ``layer(i)`` is float32 ``(n, d)`` of entry ``i`` (0 = embeddings); ``dense()`` is float32 ``(L + 1, n, d)``:
    a view when the model runs in float32, else a copy made only within the dense budget. Both are read-only.
    """

    def __init__(self, states: torch.Tensor | np.ndarray) -> None:
        self.states = torch.as_tensor(states) if isinstance(states, torch.Tensor) else torch.tensor(states)
        if self.states.ndim != 3:
            raise ValueError(f"hidden states must have shape (L + 1, n, d), got {tuple(self.states.shape)}")
        self._dense: np.ndarray | None = None

    @property
    def nbytes(self) -> int:
        return self.states.numel() * self.states.element_size()

    def layer(self, index: int) -> np.ndarray:
        return read_only(self.states[index].float().numpy().view())

    def dense(self) -> np.ndarray:
        if self._dense is None:
            if self.states.dtype != torch.float32:
                check_budget(tuple(self.states.shape), "every layer's hidden states", "ex.layer_output(l)")
            self._dense = read_only(self.states.float().numpy().view())
        return self._dense


@dataclass(eq=False, init=False)  # arrays have no single truth value; compare fields explicitly
class Extraction:
    """One text run through a model: tokens, the maximum-attention grid, every head on demand, hidden states.

    ``max_attention`` float32 ``(L, H, n)`` is always there. One head's float32 ``(n, n)`` comes from
    ``attention(layer, head)`` (recomputed from the layer's captured queries and keys; the first call for a
    layer computes all its heads when they fit ``capture.DENSE_BUDGET_BYTES``). ``attentions`` ``(L, H, n, n)``
    and ``hidden_states`` ``(L + 1, n, d)`` are the dense float32 arrays, handed out only within that budget.
    ``dataclasses.replace(ex, attentions=A)`` substitutes dense attentions (and ``hidden_states=X`` states).
    Every array an extraction hands out is read-only (its own copy), so that no caller can change what later
    calls, P or the widget see. ``folded`` holds, by name, what the capture's other folds made (``capture/folds/``;
    the grid and the head scores have fields of their own); substituted attentions clear it, as ``head_stats``.
    """

    text: str
    tokens: list[str]
    token_ids: np.ndarray
    offsets: list[tuple[int, int] | None]
    special: np.ndarray
    max_attention: np.ndarray
    model_name: str
    truncated: bool
    kv_groups: int  # query heads per key/value head (1 without grouped-query attention)
    attention_source: CapturedAttention | DenseAttention | NoAttention
    states: HiddenStates
    head_stats: HeadStatistics | None  # every head's scores from the capture (capture/scores.py); None: not yet
    folded: Mapping[str, Any]  # the results of the capture's other folds (capture/folds/), read-only

    def __init__(
        self,
        text: str,
        tokens: list[str],
        token_ids: np.ndarray,
        offsets: list[tuple[int, int] | None],
        special: np.ndarray,
        *,
        max_attention: np.ndarray,
        model_name: str,
        truncated: bool = False,
        kv_groups: int | None = None,
        attention_source: CapturedAttention | DenseAttention | NoAttention | None = None,
        states: HiddenStates | None = None,
        head_stats: HeadStatistics | None = None,
        folded: Mapping[str, Any] | None = None,
        attentions: np.ndarray | None = None,
        hidden_states: np.ndarray | torch.Tensor | None = None,
    ) -> None:
        if attentions is not None:
            attention_source = DenseAttention(attentions, 1 if kv_groups is None else kv_groups)
            head_stats = folded = None  # the capture's folds were of the attention replaced
        if hidden_states is not None:
            states = HiddenStates(hidden_states)
        if attention_source is None or states is None:
            raise TypeError("an Extraction needs attention_source= (or attentions=) and states= (or hidden_states=)")
        self.text, self.tokens, self.offsets = text, list(tokens), list(offsets)
        self.token_ids = read_only(np.array(token_ids, dtype=np.int64))
        self.special = read_only(np.array(special, dtype=bool))
        self.max_attention = read_only(np.array(max_attention, dtype=np.float32))
        self.model_name, self.truncated = model_name, truncated
        self.kv_groups = attention_source.kv_groups if kv_groups is None else kv_groups
        self.attention_source, self.states, self.head_stats = attention_source, states, head_stats
        self.folded = MappingProxyType(dict(folded or {}))

    @property
    def has_attention(self) -> bool:
        """False for the occurrences of a word across texts (``capture.occurrences``): no attention between them."""
        return not isinstance(self.attention_source, NoAttention)

    @property
    def attentions(self) -> np.ndarray:
        """float32 (L, H, n, n) of every head, within the dense budget; beyond it use ``attention(layer, head)``."""
        return self.attention_source.dense()

    @property
    def hidden_states(self) -> np.ndarray:
        """float32 (L + 1, n, d); entry 0 is the embeddings; beyond the budget use ``layer_output(layer)``."""
        return self.states.dense()

    def attention(self, layer: int, head: int) -> np.ndarray:
        """float32 (n, n) attention of one head, rows = queries, as the model computes it (read-only)."""
        layer, head = self._layer_index(layer), self._head_index(head)
        return self.attention_source.head(layer, head)

    def attention_into(self, layer: int, head: int, out: np.ndarray) -> np.ndarray:
        """:meth:`attention` written into ``out``, a C-contiguous float32 (n, n) array of the caller's."""
        n = self.n_tokens
        if out.shape != (n, n) or out.dtype != np.float32 or not out.flags.c_contiguous:
            raise ValueError(f"out must be a C-contiguous float32 array of shape ({n}, {n})")
        layer, head = self._layer_index(layer), self._head_index(head)
        return self.attention_source.head_into(layer, head, out)

    def sparse_attention(
        self,
        layer: int,
        head: int,
        mass: float = DEFAULT_MASS,
        progress: Callable[[float], None] | None = None,
        *,
        max_keys: int | None = None,
        max_entries: int | None = None,
    ) -> csr_array:
        """One head's attention as a ``scipy.sparse.csr_array`` (n x n, float32): for each row (query), the
        smallest set of its largest entries whose sum reaches ``mass`` of the row's total (1 for softmax rows;
        less where attention sinks take a share), each value equal to :meth:`attention`'s bit for bit.

        Computed one query chunk at a time from the captured queries and keys, never as n x n (memory O(n x k)
        for k entries a row), so it works at lengths where :meth:`attention` does not fit. The matrix says what
        it kept: ``S.mass`` (``mass``) and ``S.kept``, float64 ``(n,)``, each row's share of its total, at least
        ``mass``. ``mass=1`` keeps every nonzero entry. ``progress(fraction)`` is called now and then with the
        share of rows done, and may raise to stop the work (the widget's cancel point). See docs/long-texts.md.

        Bounds: ``max_keys`` (None: none) keeps at most that many of each row's largest entries (``S.kept`` then
        says the share each row really holds, possibly below ``mass``); ``max_entries`` raises
        ``errors.MemoryBudgetError`` as soon as the entries kept so far, extrapolated over the rows still to do,
        exceed it, before the rest is allocated. None: what the memory budget holds of this matrix alone
        (:data:`ROW_ENTRY_BYTES` an entry); ``headsne_widget.budget.entries_within()`` is a whole P's.

        Where the capture kept the rows (``extract(..., rows=...)``, ``ex.kept_row_keys``) and each row's answer is
        a prefix of what it kept, the matrix is read from them (the same matrix); else computed as above.
        """
        share = check_mass(mass)
        layer, head = self._layer_index(layer), self._head_index(head)
        max_keys, max_entries = check_limits(max_keys, max_entries)
        if max_entries is None:  # an unbounded head's rows at mass 0.99 grow as n^2 / 2: never past the budget
            max_entries = max(1, memory_budget_bytes() // ROW_ENTRY_BYTES)
        kept = self.folded.get("rows")  # the capture's kept rows (capture/folds/rows.py), where they hold enough
        if kept is not None:
            label = f"layer {layer} head {head}"
            rows = kept.sparse(layer, head, share, max_keys=max_keys, max_entries=max_entries, label=label)
            if rows is not None:
                if progress is not None:
                    progress(1.0)
                return rows
        return self.attention_source.sparse(layer, head, share, progress, max_keys=max_keys, max_entries=max_entries)

    @property
    def kept_row_keys(self) -> int | None:
        """The keys a row the capture kept of every head (``extract(..., rows=...)``), None where it kept none."""
        kept = self.folded.get("rows")
        return None if kept is None else int(kept.max_keys)

    def layer_output(self, layer: int) -> np.ndarray:
        """float32 (n, d) hidden states output by ``layer`` (0-based), i.e. ``hidden_states[layer + 1]``."""
        return self.states.layer(self._layer_index(layer) + 1)

    @property
    def n_layers(self) -> int:
        return int(self.max_attention.shape[0])

    @property
    def n_heads(self) -> int:
        return int(self.max_attention.shape[1])

    @property
    def n_tokens(self) -> int:
        return int(self.max_attention.shape[2])

    @property
    def d_model(self) -> int:
        """The width d of the hidden states (each token's state is a d-vector)."""
        return int(self.states.states.shape[-1])

    @property
    def nbytes(self) -> int:
        """Bytes this extraction keeps: the grid, the captured queries/keys (or dense heads), the hidden states."""
        return int(self.max_attention.nbytes) + self.attention_source.nbytes + self.states.nbytes

    def _layer_index(self, layer: int) -> int:
        return check_index(layer, self.n_layers, "layer", "layers")

    def _head_index(self, head: int) -> int:
        return check_index(head, self.n_heads, "head", "heads per layer")

    def __repr__(self) -> str:
        return (
            f"Extraction(model_name={self.model_name!r}, n_layers={self.n_layers}, n_heads={self.n_heads}, "
            f"n_tokens={self.n_tokens}, kv_groups={self.kv_groups}, truncated={self.truncated})"
        )

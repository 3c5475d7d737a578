"""Capture a transformer's attention one layer at a time, never every head's n x n at once.

transformers (5.x) lets a package register its own attention function (``AttentionInterface``) and its own mask
builder (``AttentionMaskInterface``); every architecture whose attention layers call the interface (BERT,
RoBERTa, DistilBERT, ModernBERT, GPT-2, Llama, Mistral, Qwen2, Gemma 2/3, Phi-3, GPT-OSS, ...) then hands this
module, for each layer, exactly the inputs its eager attention would get: post-RoPE queries, keys and values,
the scaling, the logit softcap, the attention sinks and the mask. :func:`capture_attention_forward` computes
that layer's attention in query chunks (bounded memory), returns the layer's output to the model, folds the
chunks into the maximum-attention grid ``(H, n)`` and keeps the layer's queries and keys (model dtype, on the
layer's device, GQA keys not repeated): what any head's n x n is recomputed from later, exactly.

The mask is never materialised as n x n: :func:`capture_mask` keeps transformers' own mask function
(causal, sliding window, bidirectional window, padding) and rows of it are built per chunk with transformers'
``sdpa_mask``; masked logits get the dtype's minimum, as ``eager_mask`` adds it, and a chunk computes only the
key span its queries may see (the weights outside are exactly 0). Each layer is checked against the architecture's own
``eager_attention_forward`` on a few query rows; a mismatch raises :class:`UnsupportedAttentionError`, so an
architecture whose attention this does not reproduce is refused rather than approximated.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .._parallel import each, workers
from ..errors import MemoryBudgetError, UnsupportedAttentionError
from ..widget._buffers import SPARE_BYTES, SparePool
from .maximum_attention import max_attention, max_attention_update

__all__ = [
    "CAPTURE_IMPLEMENTATION",
    "CHUNK_BYTES",
    "DENSE_BUDGET_BYTES",
    "CapturedAttention",
    "DenseAttention",
    "LayerAttention",
    "MaskRows",
    "capture_attention_forward",
    "capture_mask",
    "capturing",
    "check_budget",
    "fits_budget",
]

CAPTURE_IMPLEMENTATION = "headsne_capture"
# float32 scores of one query chunk (all heads of a layer): bounds the working memory of a layer at any length.
CHUNK_BYTES = 32 * 2**20
# Largest dense float32 array handed out at once: every head's n x n (``Extraction.attentions``), every layer's
# hidden states, and the cache of recomputed heads. 512 MiB holds a 24-layer x 16-head model at 512 tokens.
DENSE_BUDGET_BYTES = 512 * 2**20

_SESSION: contextvars.ContextVar[_Session | None] = contextvars.ContextVar("headsne_capture_session", default=None)
_SWITCH_LOCK = threading.RLock()  # one capture forward at a time: the implementation switch is per model config
_REGISTERED = False


# ----------------------------------------------------------------------------------------------------- the mask


@dataclass(frozen=True)
class MaskRows:
    """transformers' mask for one layer, kept as its mask function so that only query chunks are built."""

    batch_size: int
    q_length: int
    kv_length: int
    q_offset: int
    kv_offset: int
    mask_function: Callable
    padding: torch.Tensor | None
    use_vmap: bool
    dtype: torch.dtype
    #: per query chunk (start, stop): (keys, first, last) when each of its rows may attend to one unbroken run of
    #: keys, first[r]..last[r] (causal, sliding and bidirectional windows), else None (see :meth:`spans`)
    _spans: dict[tuple[int, int], tuple[slice, torch.Tensor, torch.Tensor] | None] = field(
        default_factory=dict, compare=False, repr=False
    )

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (self.batch_size, 1, self.q_length, self.kv_length)

    @property
    def ndim(self) -> int:
        return 4

    def allowed(self, start: int, stop: int, device: torch.device) -> torch.Tensor:
        """Boolean ``(B, 1, stop - start, kv)``: which keys the query rows ``start:stop`` may attend to."""
        from transformers.masking_utils import sdpa_mask

        allowed = sdpa_mask(
            batch_size=self.batch_size,
            q_length=stop - start,
            kv_length=self.kv_length,
            q_offset=self.q_offset + start,
            kv_offset=self.kv_offset,
            mask_function=self.mask_function,
            attention_mask=None if self.padding is None else self.padding.to(device),
            allow_is_causal_skip=False,
            allow_is_bidirectional_skip=False,
            use_vmap=self.use_vmap,
            device=device,
        )
        if allowed is None:  # sdpa_mask skips only when allowed to, and both skips are off here
            raise RuntimeError("transformers' sdpa_mask returned no mask with its skips turned off")
        return allowed

    def spans(self, rows: slice) -> tuple[slice, torch.Tensor, torch.Tensor] | None:
        """``(keys, first, last)`` of a chunk seen before (:meth:`learn_spans`), when every row of it may attend
        to the keys first[r]..last[r] and no other: its mask is then two comparisons, instead of transformers'
        mask function (1.4 of a chunk's 6 ms at 8192 tokens, causal, on one core), and the same entries."""
        return self._spans.get((rows.start, rows.stop))

    def learn_spans(self, rows: slice, allowed: torch.Tensor, keys: slice) -> None:
        """Remember the chunk's spans from its mask ``allowed`` (``(1, r, kv)``) if every row's allowed keys are one
        unbroken run (not a padding hole, not a row with no key at all), else that it has none."""
        if allowed.device.type != "cpu" or (rows.start, rows.stop) in self._spans:
            return
        grid = allowed.numpy().reshape(-1, allowed.shape[-1])
        first = grid.argmax(axis=1)
        last = grid.shape[1] - 1 - grid[:, ::-1].argmax(axis=1)
        unbroken = grid.any(axis=1).all() and bool((grid.sum(axis=1) == last - first + 1).all())
        spans = (keys, torch.from_numpy(first)[:, None], torch.from_numpy(last)[:, None]) if unbroken else None
        self._spans[(rows.start, rows.stop)] = spans


def capture_mask(
    batch_size: int,
    q_length: int,
    kv_length: int,
    q_offset: int = 0,
    kv_offset: int = 0,
    mask_function: Callable | None = None,
    attention_mask: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float32,
    use_vmap: bool = False,
    **_: Any,
) -> MaskRows | None:
    """The ``AttentionMaskInterface`` entry: the arguments ``eager_mask`` would get, kept instead of an n x n mask
    (None where every query sees every key, as eager adds no bias there)."""
    from transformers.masking_utils import bidirectional_mask_function, causal_mask_function

    if attention_mask is not None and bool(attention_mask.all()):
        attention_mask = None  # no padding: the mask function alone (cheaper per chunk, same rows)
    if attention_mask is None and mask_function is bidirectional_mask_function:
        return None
    return MaskRows(
        batch_size=batch_size,
        q_length=q_length,
        kv_length=kv_length,
        q_offset=int(q_offset),
        kv_offset=int(kv_offset),
        mask_function=causal_mask_function if mask_function is None else mask_function,
        padding=attention_mask,
        use_vmap=use_vmap,
        dtype=dtype,
    )


def _allowed_rows(mask: MaskRows, rows: slice | list[int], device: torch.device) -> torch.Tensor:
    """Boolean ``(1, 1, r, kv)`` of transformers' mask for the query ``rows`` (a slice, or a few row indices)."""
    if isinstance(rows, slice):
        return mask.allowed(rows.start, rows.stop, device)[:1]
    return torch.cat([mask.allowed(r, r + 1, device)[:1] for r in rows], dim=2)


def _additive_rows(mask: MaskRows | torch.Tensor | None, rows: slice | list[int], device: torch.device) -> Any:
    """The eager additive mask ``(1, 1 or H, r, kv)`` of the query ``rows`` (0 where allowed, dtype min elsewhere)."""
    if mask is None:
        return None
    if isinstance(mask, MaskRows):
        allowed, dtype = _allowed_rows(mask, rows, device), mask.dtype
    else:  # a 4D mask the model prepared itself (bool or additive float), rows sliced from it
        allowed, dtype = mask[:1, :, rows].to(device), torch.float32
        if allowed.dtype != torch.bool:
            return allowed
    return torch.where(allowed, torch.zeros((), device=device, dtype=dtype), torch.finfo(dtype).min)


def _mask_spans(logits: torch.Tensor, keys: slice, first: torch.Tensor, last: torch.Tensor, dtype: torch.dtype) -> None:
    """Set ``logits`` (h, r, keys) to dtype's minimum outside each row's keys first[r]..last[r] ((r, 1) each), in
    place. Only the columns some row may not see are visited: before the largest first key and after the smallest
    last key (a causal chunk of 256 rows at 8192 tokens: its last 256 columns instead of all 4352)."""
    start, stop = keys.start, keys.stop
    inner_start, inner_stop = int(first.max()), int(last.min()) + 1  # every row sees [inner_start, inner_stop)
    edges = [(start, inner_start), (inner_stop, stop)] if inner_start < inner_stop else [(start, stop)]
    for a, b in edges:
        if a < b:
            columns = torch.arange(a, b, device=logits.device)
            blocked = (columns < first) | (columns > last)
            logits[..., a - start : b - start].masked_fill_(blocked, torch.finfo(dtype).min)


def _key_span(allowed: torch.Tensor | None, n: int) -> slice:
    """The keys from the first to the last that some query of the chunk may attend to: outside them every weight
    is exactly 0 (exp of the dtype's minimum), so a causal or sliding-window chunk computes only its span. A row
    with no key allowed (eager then spreads it uniformly over all n keys) keeps the full width."""
    if allowed is None:
        return slice(0, n)
    if allowed.device.type == "cpu":  # numpy's boolean reductions: 0.05 ms a chunk where torch's took 1 to 8 ms
        rows = allowed.numpy().reshape(-1, allowed.shape[-1])
        if not rows.any(axis=1).all():
            return slice(0, n)
        columns = np.flatnonzero(rows.any(axis=0))
        return slice(int(columns[0]), int(columns[-1]) + 1)
    if not bool(allowed.any(dim=-1).all()):
        return slice(0, n)
    found = allowed.any(dim=(0, 1)).nonzero()
    return slice(int(found[0]), int(found[-1]) + 1)


# ------------------------------------------------------------------------------------------------ one layer


@dataclass
class LayerAttention:
    """What one attention layer computed, enough to recompute any of its heads exactly.

    ``query`` ``(H, n, d)`` and ``key`` ``(H_kv, n, d)`` are the post-RoPE states the layer attended with, in the
    model's dtype, on the layer's device; query head ``h`` reads key head ``h // kv_groups`` (GQA). The weights of
    a query chunk are ``softmax(softcap(q k^T * scaling) + mask [, sinks])`` in the same order of operations as
    transformers' eager attention, rounded to the model's dtype as the model uses them.
    """

    query: torch.Tensor
    key: torch.Tensor
    mask: MaskRows | torch.Tensor | None
    scaling: float
    softcap: float | None = None
    sinks: torch.Tensor | None = None

    @property
    def n_heads(self) -> int:
        return int(self.query.shape[0])

    @property
    def n_tokens(self) -> int:
        return int(self.key.shape[1])

    @property
    def kv_groups(self) -> int:
        return self.n_heads // int(self.key.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes kept for this layer (queries and keys; the mask is its function, O(n) at most)."""
        return _tensor_bytes(self.query) + _tensor_bytes(self.key)

    def chunk_rows(self, n_heads: int | None = None) -> int:
        """Query rows per chunk so that the float32 scores of ``n_heads`` heads stay within CHUNK_BYTES."""
        heads = self.n_heads if n_heads is None else n_heads
        return max(1, min(self.n_tokens, CHUNK_BYTES // (4 * heads * self.n_tokens)))

    def chunks(self) -> Iterator[slice]:
        step = self.chunk_rows()
        return (slice(start, min(start + step, self.n_tokens)) for start in range(0, self.n_tokens, step))

    def weights(self, rows: slice | list[int], head: int | None = None) -> tuple[slice, torch.Tensor]:
        """``(keys, w)``: weights ``(h, r, k)`` of the query ``rows`` over the key span ``keys`` (all heads or one
        ``head``, in the model's dtype); every weight outside the span is exactly 0."""
        if head is None:
            query, key = self.query[:, rows], self.key
        else:
            query = self.query[head : head + 1, rows]
            key = self.key[head // self.kv_groups : head // self.kv_groups + 1]
        h, r, d = query.shape
        mask = self.mask
        spans = mask.spans(rows) if isinstance(mask, MaskRows) and isinstance(rows, slice) else None
        allowed = None
        if spans is not None:
            keys = spans[0]
        else:
            allowed = _allowed_rows(mask, rows, query.device)[0] if isinstance(mask, MaskRows) else None
            keys = _key_span(allowed, self.n_tokens)
            if allowed is not None and isinstance(mask, MaskRows) and isinstance(rows, slice):
                mask.learn_spans(rows, allowed, keys)
        key = key[:, keys]
        logits = torch.matmul(query.reshape(key.shape[0], -1, d), key.transpose(1, 2)).view(h, r, -1)
        logits = logits.mul_(self.scaling)  # in place: the scores are this chunk's own (no second r x n array)
        if self.softcap is not None:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        if spans is not None and isinstance(mask, MaskRows):  # the entries of ~allowed below, from two comparisons
            _mask_spans(logits, keys, spans[1].to(query.device), spans[2].to(query.device), mask.dtype)
        elif isinstance(mask, MaskRows) and allowed is not None:  # x + min rounds to min: eager's sum, no float mask
            logits = logits.masked_fill_(~allowed[..., keys], torch.finfo(mask.dtype).min)
        elif self.mask is not None:  # a 4D mask the model prepared itself: added as eager adds it
            additive = _additive_rows(self.mask, rows, query.device)[0]
            logits = logits + (additive[head : head + 1] if additive.shape[0] > 1 and head is not None else additive)
        if self.sinks is None:
            return keys, torch.softmax(logits, dim=-1, dtype=torch.float32).to(query.dtype)
        sinks = self.sinks.reshape(-1)[slice(None) if head is None else slice(head, head + 1)]
        combined = torch.cat([logits, sinks.reshape(h, 1, 1).expand(h, r, 1).to(logits.dtype)], dim=-1)
        combined = combined - combined.amax(dim=-1, keepdim=True)
        return keys, torch.softmax(combined, dim=-1, dtype=combined.dtype)[..., :-1].to(query.dtype)

    def full_weights(self, rows: slice | list[int]) -> torch.Tensor:
        """float32 ``(H, r, n)`` weights of the query ``rows`` over all keys (zeros outside the span)."""
        keys, w = self.weights(rows)
        full = w.new_zeros((w.shape[0], w.shape[1], self.n_tokens), dtype=torch.float32)
        full[..., keys] = w.float()
        return full

    @torch.inference_mode()
    def heads(self, head: int | None = None, out: np.ndarray | None = None) -> np.ndarray:
        """float32 ``(H, n, n)`` (``(1, n, n)`` for one ``head``) on the CPU, built in chunks on the layer's device;
        into ``out`` when given (a C-contiguous float32 array of that shape, every entry overwritten)."""
        shape = (self.n_heads if head is None else 1, self.n_tokens, self.n_tokens)
        if out is None:
            out = np.empty(shape, dtype=np.float32)
        elif out.shape != shape or out.dtype != np.float32 or not out.flags.c_contiguous:
            raise ValueError(f"out must be a C-contiguous float32 array of shape {shape}")

        def fill(rows: slice, pooled: bool = False) -> None:
            if pooled:  # one torch thread a chunk. MKL's thread count is the process's: the caller's restore
                torch.set_num_threads(1)  # below may have raised it, and a chunk over 2 threads had other bits
            with torch.inference_mode():  # (thread-local: entered again in a worker)
                keys, w = self.weights(rows, head)
                out[:, rows, : keys.start] = 0.0  # outside the chunk's key span every weight is exactly 0
                out[:, rows, keys] = w.float().cpu().numpy()
                out[:, rows, keys.stop :] = 0.0

        chunks = list(self.chunks())
        if self.query.device.type != "cpu" or len(chunks) == 1 or workers() is None:
            for rows in chunks:
                fill(rows)
            return out
        # on the CPU, chunks go one at a time to the worker threads, one torch thread each: torch's own threads
        # split every operation in fixed shares and wait for a core the browser took (_parallel.py)
        threads = torch.get_num_threads()
        try:
            each(len(chunks), lambda k: fill(chunks[k], pooled=True))
        finally:  # a worker's own setting of 1 is also what torch gives threads that start later: undone
            torch.set_num_threads(threads)
        return out


def _tensor_bytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


# ------------------------------------------------------------------------------- the registered attention


@dataclass
class _Session:
    """The layers captured by one forward pass, in call order (= layer order)."""

    layers: list[LayerAttention] = field(default_factory=list)
    grids: list[np.ndarray] = field(default_factory=list)


def capture_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: MaskRows | torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    softcap: float | None = None,
    s_aux: torch.Tensor | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """The ``AttentionInterface`` entry: the layer's output as eager attention computes it, in query chunks.

    Inside :func:`capturing` it also keeps the layer (:class:`LayerAttention`) and its grid; outside it only
    computes the output, so a model left switched still runs exactly.
    """
    if module.training and dropout:
        raise UnsupportedAttentionError(
            f"{type(module).__name__} is in training mode with attention dropout; call model.eval() first"
        )
    if query.shape[0] != 1 or query.shape[2] != key.shape[2]:
        raise UnsupportedAttentionError(
            f"attention capture runs one sequence without a cache (got queries {tuple(query.shape)}, "
            f"keys {tuple(key.shape)} in {type(module).__name__})"
        )
    n_heads, n_kv = query.shape[1], key.shape[1]
    if n_heads % n_kv:
        raise UnsupportedAttentionError(f"{type(module).__name__}: {n_heads} query heads for {n_kv} key/value heads")
    layer = LayerAttention(
        query=query[0].clone(memory_format=torch.contiguous_format),  # own storage: never pins a fused qkv
        key=key[0].clone(memory_format=torch.contiguous_format),
        mask=attention_mask,
        scaling=float(query.shape[-1] ** -0.5 if scaling is None else scaling),
        softcap=None if softcap is None else float(softcap),
        sinks=None if s_aux is None else s_aux.detach().clone(),
    )
    values = value[0]
    out = torch.empty((1, layer.n_tokens, n_heads, values.shape[-1]), dtype=value.dtype, device=value.device)
    grid = torch.zeros((n_heads, layer.n_tokens), dtype=torch.float32, device=query.device)
    for rows in layer.chunks():
        keys, weights = layer.weights(rows)
        grid[:, keys] = max_attention_update(grid[:, keys], weights.float())
        mixed = torch.matmul(weights.to(value.dtype).reshape(n_kv, -1, weights.shape[-1]), values[:, keys])
        out[0, rows] = mixed.view(n_heads, weights.shape[1], -1).transpose(0, 1)
    session = _SESSION.get()
    if session is not None:
        _verify(module, layer, value, out, dict(kwargs, scaling=scaling, dropout=0.0, softcap=softcap, s_aux=s_aux))
        session.layers.append(layer)
        session.grids.append(grid.cpu().numpy())
    return out, None


def _verify(
    module: torch.nn.Module, layer: LayerAttention, value: torch.Tensor, out: torch.Tensor, kwargs: dict
) -> None:
    """Compare a few query rows with the architecture's own ``eager_attention_forward``; raise on a mismatch."""
    architecture = type(module).__name__
    eager = getattr(inspect.getmodule(type(module)), "eager_attention_forward", None)
    if eager is None:
        raise UnsupportedAttentionError(
            f"{architecture} calls transformers' AttentionInterface but its module has no eager_attention_forward "
            f"to check the capture against; {SUPPORTED}"
        )
    n = layer.n_tokens
    rows = sorted({0, n // 2, n - 1})  # first, middle, last query: causal edge, inside and past any window
    if kwargs.get("softcap") is None:
        kwargs.pop("softcap")
    if kwargs.get("s_aux") is None:
        kwargs.pop("s_aux")
    mask = _additive_rows(layer.mask, rows, layer.query.device)
    with torch.no_grad():
        ref_out, ref_weights = eager(module, layer.query[None, :, rows], layer.key[None], value, mask, **kwargs)
    mine = layer.full_weights(rows)
    tolerance = _tolerance(layer.query.dtype)
    out_scale = float(value.abs().max()) if value.numel() else 1.0
    same = ref_weights is not None and torch.allclose(ref_weights[0].float(), mine, rtol=tolerance, atol=tolerance)
    same = same and torch.allclose(
        ref_out[0].float(), out[0, rows].float(), rtol=tolerance, atol=tolerance * max(1.0, out_scale)
    )
    if not same:
        raise UnsupportedAttentionError(
            f"{architecture}'s eager attention differs from the captured attention on query rows {rows} "
            f"(scaling {layer.scaling}, softcap {layer.softcap}, sinks {layer.sinks is not None}); its attention "
            f"cannot be captured exactly. {SUPPORTED}"
        )


def _tolerance(dtype: torch.dtype) -> float:
    """Agreement asked of the probe: 1e-5 in float32, a few units in the last place of half precisions."""
    return 1e-5 if torch.finfo(dtype).bits >= 32 else 4 * float(torch.finfo(dtype).eps)


SUPPORTED = (
    "Supported: architectures whose attention layers call transformers' AttentionInterface with the standard "
    "eager inputs (scaling, additive/causal/sliding-window mask, logit softcapping, attention sinks, grouped-query "
    "key/value heads), e.g. BERT, RoBERTa, DistilBERT, ModernBERT, GPT-2, Llama, Mistral, Qwen2, Gemma 2/3, Phi-3."
)


def register() -> None:
    """Register the capture attention and mask functions with transformers (once per process)."""
    global _REGISTERED
    if _REGISTERED:
        return
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(CAPTURE_IMPLEMENTATION, capture_attention_forward)
    AttentionMaskInterface.register(CAPTURE_IMPLEMENTATION, capture_mask)
    _REGISTERED = True


@contextlib.contextmanager
def capturing(model: Any) -> Iterator[_Session]:
    """Run ``model`` with the capture attention inside the block; its layers land in the yielded session.

    The model's attention implementation is switched for the block only and restored after it.
    """
    register()
    with _SWITCH_LOCK:
        previous = model.config._attn_implementation
        model.set_attn_implementation(CAPTURE_IMPLEMENTATION)
        session = _Session()
        token = _SESSION.set(session)
        try:
            yield session
        finally:
            _SESSION.reset(token)
            model.set_attn_implementation(previous)


def can_capture(model: Any) -> bool:
    """Whether ``model``'s attention layers go through transformers' AttentionInterface."""
    check = getattr(type(model), "_can_set_attn_implementation", None)
    return bool(check is not None and check())


# ------------------------------------------------------------------------------------ attention sources


class _HeadCache:
    """Recomputed float32 arrays keyed by (layer, head or None for all), least recently used out first; what
    leaves the cache is kept for reuse (``spares``) once nobody holds it, within the same budget."""

    def __init__(self) -> None:
        self.items: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self.spares = SparePool(SPARE_BYTES)

    def get(self, key: tuple) -> np.ndarray | None:
        if key in self.items:
            self.items.move_to_end(key)
            return self.items[key]
        return None

    def put(self, key: tuple, value: np.ndarray) -> None:
        if not fits_budget(value.shape):
            return
        self.items[key] = value
        self.make_room(0)

    def make_room(self, nbytes: int) -> None:
        """Evict the least recently used until ``nbytes`` more fit the budget; what leaves becomes a spare
        (before a head is recomputed: so that it can be written into that head's place)."""
        while self.items and sum(v.nbytes for v in self.items.values()) + nbytes > DENSE_BUDGET_BYTES:
            gone = self.items.popitem(last=False)[1]
            self.spares.keep(gone if gone.base is None else gone.base)  # a single head is a view of (1, n, n)


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

    def head(self, layer: int, head: int) -> np.ndarray:
        """float32 (n, n); the first call for a layer recomputes all its heads when they fit the budget."""
        with self._lock:
            if self._dense is not None:
                return self._dense[layer, head]
            whole = self._cache.get((layer, None))
            if whole is not None:
                return whole[head]
            _, H, n, _ = self.shape
            if fits_budget((H, n, n)):
                whole = self.layers[layer].heads(out=self._cache.spares.empty((H, n, n), np.float32))
                self._cache.put((layer, None), whole)
                return whole[head]
            single = self._cache.get((layer, head))
            if single is None:
                if fits_budget((n, n)):
                    self._cache.make_room(4 * n * n)
                spare = self._cache.spares.empty((1, n, n), np.float32)  # a head that left the cache, if idle
                single = self.layers[layer].heads(head, out=spare)[0]
                self._cache.put((layer, head), single)
            return single

    def prefetch(self) -> None:
        """Recompute every layer's heads into the cache when all of them fit the budget together, so that a
        head click finds its attention ready: at 512 tokens a layer takes 10-20 ms, and 70-145 ms of a
        click's 100 ms budget in the live kernel under load. Beyond the budget (long texts) it only writes the
        array the first head will be recomputed into (a fresh one costs up to 1 s at 8192 tokens: _buffers)."""
        n_layers, n_heads, n, _ = self.shape
        if fits_budget((n_layers, n_heads, n, n)):
            for layer in range(n_layers):
                self.head(layer, 0)
        elif not fits_budget((n_heads, n, n)):  # heads are recomputed one by one: the first one's array, ready
            self._cache.spares.reserve((1, n, n), np.float32)

    def dense(self) -> np.ndarray:
        """float32 (L, H, n, n) of every head, within the budget, else MemoryBudgetError."""
        with self._lock:
            if self._dense is None:
                check_budget(self.shape, "every head's attention", "ex.attention(layer, head)")
                self._dense = np.stack([layer.heads() for layer in self.layers])
                self._cache.items.clear()
            return self._dense


class DenseAttention:
    """Attention given as a dense (L, H, n, n) array (the eager path, or an array a caller substituted)."""

    def __init__(self, attentions: np.ndarray, kv_groups: int = 1) -> None:
        self.attentions = np.asarray(attentions, dtype=np.float32)
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

    def prefetch(self) -> None:
        """Nothing to do: every head is already there."""

    def dense(self) -> np.ndarray:
        return self.attentions

    def grid(self) -> np.ndarray:
        return max_attention(self.attentions)


def fits_budget(shape: tuple[int, ...]) -> bool:
    """Whether a float32 array of ``shape`` fits DENSE_BUDGET_BYTES (read at call time, so it can be changed)."""
    return 4 * int(np.prod(shape)) <= DENSE_BUDGET_BYTES


def check_budget(shape: tuple[int, ...], what: str, instead: str) -> None:
    """MemoryBudgetError when a float32 array of ``shape`` exceeds the budget, naming the bounded accessor."""
    if not fits_budget(shape):
        raise MemoryBudgetError(
            f"{what} as one float32 array {tuple(shape)} takes {4 * int(np.prod(shape)) / 2**20:.0f} MiB, above "
            f"the {DENSE_BUDGET_BYTES / 2**20:.0f} MiB budget (headsne_widget.capture.DENSE_BUDGET_BYTES); "
            f"use {instead} instead"
        )

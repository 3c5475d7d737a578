"""One captured attention layer, enough to recompute any of its heads exactly (:class:`LayerAttention`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from .._parallel import each, workers
from .masks import MaskRows, additive_rows, allowed_rows, key_span, mask_spans

__all__ = ["CHUNK_BYTES", "LayerAttention"]

# float32 scores of one query chunk (all heads of a layer): bounds the working memory of a layer at any length.
CHUNK_BYTES = 32 * 2**20


@dataclass
class LayerAttention:
    """What one attention layer computed, enough to recompute any of its heads exactly.

    ``query`` ``(H, n, d)`` and ``key`` ``(H_kv, n, d)`` are the post-RoPE states the layer attended with, in the
    model's dtype, on the layer's device; query head ``h`` reads key head ``h // kv_groups`` (GQA). The weights of
    a query chunk are ``softmax(softcap(q k^T * scaling) + bias + mask [, sinks])`` in the same order of operations
    as transformers' eager attention, rounded to the model's dtype as the model uses them. ``bias`` is an additive
    position bias ``(1, H, n, n)`` some architectures add to the scores (T5's relative attention bias): kept by
    reference (T5 computes it once and every layer shares it), so it costs nothing more than the model made.
    """

    query: torch.Tensor
    key: torch.Tensor
    mask: MaskRows | torch.Tensor | None
    scaling: float
    softcap: float | None = None
    sinks: torch.Tensor | None = None
    bias: torch.Tensor | None = None

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
            allowed = allowed_rows(mask, rows, query.device)[0] if isinstance(mask, MaskRows) else None
            keys = key_span(allowed, self.n_tokens)
            if allowed is not None and isinstance(mask, MaskRows) and isinstance(rows, slice):
                mask.learn_spans(rows, allowed, keys)
        key = key[:, keys]
        logits = torch.matmul(query.reshape(key.shape[0], -1, d), key.transpose(1, 2)).view(h, r, -1)
        logits = logits.mul_(self.scaling)  # in place: the scores are this chunk's own (no second r x n array)
        if self.softcap is not None:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        if self.bias is not None:  # (1, H, n, n): this chunk's rows and key span, of every head or one
            heads = slice(None) if head is None else slice(head, head + 1)
            logits = logits + self.bias[0, heads][:, rows][..., keys].to(logits.dtype)
        if spans is not None and isinstance(mask, MaskRows):  # the entries of ~allowed below, from two comparisons
            mask_spans(logits, keys, spans[1].to(query.device), spans[2].to(query.device), mask.dtype)
        elif isinstance(mask, MaskRows) and allowed is not None:  # x + min rounds to min: eager's sum, no float mask
            logits = logits.masked_fill_(~allowed[..., keys], torch.finfo(mask.dtype).min)
        elif self.mask is not None:  # a 4D mask the model prepared itself: added as eager adds it
            additive = additive_rows(self.mask, rows, query.device)[0]
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

"""One captured attention layer, enough to recompute any of its heads exactly (:class:`LayerAttention`).

Work on a layer goes one query chunk at a time (:meth:`LayerAttention.each_chunk`): the forward pass, a head's
dense n x n, its sparse rows. On the CPU the chunks go to the worker threads, one torch thread each, the next
chunk to whichever thread is free; a chunk's float32 scores are about :data:`CHUNK_BYTES`, small enough to stay in
a core's cache. Each thread computes its chunks into buffers of its own (:class:`Scratch`), allocated once per
pass at the largest chunk's size: a fresh array per chunk, each a little wider than the last under a causal mask,
fragmented the C heap, which kept every freed array's pages (16 GiB at 65536 tokens; docs/long-texts.md).
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from .._parallel import in_worker, workers
from .masks import MaskRows, additive_rows, allowed_rows, key_span, mask_spans, span_chunks
from .sparse import SparseRows

if TYPE_CHECKING:
    from scipy.sparse import csr_array

__all__ = ["CHUNK_BYTES", "DEVICE_CHUNK_BYTES", "PROGRESS_INTERVAL_S", "LayerAttention", "Scratch"]

# float32 scores of one query chunk (all heads of a layer) on the CPU: small enough to stay in a core's cache (a
# chunk's 5 passes over its scores ran 1.5-2x faster at 2 MiB than at 32 MiB, 16k-64k tokens), and the working
# memory of a layer at any length (CHUNK_BYTES per worker thread, twice: scores and weights).
CHUNK_BYTES = 2 * 2**20
# the same on an accelerator, where a chunk is a few kernel launches and larger chunks mean fewer of them
DEVICE_CHUNK_BYTES = 256 * 2**20
#: least seconds between two progress reports of one pass over a layer's chunks
PROGRESS_INTERVAL_S = 0.25
# booleans of transformers' mask built at once when its rows are learnt before a first pass (its mask functions
# make int64 temporaries of the same shape: 16 MiB a thread)
MASK_BLOCK_BYTES = 2 * 2**20


class Scratch:
    """One thread's reusable buffers for its chunks: ``take(name, shape, dtype)`` is a contiguous view of the
    buffer ``name``, allocated at the first call with at least ``capacity`` elements and reused after."""

    def __init__(self, capacity: int, device: torch.device) -> None:
        self.capacity, self.device = capacity, device
        self.buffers: dict[tuple[str, torch.dtype], torch.Tensor] = {}

    def take(self, name: str, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        numel = int(np.prod(shape))
        buffer = self.buffers.get((name, dtype))
        if buffer is None or buffer.numel() < numel:
            buffer = torch.empty(max(numel, self.capacity), dtype=dtype, device=self.device)
            self.buffers[(name, dtype)] = buffer
        return buffer[:numel].view(shape)


class _Workspace:
    """The :class:`Scratch` of each thread taking part in one pass over a layer's chunks."""

    def __init__(self, capacity: int, device: torch.device) -> None:
        self.capacity, self.device = capacity, device
        self.scratches: dict[int, Scratch] = {}

    def scratch(self) -> Scratch:
        ident = threading.get_ident()
        if ident not in self.scratches:
            self.scratches[ident] = Scratch(self.capacity, self.device)
        return self.scratches[ident]


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
        """Query rows per chunk so that the float32 scores of ``n_heads`` heads stay within CHUNK_BYTES (on the
        CPU; DEVICE_CHUNK_BYTES on an accelerator)."""
        heads = self.n_heads if n_heads is None else n_heads
        return max(1, min(self.n_tokens, self._chunk_bytes() // (4 * heads * self.n_tokens)))

    def chunks(self) -> Iterator[slice]:
        """The query chunks every pass over this layer takes (the same ones each time, so a head's values never
        depend on the pass): sized by each chunk's key span when the mask's rows are known to be unbroken runs
        of keys that move right from row to row (causal, sliding and bidirectional windows: at 131072 tokens
        with a window of 4096, 15 rows a chunk instead of 1), else ``chunk_rows()`` rows at a time."""
        spans = self.mask.row_spans() if isinstance(self.mask, MaskRows) else None
        planned = None if spans is None else span_chunks(*spans, self.n_heads, self._chunk_bytes())
        if planned is not None:
            return iter(planned)
        step = self.chunk_rows()
        return (slice(start, min(start + step, self.n_tokens)) for start in range(0, self.n_tokens, step))

    def _chunk_bytes(self) -> int:
        return CHUNK_BYTES if self.query.device.type == "cpu" else DEVICE_CHUNK_BYTES

    def each_chunk(
        self,
        work: Callable[[slice, Scratch | None], None],
        head: int | None = None,
        progress: Callable[[float], None] | None = None,
        in_order: bool = False,
    ) -> None:
        """``work(rows, scratch)`` for every query chunk ``rows`` of :meth:`chunks`, with the calling thread's
        :class:`Scratch` for ``head`` (None: all heads), or None where autograd records (no buffer reuse then).
        ``in_order``: every chunk on the calling thread, one after the other (work that sums across chunks).

        On the CPU, with several cores and more than one chunk, the chunks run on the worker threads with one
        torch thread each (a few at a time, so that other work on the pool interleaves); ``work`` must then only
        write what its own chunk owns. The same chunks always
        run the same way, so a head's values do not depend on who asks for it. ``progress(fraction)`` is called
        in the calling thread, at most every PROGRESS_INTERVAL_S and once at the end; it may raise to stop.
        Whatever ends the pass early (an error in a chunk, KeyboardInterrupt, ``progress`` raising) cancels the
        chunks not started and waits for the running ones before it propagates: no thread is left computing.
        """
        recording = torch.is_grad_enabled()
        pool = None if in_worker() else workers()  # never wait for one's own pool
        if isinstance(self.mask, MaskRows) and self.query.device.type == "cpu" and not self.mask.learnt():
            self._learn_mask(self.mask, None if recording else pool)
        chunks = list(self.chunks())
        heads = self.n_heads if head is None else self.kv_groups  # (one head: its group's scores, _scores)
        workspace = _Workspace(heads * max(self._chunk_bytes() // (4 * self.n_heads), self.n_tokens), self.query.device)
        report = _Throttled(progress, len(chunks))
        if recording or in_order or self.query.device.type != "cpu" or len(chunks) == 1 or pool is None:
            for rows in chunks:
                work(rows, None if recording else workspace.scratch())
                report.done(1)
            return
        _run_pooled(pool, chunks, lambda rows: work(rows, workspace.scratch()), report)

    def _learn_mask(self, mask: MaskRows, pool: ThreadPoolExecutor | None) -> None:
        """Learn each row's span of ``mask``, so that :meth:`chunks` can size the chunks by their key spans: from
        transformers' own mask functions without building a row (:meth:`MaskRows.learn_known_spans`), else by
        building every row once, in blocks of MASK_BLOCK_BYTES booleans (:meth:`MaskRows.learn_spans`; building
        it one chunk at a time cost a 131072-token window 0.3 ms a row)."""
        if mask.learn_known_spans():
            return
        step = max(1, MASK_BLOCK_BYTES // mask.kv_length)
        blocks = [slice(start, min(start + step, mask.q_length)) for start in range(0, mask.q_length, step)]
        device = self.query.device

        def learn(rows: slice) -> None:
            mask.learn_spans(rows, mask.allowed(rows.start, rows.stop, device)[0])

        if pool is None or len(blocks) == 1:
            for rows in blocks:
                learn(rows)
        else:
            _run_pooled(pool, blocks, learn, _Throttled(None, len(blocks)))

    def weights(
        self, rows: slice | list[int], head: int | None = None, scratch: Scratch | None = None
    ) -> tuple[slice, torch.Tensor]:
        """``(keys, w)``: weights ``(h, r, k)`` of the query ``rows`` over the key span ``keys`` (all heads or one
        ``head``, in the model's dtype); every weight outside the span is exactly 0. With a ``scratch``, the
        scores and ``w`` live in its buffers (``w`` is valid until the thread's next chunk)."""
        if head is None:
            query, key = self.query[:, rows], self.key
        else:  # the head's key/value group: the product every head's pass computes (:meth:`_scores`)
            group = head // self.kv_groups
            query = self.query[group * self.kv_groups : (group + 1) * self.kv_groups, rows]
            key = self.key[group : group + 1]
        mask = self.mask if isinstance(self.mask, MaskRows) else None
        spans = mask.spans(rows) if mask is not None and isinstance(rows, slice) else None
        allowed = None
        if spans is None and mask is not None:
            allowed = allowed_rows(mask, rows, query.device)[0]
            if isinstance(rows, slice):  # this chunk's rows, learnt once: then masked from two comparisons
                mask.learn_spans(rows, allowed)
                spans = mask.spans(rows)
        keys = spans[0] if spans is not None else key_span(allowed, self.n_tokens)
        logits = self._scores(query, key[:, keys], rows, keys, head, scratch)
        if spans is not None and mask is not None:  # the entries of ~allowed below, from two comparisons
            mask_spans(logits, keys, spans[1].to(query.device), spans[2].to(query.device), mask.dtype)
        elif mask is not None and allowed is not None:  # x + min rounds to min: eager's sum, no float mask
            logits = logits.masked_fill_(~allowed[..., keys], torch.finfo(mask.dtype).min)
        elif self.mask is not None:  # a 4D mask the model prepared itself: added as eager adds it
            additive = additive_rows(self.mask, rows, query.device)[0]
            logits = logits + (additive[head : head + 1] if additive.shape[0] > 1 and head is not None else additive)
        return keys, self._softmax(logits, query.dtype, head, scratch)

    def _scores(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        rows: slice | list[int],
        keys: slice,
        head: int | None,
        scratch: Scratch | None,
    ) -> torch.Tensor:
        """Scaled (and soft-capped, and biased) scores ``(h, r, k)`` of ``query`` over the span's ``key`` (of
        ``head`` alone when given, ``query`` then being its key/value group's heads). Each key/value head's
        queries are one product (its group's rows after one another), for one head as for every head: torch's
        CPU product sums a score in an order that depends on the product's row count below a few rows (1 row
        at 16 dimensions, 9 at 256), so one head alone, in products of its own rows, differed in the last bit
        from the pass over every head in a quarter of its entries (a GQA head of 64 dimensions in chunks of 2
        rows, as at 65536 causal tokens)."""
        h, r, d = query.shape
        queries = query.reshape(key.shape[0], -1, d)
        if scratch is None:
            logits = torch.matmul(queries, key.transpose(1, 2))
        else:  # the same product, written into this thread's buffer
            buffer = scratch.take("scores", (key.shape[0], queries.shape[1], keys.stop - keys.start), query.dtype)
            logits = torch.matmul(queries, key.transpose(1, 2), out=buffer)
        if head is not None:  # the head's rows of its group's product (contiguous)
            logits, h = logits.view(h, r, -1)[head % h : head % h + 1], 1
        logits = logits.view(h, r, -1).mul_(self.scaling)  # in place: the scores are this chunk's own
        if self.softcap is not None and scratch is None:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        elif self.softcap is not None:  # the same operations in the same order, in place
            logits = logits.div_(self.softcap).tanh_().mul_(self.softcap)
        if self.bias is not None:  # (1, H, n, n): this chunk's rows and key span, of every head or one
            heads = slice(None) if head is None else slice(head, head + 1)
            logits = logits + self.bias[0, heads][:, rows][..., keys].to(logits.dtype)
        return logits

    def _softmax(
        self, logits: torch.Tensor, dtype: torch.dtype, head: int | None, scratch: Scratch | None
    ) -> torch.Tensor:
        """The softmax of the masked scores over the span (with the sinks' extra column when the model has
        them), in the model's ``dtype``."""
        h, r, width = logits.shape
        if self.sinks is None and scratch is None:
            return torch.softmax(logits, dim=-1, dtype=torch.float32).to(dtype)
        if self.sinks is None and scratch is not None:
            weights = scratch.take("weights", (h, r, width), torch.float32)
            torch.softmax(logits, dim=-1, dtype=torch.float32, out=weights)
            if dtype == torch.float32:
                return weights
            return scratch.take("weights_in_model_dtype", (h, r, width), dtype).copy_(weights)
        assert self.sinks is not None  # (the two returns above are the cases without)
        sinks = self.sinks.reshape(-1)[slice(None) if head is None else slice(head, head + 1)]
        combined = torch.cat([logits, sinks.reshape(h, 1, 1).expand(h, r, 1).to(logits.dtype)], dim=-1)
        combined = combined - combined.amax(dim=-1, keepdim=True)
        return torch.softmax(combined, dim=-1, dtype=combined.dtype)[..., :-1].to(dtype)

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
        target = torch.from_numpy(out)

        def fill(rows: slice, scratch: Scratch | None) -> None:
            keys, w = self.weights(rows, head, scratch)
            target[:, rows, : keys.start] = 0.0  # outside the chunk's key span every weight is exactly 0
            target[:, rows, keys].copy_(w)
            target[:, rows, keys.stop :] = 0.0

        self.each_chunk(fill, head)
        return out

    @torch.inference_mode()
    def sparse(
        self,
        head: int,
        mass: float,
        progress: Callable[[float], None] | None = None,
        *,
        max_keys: int | None = None,
        max_entries: int | None = None,
        label: str = "the head",
    ) -> csr_array:
        """Head ``head``'s rows kept for ``mass`` (:mod:`.sparse`, with its bounds), from the chunks :meth:`heads`
        computes them in and the same way, so that every value is ``heads(head)``'s bit for bit; one chunk held
        at a time."""
        rows = SparseRows(self.n_tokens, mass, max_keys=max_keys, max_entries=max_entries, label=label)

        def add(chunk: slice, scratch: Scratch | None) -> None:
            keys, w = self.weights(chunk, head, scratch)
            rows.add(chunk, keys, w[0])

        self.each_chunk(add, head, progress)
        return rows.build()


class _Throttled:
    """``progress(fraction)`` of a pass over ``total`` chunks, at most every PROGRESS_INTERVAL_S, and at the end."""

    def __init__(self, progress: Callable[[float], None] | None, total: int) -> None:
        self.progress, self.total, self.count = progress, total, 0
        self.last = time.monotonic()

    def done(self, count: int) -> None:
        self.count += count
        if self.progress is None:
            return
        now = time.monotonic()
        if self.count >= self.total or now - self.last >= PROGRESS_INTERVAL_S:
            self.last = now
            self.progress(self.count / self.total)


def _run_pooled(
    pool: ThreadPoolExecutor, chunks: list[slice], work: Callable[[slice], None], report: _Throttled
) -> None:
    """``work(rows)`` for every chunk on the pool, two per core in flight, each chunk in one torch thread and
    the caller's grad mode; see :meth:`LayerAttention.each_chunk`."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    inference = torch.is_inference_mode_enabled()

    def pooled(rows: slice) -> None:
        torch.set_num_threads(1)  # MKL's thread count is the process's: restored by the caller below
        with torch.inference_mode(inference), torch.no_grad():
            work(rows)

    threads = torch.get_num_threads()
    waiting = iter(chunks)
    running: set[Future] = {pool.submit(pooled, rows) for rows in itertools.islice(waiting, 2 * cores)}
    try:
        while running:
            finished, running = wait(running, timeout=PROGRESS_INTERVAL_S, return_when=FIRST_COMPLETED)
            for future in finished:
                future.result()  # a chunk's error is raised here, in the calling thread
                following = next(waiting, None)
                if following is not None:
                    running.add(pool.submit(pooled, following))
            report.done(len(finished))  # (none finished: a report when its interval has passed)
    except BaseException:
        for future in running:
            future.cancel()
        wait(running)
        raise
    finally:  # a worker's own setting of 1 is also what torch gives threads that start later: undone
        torch.set_num_threads(threads)


def _tensor_bytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()

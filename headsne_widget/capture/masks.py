"""transformers' attention mask, kept as its mask function and built one query chunk at a time.

:func:`capture_mask` is the ``AttentionMaskInterface`` entry: instead of the n x n mask eager attention would
add, it keeps :class:`MaskRows` (causal, sliding window, bidirectional window, padding), whose rows are built
per chunk with transformers' ``sdpa_mask``; masked logits get the dtype's minimum, as ``eager_mask`` adds it.
A chunk computes only the key span its queries may see (:func:`key_span`): outside it every weight is exactly
0. Once a chunk's rows were built, those that see one unbroken run of keys are masked from two comparisons
(:meth:`MaskRows.spans`), with the same entries: each row's first and last key are kept, O(n) per mask. Where
the mask function is transformers' own causal, window or chunk function, every row's run is derived from it at
once (:func:`known_spans`), without building the n x n booleans.
"""

from __future__ import annotations

import functools
import operator
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

__all__ = [
    "MaskRows",
    "additive_rows",
    "allowed_rows",
    "capture_mask",
    "key_span",
    "known_spans",
    "mask_spans",
    "span_chunks",
]

_UNKNOWN, _RUN, _OTHER = 0, 1, 2  # a row's mask: not built yet; one unbroken run of keys; anything else
# rows built to check spans derived from the mask function (:meth:`MaskRows.learn_known_spans`), at each of the
# start, the middle and the end of the mask
_CHECK_ROWS = 8
_FAR = 2**62  # an interval's end where the function sets none


class _RowSpans:
    """Per query row of a mask: whether its allowed keys are one unbroken run, and its first and last key
    (int8 + 2 x int64 per row, allocated at the first row learnt; rows are written by one chunk each)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.state: np.ndarray | None = None
        self.first = self.last = np.zeros(0, dtype=np.int64)

    def ensure(self, n_rows: int) -> np.ndarray:
        with self.lock:
            if self.state is None:
                self.first, self.last = np.zeros(n_rows, dtype=np.int64), np.zeros(n_rows, dtype=np.int64)
                self.state = np.full(n_rows, _UNKNOWN, dtype=np.int8)
            return self.state


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
    #: per query row: whether it may attend to one unbroken run of keys first..last (causal, sliding and
    #: bidirectional windows), learnt from its built rows (see :meth:`spans`)
    _rows: _RowSpans = field(default_factory=_RowSpans, compare=False, repr=False)

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
        """``(keys, first, last)`` of query rows built before (:meth:`learn_spans`), when every one of them may
        attend to the keys first[r]..last[r] (``(r, 1)`` each) and no other: its mask is then two comparisons,
        instead of transformers' mask function (1.4 of a chunk's 6 ms at 8192 tokens, causal, on one core), and
        the same entries. ``keys`` is the chunk's key span, from the first row's first key to the last's last."""
        state = self._rows.state
        if state is None or not bool((state[rows] == _RUN).all()):
            return None
        first, last = self._rows.first[rows], self._rows.last[rows]
        keys = slice(int(first.min()), int(last.max()) + 1)
        return keys, torch.from_numpy(first[:, None]), torch.from_numpy(last[:, None])

    def learn_spans(self, rows: slice, allowed: torch.Tensor) -> None:
        """Remember, for each of the query ``rows``, its first and last allowed key and whether its allowed keys
        are that one unbroken run (not a padding hole, not a row with no key at all), from its mask ``allowed``
        (``(1, r, kv)``, on the CPU; elsewhere nothing is learnt)."""
        if allowed.device.type != "cpu":
            return
        self._store(rows, *_runs(allowed.numpy().reshape(-1, allowed.shape[-1])))

    def learn_known_spans(self) -> bool:
        """Learn every row at once, without building it, where the mask function is transformers' own (causal,
        windows, chunks; no padding): :func:`known_spans`, O(n) where building the rows is O(n^2) (11 of the 21 s
        a 65536-token capture with a window of 1024 took). The derived rows are checked against rows built at the
        start, the middle and the end (any other reading of those functions would differ there). False, with
        nothing learnt, where the function is another one or the check fails."""
        known = None
        if self.padding is None:
            known = known_spans(self.mask_function, self.q_offset, self.q_length, self.kv_offset, self.kv_length)
        if known is None:
            return False
        for start in {0, self.q_length // 2, max(0, self.q_length - _CHECK_ROWS)}:
            rows = slice(start, min(start + _CHECK_ROWS, self.q_length))
            built = _runs(self.allowed(rows.start, rows.stop, torch.device("cpu"))[0, 0].numpy())
            if not _same_runs(built, tuple(part[rows] for part in known)):
                return False
        self._store(slice(0, self.q_length), *known)
        return True

    def _store(self, rows: slice, first: np.ndarray, last: np.ndarray, unbroken: np.ndarray) -> None:
        state = self._rows.ensure(self.q_length)
        self._rows.first[rows], self._rows.last[rows] = first, last
        state[rows] = np.where(unbroken, _RUN, _OTHER)

    def learnt(self) -> bool:
        """Whether every query row was built once (:meth:`learn_spans`)."""
        state = self._rows.state
        return state is not None and bool((state != _UNKNOWN).all())

    def row_spans(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Every query row's first and last key (int64 ``(q,)`` each, read-only), when each row was built and may
        attend to exactly that unbroken run of keys; else None."""
        state = self._rows.state
        if state is None or not bool((state == _RUN).all()):
            return None
        first, last = self._rows.first.view(), self._rows.last.view()
        first.flags.writeable = last.flags.writeable = False
        return first, last

    def forget_spans(self) -> None:
        """Forget the rows learnt: every chunk is built from transformers' mask function again."""
        with self._rows.lock:
            self._rows.state = None


def known_spans(
    mask_function: Callable, q_offset: int, q_length: int, kv_offset: int, kv_length: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(first, last, unbroken)`` of every query row (``(q_length,)`` each), as :meth:`MaskRows.learn_spans` would
    learn them from the built rows, derived from ``mask_function`` itself where it is one of transformers' own:
    causal, bidirectional, sliding and bidirectional windows, chunks, and intersections of these (``and_masks``),
    recognised by their code. Each allows one interval of keys a row, so a row's run is the intersection of those
    intervals with the keys there are. None for any other function (padding, packed sequences, ``or_masks``, a
    function of one's own): its rows must be built."""
    q = np.arange(q_offset, q_offset + q_length, dtype=np.int64)
    interval = _key_interval(mask_function, q)
    if interval is None:
        return None
    low, high = np.maximum(interval[0], kv_offset), np.minimum(interval[1], kv_offset + kv_length - 1)
    unbroken = low <= high
    return np.where(unbroken, low - kv_offset, 0), np.where(unbroken, high - kv_offset, 0), unbroken


def _key_interval(mask_function: Callable, q: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The keys ``low[r] <= kv_idx <= high[r]`` that ``mask_function`` allows the query ``q[r]``, or None where it
    is not a function :func:`known_spans` knows."""
    kind = _kind(mask_function)
    code = getattr(mask_function, "__code__", None)
    cells = dict(zip(code.co_freevars, [c.cell_contents for c in mask_function.__closure__ or ()])) if code else {}
    try:
        if kind != "and":
            return None if kind is None else _INTERVALS[kind](q, cells)
        parts = [_key_interval(function, q) for function in cells["mask_functions"]]
    except (KeyError, TypeError, IndexError, ValueError):  # a closure not as expected (a chunk size <= 0: ValueError)
        return None
    low, high = np.full_like(q, -_FAR), np.full_like(q, _FAR)
    for part in parts:  # every function's interval: their intersection
        if part is None:
            return None
        low, high = np.maximum(low, part[0]), np.minimum(high, part[1])
    return low, high


def _chunk_interval(q: np.ndarray, cells: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """(kv_idx - pad) // chunk_size == (q_idx - pad) // chunk_size, the padding of batch 0 (the rows learnt)."""
    size, pad = operator.index(cells["chunk_size"]), int(cells["left_padding"][0])
    if size <= 0:
        raise ValueError(size)
    start = pad + (q - pad) // size * size
    return start, start + size - 1


_INTERVALS: dict[str, Callable[[np.ndarray, dict[str, Any]], tuple[np.ndarray, np.ndarray]]] = {
    "causal": lambda q, _: (np.full_like(q, -_FAR), q),  # kv_idx <= q_idx
    "bidirectional": lambda q, _: (np.where(q >= 0, -_FAR, _FAR), np.where(q >= 0, _FAR, -_FAR)),  # q_idx >= 0
    "window": lambda q, c: (q - operator.index(c["sliding_window"]) + 1, np.full_like(q, _FAR)),  # kv > q - w
    "bidirectional_window": lambda q, c: (  # abs(q_idx - kv_idx) <= sliding_window
        q - operator.index(c["sliding_window"]),
        q + operator.index(c["sliding_window"]),
    ),
    "chunk": _chunk_interval,
}


def _kind(mask_function: Callable) -> str | None:
    """Which of transformers' mask functions ``mask_function`` is (:data:`_INTERVALS`, or "and" for
    ``and_masks``), by identity or by the code its factory returns; None for any other."""
    from transformers import masking_utils

    if mask_function is masking_utils.causal_mask_function:
        return "causal"
    if mask_function is masking_utils.bidirectional_mask_function:
        return "bidirectional"
    code = getattr(mask_function, "__code__", None)
    return next((name for name, known in _known_codes().items() if code is known), None)


@functools.cache
def _known_codes() -> dict[str, Any]:
    """The code of the functions transformers' mask factories return (those this version has)."""
    from transformers import masking_utils as m

    factories = {
        "and": lambda: m.and_masks(m.causal_mask_function),
        "window": lambda: m.sliding_window_overlay(1),
        "bidirectional_window": lambda: m.sliding_window_bidirectional_overlay(1),
        "chunk": lambda: m.chunked_overlay(1, torch.zeros(1, dtype=torch.long)),
    }
    codes = {}
    for name, factory in factories.items():
        try:
            codes[name] = factory().__code__
        except AttributeError:  # (a version without this factory)
            continue
    return codes


def _runs(grid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row of a boolean ``grid``'s first and last True and whether its Trues are that one unbroken run."""
    first = grid.argmax(axis=1)
    last = grid.shape[1] - 1 - grid[:, ::-1].argmax(axis=1)
    return first, last, grid.any(axis=1) & (grid.sum(axis=1) == last - first + 1)


def _same_runs(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...]) -> bool:
    """Whether two rows' :func:`_runs` agree: the same rows unbroken, with the same first and last key."""
    unbroken = a[2]
    return bool((unbroken == b[2]).all() and (a[0] == b[0])[unbroken].all() and (a[1] == b[1])[unbroken].all())


def capture_mask(  # (transformers passes everything by keyword: masking_utils' three mask_interface calls)
    batch_size: int,
    q_length: int,
    kv_length: int,
    q_offset: int = 0,
    kv_offset: int = 0,
    *,
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


def allowed_rows(mask: MaskRows, rows: slice | list[int], device: torch.device) -> torch.Tensor:
    """Boolean ``(1, 1, r, kv)`` of transformers' mask for the query ``rows`` (a slice, or a few row indices)."""
    if isinstance(rows, slice):
        return mask.allowed(rows.start, rows.stop, device)[:1]
    return torch.cat([mask.allowed(r, r + 1, device)[:1] for r in rows], dim=2)


def additive_rows(mask: MaskRows | torch.Tensor | None, rows: slice | list[int], device: torch.device) -> Any:
    """The eager additive mask ``(1, 1 or H, r, kv)`` of the query ``rows`` (0 where allowed, dtype min elsewhere)."""
    if mask is None:
        return None
    if isinstance(mask, MaskRows):
        allowed, dtype = allowed_rows(mask, rows, device), mask.dtype
    else:  # a 4D mask the model prepared itself (bool or additive float), rows sliced from it
        allowed, dtype = mask[:1, :, rows].to(device), torch.float32
        if allowed.dtype != torch.bool:
            return allowed
    return torch.where(allowed, torch.zeros((), device=device, dtype=dtype), torch.finfo(dtype).min)


def mask_spans(logits: torch.Tensor, keys: slice, first: torch.Tensor, last: torch.Tensor, dtype: torch.dtype) -> None:
    """Set ``logits`` (h, r, keys) to dtype's minimum outside each row's keys first[r]..last[r] ((r, 1) each), in
    place. A float32 or float64 chunk on the CPU is written row by row by a compiled loop
    (:func:`.mask_kernels.fill_outside`); any other is compared column by column, visiting only the columns some
    row may not see: before the largest first key and after the smallest last key."""
    start, stop = keys.start, keys.stop
    compiled = logits.device.type == "cpu" and logits.dtype in (torch.float32, torch.float64)
    if compiled and logits.is_contiguous() and not logits.requires_grad:  # (numpy sees no autograd graph)
        from .mask_kernels import fill_outside  # numba: imported on first use

        low = np.ascontiguousarray(first.reshape(-1).numpy() - start, dtype=np.int64)
        high = np.ascontiguousarray(last.reshape(-1).numpy() - start, dtype=np.int64)
        fill_outside(logits.numpy(), low, high, torch.finfo(dtype).min)
        return
    inner_start, inner_stop = int(first.max()), int(last.min()) + 1  # every row sees [inner_start, inner_stop)
    edges = [(start, inner_start), (inner_stop, stop)] if inner_start < inner_stop else [(start, stop)]
    for a, b in edges:
        if a < b:
            columns = torch.arange(a, b, device=logits.device)
            blocked = (columns < first) | (columns > last)
            logits[..., a - start : b - start].masked_fill_(blocked, torch.finfo(dtype).min)


def key_span(allowed: torch.Tensor | None, n: int) -> slice:
    """The keys from the first to the last that some query of the chunk may attend to: outside them every weight
    is exactly 0 (exp of the dtype's minimum), so a causal or sliding-window chunk computes only its span. A row
    with no key allowed (eager then spreads it uniformly over all n keys) keeps the full width."""
    if allowed is None:
        return slice(0, n)
    if allowed.device.type == "cpu":  # numpy's boolean reductions: 0.05 ms a chunk where torch's took 1 to 8 ms
        rows = allowed.numpy().reshape(-1, allowed.shape[-1])
        if not rows.any(axis=1).all():
            return slice(0, n)
        columns = np.asarray(rows.any(axis=0))  # first and last by argmax: no array whose size changes by chunk
        return slice(int(columns.argmax()), n - int(columns[::-1].argmax()))
    if not bool(allowed.any(dim=-1).all()):
        return slice(0, n)
    found = allowed.any(dim=(0, 1)).nonzero()
    return slice(int(found[0]), int(found[-1]) + 1)


def span_chunks(first: np.ndarray, last: np.ndarray, heads: int, chunk_bytes: int) -> list[slice] | None:
    """Chunks of consecutive query rows whose float32 scores over their key span (the first row's first key to
    the last row's last) stay within ``chunk_bytes`` (at least one row a chunk), when every row's first and last
    key are at least the previous row's (the span of rows s..e-1 is then last[e-1] + 1 - first[s]); else None."""
    n = int(first.shape[0])
    if n == 0 or (np.diff(first) < 0).any() or (np.diff(last) < 0).any():
        return None
    limit = max(1, chunk_bytes // (4 * heads))  # rows x keys per chunk
    firsts, lasts = first.tolist(), last.tolist()
    chunks, start, rows = [], 0, 1
    while start < n:
        low, high = 1, n - start  # the most rows whose span fits: the span only grows with the rows
        while low < high:
            middle = (low + high + 1) // 2
            if middle * (lasts[start + middle - 1] + 1 - firsts[start]) <= limit:
                low = middle
            else:
                high = middle - 1
        rows = low
        chunks.append(slice(start, start + rows))
        start += rows
    return chunks

"""Sparse attention rows: for each query, the fewest of its largest weights that hold a share ``mass`` of its row.

Attention rows are peaked: most of a row's weight sits on a few keys. :func:`sparse_rows` keeps, for each row, the
smallest set of its largest entries whose sum reaches ``mass`` times the row's total (1 for a softmax row; less
where attention sinks take a share), as a ``scipy.sparse.csr_array`` (n x n, float32, column indices sorted in
each row) whose values are the dense head's entries bit for bit. :class:`SparseRows` collects the rows one query
chunk at a time as :meth:`LayerAttention.each_chunk` computes them, so no n x n array is ever held: memory is
O(n x k) for k entries kept a row, plus one chunk. The matrix carries what it kept as attributes: ``mass`` (the
share asked for) and ``kept`` (float64 ``(n,)``, the share of each row's total it holds, at least ``mass``
unless ``max_keys`` capped the row); a matrix derived from it (``S * 2``, ``S.copy()``) has no such attributes.

The selection is exact: a row's entries are ranked by value (the lower column first among equal ones), summed in
float64 from the largest, and the row keeps entries up to the first whose running sum reaches ``mass`` x total
(total: the float64 sum of the row's entries). ``mass=1`` keeps every nonzero entry.

Bounds (issue 32: a broad head's rows at mass 0.99 are n^2 / 2 entries): ``max_keys`` keeps at most that many
of a row's largest entries; ``max_entries`` raises ``errors.MemoryBudgetError`` from the first chunk whose
entries kept so far, extrapolated linearly over the rows still to do, exceed it (``budget.entries_within()``).
"""

from __future__ import annotations

import math
import threading
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .._checks import check_mass, int_at_least
from .._memory import fresh_empty
from ..budget import SPARSE_ENTRY_BYTES
from ..errors import MemoryBudgetError

if TYPE_CHECKING:
    from scipy.sparse import csr_array

__all__ = ["SparseRows", "check_entries", "check_limits", "sparse_from_dense", "top_mass", "top_mass_totals"]

_DENSE_BLOCK_BYTES = 4 * 2**20  # rows of a dense head selected at once
_SCRATCH = threading.local()  # each thread's column buffer for top_mass, kept from chunk to chunk


def check_limits(max_keys: Any, max_entries: Any) -> tuple[int | None, int | None]:
    """``(max_keys, max_entries)`` checked: each None or an int >= 1, else a TypeError or ValueError naming it."""
    return (
        None if max_keys is None else int_at_least(max_keys, "max_keys", 1),
        None if max_entries is None else int_at_least(max_entries, "max_entries", 1),
    )


def check_entries(
    entries: int, done: int, n: int, limit: int, *, label: str, mass: float, max_keys: int | None = None
) -> None:
    """MemoryBudgetError when ``entries`` kept in the ``done`` rows of ``n`` so far, extrapolated linearly over the
    rows still to do, exceed ``limit``: called after each chunk, so the refusal comes before the rest is computed
    (the estimate is never below what is held, so what is held stays within the limit; it is a lower bound of
    the total where later rows keep more, as a broad causal head's do)."""
    needed = entries + math.ceil(entries / max(done, 1) * (n - done))
    if needed <= limit:
        return
    capped = "" if max_keys is None else f", max_keys={max_keys}"
    raise MemoryBudgetError(
        f"{label}'s rows at mass={mass:g}{capped} would keep at least about {needed:,} entries (extrapolated from "
        f"{done:,} of {n:,} rows; a causal head's later rows are wider and keep more), "
        f"{needed * SPARSE_ENTRY_BYTES / 2**30:.1f} GiB to build its P, above the budget of "
        f"{limit:,} entries ({limit * SPARSE_ENTRY_BYTES / 2**30:.1f} GiB); set a smaller mass, max_keys= "
        f"(max_keys={max(1, limit // max(n, 1))} fits), or a larger budget "
        "(headsne_widget.budget.set_memory_budget(nbytes) or the HEADSNE_MEMORY_BUDGET environment variable)",
        needed_entries=needed,
        needed_bytes=needed * SPARSE_ENTRY_BYTES,
    )


def top_mass(
    rows: torch.Tensor | np.ndarray, mass: float, max_keys: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The entries of each row of ``rows`` (float32 or float64 ``(r, k)``, non-negative) kept for ``mass``
    (module doc).

    Returns ``(counts, columns, values, kept)``: entries kept per row ``(r,)``, their columns (in ``rows``, int64,
    increasing in each row) and float32 values, row after row, and the share of each row's total kept ``(r,)``
    float64 (1 for a row whose total is 0, which keeps nothing). The rule, the one of every sparse selection in
    the package (:func:`~headsne_widget.affinity.sparse.largest_entries` calls this): entries ranked by value,
    the lower column first among equal ones, summed in float64 from the largest until the sum reaches
    ``mass x total x (1 - 1e-12)`` (total: the row's float64 sum, numpy's), and no more than ``max_keys`` of them
    (then ``kept`` may fall below ``mass``); zeros are never kept. One compiled pass a row
    (:func:`.mass_kernels.mass_rows`: bins of the row's positive entries, only the cut bin ranked; no torch sort).
    """
    counts, columns, values, kept, _ = top_mass_totals(rows, mass, max_keys)
    return counts, columns, values, kept


def top_mass_totals(
    rows: torch.Tensor | np.ndarray, mass: float, max_keys: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`top_mass` and each row's float64 total ``(r,)`` it measured ``kept`` against (the capture's kept rows,
    :mod:`.folds.rows`, keep it to select a smaller mass later by the same rule)."""
    from .mass_kernels import mass_rows  # numba: imported on first use

    w = rows.detach().cpu().numpy() if isinstance(rows, torch.Tensor) else np.asarray(rows)
    if w.dtype not in (np.float32, np.float64):
        w = w.astype(np.float32)
    w = np.ascontiguousarray(w)
    r, width = w.shape
    limit = width if max_keys is None else min(width, max_keys)
    totals = w.sum(axis=1, dtype=np.float64)
    target = mass * totals * (1.0 - 1e-12) if mass < 1.0 else np.full(r, np.inf)
    scratch = getattr(_SCRATCH, "columns", None)
    if scratch is None or scratch.size < r * limit + 1:
        scratch = _SCRATCH.columns = np.empty(max(r * limit + 1, 2**16), np.int64)
    counts, columns, values, kept = mass_rows(w, target, totals, limit, scratch)
    if mass >= 1.0 and limit == width:  # every nonzero entry: the whole row, whatever the order of its sum
        kept[:] = 1.0
    return counts, columns, values.astype(np.float32, copy=False), kept, totals


class SparseRows:
    """The rows of one n x n head, added a query chunk at a time (from any thread), built into a CSR matrix."""

    def __init__(
        self,
        n_tokens: int,
        mass: float,
        *,
        max_keys: int | None = None,
        max_entries: int | None = None,
        label: str = "the head",
    ) -> None:
        self.n, self.mass = n_tokens, check_mass(mass)
        self.max_keys, self.max_entries = check_limits(max_keys, max_entries)
        self.label = label  # what the budget's refusal names ("layer 1 head 2")
        self.parts: dict[int, tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
        self.lock = threading.Lock()
        self.entries = self.rows_done = 0

    def add(self, rows: slice, keys: slice, weights: torch.Tensor) -> None:
        """The weights ``(r, k)`` of the query ``rows`` over the keys ``keys`` (zero outside them)."""
        counts, columns, values, kept = top_mass(weights.float(), self.mass, self.max_keys)
        columns = (columns + keys.start).astype(np.int32 if self.n < 2**31 else np.int64)
        with self.lock:
            self.parts[rows.start] = (rows.stop, counts, columns, values.astype(np.float32, copy=False), kept)
            self.entries += int(counts.sum())
            self.rows_done += int(counts.size)
            entries, done = self.entries, self.rows_done
        if self.max_entries is not None:
            check_entries(
                entries, done, self.n, self.max_entries, label=self.label, mass=self.mass, max_keys=self.max_keys
            )

    def build(self) -> csr_array:
        """The CSR matrix of every row added (each row exactly once), with ``mass`` and ``kept`` attributes; the
        rows added are moved into it (peak: the matrix and one chunk's rows)."""
        from scipy.sparse import csr_array

        starts = sorted(self.parts)
        stops = [self.parts[s][0] for s in starts]
        if starts[:1] != [0] or stops[-1:] != [self.n] or starts[1:] != stops[:-1]:
            raise RuntimeError(f"rows added do not tile 0..{self.n}: {list(zip(starts, stops))[:5]}...")
        counts = np.concatenate([self.parts[s][1] for s in starts])
        kept = np.concatenate([self.parts[s][4] for s in starts])
        nnz = int(counts.sum())
        index = np.int32 if max(nnz, self.n) < 2**31 else np.int64
        indptr = np.zeros(self.n + 1, dtype=index)
        np.cumsum(counts, out=indptr[1:])
        indices, data = fresh_empty(nnz, index), fresh_empty(nnz, np.float32)
        for start in starts:
            _, _, columns, values, _ = self.parts.pop(start)
            at = int(indptr[start])
            indices[at : at + columns.size], data[at : at + values.size] = columns, values
        matrix = csr_array((data, indices, indptr), shape=(self.n, self.n), copy=False)
        matrix.has_canonical_format = True  # (each row's columns are increasing and distinct: top_mass)
        matrix.mass = self.mass  # type: ignore[attr-defined]
        kept.flags.writeable = False
        matrix.kept = kept  # type: ignore[attr-defined]
        return matrix


def sparse_from_dense(
    dense: np.ndarray,
    mass: float,
    *,
    max_keys: int | None = None,
    max_entries: int | None = None,
    label: str = "the head",
) -> csr_array:
    """:class:`SparseRows` of a dense float32 ``(n, n)`` head, a block of rows at a time (bounds as there)."""
    n = int(dense.shape[0])
    rows = SparseRows(n, mass, max_keys=max_keys, max_entries=max_entries, label=label)
    step = max(1, _DENSE_BLOCK_BYTES // (4 * max(n, 1)))
    for start in range(0, n, step):
        block = slice(start, min(start + step, n))
        rows.add(block, slice(0, n), torch.from_numpy(np.array(dense[block], dtype=np.float32)))  # (own copy)
    return rows.build()

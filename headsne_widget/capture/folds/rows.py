"""Each query's largest keys of every head, kept while the capture computes them (issue 55): ``ex.folded["rows"]``.

A head change on a long text used to recompute the head's rows from the captured queries and keys: n^2 / 2 scores
and softmaxes for a causal head (28-30 s at 65536 tokens on 2 cores). The forward pass computes every score of
every head once already; :class:`KeptRows` selects, in each chunk while its weights are in cache, each row's
largest keys by the package's one rule (:func:`..sparse.top_mass`: value order, the lower column first among
equal ones, float64 sums from the largest) up to ``mass`` of the row and at most ``max_keys`` of them, with the
forward pass's own float32 values. :meth:`KeptRowStore.sparse` then gives ``ex.sparse_attention`` any smaller
selection (a mass and a key cap whose rows are prefixes of the kept ones) bit for bit as the recompute would,
and None where a row needs more than was kept (the caller recomputes, as before).

The cap is chosen for the map, not for memory: a t-SNE needs about 3 x perplexity neighbours a point (openTSNE
and FIt-SNE keep 90); docs/long-texts.md has the KL and neighbourhood preservation measured against the cap.
Each layer's rows are ``(H, n, max_keys)`` columns and values plus ``(H, n)`` counts and totals, 8 bytes a kept
slot; they are allocated when the layer starts, in RAM while they fit the memory budget (``budget.
memory_budget_bytes``), else as numpy memmaps in a temporary folder removed with the store (``weakref.finalize``;
a folder left by a killed process is removed by the next store); where neither the budget nor half the folder's
free disk holds them, the allocation is refused before it is made (``MemoryBudgetError``; ``rows="auto"`` then
warns and keeps none).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch

from ..._checks import DEFAULT_MASS, int_at_least
from ...budget import memory_budget_bytes
from ...errors import MemoryBudgetError
from ..sparse import check_entries, top_mass_totals
from .base import Fold, LayerShape
from .rows_kernels import gather_sorted, store_ranked

if TYPE_CHECKING:
    from scipy.sparse import csr_array

__all__ = ["ROWS_MIN_TOKENS", "ROW_KEYS", "KeptRowStore", "KeptRows", "RowsSetting", "rows_setting"]

#: keys kept a row: 3 x perplexity 30, the neighbours openTSNE and FIt-SNE give a point (docs/long-texts.md)
ROW_KEYS = 90
#: ``rows="auto"`` keeps rows from this many tokens on: where a head's P is sparse (``affinity.sparse.
#: SPARSE_MIN_TOKENS``), the only P that reads them; below it a head is dense and recomputed in milliseconds
ROWS_MIN_TOKENS = 4096
_SLOT_BYTES = 8  # a kept key: int32 column + float32 value
_ROW_BYTES = 12  # a row's int32 count and float64 total
_PREFIX = "headsne-rows-"


@dataclass(frozen=True)
class RowsSetting:
    """The ``rows`` capture option resolved: ``wanted`` "auto" (from ROWS_MIN_TOKENS tokens on, none where they
    do not fit), "always" (refused where they do not fit) or "never"; ``max_keys`` a row at ``mass``."""

    wanted: str = "auto"
    max_keys: int = ROW_KEYS
    mass: float = DEFAULT_MASS

    def keeps(self, n_tokens: int) -> bool:
        return self.wanted == "always" or (self.wanted == "auto" and n_tokens >= ROWS_MIN_TOKENS)


def rows_setting(rows: Any) -> RowsSetting:
    """``rows``: "auto" (default), True (at any length, ROW_KEYS keys), False (never), or an int (keys a row, at
    any length); else a TypeError / ValueError naming it."""
    if rows == "auto" and isinstance(rows, str):
        return RowsSetting()
    if isinstance(rows, bool):
        return RowsSetting("always" if rows else "never")
    if isinstance(rows, (int, np.integer)):
        return RowsSetting("always", int_at_least(rows, "rows", 1))
    raise TypeError(f'rows must be "auto", True, False or a number of keys a row, got {rows!r}')


class _LayerRows:
    """One layer's kept rows: ``columns`` / ``values`` ``(H, n, K)`` in rank order (the largest first), ``counts``
    ``(H, n)`` and each row's float64 ``totals`` ``(H, n)``."""

    def __init__(self, arrays: dict[str, np.ndarray], mass: float) -> None:
        self.columns, self.values = arrays["columns"], arrays["values"]
        self.counts, self.totals = arrays["counts"], arrays["totals"]
        self.mass, self.n_heads, self.max_keys = mass, self.columns.shape[0], self.columns.shape[2]

    def add(self, rows: slice, keys: slice, weights: torch.Tensor) -> None:
        """Select the chunk's rows and store them ranked, a compiled pass a piece (a head's block of rows), the
        pieces shared by this thread and the workers (the forward pass waits for the fold, so a core would
        otherwise sit idle), unless torch's threads spin between its operations and would contend for the cores
        (``_parallel.torch_threads_sleep``; at 16384 tokens on 2 cores: 16.2-17.2 s a capture shared against
        20.1-21.6 s on this thread with them asleep, 24.3-27.5 against 21.5-23.8 s with them spinning)."""
        from ..._parallel import shares, threads, torch_threads_sleep

        chunk = weights.detach().cpu().contiguous().numpy()
        h, r = chunk.shape[:2]
        step = -(-r // max(1, -(-2 * threads() // h)))  # at least two pieces a thread where the rows allow
        pieces = [(head, a) for head in range(h) for a in range(0, r, step)]

        def select(p: int) -> None:
            head, a = pieces[p]
            counts, cols, vals, _, totals = top_mass_totals(chunk[head, a : a + step], self.mass, self.max_keys)
            start = rows.start + a
            at = slice(head, head + 1)
            store_ranked(
                counts, cols, vals, counts.size, start, keys.start, self.columns[at], self.values[at], self.counts[at]
            )
            self.totals[head, start : start + counts.size] = totals

        if torch_threads_sleep():
            shares(len(pieces), select)
        else:
            for p in range(len(pieces)):
                select(p)


class KeptRowStore:
    """Every layer's kept rows (:class:`_LayerRows`), in RAM or memmapped in a folder of its own (module doc)."""

    def __init__(self, n_tokens: int, max_keys: int, mass: float) -> None:
        self.n_tokens, self.max_keys, self.mass = n_tokens, max_keys, mass
        self.layers: list[_LayerRows] = []
        self.folder: str | None = None
        self.on_disk = 0  # layers memmapped

    @property
    def nbytes(self) -> int:
        return sum(layer.n_heads for layer in self.layers) * self.n_tokens * (self.max_keys * 8 + _ROW_BYTES)

    def add_layer(self, n_heads: int) -> _LayerRows:
        """Allocate a layer's rows (in RAM within the budget, else memmapped), or refuse before allocating."""
        n, k = self.n_tokens, self.max_keys
        needed = n_heads * n * (k * _SLOT_BYTES + _ROW_BYTES)
        shapes = {"columns": ((n_heads, n, k), np.int32), "values": ((n_heads, n, k), np.float32),
                  "counts": ((n_heads, n), np.int32), "totals": ((n_heads, n), np.float64)}  # fmt: skip
        if needed <= memory_budget_bytes():
            arrays = {name: np.zeros(shape, dtype) for name, (shape, dtype) in shapes.items()}
        else:
            folder = self.folder or tempfile.gettempdir()
            free = shutil.disk_usage(folder).free // 2
            if needed > free:
                raise MemoryBudgetError(
                    f"the kept rows of a layer ({n_heads} heads x {n:,} tokens x {k} keys) need "
                    f"{needed / 2**20:,.0f} MiB, over the memory budget ({memory_budget_bytes() / 2**20:,.0f} MiB) "
                    f"and half the free disk of {folder} ({free / 2**20:,.0f} MiB): capture with rows=False, fewer "
                    "keys (rows=30), or a larger budget (headsne_widget.budget.set_memory_budget)",
                    needed_bytes=needed,
                )
            folder, index = self._folder(), len(self.layers)
            arrays = {
                name: np.lib.format.open_memmap(Path(folder, f"{index}-{name}.npy"), "w+", dtype, shape)
                for name, (shape, dtype) in shapes.items()
            }
            self.on_disk += 1
        self.layers.append(_LayerRows(arrays, self.mass))
        return self.layers[-1]

    def _folder(self) -> str:
        if self.folder is None:
            _remove_orphans()
            self.folder = tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-")
            weakref.finalize(self, shutil.rmtree, self.folder, ignore_errors=True)
        return self.folder

    def sparse(
        self, layer: int, head: int, mass: float, *, max_keys: int | None, max_entries: int | None, label: str
    ) -> csr_array | None:
        """The head's rows for ``mass`` and ``max_keys`` as ``capture.sparse.SparseRows`` builds them (the same
        CSR, ``mass`` and ``kept``), from the kept rows; None where a row needs more keys than it kept (or
        ``mass`` is 1). ``max_entries``: MemoryBudgetError when the rows hold more."""
        if mass >= 1.0:
            return None
        rows = self.layers[layer]
        columns, values = rows.columns[head], rows.values[head]
        counts, totals = rows.counts[head].astype(np.int64), rows.totals[head]
        slots = np.arange(self.max_keys)
        held = slots < counts[:, None]
        sums = np.cumsum(np.where(held, values, np.float32(0)), axis=1, dtype=np.float64)  # the rule's ranked sums
        reach = held & (sums >= (mass * totals * (1.0 - 1e-12))[:, None])
        need = np.where(reach.any(axis=1), reach.argmax(axis=1) + 1, np.iinfo(np.int64).max)
        take = np.minimum(need, np.iinfo(np.int64).max if max_keys is None else max_keys)
        take = np.where(totals > 0, take, 0)
        if (take > counts).any():
            return None
        n = self.n_tokens
        entries = int(take.sum())
        if max_entries is not None:
            check_entries(entries, n, n, max_entries, label=label, mass=mass, max_keys=max_keys)
        at = np.arange(n)
        kept = np.where(take > 0, sums[at, np.maximum(take, 1) - 1] / np.where(totals > 0, totals, 1.0), 1.0)
        return _csr(columns, values, take, mass, kept)


def _csr(columns: np.ndarray, values: np.ndarray, take: np.ndarray, mass: float, kept: np.ndarray) -> csr_array:
    """Each row's first ``take`` ranked slots as ``capture.sparse.SparseRows.build`` makes a matrix: columns
    increasing in each row (:func:`.rows_kernels.gather_sorted`)."""
    from scipy.sparse import csr_array

    n, nnz = int(take.size), int(take.sum())
    index = np.int32 if max(nnz, n) < 2**31 else np.int64
    indptr = np.zeros(n + 1, dtype=index)
    np.cumsum(take, out=indptr[1:])
    indices, data = np.empty(nnz, index), np.empty(nnz, np.float32)
    gather_sorted(columns, values, indptr, indices, data)
    matrix = csr_array((data, indices, indptr), shape=(n, n), copy=False)
    matrix.has_canonical_format = True
    matrix.mass = mass  # type: ignore[attr-defined]
    kept.flags.writeable = False
    matrix.kept = kept  # type: ignore[attr-defined]
    return matrix


def _remove_orphans() -> None:
    """Remove the row folders of processes that are gone (a kernel killed before its extraction was collected)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{_PREFIX}*"):
        pid = folder.name[len(_PREFIX) :].split("-")[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class KeptRows(Fold):
    """The fold: each layer's rows kept as its chunks pass (module doc); ``setting`` is the capture's option
    (:meth:`configured` makes the class a capture runs)."""

    name = "rows"
    setting: ClassVar[RowsSetting] = RowsSetting()

    @classmethod
    def configured(cls, setting: RowsSetting) -> type[KeptRows]:
        return type(cls.__name__, (cls,), {"setting": setting, "__doc__": cls.__doc__})

    def __init__(self) -> None:
        self.store: KeptRowStore | None = None
        self.layer: _LayerRows | None = None
        self.off = False

    def start(self, layer: LayerShape) -> None:
        if self.off or not self.setting.keeps(layer.n_tokens):
            self.off = True
            return
        if self.store is None:
            self.store = KeptRowStore(layer.n_tokens, self.setting.max_keys, self.setting.mass)
        try:
            self.layer = self.store.add_layer(layer.n_heads)
        except MemoryBudgetError as error:
            if self.setting.wanted == "always":
                raise
            warnings.warn(f"{error}; no rows kept: each head is recomputed when asked", stacklevel=2)
            self.store, self.layer, self.off = None, None, True

    def chunk(self, rows: slice, keys: slice, weights: torch.Tensor) -> None:
        if self.layer is not None:
            self.layer.add(rows, keys, weights)

    def end_layer(self) -> None:
        self.layer = None

    def finish(self, layers: list[Any]) -> KeptRowStore | None:
        if self.off or self.store is None:
            return None
        # the read's kernel compiled (or loaded from numba's cache) with the capture, not at the first head change
        none, empty = np.zeros((1, 1), np.int32), np.zeros(0, np.int32)
        gather_sorted(none, none.astype(np.float32), np.zeros(2, np.int32), empty, empty.astype(np.float32))
        return self.store

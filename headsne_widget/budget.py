"""The memory budget of allocations that grow with a head's kept entries (sparse rows, a sparse P, a kNN P).

A dense P has a fixed ceiling (``capture.sources.DENSE_BUDGET_BYTES``); a sparse one grows with what each row
keeps, n^2 / 2 entries for a broad causal head at mass 0.99 (134 M at 16384 tokens), so its ceiling is taken
from the memory this process can still get, read when a build starts: :func:`memory_budget_bytes`. Callers turn
it into entries with :func:`entries_within` and hand that to ``Extraction.sparse_attention(..., max_entries=)``,
which refuses (``errors.MemoryBudgetError``) before it allocates, rather than being killed by the kernel.
"""

from __future__ import annotations

import os
import re
import resource

from .errors import MemoryBudgetError

__all__ = [
    "BUDGET_SHARE",
    "ENV_VAR",
    "SPARSE_ENTRY_BYTES",
    "available_bytes",
    "entries_within",
    "memory_budget_bytes",
    "parse_bytes",
    "set_memory_budget",
    "within_budget",
]

#: the share of the memory still available that one sparse build may plan to use. Half: what is "available" is
#: an estimate (the kernel's MemAvailable counts page cache it may not free fast enough), the rest of the process
#: grows meanwhile (the t-SNE's arrays, the widget's frames, another kernel), and the widget may build two P's at
#: once (a click and the hovered head's prefetch); two builds at half each still stay within what was free.
BUDGET_SHARE = 0.5

#: peak bytes per kept entry of a sparse attention P built end to end and handed to the t-SNE: the rows (float32
#: value + int32 column, 8 B), then ``affinity.sparse.sparse_attention_affinities``' transposed copy of them and its
#: P (up to two entries of M + M^T per kept entry, float32 + int32), then the sparse engine's copy of P in reverse
#: Cuthill-McKee order beside it. Measured (tests/test_budget.py::test_sparse_entry_bytes_covers_the_measured_peak
#: repeats it at 4096 tokens): a fresh process builds the rows of a uniform causal head (row i = 1/(i+1) on columns
#: 0..i, the broadest causal head) chunk by chunk with ``capture.sparse.SparseRows`` at mass 0.99, then
#: ``sparse_attention_affinities`` of them and the engine's reordering, after numba's kernels were compiled and run
#: on a small P; peak bytes = ru_maxrss minus the RSS before the rows, divided by the rows' nnz. 2026-11-26, Linux
#: x86-64, numpy 2, scipy 1.16: 4096 tokens (8.3 M entries) 48.4 B, 8192 tokens (33.2 M entries) 43.4 B (the rows
#: to P alone 37-42 B: 58 B before P was written straight in float32, 62-63 B on 2026-11-25, when 72 was set with
#: 13 % of slack). Kept at 72: 49-66 % above the peak measured now, for what the widget holds beside a build (the
#: run's buffers, the partners' rows), not measured here.
SPARSE_ENTRY_BYTES = 72

#: environment variable overriding the budget, in bytes ("3G", "512M", "1.5GiB" accepted)
ENV_VAR = "HEADSNE_MEMORY_BUDGET"

_override: int | None = None
_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def parse_bytes(text: str) -> int:
    """``"3G"``, ``"512MiB"``, ``"1.5g"`` or ``"1000000"`` as bytes (binary units), else a ValueError naming it."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([kmgt]?)(?:i?b)?\s*", str(text), flags=re.IGNORECASE)
    if match is None:
        raise ValueError(f"{ENV_VAR} must be a size in bytes such as 3G, 512M or 1000000; got {text!r}")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def set_memory_budget(nbytes: int | None) -> None:
    """Fix the budget at ``nbytes`` bytes for this process (None: back to :func:`memory_budget_bytes`' rule)."""
    global _override
    if nbytes is not None and (isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes <= 0):
        raise ValueError(f"the memory budget must be a positive number of bytes or None, got {nbytes!r}")
    _override = nbytes


def _proc_kib(path: str, field: str) -> int | None:
    """The ``field: N kB`` line of a /proc file in bytes, or None where there is none (not Linux)."""
    try:
        with open(path) as lines:
            for line in lines:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _physical_available() -> int:
    """MemAvailable (what the kernel can give without swapping), else the free pages sysconf reports."""
    available = _proc_kib("/proc/meminfo", "MemAvailable")
    if available is not None:
        return available
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 2**34  # no way to tell: 16 GiB, a laptop's memory


def _address_space_headroom() -> int | None:
    """The address space left under a finite RLIMIT_AS (soft limit minus VmSize), else None."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    size = _proc_kib("/proc/self/status", "VmSize")
    return max(0, soft - (size or 0))


def _cgroup_headroom() -> int | None:
    """memory.max minus memory.current of this process's cgroup (v2; a container's limit), else None."""
    try:
        with open("/proc/self/cgroup") as lines:
            path = next((line.split(":", 2)[2].strip() for line in lines if line.startswith("0::")), None)
        if path is None:
            return None
        base = os.path.join("/sys/fs/cgroup", path.lstrip("/"))
        with open(os.path.join(base, "memory.max")) as f:
            limit = f.read().strip()
        if limit == "max":
            return None
        with open(os.path.join(base, "memory.current")) as f:
            return max(0, int(limit) - int(f.read().strip()))
    except (OSError, ValueError):
        return None


def available_bytes() -> int:
    """The memory this process can still get: the least of MemAvailable, the RLIMIT_AS headroom and the
    cgroup's headroom (those that are set)."""
    limits = [_physical_available(), _address_space_headroom(), _cgroup_headroom()]
    return min(v for v in limits if v is not None)


def memory_budget_bytes() -> int:
    """Bytes one sparse build may use: :func:`set_memory_budget`'s value, else ``HEADSNE_MEMORY_BUDGET``, else
    ``BUDGET_SHARE`` of :func:`available_bytes`, read now (what is free changes as the process runs)."""
    if _override is not None:
        return _override
    configured = os.environ.get(ENV_VAR, "").strip()
    if configured:
        return parse_bytes(configured)
    return int(BUDGET_SHARE * available_bytes())


def entries_within(budget_bytes: int | None = None) -> int:
    """Kept entries a sparse P may have within ``budget_bytes`` (default :func:`memory_budget_bytes`), at
    ``SPARSE_ENTRY_BYTES`` each."""
    budget = memory_budget_bytes() if budget_bytes is None else int(budget_bytes)
    return max(0, budget // SPARSE_ENTRY_BYTES)


def within_budget(needed: int, what: str, instead: str) -> None:
    """``errors.MemoryBudgetError`` before ``needed`` bytes (``what`` needs them) are allocated past
    :func:`memory_budget_bytes`, naming what to use ``instead``."""
    budget = memory_budget_bytes()
    if needed > budget:
        raise MemoryBudgetError(
            f"{what} need {_size(needed)}, over the {_size(budget)} memory budget: use {instead}, or raise the "
            "budget (headsne_widget.budget.set_memory_budget or HEADSNE_MEMORY_BUDGET)",
            needed_bytes=needed,
        )


def _size(nbytes: int) -> str:
    """``nbytes`` for a reader: GiB from 1 GiB on, MiB below (a small budget read "0.00 GiB")."""
    return f"{nbytes / 2**30:.2f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:,.1f} MiB"

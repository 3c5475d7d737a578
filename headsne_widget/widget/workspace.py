"""n x n arrays by lease: one workspace per widget, every array given back explicitly, one ceiling.

A head click at long lengths needs large float32 arrays: the head's attention A (n x n) and P (m x m, m <= n
kept tokens), 256 MiB each at 8192 tokens. Every job that needs one (a run, the P built ahead for the
hovered head, the atlas) takes a :class:`Lease` from the widget's :class:`Workspace` and gives it back in a
``with`` block or a ``finally``; whoever holds the lease owns the array, and it is handed to nobody else
until released. The workspace holds at most ``slots`` arrays of ``n * n`` float32 (in use or idle), so a
widget's n x n memory never exceeds :attr:`Workspace.ceiling_bytes` = ``slots * 4 * n * n`` bytes, whatever
the sequence of clicks, hovers and atlas runs. Released arrays are kept for the next lease: a fresh 256 MiB
array is faulted in page by page on its first write, which a click would otherwise pay (35 ms to 1 s).

Who holds what (``MAX_ARRAYS`` = 7): a run holds its P and, while it builds P and its partners, A; new partners
(another ``edge_k``) hold A; the P built ahead for the hovered head holds its P and, while building, A; the
atlas holds one head's A and P. From ``SPARSE_MIN_TOKENS`` kept tokens on, the attention and hidden runs, the
partners, the P built ahead and the atlas take a sparse P and lease nothing (:mod:`.sparse_runs`): the workspace
makes no n x n array at those lengths, and the ceiling is O(n k) for k keys kept a row.
"""

from __future__ import annotations

import threading
from types import TracebackType

import numpy as np

__all__ = ["MAX_ARRAYS", "Lease", "OwnArray", "Workspace", "WorkspaceFullError"]

#: arrays a widget may hold at once: run (A, P), partners (A), hover prefetch (A, P), atlas (A, P)
MAX_ARRAYS = 7


class WorkspaceFullError(MemoryError):
    """Every array of the workspace is leased: a job asked for more than its share."""


class Lease:
    """One n x n float32 array of a :class:`Workspace`, owned by the holder until :meth:`release`."""

    def __init__(self, workspace: Workspace, buffer: np.ndarray) -> None:
        self._workspace: Workspace | None = workspace
        self._buffer = buffer

    def array(self, shape: tuple[int, int]) -> np.ndarray:
        """A C-contiguous float32 view of ``shape`` (at most n x n) on the leased memory (old values in it)."""
        if self._workspace is None:
            raise RuntimeError("this lease was released: its array belongs to someone else now")
        size = int(shape[0]) * int(shape[1])
        if size > self._buffer.size:
            raise ValueError(f"a lease holds {self._buffer.size} floats, {shape} needs {size}")
        return self._buffer[:size].reshape(shape)

    @property
    def released(self) -> bool:
        return self._workspace is None

    def release(self) -> None:
        """Give the array back (once; later calls do nothing). No view of it may be used afterwards."""
        workspace, self._workspace = self._workspace, None
        if workspace is not None:
            workspace._give_back(self._buffer)

    def __enter__(self) -> Lease:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.release()


class Workspace:
    """At most ``slots`` float32 arrays of ``n * n`` elements, leased and given back explicitly."""

    def __init__(self, n: int, slots: int = MAX_ARRAYS) -> None:
        self.n, self.slots = int(n), int(slots)
        self._lock = threading.Lock()
        self._idle: list[np.ndarray] = []
        self._leased = 0
        self._made = 0
        self._closed = False

    @property
    def ceiling_bytes(self) -> int:
        """The most bytes the workspace's arrays ever take together."""
        return self.slots * 4 * self.n * self.n

    @property
    def leased(self) -> int:
        """Arrays leased now."""
        with self._lock:
            return self._leased

    @property
    def made(self) -> int:
        """Arrays allocated so far (none while every run is sparse: long texts, :mod:`.sparse_runs`)."""
        with self._lock:
            return self._made

    def lease(self) -> Lease:
        """An array of n * n float32 (old values in it); WorkspaceFullError when ``slots`` are leased."""
        with self._lock:
            if self._leased >= self.slots:
                raise WorkspaceFullError(
                    f"all {self.slots} arrays of {self.n} x {self.n} are in use (a job leased more than its share)"
                )
            self._leased += 1
            buffer = self._idle.pop() if self._idle else None
            self._made += buffer is None
        if buffer is None:
            buffer = np.empty(self.n * self.n, dtype=np.float32)
        return Lease(self, buffer)

    def close(self) -> None:
        """Drop the idle arrays, and every leased one when it is given back (the widget is closed)."""
        with self._lock:
            self._closed = True
            self._idle.clear()

    def _give_back(self, buffer: np.ndarray) -> None:
        with self._lock:
            self._leased -= 1
            if not self._closed:
                self._idle.append(buffer)


class OwnArray:
    """A float32 array of a run's own, with a lease's interface: query-key mode's P, (2m) x (2m), larger than the
    workspace's n x n arrays (bounded by ``QUERY_KEY_MAX_TOKENS`` instead)."""

    def __init__(self, size: int) -> None:
        self._buffer: np.ndarray | None = np.empty(size, dtype=np.float32)

    def array(self, shape: tuple[int, int]) -> np.ndarray:
        if self._buffer is None:
            raise RuntimeError("this array was released")
        return self._buffer[: int(shape[0]) * int(shape[1])].reshape(shape)

    def release(self) -> None:
        self._buffer = None

    def __enter__(self) -> OwnArray:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

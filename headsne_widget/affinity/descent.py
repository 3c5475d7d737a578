"""pynndescent's nearest-neighbour descent in a process of its own, compiled ahead (issue 31: hidden mode's
approximate search, from 131072 tokens).

pynndescent compiles its numba code on its first search in a process: 35-45 s on 2 cores, for every new
kernel, since numba cannot cache its descent (it calls the distance through a dynamic global). Compiled in a
thread of the kernel, it held the GIL and a head change beside it took 80 s instead of 12. So the search runs
in one worker process (:func:`serve`, started on first use with this process's interpreter, kept for the
session), and :func:`warm_up` compiles it there ahead of the first search: the widget calls it when it
opens a text long enough for the approximate search, and the compile then takes a core of the machine for
about 40 s, never this process's GIL. A search asked for while it compiles waits for the compile.

The worker reads pickled requests on its stdin and writes pickled replies on its stdout; its prints go to
stderr. If it dies during a search (killed for memory, say), that search raises :class:`SearchWorkerError`;
a worker found dead between searches is replaced without a word. The kernel is never the process that dies.
Where no worker can be started at all, the search runs in this process, as before.
"""

from __future__ import annotations

import atexit
import os
import pickle
import signal
import subprocess
import sys
import threading
from typing import Any, BinaryIO

import numpy as np

__all__ = ["SearchWorkerError", "descend", "search", "warm_up"]

#: pynndescent's candidates a point per iteration (openTSNE: 60). At 65536 of a tiny Mistral's 64-dimensional
#: states (benchmarks/knn_recall.py): 7.7 s and recall@60 0.993 at 40, against 10.0 s and 0.996 at 60
MAX_CANDIDATES = 40
_WARM_POINTS = 3000  # a search this size compiles everything a large one runs (measured: the next is warm)
_LOCK = threading.Lock()  # one request at a time on the worker's pipes
#: the worker's start: this package from where this process has it (added to the path only if missing there,
#: so that no installed directory moves ahead of the standard library), then :func:`serve`
_BOOT = (
    "import sys; root = sys.argv[1]; root in sys.path or sys.path.insert(0, root); "
    "from headsne_widget.affinity.descent import serve; serve()"
)


class SearchWorkerError(RuntimeError):
    """The approximate search's worker process ended during a search (killed for memory, say)."""


def descend(X: np.ndarray, n_neighbors: int, seed: int) -> np.ndarray:
    """The (n, n_neighbors) neighbour graph of float32 points X by pynndescent (each point usually among its own),
    with openTSNE's trees and iterations for n points; -1 where fewer were found."""
    from pynndescent import NNDescent  # numba: compiled on the first call in a process

    n = X.shape[0]
    index = NNDescent(
        X, n_neighbors=n_neighbors, random_state=seed, low_memory=True, max_candidates=MAX_CANDIDATES,
        n_trees=5 + round(n**0.5 / 20), n_iters=max(5, round(np.log2(n))), compressed=True,
    )  # fmt: skip
    return np.asarray(index.neighbor_graph[0], dtype=np.int64)


def _warm_points() -> np.ndarray:
    return np.random.default_rng(0).normal(size=(_WARM_POINTS, 16)).astype(np.float32)


class _Worker:
    """The worker process and its two pipes."""

    def __init__(self) -> None:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self.process = subprocess.Popen(
            [sys.executable, "-c", _BOOT, root], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )  # fmt: skip

    def ask(self, request: dict[str, Any]) -> Any:
        """The worker's reply to ``request``; SearchWorkerError when it ended instead."""
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        try:
            pickle.dump(request, stdin, protocol=pickle.HIGHEST_PROTOCOL)
            stdin.flush()
            status, value = pickle.load(stdout)
        except (OSError, EOFError, pickle.UnpicklingError) as err:  # a broken or closed pipe, a cut reply
            code = self.process.wait()
            raise SearchWorkerError(
                f"the approximate neighbour search's worker process ended (exit code {code}"
                f"{': killed, out of memory?' if code == -9 else ''}); searching again starts a new one, and "
                f"headsne_widget.affinity.neighbours.settings.neighbours = 'exact' searches in this process"
            ) from err
        if status == "error":
            raise RuntimeError(f"the approximate neighbour search failed: {value}")
        return value

    def close(self) -> None:
        """End the worker now (at exit: it holds nothing to keep, and a compile would go on for 30 s or more)."""
        self.process.kill()
        self.process.wait()


_worker: _Worker | None = None


def _ask(request: dict[str, Any]) -> Any:
    """``request`` answered by the worker (a new one if there is none or it has ended since its last reply), or
    in this process where no worker can be started."""
    global _worker
    with _LOCK:
        if _worker is not None and _worker.process.poll() is not None:
            _worker = None  # ended while idle (killed for memory, say): its replacement answers
        if _worker is None:
            try:
                _worker = _Worker()
            except OSError:  # no interpreter to start here (an embedded Python, say)
                return _answer(request)
        try:
            return _worker.ask(request)
        except SearchWorkerError:
            _worker = None
            raise


def search(X: np.ndarray, n_neighbors: int, seed: int = 0) -> np.ndarray:
    """:func:`descend` of X (cast to float32) in the worker process."""
    return _ask(dict(X=np.ascontiguousarray(X, dtype=np.float32), n_neighbors=int(n_neighbors), seed=int(seed)))


def warm_up() -> threading.Thread:
    """Start the worker and compile pynndescent in it, in a daemon thread that waits on its reply (returned:
    ``join()`` it to wait); a search asked for meanwhile waits for the compile. Nothing where a worker is alive:
    every worker starts with a request, which compiles it."""

    def compile_ahead() -> None:
        if _worker is not None and _worker.process.poll() is None:
            return  # a live worker compiled (or is compiling) for the request that started it
        try:
            search(_warm_points(), 16)
        except RuntimeError:
            pass  # the search itself says it, if it happens again

    thread = threading.Thread(target=compile_ahead, name="headsne-descent-warm-up", daemon=True)
    thread.start()
    return thread


@atexit.register
def _close() -> None:
    if _worker is not None:
        _worker.close()


def _answer(request: dict[str, Any]) -> Any:
    return descend(request["X"], request["n_neighbors"], request["seed"])


def main(stdin: BinaryIO, stdout: BinaryIO) -> None:
    """The worker's loop: a reply a request, ("ok", graph) or ("error", message), until its input ends."""
    while True:
        try:
            request = pickle.load(stdin)
        except EOFError:
            return
        try:
            reply: tuple[str, Any] = ("ok", _answer(request))
        except Exception as err:  # any failure is the caller's to raise
            reply = ("error", f"{type(err).__name__}: {err}")
        pickle.dump(reply, stdout, protocol=pickle.HIGHEST_PROTOCOL)
        stdout.flush()


def serve() -> None:
    """The worker process: :func:`main` on stdin and the original stdout; anything printed goes to stderr. Ctrl-C
    in a terminal reaches the whole process group: the kernel's to handle, not the worker's."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    main(sys.stdin.buffer, replies)


if __name__ == "__main__":
    serve()

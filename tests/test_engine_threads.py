"""The exact engine's threads (issue 31, item 1): as many as the machine's cores less a setting, the passes serial or
in shares by measurement, and the same result whichever the engine takes and however many threads share the work."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest
from blas_counts import numpy_blas_threads

from headsne_widget import _parallel, tsne
from headsne_widget.embedding import engines, kernels


def random_P(n: int, seed: int = 0) -> np.ndarray:
    A = np.random.default_rng(seed).random((n, n)) ** 4
    P = A + A.T
    np.fill_diagonal(P, 0.0)
    return (P / P.sum()).astype(np.float32)


def test_the_threads_follow_the_cores_and_the_spare_cores_setting(machine, monkeypatch):
    """One thread per core the process may use (its CPU affinity; NUMBA_NUM_THREADS where set), less the cores the
    setting keeps free, at least one; a single thread means no pool at all."""
    machine(None)
    monkeypatch.setattr(_parallel.os, "sched_getaffinity", lambda pid: {0, 1, 2})
    _parallel.set_spare_cores(None)
    assert _parallel.threads() == 3 and _parallel.workers() is not None
    monkeypatch.setattr(_parallel.os, "sched_getaffinity", lambda pid: {5})
    _parallel.set_spare_cores(None)
    assert _parallel.threads() == 1 and _parallel.workers() is None
    machine(16)
    assert _parallel.threads() == 16
    machine(16, spare=1)
    assert _parallel.threads() == 15
    machine(2, spare=4)
    assert _parallel.threads() == 1 and _parallel.workers() is None
    monkeypatch.setenv(_parallel.SPARE_ENV, "2")
    machine(8)  # no count set: the environment's
    assert _parallel.threads() == 6


def test_shares_use_the_callers_thread_and_the_workers_and_raise_a_pieces_error(machine):
    """Every piece runs once; on several threads the caller takes pieces too and others take the rest; a piece's
    exception reaches the caller after the other pieces are done."""
    machine(3)
    seen: dict[int, int] = {}
    lock = threading.Lock()

    def piece(k: int) -> None:
        time.sleep(0.002)
        with lock:
            seen[k] = threading.get_ident()

    _parallel.shares(24, piece)
    assert sorted(seen) == list(range(24))
    assert threading.get_ident() in seen.values() and len(set(seen.values())) > 1

    done: list[int] = []

    def failing(k: int) -> None:
        if k == 3:
            raise ValueError("piece 3")
        time.sleep(0.001)
        done.append(k)

    with pytest.raises(ValueError, match="piece 3"):
        _parallel.shares(12, failing)
    assert sorted(done) == [k for k in range(12) if k != 3]


def run_of(P: np.ndarray, pooled: bool | None, iters: int = 40) -> tuple[np.ndarray, list]:
    """``iters`` iterations of an engine made to run serial (False), in shares (True) or to choose (None), with a
    KL every 10 as the schedule asks for it."""
    Y0 = np.random.default_rng(1).normal(scale=1e-2, size=(2, 2, P.shape[0])).astype(np.float32)
    eng = engines.NumbaEngine(P, Y0)
    if pooled is not None:
        eng.pooled = pooled
    kls = []
    for _ in range(iters // 10):
        kls.append(eng.forces(4.0, True))
        eng.update(0.5, 50.0)
        eng.steps(9, 4.0, 0.5, 50.0)
    return eng.embeddings().copy(), kls


@pytest.mark.parametrize("n", [300, 1030, 2051])
def test_serial_and_shares_give_the_same_bits_at_several_sizes(n, machine):
    """The passes serial (one compiled call) and in shares of the rows on 4 threads give the same embeddings and
    KLs, bit for bit, and so does an engine left to choose (which measures both ways on its first iterations)."""
    machine(4)
    P = random_P(n, seed=n)
    serial, pooled, chosen = run_of(P, False), run_of(P, True), run_of(P, None)
    for other in (pooled, chosen):
        np.testing.assert_array_equal(serial[0], other[0])
        np.testing.assert_array_equal(np.array(serial[1]), np.array(other[1]))


def test_the_result_does_not_depend_on_the_machines_thread_count(machine):
    """tsne gives the same bits on 1, 2 and 6 threads (the shares are taken by whichever thread is free)."""
    P = random_P(1100, seed=7)
    results = []
    for cores in (1, 2, 6):
        machine(cores)
        r = tsne(P, n_iter=120, seed=0, every=20, exaggeration_iters=60)
        results.append(r.embedding.tobytes() + np.float64(r.kl).tobytes())
    assert results[0] == results[1] == results[2]


def test_one_thread_or_a_small_P_runs_serial_without_measuring(machine, monkeypatch):
    """On one thread (one core, or every other core kept free), and below POOL_MIN_PAIRS, every pass runs serial
    in the caller's thread: the shares are never used."""

    def no_shares(*args):
        raise AssertionError("a pass in shares")

    monkeypatch.setattr(kernels, "forces", no_shares)
    big, small = random_P(1100), random_P(300)
    for cores, spare, P in ((1, None, big), (4, 3, big), (4, None, small)):
        machine(cores, spare)
        eng = engines.NumbaEngine(P, np.zeros((1, 2, P.shape[0]), np.float32) + np.arange(P.shape[0]) * 1e-3)
        eng.steps(30, 4.0, 0.5, 50.0)
        assert eng.pooled is False


def slow(fn):
    """``fn`` after a sleep of 5 ms: a way of stepping made slower, as by a busy core."""

    def wrapped(*args):
        time.sleep(0.005)
        return fn(*args)

    return wrapped


KERNELS = {"forces": kernels.forces, "steps_serial": kernels.steps_serial}  # the passes in shares, the serial steps


def slow_way(monkeypatch, name: str) -> None:
    """Only the kernel ``name`` ("forces": the passes in shares; "steps_serial": the serial steps) made slow."""
    for other, fn in KERNELS.items():
        monkeypatch.setattr(kernels, other, slow(fn) if other == name else fn)


def engine_of_1100() -> engines.NumbaEngine:
    """An engine on 2 threads for a random P of 1100 points (big enough to be measured)."""
    P = random_P(1100)
    return engines.NumbaEngine(P, np.random.default_rng(0).normal(scale=1e-2, size=(1, 2, 1100)).astype(np.float32))


def test_the_engine_takes_the_faster_way(machine, monkeypatch):
    """Undecided, the engine times its first iterations both ways and keeps the faster: here the passes in shares
    are made slower (a sleep of 5 ms each), then the serial steps are; and it measures again every
    ``RECHECK_ITERS`` (250) iterations, so that a change of load during a run changes the choice."""
    machine(2)
    slow_way(monkeypatch, "forces")
    eng = engine_of_1100()
    eng.steps(30, 4.0, 0.5, 50.0)
    assert eng.pooled is False
    slow_way(monkeypatch, "steps_serial")
    eng = engine_of_1100()
    for _ in range(30):  # one iteration a call: the measure spans calls
        eng.steps(1, 4.0, 0.5, 50.0)
    assert eng.pooled is True
    slow_way(monkeypatch, "forces")  # the load changes during the run: measured again every 250 iterations
    for _ in range(30):
        eng.steps(10, 4.0, 0.5, 50.0)
    assert eng.pooled is False


def test_blas_takes_one_thread_inside_the_blocks_and_its_count_is_back_after_the_last():
    """Overlapping blocks in two threads (a click's P and the previous run's partners): numpy's BLAS stays on one
    thread until the last one ends, then has the count the user had before, whichever block ended first. In a
    fresh process (no other test's widget job running a block of its own meanwhile)."""
    import subprocess
    import sys

    code = "import test_engine_threads as t; t.overlapping_blocks()"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("blocks: ok")


def overlapping_blocks() -> None:
    """The checks of the test above, in the process that runs this."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=2, user_api="blas")  # a user's count, above one whatever the machine's cores
    before = numpy_blas_threads()
    assert before == [2] * len(before) and before, f"numpy's BLAS as threadpoolctl reads it: {before}"
    entered, release_a, seen = threading.Event(), threading.Event(), []

    def a() -> None:
        with _parallel.one_blas_thread():
            entered.set()
            release_a.wait(10)

    thread = threading.Thread(target=a)
    thread.start()
    assert entered.wait(10)
    with _parallel.one_blas_thread():
        seen.append(numpy_blas_threads())
        release_a.set()
        thread.join(10)
        seen.append(numpy_blas_threads())  # a's block ended first: still one thread
    assert seen == [[1] * len(before)] * 2, seen
    assert numpy_blas_threads() == before
    with pytest.raises(RuntimeError, match="a step failed"), _parallel.one_blas_thread():
        raise RuntimeError("a step failed")
    assert numpy_blas_threads() == before
    print("blocks: ok")


def test_the_sparse_engine_does_not_depend_on_the_machines_thread_count(machine):
    """A sparse P's t-SNE (attraction over P's non-zeros in shares of rows, the grid's far field beside the near
    field's pieces, P's points reordered) gives the same bits on 1, 2 and 6 threads, through early exaggeration's
    trimmed grid and the split grid with its near field after it (4800 points, 400 iterations)."""
    from headsne_widget.affinity.knn import knn_gaussian_affinities

    rng = np.random.default_rng(3)
    centres = rng.normal(0, 6, size=(12, 8))
    X = centres[rng.integers(0, 12, 4800)] + rng.normal(size=(4800, 8))
    P = knn_gaussian_affinities(X, perplexity=15, neighbours="exact")
    results = []
    for cores in (1, 2, 6):
        machine(cores)
        r = tsne(P, n_iter=400, seed=0, every=100)
        results.append(r.embedding.tobytes() + np.float64(r.kl).tobytes())
    assert results[0] == results[1] == results[2]


@pytest.mark.parametrize(
    ("first", "given", "seen"),
    [("headsne_widget", None, "PASSIVE"), ("torch", None, None), ("headsne_widget", "ACTIVE", "ACTIVE")],
)
def test_torchs_threads_are_told_to_sleep_when_the_package_comes_first(first, given, seen):
    """Imported before torch, the package sets OMP_WAIT_POLICY=PASSIVE for torch's OpenMP threads to read (they
    then leave the cores to the package's threads between torch's operations); after torch, or where the user set
    it, it leaves the setting alone (torch has read it already; it is the user's)."""
    import subprocess
    import sys

    env = {key: value for key, value in os.environ.items() if key != "OMP_WAIT_POLICY"}
    if given is not None:
        env["OMP_WAIT_POLICY"] = given
    code = (
        f"import {first}, headsne_widget, torch, os\n"
        "from headsne_widget._parallel import torch_threads_sleep\n"
        "print(os.environ.get('OMP_WAIT_POLICY'), torch_threads_sleep())"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == [str(seen), str(seen == "PASSIVE")]

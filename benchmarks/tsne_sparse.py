"""t-SNE of a sparse P (issue 21): ours (exact attraction, interpolated repulsion) against openTSNE's FFT method,
on the same sparse P; and where the exact dense engine stops being the faster one.

P is a synthetic causal attention head, softmax over the keys j <= i of rank-16 logits q_i . k_j at scale 6
(peaked rows: about 98.6% of a row's mass on its 64 largest keys at 8192 tokens), of which each row keeps its 64
largest entries (the issue's "top-64-per-row" P), built in blocks of 1024 rows (never n x n), symmetrised,
zero diagonal, sum 1 (``sparse_attention_affinities``). Both libraries optimise that P from the same start
N(0, 1e-4 I), with the same schedule (exaggeration 12 for the first quarter, momentum 0.5 then 0.8) and the same
learning rate (ours: ``"auto"`` = n / 12; openTSNE: 4 times that, as its gradient has no factor 4). Each run is a
fresh child process (its imports and compilation untimed; ours' time includes its final exact KL), runs are
interleaved (ours, each ``--trees`` version, openTSNE, ours, ...; repeat r starts every library from seed r's
start, so KLs pair up), and every result is scored in this process with the exact KL over all pairs
(``kl_divergence`` of a sparse P: O(n^2) time in shares, O(n) memory). Each row prints the load average.

    python benchmarks/tsne_sparse.py                      # 8192, 16384, 65536 (1000 iterations each)
    python benchmarks/tsne_sparse.py --sizes 65536 131072 --repeats 3 --cache /tmp/tsne-sparse-P
    python benchmarks/tsne_sparse.py --sizes 65536 --trees before=/tmp/engine-base --repeats 3
    python benchmarks/tsne_sparse.py --kind knn --sizes 65536 --repeats 3
    python benchmarks/tsne_sparse.py --profile --sizes 65536   # where one run of ours spends its time
    python benchmarks/tsne_sparse.py --switch             # exact dense engine vs ours at 2048 .. 8192

``--kind minilm``: a real head instead of the synthetic one: the bundled MiniLM (layer 1, head 2, as in
``tsne_speed.py``) on the thesis abstract cut to its 512 positions, each row's 64 largest keys
(``largest_entries``-like, the issue's top-64 P), tiled block-diagonally to n points (the text repeated, each
copy attending within itself, as a 512-position model reads a long text in chunks), then symmetrised as above.
``--kind knn``: hidden mode's P, ``knn_gaussian_affinities`` (perplexity 30, 90 neighbours, the exact search) of
the layer-1 hidden states of the tiny windowed Mistral of ``knn_recall.py`` on seeded random tokens.
``--cache DIR`` keeps each P built (the synthetic P takes some 2 minutes at 65536, 6 at 131072).
``--trees NAME=PATH``: ours at another version of the package (a ``git clone`` of an earlier commit), run with
``PYTHONPATH=PATH``, interleaved with the others. ``--profile``: one run of ours with each compiled kernel's CPU
time per iteration (thread CPU time, summed over threads).

``--switch`` runs, at each n, the exact engine on the head's full dense P and ours on its top-64 sparse P, and
scores both embeddings with the exact KL against the full P (what the sparse P gives up is in that KL too).

Results: ``docs/benchmarks.md`` (the sparse engine's row) and ``docs/benchmarks-tsne.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

#: the OpenMP wait policy this script was started with: openTSNE's runs get it, not the one ``import headsne_widget``
#: sets for torch (``PASSIVE``, which slowed openTSNE's FFT iterations by 8-18 % at 65536 points)
USERS_OMP_WAIT_POLICY = os.environ.get("OMP_WAIT_POLICY")
EXAGGERATION = 12.0


def head_rows(n: int, keys: int = 64, rank: int = 16, scale: float = 6.0, seed: int = 0, block: int = 1024):
    """The ``keys`` largest entries of each row of the synthetic causal head (CSR, float64), and, for n <= 8192,
    nothing else; built in blocks of rows."""
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(n, rank)).astype(np.float32)
    k = rng.normal(size=(n, rank)).astype(np.float32)
    indptr, cols, vals = [0], [], []
    for lo in range(0, n, block):
        hi = min(lo + block, n)
        A = dense_rows(q, k, lo, hi, scale)
        kk = min(keys, hi)
        top = np.argpartition(-A, kk - 1, axis=1)[:, :kk]
        top.sort(axis=1)
        v = np.take_along_axis(A, top, axis=1)
        keep = v > 0
        for r in range(hi - lo):
            c = top[r][keep[r]]
            cols.append(c)
            vals.append(v[r][keep[r]])
            indptr.append(indptr[-1] + len(c))
    data = np.concatenate(vals).astype(np.float64)
    return sp.csr_matrix((data, np.concatenate(cols), np.asarray(indptr)), shape=(n, n))


def dense_rows(q: np.ndarray, k: np.ndarray, lo: int, hi: int, scale: float) -> np.ndarray:
    """Rows lo .. hi - 1 of the causal softmax head (float32, keys 0 .. hi - 1)."""
    A = q[lo:hi] @ k[:hi].T * np.float32(scale / np.sqrt(q.shape[1]))
    A[np.arange(hi - lo)[:, None] < (np.arange(hi)[None, :] - lo)] = -np.inf
    A -= A.max(axis=1, keepdims=True)
    np.exp(A, out=A)
    A /= A.sum(axis=1, keepdims=True)
    return A


def dense_head(n: int, rank: int = 16, scale: float = 6.0, seed: int = 0) -> np.ndarray:
    """The whole head (n, n) float32, for the switch table (n <= 8192)."""
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(n, rank)).astype(np.float32)
    k = rng.normal(size=(n, rank)).astype(np.float32)
    A = np.zeros((n, n), np.float32)
    for lo in range(0, n, 1024):
        hi = min(lo + 1024, n)
        A[lo:hi, :hi] = dense_rows(q, k, lo, hi, scale)
    return A


def minilm_rows(n: int, keys: int = 64, layer: int = 1, head: int = 2) -> sp.csr_matrix:
    """Each row's ``keys`` largest entries of a real MiniLM head at 512 tokens, tiled block-diagonally to n rows."""
    import warnings

    from headsne_widget import extract
    from headsne_widget.texts import TSNE_ABSTRACT

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the truncation warning is intended here
        A = extract(" ".join([TSNE_ABSTRACT] * 8), max_tokens=512, device="cpu").attentions[layer, head]
    A = np.asarray(A, dtype=np.float64)
    m = A.shape[0]
    top = np.argpartition(-A, keys - 1, axis=1)[:, :keys]
    rows = np.repeat(np.arange(m), keys)
    block = sp.csr_matrix((A[rows, top.ravel()], (rows, top.ravel())), shape=(m, m))
    block.eliminate_zeros()
    copies = -(-n // m)
    return sp.csr_matrix(sp.kron(sp.identity(copies, format="csr"), block, format="csr")[:n, :n])


def knn_P(n: int) -> sp.csr_matrix:
    """Hidden mode's P of the tiny windowed Mistral's layer-1 states (``knn_recall.tiny_states``), perplexity 30."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from knn_recall import tiny_states

    from headsne_widget.affinity.knn import knn_gaussian_affinities

    return sp.csr_matrix(knn_gaussian_affinities(tiny_states(n, 1), perplexity=30.0, neighbours="exact"))


def sparse_P(n: int, kind: str = "synthetic", cache: str | None = None) -> tuple[sp.csr_matrix, float]:
    """The P of ``kind`` at n points and the mass its rows keep (1 for the kNN P), from ``cache`` where it is there."""
    from headsne_widget.affinity.sparse import sparse_attention_affinities

    path = Path(cache, f"P_{kind}_{n}.npz") if cache else None
    if path is not None and path.exists():
        with np.load(path) as saved:
            P = sp.csr_matrix((saved["data"], saved["indices"], saved["indptr"]), shape=tuple(saved["shape"]))
            return P, float(saved["mass"]) if "mass" in saved else float("nan")
    if kind == "knn":
        P, mass = knn_P(n), 1.0
    else:
        P, mass = sparse_attention_affinities(minilm_rows(n) if kind == "minilm" else head_rows(n))
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        P = sp.csr_matrix(P)
        np.savez(path, data=P.data, indices=P.indices, indptr=P.indptr, shape=np.array(P.shape), mass=mass)
    return P, mass


def initial(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(0.0, 1e-2, size=(n, 2))


def run_ours(P, n_iter: int, seed: int) -> np.ndarray:
    from headsne_widget.embedding.sparse_engine import optimize

    Y = None
    for _, Y, _, _ in optimize(  # noqa: B007 - the last Y is the result
        P, n_iter=n_iter, learning_rate="auto", early_exaggeration=EXAGGERATION, exaggeration_iters=n_iter // 4,
        momentum=(0.5, 0.8), init=initial(P.shape[0], seed), seed=None, restarts=1, device="cpu", every=n_iter,
        dtype="float32",
    ):  # fmt: skip
        pass
    assert Y is not None
    return np.ascontiguousarray(Y[0].T, dtype=np.float64)


def run_dense(P: np.ndarray, n_iter: int, seed: int) -> np.ndarray:
    from headsne_widget.embedding.tsne import tsne

    init = initial(P.shape[0], seed)
    return tsne(P, n_iter=n_iter, exaggeration_iters=n_iter // 4, init=init, every=n_iter, device="cpu").embedding


def run_opentsne(P, n_iter: int, seed: int, n_jobs: int) -> np.ndarray:
    from openTSNE import TSNEEmbedding
    from openTSNE.affinity import PrecomputedAffinities

    n = P.shape[0]
    lr = 4 * max(n / EXAGGERATION, 5.0)
    affinities = PrecomputedAffinities(sp.csr_matrix(P, dtype=np.float64), normalize=False)
    emb = TSNEEmbedding(
        initial(n, seed), affinities, negative_gradient_method="fft", n_jobs=n_jobs, random_state=seed, verbose=False
    )
    emb = emb.optimize(n_iter // 4, exaggeration=EXAGGERATION, momentum=0.5, learning_rate=lr)
    emb = emb.optimize(n_iter - n_iter // 4, exaggeration=1.0, momentum=0.8, learning_rate=lr)
    return np.asarray(emb)


def child(args: argparse.Namespace) -> None:
    """One timed run in this process (``--child``): P from ``--P``, the embedding to ``--out``, times as JSON."""
    P = sp.load_npz(args.P).tocsr()
    if args.child == "ours":
        small = P[:2048, :2048]
        run_ours(small / small.sum(), 20, 0)  # compile, or load numba's cache, before timing
    t0, c0 = time.perf_counter(), time.process_time()
    Y = (
        run_ours(P, args.n_iter, args.seed)
        if args.child == "ours"
        else run_opentsne(P, args.n_iter, args.seed, args.n_jobs)
    )
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    np.save(args.out, Y)
    print(json.dumps({"wall": wall, "cpu": cpu, "load": os.getloadavg()[0]}))


def timed_run(name: str, tree: str | None, P_path: str, n_iter: int, seed: int, n_jobs: int) -> dict:
    """A run of ``name`` ("ours" or "openTSNE") in a fresh process, ours from ``tree`` (PYTHONPATH) if given."""
    env = dict(os.environ, **({"PYTHONPATH": tree} if tree else {}))
    if name == "openTSNE":  # the peer as it runs on its own
        env.pop("OMP_WAIT_POLICY", None)
        if USERS_OMP_WAIT_POLICY is not None:
            env["OMP_WAIT_POLICY"] = USERS_OMP_WAIT_POLICY
    with tempfile.TemporaryDirectory() as directory:
        out = str(Path(directory, "Y.npy"))
        cmd = [sys.executable, __file__, "--child", "ours" if name != "openTSNE" else "openTSNE", "--P", P_path,
               "--n-iter", str(n_iter), "--seed", str(seed), "--out", out, "--n-jobs", str(n_jobs)]  # fmt: skip
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if done.returncode:
            raise RuntimeError(f"{name} failed: {done.stderr[-2000:]}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        result["Y"] = np.load(out)
    return result


def table(args: argparse.Namespace, sizes: list[int], iters: dict[int, int]) -> None:
    from headsne_widget.embedding.sparse_engine import exact_kl

    names = {"ours": None, **dict(t.split("=", 1) for t in args.trees), "openTSNE": None}
    with tempfile.TemporaryDirectory() as directory:
        for n in sizes:
            t0 = time.perf_counter()
            P, mass = sparse_P(n, args.kind, args.cache)
            built = time.perf_counter() - t0
            P_path = str(Path(directory, f"P_{n}.npz"))
            sp.save_npz(P_path, P)
            n_iter = iters.get(n, 1000)
            results: dict[str, list[dict]] = {name: [] for name in names}
            for rep in range(args.repeats):  # interleaved: ours, the other trees, openTSNE, ours, ...
                for name, tree in names.items():
                    r = timed_run(name, tree, P_path, n_iter, rep, args.n_jobs)
                    r["kl"], r["s"] = exact_kl(P, r.pop("Y")), r["wall"] * 1000 / n_iter
                    results[name].append(r)
                    print(f"#   n={n} {name} repeat {rep}: {r['s']:.2f} s / 1000 it (CPU {r['cpu']:.1f} s), "
                          f"KL {r['kl']:.4f}, load {r['load']:.1f}", flush=True)  # fmt: skip
            report(n, P, mass, n_iter, results, built=built, n_jobs=args.n_jobs)


def report(n: int, P, mass: float, n_iter: int, results: dict[str, list[dict]], *, built: float, n_jobs: int) -> None:
    """The rows of one size: best (median) seconds per 1000 iterations, exact KL (median; paired against openTSNE's
    repeat by repeat), ratio openTSNE / each (best over best, median over median)."""
    print(f"{'n':>6} {'nnz/row':>7} {'mass':>6} {'library':<24} {'iters':>5} {'rep':>3} {'s / 1000 it':>15} "
          f"{'exact KL':>9} {'KL - openTSNE':>14} {'speed-up':>11} {'load':>9}")  # fmt: skip
    theirs = results["openTSNE"]
    for name, runs in results.items():
        s = [r["s"] for r in runs]
        kls = [r["kl"] for r in runs]
        label = f"openTSNE fft n_jobs={n_jobs}" if name == "openTSNE" else name
        paired = "" if name == "openTSNE" else f"{max(a - b['kl'] for a, b in zip(kls, theirs)):+.4f} max"
        ratio = (
            ""
            if name == "openTSNE"
            else (
                f"{min(r['s'] for r in theirs) / min(s):.2f}/{np.median([r['s'] for r in theirs]) / np.median(s):.2f}x"
            )
        )
        loads = [r["load"] for r in runs]
        print(f"{n:>6} {P.nnz / n:>7.1f} {mass:>6.3f} {label:<24} {n_iter:>5} {len(runs):>3} "
              f"{min(s):>7.2f} ({np.median(s):.2f}) {np.median(kls):>9.4f} {paired:>14} {ratio:>11} "
              f"{min(loads):.1f}-{max(loads):.1f}", flush=True)  # fmt: skip
    print(f"#   (P built in {built:.1f} s; seconds: best (median) of the repeats; KL: median, and the largest of ours "
          "less openTSNE's at the same start; speed-up: best/best and median/median; load: 1-minute load average "
          "after each run)", flush=True)  # fmt: skip


def profile(args: argparse.Namespace, n: int) -> None:
    """One run of ours with each compiled kernel's CPU time (thread CPU time, all threads) per iteration."""
    import collections
    import functools
    import importlib

    from headsne_widget.embedding import interpolation

    spent: dict[str, float] = collections.defaultdict(float)

    def wrap(module, name: str) -> None:
        kernel = getattr(module, name)

        @functools.wraps(kernel)
        def timed(*a, **k):
            t = time.thread_time()
            try:
                return kernel(*a, **k)
            finally:
                spent[name] += time.thread_time() - t

        setattr(module, name, timed)

    kernels = ("attraction_part", "near_part", "locate", "spread", "gather_part", "cell_sort", "cell_counts",
               "near_pairs", "exact_z_part", "kl_part", "nodes_from_points", "outside_part")  # fmt: skip
    for module_name in ("interpolation_kernels", "near_kernels"):  # (the latter from eb79f26 on)
        try:
            module = importlib.import_module(f"headsne_widget.embedding.{module_name}")
        except ImportError:
            continue
        for name in kernels:
            if hasattr(module, name):
                wrap(module, name)
    wrap(interpolation, "_convolve")
    wrap(interpolation.Repulsion, "_plan")
    P = sparse_P(n, args.kind, args.cache)[0]
    small = P[:2048, :2048]
    run_ours(small / small.sum(), 20, 0)
    spent.clear()
    n_iter = args.iters[0] if args.iters else 1000
    t0, c0 = time.perf_counter(), time.process_time()
    run_ours(P, n_iter, 0)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"n={n}, {P.nnz} non-zeros, {n_iter} iterations: {wall * 1000 / n_iter:.1f} ms an iteration, "
          f"CPU {cpu * 1000 / n_iter:.1f} ms, load {os.getloadavg()[0]:.1f}")  # fmt: skip
    for name, seconds in sorted(spent.items(), key=lambda item: -item[1]):
        print(f"  {name:<18} {seconds * 1000 / n_iter:7.2f} ms an iteration (CPU)")


def switch(sizes: list[int], repeats: int) -> None:
    """Exact engine on the full dense P against ours on its top-64 sparse P, both scored on the full P."""
    from headsne_widget import attention_affinities
    from headsne_widget.affinity.sparse import sparse_attention_affinities
    from headsne_widget.embedding.tsne import kl_divergence, warmup

    warmup()
    run_ours(sparse_P(512)[0], 20, 0)
    print(f"{'n':>6} {'engine':<28} {'s / 1000 it':>11} {'KL(full P)':>10} {'KL(own P)':>9}", flush=True)
    for n in sizes:
        A = dense_head(n)
        full = np.asarray(attention_affinities(A, dtype=np.float32))
        P = sparse_attention_affinities(head_rows(n))[0]
        rows: dict[str, tuple[list[float], list[float], list[float]]] = {"exact": ([], [], []), "ours": ([], [], [])}
        for rep in range(repeats):
            for name in rows:
                t0 = time.perf_counter()
                Y = run_dense(full, 1000, rep) if name == "exact" else run_ours(P, 1000, rep)
                rows[name][0].append(time.perf_counter() - t0)
                rows[name][1].append(kl_divergence(full, Y))
                rows[name][2].append(kl_divergence(full if name == "exact" else P, Y))
        for name, (times, kl_full, kl_own) in rows.items():
            label = "exact, dense P" if name == "exact" else "ours, top-64 sparse P"
            print(
                f"{n:>6} {label:<28} {min(times):>7.2f} ({np.median(times):.2f}) {np.median(kl_full):>10.4f} "
                f"{np.median(kl_own):>9.4f}",
                flush=True,
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=None)
    ap.add_argument("--iters", type=int, nargs="+", default=None, help="iterations per size (default 1000 each)")
    ap.add_argument("--repeats", type=int, default=1, help="interleaved runs of each library per size")
    ap.add_argument("--n-jobs", type=int, default=2, help="openTSNE's threads (ours uses the package's pool)")
    ap.add_argument("--kind", choices=("synthetic", "minilm", "knn"), default="synthetic", help="the P")
    ap.add_argument("--cache", default=None, help="a folder keeping each P built")
    ap.add_argument("--trees", nargs="*", default=[], metavar="NAME=PATH", help="ours at other versions too")
    ap.add_argument("--profile", action="store_true", help="one run of ours, its kernels' CPU time")
    ap.add_argument("--switch", action="store_true", help="exact dense engine vs ours at 2048 .. 8192")
    ap.add_argument("--child", choices=("ours", "openTSNE"), help=argparse.SUPPRESS)
    ap.add_argument("--P", help=argparse.SUPPRESS)
    ap.add_argument("--n-iter", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    if args.switch:
        switch(args.sizes or [2048, 4096, 8192], args.repeats)
        return
    sizes = args.sizes or [8192, 16384, 65536]
    if args.profile:
        profile(args, sizes[0])
        return
    table(args, sizes, dict(zip(sizes, args.iters or [1000] * len(sizes))))


if __name__ == "__main__":
    main()

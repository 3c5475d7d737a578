"""Speed and quality of our exact t-SNE against scikit-learn's exact t-SNE and openTSNE's Barnes-Hut.

Every library optimises the SAME P, from the same start, with the same schedule (1000 iterations,
exaggeration 12 for 250 of them, momentum 0.5 -> 0.8, the same learning rate), and every result is
scored with our exact ``kl_divergence``:

- ours: ``headsne_widget.embedding.tsne`` (fused compiled CPU kernels, float32), one run per seed;
- scikit-learn exact: ``sklearn.manifold._t_sne._gradient_descent`` on ``_kl_divergence`` with P
  in condensed form (``TSNE(metric="precomputed")`` would take distances, not P); convergence
  checks are disabled so that it runs all iterations. scikit-learn restarts its gains and momentum
  when exaggeration ends; that is its algorithm and is kept;
- openTSNE: ``TSNEEmbedding`` on ``PrecomputedAffinities(P)`` with ``negative_gradient_method="bh"``,
  learning rate times 4 (openTSNE's gradient has no factor 4, see scikit-learn's TSNE docs).

P comes from a real attention head of the bundled MiniLM (layer 1, head 2 by default) on the thesis
abstract ``headsne_widget.texts.TSNE_ABSTRACT``. For n <= 512 the abstract is repeated until it
fills n tokens and run through the model once (real attention of an n-token input). MiniLM has 512
positions, so for n > 512 the 512 x 512 attention matrix A is tiled block-wise, ``np.tile(A, (k, k))``
cut to n x n, i.e. the text repeated with every copy of a token attending to every copy of its keys,
and P = ``attention_affinities`` of that (symmetrised, zero diagonal, sum 1).

    python benchmarks/tsne_speed.py                       # n = 512 and 2048, 3 seeds
    python benchmarks/tsne_speed.py --sizes 512 --seeds 5
    python benchmarks/tsne_speed.py --sklearn-max-seeds 1 # scikit-learn takes ~90 s per run at 2048
    python benchmarks/tsne_speed.py --memory              # n = 4096, peak RSS of a fresh process
    python benchmarks/tsne_speed.py --learning-rates      # how learning_rate="auto" was chosen
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import openTSNE  # noqa: F401 - before the package: the peers' OpenMP runtime keeps the user's wait policy

N_ITER = 1000
EXAGGERATION = 12.0
EXAGGERATION_ITERS = 250
MODEL_POSITIONS = 512


def attention_P(n: int, layer: int = 1, head: int = 2) -> np.ndarray:
    """P (n x n) of one MiniLM attention head on the thesis abstract, as described in the module docstring."""
    from headsne_widget import attention_affinities, extract
    from headsne_widget.texts import TSNE_ABSTRACT

    m = min(n, MODEL_POSITIONS)
    text = " ".join([TSNE_ABSTRACT] * 8)  # about 1500 tokens, cut to m
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the truncation warning is intended here
        ext = extract(text, max_tokens=m, device="cpu")
    A = ext.attentions[layer, head].astype(np.float64)
    if n > m:
        k = -(-n // m)
        A = np.tile(A, (k, k))[:n, :n]
    return np.asarray(attention_affinities(A), dtype=np.float64)


def initial(n: int, seed: int) -> np.ndarray:
    """The start every library gets: N(0, 1e-4 I), as ``tsne(seed=seed)`` draws it."""
    return np.random.default_rng(seed).normal(0.0, 1e-2, size=(n, 2))


def run_ours(P: np.ndarray, seed: int, lr: float) -> np.ndarray:
    from headsne_widget.embedding.tsne import tsne

    return tsne(P, seed=seed, learning_rate=lr, n_iter=N_ITER, device="cpu").embedding


def run_sklearn(P: np.ndarray, seed: int, lr: float) -> np.ndarray:
    from scipy.spatial.distance import squareform
    from sklearn.manifold._t_sne import _gradient_descent, _kl_divergence

    n = P.shape[0]
    condensed = squareform(P, checks=False)
    common = dict(n_iter_check=50, n_iter_without_progress=10**9, learning_rate=lr, min_grad_norm=0.0, kwargs={})
    params, _, it = _gradient_descent(
        _kl_divergence,
        initial(n, seed).ravel(),
        0,
        EXAGGERATION_ITERS,
        momentum=0.5,
        args=[condensed * EXAGGERATION, 1, n, 2],
        **common,
    )
    params, _, _ = _gradient_descent(
        _kl_divergence,
        params,
        it + 1,
        N_ITER,
        momentum=0.8,
        args=[condensed, 1, n, 2],
        **common,
    )
    return params.reshape(n, 2)


def run_opentsne(P: np.ndarray, seed: int, lr: float) -> np.ndarray:
    import scipy.sparse as sp
    from openTSNE import TSNEEmbedding
    from openTSNE.affinity import PrecomputedAffinities

    affinities = PrecomputedAffinities(sp.csr_matrix(P), normalize=False)
    emb = TSNEEmbedding(
        initial(P.shape[0], seed), affinities, negative_gradient_method="bh", n_jobs=2, random_state=seed, verbose=False
    )
    emb = emb.optimize(EXAGGERATION_ITERS, exaggeration=EXAGGERATION, momentum=0.5, learning_rate=4 * lr)
    emb = emb.optimize(N_ITER - EXAGGERATION_ITERS, exaggeration=1.0, momentum=0.8, learning_rate=4 * lr)
    return np.asarray(emb)


RUNNERS = {"ours": run_ours, "sklearn-exact": run_sklearn, "openTSNE-BH": run_opentsne}


def speed(sizes: list[int], seeds: int, sklearn_max_seeds: dict[int, int], skip: set[str]) -> None:
    from headsne_widget.embedding.tsne import auto_learning_rate, kl_divergence, warmup

    warmup()
    for n in sizes:
        P = attention_P(n)
        lr = auto_learning_rate(n, EXAGGERATION)
        print(f"\nn = {n}: P from MiniLM layer 1 head 2, learning rate {lr:g}, {N_ITER} iterations")
        print(f"{'library':<15} {'runs':>4} {'s / 1000 it (median)':>21} {'min':>7} {'median KL':>10} {'KLs'}")
        medians = {}
        for name, runner in RUNNERS.items():
            if name in skip:
                continue
            k = min(seeds, sklearn_max_seeds.get(n, seeds)) if name == "sklearn-exact" else seeds
            times, kls = [], []
            for seed in range(k):
                t0 = time.perf_counter()
                Y = runner(P, seed, lr)
                times.append((time.perf_counter() - t0) * 1000 / N_ITER)
                kls.append(kl_divergence(P, Y))
            medians[name] = (float(np.median(times)), float(np.median(kls)))
            print(
                f"{name:<15} {k:>4} {np.median(times):>21.3f} {min(times):>7.3f} {np.median(kls):>10.4f} "
                + " ".join(f"{x:.4f}" for x in kls),
                flush=True,
            )
        ours_t, ours_kl = medians["ours"]
        for name, (t, kl) in medians.items():
            if name != "ours":
                print(f"  ours vs {name}: {t / ours_t:.1f}x faster, median KL {ours_kl - kl:+.4f}")


def memory(n: int) -> None:
    """Run ours at n in a fresh process (P from a file) and print that process's peak RSS.

    The peak is the child's VmHWM (/proc/self/status), which starts afresh at exec; ru_maxrss would
    carry over the parent's peak (the model and P) on Linux.
    """
    P = attention_P(n).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "P.npy"
        np.save(path, P)
        code = (
            "import sys, time, numpy as np\n"
            "def hwm():\n"
            "    line = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0]\n"
            "    return int(line.split()[1]) / 1024\n"
            "from headsne_widget.embedding.tsne import tsne, warmup\n"
            "warmup()\n"
            "P = np.load(sys.argv[1])\n"
            "base = hwm()\n"
            "t = time.perf_counter(); r = tsne(P, seed=0, device='cpu')\n"
            "print(f'n={P.shape[0]}: {time.perf_counter() - t:.1f} s, KL {r.kl:.4f}; peak RSS {hwm():.0f} MiB '\n"
            "      f'(Python + torch + numba + P: {base:.0f} MiB before the run)')\n"
        )
        subprocess.run([sys.executable, "-c", code, str(path)], check=True)


def learning_rates(sizes: list[int], seeds: int) -> None:
    """Median final exact KL per candidate learning rate (all seeds as one batched run)."""
    from headsne_widget.embedding.tsne import tsne

    candidates = {
        "5 (thesis)": lambda n: 5.0,
        "50": lambda n: 50.0,
        "200": lambda n: 200.0,
        "max(n/48, 50) (sklearn auto)": lambda n: max(n / EXAGGERATION / 4, 50.0),
        "n/12": lambda n: n / EXAGGERATION,
        "n/24": lambda n: n / EXAGGERATION / 2,
    }
    print(f"median (min..max) final KL over {seeds} seeds")
    for n in sizes:
        P = attention_P(n)
        cells = []
        for name, rule in candidates.items():
            res = tsne(P, seed=0, restarts=seeds, learning_rate=rule(n), n_iter=N_ITER, device="cpu", every=N_ITER)
            cells.append(f"{name}={rule(n):g}: {np.median(res.kls):.4f} ({res.kls.min():.4f}..{res.kls.max():.4f})")
        print(f"n = {n}:\n  " + "\n  ".join(cells), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[512, 2048])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument(
        "--sklearn-max-seeds", type=int, default=1, help="seeds for scikit-learn at n > 1024 (about 90 s each at 2048)"
    )
    ap.add_argument("--skip", nargs="*", default=[], choices=sorted(RUNNERS))
    ap.add_argument("--memory", action="store_true", help="run n = 4096 in a fresh process and print peak RSS")
    ap.add_argument("--learning-rates", action="store_true", help="compare learning-rate rules by median KL")
    args = ap.parse_args()
    if args.memory:
        memory(4096)
    elif args.learning_rates:
        learning_rates(args.sizes, args.seeds)
    else:
        big = {n: args.sklearn_max_seeds for n in args.sizes if n > 1024}
        speed(args.sizes, args.seeds, big, set(args.skip))


if __name__ == "__main__":
    main()

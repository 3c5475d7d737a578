"""Same seed, same map: a t-SNE gives the same bits whatever numba's disk cache held when its process started,
in whichever order the process first compiled the kernels, and on one core or two (issue 23, item 10)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import headsne_widget

# The child computes every result below in the order it is given and prints a digest of each. P is built in
# numpy and passed in the other dtype than the run's, so that no kernel but the t-SNE's (and the gradient's)
# is compiled: P then goes through the numpy checks, not the compiled census.
CHILD = r"""
import hashlib, json, os, sys

cores, order = int(sys.argv[1]), sys.argv[2].split(",")
os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:cores]))  # before the worker pool is made

import numpy as np
from headsne_widget.embedding.tsne import gradient, tsne


def random_P(n, dtype):
    A = np.random.default_rng(n).random((n, n)) ** 4
    P = A + A.T
    np.fill_diagonal(P, 0.0)
    return (P / P.sum()).astype(dtype)


def run(P, **kw):
    res = tsne(P, seed=0, exaggeration_iters=kw["n_iter"] // 2, **kw)
    return res.embeddings.tobytes() + res.kl_histories.tobytes()


def kl_and_gradient():  # the exact KL and gradient of a fixed embedding, in float64
    kl, grad = gradient(random_P(200, np.float32), np.random.default_rng(1).normal(size=(200, 2)))
    return np.float64(kl).tobytes() + grad.tobytes()


work = {
    "tsne32": lambda: run(random_P(200, np.float64), n_iter=60, every=20),
    "tsne64": lambda: run(random_P(200, np.float32), n_iter=200, every=20, dtype="float64"),
    "tsne32-shares": lambda: run(random_P(2048, np.float64), n_iter=16, every=8),
    "gradient64": kl_and_gradient,
}
print(json.dumps({name: hashlib.sha256(work[name]()).hexdigest() for name in order}))
"""

RESULTS = {
    "tsne64": "t-SNE in float64, 200 points (serial steps): embedding and KL history",
    "tsne32": "t-SNE in float32, 200 points (serial steps): embedding and KL history",
    "tsne32-shares": "t-SNE in float32, 2048 points (rows in shares on the worker threads): embedding and KLs",
    "gradient64": "exact KL and gradient of an embedding, float64",
}
TSNE_FIRST = list(RESULTS)
GRADIENT_FIRST = TSNE_FIRST[::-1]


def _child(cache: Path, cores: int, order: list[str]) -> dict[str, str]:
    package_root = str(Path(headsne_widget.__file__).resolve().parents[1])  # the code under test
    env = {
        **os.environ,
        "NUMBA_CACHE_DIR": str(cache),
        "PYTHONPATH": os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p),
    }
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(cores), ",".join(order)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_tsne_gives_the_same_bits_with_an_empty_or_a_warm_kernel_cache_on_one_or_two_cores(tmp_path):
    """Three processes, each computes the same four results (t-SNE embeddings and float64 KL histories, serial
    and in shares, and an exact gradient): two start from an empty numba cache of their own and compile the
    kernels, one t-SNE first (as the widget's warm-up does) on two cores, one the gradient first on one core;
    the third starts from the first one's warm cache on one core. Every result must be the same bits in all
    three. (A kernel without fastmath flags of its own took those of the kernel that first compiled it, and
    the cache kept that version: the gradient and float64 KLs differed between the two compiling processes.
    A kernel called from another ran, in a process that loads the cache, the caller's private copy of it
    rather than the code the compiling process ran.)"""
    cores = min(2, len(os.sched_getaffinity(0)))
    first = tmp_path / "cache-tsne-first"
    runs = {
        f"empty cache, t-SNE compiled first, {cores} cores": _child(first, cores, TSNE_FIRST),
        "empty cache, gradient compiled first, 1 core": _child(tmp_path / "cache-gradient-first", 1, GRADIENT_FIRST),
        "warm cache (of the first process), 1 core": _child(first, 1, TSNE_FIRST),
    }
    (reference_name, reference), *others = runs.items()
    differences = [
        f"{RESULTS[result]}: {name} differs from {reference_name}"
        for name, digests in others
        for result, digest in digests.items()
        if digest != reference[result]
    ]
    assert not differences, "\n".join(differences)

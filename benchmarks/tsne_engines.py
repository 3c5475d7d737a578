"""Our t-SNE engine against another commit's, side by side on this machine: the same P, each run in a fresh process.

The other side (``--against``, default ``bcc952d``, the first wave's engine: one numba ``prange`` pass, serial
below 2^20 pairs) is materialised with ``git archive`` into a temporary folder and imported from there; ours is
this checkout (or ``--ours COMMIT``, materialised the same way). Both get the very same float32 P, written once to
a ``.npy`` file:

- ``random``: P of a seeded random row-stochastic matrix (uniform entries, rows normalised), symmetrised with zero
  diagonal and sum 1 (as ``attention_affinities`` does), in float64 and rounded once to float32;
- ``peaked``: P of a causal attention head with peaked rows, softmax over j <= i of low-rank logits (scale 4), as
  ``tsne_scale.py``'s ``attention`` P but sharper.

Each timed run is ``tsne(P, n_iter=..., seed=0)`` in a new Python process, after an untimed ``tsne(P, n_iter=3,
every=2)`` in the same process (numba's kernels loaded from its disk cache, the worker threads started), so the
figure is the engine's, not the process start's; one untimed process per side first fills numba's cache. The two
sides alternate (A B A B ...) so that drifts of the machine's speed fall on both. At 8192 (``--big``) the runs are
shorter (``--big-iters``) and timed per iteration, from the first frame (iteration 50) to the last, with
``tsne_frames(every=50)`` (the same steps and KL passes as ``tsne``), so the one-off check of P (numpy passes in
bcc952d, about 1 s at 8192) is left out.

    python benchmarks/tsne_engines.py                        # 512, 2048, 8192 against bcc952d, 3 runs each
    python benchmarks/tsne_engines.py --sizes 512 2048 --runs 5 --kinds random
    python benchmarks/tsne_engines.py --against HEAD~3       # any commit
    python benchmarks/tsne_engines.py --against "$(git stash create)"   # the working tree against its own HEAD

``ratio`` is theirs / ours (above 1: ours faster), of the bests and of the medians. openTSNE's FFT method on the
same kind of P is in ``tsne_scale.py`` (it is 15-100 times slower than either engine, so it is not repeated here).
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

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, resource, sys, time
root, path, n_iter, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
sys.path.insert(0, root)
import numpy as np
import headsne_widget
assert headsne_widget.__file__.startswith(root), (headsne_widget.__file__, root)
from headsne_widget import tsne, tsne_frames
P = np.load(path)
t0 = time.perf_counter()
tsne(P, n_iter=3, every=2, seed=0, device="cpu")  # kernels from the cache, worker threads started
load = time.perf_counter() - t0
def cpu():
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime
if mode == "total":
    c0, t0 = cpu(), time.perf_counter()
    r = tsne(P, n_iter=n_iter, seed=0, device="cpu")
    seconds = time.perf_counter() - t0
    out = {"seconds": seconds, "per_iter": seconds / n_iter, "kl": r.kl, "cpu": cpu() - c0}
else:
    c0, t0 = cpu(), time.perf_counter()
    marks = {}
    for f in tsne_frames(P, n_iter=n_iter, seed=0, every=50, device="cpu"):
        marks[f.iteration] = (time.perf_counter(), f.kl)
    seconds = time.perf_counter() - t0
    (first, _), (last, kl) = marks[50], marks[n_iter]
    out = {"seconds": seconds, "per_iter": (last - first) / (n_iter - 50), "kl": kl, "cpu": cpu() - c0}
out["load"] = load
print(json.dumps(out))
"""


def random_P(n: int, seed: int = 0) -> np.ndarray:
    """Symmetrised P (float32) of a seeded random row-stochastic matrix."""
    A = np.random.default_rng(seed).random((n, n))
    A /= A.sum(axis=1, keepdims=True)
    return _symmetrise(A)


def peaked_P(n: int, rank: int = 16, scale: float = 4.0, seed: int = 0) -> np.ndarray:
    """Symmetrised P (float32) of a causal head with peaked rows: softmax over j <= i of low-rank logits."""
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(n, rank)), rng.normal(size=(n, rank))
    A = q @ k.T * (scale / np.sqrt(rank))
    A[np.triu_indices(n, 1)] = -np.inf
    A -= A.max(axis=1, keepdims=True)
    np.exp(A, out=A)
    A /= A.sum(axis=1, keepdims=True)
    return _symmetrise(A)


def _symmetrise(A: np.ndarray) -> np.ndarray:
    """(A + A^T) with zero diagonal, divided by its sum in float64, then rounded once to float32: exactly
    symmetric, as ``attention_affinities(A, dtype=np.float32)`` gives it."""
    A += A.T
    np.fill_diagonal(A, 0.0)
    A /= A.sum()
    return A.astype(np.float32)


def materialise(commit: str, into: Path) -> Path:
    """The package of ``commit`` (``git archive``) under ``into``; returns the folder to put on sys.path."""
    sha = subprocess.run(
        ["git", "rev-parse", "--verify", f"{commit}^{{commit}}"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    dest = into / sha[:12]
    if not (dest / "headsne_widget").is_dir():
        dest.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", sha, "headsne_widget"], cwd=ROOT, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest


def child(root: Path, path: Path, n_iter: int, mode: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(root), str(path), str(n_iter), mode], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"{root}: exit {done.returncode}\n{done.stderr[-3000:]}")
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "loadavg": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--against", default="bcc952d", help="the other side's commit (default bcc952d)")
    ap.add_argument("--ours", default=None, help="our side's commit (default: this checkout, as it is)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[512, 2048, 8192])
    ap.add_argument("--kinds", nargs="+", default=["random", "peaked"], choices=["random", "peaked"])
    ap.add_argument("--runs", type=int, default=3, help="timed runs per side, size and kind (best and median)")
    ap.add_argument("--n-iter", type=int, default=1000)
    ap.add_argument("--big", type=int, default=8192, help="from this n: --big-iters, per iteration from frame 50")
    ap.add_argument("--big-iters", type=int, default=150)
    ap.add_argument("--work", type=Path, default=None, help="keep the trees and P here (reused: numba's cache stays)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        ours = ROOT if args.ours is None else materialise(args.ours, work)
        theirs = materialise(args.against, work)
        sides = {"ours": ours, "theirs": theirs}
        print(f"ours:   {ours}\ntheirs: {theirs} ({args.against})", flush=True)
        makers = {"random": random_P, "peaked": peaked_P}
        rows = []
        for n in args.sizes:
            big = n >= args.big
            n_iter, mode = (args.big_iters, "frames") if big else (args.n_iter, "total")
            for kind in args.kinds:
                path = work / f"P-{kind}-{n}.npy"
                if not path.exists():
                    np.save(path, makers[kind](n))
                for root in sides.values():  # fills numba's cache (or loads it), untimed
                    child(root, path, 60 if big else n_iter, mode)
                got: dict[str, list[dict]] = {"ours": [], "theirs": []}
                for _ in range(args.runs):
                    for name, root in sides.items():  # A B A B ...
                        got[name].append(child(root, path, n_iter, mode))
                rows.append((n, kind, n_iter, mode, got))
                print_row(*rows[-1])
        print()
        print_table(rows)


def _stats(results: list[dict], key: str) -> tuple[float, float]:
    values = [r[key] for r in results]
    return min(values), float(np.median(values))


def print_row(n: int, kind: str, n_iter: int, mode: str, got: dict) -> None:
    for name, results in got.items():
        secs = " ".join(f"{r['seconds']:.3f}" for r in results)
        cpus = " ".join(f"{r['cpu']:.3f}" for r in results)
        per = " ".join(f"{1e3 * r['per_iter']:.2f}" for r in results)
        kls = " ".join(f"{r['kl']:.5f}" for r in results)
        load = " ".join(f"{r['loadavg']:.1f}" for r in results)
        print(f"  n={n} {kind} {name:<6} s: {secs}  cpu s: {cpus}  ms/it: {per}  KL: {kls}  load: {load}", flush=True)


def print_table(rows: list) -> None:
    head = (
        f"{'n':>5} {'P':<7} {'iters':>5} {'measure':<15} {'ours best/med':>15} {'theirs best/med':>16} "
        f"{'ratio best/med':>15} {'cpu s ours/theirs':>18} {'KL ours':>9} {'KL theirs':>9} {'load':>5}"
    )
    print(head)
    print("-" * len(head))
    for n, kind, n_iter, mode, got in rows:
        key, scale, fmt, measure = (
            ("per_iter", 1e3, ".2f", "ms / iteration") if mode == "frames" else ("seconds", 1.0, ".3f", "s / run")
        )
        ob, om = _stats(got["ours"], key)
        tb, tm = _stats(got["theirs"], key)
        oc, tc = _stats(got["ours"], "cpu")[0], _stats(got["theirs"], "cpu")[0]
        ours_kl = {round(r["kl"], 6) for r in got["ours"]}
        theirs_kl = {round(r["kl"], 6) for r in got["theirs"]}
        load = np.median([r["loadavg"] for r in got["ours"] + got["theirs"]])
        ratios = f"{tb / ob:.2f}x/{tm / om:.2f}x"
        cpus = f"{oc:.3f}/{tc:.3f}"
        print(
            f"{n:>5} {kind:<7} {n_iter:>5} {measure:<15} {scale * ob:>7{fmt}}/{scale * om:<7{fmt}} "
            f"{scale * tb:>8{fmt}}/{scale * tm:<7{fmt}} {ratios:>15} {cpus:>18} "
            f"{_one(ours_kl):>9} {_one(theirs_kl):>9} {load:>5.1f}"
        )
    print(
        "ratio = theirs / ours (above 1: ours faster); cpu s = the least CPU time of a timed call, all threads "
        "(8192: the whole call);\nKL = the final exact KL (the same every run, else 'varies'); load = median "
        "1-minute load average after the runs (2 cores)"
    )


def _one(kls: set) -> str:
    return f"{next(iter(kls)):.5f}" if len(kls) == 1 else "varies"


if __name__ == "__main__":
    started = time.perf_counter()
    main()
    print(f"({time.perf_counter() - started:.0f} s)")

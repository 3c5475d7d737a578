"""Our t-SNE engine against other commits', side by side on this machine: the same P, each run in a fresh process.

The other sides (``--against``, default ``bcc952d``, the first wave's engine: one numba ``prange`` pass, serial
below 2^20 pairs; and ``662f251``, the engine before issue 31's first item: serial below 2^25 pairs) are
materialised with ``git archive`` into a temporary folder and imported from there; ours is
this checkout (or ``--ours COMMIT``, materialised the same way). Both get the very same float32 P, written once to
a ``.npy`` file:

- ``random``: P of a seeded random row-stochastic matrix (uniform entries, rows normalised), symmetrised with zero
  diagonal and sum 1 (as ``attention_affinities`` does), in float64 and rounded once to float32;
- ``peaked``: P of a causal attention head with peaked rows, softmax over j <= i of low-rank logits (scale 4), as
  ``tsne_scale.py``'s ``attention`` P but sharper.

Each timed run is ``tsne(P, n_iter=..., seed=0)`` in a new Python process, after an untimed ``tsne(P, n_iter=3,
every=2)`` in the same process (numba's kernels loaded from its disk cache, the worker threads started), so the
figure is the engine's, not the process start's; one untimed process per side first fills numba's cache. The two
sides alternate (A B C A B C ...) so that drifts of the machine's speed fall on all. ``--per-iter`` (the default
sweep's mode) times every size per iteration, from the first frame (iteration 50) to the last, with
``tsne_frames(every=50)`` (the same steps and KL passes as ``tsne``; ``--iters-of-n`` picks the count), so the
one-off check of P (numpy passes in bcc952d, about 1 s at 8192) and our engine's choice between serial and shares
(made in iterations 1-49) are left out; the whole call's seconds are printed too. Otherwise, below ``--big`` the
whole ``tsne`` call is timed. ``--cpus 0`` pins every run to those cores (``os.sched_setaffinity``: one core), and
the 1-minute load average is printed before and after each size (prefer a machine whose load is below 0.5).

    python benchmarks/tsne_engines.py --per-iter --kinds random   # 256 .. 16384, ours vs bcc952d vs 662f251
    taskset -c 0 python benchmarks/tsne_engines.py --per-iter --kinds random --cpus 0    # the same on one core
    python benchmarks/tsne_engines.py --sizes 512 2048 --runs 5 --kinds random --against bcc952d
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


def child(root: Path, path: Path, n_iter: int, mode: str, cpus: list[int] | None = None) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(root), str(path), str(n_iter), mode],
        capture_output=True,
        text=True,
        preexec_fn=None if cpus is None else (lambda: os.sched_setaffinity(0, cpus)),
    )
    if done.returncode != 0:
        raise RuntimeError(f"{root}: exit {done.returncode}\n{done.stderr[-3000:]}")
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "loadavg": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--against", nargs="+", default=["bcc952d", "662f251"], help="the other sides' commits")
    ap.add_argument("--ours", default=None, help="our side's commit (default: this checkout, as it is)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 1024, 2048, 4096, 8192, 16384])
    ap.add_argument("--per-iter", action="store_true", help="every size per iteration from frame 50 (see above)")
    ap.add_argument("--cpus", type=int, nargs="+", default=None, help="pin the runs to these cores")
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
        sides = {"ours": ours, **{commit: materialise(commit, work) for commit in args.against}}
        for name, root in sides.items():
            print(f"{name:<8} {root}", flush=True)
        print(f"cores: {args.cpus or sorted(os.sched_getaffinity(0))}", flush=True)
        makers = {"random": random_P, "peaked": peaked_P}
        rows = []
        for n in args.sizes:
            big = n >= args.big or args.per_iter
            big_iters = iters_of_n(n) if args.per_iter else args.big_iters
            n_iter, mode = (big_iters, "frames") if big else (args.n_iter, "total")
            for kind in args.kinds:
                path = work / f"P-{kind}-{n}.npy"
                if not path.exists():
                    np.save(path, makers[kind](n))
                for root in sides.values():  # fills numba's cache (or loads it), untimed
                    child(root, path, 60 if big else n_iter, mode, args.cpus)
                got: dict[str, list[dict]] = {name: [] for name in sides}
                load_before = os.getloadavg()[0]
                for _ in range(args.runs):
                    for name, root in sides.items():  # A B C A B C ...
                        got[name].append(child(root, path, n_iter, mode, args.cpus))
                rows.append((n, kind, n_iter, mode, got, load_before))
                print_row(*rows[-1][:5])
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
        print(f"  n={n} {kind} {name:<8} s: {secs}  cpu s: {cpus}  ms/it: {per}  KL: {kls}  load: {load}", flush=True)


def iters_of_n(n: int) -> int:
    """Iterations of a ``--per-iter`` run at n points: 50 untimed, then 50 to 1000 timed (about 2e9 pairs)."""
    return 50 + 50 * max(1, min(20, int(2e9 / (n * n)) // 50))


def print_table(rows: list) -> None:
    names = list(rows[0][4])
    head = (
        f"{'n':>5} {'P':<7} {'iters':>5} {'measure':<9} "
        + " ".join(f"{name + ' best/med':>19}" for name in names)
        + " "
        + " ".join(f"{'x ' + name:>13}" for name in names[1:])
        + f" {'run s':>7} {'KL ours':>9} {'load':>9}"
    )
    print(head)
    print("-" * len(head))
    for n, kind, n_iter, mode, got, load_before in rows:
        per_iter = mode == "frames"
        key, scale, measure = ("per_iter", 1e3, "ms / it") if per_iter else ("seconds", 1.0, "s / run")
        fmt = ".3f"
        stats = {name: _stats(results, key) for name, results in got.items()}
        cells = " ".join(f"{scale * b:>9{fmt}}/{scale * m:<9{fmt}}" for b, m in stats.values())
        ob, om = stats["ours"]
        ratios = " ".join(f"{stats[name][0] / ob:>5.2f}/{stats[name][1] / om:<5.2f}x" for name in names[1:])
        whole = _stats(got["ours"], "seconds")[1]
        kl = _one({round(r["kl"], 6) for r in got["ours"]})
        load = f"{load_before:.2f}>{np.median([r['loadavg'] for rs in got.values() for r in rs]):.2f}"
        print(f"{n:>5} {kind:<7} {n_iter:>5} {measure:<9} {cells} {ratios} {whole:>7.2f} {kl:>9} {load:>9}")
    print(
        "best/med = best and median of the runs; x NAME = NAME's / ours, of the bests and of the medians (above 1: "
        "ours faster);\nrun s = ours' whole call, median; KL ours = its final exact KL (the same every run, else "
        "'varies'); load = 1-minute load average before the size's timed runs > median after each run"
    )


def _one(kls: set) -> str:
    return f"{next(iter(kls)):.5f}" if len(kls) == 1 else "varies"


if __name__ == "__main__":
    started = time.perf_counter()
    main()
    print(f"({time.perf_counter() - started:.0f} s)")

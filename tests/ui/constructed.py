"""A widget on a long text without a model: an ``Extraction`` whose arrays are built in the kernel (a random
grid, queries and keys of width 1, no run), and frames pushed from the kernel as a run would send them.
Shared by tests/ui/test_scatter_webgl.py and benchmarks/scatter_webgl.py.

The text is ``n`` words ``c<k>w<i>`` (k = i % 4, the word's cluster), a line break after every 37th; the
colouring is by cluster (categories a-d: d3's category10 blue, orange, green, red). ``frame_code`` puts
cluster k around a corner of the square (+-10, +-10): 0 top left, 1 top right, 2 bottom left, 3 bottom right.
"""

from __future__ import annotations

#: category10's first four colours (js/lib/colors.js), the clusters' in the page
CLUSTER_RGB = [(0x1F, 0x77, 0xB4), (0xFF, 0x7F, 0x0E), (0x2C, 0xA0, 0x2C), (0xD6, 0x27, 0x28)]


def widget_code(n: int, window: int = 64) -> str:
    """The cell that builds the constructed extraction of ``n`` tokens and shows ``w`` on it. Its heads attend
    uniformly to the keys within ``window`` tokens either side (a bidirectional sliding window), so that the head
    scores the widget folds from its queries and keys when it opens take n x window weights a head, not n^2."""
    return f"""
import numpy as np, torch
from headsne_widget import HeadSNE
from headsne_widget.capture.extraction import Extraction, HiddenStates
from headsne_widget.capture.layers import LayerAttention
from headsne_widget.capture.masks import capture_mask
from transformers.masking_utils import sliding_window_bidirectional_mask_function
from headsne_widget.capture.sources import CapturedAttention
N = {int(n)}
words = [f"c{{i % 4}}w{{i}}" for i in range(N)]
pieces, offsets, at = [], [], 0
for i, word in enumerate(words):
    offsets.append((at, at + len(word)))
    gap = "\\n" if i % 37 == 36 else " "
    pieces.append(word + gap)
    at += len(word) + 1
mask = capture_mask(1, N, N, mask_function=sliding_window_bidirectional_mask_function({int(window)}))
layers = [LayerAttention(query=torch.zeros(4, N, 1), key=torch.zeros(4, N, 1), mask=mask, scaling=1.0)
          for _ in range(2)]
rng = np.random.default_rng(0)
ex = Extraction("".join(pieces), words, np.arange(N), offsets, np.zeros(N, bool),
                max_attention=rng.random((2, 4, N), dtype=np.float32), model_name="constructed",
                attention_source=CapturedAttention(layers), states=HiddenStates(torch.zeros(3, N, 1)))
w = HeadSNE(ex, autostart=False)
w.color_by = ["abcd"[i % 4] for i in range(N)]
w
"""


#: the kernel's frame pusher: push(k) sends frame k (a run's, run id 1) as the run thread would
PUSH_CODE = """
CORNERS = np.array([[-10, 10], [10, 10], [-10, -10], [10, -10]], dtype=np.float32)
def frame(k, jitter=3.0):
    r = np.random.default_rng(k)
    return (CORNERS[np.arange(N) % 4] + jitter * (r.random((N, 2), dtype=np.float32) - 0.5)).astype(np.float32)
def push(k, state="done", jitter=3.0):
    with w.widget.hold_sync():
        w.widget.kept = list(range(N))
        w.widget.run_id = 1
        w.widget.iteration = k + 1
        w.widget.frame = frame(k, jitter)
        w.widget.state = state
"""

#: in the page: per cluster colour, the pixels of the scatter canvas within a tolerance of it and their centroid
CLUSTER_PIXELS_JS = """
(c, colours) => {
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  const k = c.width / c.getBoundingClientRect().width;  // device px per CSS px
  const out = colours.map(() => ({count: 0, x: 0, y: 0}));
  for (let i = 0; i < d.length; i += 4) {
    if (d[i + 3] < 250) continue;
    for (let j = 0; j < colours.length; j++) {
      const [r, g, b] = colours[j];
      if (Math.abs(d[i] - r) + Math.abs(d[i + 1] - g) + Math.abs(d[i + 2] - b) > 24) continue;
      const p = i / 4;
      out[j].count++; out[j].x += (p % c.width) + 0.5; out[j].y += Math.floor(p / c.width) + 0.5;
    }
  }
  return out.map(o => ({count: o.count, x: o.count ? o.x / o.count / k : null, y: o.count ? o.y / o.count / k : null}));
}
"""
